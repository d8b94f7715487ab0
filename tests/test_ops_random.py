"""Random ops on tpu: distributions (moments and ranges of large samples, per dtype), reproducibility
(torch.manual_seed, tpu Generators, RNG state), dropout (scaling, mask reused by backward), and error
cases. Values cannot match CPU bit for bit (different generators), so statistics are the oracle."""
import math

import pytest
import torch
import torch.nn.functional as F

import torch_tpu
from tpu_check import check

N = 100_000
FLOATS = [torch.float32, torch.bfloat16, torch.float16, torch.float64]


def stats(x):
    x = x.cpu().double()
    return x.mean().item(), x.std().item(), x.min().item(), x.max().item()


def empty(dtype=torch.float32, n=N):
    return torch.empty(n, dtype=dtype, device="tpu")


# ---------------------------------------------------------------- distributions
@pytest.mark.parametrize("dtype", FLOATS)
def test_uniform(dtype):
    x = empty(dtype).uniform_(-2, 3)
    assert x.dtype == dtype and x.device.type == "tpu"
    mean, std, lo, hi = stats(x)
    assert abs(mean - 0.5) < 0.03 and abs(std - 5 / math.sqrt(12)) < 0.03
    assert lo >= -2 and hi < 3
    mean, std, lo, hi = stats(torch.rand(N, dtype=dtype, device="tpu"))
    assert abs(mean - 0.5) < 0.01 and abs(std - 1 / math.sqrt(12)) < 0.01 and lo >= 0 and hi < 1


@pytest.mark.parametrize("dtype", FLOATS)
def test_normal(dtype):
    mean, std, lo, hi = stats(empty(dtype).normal_(2, 3))
    assert abs(mean - 2) < 0.05 and abs(std - 3) < 0.05
    x = torch.randn(N, dtype=dtype, device="tpu").cpu().double()
    assert abs(x.mean()) < 0.02 and abs(x.std() - 1) < 0.02
    assert abs((x.abs() < 1).double().mean() - 0.6827) < 0.01  # the shape, not just two moments
    assert x.abs().max() > 3.5


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16, torch.complex32])
@pytest.mark.parametrize("lo,hi", [(2, 4), (-4, -2), (-1e-3, 1e-3)])
def test_uniform_narrow_types_stay_below_to(dtype, lo, hi):
    # computed wider, then rounded toward `from` as CPU's draws: to-nearest would give `hi` itself
    # (2 + 2047/1024 rounds up to 4.0 in float16); every grid value of [lo, hi) keeps an equal share
    x = empty(dtype, 4 * N).uniform_(lo, hi).cpu()
    parts = torch.view_as_real(x) if dtype == torch.complex32 else x
    lo, hi = (torch.tensor(v, dtype=parts.dtype).item() for v in (lo, hi))  # CPU's bounds: of the dtype
    assert parts.min().item() >= lo and parts.max().item() < hi
    if (lo, hi) == (2, 4) and dtype == torch.float16:
        counts = torch.bincount(((parts.float() - 2) * 512).long(), minlength=1024).double()
        assert counts.min().item() > 0.5 * counts.mean().item()


@pytest.mark.parametrize("dtype", [torch.complex32, torch.complex64, torch.complex128])
def test_complex_draws_both_parts(dtype):
    # CPU draws view_as_real(self): randn's parts have variance 1/2 each, uniform_ and normal_ apply to
    # both parts (normal_'s mean too, its std divided by sqrt(2))
    z = torch.randn(N, dtype=dtype, device="tpu").cpu().to(torch.complex128)
    for part in (z.real, z.imag):
        assert abs(part.mean().item()) < 0.02 and abs(part.var().item() - 0.5) < 0.02
    u = empty(dtype).uniform_(2, 4).cpu().to(torch.complex128)
    for part in (u.real, u.imag):
        assert part.min().item() >= 2 and part.max().item() < 4 and abs(part.mean().item() - 3) < 0.02
    w = empty(dtype).normal_(3, 2).cpu().to(torch.complex128)
    for part in (w.real, w.imag):
        assert abs(part.mean().item() - 3) < 0.05 and abs(part.std().item() - 2 ** 0.5) < 0.05


def test_normal_of_complex_mean():
    # PyTorch's meta kernel fails on a complex mean (it compares std with 0 as complex); CPU accepts it
    mean = torch.full((N,), 1 + 2j)
    x = torch.normal(mean.to("tpu"), 2.0)
    assert x.dtype == torch.complex64 and x.device.type == "tpu"
    x = x.cpu()
    assert abs(x.real.mean().item() - 1) < 0.05 and abs(x.imag.mean().item() - 2) < 0.05
    assert abs(x.real.std().item() - 2 ** 0.5) < 0.05 and abs(x.imag.std().item() - 2 ** 0.5) < 0.05


