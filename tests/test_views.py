"""Views on tpu end to end (the ATen glue and the view read/write lowering, not rules): every view op
reads the right elements, in-place writes through a view reach the base and every other view of the
same storage, and autograd flows through views and through in-place writes into views."""
import pytest
import torch

from tpu_check import assert_close, check


def make(shape=(4, 6), dtype=torch.float32, seed=0):
    g = torch.Generator().manual_seed(seed)
    x = torch.rand(shape, generator=g, dtype=torch.float64) * 6 - 3
    return x.to(dtype) if dtype.is_floating_point else x.mul(10).to(dtype)


# ---------------------------------------------------------------- reading views
VIEWS = {
    "view": lambda x: x.view(6, 4),
    "view_infer": lambda x: x.view(-1),
    "reshape_noncontig": lambda x: x.t().reshape(24),
    "as_strided": lambda x: x.as_strided((3, 3), (5, 2), 1),
    "t": lambda x: x.t(),
    "transpose": lambda x: x.view(2, 2, 6).transpose(0, 2),
    "permute": lambda x: x.view(2, 3, 4).permute(2, 0, 1),
    "narrow": lambda x: x.narrow(1, 2, 3),
    "select": lambda x: x.select(1, -2),
    "slice_step": lambda x: x[1::2, ::3],
    "slice_step_t": lambda x: x.t()[::2, 1:],
    "expand": lambda x: x[:, :1].expand(4, 5),
    "expand_new_dim": lambda x: x[0].expand(3, 6),
    "unsqueeze": lambda x: x.unsqueeze(1),
    "squeeze": lambda x: x[:1].squeeze(0),
    "diagonal": lambda x: x.diagonal(1),
    "diagonal_neg": lambda x: x.diagonal(-2),
    "unfold": lambda x: x.unfold(1, 3, 2),
    "movedim_flatten": lambda x: x.view(2, 2, 6).movedim(0, -1).flatten(1),
    "unflatten": lambda x: x.unflatten(1, (2, 3)),
    "view_of_view": lambda x: x[1:, 2:].t()[1:, ::2],
}


@pytest.mark.parametrize("name", VIEWS)
def test_read_view(name):
    check(lambda x: VIEWS[name](x) * 1, make(), grad=True)  # read through a program
    check(lambda x: VIEWS[name](x).cpu().to("tpu") if x.device.type == "tpu" else VIEWS[name](x), make())


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.int64, torch.bool])
def test_read_view_dtypes(dtype):
    x = make(dtype=torch.float32).to(dtype) if dtype != torch.bool else make() > 0
    check(lambda x: (x.t()[::2] + x.t()[1::2]) if dtype != torch.bool else x.t()[::2] & x.t()[1::2], x)


def test_unbind_split_chunk():
    x = make()
    check(lambda x: [t * 2 for t in x.unbind(1)], x, grad=True)
    check(lambda x: [t + 1 for t in x.split(4, 1)], x, grad=True)
    check(lambda x: [t + 1 for t in x.split([1, 3], 0)], x, grad=True)
    check(lambda x: [t - 1 for t in x.chunk(3, 1)], x, grad=True)
    check(lambda x: [t - 1 for t in x.tensor_split(3, 0)], x)


@pytest.mark.parametrize("src,dst", [(torch.float32, torch.int32), (torch.int32, torch.float32),
                                     (torch.bfloat16, torch.float16), (torch.float16, torch.int16),
                                     (torch.int64, torch.float64)])
def test_view_dtype(src, dst):
    x = make(dtype=torch.float32).to(src)
    check(lambda x: x.view(dst), x)
    check(lambda x: x[:, 1:3].view(dst) if dst != torch.float64 else x.view(dst)[1:], x)


@pytest.mark.parametrize("dst", [torch.int16, torch.uint8, torch.float64])
def test_view_dtype_other_size(dst):
    check(lambda x: x.view(dst)[1:] if dst != torch.float64 else x.view(dst)[:, 1:], make())

    def write(x):
        y = x.clone()
        v = y.view(dst)
        v[1:3] = 0
        return y

    check(write, make())


def test_view_dtype_write():
    def fn(x):
        y = x.clone()
        y.view(torch.int32)[0] = 0x3F800000  # the bits of 1.0
        return y

    check(fn, make())


