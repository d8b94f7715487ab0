"""Neural-network ops on tpu against CPU: matrix products, convolutions, pooling, upsampling,
normalizations, losses and scaled dot-product attention (forward, and backward for float32)."""
import copy

import pytest
import torch
import torch.nn.functional as F

from tpu_check import assert_close, both_raise, check, check_vs_float64, to

FLOATS = [torch.float32, torch.bfloat16, torch.float16]
# float32 convolution gradients sum N * H * W products in a different order than CPU's kernels
CONV_TOL = dict(rtol=1e-4, atol=1e-4)


@pytest.fixture(autouse=True)
def seed():
    torch.manual_seed(0)  # each test's data independent of which tests ran before


def R(*shape, dtype=torch.float32):
    return torch.randn(*shape).to(dtype)



# ---------------------------------------------------------------------------------------------
# Matrix products

@pytest.mark.parametrize("dtype", FLOATS + [torch.float64, torch.int64, torch.int32])
def test_mm_family_dtypes(dtype):
    def ints(*s):
        return torch.randint(-5, 5, s, dtype=dtype)
    make = ints if not dtype.is_floating_point else (lambda *s: R(*s, dtype=dtype))
    check(torch.mm, make(3, 4), make(4, 5))
    check(torch.bmm, make(2, 3, 4), make(2, 4, 5))
    check(torch.mv, make(3, 4), make(4))
    check(torch.dot, make(6), make(6))
    check(lambda s, a, b: torch.addmm(s, a, b, beta=2, alpha=3), make(5), make(3, 4), make(4, 5))
    check(lambda s, a, b: torch.baddbmm(s, a, b, beta=2, alpha=-1), make(2, 3, 5), make(2, 3, 4), make(2, 4, 5))
    check(lambda s, a, b: torch.addmv(s, a, b, beta=3, alpha=2), make(3), make(3, 4), make(4))


def test_mm_grad():
    check(torch.mm, R(3, 4), R(4, 5), grad=True)
    check(torch.bmm, R(2, 3, 4), R(2, 4, 5), grad=True)
    check(torch.mv, R(3, 4), R(4), grad=True)
    check(torch.dot, R(6), R(6), grad=True)
    check(lambda s, a, b: torch.addmm(s, a, b, beta=0.5, alpha=2), R(3, 5), R(3, 4), R(4, 5), grad=True)
    check(lambda s, a, b: torch.baddbmm(s, a, b, beta=0.5, alpha=2), R(2, 3, 5), R(2, 3, 4), R(2, 4, 5), grad=True)
    check(lambda s, a, b: torch.addmv(s, a, b, alpha=2), R(3), R(3, 4), R(4), grad=True)


def test_addmm_beta_zero_ignores_self():
    s = torch.full((3, 5), float("nan"))
    check(lambda s, a, b: torch.addmm(s, a, b, beta=0), s, R(3, 4), R(4, 5))


def test_matmul_linear_einsum():
    check(torch.matmul, R(2, 3, 4), R(4), grad=True)
    check(torch.matmul, R(4), R(4, 3), grad=True)
    check(torch.matmul, R(2, 1, 3, 4), R(5, 4, 2), grad=True)  # broadcast batch
    check(torch.matmul, R(3, 2, 4), R(4, 5), grad=True)
    check(F.linear, R(2, 3, 6), R(5, 6), R(5), grad=True)
    check(F.linear, R(4, 6), R(5, 6), grad=True)
    check(lambda a, b: torch.einsum("bij,bjk->bik", a, b), R(2, 3, 4), R(2, 4, 5), grad=True)
    check(lambda a, b: torch.einsum("ij,kj->ik", a, b), R(3, 4), R(5, 4), grad=True)
    check(lambda a, b: torch.einsum("bhqd,bhkd->bhqk", a, b), R(1, 2, 3, 4), R(1, 2, 5, 4), grad=True)


