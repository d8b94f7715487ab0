"""Indexing and shape ops on tpu against CPU: cat/stack, flip, roll, repeat, tril/triu, constant padding,
advanced indexing (index, index_put with long indices and boolean masks), gather/scatter and their
reductions, index_select/add/copy/fill, masked_fill/scatter, embedding, take, the *_scatter ops; forward
across dtypes, backward in float32, in-place and out= variants, and error cases."""
import pytest
import torch
import torch.nn.functional as F

from tpu_check import assert_close, check

DTYPES = [torch.float32, torch.bfloat16, torch.float16, torch.int64, torch.int32, torch.bool]


def make(dtype, shape=(3, 4), seed=0):
    g = torch.Generator().manual_seed(seed)
    if dtype == torch.bool:
        return torch.randint(0, 2, shape, generator=g).bool()
    if not dtype.is_floating_point:
        return torch.randint(-5, 6, shape, generator=g).to(dtype)
    return (torch.rand(shape, generator=g, dtype=torch.float64) * 6 - 3).to(dtype)


def idx(*values, dtype=torch.int64):
    return torch.tensor(values, dtype=dtype)


def same_error(fn, *args, error=RuntimeError):
    """fn raises `error` on CPU and on tpu alike."""
    with pytest.raises(error):
        fn(*args)
    with pytest.raises(error):
        fn(*[a.to("tpu") if isinstance(a, torch.Tensor) else a for a in args])


# ---------------------------------------------------------------- shape ops
@pytest.mark.parametrize("dtype", DTYPES)
def test_cat_dtypes(dtype):
    check(lambda a, b: torch.cat([a, b], 1), make(dtype, (2, 3)), make(dtype, (2, 2), seed=1))


@pytest.mark.parametrize("dim", [0, 1, -1])
def test_cat_grad(dim):
    check(lambda a, b, c: torch.cat([a, b, c], dim), make(torch.float32, (2, 3)), make(torch.float32, (2, 3), 1),
          make(torch.float32, (2, 3), 2), grad=True)


def test_cat_empty_promotion_out():
    check(lambda a, e: torch.cat([a, e, a]), make(torch.float32, (2, 3)), torch.empty(0))  # legacy 1-D empty
    check(lambda a, e: torch.cat([e, a], 0), make(torch.float32, (2, 3)), torch.empty(0, 3))
    check(lambda a, b: torch.cat([a, b]), make(torch.int32, (2, 3)), make(torch.float32, (1, 3)))
    check(lambda a, b, o: torch.cat([a, b], 1, out=o), make(torch.float32, (2, 3)), make(torch.float32, (2, 1)),
          torch.empty(2, 4))


def test_stack_grad():
    check(lambda a, b: torch.stack([a, b], 1), make(torch.float32, (2, 3)), make(torch.float32, (2, 3), 1), grad=True)
    check(lambda a, b: torch.stack([a, b], -1), make(torch.bfloat16, (2, 3)), make(torch.bfloat16, (2, 3), 1))
    check(lambda a, b: torch.stack([a, b]), make(torch.int32, (3,)), make(torch.int64, (3,), 1))
    check(lambda a, o: torch.stack([a, a, a], 0, out=o), make(torch.float32, (2,)), torch.empty(3, 2))


@pytest.mark.parametrize("dtype", DTYPES)
def test_flip_dtypes(dtype):
    check(lambda x: torch.flip(x, [0, -1]), make(dtype, (3, 4)))


def test_flip_grad():
    check(lambda x: torch.flip(x, [1]), make(torch.float32, (2, 3, 4)), grad=True)
    check(lambda x: torch.fliplr(x) * 2, make(torch.float32, (3, 4)), grad=True)


@pytest.mark.parametrize("shifts,dims", [(1, 0), (-2, 1), ((1, 5), (0, 1)), (3, None), (-7, None)])
def test_roll(shifts, dims):
    check(lambda x: torch.roll(x, shifts, dims), make(torch.float32, (3, 4)), grad=True)


def test_roll_dtypes():
    for dtype in DTYPES:
        check(lambda x: torch.roll(x, 2, 1), make(dtype, (3, 4)))


