"""Searching, counting and number-building ops (csrc/lower/search.cpp) against CPU."""
import pytest
import torch
from torch_tpu import metrics

from tests.tpu_check import assert_close, both_raise, check

FLOATS = [torch.float32, torch.bfloat16, torch.float16]


def seq(dtype, n=6):
    return torch.tensor([-3, -1, 0, 0, 2, 5][:n]).to(dtype)


def vals(dtype):
    return torch.tensor([[-4, -1, 0], [1, 2, 7]]).to(dtype)


@pytest.mark.parametrize("dtype", FLOATS + [torch.int64, torch.int32])
@pytest.mark.parametrize("right", [False, True])
def test_bucketize(dtype, right):
    check(lambda x, b: torch.bucketize(x, b, right=right), vals(dtype), seq(dtype))
    check(lambda x, b: torch.bucketize(x, b, out_int32=True, right=right), vals(dtype), seq(dtype))


def test_bucketize_nan_and_scalar():
    x = torch.tensor([float("nan"), -1.0, 5.0])
    check(torch.bucketize, x, seq(torch.float32))
    check(lambda b: torch.bucketize(2, b), seq(torch.float32))
    # NaN boundaries (sorted last): CPU's binary search probes decide, and the same probes run on tpu
    b = torch.tensor([-2.0, 0.0, 1.0, 3.0, 4.0, float("nan"), float("nan")])
    check(torch.bucketize, torch.tensor([-3.0, 0.0, 3.5, 4.0, 9.0, float("nan")]), b)


@pytest.mark.parametrize("dtype", FLOATS + [torch.int64, torch.int32])
def test_searchsorted(dtype):
    s = seq(dtype)
    check(torch.searchsorted, s, vals(dtype))
    check(lambda a, v: torch.searchsorted(a, v, side="right"), s, vals(dtype))
    nd = torch.sort(torch.randn(2, 5) * 3).values.to(dtype)
    check(lambda a, v: torch.searchsorted(a, v, right=True), nd, vals(dtype))


def test_searchsorted_sorter_scalar_out():
    a = torch.tensor([3.0, -1.0, 2.0, 0.5])
    sorter = torch.argsort(a)
    check(lambda a, v, s: torch.searchsorted(a, v, sorter=s), a, vals(torch.float32), sorter)
    check(lambda a: torch.searchsorted(a.sort().values, 1.0), a)
    out = torch.empty(2, 3, dtype=torch.int64)
    check(lambda a, v, o: torch.searchsorted(a, v, out=o), seq(torch.float32), vals(torch.float32), out)
    both_raise(RuntimeError, torch.searchsorted, torch.zeros(3, 4), torch.zeros(2, 2))


@pytest.mark.parametrize("dtype", FLOATS + [torch.int64, torch.int32])
def test_isin(dtype):
    x = vals(dtype)
    t = torch.tensor([0, 2, 9, -4]).to(dtype)
    check(torch.isin, x, t)
    check(lambda x, t: torch.isin(x, t, invert=True), x, t)
    check(lambda x: torch.isin(x, 2), x)
    check(lambda t: torch.isin(2, t), t)


@pytest.mark.parametrize("dtype", [torch.float32, torch.int64, torch.bfloat16])
def test_isin_many(dtype):  # past 32 test elements: sorted and searched
    torch.manual_seed(1)
    t = torch.randint(-20, 20, (50,)).to(dtype)
    x = torch.randint(-25, 25, (3, 7)).to(dtype)
    if dtype == torch.float32:
        t[3] = t[9] = x[0, 0] = float("nan")
    check(torch.isin, x, t)
    check(lambda x, t: torch.isin(x, t, invert=True), x, t)


def test_isin_mixed():
    check(torch.isin, torch.tensor([1, 2, 3]), torch.tensor([2.0, 2.5]))
    check(torch.isin, torch.tensor([1.0, float("nan")]), torch.tensor([float("nan"), 1.0]))


@pytest.mark.parametrize("dtype", FLOATS + [torch.int64, torch.int32, torch.bool])
def test_hash_tensor(dtype):
    x = (torch.randn(3, 4) * 5).to(dtype)
    check(torch.hash_tensor, x)
    check(lambda x: torch.hash_tensor(x, 1, keepdim=True), x)


def test_complex_polar():
    a, b = torch.randn(3, 4), torch.randn(4)
    check(lambda a, b: torch.view_as_real(torch.complex(a, b)), a, b, grad=True)
    check(lambda a, b: torch.view_as_real(torch.polar(a, b)), a.abs(), b, grad=True)
    check(lambda a, b: torch.view_as_real(torch.complex(a, b)), a.double(), b.double())
    both_raise(RuntimeError, torch.polar, torch.ones(2, dtype=torch.int32), torch.ones(2, dtype=torch.int32))


