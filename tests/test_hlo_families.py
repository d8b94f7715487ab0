"""Runs every sample program printed by tests/cpp/hlo_samples.cpp (the StableHLO emitter) on the PJRT plugin
and compares the outputs with a numpy reference of the same name."""
import json
import os
import subprocess
import zlib

import ml_dtypes
import numpy as np
import pytest

from torch_tpu import runtime

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BINARY = os.environ.get("TORCH_TPU_HLO_SAMPLES", os.path.join(ROOT, "build", "tests", "hlo_samples"))

DTYPES = {
    "pred": np.bool_, "s8": np.int8, "s16": np.int16, "s32": np.int32, "s64": np.int64, "u8": np.uint8,
    "u16": np.uint16, "u32": np.uint32, "u64": np.uint64, "f16": np.float16, "bf16": ml_dtypes.bfloat16,
    "f32": np.float32, "f64": np.float64, "c64": np.complex64, "c128": np.complex128,
    "f8e5m2": ml_dtypes.float8_e5m2, "f8e4m3fn": ml_dtypes.float8_e4m3fn,
}
f32, bf16 = np.float32, ml_dtypes.bfloat16
TOL = {"f16": (2e-3, 1e-3), "bf16": (1e-2, 1e-2), "f32": (1e-5, 1e-6), "f64": (1e-12, 1e-12),
       "c64": (1e-5, 1e-6), "c128": (1e-12, 1e-12)}


def _load():
    if not os.path.exists(BINARY):
        return {}
    out = subprocess.run([BINARY], capture_output=True, text=True, check=True, timeout=60).stdout
    return {s["name"]: s for s in json.loads(out)}


SAMPLES = _load()


# ---- numpy helpers ----

def np_pad(x, v, lo, hi, interior):
    """stablehlo.pad: interior padding, then edge padding (negative edges crop)."""
    out = np.full([d + max(d - 1, 0) * i for d, i in zip(x.shape, interior)], v, x.dtype)
    out[tuple(slice(None, None, i + 1) for i in interior)] = x
    out = np.pad(out, [(max(l, 0), max(h, 0)) for l, h in zip(lo, hi)], constant_values=v)
    return out[tuple(slice(-min(l, 0), n + min(h, 0)) for n, l, h in zip(out.shape, lo, hi))]