def test_repeat_tile():
    check(lambda x: x.repeat(2, 1, 3), make(torch.float32, (2, 3)), grad=True)
    check(lambda x: x.repeat(3, 2), make(torch.bool, (2,)))
    check(lambda x: x.repeat(0, 2), make(torch.float32, (2, 3)))
    check(lambda x: torch.tile(x, (2,)), make(torch.int64, (2, 3)))


@pytest.mark.parametrize("dtype", DTYPES)
def test_tril_triu_dtypes(dtype):
    x = make(dtype, (4, 5))
    check(lambda x: (torch.tril(x), torch.triu(x, 1)), x)


@pytest.mark.parametrize("k", [-1, 0, 2])
def test_tril_triu_grad(k):
    check(lambda x: torch.tril(x, k) + torch.triu(x, k), make(torch.float32, (2, 3, 4)), grad=True)


def test_tril_inplace_out():
    check(lambda x: x.clone().tril_(1), make(torch.float32, (4, 4)))
    check(lambda x, o: torch.triu(x, -1, out=o), make(torch.float32, (3, 4)), torch.empty(3, 4))


@pytest.mark.parametrize("pad", [(1, 2), (0, 1, 2, 0), (-1, 2, 1, -1)])
def test_constant_pad(pad):
    check(lambda x: F.pad(x, pad, value=1.5), make(torch.float32, (3, 4)), grad=True)
    check(lambda x: F.pad(x, pad, value=3), make(torch.int32, (3, 4)))


# ---------------------------------------------------------------- advanced indexing
@pytest.mark.parametrize("dtype", DTYPES)
def test_index_dtypes(dtype):
    check(lambda x, i: x[i], make(dtype, (4, 3)), idx(0, 3, -1, 1))


INDEXERS = {
    "rows": (lambda x, i, j: x[i], (3, 4, 5)),
    "cols": (lambda x, i, j: x[:, i], (3, 4, 5)),
    "last": (lambda x, i, j: x[..., j], (3, 4, 5)),
    "pair": (lambda x, i, j: x[i, j], (3, 4, 5)),
    "adjacent": (lambda x, i, j: x[:, i, j], (3, 4, 5)),
    "split": (lambda x, i, j: x[i, :, j], (3, 4, 5)),
    "broadcast": (lambda x, i, j: x[i[:, None], j[None, :]], (4, 5)),
    "slice_then": (lambda x, i, j: x[1:, i], (3, 4, 5)),
}


@pytest.mark.parametrize("name", INDEXERS)
def test_index_patterns(name):
    fn, shape = INDEXERS[name]
    check(fn, make(torch.float32, shape), idx(0, -1, 2), idx(1, 0, -2), grad=True)


def test_index_int32_2d_and_duplicates():
    check(lambda x, i: x[i], make(torch.float32, (5, 3)), idx(0, 4, -5, dtype=torch.int32))
    check(lambda x, i: x[i], make(torch.float32, (5, 3)), torch.tensor([[0, 1], [1, 1], [4, -1]]), grad=True)


def test_index_bool_mask():
    x = make(torch.float32, (4, 5))
    check(lambda x, m: x[m], x, x > 0, grad=True)
    check(lambda x, m: x[m], x, torch.tensor([True, False, True, True]), grad=True)
    check(lambda x, m: x[:, m], x, torch.tensor([True, False, False, True, True]), grad=True)


def test_cpu_index_tensors():
    # as on CUDA, index tensors (and masks) may live on the CPU
    x = make(torch.float32, (4, 5))
    i, m = idx(0, -1, 2), torch.tensor([True, False, True, True])
    t = x.to("tpu")
    assert_close(t[i], x[i])
    assert_close(t[:, i], x[:, i])
    assert_close(t[m], x[m])
    y, z = x.clone(), t.clone()
    y[i] = 1.5
    z[i] = 1.5
    y[m, 1] += 2
    z[m, 1] += 2
    assert_close(z, y)


