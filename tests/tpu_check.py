"""The oracle of the op tests: run the same function on CPU and on tpu and compare outputs (and
gradients). CPU PyTorch is the reference."""
import pytest
import torch

TOL = {torch.float32: (1.3e-5, 1e-5), torch.float64: (1e-7, 1e-7), torch.bfloat16: (1.6e-2, 1e-2),
       torch.float16: (1e-3, 1e-3), torch.complex64: (1.3e-5, 1e-5)}


def to(x, device):
    if isinstance(x, torch.Tensor):
        y = x.detach().to(device)
        return y.requires_grad_(x.requires_grad) if x.is_floating_point() or x.is_complex() else y
    if isinstance(x, (list, tuple)):
        return type(x)(to(e, device) for e in x)
    if isinstance(x, dict):
        return {k: to(v, device) for k, v in x.items()}
    return x


def flat(x):
    if isinstance(x, torch.Tensor):
        return [x]
    if isinstance(x, (list, tuple)):
        return [t for e in x for t in flat(e)]
    return []


def assert_close(actual, expected, rtol=None, atol=None, msg=""):
    actual, expected = flat(actual), flat(expected)
    assert len(actual) == len(expected), f"{msg}: {len(actual)} outputs vs {len(expected)}"
    for a, e in zip(actual, expected):
        assert a.device.type == "tpu", f"{msg}: output on {a.device}"
        r, t = TOL.get(e.dtype, (0, 0))
        torch.testing.assert_close(a.cpu(), e, rtol=rtol if rtol is not None else r,
                                   atol=atol if atol is not None else t, equal_nan=True, msg=lambda m: f"{msg}: {m}")


def check(fn, *args, grad=False, rtol=None, atol=None, **kwargs):
    """fn(*args) on tpu equals fn(*args) on CPU; with grad, so do the gradients of the float
    tensor arguments that require grad (with the sum of the float outputs as the loss)."""
    cpu_args, tpu_args = to(args, "cpu"), to(args, "tpu")
    if grad:
        for a in flat(cpu_args) + flat(tpu_args):
            if a.is_floating_point():
                a.requires_grad_(True)
    expected = fn(*cpu_args, **kwargs)
    actual = fn(*tpu_args, **kwargs)
    assert_close(actual, expected, rtol, atol, msg=getattr(fn, "__name__", "fn"))
    if grad:
        def loss(out):
            outs = [o for o in flat(out) if o.is_floating_point() and o.requires_grad]
            return sum((o.float() * (torch.arange(o.numel(), device=o.device).reshape(o.shape) % 7 + 1)).sum()
                       for o in outs)
        loss(expected).backward()
        loss(actual).backward()
        cpu_leaves = [a for a in flat(cpu_args) if a.is_floating_point()]
        tpu_leaves = [a for a in flat(tpu_args) if a.is_floating_point()]
        for i, (c, t) in enumerate(zip(cpu_leaves, tpu_leaves)):
            if c.grad is None:
                assert t.grad is None, f"grad {i}: tpu has a gradient, CPU does not"
                continue
            assert t.grad is not None, f"grad {i}: missing on tpu"
            assert_close(t.grad, c.grad, rtol, atol, msg=f"{getattr(fn, '__name__', 'fn')} grad {i}")
    return actual


def check_vs_float64(fn, *args, ulps=4, **kwargs):
    """For low-precision inputs: fn(*args) on tpu is within `ulps` units in the last place (of the
    result dtype, relative to the largest result) of fn on the same values in float64 on the CPU. CPU
    kernels round differently per CPU model (Intel vs AMD), so their last bits are no oracle."""
    actual = fn(*to(args, "tpu"), **kwargs)
    reference = fn(*[a.double() if isinstance(a, torch.Tensor) and a.is_floating_point() else a
                     for a in to(args, "cpu")], **kwargs)
    for a, r in zip(flat(actual), flat(reference)):
        assert a.device.type == "tpu"
        eps = torch.finfo(a.dtype).eps
        bound = ulps * eps * (r.abs() + r.abs().max())
        err = (a.cpu().double() - r).abs()
        assert (err <= bound).all(), f"max error {err.max():.3g} > {ulps} ulps ({bound.max():.3g})"
    return actual


def both_raise(exc, fn, *args, **kwargs):
    """fn raises `exc` on CPU and on tpu."""
    with pytest.raises(exc):
        fn(*to(args, "cpu"), **kwargs)
    with pytest.raises(exc):
        fn(*to(args, "tpu"), **kwargs)