def test_matmul_precision_setting():
    old = torch.get_float32_matmul_precision()
    try:
        for p in ["highest", "high", "medium"]:
            torch.set_float32_matmul_precision(p)
            a, b = R(16, 32), R(32, 8)
            tol = 1e-5 if p == "highest" else 2e-2
            assert_close(torch.mm(a.to("tpu"), b.to("tpu")), torch.mm(a, b), rtol=tol, atol=tol, msg=p)
    finally:
        torch.set_float32_matmul_precision(old)


def test_mm_errors():
    both_raise(RuntimeError, torch.mm, R(3, 4), R(5, 6))
    both_raise(RuntimeError, torch.mm, R(3, 4), R(4, 5, dtype=torch.bfloat16))
    both_raise(RuntimeError, torch.bmm, R(2, 3, 4), R(3, 4, 5))
    both_raise(RuntimeError, torch.dot, R(3), R(4))


# ---------------------------------------------------------------------------------------------
# Convolutions

@pytest.mark.parametrize("kw", [
    dict(),
    dict(stride=2, padding=1),
    dict(stride=(2, 1), padding=(2, 0), dilation=(2, 3)),
    dict(groups=2, padding=1),
    dict(groups=4, stride=2),  # depthwise
    dict(padding=3),           # padding wider than the kernel
])
def test_conv2d(kw):
    cin, cout = 4, 8
    w = R(cout, cin // kw.get("groups", 1), 3, 2)
    check(F.conv2d, R(2, cin, 9, 8), w, R(cout), grad=True, **CONV_TOL, **kw)


def test_conv2d_no_bias_and_unbatched():
    check(F.conv2d, R(2, 3, 6, 6), R(4, 3, 3, 3), grad=True, **CONV_TOL, stride=3)  # input rows left over
    check(F.conv2d, R(3, 6, 6), R(4, 3, 3, 3), R(4), grad=True, **CONV_TOL, padding=1)


def test_conv2d_padding_modes():
    check(F.conv2d, R(1, 2, 7, 7), R(3, 2, 3, 3), grad=True, **CONV_TOL, padding="same")
    check(F.conv2d, R(1, 2, 7, 7), R(3, 2, 3, 3), grad=True, **CONV_TOL, padding="valid")


def test_conv1d_conv3d():
    check(F.conv1d, R(2, 4, 9), R(6, 2, 3), R(6), grad=True, **CONV_TOL, stride=2, padding=1, groups=2)
    check(F.conv3d, R(1, 2, 4, 5, 4), R(3, 2, 2, 3, 2), R(3), grad=True, **CONV_TOL, stride=(1, 2, 1),
          padding=1)


@pytest.mark.parametrize("kw", [
    dict(),
    dict(stride=2, padding=1, output_padding=1),
    dict(stride=2, padding=2, groups=2, dilation=2),
    dict(stride=3, padding=1, output_padding=2),
])
def test_conv_transpose2d(kw):
    w = R(4, 6 // kw.get("groups", 1), 3, 3)
    check(F.conv_transpose2d, R(2, 4, 5, 4), w, R(6), grad=True, **CONV_TOL, **kw)


def test_conv_transpose1d_large_padding():
    check(F.conv_transpose1d, R(2, 4, 6), R(4, 3, 1), grad=True, **CONV_TOL, padding=1)  # negative edge padding
    check(F.conv_transpose1d, R(2, 4, 6), R(4, 3, 3), R(3), grad=True, **CONV_TOL, stride=2, padding=2,
          output_padding=1)


def test_conv_float64():
    dtype = torch.float64
    check(F.conv2d, R(2, 4, 8, 8, dtype=dtype), R(6, 2, 3, 3, dtype=dtype), R(6, dtype=dtype), stride=2,
          padding=1, groups=2)
    check(F.conv_transpose2d, R(1, 4, 5, 5, dtype=dtype), R(4, 3, 3, 3, dtype=dtype), stride=2)


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_conv_half_precision(dtype):
    # against float64 on the same rounded inputs: CPU's own half-precision conv differs by an ulp between
    # Intel and AMD machines, so it cannot be the oracle for the last bits
    check_vs_float64(F.conv2d, R(2, 4, 8, 8, dtype=dtype), R(6, 2, 3, 3, dtype=dtype), R(6, dtype=dtype), stride=2,
                     padding=1, groups=2)
    check_vs_float64(F.conv_transpose2d, R(1, 4, 5, 5, dtype=dtype), R(4, 3, 3, 3, dtype=dtype), stride=2)


def test_conv_only_some_grads():
    # backwards whose output_mask leaves gradients out: weight only, input only (bias constant)
    x, w = R(2, 3, 6, 6), R(4, 3, 3, 3)
    check(lambda w: F.conv2d(x.to(w.device), w), w, grad=True, **CONV_TOL)
    check(lambda x: F.conv2d(x, w.to(x.device), torch.ones(4, device=x.device)), x, grad=True, **CONV_TOL)
    check(lambda x: F.conv_transpose2d(x, w.to(x.device), stride=2), R(2, 4, 3, 3), grad=True, **CONV_TOL)


def test_conv_errors():
    both_raise(RuntimeError, F.conv2d, R(1, 3, 5, 5), R(4, 2, 3, 3))          # channel mismatch
    both_raise(RuntimeError, F.conv2d, R(1, 3, 2, 2), R(4, 3, 3, 3))          # kernel larger than input
    both_raise(RuntimeError, F.conv2d, R(1, 4, 5, 5), R(4, 2, 3, 3), groups=3)
    both_raise(RuntimeError, F.conv2d, R(1, 3, 5, 5), R(4, 3, 3, 3, dtype=torch.bfloat16))  # mixed dtypes


# ---------------------------------------------------------------------------------------------
# Pooling and upsampling

@pytest.mark.parametrize("kw", [
    dict(kernel_size=2),
    dict(kernel_size=3, stride=2, padding=1),
    dict(kernel_size=3, stride=2, ceil_mode=True, dilation=2),
    dict(kernel_size=(2, 3), stride=(1, 2), padding=(1, 1)),
])
def test_max_pool2d(kw):
    check(lambda x: F.max_pool2d(x, return_indices=True, **kw), R(2, 3, 9, 8), grad=True)


def test_max_pool2d_dtypes_and_ties():
    for dtype in FLOATS:
        check(lambda x: F.max_pool2d(x, 3, 2, 1, return_indices=True), R(2, 3, 7, 7, dtype=dtype))
    x = torch.zeros(1, 1, 4, 4)
    x[0, 0, 1, 1] = float("nan")
    check(lambda x: F.max_pool2d(x, 2, 1, return_indices=True), x)  # ties keep the first, nan wins
    check(lambda x: F.max_pool2d(x, 2), R(3, 6, 6), grad=True)       # unbatched


@pytest.mark.parametrize("kw", [
    dict(kernel_size=2),
    dict(kernel_size=3, stride=2, padding=1),
    dict(kernel_size=3, stride=2, padding=1, ceil_mode=True, count_include_pad=False),
    dict(kernel_size=3, stride=2, padding=1, ceil_mode=True),
    dict(kernel_size=(3, 2), stride=1, padding=(1, 0), divisor_override=5),
])
def test_avg_pool2d(kw):
    check(lambda x: F.avg_pool2d(x, **kw), R(2, 3, 9, 8), grad=True)


def test_avg_pool2d_half():
    for dtype in [torch.bfloat16, torch.float16]:
        check(lambda x: F.avg_pool2d(x, 3, 2, 1), R(2, 3, 8, 8, dtype=dtype))


@pytest.mark.parametrize("out", [(1, 1), (3, 4), (4, 4), (5, 7)])
def test_adaptive_pools(out):
    check(lambda x: F.adaptive_avg_pool2d(x, out), R(2, 3, 8, 7), grad=True)
    check(lambda x: F.adaptive_max_pool2d(x, out, return_indices=True), R(2, 3, 8, 7), grad=True)


def test_adaptive_pools_half_and_inf():
    for dtype in [torch.bfloat16, torch.float16]:
        check(lambda x: F.adaptive_avg_pool2d(x, (3, 2)), R(2, 3, 7, 5, dtype=dtype))
        check(lambda x: F.adaptive_max_pool2d(x, (3, 2)), R(2, 3, 7, 5, dtype=dtype))
    x = R(1, 2, 6, 6)
    x[0, 0, 0, 0] = float("inf")
    check(lambda x: F.adaptive_avg_pool2d(x, (4, 4)), x)  # inf stays in its own bins


@pytest.mark.parametrize("kw", [
    dict(scale_factor=2),
    dict(size=(7, 3)),
    dict(scale_factor=1.7),
    dict(scale_factor=2, mode="nearest-exact"),
    dict(size=(5, 11), mode="nearest-exact"),
    dict(scale_factor=2, mode="bilinear"),
    dict(scale_factor=1.7, mode="bilinear"),
    dict(size=(3, 9), mode="bilinear"),
    dict(size=(7, 9), mode="bilinear", align_corners=True),
    dict(size=(1, 3), mode="bilinear", align_corners=True),
    dict(scale_factor=0.6, mode="bilinear", recompute_scale_factor=False),
])
def test_upsample2d(kw):
    check(lambda x: F.interpolate(x, **kw), R(2, 3, 4, 5), grad=True)


def test_upsample_other_ranks_and_dtypes():
    check(lambda x: F.interpolate(x, scale_factor=3, mode="linear"), R(2, 3, 5), grad=True)
    check(lambda x: F.interpolate(x, size=7), R(2, 3, 5), grad=True)
    check(lambda x: F.interpolate(x, size=(3, 4, 5), mode="trilinear"), R(1, 2, 2, 3, 4), grad=True)
    check(lambda x: F.interpolate(x, scale_factor=2), R(1, 2, 2, 3, 4), grad=True)
    for dtype in [torch.bfloat16, torch.float16]:
        check(lambda x: F.interpolate(x, scale_factor=2, mode="bilinear"), R(1, 2, 4, 5, dtype=dtype))
        check(lambda x: F.interpolate(x, size=(7, 3)), R(1, 2, 4, 5, dtype=dtype))
    check(lambda x: F.interpolate(x, scale_factor=2), torch.randint(0, 255, (1, 3, 4, 4), dtype=torch.uint8))


def test_pool_errors():
    both_raise(RuntimeError, F.max_pool2d, R(1, 1, 2, 2), 3)          # output would be empty
    both_raise(RuntimeError, F.avg_pool2d, R(1, 1, 4, 4), 2, 2, 2)   # padding above half the kernel


# ---------------------------------------------------------------------------------------------
# Normalizations

def test_layer_norm():
    check(F.layer_norm, R(2, 3, 4), (3, 4), R(3, 4), R(3, 4), grad=True)
    check(F.layer_norm, R(2, 3, 4), (4,), grad=True)
    check(F.layer_norm, R(2, 3, 4), (4,), R(4), grad=True)  # weight without bias
    check(lambda x, w, b: F.layer_norm(x, (5,), w, b, eps=1e-2), R(6, 5) * 5 + 3, R(5), R(5), grad=True)
    for dtype in [torch.bfloat16, torch.float16]:
        check(F.layer_norm, R(2, 3, 8, dtype=dtype), (8,), R(8, dtype=dtype), R(8, dtype=dtype))


def test_layer_norm_partial_grads():
    x, w = R(3, 4), R(4)
    check(lambda w: F.layer_norm(x.to(w.device), (4,), w), w, grad=True)  # weight only
    check(lambda x: F.layer_norm(x, (4,), w.to(x.device)), x, grad=True)  # input only


def test_group_norm():
    check(F.group_norm, R(2, 4, 3, 3), 2, R(4), R(4), grad=True)
    check(F.group_norm, R(2, 6, 5), 3, grad=True)
    check(F.group_norm, R(3, 6), 2, R(6), R(6), grad=True)
    for dtype in [torch.bfloat16, torch.float16]:
        check(F.group_norm, R(2, 4, 3, 3, dtype=dtype), 2, R(4, dtype=dtype), R(4, dtype=dtype))


def test_batch_norm_train_updates_running_stats():
    for shape in [(4, 3), (4, 3, 5), (2, 3, 4, 5)]:
        rm, rv = R(3), torch.rand(3) + 0.5
        rmt, rvt = rm.to("tpu"), rv.to("tpu")
        check(lambda x, w, b: F.batch_norm(x, rmt if x.device.type == "tpu" else rm,
                                           rvt if x.device.type == "tpu" else rv, w, b, training=True, momentum=0.3),
              R(*shape), R(3), R(3), grad=True)
        # both forward calls updated their running stats once
        assert_close(rmt, rm, msg="running_mean")
        assert_close(rvt, rv, msg="running_var")


def test_batch_norm_eval_and_no_stats():
    rm, rv = R(3), torch.rand(3) + 0.5
    check(lambda x, w, b: F.batch_norm(x, rm.to(x.device), rv.to(x.device), w, b, training=False),
          R(4, 3, 5), R(3), R(3), grad=True)
    check(lambda x: F.batch_norm(x, None, None, training=True), R(4, 3, 2, 2), grad=True)
    check(lambda x: F.batch_norm(x, rm.to(x.device), rv.to(x.device), training=False, eps=0.1), R(4, 3), grad=True)
    for dtype in [torch.bfloat16, torch.float16]:
        check(lambda x: F.batch_norm(x, None, None, training=True), R(4, 3, 2, 2, dtype=dtype))


def test_batch_norm_module():
    m = torch.nn.BatchNorm2d(3)
    mt = torch.nn.BatchNorm2d(3).to("tpu")
    x = R(4, 3, 5, 5)
    for _ in range(2):
        assert_close(mt(x.to("tpu")), m(x), msg="train")
    assert_close(mt.running_mean, m.running_mean, msg="running_mean")
    assert_close(mt.running_var, m.running_var, msg="running_var")
    assert int(mt.num_batches_tracked) == 2
    m.eval()
    mt.eval()
    assert_close(mt(x.to("tpu")), m(x), msg="eval")


def test_norm_ops_direct():
    # the functional and no-training batch norm forms torch.compile and export use
    x, rm, rv = R(4, 3, 5), R(3), torch.rand(3) + 0.5
    check(lambda x, m, v: torch.ops.aten._native_batch_norm_legit_functional(x, None, None, m, v, True, 0.1, 1e-5),
          x, rm, rv)
    check(lambda x, m, v: torch.ops.aten._native_batch_norm_legit_no_training(x, None, None, m, v, 0.1, 1e-5)[0],
          x, rm, rv)
    check(lambda x: torch.ops.aten._native_batch_norm_legit(x, None, None, True, 0.1, 1e-5), x)


def test_rms_norm():
    check(F.rms_norm, R(2, 3, 4), (4,), R(4), grad=True)
    check(F.rms_norm, R(2, 3, 4), (3, 4), grad=True, eps=1e-3)


def test_norm_errors():
    both_raise(RuntimeError, F.layer_norm, R(2, 3), (4,))
    both_raise(RuntimeError, F.group_norm, R(2, 6, 3), 4)
    both_raise(RuntimeError, F.batch_norm, R(2, 3), R(4), R(4))


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.bfloat16])
@pytest.mark.parametrize("shape,dim", [((5, 3, 4), 0), ((5, 3, 4), 2), ((6, 4), 0), ((6, 4), 1), ((7,), 0)])
def test_weight_norm_interface(shape, dim, dtype):
    gshape = [s if d == dim else 1 for d, s in enumerate(shape)]
    v, g = R(*shape, dtype=dtype), R(*gshape, dtype=dtype)
    # bfloat16: CPU's norms are float32 (as CUDA's); gradients through the fused backward for float types
    check(lambda v, g: torch._weight_norm_interface(v, g, dim), v, g, grad=dtype != torch.bfloat16)
    w, norms = torch._weight_norm_interface(v, g, dim)
    gw = R(*shape, dtype=dtype)
    check(lambda gw, v, g, n: torch.ops.aten._weight_norm_interface_backward(gw, v, g, n, dim), gw, v, g, norms)


