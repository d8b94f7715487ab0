"""Foreach ops and optimizers on tpu against CPU: the _foreach_* ops torch.optim uses (List, Scalar,
ScalarList and Tensor overloads, in-place forms, norms), whole training runs with SGD / Adam / AdamW
in their foreach and fused forms, clip_grad_norm_, and an LR schedule that must not recompile."""
import pytest
import torch

import torch_tpu
from tpu_check import assert_close, check

torch.set_float32_matmul_precision("highest")
FLOATS = [torch.float32, torch.bfloat16]


def tensors(dtype=torch.float32, seed=0, positive=False, shapes=((3, 4), (5,), ())):
    g = torch.Generator().manual_seed(seed)
    out = []
    for s in shapes:
        x = torch.rand(s, generator=g, dtype=torch.float64)
        out.append((x + 0.5 if positive else (x - 0.5) * 4).to(dtype))
    return out


def inplace(op):
    """fn(xs, *args): applies the in-place foreach `op` to clones of xs and returns them."""
    def fn(xs, *args, **kwargs):
        xs = [x.clone() for x in xs]
        op(xs, *args, **kwargs)
        return xs
    fn.__name__ = op.__name__
    return fn


# ---------------------------------------------------------------- foreach ops
UNARY = ["abs", "neg", "exp", "sqrt", "rsqrt", "reciprocal", "sign", "sigmoid", "tanh", "log", "log1p", "expm1",
         "floor", "ceil", "round", "trunc", "sin", "cos", "erf", "zero"]


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("name", UNARY)
def test_foreach_unary(name, dtype):
    xs = tensors(dtype, positive=name in ("sqrt", "rsqrt", "log", "reciprocal"))
    if name != "zero":
        check(getattr(torch, f"_foreach_{name}"), xs)
    check(inplace(getattr(torch, f"_foreach_{name}_")), xs)


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("name", ["add", "sub", "mul", "div", "maximum", "minimum", "clamp_min", "clamp_max", "pow"])
def test_foreach_binary(name, dtype):
    op, op_ = getattr(torch, f"_foreach_{name}"), getattr(torch, f"_foreach_{name}_")
    xs, ys = tensors(dtype, positive=name == "pow"), tensors(dtype, seed=1, positive=name in ("div", "pow"))
    scalars = [0.5, -1.25, 2.0] if name != "pow" else [0.5, 2.0, 3.0]
    check(op, xs, ys)                      # List
    check(op, xs, 1.5)                     # Scalar
    check(op, xs, scalars)                 # ScalarList
    check(inplace(op_), xs, ys)
    check(inplace(op_), xs, 0.75)
    check(inplace(op_), xs, scalars)
    if name in ("add", "sub"):
        check(op, xs, ys, alpha=-0.5)
        check(inplace(op_), xs, ys, alpha=2)
    if name in ("add", "mul", "div"):      # Tensor: one 0-d tensor for all
        check(op, xs, torch.tensor(2.5, dtype=dtype))
        check(inplace(op_), xs, torch.tensor(-0.5, dtype=dtype))


def test_foreach_pow_scalar_and_tensor():
    check(torch._foreach_pow, 2.0, tensors())


def test_foreach_int_and_mixed_dtypes():
    ints = [torch.arange(6).reshape(2, 3), torch.arange(4, dtype=torch.int32)]
    check(torch._foreach_add, ints, 2)
    check(torch._foreach_mul, ints, 1.5)    # promotes to float
    check(inplace(torch._foreach_add_), ints, [1, 2])
    mixed = [torch.randn(3), torch.randn(4).bfloat16(), torch.randn(2).double()]
    check(torch._foreach_mul, mixed, 3.0)
    check(inplace(torch._foreach_addcmul_), mixed, mixed, mixed, 0.5)


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("name", ["addcmul", "addcdiv"])
def test_foreach_ternary(name, dtype):
    op, op_ = getattr(torch, f"_foreach_{name}"), getattr(torch, f"_foreach_{name}_")
    xs, t1, t2 = tensors(dtype), tensors(dtype, seed=1), tensors(dtype, seed=2, positive=True)
    check(op, xs, t1, t2)
    check(op, xs, t1, t2, 0.3)
    check(op, xs, t1, t2, [0.5, -2.0, 1.0])
    check(inplace(op_), xs, t1, t2, -0.7)
    check(inplace(op_), xs, t1, t2, [0.5, -2.0, 1.0])