def test_index_put():
    x = make(torch.float32, (5, 4))
    check(lambda x, i, v: x.clone().index_put_((i,), v), x, idx(0, -1, 2), make(torch.float32, (3, 4), 1))
    check(lambda x, i, j, v: x.clone().index_put_((i, j), v), x, idx(0, 1, 2), idx(3, -1, 0), make(torch.float32, (3,)))

    def setitem(x, i, v):
        y = x.clone()
        y[:, i] = v
        return y

    check(setitem, x, idx(1, 3), make(torch.float32, (5, 1), 2), grad=True)
    check(lambda x, i: setitem(x, i, 2.5), make(torch.int64, (5, 4)), idx(0, -1))


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.int64])
def test_index_put_accumulate(dtype):
    x = make(dtype, (5, 3))
    i = idx(0, 2, 0, 4, 2, 0)
    check(lambda x, i, v: x.clone().index_put_((i,), v, accumulate=True), x, i, make(dtype, (6, 3), 1))
    check(lambda x, i, v: torch.index_put(x, (i,), v, True), x, i, make(dtype, (3,), 2))


def test_index_put_mask():
    x = make(torch.float32, (4, 5))

    def fill(x, m, v):
        y = x.clone()
        y[m] = v
        return y

    check(fill, x, x > 0, 0.5)
    check(fill, x, x > 0, torch.tensor(2.0))
    m = torch.tensor([True, False, True, True])
    check(fill, x, m, make(torch.float32, (3, 5), 1), grad=True)  # one row per true position
    check(fill, x, m, make(torch.float32, (5,), 2), grad=True)
    check(lambda x, m, v: x.clone().index_put_((m,), v, accumulate=True), x, x > 0, torch.tensor(1.0))

    def fill_cols(x, m, v):
        y = x.clone()
        y[:, m] = v
        return y

    check(fill_cols, x, torch.tensor([False, True, True, False, True]), make(torch.float32, (4, 3), 3), grad=True)
    # a mask with another index tensor
    check(lambda x, m, i, v: x.clone().index_put_((m, i), v), x, m, idx(0, 4, 1), make(torch.float32, (3,), 4))
    check(lambda x, m, i, v: x.clone().index_put_((m, i), v, accumulate=True), x, m, idx(2), torch.tensor(1.0))


# ---------------------------------------------------------------- gather / scatter
@pytest.mark.parametrize("dim", [0, 1, -1])
def test_gather(dim):
    x = make(torch.float32, (3, 4))
    index = torch.tensor([[0, 2, 1], [1, 0, 0]]) if dim == 0 else torch.tensor([[0, 3], [2, 2], [1, 0]])
    check(lambda x, i: torch.gather(x, dim, i), x, index, grad=True)


def test_gather_dtypes_take_along_dim():
    for dtype in DTYPES:
        check(lambda x, i: torch.gather(x, 1, i), make(dtype, (3, 4)), torch.tensor([[0, 3], [2, 2], [1, 0]]))
    check(lambda x, i: torch.take_along_dim(x, i, 1), make(torch.float32, (3, 4)), torch.tensor([[3], [0], [1]]),
          grad=True)
    check(lambda x, i: torch.gather(x, 0, i), torch.tensor(2.5), torch.tensor(0))


def test_scatter_src_value():
    x = make(torch.float32, (3, 5))
    i = torch.tensor([[0, 2, 1, 4], [3, 1, 0, 2]])
    check(lambda x, i, s: torch.scatter(x, 1, i, s), x, i, make(torch.float32, (2, 4), 1), grad=True)
    check(lambda x, i, s: torch.scatter(x, 1, i, s), x, i, make(torch.float32, (3, 6), 1))  # src larger
    check(lambda x, i: torch.scatter(x, 1, i, 1.25), x, i)
    check(lambda x, i: x.clone().scatter_(0, i, -1.0), x, torch.tensor([[2, 0, 1]]))
    check(lambda x, i, s: torch.scatter(x, 1, i, s), make(torch.int32, (3, 5)), i, make(torch.int32, (2, 4), 1))


@pytest.mark.parametrize("reduce", ["add", "multiply"])
def test_scatter_reduce_legacy(reduce):
    x = make(torch.float32, (3, 4))
    i = torch.tensor([[0, 0, 2, 0], [1, 2, 2, 1]])
    check(lambda x, i, s: torch.scatter(x, 0, i, s, reduce=reduce), x, i, make(torch.float32, (2, 4), 1))
    check(lambda x, i: torch.scatter(x, 0, i, 2.0, reduce=reduce), x, i)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.int64])