def test_weight_norm_interface_out():
    v, g, gw = R(5, 3), R(5, 1), R(5, 3)

    def fwd_bwd(v, g, gw):
        w, n = torch.empty_like(v), torch.empty_like(g)
        torch.ops.aten._weight_norm_interface.out(v, g, 0, out0=w, out1=n)
        gv, gg = torch.empty_like(v), torch.empty_like(g)
        torch.ops.aten._weight_norm_interface_backward.out(gw, v, g, n, 0, out0=gv, out1=gg)
        return w, n, gv, gg

    check(fwd_bwd, v, g, gw)


def test_weight_norm_interface_errors():
    # CPU's fused kernels take the first or the last dim only
    both_raise(RuntimeError, lambda v, g: torch._weight_norm_interface(v, g, 1), R(3, 4, 5), R(1, 4, 1))


def _weight_norm_grads(module, norm, x, **tol):
    """`module` weight-normed by norm(m) on CPU and on tpu: outputs and every parameter's gradient agree."""
    m = norm(copy.deepcopy(module))
    mt = norm(copy.deepcopy(module).to("tpu"))
    out, out_t = m(x), mt(x.to("tpu"))
    assert_close(out_t, out, msg="forward", **tol)
    w = torch.arange(out.numel()).reshape(out.shape) % 5 + 1.0
    (out * w).sum().backward()
    (out_t * w.to("tpu")).sum().backward()
    params = dict(m.named_parameters())
    assert any("original" in n or n.endswith("_g") for n in params), "no weight-norm parameters"
    for name, pt in mt.named_parameters():
        assert_close(pt.grad, params[name].grad, msg=name, **tol)


