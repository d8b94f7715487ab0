"""Tensor creation and conversion on tpu against CPU: factories (zeros, ones, full, empty, eye, arange,
linspace, logspace, *_like, new_*), torch.tensor(..., device='tpu'), dtype conversion across every pair,
host <-> device round trips for every dtype, non-contiguous host tensors, and reading values back
(item, tolist, bool, int, float, repr)."""
import warnings

import pytest
import torch

from tpu_check import assert_close

ALL_DTYPES = [torch.bool, torch.uint8, torch.int8, torch.int16, torch.int32, torch.int64, torch.float16,
              torch.bfloat16, torch.float32, torch.float64, torch.complex64, torch.complex128]
NAMES = [str(d)[6:] for d in ALL_DTYPES]


def same(actual, expected):
    """Exact equality, dtype and shape included, with actual on tpu."""
    assert actual.device.type == "tpu"
    assert actual.dtype == expected.dtype and actual.shape == expected.shape
    torch.testing.assert_close(actual.cpu(), expected, rtol=0, atol=0, equal_nan=True)


# ---------------------------------------------------------------- factories
@pytest.mark.parametrize("dtype", ALL_DTYPES, ids=NAMES)
def test_zeros_ones_full_empty(dtype):
    for fn in (torch.zeros, torch.ones):
        same(fn(2, 3, dtype=dtype, device="tpu"), fn(2, 3, dtype=dtype))
    fill = True if dtype == torch.bool else (1 + 2j if dtype.is_complex else 7)
    same(torch.full((2, 3), fill, dtype=dtype, device="tpu"), torch.full((2, 3), fill, dtype=dtype))
    # an unwritten tpu tensor reads as zeros (defined contents, unlike CPU's garbage)
    same(torch.empty(2, 3, dtype=dtype, device="tpu"), torch.zeros(2, 3, dtype=dtype))
    same(torch.empty_strided((2, 3), (1, 2), dtype=dtype, device="tpu").contiguous(), torch.zeros(2, 3, dtype=dtype))


def test_factory_variants():
    same(torch.zeros((), device="tpu"), torch.zeros(()))
    same(torch.ones(0, 4, device="tpu"), torch.ones(0, 4))
    same(torch.full((3,), 2.5, device="tpu"), torch.full((3,), 2.5))  # float fill: default dtype
    same(torch.full((3,), 2, device="tpu"), torch.full((3,), 2))  # int fill: int64
    same(torch.full((3,), True, device="tpu"), torch.full((3,), True))
    same(torch.full((2,), float("nan"), device="tpu"), torch.full((2,), float("nan")))
    same(torch.full((2,), -float("inf"), dtype=torch.bfloat16, device="tpu"),
         torch.full((2,), -float("inf"), dtype=torch.bfloat16))
    same(torch.full((2,), 2 ** 40 + 1, device="tpu"), torch.full((2,), 2 ** 40 + 1))  # exact int64
    same(torch.scalar_tensor(3.5, device="tpu"), torch.scalar_tensor(3.5))
    same(torch.zeros(2, device=torch.device("tpu", 0)), torch.zeros(2))
    with torch.device("tpu"):
        t = torch.ones(3)
    assert t.device.type == "tpu"
    x = torch.tensor([[1.5, 2.5]], device="tpu")
    for fn in (torch.zeros_like, torch.ones_like, lambda t: torch.full_like(t, 4),
               lambda t: torch.full_like(t, 4, dtype=torch.int32), lambda t: t.new_zeros(3),
               lambda t: t.new_ones((2, 2), dtype=torch.bfloat16), lambda t: t.new_full((2,), 9),
               lambda t: t.new_tensor([1, 2]), lambda t: torch.zeros_like(t, dtype=torch.bool)):
        same(fn(x), fn(x.cpu()))
    e = torch.empty_like(x)
    assert e.device.type == "tpu" and e.shape == x.shape
    same(x.new_empty(2, 3), torch.zeros(2, 3))


def test_factory_errors():
    for dev in ("cpu", "tpu"):
        with pytest.raises(RuntimeError):
            torch.zeros(-1, device=dev)
        with pytest.raises(RuntimeError):
            torch.full((2,), 1.5, dtype=torch.int64, device=dev).add_(1.5)
    with pytest.raises(RuntimeError, match="invalid device"):
        torch.zeros(2, device="tpu:7")