def test_scatter_add(dtype):
    x = make(dtype, (4, 3))
    i = torch.tensor([[0, 1, 3], [0, 0, 3], [2, 1, 3]])
    check(lambda x, i, s: torch.scatter_add(x, 0, i, s), x, i, make(dtype, (3, 3), 1),
          grad=dtype == torch.float32)


@pytest.mark.parametrize("reduce", ["sum", "prod", "mean", "amax", "amin"])
@pytest.mark.parametrize("include_self", [True, False])
def test_scatter_reduce(reduce, include_self):
    x = make(torch.float32, (3, 5))
    i = torch.tensor([[0, 0, 2, 4], [1, 1, 1, 3]])
    s = make(torch.float32, (2, 4), 1)
    fn = lambda x, i, s: torch.scatter_reduce(x, 1, i, s, reduce, include_self=include_self)  # noqa: E731
    check(fn, x, i, s, grad=True)
    check(fn, make(torch.int64, (3, 5)), i, make(torch.int64, (2, 4), 1))


# ---------------------------------------------------------------- index_* along a dim
@pytest.mark.parametrize("dtype", DTYPES)
def test_index_select_dtypes(dtype):
    check(lambda x, i: torch.index_select(x, 1, i), make(dtype, (3, 4)), idx(3, 0, 0))


@pytest.mark.parametrize("dim", [0, 1, -1])
def test_index_select_grad(dim):
    check(lambda x, i: torch.index_select(x, dim, i), make(torch.float32, (3, 4, 2)), idx(1, 0, 1), grad=True)


def test_index_select_0d_and_out():
    check(lambda x, i: torch.index_select(x, 0, i), make(torch.float32, (4,)), torch.tensor(2))
    check(lambda x, i, o: torch.index_select(x, 0, i, out=o), make(torch.float32, (4, 2)), idx(3, 1), torch.empty(2, 2))


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.int64])
def test_index_add(dtype):
    x = make(dtype, (4, 3))
    check(lambda x, i, s: torch.index_add(x, 0, i, s), x, idx(0, 3, 0), make(dtype, (3, 3), 1),
          grad=dtype == torch.float32)
    check(lambda x, i, s: x.clone().index_add_(1, i, s, alpha=2), x, idx(2, 2), make(dtype, (4, 2), 2))


def test_index_copy_fill():
    x = make(torch.float32, (4, 3))
    check(lambda x, i, s: torch.index_copy(x, 0, i, s), x, idx(3, 0), make(torch.float32, (2, 3), 1), grad=True)
    check(lambda x, i, s: x.clone().index_copy_(1, i, s), x, idx(2), make(torch.float32, (4, 1), 1))
    check(lambda x, i: torch.index_fill(x, 1, i, -2.0), x, idx(0, -1), grad=True)
    check(lambda x, i, v: x.clone().index_fill_(0, i, v), x, idx(1, 2), torch.tensor(7.0))
    check(lambda x, i: torch.index_fill(x, 0, i, True), make(torch.bool, (3, 2)), idx(1))
    check(lambda x, i: torch.index_fill(x, 1, i, 4), make(torch.int32, (3, 2)), idx(1))


@pytest.mark.parametrize("reduce", ["prod", "mean", "amax", "amin"])
@pytest.mark.parametrize("include_self", [True, False])
def test_index_reduce(reduce, include_self):
    fn = lambda x, i, s: torch.index_reduce(x, 0, i, s, reduce, include_self=include_self)  # noqa: E731
    i = idx(0, 0, 2, 3)
    check(fn, make(torch.float32, (4, 3)), i, make(torch.float32, (4, 3), 1), grad=True)
    check(fn, make(torch.int64, (4, 3)), i, make(torch.int64, (4, 3), 1))
    check(lambda x, i, s: x.clone().index_reduce_(1, i, s, reduce, include_self=include_self),
          make(torch.bfloat16, (2, 3)), idx(1, 1), make(torch.bfloat16, (2, 2), 1))


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
@pytest.mark.parametrize("reduce", ["prod", "mean"])
def test_index_reduce_half_rounds_at_each_step(dtype, reduce):
    # CPU reduces one source slice after another in self's dtype: 2048 + 1 + 1 stays 2048 in float16
    # (a float32 sum rounded once gives 2050); tpu matches it bit for bit
    x = torch.full((2, 3), 3.0, dtype=dtype)
    src = torch.tensor([[2048.0, 1.5, -7.0], [1.0, 1.25, 3.0], [1.0, 1.125, 0.5], [5.0, 2.0, 1.0]], dtype=dtype)
    i = torch.tensor([0, 0, 0, 1])
    for include_self in (True, False):
        expected = x.clone().index_reduce_(0, i, src, reduce, include_self=include_self)
        got = x.to("tpu").index_reduce_(0, i.to("tpu"), src.to("tpu"), reduce, include_self=include_self)
        assert torch.equal(got.cpu(), expected), (include_self, got.cpu(), expected)