WEIGHT_NORMS = {"parametrizations": torch.nn.utils.parametrizations.weight_norm, "legacy": torch.nn.utils.weight_norm}


@pytest.mark.filterwarnings("ignore:.*weight_norm.* is deprecated")
@pytest.mark.parametrize("api", WEIGHT_NORMS)
def test_weight_norm_conv1d_wav2vec2(api):
    # wav2vec2 / HuBERT's positional convolution: a grouped Conv1d, weight-normed over dim 2 (the kernel dim)
    conv = torch.nn.Conv1d(8, 8, kernel_size=5, padding=2, groups=2)
    _weight_norm_grads(conv, lambda m: WEIGHT_NORMS[api](m, name="weight", dim=2), R(2, 8, 11), **CONV_TOL)


@pytest.mark.filterwarnings("ignore:.*weight_norm.* is deprecated")
@pytest.mark.parametrize("api", WEIGHT_NORMS)
def test_weight_norm_linear(api):
    _weight_norm_grads(torch.nn.Linear(6, 4), WEIGHT_NORMS[api], R(3, 6))  # dim 0


# ---------------------------------------------------------------------------------------------
# Losses

@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_pointwise_losses(reduction):
    a, b = R(3, 4), R(3, 4)
    check(F.mse_loss, a, b, grad=True, reduction=reduction)
    check(F.l1_loss, a, b, grad=True, reduction=reduction)
    check(F.smooth_l1_loss, a, b, grad=True, reduction=reduction, beta=0.5)
    check(F.smooth_l1_loss, a, b, grad=True, reduction=reduction, beta=0.0)
    check(F.huber_loss, a, b, grad=True, reduction=reduction, delta=0.7)
    p, t = torch.rand(3, 4) * 0.98 + 0.01, torch.rand(3, 4)
    check(F.binary_cross_entropy, p, t, grad=True, reduction=reduction)
    check(lambda p, t: F.binary_cross_entropy(p, t, weight=torch.arange(1., 5., device=p.device),
                                              reduction=reduction), p, t, grad=True)
    check(F.binary_cross_entropy_with_logits, a, torch.rand(3, 4), grad=True, reduction=reduction)