@pytest.mark.parametrize("dtype", FLOATS)
def test_foreach_lerp(dtype):
    xs, ys, ws = tensors(dtype), tensors(dtype, seed=1), tensors(dtype, seed=2, positive=True)
    check(torch._foreach_lerp, xs, ys, 0.1)
    check(torch._foreach_lerp, xs, ys, ws)
    check(torch._foreach_lerp, xs, ys, [0.1, 0.3, 0.2])
    check(inplace(torch._foreach_lerp_), xs, ys, 0.3)


@pytest.mark.parametrize("dtype", FLOATS)
def test_foreach_copy_and_clone(dtype):
    xs, ys = tensors(dtype), tensors(torch.float32, seed=1)
    check(inplace(torch._foreach_copy_), xs, ys)  # converts to each destination's dtype
    check(torch._foreach_clone if hasattr(torch, "_foreach_clone") else torch.ops.aten._foreach_clone, xs)


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("ord", [2, 1, 0, 3, float("inf"), float("-inf")])
def test_foreach_norm(ord, dtype):
    check(torch._foreach_norm, tensors(dtype, shapes=((3, 4), (5,), (2, 2, 2))), ord)


def test_foreach_norm_dtype_and_max():
    xs = tensors(torch.bfloat16)
    check(torch._foreach_norm, xs, 2, dtype=torch.float32)
    check(torch._foreach_max, tensors(shapes=((3, 4), (5,))))
    check(torch._foreach_max, [torch.arange(5), torch.tensor([-3, -7])])


def test_foreach_autograd():
    check(lambda xs, ys: torch._foreach_mul(torch._foreach_add(xs, ys, alpha=2), 3.0), tensors(), tensors(seed=1),
          grad=True)


def test_foreach_runs_as_one_program():
    xs = [x.to("tpu") for x in tensors(shapes=((7,), (8,), (9,), (10,)))]
    torch._foreach_mul_(xs, 2.0)
    before = torch_tpu.metrics.counters().get("ops_dispatched", 0)
    torch._foreach_mul_(xs, 2.0)
    assert torch_tpu.metrics.counters()["ops_dispatched"] - before == 1


def test_foreach_errors():
    for device in ["cpu", "tpu"]:
        xs = [torch.ones(2, device=device), torch.ones(3, device=device)]
        with pytest.raises(RuntimeError):
            torch._foreach_add(xs, [torch.ones(2, device=device)])  # list lengths differ
        with pytest.raises(RuntimeError):
            torch._foreach_mul(xs, [1.0, 2.0, 3.0])
        with pytest.raises(RuntimeError):
            torch._foreach_add(xs, [torch.ones(2, device=device), torch.ones(4, device=device)])  # shapes differ


# ---------------------------------------------------------------- optimizers
def make_model():
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.Tanh(), torch.nn.Linear(8, 3))


def batches(n):
    g = torch.Generator().manual_seed(1)
    return [(torch.randn(6, 4, generator=g), torch.randn(6, 3, generator=g)) for _ in range(n)]


def train(device, make_opt, steps=4, clip=None, sched=None):
    model = make_model().to(device)
    opt = make_opt(model.parameters())
    scheduler = sched(opt) if sched else None
    norms = []
    for x, y in batches(steps):
        opt.zero_grad()
        loss = ((model(x.to(device)) - y.to(device)) ** 2).mean()
        loss.backward()
        if clip is not None:
            norms.append(torch.nn.utils.clip_grad_norm_(model.parameters(), clip[0], norm_type=clip[1],
                                                        foreach=True).detach().cpu())
        opt.step()
        if scheduler:
            scheduler.step()
    state = [t.detach().cpu() for s in opt.state.values() for t in s.values()
             if isinstance(t, torch.Tensor) and t.dim() > 0]
    return [p.detach().cpu() for p in model.parameters()], state, norms


OPTIMIZERS = {
    "sgd": (torch.optim.SGD, dict(lr=0.1)),
    "sgd_momentum": (torch.optim.SGD, dict(lr=0.1, momentum=0.9)),
    "sgd_nesterov_wd": (torch.optim.SGD, dict(lr=0.1, momentum=0.9, nesterov=True, weight_decay=0.01)),
    "sgd_dampening_maximize": (torch.optim.SGD, dict(lr=0.05, momentum=0.5, dampening=0.3, maximize=True)),
    "adam": (torch.optim.Adam, dict(lr=0.01)),
    "adam_wd_amsgrad": (torch.optim.Adam, dict(lr=0.01, betas=(0.8, 0.9), weight_decay=0.1, amsgrad=True)),
    "adamw": (torch.optim.AdamW, dict(lr=0.01, weight_decay=0.1)),
    "adamw_amsgrad_maximize": (torch.optim.AdamW, dict(lr=0.02, amsgrad=True, maximize=True)),
}