def test_eye():
    for args in ((3,), (2, 4), (4, 2), (0,), (1, 1)):
        for dtype in (torch.float32, torch.int64, torch.bool, torch.bfloat16):
            same(torch.eye(*args, dtype=dtype, device="tpu"), torch.eye(*args, dtype=dtype))
    out = torch.empty(0, device="tpu")
    torch.eye(3, out=out)
    same(out, torch.eye(3))


# arange's bounds are structural: they fix the result's length, which the compiled program's result shape
# depends on, so every distinct (start, end, step) compiles a new program (even for the same length);
# repeating a call reuses it.
ARANGES = [(5,), (0, 5), (2, 9, 3), (5, 0, -1), (10, -3, -4), (0, 1, 0.1), (-1.5, 2.5, 0.5), (1, 2, 0.3),
           (0.5, 5.5), (3, 3), (0, 2 ** 40, 2 ** 38), (1e-3, 1e-2, 1e-3)]


@pytest.mark.parametrize("args", ARANGES, ids=[str(a) for a in ARANGES])
def test_arange(args):
    # CPU computes float32 ranges partly in float32 vectors: values agree to float32 rounding, integers exactly
    assert_close(torch.arange(*args, device="tpu"), torch.arange(*args))
    for dtype in (torch.float32, torch.int64, torch.bfloat16, torch.int32, torch.float64):
        if dtype.is_floating_point or all(float(a).is_integer() for a in args):
            assert_close(torch.arange(*args, dtype=dtype, device="tpu"), torch.arange(*args, dtype=dtype))


def test_arange_errors_and_out():
    for dev in ("cpu", "tpu"):
        with pytest.raises(RuntimeError):
            torch.arange(0, 5, 0, device=dev)
        with pytest.raises(RuntimeError):
            torch.arange(0, 5, -1, device=dev)
    out = torch.empty(0, dtype=torch.int64, device="tpu")
    torch.arange(2, 8, 2, out=out)
    same(out, torch.arange(2, 8, 2))
    with pytest.warns(UserWarning):  # torch.range is deprecated (it includes end)
        same(torch.range(0, 3, 0.5, device="tpu"), torch.range(0, 3, 0.5))


def test_arange_compiles():
    from torch_tpu import metrics
    torch.arange(0, 7, 0.25, device="tpu").cpu()
    metrics.reset()
    torch.arange(0, 7, 0.25, device="tpu").cpu()  # the same bounds: the in-memory program
    c = metrics.counters()
    assert c.get("compiles", 0) == 0 and c.get("cache.memory_hits", 0) >= 1
    # Other bounds of the same length miss the in-memory tier (bounds are in its key), but start and step
    # are runtime operands, so the program text is the same: the disk tier (keyed by text) has it.
    torch.arange(1, 8, 0.25, device="tpu").cpu()
    c = metrics.counters()
    assert c.get("compiles", 0) + c.get("cache.disk_hits", 0) == 1


LINSPACES = [(0, 1, 5), (-2, 3, 7), (1, -1, 4), (0, 10, 1), (0, 10, 0), (3, 3, 4), (0.1, 0.9, 9), (-5, 5, 11)]


@pytest.mark.parametrize("args", LINSPACES, ids=[str(a) for a in LINSPACES])
def test_linspace_logspace(args):
    for dtype in (torch.float32, torch.float64, torch.bfloat16, torch.int64):
        assert_close(torch.linspace(*args, dtype=dtype, device="tpu"), torch.linspace(*args, dtype=dtype))
    assert_close(torch.logspace(*args, device="tpu"), torch.logspace(*args), rtol=1e-5, atol=1e-6)
    assert_close(torch.logspace(*args, base=2, device="tpu"), torch.logspace(*args, base=2))


def test_linspace_complex_and_tensor_bounds():
    assert_close(torch.linspace(0, 1 + 2j, 5, device="tpu"), torch.linspace(0, 1 + 2j, 5))
    a, b = torch.tensor(1.0), torch.tensor(4.0)
    assert_close(torch.linspace(a.to("tpu"), b.to("tpu"), 4, device="tpu"), torch.linspace(a, b, 4))