def test_pointwise_losses_half():
    for dtype in [torch.bfloat16, torch.float16]:
        check(F.mse_loss, R(3, 4, dtype=dtype), R(3, 4, dtype=dtype))
        check(F.smooth_l1_loss, R(3, 4, dtype=dtype), R(3, 4, dtype=dtype))
        check(F.huber_loss, R(3, 4, dtype=dtype), R(3, 4, dtype=dtype), reduction="none")


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_nll_loss(reduction):
    t = torch.tensor([0, 1, -100, 3, 2])
    w = torch.rand(4) + 0.1
    check(F.nll_loss, R(5, 4), t, grad=True, reduction=reduction)
    check(lambda x: F.nll_loss(x, t.to(x.device), weight=w.to(x.device), reduction=reduction), R(5, 4), grad=True)
    check(lambda x: F.nll_loss(x, t.to(x.device).abs() % 4, ignore_index=1, reduction=reduction), R(5, 4),
          grad=True)
    check(F.nll_loss, R(4), torch.tensor(2), grad=True, reduction=reduction)  # unbatched
    t2 = torch.randint(0, 4, (2, 3, 3))
    t2[0, 0, 0] = -100
    check(lambda x: F.nll_loss(x, t2.to(x.device), weight=w.to(x.device), reduction=reduction), R(2, 4, 3, 3),
          grad=True)
    check(F.nll_loss, R(2, 4, 3), torch.randint(0, 4, (2, 3)), grad=True, reduction=reduction)  # (N, C, d)