def np_reduce_window(x, init, fn, window, strides, base=None, wdil=None, padding=None):
    r = x.ndim
    base, wdil, padding = base or [1] * r, wdil or [1] * r, padding or [(0, 0)] * r
    xp = np_pad(x, init, [p[0] for p in padding], [p[1] for p in padding], [b - 1 for b in base])
    shape = [max((n - ((w - 1) * d + 1)) // s + 1, 0) for n, w, d, s in zip(xp.shape, window, wdil, strides)]
    out = np.empty(shape, x.dtype)
    for idx in np.ndindex(*shape):
        win = xp[tuple(slice(i * s, i * s + (w - 1) * d + 1, d) for i, s, w, d in zip(idx, strides, window, wdil))]
        out[idx] = fn(np.append(win.ravel(), init))
    return out


def np_select_and_scatter(x, src, window, strides):
    """select = GE (first maximum of each window), scatter = add, init 0, no padding."""
    out = np.zeros_like(x)
    for idx in np.ndindex(*src.shape):
        starts = [i * s for i, s in zip(idx, strides)]
        win = x[tuple(slice(st, st + w) for st, w in zip(starts, window))]
        k = np.unravel_index(np.argmax(win), win.shape)
        out[tuple(st + kk for st, kk in zip(starts, k))] += src[idx]
    return out


def np_conv(lhs, rhs, layouts, strides=None, padding=None, lhs_dil=None, rhs_dil=None, fgc=1, bgc=1):
    """Convolution per the StableHLO spec, via canonical [N, C, spatial...] x [O, I, spatial...] layouts."""
    ll, rl, ol = layouts
    n = lhs.ndim - 2
    sp = [str(i) for i in range(n)]
    x = lhs.transpose([ll.index(c) for c in "bf" + "".join(sp)]).astype(np.float64)
    w = rhs.transpose([rl.index(c) for c in "oi" + "".join(sp)]).astype(np.float64)
    strides, lhs_dil, rhs_dil = strides or [1] * n, lhs_dil or [1] * n, rhs_dil or [1] * n
    padding = padding or [(0, 0)] * n
    x = np_pad(x, 0, [0, 0] + [p[0] for p in padding], [0, 0] + [p[1] for p in padding], [0, 0] + [d - 1 for d in lhs_dil])
    w = np_pad(w, 0, [0] * (n + 2), [0] * (n + 2), [0, 0] + [d - 1 for d in rhs_dil])
    (nb, _), (no, ni), ks = x.shape[:2], w.shape[:2], w.shape[2:]
    out_sp = [(x.shape[2 + k] - ks[k]) // strides[k] + 1 for k in range(n)]
    nout = nb // bgc
    out = np.zeros([nout, no] + out_sp)
    for o in range(no):
        g, bg = o // (no // fgc), o // (no // bgc)
        xs = x[bg * nout:(bg + 1) * nout, g * ni:(g + 1) * ni]
        for pos in np.ndindex(*out_sp):
            patch = xs[(slice(None), slice(None)) + tuple(slice(p * s, p * s + k) for p, s, k in zip(pos, strides, ks))]
            out[(slice(None), o) + pos] = np.tensordot(patch, w[o], axes=(list(range(1, n + 2)), list(range(n + 1))))
    return out.transpose([("bf" + "".join(sp)).index(c) for c in ol])


def pattern(n):
    return np.array([(i * 37 + 11) & 0xFF for i in range(n)], np.uint8)


def dense(dt):
    d = np.dtype(DTYPES[dt])
    return pattern(6 * d.itemsize).view(d).reshape(2, 3)


def clz32(x):
    return np.array([32 - int(v).bit_length() for v in x.ravel()], np.uint32).reshape(x.shape)


def gather_rows(op, idx):
    return op[np.clip(idx, 0, op.shape[0] - 1)]


def scatter_rows(op, idx, upd, combine):
    out = op.copy()
    for k, i in enumerate(idx[:, 0]):
        if 0 <= i < op.shape[0]:  # out-of-bounds updates are skipped
            out[i] = combine(out[i], upd[k])
    return out


def dynamic_slice(x, i, j, sizes):
    i, j = np.clip(i, 0, x.shape[0] - sizes[0]), np.clip(j, 0, x.shape[1] - sizes[1])
    return x[i:i + sizes[0], j:j + sizes[1]]


def dynamic_update_slice(x, u, i, j):
    i, j = np.clip(i, 0, x.shape[0] - u.shape[0]), np.clip(j, 0, x.shape[1] - u.shape[1])
    y = x.copy()
    y[i:i + u.shape[0], j:j + u.shape[1]] = u
    return y


def case(i, x):
    i = int(i) if 0 <= i < 3 else 2  # out of range runs the last branch
    return [x + 1, x * 2, -x][i]


def sort_kv(k, v):
    o = np.argsort(k, kind="stable")
    return [k[o], v[o]]


inf = np.inf
RNG = "rng"  # checked for shapes and determinism instead of values

# name -> numpy reference: f(*inputs) -> list of outputs
REF = {
    "const_splat": lambda: [np.full(2, 1.5, f32), np.full(3, -2.25, bf16), np.float16(0.5), np.full(2, -inf),
                            np.float32(np.nan), np.full(2, -7, np.int32), np.full(2, 200, np.uint8),
                            np.int64(-123456789012), np.full(2, True), np.full(2, 1 - 2j, np.complex64),
                            np.uint64(4294967296), bf16(inf)],
    **{f"const_dense_{dt}": (lambda dt=dt: [dense(dt)]) for dt in
       ["f32", "f64", "f16", "bf16", "s8", "s16", "s32", "s64", "u8", "u16", "u32", "u64", "c64", "c128",
        "f8e4m3fn", "f8e5m2"]},
    "const_dense_pred": lambda: [np.array([[1, 0, 0], [1, 1, 0]], bool), np.full(4, True)],
    "const_dense_splat_bytes": lambda: [np.full((2, 2), 3.25, f32)],
    # unary
    "unary_abs": np.abs, "unary_abs_s32": np.abs, "unary_abs_c64": np.abs, "unary_neg": np.negative,
    "unary_neg_s32": np.negative, "unary_exp": np.exp, "unary_exp_bf16": lambda x: np.exp(x.astype(f32)),
    "unary_exp_c64": np.exp, "unary_expm1": np.expm1, "unary_log": np.log, "unary_log1p": np.log1p,
    "unary_sqrt": np.sqrt, "unary_sqrt_f64": np.sqrt, "unary_rsqrt": lambda x: 1 / np.sqrt(x), "unary_cbrt": np.cbrt,
    "unary_tanh": np.tanh, "unary_tanh_f16": lambda x: np.tanh(x.astype(f32)),
    "unary_logistic": lambda x: 1 / (1 + np.exp(-x)), "unary_sine": np.sin, "unary_cosine": np.cos,
    "unary_tan": np.tan, "unary_floor": np.floor, "unary_ceil": np.ceil, "unary_round_nearest_even": np.round,
    "unary_round_nearest_afz": lambda x: np.sign(x) * np.floor(np.abs(x) + 0.5), "unary_sign": np.sign,
    "unary_sign_s32": np.sign, "unary_not_s32": np.invert, "unary_not_pred": np.logical_not,
    "unary_popcnt": lambda x: np.bitwise_count(x.view(np.uint32)).astype(np.int32),
    "unary_popcnt_u8": lambda x: np.bitwise_count(x).astype(np.uint8), "unary_count_leading_zeros": clz32,
    "unary_is_finite": np.isfinite, "unary_real": np.real, "unary_imag": np.imag,
    "unary_is_finite_special": lambda: [np.array([1, 0, 0, 0, 1, 1], bool)],
    # binary
    "binary_add": np.add, "binary_add_bf16": lambda a, b: a.astype(f32) + b.astype(f32),
    "binary_add_f16": np.add, "binary_add_s32": np.add, "binary_add_c64": np.add, "binary_subtract": np.subtract,
    "binary_multiply": np.multiply, "binary_multiply_u8": np.multiply, "binary_multiply_c128": np.multiply,
    "binary_divide": np.divide, "binary_divide_s32": lambda a, b: np.trunc(a / b).astype(np.int32),
    "binary_remainder": np.fmod, "binary_remainder_s32": np.fmod, "binary_power": np.power,
    "binary_power_s32": np.power, "binary_maximum": np.maximum, "binary_minimum_s32": np.minimum,
    "binary_atan2": np.arctan2, "binary_and_s32": np.bitwise_and, "binary_or_pred": np.logical_or,
    "binary_xor_u8": np.bitwise_xor, "binary_shift_left": np.left_shift,
    "binary_shift_right_arithmetic": np.right_shift,
    "binary_shift_right_logical": lambda a, b: (a.view(np.uint32) >> b.view(np.uint32)).view(np.int32),
    "binary_complex": lambda a, b: a + 1j * b,
    # compare, select, clamp, convert
    "compare": lambda f0, f1, i0, i1, u0, u1, c0, p0, p1: [f0 < f1, f0 >= f1, i0 <= i1, i0 != i1, u0 > u1,
                                                            u0 == u1, c0 == c0, p0 > p1],
    "select": lambda p, x, y, q: [np.where(p, x, y), np.where(q, x, y)],
    "clamp": lambda lo, x, hi, los, xs, his: [np.minimum(np.maximum(x, lo), hi), np.minimum(np.maximum(xs, los), his)],
    "convert": lambda f, i, p, u: [f.astype(np.int32), i.astype(f32), f.astype(bf16), f != 0, p.astype(f32),
                                   f.astype(np.complex64), u.astype(np.int32), f.astype(np.float16)],
    "bitcast_convert": lambda f, h: [f.view(np.int32), f.view(np.uint8).reshape(2, 3, 4),
                                     h.view(f32).reshape(2, 3)],
    # shape manipulation
    "broadcast_in_dim": lambda v, c, s: [np.broadcast_to(v, (2, 3)), np.broadcast_to(c, (2, 3)),
                                         np.full((2, 3), s), np.broadcast_to(c[:, 0], (3, 4, 2))],
    "reshape": lambda x: [x.reshape(3, 2), x.reshape(6), x.reshape(1, 2, 3)],
    "transpose": lambda x: x.transpose(2, 0, 1),
    "reverse": lambda x: x[:, ::-1],
    "slice": lambda x: [x[1:3, 0:6:2], x[0:4, 5:6]],
    "dynamic_slice": lambda x, i, j: dynamic_slice(x, i, j, (2, 3)),
    "dynamic_update_slice": dynamic_update_slice,
    "concatenate": lambda x, y, z: [np.concatenate([x, y, z], 1), y],
    "pad": lambda x, v: [np_pad(x, v, [1, -1], [0, 2], [1, 0]), x],
    "iota": lambda: [np.broadcast_to(np.arange(3, dtype=np.int32), (2, 3)), np.arange(4, dtype=f32),
                     np.broadcast_to(np.arange(3, dtype=np.uint8)[:, None], (3, 2))],
    # reductions
    "reduce_sum": lambda x: [x.sum(1), x.sum()],
    "reduce_max_bf16": lambda x: [x.max(0)],
    "reduce_and": lambda p: [p.all(0)],
    "reduce_argmax": lambda x: [x.max(1), x.argmax(1).astype(np.int32)],
    "reduce_window_sum": lambda x: [np_reduce_window(x, 0, np.sum, [2, 3], [1, 2], padding=[(1, 0), (0, 1)])],
    "reduce_window_max_dilated": lambda x: [np_reduce_window(x, -inf, np.max, [1, 2, 2, 1], [1, 1, 2, 1],
                                                             [1, 2, 1, 1], [1, 1, 2, 1], [(0, 0), (1, 1), (0, 0), (0, 0)])],
    "select_and_scatter": lambda x, s: [np_select_and_scatter(x, s, (2, 2), (2, 2))],
    # contractions
    "dot_matmul": np.matmul,
    "dot_batched_highest": lambda a, b: np.einsum("bik,bjk->bij", a, b),
    "dot_bf16_to_f32": lambda a, b: a.astype(f32) @ b.astype(f32),
    "dot_s32_vector": lambda a, b: np.int32((a * b).sum()),
    "conv_nchw_stride_pad": lambda x, w: np_conv(x, w, ("bf01", "oi01", "bf01"), [2, 1], [(1, 1), (0, 2)]),
    "conv_nhwc_dilated": lambda x, w: np_conv(x, w, ("b01f", "01io", "b01f"), padding=[(1, 0), (1, 1)],
                                              lhs_dil=[2, 1], rhs_dil=[1, 2]),
    "conv_feature_groups": lambda x, w: np_conv(x, w, ("bf0", "oi0", "bf0"), fgc=2),
    "conv_batch_groups": lambda x, w: np_conv(x, w, ("bf0", "oi0", "bf0"), bgc=2),
    # gather / scatter
    "gather_rows": gather_rows,
    "gather_batched": lambda op, idx: np.stack([gather_rows(op[b], idx[b, :, 0]) for b in range(2)]),
    "gather_window_2d": lambda op, idx: np.stack([dynamic_slice(op, i, j, (2, 2)) for i, j in idx]),
    "scatter_add": lambda op, idx, upd: scatter_rows(op, idx, upd, np.add),
    "scatter_replace_unique": lambda op, upd: scatter_rows(op, np.array([[3], [0], [4]]), upd, lambda a, b: b),
    "scatter_variadic": lambda o1, o2, idx, u1, u2: [scatter_rows(o1, idx, u1, np.add),
                                                     scatter_rows(o2, idx, u2, np.maximum)],
    # sort
    "sort_rows": lambda x: np.sort(x, 1),
    "sort_desc_dim0_s32": lambda x: -np.sort(-x, 0),
    "sort_key_value_stable": sort_kv,
    # rng
    "rng_three_fry": RNG, "rng_philox": RNG, "rng_default": RNG,
    # control flow and misc
    "while_loop": lambda x: [np.int32(5), x * 6],
    "while_nested_reduce": lambda x: [np.int32(3), np.float32(3 * x.sum())],
    "case_branches": case,
    "custom_call_sharding": lambda x: x + x,
    "optimization_barrier": lambda x, i: [x + x, i],
    "donated_argument": lambda x, y: [x + y, x - y],
}

# Input ranges (lo, hi), for all inputs or one per input; default: floats in [-3, 3], ints in [-10, 10] or [0, 20].
RANGES = {
    "unary_log": (0.1, 5), "unary_log1p": (-0.5, 3), "unary_sqrt": (0, 5), "unary_sqrt_f64": (0, 5),
    "unary_rsqrt": (0.1, 5), "unary_tan": (-1.2, 1.2), "unary_count_leading_zeros": (0, 2**32 - 1),
    "unary_popcnt": (-2**31, 2**31 - 1),
    "binary_divide": [(-3, 3), (0.5, 3)], "binary_divide_s32": [(-20, 20), (1, 7)],
    "binary_remainder": [(-3, 3), (0.5, 3)], "binary_remainder_s32": [(-20, 20), (1, 7)],
    "binary_power": [(0.1, 3), (-2, 2)], "binary_power_s32": [(-4, 4), (0, 5)],
    "binary_shift_left": [(0, 2**32 - 1), (0, 31)], "binary_shift_right_arithmetic": [(-1000, 1000), (0, 31)],
    "binary_shift_right_logical": [(-1000, 1000), (0, 31)], "binary_xor_u8": (0, 255),
    "binary_multiply_u8": (0, 255),
    "compare": [None, None, (-2, 2), (-2, 2), (0, 2), (0, 2), None, None, None],
    "dynamic_slice": [None, (-2, 6), (-2, 6)], "dynamic_update_slice": [None, None, (-2, 6), (-2, 6)],
    "gather_rows": [None, (-1, 6)], "gather_batched": [None, (-1, 6)], "gather_window_2d": [None, (-1, 5)],
    "scatter_add": [None, (-1, 5), None], "scatter_variadic": [None, None, (-1, 5), None, None],
    "sort_key_value_stable": [(0, 3), None], "case_branches": [(-1, 3), None],
}
# Inputs spelled out where random ones would miss the point (ties for rounding).
INPUTS = {
    "unary_round_nearest_even": [np.array([[-2.5, -1.5, -0.5], [0.5, 1.5, 2.7]], f32)],
    "unary_round_nearest_afz": [np.array([[-2.5, -1.5, -0.5], [0.5, 1.5, 2.7]], f32)],
}
BITWISE = {n for n in REF if n.startswith("const_dense_")} | {"bitcast_convert"}
TOLERANCE = {"reduce_sum": (1e-5, 1e-5), "dot_batched_highest": (1e-5, 1e-5), "dot_matmul": (1e-5, 1e-5),
             "dot_bf16_to_f32": (1e-5, 1e-5), "conv_nchw_stride_pad": (1e-5, 1e-5), "conv_nhwc_dilated": (1e-5, 1e-5),
             "conv_feature_groups": (1e-5, 1e-5), "conv_batch_groups": (1e-5, 1e-5),
             "reduce_window_sum": (1e-5, 1e-5), "scatter_add": (1e-5, 1e-5), "scatter_variadic": (1e-5, 1e-5),
             "select_and_scatter": (1e-5, 1e-5), "while_loop": (1e-5, 1e-5), "while_nested_reduce": (1e-5, 1e-5), "unary_exp_c64": (1e-5, 1e-5)}
DONATE = {"donated_argument": (0,)}


def make_input(rng, spec, bounds):
    dt, shape = np.dtype(DTYPES[spec["dtype"]]), tuple(spec["shape"])
    lo, hi = bounds or (None, None)
    if dt == np.bool_:
        return rng.random(shape) < 0.5
    if dt.kind == "c":
        return (rng.uniform(-2, 2, shape) + 1j * rng.uniform(-2, 2, shape)).astype(dt)
    if dt.kind in "iu":
        lo = lo if lo is not None else (0 if dt.kind == "u" else -10)
        hi = hi if hi is not None else (20 if dt.kind == "u" else 10)
        return np.asarray(rng.integers(lo, hi, size=shape, endpoint=True, dtype=dt), dt)
    return np.asarray(rng.uniform(-3 if lo is None else lo, 3 if hi is None else hi, shape), np.float64).astype(dt)


def make_inputs(name):
    if name in INPUTS:
        return INPUTS[name]
    rng = np.random.default_rng(zlib.crc32(name.encode()))
    specs = SAMPLES[name]["inputs"]
    ranges = RANGES.get(name)
    ranges = ranges if isinstance(ranges, list) else [ranges] * len(specs)
    return [make_input(rng, s, r) for s, r in zip(specs, ranges)]


def check_outputs(name, got, want):
    specs = SAMPLES[name]["outputs"]
    assert len(got) == len(specs) == len(want), f"{name}: {len(got)} outputs, {len(specs)} declared, {len(want)} expected"
    for k, (g, w, spec) in enumerate(zip(got, want, specs)):
        where = f"{name} output {k}"
        dt = np.dtype(DTYPES[spec["dtype"]])
        assert g.dtype == dt and list(g.shape) == spec["shape"], f"{where}: got {g.dtype}{g.shape}, declared {spec}"
        w = np.asarray(w)
        assert w.shape == g.shape, f"{where}: got shape {g.shape}, reference {w.shape}"
        if name in BITWISE:
            np.testing.assert_array_equal(g.view(np.uint8), w.astype(dt).view(np.uint8), err_msg=where)
        elif dt.kind in "biu":
            np.testing.assert_array_equal(g, w.astype(dt), err_msg=where)
        else:
            rtol, atol = TOLERANCE.get(name, TOL[spec["dtype"]])
            wide = np.complex128 if dt.kind == "c" else np.float64
            np.testing.assert_allclose(g.astype(wide), w.astype(dt).astype(wide) if dt.itemsize < 4 else w.astype(wide),
                                       rtol=rtol, atol=atol, equal_nan=True, err_msg=where)


def test_samples_built():
    assert SAMPLES, f"{BINARY} missing or printed no samples: run `make build`"


def test_every_sample_has_reference():
    assert not set(SAMPLES) - set(REF), f"samples without a numpy reference: {sorted(set(SAMPLES) - set(REF))}"
    assert not set(REF) - set(SAMPLES), f"references without a sample: {sorted(set(REF) - set(SAMPLES))}"


@pytest.mark.parametrize("name", sorted(n for n in SAMPLES if REF.get(n) is not RNG))
def test_family(name):
    if name not in REF:
        pytest.fail(f"{name}: no numpy reference")
    inputs = make_inputs(name)
    got = runtime.execute(SAMPLES[name]["program"], *[x.copy() for x in inputs], donate=DONATE.get(name, ()))
    want = REF[name](*inputs)
    check_outputs(name, got, want if isinstance(want, list) else [want])


@pytest.mark.parametrize("name", sorted(n for n in SAMPLES if REF.get(n) is RNG))
def test_rng_bit_generator(name):
    program, (state_spec,) = SAMPLES[name]["program"], SAMPLES[name]["inputs"]
    n = state_spec["shape"][0]
    s1, s2 = np.arange(1, n + 1, dtype=np.uint64), np.arange(7, n + 7, dtype=np.uint64)
    a, b, c = (runtime.execute(program, s) for s in (s1, s1, s2))
    for out in (a, b, c):
        for g, spec in zip(out, SAMPLES[name]["outputs"]):
            assert g.dtype == np.dtype(DTYPES[spec["dtype"]]) and list(g.shape) == spec["shape"]
    np.testing.assert_array_equal(a[1], b[1], err_msg="same state, different bits")
    np.testing.assert_array_equal(a[0], b[0], err_msg="same state, different new state")
    assert not np.array_equal(a[1], c[1]), "different states gave the same bits"
    d = runtime.execute(program, a[0])
    assert not np.array_equal(a[1], d[1]), "the returned state does not advance the generator"
    assert len({int(v) for v in a[1].ravel()}) > a[1].size // 2, "bits look constant"