def test_normal_tensor_overloads():
    mean = torch.tensor([-10.0, 0.0, 10.0], device="tpu").repeat(N // 3)
    x = torch.normal(mean, 0.5).cpu().reshape(-1, 3)
    assert torch.allclose(x.mean(0), torch.tensor([-10.0, 0.0, 10.0]), atol=0.02)
    assert torch.allclose(x.std(0), torch.full((3,), 0.5), atol=0.02)
    std = torch.tensor([1.0, 2.0], device="tpu").repeat(N // 2)
    x = torch.normal(1.0, std).cpu().reshape(-1, 2)
    assert torch.allclose(x.mean(0), torch.ones(2), atol=0.05)
    assert torch.allclose(x.std(0), torch.tensor([1.0, 2.0]), atol=0.05)
    x = torch.normal(torch.zeros(4, N // 4, device="tpu"), torch.full((N // 4,), 2.0, device="tpu"))
    assert x.shape == (4, N // 4) and abs(x.cpu().std() - 2) < 0.05


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16, torch.int64, torch.int32,
                                   torch.bool])
def test_bernoulli(dtype):
    x = empty(dtype).bernoulli_(0.3)
    assert x.dtype == dtype
    xc = x.cpu()
    assert set(xc.unique().tolist()) <= {0, 1}
    assert abs(xc.double().mean() - 0.3) < 0.01
    assert empty(dtype, 100).bernoulli_(0.0).cpu().sum() == 0
    assert empty(dtype, 100).bernoulli_(1.0).cpu().double().sum() == 100


def test_bernoulli_tensor_p():
    p = torch.tensor([0.0, 0.2, 0.9, 1.0], device="tpu").repeat(N // 4)
    x = torch.bernoulli(p).cpu().reshape(-1, 4)
    assert torch.allclose(x.mean(0), torch.tensor([0.0, 0.2, 0.9, 1.0]), atol=0.01)
    y = torch.empty(N // 4, 4, device="tpu").bernoulli_(torch.tensor([0.5, 0.1, 0.0, 1.0], device="tpu"))
    assert torch.allclose(y.cpu().mean(0), torch.tensor([0.5, 0.1, 0.0, 1.0]), atol=0.01)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float64])
def test_exponential(dtype):
    mean, std, lo, hi = stats(empty(dtype).exponential_(2.0))
    assert abs(mean - 0.5) < 0.01 and abs(std - 0.5) < 0.02 and lo >= 0


def test_other_distributions():
    x = empty().cauchy_(1.0, 2.0).cpu()
    assert abs(x.median() - 1) < 0.05 and abs((x - 1).abs().median() - 2) < 0.1
    mean, _, lo, _ = stats(empty().log_normal_(0.0, 0.5))
    assert lo > 0 and abs(mean - math.exp(0.125)) < 0.02
    x = empty().geometric_(0.25).cpu()
    assert x.min() >= 1 and torch.equal(x, x.round()) and abs(x.double().mean() - 4) < 0.1


@pytest.mark.parametrize("dtype,lo,hi", [(torch.int64, -5, 7), (torch.int32, 0, 3), (torch.uint8, 10, 250),
                                         (torch.int16, -300, -100), (torch.float32, -4, 4),
                                         (torch.bfloat16, 0, 10)])
def test_randint(dtype, lo, hi):
    x = torch.randint(lo, hi, (N,), dtype=dtype, device="tpu")
    assert x.dtype == dtype
    xc = x.cpu()
    assert set(xc.unique().tolist()) == set(range(lo, hi))
    assert abs(xc.double().mean() - (lo + hi - 1) / 2) < (hi - lo) * 0.01


def test_random_():
    x = empty(torch.int64).random_(100).cpu()
    assert x.min() == 0 and x.max() == 99
    x = empty(torch.int64).random_(-3, 3).cpu()
    assert set(x.unique().tolist()) == set(range(-3, 3))
    for dtype, top in [(torch.uint8, 255), (torch.int8, 127), (torch.bool, 1)]:
        x = empty(dtype).random_().cpu()
        assert x.min() == 0 and x.max() == top and x.dtype == dtype
    x = empty(torch.int64).random_().cpu()
    assert x.min() >= 0 and x.double().mean() > 2**61  # the full [0, 2^63) range
    x = empty(torch.float32).random_().cpu()
    assert x.min() >= 0 and x.max() <= 2**24 and torch.equal(x, x.round()) and x.max() > 2**23
    x = empty(torch.bfloat16).random_().cpu()
    assert x.min() >= 0 and x.max() <= 256
    x = empty(torch.int64).random_(-5, None).cpu()  # from, to = dtype max
    assert x.min() >= -5 and x.double().mean() > 2**61


def test_randperm():
    for n in [1, 10, 1000]:
        p = torch.randperm(n, device="tpu")
        assert p.dtype == torch.int64
        assert torch.equal(p.cpu().sort().values, torch.arange(n))
    p = torch.randperm(50, device="tpu", dtype=torch.float32).cpu()
    assert torch.equal(p.sort().values, torch.arange(50.0))
    assert not torch.equal(torch.randperm(1000, device="tpu").cpu(), torch.arange(1000))


def test_multinomial_with_replacement():
    p = torch.tensor([[1.0, 2.0, 7.0, 0.0], [0.0, 0.0, 0.0, 5.0]], device="tpu")  # unnormalized
    s = torch.multinomial(p, 20000, replacement=True)
    assert s.shape == (2, 20000) and s.dtype == torch.int64
    s = s.cpu()
    freq = torch.stack([torch.bincount(r, minlength=4) for r in s]).double() / 20000
    assert torch.allclose(freq[0], torch.tensor([0.1, 0.2, 0.7, 0.0], dtype=torch.float64), atol=0.015)
    assert torch.equal(freq[1], torch.tensor([0.0, 0.0, 0.0, 1.0], dtype=torch.float64))
    one = torch.multinomial(torch.tensor([0.3, 0.7], device="tpu"), 1)
    assert one.shape == (1,)


def test_multinomial_without_replacement():
    p = torch.tensor([0.05, 0.15, 0.3, 0.5, 0.0], device="tpu")
    s = torch.multinomial(p, 4)
    assert s.shape == (4,)
    assert sorted(s.cpu().tolist()) == [0, 1, 2, 3]  # distinct, never the zero-probability category
    firsts = torch.multinomial(p.repeat(4000, 1), 2).cpu()
    assert (firsts[:, 0] != firsts[:, 1]).all()
    freq = torch.bincount(firsts[:, 0], minlength=5).double() / 4000
    assert torch.allclose(freq, torch.tensor([0.05, 0.15, 0.3, 0.5, 0.0], dtype=torch.float64), atol=0.03)


def test_empty_and_scalar_shapes():
    assert torch.empty(0, device="tpu").uniform_().shape == (0,)
    assert torch.randn(2, 0, 3, device="tpu").shape == (2, 0, 3)
    assert torch.randperm(0, device="tpu").shape == (0,)
    x = torch.rand((), device="tpu")
    assert x.shape == () and 0 <= x.item() < 1


# ---------------------------------------------------------------- reproducibility
def test_manual_seed_reproducible():
    torch.manual_seed(0)
    a = [torch.rand(5, device="tpu").cpu(), torch.randn(5, device="tpu").cpu(),
         torch.randint(0, 100, (5,), device="tpu").cpu()]
    torch.manual_seed(0)
    b = [torch.rand(5, device="tpu").cpu(), torch.randn(5, device="tpu").cpu(),
         torch.randint(0, 100, (5,), device="tpu").cpu()]
    for x, y in zip(a, b):
        assert torch.equal(x, y)
    torch.manual_seed(1)
    assert not torch.equal(torch.rand(5, device="tpu").cpu(), a[0])
    assert torch.tpu.initial_seed() == 1


def test_successive_calls_differ():
    torch.manual_seed(0)
    xs = [torch.rand(1000, device="tpu").cpu() for _ in range(3)]
    assert not torch.equal(xs[0], xs[1]) and not torch.equal(xs[1], xs[2])
    # neighbouring calls are not shifted copies of one stream
    assert not torch.equal(xs[0][1:], xs[1][:-1])
    assert abs(torch.corrcoef(torch.stack([xs[0], xs[1]]))[0, 1]) < 0.1


def test_generator():
    g = torch.Generator(device="tpu")
    assert g.device.type == "tpu"
    g.manual_seed(3)
    a = torch.rand(5, device="tpu", generator=g).cpu()
    b = torch.empty(5, device="tpu").normal_(generator=g).cpu()
    g.manual_seed(3)
    assert torch.equal(torch.rand(5, device="tpu", generator=g).cpu(), a)
    assert torch.equal(torch.empty(5, device="tpu").normal_(generator=g).cpu(), b)
    # a private generator leaves the default one alone
    torch.manual_seed(7)
    c = torch.rand(5, device="tpu").cpu()
    torch.manual_seed(7)
    torch.rand(5, device="tpu", generator=g)
    assert torch.equal(torch.rand(5, device="tpu").cpu(), c)
    g2 = torch.Generator(device="tpu").manual_seed(4)
    assert not torch.equal(torch.rand(5, device="tpu", generator=g2).cpu(), a)


def test_rng_state_roundtrip():
    torch.manual_seed(5)
    torch.rand(3, device="tpu")
    state = torch.tpu.get_rng_state()
    a = torch.randn(10, device="tpu").cpu()
    torch.tpu.set_rng_state(state)
    assert torch.equal(torch.randn(10, device="tpu").cpu(), a)
    with torch.random.fork_rng(device_type="tpu"):
        torch.rand(3, device="tpu")
    b = torch.randn(10, device="tpu").cpu()
    torch.tpu.set_rng_state(state)
    torch.randn(10, device="tpu")
    assert torch.equal(torch.randn(10, device="tpu").cpu(), b)


def test_reseeding_does_not_recompile():
    x = torch.zeros(64, device="tpu")

    def step(seed):
        torch.manual_seed(seed)
        x.uniform_()
        x.normal_(0.5 * seed, 1.0 + seed)  # mean and std are runtime operands too
        return F.dropout(x, 0.1 * (seed + 1)).cpu()

    step(0)
    before = torch_tpu.metrics.counters().get("compiles", 0)
    outs = [step(seed) for seed in range(1, 4)]
    assert torch_tpu.metrics.counters().get("compiles", 0) == before
    assert not torch.equal(outs[0], outs[1])


# ---------------------------------------------------------------- dropout
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("p", [0.2, 0.5])
def test_dropout_scaling_and_backward_mask(dtype, p):
    x = (torch.rand(N // 4, dtype=torch.float64) + 0.5).to(dtype).to("tpu").requires_grad_()
    y = F.dropout(x, p, training=True)
    (y * 3).sum().backward()
    xc, yc, gc = x.detach().cpu(), y.detach().cpu(), x.grad.cpu()
    kept = yc != 0
    assert abs(kept.double().mean() - (1 - p)) < 0.01
    scale = 1 / (1 - p)
    torch.testing.assert_close(yc[kept], (xc[kept].float() * scale).to(dtype))
    want = torch.where(kept, (torch.tensor(3.0, dtype=dtype) * torch.tensor(scale).to(dtype)), 0).to(dtype)
    torch.testing.assert_close(gc, want, rtol=1e-2 if dtype == torch.bfloat16 else 1e-5, atol=0)


def test_dropout_edge_cases():
    x = torch.randn(100, device="tpu")
    assert torch.equal(F.dropout(x, 0.5, training=False).cpu(), x.cpu())
    assert (F.dropout(x, 1.0, training=True).cpu() == 0).all()
    assert torch.equal(F.dropout(x, 0.0, training=True).cpu(), x.cpu())
    out, mask = torch.native_dropout(x, 0.5, False)
    assert torch.equal(out.cpu(), x.cpu()) and mask.dtype == torch.bool and mask.cpu().all()
    m = torch.nn.Dropout(0.5).to("tpu").eval()
    assert torch.equal(m(x).cpu(), x.cpu())


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_native_dropout_backward_matches_cpu(dtype):
    g = torch.randn(4, 5).to(dtype)
    mask = torch.rand(4, 5, generator=torch.Generator().manual_seed(0)) > 0.3
    check(torch.ops.aten.native_dropout_backward, g, mask, 1 / 0.7)


# ---------------------------------------------------------------- errors
def test_errors():
    for device in ["cpu", "tpu"]:
        with pytest.raises(RuntimeError):
            torch.empty(4, device=device).normal_(0, -1)
        with pytest.raises(RuntimeError):
            torch.empty(4, dtype=torch.int64, device=device).random_(5, 2)
        with pytest.raises(RuntimeError):
            torch.multinomial(torch.tensor([0.5, 0.5], device=device), 3)  # without replacement, 3 > 2
        with pytest.raises(RuntimeError):
            torch.multinomial(torch.ones(2, 2, 2, device=device), 1)


def test_uniform_bad_range_raises():
    with pytest.raises(RuntimeError):
        torch.empty(4).uniform_(3, 2)
    with pytest.raises(RuntimeError):
        torch.empty(4, device="tpu").uniform_(3, 2)


@pytest.mark.parametrize("call", [lambda t: t.cauchy_(0, -1), lambda t: t.exponential_(-1),
                                  lambda t: t.geometric_(1.5), lambda t: t.log_normal_(0, -1),
                                  lambda t: t.normal_(0, -1), lambda t: t.bernoulli_(2.0),
                                  lambda t: torch.multinomial(t.abs(), 0), lambda t: torch.multinomial(t.abs(), 9)])
def test_bad_distribution_parameters_raise_like_cpu(call):
    for device in ("cpu", "tpu"):
        with pytest.raises(RuntimeError):
            call(torch.rand(4, device=device))