def test_nll_loss_all_ignored_and_half():
    t = torch.full((3,), -100)
    check(F.nll_loss, R(3, 4), t, grad=True)                   # mean of nothing: nan, zero grad
    check(F.nll_loss, R(3, 4), t, grad=True, reduction="sum")
    for dtype in [torch.bfloat16, torch.float16]:
        check(F.nll_loss, R(5, 4, dtype=dtype), torch.tensor([0, 1, -100, 3, 2]))


@pytest.mark.parametrize("label_smoothing", [0.0, 0.2])
def test_cross_entropy(label_smoothing):
    ls = dict(label_smoothing=label_smoothing)
    t = torch.tensor([0, 1, -100, 3, 2])
    check(F.cross_entropy, R(5, 4), t, grad=True, **ls)
    check(lambda x: F.cross_entropy(x, t.to(x.device), weight=torch.arange(1., 5., device=x.device), **ls),
          R(5, 4), grad=True)
    check(F.cross_entropy, R(2, 4, 3, 3), torch.randint(0, 4, (2, 3, 3)), grad=True, reduction="sum", **ls)
    check(F.cross_entropy, R(5, 4), torch.rand(5, 4).softmax(1), grad=True, **ls)  # probabilities


def test_loss_errors():
    both_raise(ValueError, F.nll_loss, R(5, 4), torch.tensor([0, 1, 2]))
    both_raise(RuntimeError, F.nll_loss, R(5, 4), torch.tensor([0., 1, 2, 3, 0]))
    both_raise(ValueError, F.binary_cross_entropy, torch.rand(3), torch.rand(4))