EMPTY = torch.tensor([], dtype=torch.int64)


@pytest.mark.filterwarnings("ignore:index_reduce\\(\\) is in beta")
@pytest.mark.parametrize("reduce", ["prod", "mean", "amax", "amin"])
@pytest.mark.parametrize("include_self", [True, False])
def test_index_reduce_empty_index(reduce, include_self):
    # nothing to reduce: self unchanged, as on CPU (PyTorch's Meta kernel of the out= form raised)
    kw = dict(include_self=include_self)
    x = make(torch.float32, (4, 3))
    check(lambda x, i, s: x.clone().index_reduce_(0, i, s, reduce, **kw), x, EMPTY, torch.zeros(0, 3))
    check(lambda x, i, s: x.clone().index_reduce_(1, i, s, reduce, **kw), x, EMPTY, torch.zeros(4, 0))
    check(lambda x, i, s: torch.index_reduce(x, 0, i, s, reduce, **kw), x, EMPTY, torch.zeros(0, 3))
    check(lambda x, i, s, o: torch.index_reduce(x, 0, i, s, reduce, out=o, **kw), x, EMPTY, torch.zeros(0, 3),
          torch.empty(4, 3))
    check(lambda x, i, s: x.clone().index_reduce_(0, i, s, reduce, **kw), make(torch.int64, (5,)),
          EMPTY.int(), torch.zeros(0, dtype=torch.int64))


@pytest.mark.filterwarnings("ignore:index_reduce\\(\\) is in beta")
def test_index_reduce_shape_errors():
    same_error(lambda x, i, s: torch.index_reduce(x, 0, i, s, "amax"), torch.tensor(5.0), idx(0, 0),
               torch.tensor([3.0, 9.0]))
    same_error(lambda x, i, s: torch.index_reduce(x, 0, i, s, "amax"), make(torch.float32, (4, 3)), idx(0, 1),
               make(torch.float32, (2, 2)))
    same_error(lambda x, i, s: x.clone().index_reduce_(0, i, s, "amin"), make(torch.float32, (4, 3)), idx(0, 1),
               make(torch.float32, (3, 3)), error=(RuntimeError, IndexError))


@pytest.mark.filterwarnings("ignore:index_reduce\\(\\) is in beta")
@pytest.mark.parametrize("reduce", ["amax", "amin"])
@pytest.mark.parametrize("dtype", [torch.int64, torch.int32, torch.uint8])
def test_extreme_reductions_exclude_self_int(reduce, dtype):
    # include_self=False: a position written starts from its first value, not from self (nor from a float identity)
    big = [2**62 + 1, -(2**62) - 3, 2**63 - 1, -(2**63), 2**53 + 1] if dtype == torch.int64 else [100, 7, 120, 0, 3]
    x = torch.tensor([[5, -5, 0, 9, 2], [big[0], big[1], big[2], big[3], big[4]], [1, 1, 1, 1, 1]]).to(dtype)
    if dtype == torch.uint8:
        x = x.abs()
    i = idx(0, 0, 2, 4, 4, 4)
    s = torch.tensor([[big[4], big[0], -1, 3, big[2], big[3]], [7, 8, 9, 10, 11, 12]])
    s = (s.abs() % 200 if dtype == torch.uint8 else s).to(dtype)
    for include_self in (False, True):
        kw = dict(include_self=include_self)
        check(lambda x, i, s: torch.scatter_reduce(x, 1, i.expand(2, 6), s, reduce, **kw), x[:2], i, s)
        check(lambda x, i, s: x.clone().scatter_reduce_(0, i.view(1, 6)[:, :5].expand(2, 5) % 3, s[:, :5], reduce,
                                                        **kw), x, i, s)
        check(lambda x, i, s: torch.index_reduce(x, 1, i, s, reduce, **kw), x[:2], i, s)
        check(lambda x, i, s: x.clone().index_reduce_(0, i[:2] % 3, s[:, :5], reduce, **kw), x, i, s)