def test_tri_indices():
    for args in ((3, 3), (4, 3, 1), (3, 5, -1), (0, 3), (2, 2, -5)):
        same(torch.tril_indices(*args, device="tpu"), torch.tril_indices(*args))
        same(torch.triu_indices(*args, device="tpu"), torch.triu_indices(*args))


# ---------------------------------------------------------------- torch.tensor and host transfers
def test_tensor_literals():
    for data in ([1, 2, 3], [[1.5, 2.0], [3.0, -4.25]], [True, False], 3.5, 7, True, [], [[]], 1 + 2j,
                 [2 ** 62, -(2 ** 62)], [1e-40, 3e38]):
        same(torch.tensor(data, device="tpu"), torch.tensor(data))
    for dtype in ALL_DTYPES:
        same(torch.tensor([0, 1, 1], dtype=dtype, device="tpu"), torch.tensor([0, 1, 1], dtype=dtype))
    same(torch.as_tensor([1, 2], device="tpu"), torch.as_tensor([1, 2]))


def test_int64_end_to_end():
    x = torch.tensor([1, 2, 3], device="tpu")
    y = x + 1
    assert y.device.type == "tpu" and y.dtype == torch.int64 and y.tolist() == [2, 3, 4]
    assert (x * 2 - 1).tolist() == [1, 3, 5]
    assert (x / 2).tolist() == [0.5, 1.0, 1.5]
    assert (x // 2).tolist() == [0, 1, 1]
    assert (-x % 2).tolist() == [1, 0, 1]
    assert (x * 1.5).dtype == torch.float32
    assert (x == 2).tolist() == [False, True, False]
    big = torch.tensor([2 ** 40, -(2 ** 50)], device="tpu")
    assert (big + 1).tolist() == [2 ** 40 + 1, -(2 ** 50) + 1]
    assert (big * 3).tolist() == [3 * 2 ** 40, -3 * 2 ** 50]
    assert (big // 7).tolist() == [2 ** 40 // 7, -(2 ** 50) // 7]


def host_values(dtype):
    if dtype == torch.bool:
        return torch.tensor([[True, False, True], [False, False, True]])
    if dtype.is_complex:
        return torch.tensor([[1 + 2j, -3.5j, 0], [2, -1 - 1j, 1e-3j]], dtype=dtype)
    if dtype.is_floating_point:
        return torch.tensor([[0.0, -1.5, 3.25], [float("inf"), float("nan"), -0.0]], dtype=dtype)
    lo = 0 if dtype == torch.uint8 else torch.iinfo(dtype).min
    return torch.tensor([[lo, 0, 1], [7, -2 if lo else 200, torch.iinfo(dtype).max]], dtype=dtype)


@pytest.mark.parametrize("dtype", ALL_DTYPES + [torch.uint16, torch.uint32, torch.uint64, torch.float8_e4m3fn,
                                                torch.float8_e5m2],
                         ids=NAMES + ["uint16", "uint32", "uint64", "float8_e4m3fn", "float8_e5m2"])
def test_round_trip(dtype):
    if dtype in (torch.uint16, torch.uint32, torch.uint64):
        x = torch.tensor([[0, 1, 2], [3, 100, 255]]).to(dtype)
    elif dtype in (torch.float8_e4m3fn, torch.float8_e5m2):
        x = torch.tensor([[0.0, -1.5, 3.0], [0.25, 448 if dtype == torch.float8_e4m3fn else 1024, -2]]).to(dtype)
    else:
        x = host_values(dtype)
    t = x.to("tpu")
    assert t.device.type == "tpu" and t.dtype == dtype and t.shape == x.shape
    back = t.cpu()
    assert back.dtype == dtype
    assert torch.equal(back.view(torch.uint8), x.view(torch.uint8))  # bit-exact, NaN and -0.0 included
    assert torch.equal(t.to("cpu").view(torch.uint8), x.view(torch.uint8))
    assert torch.equal(x.to("tpu:0").clone().cpu().view(torch.uint8), x.view(torch.uint8))
    # host -> existing tpu tensor, and a tpu -> tpu copy
    d = torch.empty(2, 3, dtype=dtype, device="tpu")
    d.copy_(x)
    assert torch.equal(d.cpu().view(torch.uint8), x.view(torch.uint8))


def test_non_contiguous_host_tensors():
    base = torch.arange(24, dtype=torch.float32).reshape(4, 6)
    for x in (base.t(), base[:, ::2], base[1:3, 2:5], base.expand(2, 4, 6)[1], torch.tensor(5.0).expand(3, 2),
              base.reshape(2, 2, 6).permute(2, 0, 1), base.bfloat16().t(), base.long()[:, 1::3]):
        same(x.to("tpu"), x.contiguous())
    # copy_ from a strided host tensor into a slice of a tpu tensor
    d = torch.zeros(6, 4, device="tpu")
    d[1:5].copy_(base[:, :4].t())
    e = torch.zeros(6, 4)
    e[1:5].copy_(base[:, :4].t())
    same(d, e)
    d = torch.zeros(4, 6, device="tpu")
    d.t().copy_(base.t())  # into a transposed tpu view
    same(d, base)


@pytest.mark.parametrize("src", ALL_DTYPES, ids=NAMES)
def test_to_dtype_all_pairs(src):
    """.to(dtype) on tpu equals CPU for every pair, on values every pair converts the same way
    (non-negative and in range of the narrowest type; fractions truncate)."""
    x = torch.tensor([[0.0, 1.0, 2.5], [7.9, 100.0, 127.0]])
    if src == torch.bool:
        x = x > 1
    x = x.to(src)
    t = x.to("tpu")
    warnings.simplefilter("ignore")  # complex -> real discards the imaginary part (CPU warns)
    for dst in ALL_DTYPES:
        y = t.to(dst)
        assert y.device.type == "tpu" and y.dtype == dst
        torch.testing.assert_close(y.cpu(), x.to(dst), rtol=0, atol=0, msg=lambda m: f"{src} -> {dst}: {m}")


def test_to_dtype_signed_values():
    x = torch.tensor([-3.7, -1.0, -0.5, 0.0, 2.9, 1e4, -1e4, float("inf"), float("nan")])
    t = x.to("tpu")
    for dst in (torch.float16, torch.bfloat16, torch.float64, torch.complex64, torch.bool):
        same(t.to(dst), x.to(dst))
    finite = x[:7]
    for dst in (torch.int64, torch.int32, torch.int16):
        same(finite.to("tpu").to(dst), finite.to(dst))
    same(torch.tensor([-3, 300, -200]).to("tpu").to(torch.int8), torch.tensor([-3, 300, -200]).to(torch.int8))
    same(torch.tensor([1 + 2j, 0j, 3j, -1j]).to("tpu").to(torch.bool), torch.tensor([1 + 2j, 0j, 3j, -1j]).to(torch.bool))
    # float64 narrows to half types through float32, like CPU
    d = torch.tensor([1.0009765625 + 2 ** -30, 3.0e-8, 65519.99, 1.00390625 + 2 ** -40], dtype=torch.float64)
    for dst in (torch.float16, torch.bfloat16):
        same(d.to("tpu").to(dst), d.to(dst))
    with warnings.catch_warnings():  # complex -> real discards the imaginary part (CPU warns; tpu does not)
        warnings.simplefilter("ignore")
        same(torch.tensor([1 + 2j]).to("tpu").float(), torch.tensor([1.0]))


def test_to_variants():
    x = torch.randn(2, 3)
    t = x.to("tpu")
    same(t.to(torch.float64), x.double())
    same(t.double().float(), x)
    same(t.to("tpu", torch.bfloat16), x.bfloat16())
    same(t.to(torch.zeros(1, dtype=torch.int32, device="tpu")), x.int())  # to(other): other's dtype and device
    assert t.to(torch.zeros(1, dtype=torch.int32)).device.type == "cpu"
    same(x.to(t), x)
    assert x.to(t).device.type == "tpu"
    assert t.to("tpu") is t  # no-op
    same(t.type(torch.int64), x.long())
    assert t.cpu().to("tpu", copy=True).data_ptr() != t.data_ptr()
    assert t.is_contiguous() and t.t().contiguous().is_contiguous()
    same(x.t().to("tpu").contiguous(), x.t().contiguous())
    y = t.half().to("cpu", torch.float32)  # device and dtype at once
    assert y.device.type == "cpu" and torch.equal(y, x.half().float())


# ---------------------------------------------------------------- reading values
def test_item_tolist_bool_and_scalars():
    assert torch.tensor(3.5, device="tpu").item() == 3.5
    assert torch.tensor(2 ** 60, device="tpu").item() == 2 ** 60
    assert torch.tensor(True, device="tpu").item() is True
    assert torch.tensor(1 + 2j, device="tpu").item() == 1 + 2j
    assert torch.tensor([7], dtype=torch.bfloat16, device="tpu").item() == 7.0
    assert torch.tensor([[1, 2], [3, 4]], device="tpu").tolist() == [[1, 2], [3, 4]]
    assert torch.tensor([0.5, -1.0], dtype=torch.float16, device="tpu").tolist() == [0.5, -1.0]
    assert torch.tensor(5, device="tpu").tolist() == 5
    assert torch.tensor([], device="tpu").tolist() == []
    assert bool(torch.tensor([1], device="tpu")) and not bool(torch.tensor(0.0, device="tpu"))
    assert int(torch.tensor(7.9, device="tpu")) == 7 and float(torch.tensor(2, device="tpu")) == 2.0
    assert torch.tensor([3], device="tpu").__index__() == 3
    assert [int(v) for v in torch.tensor([4, 5], device="tpu")] == [4, 5]  # iteration
    assert (torch.tensor([1.0, 2.0], device="tpu") * 2)[1].item() == 4.0
    for dev in ("cpu", "tpu"):
        with pytest.raises(RuntimeError):
            bool(torch.tensor([1, 2], device=dev))
        with pytest.raises(RuntimeError):
            torch.tensor([1, 2], device=dev).item()


@pytest.mark.parametrize("x", [torch.tensor([1.5, -2.0, 3.25]), torch.tensor([[1, 2], [3, 4]]), torch.tensor(7.0),
                               torch.tensor([True, False]), torch.tensor([], dtype=torch.float32),
                               torch.tensor([1.0, 2.0], dtype=torch.bfloat16), torch.tensor([1e-8, 1e8]),
                               torch.tensor([1 + 2j]),
                               torch.tensor([float("nan"), float("inf"), -1.0])],
                         ids=["float", "int", "0-d", "bool", "empty", "bf16", "sci", "complex", "special"])
def test_repr(x):
    text = repr(x.to("tpu"))
    assert text.endswith("device='tpu:0')") or "device='tpu:0'" in text
    assert text.replace(", device='tpu:0'", "") == repr(x)
    str(x.to("tpu"))
    print(x.to("tpu"))


def test_repr_large_summarized():
    x = torch.arange(3000, dtype=torch.float32).reshape(30, 100)
    assert repr(x.to("tpu")).replace(", device='tpu:0'", "") == repr(x)


def test_fill_zero_clone_copy():
    x = torch.randn(3, 4)
    for fn in (lambda t: t.fill_(2.5), lambda t: t.fill_(torch.tensor(1.5)), lambda t: t.zero_(),
               lambda t: t[1].fill_(7), lambda t: t[:, ::2].zero_(), lambda t: t.clone(),
               lambda t: t.t().clone(), lambda t: torch.clone(t, memory_format=torch.contiguous_format),
               lambda t: t.copy_(torch.arange(4.0)), lambda t: t.copy_(torch.ones(3, 4, dtype=torch.int64)),
               lambda t: t[:2].copy_(t[2:].expand(2, 4)), lambda t: t.fill_(True), lambda t: t.int().fill_(3.9)):
        same(fn(x.clone().to("tpu")), fn(x.clone()))
    t = x.to("tpu")
    t.fill_(torch.tensor(4.0, device="tpu"))  # a 0-d tpu tensor
    same(t, torch.full((3, 4), 4.0))
    d = torch.zeros(2, 3, dtype=torch.bfloat16, device="tpu")
    d.copy_(torch.tensor([1.0, 2.0, 3.0], device="tpu"))  # tpu -> tpu, converts and broadcasts
    same(d, torch.tensor([[1.0, 2.0, 3.0]] * 2, dtype=torch.bfloat16))
    for dev in ("cpu", "tpu"):
        with pytest.raises(RuntimeError):
            torch.zeros(3, device=dev).fill_(torch.ones(2, device=dev))  # fill_ takes 0-d values only
        with pytest.raises(RuntimeError):
            torch.zeros(3, device=dev).copy_(torch.ones(2, device=dev))