# ---------------------------------------------------------------------------------------------
# Scaled dot-product attention (math backend)

@pytest.mark.parametrize("kw", [dict(), dict(dropout_p=0.0, is_causal=True), dict(scale=0.3)])
def test_sdpa(kw):
    check(F.scaled_dot_product_attention, R(2, 2, 5, 8), R(2, 2, 5, 8), R(2, 2, 5, 8), grad=True, **kw)


def test_sdpa_masks():
    q, k, v = R(1, 2, 4, 8), R(1, 2, 6, 8), R(1, 2, 6, 8)
    bool_mask = torch.rand(4, 6) > 0.3
    bool_mask[:, 0] = True
    check(lambda q, k, v: F.scaled_dot_product_attention(q, k, v, attn_mask=bool_mask.to(q.device)), q, k, v,
          grad=True)
    check(F.scaled_dot_product_attention, q, k, v, R(1, 1, 4, 6), grad=True)  # float mask (also differentiated)
    check(lambda q, k, v: F.scaled_dot_product_attention(q, k, v, is_causal=True), R(1, 2, 6, 8), k, v, grad=True)


def test_sdpa_gqa_and_half():
    check(lambda q, k, v: F.scaled_dot_product_attention(q, k, v, enable_gqa=True), R(1, 4, 5, 8), R(1, 2, 5, 8),
          R(1, 2, 5, 8), grad=True)
    for dtype in [torch.bfloat16, torch.float16]:
        check(F.scaled_dot_product_attention, R(1, 2, 5, 8, dtype=dtype), R(1, 2, 5, 8, dtype=dtype),
              R(1, 2, 5, 8, dtype=dtype), is_causal=True)


