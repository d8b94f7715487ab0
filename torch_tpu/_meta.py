"""Meta kernels PyTorch lacks for ops the tpu backend lowers: the glue takes result shapes and dtypes from
Meta kernels. Checks only what decides the shapes; CPU's kernel decides the error a bad call raises."""
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
