"""Meta kernels PyTorch lacks for ops the tpu backend lowers: the glue takes result shapes and dtypes from
Meta kernels. Checks only what decides the shapes; CPU's kernel decides the error a bad call raises. A few
replace PyTorch's own where it rejects calls CPU accepts or shapes results unlike CPU (see each)."""
import torch

_lib = torch.library.Library("aten", "IMPL")


def _impl(name):
    def wrap(fn):
        if not torch._C._dispatch_has_kernel_for_dispatch_key(f"aten::{name}", "Meta"):
            _lib.impl(name, fn, "Meta")
        return fn
    return wrap


def _out(outs, results):
    for o, r in zip(outs, results):
        o.resize_(r.shape)
    return tuple(outs)


def _empty(self, *shape):
    return self.new_empty(shape)


@_impl("histogram.bin_ct")
def _histogram_bin_ct(self, bins=100, *, range=None, weight=None, density=False):
    torch._check(bins > 0, lambda: "torch.histogram(): bins must be > 0")
    return _empty(self, bins), _empty(self, bins + 1)


@_impl("histogram.bin_ct_out")
def _histogram_bin_ct_out(self, bins=100, *, range=None, weight=None, density=False, hist, bin_edges):
    return _out((hist, bin_edges), _histogram_bin_ct(self, bins))


@_impl("histogram.bins_tensor")
def _histogram_bins(self, bins, *, weight=None, density=False):
    torch._check(bins.dim() == 1 and bins.numel() > 0, lambda: "torch.histogram(): bins must be a 1-D tensor")
    return _empty(self, bins.numel() - 1), _empty(self, bins.numel())


@_impl("histogram.bins_tensor_out")
def _histogram_bins_out(self, bins, *, weight=None, density=False, hist, bin_edges):
    return _out((hist, bin_edges), _histogram_bins(self, bins))


@_impl("_histogramdd_bin_edges")
def _histogramdd_bin_edges(self, bins, *, range=None, weight=None, density=False):
    torch._check(self.dim() >= 2 and len(bins) == self.shape[-1] and all(b > 0 for b in bins),
                 lambda: "torch.histogramdd(): bad bins")
    return [_empty(self, b + 1) for b in bins]


@_impl("_histogramdd_from_bin_cts")
def _histogramdd_from_bin_cts(self, bins, *, range=None, weight=None, density=False):
    _histogramdd_bin_edges(self, bins)
    return _empty(self, *bins)


@_impl("_histogramdd_from_bin_tensors")
def _histogramdd_from_bin_tensors(self, bins, *, weight=None, density=False):
    torch._check(self.dim() >= 2 and len(bins) == self.shape[-1] and all(b.dim() == 1 and b.numel() > 0 for b in bins),
                 lambda: "torch.histogramdd(): bad bins")
    return _empty(self, *[b.numel() - 1 for b in bins])


# index_reduce.out: PyTorch's (C++) Meta kernel selects slice 0 of source along dim to run TensorIterator's checks,
# which raises for an empty index (source has no slice 0), a call CPU accepts and ignores. This one checks what
# index_func_meta_impl checks, without that. The functional and in-place forms already have Python Meta kernels.
def _index_reduce_out_meta(self, dim, index, source, reduce, *, include_self=True, out):
    torch._check(reduce in ("prod", "mean", "amax", "amin"),
                 lambda: f"index_reduce(): Expected reduce to be one of prod, mean, amax or amin but got {reduce}.")
    dim = torch._prims_common.canonicalize_dim(self.dim(), dim)
    torch._check_index(index.dim() <= 1, lambda: "index_reduce_(): Index is supposed to be a vector")
    torch._check(index.dtype in (torch.int64, torch.int32),
                 lambda: f"index_reduce_(): Expected dtype int32/int64 for index but got: {index.dtype}")
    torch._check(self.dtype == source.dtype, lambda: "index_reduce_(): self and source must have the same scalar type")
    torch._check(dim == 0 or dim < source.dim(), lambda: "index_reduce_(): Indexing dim is out of bounds of source")
    torch._check(index.numel() == (1 if source.dim() == 0 else source.shape[dim]),
                 lambda: "index_reduce_(): Number of indices should be equal to source.size(dim)")
    self_sizes, source_sizes = list(self.shape), list(source.shape)
    if source.dim() != 0 and self.dim() != 0:
        del self_sizes[dim], source_sizes[dim]
    torch._check(self_sizes == source_sizes,
                 lambda: "source tensor shape must match self tensor shape, excluding the specified dimension")
    torch._check(out.dtype == self.dtype, lambda: f"Expected out tensor to have dtype {self.dtype}, but got {out.dtype}")
    return out.resize_(self.shape)


_lib.impl("index_reduce.out", _index_reduce_out_meta, "Meta")