def test_multihead_attention_module():
    torch.manual_seed(1)
    m = torch.nn.MultiheadAttention(8, 2, batch_first=True)
    mt = torch.nn.MultiheadAttention(8, 2, batch_first=True).to("tpu")
    mt.load_state_dict(m.state_dict())
    x = R(2, 5, 8)
    out, w = m(x, x, x)
    out_t, w_t = mt(x.to("tpu"), x.to("tpu"), x.to("tpu"))
    assert_close(out_t, out, msg="mha out")
    assert_close(w_t, w, msg="mha weights")


def test_small_cnn_training_step():
    torch.manual_seed(2)
    net = torch.nn.Sequential(torch.nn.Conv2d(3, 4, 3, padding=1), torch.nn.BatchNorm2d(4), torch.nn.ReLU(),
                              torch.nn.MaxPool2d(2), torch.nn.Flatten(), torch.nn.Linear(4 * 4 * 4, 5))
    net_t = copy.deepcopy(net).to("tpu")
    x, y = R(6, 3, 8, 8), torch.randint(0, 5, (6,))
    loss = F.cross_entropy(net(x), y)
    loss_t = F.cross_entropy(net_t(x.to("tpu")), y.to("tpu"))
    loss.backward()
    loss_t.backward()
    assert_close(loss_t, loss, msg="loss")
    for (name, p), pt in zip(net.named_parameters(), net_t.parameters()):
        assert_close(pt.grad, p.grad, rtol=1e-4, atol=1e-5, msg=name)


def test_norm_saved_statistics_match_cpu_dtypes_and_shapes():
    x = torch.randn(4, 3, 5)
    for dtype in (torch.float32, torch.bfloat16):
        cpu = torch.ops.aten.native_layer_norm(x.to(dtype), [5], None, None, 1e-5)
        tpu = torch.ops.aten.native_layer_norm(x.to(dtype).to("tpu"), [5], None, None, 1e-5)
        assert [t.dtype for t in tpu] == [t.dtype for t in cpu]
        rm, rv = torch.zeros(3), torch.ones(3)
        cpu = torch.ops.aten.native_batch_norm(x.to(dtype), None, None, rm, rv, False, 0.1, 1e-5)
        tpu = torch.ops.aten.native_batch_norm(x.to(dtype).to("tpu"), None, None, rm.to("tpu"), rv.to("tpu"), False,
                                               0.1, 1e-5)
        assert [(t.dtype, t.shape) for t in tpu] == [(t.dtype, t.shape) for t in cpu]
        torch.testing.assert_close(tpu[0].cpu(), cpu[0])
