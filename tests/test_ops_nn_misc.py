"""csrc/lower/nn_misc.cpp: embedding_bag, cdist / pdist, prelu, rrelu, renorm, embedding max_norm,
multi-margin losses, segment_reduce, ctc_loss, _batch_norm_with_update; tpu against CPU."""
import pytest
import torch
import torch.nn.functional as F

from tpu_check import both_raise, check, to

torch.manual_seed(0)
LOW = (torch.float32, torch.bfloat16)


# ---- embedding_bag
IDX = torch.tensor([1, 2, 4, 5, 4, 3, 2, 0])
OFF = torch.tensor([0, 2, 2, 5])


@pytest.mark.parametrize("mode", ["sum", "mean", "max"])
@pytest.mark.parametrize("padding_idx", [None, 2])
def test_embedding_bag(mode, padding_idx):
    def fn(w, i, o):
        return F.embedding_bag(i, w, o, mode=mode, padding_idx=padding_idx)
    check(fn, torch.randn(6, 3), IDX, OFF, grad=True)


def test_embedding_bag_options():
    check(lambda w, i, o, p: F.embedding_bag(i, w, o, mode="sum", per_sample_weights=p),
          torch.randn(6, 3), IDX, OFF, torch.rand(8), grad=True)
    last = torch.tensor([0, 2, 2, 5, 8])
    for mode in ("mean", "max"):
        check(lambda w, i, o: F.embedding_bag(i, w, o, mode=mode, include_last_offset=True),
              torch.randn(6, 3), IDX, last, grad=True)
    check(lambda w, i: F.embedding_bag(i, w, mode="mean"), torch.randn(7, 4), torch.randint(0, 7, (3, 4)), grad=True)
    for dt in LOW[1:] + (torch.float16,):
        check(lambda w, i, o: F.embedding_bag(i, w, o, mode="mean"), torch.randn(6, 3, dtype=dt), IDX, OFF)


def test_embedding_max_norm():
    def fn(w, i):
        out = F.embedding(i, w, max_norm=1.0)
        return out, w
    check(fn, torch.randn(6, 3) * 2, torch.tensor([[0, 2], [2, 5]]))


# ---- cdist / pdist
@pytest.mark.parametrize("p", [0.0, 0.5, 1.0, 1.5, 2.0, 3.0, float("inf")])
def test_cdist_pdist(p):
    check(lambda a, b: torch.cdist(a, b, p=p), torch.randn(2, 4, 3), torch.randn(5, 3), grad=True)
    check(lambda a: F.pdist(a, p=p), torch.randn(5, 3), grad=True)


def test_cdist_errors():
    both_raise(RuntimeError, torch.cdist, torch.randn(4, 3), torch.randn(5, 2))
    both_raise(RuntimeError, F.pdist, torch.randn(2, 4, 3))


# ---- prelu, rrelu, renorm
@pytest.mark.parametrize("dtype", LOW)
def test_prelu(dtype):
    check(F.prelu, torch.randn(2, 3, 4, dtype=dtype), torch.rand(3, dtype=dtype), grad=dtype == torch.float32)
    check(F.prelu, torch.randn(5, dtype=dtype), torch.rand(1, dtype=dtype), grad=dtype == torch.float32)
    check(F.prelu, torch.tensor(-2.5, dtype=dtype), torch.tensor(0.3, dtype=dtype), grad=dtype == torch.float32)


def test_rrelu():
    check(lambda x: F.rrelu(x, 0.1, 0.3, training=False), torch.randn(4, 5), grad=True)
    x = torch.randn(64, device="tpu")
    noise = torch.zeros(64, device="tpu")
    y = torch.ops.aten.rrelu_with_noise(x, noise, 0.1, 0.3, True)
    x, y, noise = x.cpu(), y.cpu(), noise.cpu()
    neg = x <= 0
    assert torch.all(noise[~neg] == 1) and torch.all((noise[neg] >= 0.1) & (noise[neg] <= 0.3))
    torch.testing.assert_close(y, x * noise)
    assert noise[neg].unique().numel() > 1


@pytest.mark.parametrize("dtype", LOW)
def test_renorm(dtype):
    grad = dtype == torch.float32
    check(lambda x: torch.renorm(x, 2, 1, 1.0), torch.randn(3, 4, 2, dtype=dtype), grad=grad)
    check(lambda x: torch.renorm(x, 1, 0, 0.5), torch.randn(4, 3, dtype=dtype), grad=grad)
    check(lambda x: torch.renorm(x, float("inf"), -1, 0.5), torch.randn(4, 3, dtype=dtype), grad=grad)