# ---------------------------------------------------------------- writing through views
def mutate(fn):
    """fn(base) mutates views of a fresh copy of base; returns the base and views taken before the write."""
    def run(x):
        y = x.clone()
        before = y.t()[1:3]
        fn(y)
        return y, before, y[::2]
    run.__name__ = fn.__name__
    return run


def set_column(y):
    y[:, 1] = torch.arange(4.0, device=y.device)


def set_scalar_strided(y):
    y[1::2, ::3] = 7.5


def add_transposed(y):
    y.t().add_(1)


def mul_every_other(y):
    y[::2].mul_(2)


def copy_into_diagonal(y):
    y.diagonal().copy_(torch.full((4,), -1.0, device=y.device))


def fill_narrow(y):
    y.narrow(1, 3, 2).fill_(3.0)


def zero_unfold(y):
    y.unfold(1, 2, 2)[:, :, 0].zero_()


def chained_views(y):
    v = y.view(2, 12)[:, 3:9].view(2, 3, 2)
    v.sub_(v.clone() * 2)


def inplace_permute(y):
    y.view(2, 2, 6).permute(2, 0, 1)[1:4].clamp_(-1, 1)


def select_then_index(y):
    y[2][torch.tensor([0, 5], device=y.device)] = 9.0


WRITES = [set_column, set_scalar_strided, add_transposed, mul_every_other, copy_into_diagonal, fill_narrow,
          zero_unfold, chained_views, inplace_permute, select_then_index]


@pytest.mark.parametrize("fn", WRITES, ids=[f.__name__ for f in WRITES])
def test_write_through_view(fn):
    check(mutate(fn), make())


def test_write_through_view_int_and_bfloat16():
    check(mutate(mul_every_other), make(dtype=torch.int32))
    check(mutate(add_transposed), make(dtype=torch.bfloat16))


def test_view_sees_later_writes():
    x = torch.zeros(3, 4, device="tpu")
    row, col, flat = x[1], x[:, 2], x.view(-1)
    x.add_(1)
    row.mul_(3)
    col.sub_(0.5)
    flat[0] = 10
    expected = torch.ones(3, 4)
    expected[1] *= 3
    expected[:, 2] -= 0.5
    expected.view(-1)[0] = 10
    for t, e in [(x, expected), (row, expected[1]), (col, expected[:, 2]), (flat, expected.view(-1))]:
        assert_close(t, e)


def test_out_into_view():
    def fn(x, a):
        y = x.clone()
        torch.add(a, 1, out=y[:, 1:3])
        torch.mul(a.t(), 2, out=y.t()[2:4])
        return y

    check(fn, make(), make((4, 2), seed=1))


# ---------------------------------------------------------------- autograd
def test_autograd_through_views():
    check(lambda x: x.t()[1:5, ::2].unsqueeze(0).expand(2, -1, -1) * x[:2, :4].t().unsqueeze(0), make(), grad=True)
    check(lambda x: x.unfold(0, 2, 1).sum(-1), make(), grad=True)
    check(lambda x: x.as_strided((3, 3), (4, 1), 2) * 2, make(), grad=True)
    check(lambda x: x.diagonal(0, 0, 1) + x.view(6, 4).diagonal(), make(), grad=True)


def test_autograd_inplace_into_views():
    def fn(x, z):
        y = x * 1
        y[:, 1] = z * 2
        y[::2].mul_(3)
        y.t()[0].add_(z[:1].sum())
        return y

    check(fn, make(), make((4,), seed=1), grad=True)


def test_autograd_leaf_view_inplace_error():
    for device in ("cpu", "tpu"):
        x = make().to(device).requires_grad_()
        with pytest.raises(RuntimeError):
            x[0].add_(1)


@pytest.mark.parametrize("call", [
    lambda d: torch.add(torch.ones(4, device=d), 1, out=torch.zeros(1, device=d).expand(4)),  # one element written twice
    lambda d: torch.ones(5, 1, device=d).logical_and_(torch.ones(5, 5, device=d)),  # in-place cannot broadcast self
    lambda d: (lambda x: torch.neg(x[1:], out=x[:-1]))(torch.arange(5.0, device=d)),  # out partly overlaps the input
])
def test_write_overlap_raises_like_cpu(call):
    for device in ("cpu", "tpu"):
        with pytest.raises(RuntimeError):
            call(device)