def test_index_empty_and_zero_size():
    x = make(torch.float32, (4, 3))
    z = torch.zeros(0, 3)
    for e in (EMPTY, EMPTY.int(), torch.zeros(2, 0, dtype=torch.int64)):
        check(lambda x, i: x[i], x, e, grad=True)
        check(lambda x, i: x[:, i], x, e, grad=True)
        check(lambda x, i: x[i], z, e)
        check(lambda x, i: torch.ops.aten.index.Tensor(x, [None, i]), z, e)
    check(lambda x, i: x[i, i], x, EMPTY)
    check(lambda x, i, j: x[i, j], x, torch.zeros(0, 1, dtype=torch.int64), EMPTY)
    check(lambda x, i, j: x[i, j], x, idx(0, 1).view(2, 1), EMPTY, grad=True)
    check(lambda x, i: x[:, i], z, idx(1, 2))  # a zero-size result: nothing read
    check(lambda x, i: x[i], torch.zeros(3, 0, 2), idx(0, 2))
    check(lambda x, i: x[1:1][i], x, EMPTY)
    check(lambda x: x[[]], x)
    # every index into a dim of size 0 is out of bounds; too many indices for a 0-d tensor
    same_error(lambda x, i: x[i], z, idx(0), error=IndexError)
    same_error(lambda x, i: x[:, i], torch.zeros(3, 0), idx(0, 0), error=IndexError)
    same_error(lambda x, i: torch.ops.aten.index.Tensor(x, [i]), torch.tensor(3.0), EMPTY, error=IndexError)


def test_index_put_empty_and_zero_size():
    x = make(torch.float32, (4, 3))
    z = torch.zeros(0, 3)

    def put(x, i, v, accumulate=False):  # None: a whole dim
        return torch.ops.aten.index_put_(x.clone(), list(i), v, accumulate)

    def setitem(x, i, v):
        y = x.clone()
        y[i] = v
        return y

    for acc in (False, True):
        for e in (EMPTY, EMPTY.int(), torch.zeros(2, 0, dtype=torch.int64)):
            check(lambda x, i, v: put(x, (i,), v, acc), x, e, torch.tensor(1.5))
            check(lambda x, i, v: put(x, (i,), v, acc), x, e, make(torch.float32, (3,), 1))
            check(lambda x, i, v: put(x, (i, i), v, acc), x, e, torch.tensor(1.5))
            check(lambda x, i, v: put(x, (i,), v, acc), z, e, torch.tensor(1.5))
        check(lambda x, i, v: put(x, (i,), v, acc), x, EMPTY, torch.zeros(0, 3), grad=True)
        check(lambda x, i, v: put(x, (None, i), v, acc), x, EMPTY, torch.zeros(4, 0))
        check(lambda x, i, v: put(x, (None, i), v, acc), z, idx(1), torch.tensor(2.0))
        check(lambda x, i, v: put(x, (i,), v, acc), torch.zeros(3, 0, 2), idx(1), torch.zeros(0, 2))
        same_error(lambda x, i, v: put(x, (i,), v, acc), z, idx(0), torch.tensor(1.0), error=IndexError)
        same_error(lambda x, i, v: put(x, (i,), v, acc), torch.tensor(3.0), EMPTY, torch.tensor(1.0),
                   error=IndexError)
    check(lambda x, i: setitem(x, i, 1.0), x, EMPTY)
    check(lambda x, i, v: setitem(x, i, v), x, EMPTY, torch.zeros(0, 3))
    check(lambda x, i: setitem(x, (slice(None), i), 1.0), x, EMPTY)
    check(lambda x, i: setitem(x, (Ellipsis, i), 2.0), torch.zeros(2, 3, 0), EMPTY)
    # boolean masks selecting nothing, with nothing to write
    check(lambda x, m, v: setitem(x, m, v), z, torch.zeros(0, dtype=torch.bool), torch.zeros(0, 3))
    check(lambda x, m, v: setitem(x, m, v), x, torch.zeros(4, 3, dtype=torch.bool), torch.zeros(0))
    check(lambda x, m, v: setitem(x, m, v), x, torch.zeros(4, dtype=torch.bool), torch.zeros(0, 3))
    check(lambda x, m, v: put(x, (m,), v, True), x, torch.zeros(4, dtype=torch.bool), torch.zeros(0, 3))