@pytest.mark.parametrize("impl", ["foreach", "fused"])
@pytest.mark.parametrize("name", list(OPTIMIZERS))
def test_optimizer_matches_cpu(name, impl):
    cls, kw = OPTIMIZERS[name]
    make = lambda params: cls(params, **kw, **{impl: True})  # noqa: E731
    want_params, want_state, _ = train("cpu", make)
    got_params, got_state, _ = train("tpu", make)
    assert len(got_state) == len(want_state)
    for got, want in zip(got_params + got_state, want_params + want_state):
        torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-6)


def test_fused_tensor_lr_and_grad_scale():
    """_fused_adamw_.tensor_lr with grad_scale (grads unscaled in place) and found_inf (step skipped)."""
    def run(device, found):
        ps, gs, ms, vs = tensors(seed=0), tensors(seed=1), tensors(seed=2), tensors(seed=3, positive=True)
        ps, gs, ms, vs = ([t.to(device) for t in ts] for ts in (ps, gs, ms, vs))
        steps = [torch.tensor(3.0, device=device) for _ in ps]
        torch._fused_adamw_(ps, gs, ms, vs, [], steps, lr=torch.tensor(0.01, device=device), beta1=0.9, beta2=0.99,
                            weight_decay=0.05, eps=1e-8, amsgrad=False, maximize=False,
                            grad_scale=torch.tensor(4.0, device=device), found_inf=torch.tensor(found, device=device))
        return ps + gs + ms + vs
    for found in [0.0, 1.0]:
        for got, want in zip(run("tpu", found), run("cpu", found)):
            torch.testing.assert_close(got.cpu(), want, rtol=1e-5, atol=1e-6)


def test_fused_sgd_grad_scale():
    def run(device):
        ps, gs, bufs = ([t.to(device) for t in tensors(seed=s)] for s in (0, 1, 2))
        torch._fused_sgd_(ps, gs, bufs, weight_decay=0.1, momentum=0.9, lr=0.1, dampening=0.0, nesterov=True,
                          maximize=False, is_first_step=False, grad_scale=torch.tensor(2.0, device=device))
        return ps + gs + bufs
    for got, want in zip(run("tpu"), run("cpu")):
        torch.testing.assert_close(got.cpu(), want, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("norm_type", [2.0, 1.0, float("inf")])
def test_clip_grad_norm(norm_type):
    make = lambda params: torch.optim.SGD(params, lr=0.1, foreach=True)  # noqa: E731
    want_params, _, want_norms = train("cpu", make, clip=(0.5, norm_type))
    got_params, _, got_norms = train("tpu", make, clip=(0.5, norm_type))
    for got, want in zip(got_params + got_norms, want_params + want_norms):
        torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("impl", ["foreach", "fused"])
@pytest.mark.parametrize("cls", [torch.optim.SGD, torch.optim.Adam, torch.optim.AdamW])
def test_lr_schedule_does_not_recompile(cls, impl):
    kw = dict(lr=0.05, **{impl: True})
    if cls is torch.optim.SGD:
        kw["momentum"] = 0.9
    model = make_model().to("tpu")
    opt = cls(model.parameters(), **kw)
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda step: 1.0 / (1 + step))
    lrs, compiles = [], []
    for x, y in batches(5):
        opt.zero_grad()
        ((model(x.to("tpu")) - y.to("tpu")) ** 2).mean().backward()
        opt.step()
        sched.step()
        torch.tpu.synchronize()
        lrs.append(opt.param_groups[0]["lr"])
        compiles.append(torch_tpu.metrics.counters().get("compiles", 0))
    assert len(set(lrs)) == len(lrs)  # the learning rate changed every step
    assert compiles[2] == compiles[-1], f"recompiled while only the learning rate changed: {compiles}"
    # and the schedule still trains like CPU
    make = lambda params: cls(params, **kw)  # noqa: E731
    sched_fn = lambda o: torch.optim.lr_scheduler.LambdaLR(o, lambda step: 1.0 / (1 + step))  # noqa: E731
    for got, want in zip(train("tpu", make, sched=sched_fn)[0], train("cpu", make, sched=sched_fn)[0]):
        torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-6)
