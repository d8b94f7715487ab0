// FFT: _fft_r2c, _fft_c2c, _fft_c2r (the primitives every torch.fft function decomposes into).
// stablehlo.fft transforms the 1 to 3 innermost dims: the requested dims are transposed to the end (in their
// order) and back. PyTorch's inverse transforms are unnormalized, while IFFT / IRFFT divide by n.
#include <algorithm>
#include <cmath>
#include <vector>

#include "lower/helpers.h"

namespace tpu::lower {
using hlo::FftType;

namespace {

// Applies `type` over `dims` of x (at most 3, the last one is the one RFFT halves / IRFFT restores to `last`).
Value fft_over(Builder& b, Value x, const Dims& dims, FftType type, int64_t last = -1) {
  const int64_t rank = x.type.rank();
  Dims perm, inv(rank), len;
  for (int64_t d = 0; d < rank; ++d)
    if (std::find(dims.begin(), dims.end(), d) == dims.end()) perm.push_back(d);
  for (int64_t d : dims) perm.push_back(d), len.push_back(x.type.dims[d]);
  if (type == FftType::IRFFT) len.back() = last;
  for (int64_t i = 0; i < rank; ++i) inv[perm[i]] = i;
  Value y = b.fft(b.transpose(x, perm), type, len);
  return b.transpose(y, inv);
}

// Splits dims into groups of at most 3, the last group ending with dims.back().
std::vector<Dims> groups(const Dims& dims) {
  std::vector<Dims> g;
  for (size_t end = dims.size(); end > 0;) {
    size_t start = end > 3 ? end - 3 : 0;
    g.insert(g.begin(), Dims(dims.begin() + start, dims.begin() + end));
    end = start;
  }
  return g;
}

Dims fft_dims(Ctx& c, int64_t rank) {
  Dims d;
  for (int64_t x : c.ints(1)) d.push_back(wrap_dim(x, rank));
  return d;
}

// Multiplies by the normalization (0: none, 1: 1/sqrt(n), 2: 1/n) times `undo` (n for a stablehlo inverse).
Value normalize(Builder& b, Value x, int64_t mode, double n, bool inverse) {
  double s = (mode == 1 ? 1 / std::sqrt(n) : mode == 2 ? 1 / n : 1) * (inverse ? n : 1);
  return s == 1 ? x : b.mul(x, scalar_like(b, s, x.type));
}

double signal_size(const TensorType& t, const Dims& dims) {
  double n = 1;
  for (int64_t d : dims) n *= t.dims[d];
  return n;
}

Values fft_c2c(Ctx& c) {
  Value x = c.v(0);
  Dims dims = fft_dims(c, x.type.rank());
  bool fwd = c.flag(3);
  if (dims.empty()) return {convert(c.b, x, c.out[0].dtype)};
  for (auto& g : groups(dims)) x = fft_over(c.b, x, g, fwd ? FftType::FFT : FftType::IFFT);
  return {normalize(c.b, x, c.i(2), signal_size(x.type, dims), !fwd)};
}

Values fft_r2c(Ctx& c) {
  Value x = c.v(0);
  Dims dims = fft_dims(c, x.type.rank());
  double n = signal_size(x.type, dims);
  auto g = groups(dims);
  if (c.flag(3)) {
    x = fft_over(c.b, x, g.back(), FftType::RFFT);
    g.pop_back();
  } else {
    x = convert(c.b, x, c.out[0].dtype);  // two-sided: a complex FFT of the real input
  }
  for (auto& d : g) x = fft_over(c.b, x, d, FftType::FFT);
  return {normalize(c.b, x, c.i(2), n, false)};
}

Values fft_c2r(Ctx& c) {
  Value x = c.v(0);
  Dims dims = fft_dims(c, x.type.rank());
  int64_t last = c.i(3);
  auto g = groups(dims);
  for (size_t i = 0; i + 1 < g.size(); ++i) x = fft_over(c.b, x, g[i], FftType::IFFT);
  x = fft_over(c.b, x, g.back(), FftType::IRFFT, last);  // (complex32 computes in complex64)
  return {convert(c.b, normalize(c.b, x, c.i(2), signal_size(x.type, dims), true), c.out[0].dtype)};
}

// conj of a complex tensor (real ones are their own conjugate): materializes the lazy conj bit of FFT results
Values conj_physical(Ctx& c) { return {conj_of(c.b, c.v(0))}; }

}  // namespace

static Register r({
    {"_conj_physical|_conj_physical.out|conj_physical.out", conj_physical},
    {"_fft_c2c|_fft_c2c.out", fft_c2c},
    {"_fft_r2c|_fft_r2c.out", fft_r2c},
    {"_fft_c2r|_fft_c2r.out", fft_c2r},
});

}  // namespace tpu::lower