def test_complex_half():
    check(lambda a, b: torch.view_as_real(torch.complex(a, b)), torch.randn(3).half(), torch.randn(3).half())


@pytest.mark.parametrize("dtype", FLOATS)
def test_frexp(dtype):
    x = torch.tensor([0.0, -0.0, 1.0, -3.5, 1e-3, 6e4, float("inf"), float("nan"), 0.75]).to(dtype)
    check(torch.frexp, x)


def test_frexp_subnormal_double_grad():
    check(torch.frexp, torch.tensor([1e-40, -3e-39, 1e-310, 2.5], dtype=torch.float64))
    check(lambda x: torch.frexp(x).mantissa, torch.randn(5) * 100, grad=True)


@pytest.mark.parametrize("dtype", [torch.int64, torch.int32, torch.int16, torch.uint8])
def test_gcd_lcm(dtype):
    a = torch.tensor([[0, 12, 35, 7], [9, 100, 17, 0]]).to(dtype)
    b = torch.tensor([0, 18, 21, 13]).to(dtype)
    check(torch.gcd, a, b)
    check(torch.lcm, a, b)
    if dtype != torch.uint8:
        check(torch.gcd, -a, b)
        check(torch.lcm, a, -b)
    both_raise(RuntimeError, torch.gcd, a.float(), b.float())
    both_raise(RuntimeError, torch.lcm, a.float(), b.float())


def test_histogram():
    x = torch.randn(20)
    check(lambda x: torch.histogram(x, bins=5), x)
    check(lambda x, w: torch.histogram(x, bins=3, range=(-1.0, 1.0), weight=w, density=True), x, x.abs())
    check(lambda x, b: torch.histogram(x, bins=b), x, torch.tensor([-1.0, 0.0, 0.5, 2.0]))
    check(lambda x, b: torch.histogram(x, bins=b), x, torch.tensor([0.5, -1.0, 2.0, 0.0, 1.0]))  # unsorted
    check(lambda x: torch.histogram(x, bins=4), torch.full((3,), 2.0))
    check(lambda x: torch.histogram(x, bins=4), torch.empty(0))


def test_histogramdd():
    x = torch.randn(8, 2)
    check(lambda x: torch.histogramdd(x, bins=[2, 3], density=True), x)
    check(lambda x, b: torch.histogramdd(x, bins=b), x, [torch.tensor([-1.0, 0.0, 1.0]), torch.tensor([-2.0, 3.0])])


def test_masked_scatter():
    x = torch.randn(4)
    mask = torch.tensor([[True, False, True, True], [False, True, False, False]])
    src = torch.randn(3, 3)
    check(torch.masked_scatter, x, mask, src, grad=True)
    both_raise(RuntimeError, torch.masked_scatter, x, mask.to(torch.uint8), src)


def factory(fn):
    """fn(device) on tpu equals fn("cpu")."""
    assert_close(fn("tpu"), fn("cpu"), msg="factory")


@pytest.mark.parametrize("dtype", [torch.int64, torch.int32, torch.float32])
def test_linspace_logspace(dtype):
    factory(lambda d: torch.linspace(50, 1, 50, dtype=dtype, device=d))
    factory(lambda d: torch.linspace(-7, 12, 13, dtype=dtype, device=d))
    factory(lambda d: torch.logspace(0, 3, 4, base=2, dtype=dtype, device=d))


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_logspace_one_step(dtype):
    factory(lambda d: torch.logspace(4.3, 1, 1, dtype=dtype, device=d))


def test_arange_same_bounds_other_dtype():
    # the dtype of arange's out= tensor decides its length: programs must not share a cache entry across dtypes
    for dtype in [torch.float32, torch.int64, torch.int32]:
        factory(lambda d: torch.arange(0.0, -8.000001, -4.0, dtype=dtype, device=d))
        factory(lambda d: torch.arange(-0.9, 2.1, 2.0, dtype=dtype, device=d))


# ---- histc: lowered on the device (static shape: bins); integer inputs as on CUDA

def histc_as_float(x, **kw):
    """CPU's histc of integer values cast to float, in x's dtype: the result CUDA gives for integer inputs."""
    return torch.histc(x.float(), **kw).to(x.dtype)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.bfloat16, torch.float16])