# ---- margin losses
@pytest.mark.parametrize("reduction", ["none", "mean", "sum"])
def test_multi_margin_loss(reduction):
    y = torch.tensor([0, 3, 1, 4])
    check(lambda x: F.multi_margin_loss(x, y.to(x.device), reduction=reduction), torch.randn(4, 5), grad=True)
    w = torch.rand(5)
    check(lambda x: F.multi_margin_loss(x, y.to(x.device), p=2, margin=0.7, weight=w.to(x.device),
                                        reduction=reduction), torch.randn(4, 5), grad=True)
    check(lambda x: F.multi_margin_loss(x, torch.tensor(2, device=x.device), reduction=reduction), torch.randn(5),
          grad=True)


@pytest.mark.parametrize("reduction", ["none", "mean", "sum"])
def test_multilabel_margin_loss(reduction):
    y = torch.tensor([[2, 0, -1, 1], [1, -1, 2, 3], [3, 2, 1, 0]])
    check(lambda x: F.multilabel_margin_loss(x, y.to(x.device), reduction=reduction), torch.randn(3, 4), grad=True)
    check(lambda x: F.multilabel_margin_loss(x, torch.tensor([1, 3, -1, 0], device=x.device), reduction=reduction),
          torch.randn(4), grad=True)


def test_margin_loss_errors():
    both_raise(RuntimeError, F.multi_margin_loss, torch.randn(4, 5), torch.tensor([0, 1]))
    both_raise(RuntimeError, F.multilabel_margin_loss, torch.randn(3, 4), torch.tensor([[1, 2]]))


# ---- segment_reduce
@pytest.mark.parametrize("reduce", ["sum", "mean", "max", "min", "prod"])
def test_segment_reduce(reduce):
    lengths = torch.tensor([2, 0, 3, 1])
    offsets = torch.tensor([0, 2, 2, 5, 6])
    data = torch.randn(6, 2)
    check(lambda d: torch.segment_reduce(d, reduce, lengths=lengths.to(d.device), unsafe=True), data, grad=True)
    check(lambda d: torch.segment_reduce(d, reduce, offsets=offsets.to(d.device), initial=0.5), data, grad=True)
    d2 = torch.randn(2, 5, 3)
    l2 = torch.tensor([[2, 3], [1, 4]])
    check(lambda d: torch.segment_reduce(d, reduce, lengths=l2.to(d.device), axis=1, unsafe=True), d2, grad=True)
    check(lambda d: torch.segment_reduce(d, reduce, lengths=lengths.to(d.device), unsafe=True),
          data.to(torch.bfloat16))


# ---- ctc_loss
def test_ctc_loss():
    T, N, C = 6, 3, 5
    lp = torch.randn(T, N, C).log_softmax(2)
    tg = torch.randint(1, C, (N, 3))
    il, tl = [6, 5, 4], [3, 2, 0]
    for red in ("none", "sum", "mean"):
        check(lambda x: F.ctc_loss(x, tg.to(x.device), il, tl, reduction=red), lp, grad=True, atol=1e-5, rtol=1e-4)
    flat = torch.cat([tg[0], tg[1, :2]])
    check(lambda x: F.ctc_loss(x, flat.to(x.device), torch.tensor(il), torch.tensor(tl), reduction="sum"), lp,
          grad=True, atol=1e-5, rtol=1e-4)
    rep = torch.tensor([[1, 1, 2], [2, 2, 2], [3, 3, 3]])
    check(lambda x: F.ctc_loss(x, rep.to(x.device), [6, 2, 6], [3, 3, 3], reduction="none", zero_infinity=True), lp,
          grad=True, atol=1e-5, rtol=1e-4)


# ---- _batch_norm_with_update
def test_batch_norm_with_update():
    def fn(x, w, b, rm, rv):
        out = torch.ops.aten._batch_norm_with_update(x, w, b, rm, rv, 0.1, 1e-5)
        return out[:3], rm, rv
    check(fn, torch.randn(4, 3, 2), torch.rand(3), torch.rand(3), torch.zeros(3), torch.ones(3))
    x, w = torch.randn(4, 3, 2), torch.rand(3)
    check(lambda x, w: torch.ops.aten._batch_norm_with_update(x, w, None, torch.zeros(3, device=x.device),
                                                              torch.ones(3, device=x.device), 0.1, 1e-5)[0],
          x, w, grad=True)