# ---------------------------------------------------------------- masks
@pytest.mark.parametrize("dtype", DTYPES)
def test_masked_fill_dtypes(dtype):
    x = make(dtype, (3, 4))
    m = make(torch.bool, (3, 4), 5)
    check(lambda x, m: x.masked_fill(m, 1), x, m)
    check(lambda x, m, v: x.masked_fill(m, v), x, m, torch.tensor(0).to(dtype))


def test_masked_fill_grad_broadcast():
    x = make(torch.float32, (3, 4))
    check(lambda x, m: x.masked_fill(m, -1.5), x, torch.tensor([True, False, True, False]), grad=True)
    check(lambda x, m: x.clone().masked_fill_(m, float("-inf")), x, make(torch.bool, (3, 1), 3))
    check(lambda x, m, v: x.masked_fill(m, v), x, x > 0, torch.tensor(2.0), grad=True)


def test_masked_fill_cpu_scalar_value():
    # a 0-d CPU tensor as the value, as CUDA accepts (SEW-D's XSoftmax passes one)
    x = make(torch.float32, (3, 4))
    m = make(torch.bool, (3, 4), 5)
    value = torch.tensor(torch.finfo(torch.float32).min)
    assert_close(x.to("tpu").masked_fill(m.to("tpu"), value), x.masked_fill(m, value))
    assert_close(x.to("tpu").masked_fill_(m.to("tpu"), value), x.clone().masked_fill_(m, value))


def test_masked_scatter():
    x = make(torch.float32, (3, 4))
    m = make(torch.bool, (3, 4), 5)
    check(lambda x, m, s: x.masked_scatter(m, s), x, m, make(torch.float32, (3, 5), 1), grad=True)
    check(lambda x, m, s: x.clone().masked_scatter_(m, s), x, torch.tensor([True, False, False, True]),
          make(torch.float32, (6,), 2))
    check(lambda x, m, s: x.masked_scatter(m, s), make(torch.int64, (3, 4)), m, make(torch.int64, (12,), 1))


# ---------------------------------------------------------------- embedding, take
@pytest.mark.parametrize("padding_idx,scale", [(None, False), (2, False), (None, True), (-1, True)])
def test_embedding(padding_idx, scale):
    w = make(torch.float32, (6, 3))
    i = torch.tensor([[0, 2, 5], [2, 2, 1]])
    check(lambda w, i: F.embedding(i, w, padding_idx=padding_idx, scale_grad_by_freq=scale), w, i, grad=True)


def test_embedding_bfloat16_and_module():
    check(lambda w, i: F.embedding(i, w), make(torch.bfloat16, (4, 8)), idx(3, 0, 3))
    emb = torch.nn.Embedding(10, 4)
    i = torch.tensor([[1, 9], [0, 1]])
    out = emb.to("tpu")(i.to("tpu"))
    assert_close(out, emb.cpu()(i))


def test_take():
    check(lambda x, i: torch.take(x, i), make(torch.float32, (3, 4)), torch.tensor([[0, 11], [-1, 5]]), grad=True)
    check(lambda x, i: torch.take(x, i), make(torch.int32, (2, 2)), idx(2, 0))
    check(lambda x, i, s: x.clone().put_(i, s), make(torch.float32, (3, 4)), idx(0, -1, 5),
          make(torch.float32, (3,), 1))
    check(lambda x, i, s: x.put(i, s, accumulate=True), make(torch.float32, (3, 4)), torch.tensor([[1, 1], [-1, 1]]),
          make(torch.float32, (2, 2), 1), grad=True)
    check(lambda x, i, s: torch.put(x, i, s), make(torch.int64, (2, 2)), idx(3), make(torch.int64, (1,), 1))