def test_histc_float(dtype):
    x = (torch.randn(200) * 3).to(dtype)
    check(lambda x: torch.histc(x, bins=7, min=-2, max=2.5), x)
    check(lambda x: torch.histc(x, bins=10), x)  # min == max == 0: the data's min and max, on the device
    check(lambda x: torch.histc(x, bins=4, min=1, max=1), x)  # any min == max
    # values on the bin edges (the top edge counts in the last bin) and outside the range
    edges = torch.tensor([0.0, 0.25, 0.5, 0.75, 1.0, 1.0, -0.0, 1.5, -0.1, 0.1, 0.3, 0.7]).to(dtype)
    check(lambda x: torch.histc(x, bins=4, min=0, max=1), edges)
    check(lambda x: torch.histc(x, bins=3, min=0.1, max=0.7), edges)
    check(lambda x: torch.histc(x, bins=5), torch.full((6,), 2.0, dtype=dtype))  # one value: widened by 1
    check(lambda x: torch.histc(x, bins=3), torch.empty(0, dtype=dtype))
    check(lambda x: torch.histc(x, bins=3, min=-1, max=1), torch.tensor([float("nan"), 0.5, float("inf")]).to(dtype))


def test_histc_float_multidim_out_default_bins():
    x = torch.randn(4, 5, 6)
    check(torch.histc, x)  # 100 bins
    check(lambda x, o: torch.histc(x, bins=6, min=-1, max=1, out=o), x, torch.empty(6))
    check(lambda x: torch.histc(x, 1, -1, 1), x)


def histc_int_check(x, **kw):
    out = torch.histc(x.to("tpu"), **kw)
    assert out.device.type == "tpu" and out.dtype == x.dtype
    assert_close(out, histc_as_float(x, **kw), msg=f"histc {x.dtype} {kw}")


@pytest.mark.parametrize("dtype", [torch.int64, torch.int32, torch.int16, torch.int8, torch.uint8])
def test_histc_int(dtype):
    x = torch.randint(0, 9, (300,)).to(dtype)
    histc_int_check(x, bins=9, min=0, max=8)
    histc_int_check(x, bins=4, min=2, max=6)  # values outside the range are not counted
    histc_int_check(x, bins=5)  # the data's min and max
    histc_int_check(x, bins=3, min=4, max=4)
    histc_int_check(torch.full((5,), 3, dtype=dtype), bins=4)  # one value: [2, 4]
    histc_int_check(torch.zeros(0, dtype=dtype), bins=3, min=0, max=2)
    histc_int_check(x.reshape(10, 30), bins=9, min=0, max=8)
    if dtype != torch.uint8:
        histc_int_check(x - 4, bins=6, min=-3, max=3)
        histc_int_check(x - 4, bins=6)


def test_histc_moe_routing():
    # transformers' MoE routing: tokens per expert, from the top-k expert ids of every token
    num_experts = 8
    expert_ids = torch.topk(torch.randn(64, num_experts), 2, dim=-1).indices
    expected = histc_as_float(expert_ids.int(), bins=num_experts, min=0, max=num_experts - 1)
    tokens_per_expert = torch.histc(expert_ids.to("tpu").int(), bins=num_experts, min=0, max=num_experts - 1)
    assert tokens_per_expert.dtype == torch.int32
    assert_close(tokens_per_expert, expected, msg="tokens per expert")
    assert int(tokens_per_expert.sum()) == 128
    check(lambda e: torch.histc(e.float(), bins=num_experts, min=0, max=num_experts - 1), expert_ids)


def test_histc_runs_on_device():
    x = torch.randint(0, 4, (50,), dtype=torch.int32).to("tpu")
    before = metrics.counters()
    torch.histc(x, bins=4, min=0, max=3)
    torch.histc(x.float(), bins=4, min=0, max=3)
    after = metrics.counters()
    for key in ("host_syncs", "host_ops:histc", "cpu_fallback:histc"):
        assert after.get(key, 0) == before.get(key, 0), key
    # the data's own range (min == max) is read on the host to refuse a non-finite one, as CUDA does
    torch.histc(x.float(), bins=4)
    assert metrics.counters().get("host_syncs", 0) > after.get("host_syncs", 0)
    assert metrics.counters().get("cpu_fallback:histc", 0) == after.get("cpu_fallback:histc", 0)


def test_histc_errors():
    both_raise(RuntimeError, lambda x: torch.histc(x, bins=0), torch.randn(4))
    both_raise(RuntimeError, lambda x: torch.histc(x, bins=3, min=2, max=1), torch.randn(4))
    with pytest.raises(RuntimeError):  # as CUDA: bool is not a histc dtype
        torch.histc(torch.ones(3, dtype=torch.bool, device="tpu"), bins=2, min=0, max=1)