# _weight_norm_interface: PyTorch's Meta kernel (its decomposition) shapes the norms keepdim-like, reducing every dim
# but `dim`, which for a 1-D v reduces everything to [1]; CPU's (and CUDA's) norms are shaped and strided like g
# (float32 for a bfloat16 g), one per slice of v along dim. Same result wherever g is shaped keepdim-like.
def _weight_norm_interface_meta(v, g, dim=0):
    norm_dtype = torch.float32 if g.dtype == torch.bfloat16 else g.dtype
    return (torch.empty_like(v, memory_format=torch.contiguous_format),
            torch.empty_strided(g.shape, g.stride(), dtype=norm_dtype, device=g.device))


_lib.impl("_weight_norm_interface", _weight_norm_interface_meta, "Meta")


# fused recurrent cells: PyTorch calls them on accelerators and has kernels for them only on CUDA (rules in
# csrc/lower/rnn.cpp, which give the workspaces CUDA's layout)

def _check_cell(input_gates, hidden_gates, h, chunks):
    torch._check(input_gates.dim() == 2 and input_gates.shape == hidden_gates.shape,
                 lambda: "_thnn_fused_cell: input_gates and hidden_gates must be 2-D of the same shape")
    torch._check(h.dim() == 2 and input_gates.shape == (h.shape[0], chunks * h.shape[1]),
                 lambda: f"_thnn_fused_cell: gates must be (batch, {chunks} * hidden) for a (batch, hidden) state")


# replaces PyTorch's, which fails without biases (nn.LSTM(bias=False)): it asks a None bias for its device
def _thnn_fused_lstm_cell(input_gates, hidden_gates, cx, input_bias=None, hidden_bias=None):
    _check_cell(input_gates, hidden_gates, cx, 4)
    return torch.empty_like(cx), torch.empty_like(cx), torch.empty_like(input_gates)


_lib.impl("_thnn_fused_lstm_cell", _thnn_fused_lstm_cell, "Meta")


@_impl("_thnn_fused_gru_cell")
def _thnn_fused_gru_cell(input_gates, hidden_gates, hx, input_bias=None, hidden_bias=None):
    _check_cell(input_gates, hidden_gates, hx, 3)
    return torch.empty_like(hx), hx.new_empty(hx.shape[0], 5 * hx.shape[1])


@_impl("_thnn_fused_gru_cell_backward")
def _thnn_fused_gru_cell_backward(grad_hy, workspace, has_bias):
    gates = grad_hy.new_empty(grad_hy.shape[0], 3 * grad_hy.shape[1])
    biases = (gates.new_empty(gates.shape[1]), gates.new_empty(gates.shape[1])) if has_bias else (None, None)
    return gates, torch.empty_like(gates), torch.empty_like(grad_hy), *biases


# linalg (rules in csrc/lower/linalg_spectral.cpp)

def _check_matrix(a, what):
    torch._check(a.dim() >= 2, lambda: f"{what}: input must have at least 2 dimensions.")


def _geqrf_shapes(a):
    _check_matrix(a, "torch.geqrf")
    return a.shape, a.shape[:-2] + (min(a.shape[-2], a.shape[-1]),)


@_impl("geqrf")
def _geqrf(a):
    s, t = _geqrf_shapes(a)
    return a.new_empty(s), a.new_empty(t)


@_impl("geqrf.a")
def _geqrf_out(self, *, a, tau):
    s, t = _geqrf_shapes(self)
    return a.resize_(s), tau.resize_(t)


@_impl("linalg_lstsq.out")
def _lstsq_out(a, b, rcond=None, *, driver=None, solution, residuals, rank, singular_values):
    _check_matrix(a, "torch.linalg.lstsq")
    torch._check(b.dim() >= 1, lambda: "torch.linalg.lstsq: other must have at least 1 dimension.")
    torch._check(a.dtype == b.dtype, lambda: f"torch.linalg.lstsq: Expected input and other to have the same dtype, "
                 f"but got input's dtype {a.dtype} and other's dtype {b.dtype}")
    driver = driver or "gelsy"
    torch._check(driver in ("gels", "gelsy", "gelsd", "gelss"),
                 lambda: f"torch.linalg.lstsq: parameter `driver` should be one of (gels, gelsy, gelsd, gelss)")
    m, n = a.shape[-2], a.shape[-1]
    vec = b.dim() == 1 or (b.dim() == a.dim() - 1 and b.shape == a.shape[:-1])
    bm = b.unsqueeze(-1) if vec else b
    torch._check(bm.shape[-2] == m, lambda: f"torch.linalg.lstsq: input.size(-2) should match other.size(-2)")
    batch = torch.broadcast_shapes(a.shape[:-2], bm.shape[:-2])
    k = bm.shape[-1]
    solution.resize_(batch + ((n,) if vec else (n, k)))
    residuals.resize_(batch + (k,) if m > n and driver != "gelsy" else (0,))
    rank.resize_(batch if driver != "gels" else (0,))
    singular_values.resize_(batch + (min(m, n),) if driver in ("gelsd", "gelss") else (0,))
    return solution, residuals, rank, singular_values
