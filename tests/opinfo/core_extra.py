"""OpInfos for core ATen ops (torch.Tag.core) that op_db never dispatches in some dtype or direction:
each calls the aten overload itself, so the sweep verifies it forward and backward in float32 and
bfloat16 like any other OpInfo. Names are "aten.<overload>"."""
import functools

import torch
from torch.testing._internal.common_dtype import all_types_and, floating_types_and, integral_types_and
from torch.testing._internal.opinfo.core import OpInfo, SampleInput

aten = torch.ops.aten
FLOATS = floating_types_and(torch.bfloat16, torch.float16)


def make(shape, dtype, requires_grad, device, low=None, high=None):
    from torch.testing import make_tensor
    return make_tensor(shape, dtype=dtype, device=device, requires_grad=requires_grad, low=low, high=high)


def samples(*specs):
    """A sample function from specs: (input shape, args...) where a tuple arg is another tensor's shape."""
    def fn(op, device, dtype, requires_grad, **kwargs):
        for shape, *args in specs:
            yield SampleInput(make(shape, dtype, requires_grad, device),
                              args=tuple(make(a, dtype, requires_grad, device) if isinstance(a, tuple) else a
                                         for a in args))
    return fn


def batch_norm_eval_samples(op, device, dtype, requires_grad, **kwargs):
    for shape in ((4, 3), (2, 3, 5, 5)):
        c = shape[1]
        yield SampleInput(make(shape, dtype, requires_grad, device),
                          args=(make((c,), dtype, requires_grad, device), make((c,), dtype, requires_grad, device),
                                make((c,), dtype, False, device), make((c,), dtype, False, device, low=0.5, high=2),
                                0.1, 1e-5))


def scalar_samples(scalar):
    def fn(op, device, dtype, requires_grad, **kwargs):
        for shape in ((5,), (3, 4)):
            yield SampleInput(make(shape, dtype, requires_grad, device), args=(scalar,))
    return fn


def core(name, fn, sample_fn, dtypes=FLOATS, autograd=True):
    return OpInfo(f"aten.{name}", op=fn, dtypes=dtypes, sample_inputs_func=sample_fn, supports_out=False,
                  supports_autograd=autograd, inplace_variant=None, method_variant=None)


OPS = [
    core("copy", lambda x, src: aten.copy(x, src), samples(((3, 4), (3, 4)), ((3, 4), (4,))), autograd=False),
    core("div.Scalar_mode", lambda x, s: aten.div.Scalar_mode(x, s, rounding_mode="floor"), scalar_samples(2.5)),
    core("fmod.Scalar", lambda x, s: aten.fmod.Scalar(x, s), scalar_samples(1.5)),
    core("var.dim", lambda x, d: aten.var.dim(x, d), samples(((4, 5), [1]), ((2, 3, 4), [0, 2]))),
    core("adaptive_avg_pool1d", lambda x, s: aten.adaptive_avg_pool1d(x, s), samples(((2, 3, 8), [4]), ((3, 7), [3]))),
    core("avg_pool1d", lambda x, k: aten.avg_pool1d(x, k), samples(((2, 3, 8), [2]), ((3, 9), [3]))),
    core("upsample_bilinear2d.vec", lambda x, s, a: aten.upsample_bilinear2d.vec(x, s, a, None),
         samples(((1, 2, 4, 5), [8, 7], False), ((2, 1, 3, 3), [6, 6], True))),
    core("upsample_nearest2d.vec", lambda x, s: aten.upsample_nearest2d.vec(x, s, None),
         samples(((1, 2, 4, 5), [8, 10]), ((2, 1, 3, 3), [5, 7]))),
    core("_native_batch_norm_legit_no_training",
         lambda x, w, b, m, v, mo, eps: aten._native_batch_norm_legit_no_training(x, w, b, m, v, mo, eps)[0],
         batch_norm_eval_samples),
    *[core(f"bitwise_{k}.Scalar", functools.partial(lambda k, x, s: getattr(aten, f"bitwise_{k}").Scalar(x, s), k),
           scalar_samples(6), dtypes=integral_types_and(), autograd=False)
      for k in ("and", "or", "xor")],
    core("pow.Scalar", lambda x, base: aten.pow.Scalar(base, x), scalar_samples(1.7)),
    core("atan2.out", lambda x, y: aten.atan2.out(x, y, out=torch.empty_like(x)), samples(((3, 4), (3, 4))),
         autograd=False),
    core("any.dims", lambda x, d: aten.any.dims(x, d), samples(((4, 5), [0, 1]), ((2, 3, 4), [2])),
         dtypes=all_types_and(torch.bool, torch.bfloat16), autograd=False),
]