def test_unsafe_index_ops():
    aten = torch.ops.aten
    x = make(torch.float32, (4, 5))
    i, j = idx(0, 3, 3), idx(4, 0, 1)
    check(lambda x, i: aten._unsafe_index(x, [None, i]), x, j)
    check(lambda x, i, v: aten._unsafe_index_put(x, [i], v, True), x, i, make(torch.float32, (3, 5), 1))
    m = torch.tensor([True, False, True])
    check(lambda x, m, i, j: aten._unsafe_masked_index(x, m, [i, j], -1.0), x, m, i, j)
    check(lambda x, m, i, j, v: aten._unsafe_masked_index_put_accumulate(x, m, [i, j], v), x, m, i, j,
          make(torch.float32, (3,), 2))


# ---------------------------------------------------------------- *_scatter ops
def test_view_scatter_ops():
    x = make(torch.float32, (4, 5))
    check(lambda x, s: torch.slice_scatter(x, s, 1, 1, 5, 2), x, make(torch.float32, (4, 2), 1), grad=True)
    check(lambda x, s: torch.select_scatter(x, s, 0, -1), x, make(torch.float32, (5,), 2), grad=True)
    check(lambda x, s: torch.diagonal_scatter(x, s, 1), x, make(torch.float32, (4,), 3), grad=True)
    check(lambda x, s: torch.as_strided_scatter(x, s, (2, 2), (5, 1), 3), x, make(torch.float32, (2, 2), 4),
          grad=True)
    check(lambda x, s: torch.slice_scatter(x, s, 0, -2), make(torch.int64, (4, 5)), make(torch.int64, (2, 5), 1))
    check(lambda x, s: torch.diagonal_scatter(x, s, -1, 1, 0), make(torch.bfloat16, (4, 5)),
          make(torch.bfloat16, (4,), 1))


def test_view_backward_ops():
    aten = torch.ops.aten
    g = make(torch.float32, (2, 5))
    check(lambda g: aten.slice_backward(g, [4, 5], 0, 1, 4, 2), g)
    check(lambda g: aten.select_backward(g[0], [3, 5], 0, -1), g)
    check(lambda g: aten.diagonal_backward(g[0, :2], [3, 4], 1, 1, 0), g)
    check(lambda g, m: aten.masked_scatter_backward(g, m, [3, 4]), g, make(torch.bool, (2, 5), 1))


# ---------------------------------------------------------------- errors
def test_errors():
    same_error(lambda a, b: torch.cat([a, b], 1), make(torch.float32, (2, 3)), make(torch.float32, (3, 3)))
    same_error(lambda x, i: torch.gather(x, 1, i), make(torch.float32, (2, 3)), idx(0, 1))
    same_error(lambda x, i: torch.index_select(x, 0, i), make(torch.float32, (2, 3)), torch.tensor([0.0]),
               error=(IndexError, RuntimeError))
    same_error(lambda x, m: x.masked_fill(m, 1.0), make(torch.float32, (2, 3)), torch.ones(2, 3, dtype=torch.int64))
    same_error(lambda x, m: x[m], make(torch.float32, (2, 3)), torch.ones(3, dtype=torch.bool), error=IndexError)
    # CPU raises IndexError; the meta kernel that checks tpu calls raises RuntimeError (as on any meta device)
    same_error(lambda x, i: x[i], make(torch.float32, (2, 3)), torch.tensor([0.5]), error=(IndexError, RuntimeError))
    same_error(lambda x: torch.tril(x), make(torch.float32, (3,)))
    same_error(lambda x, i, s: torch.scatter(x, 0, i, s), make(torch.float32, (2, 3)), idx(0, 1),
               make(torch.float32, (2, 3)))


def test_nonzero_runs_natively():
    import torch_tpu
    x = torch.tensor([[0, 1.5, 0], [2, 0, 3]])
    for t in (x, x.bool(), x.int(), torch.tensor(0.0), torch.zeros(0, 3), x.to(torch.complex64)):
        assert torch.equal(torch.nonzero(t.to("tpu")).cpu(), torch.nonzero(t))
    for size in (2, 5):
        assert torch.equal(torch.nonzero_static(x.to("tpu"), size=size).cpu(), torch.nonzero_static(x, size=size))
    assert not any(k.startswith(("cpu_fallback:nonzero", "host_ops:nonzero")) for k in torch_tpu.metrics.counters())
