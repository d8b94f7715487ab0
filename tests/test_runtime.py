"""torch_tpu.runtime on the XLA CPU plugin: transfers, execution, donation, errors, compile cache."""
import glob
import json
import os
import textwrap

import ml_dtypes
import numpy as np
import pytest

from torch_tpu import runtime
from programs import ADD_DONATING, ADD_F32_4, identity, matmul

ALL_DTYPES = {
    "pred": np.bool_, "s8": np.int8, "s16": np.int16, "s32": np.int32, "s64": np.int64,
    "u8": np.uint8, "u16": np.uint16, "u32": np.uint32, "u64": np.uint64,
    "f16": np.float16, "bf16": ml_dtypes.bfloat16, "f32": np.float32, "f64": np.float64,
    "c64": np.complex64, "c128": np.complex128,
    "f8e5m2": ml_dtypes.float8_e5m2, "f8e4m3fn": ml_dtypes.float8_e4m3fn,
    "f8e5m2fnuz": ml_dtypes.float8_e5m2fnuz, "f8e4m3fnuz": ml_dtypes.float8_e4m3fnuz,
    "f8e8m0fnu": ml_dtypes.float8_e8m0fnu,
}
MLIR = {"pred": "i1", "s8": "i8", "s16": "i16", "s32": "i32", "s64": "i64", "u8": "ui8", "u16": "ui16",
        "u32": "ui32", "u64": "ui64", "f16": "f16", "bf16": "bf16", "f32": "f32", "f64": "f64",
        "c64": "complex<f32>", "c128": "complex<f64>", "f8e5m2": "f8E5M2", "f8e4m3fn": "f8E4M3FN",
        "f8e5m2fnuz": "f8E5M2FNUZ", "f8e4m3fnuz": "f8E4M3FNUZ", "f8e8m0fnu": "f8E8M0FNU"}


def sample(dtype, shape=(3, 5), seed=0):
    rng = np.random.default_rng(seed)
    if dtype == np.bool_:
        return rng.integers(0, 2, shape).astype(bool)
    if np.issubdtype(np.dtype(dtype), np.complexfloating):
        return (rng.standard_normal(shape) + 1j * rng.standard_normal(shape)).astype(dtype)
    if np.issubdtype(np.dtype(dtype), np.integer):
        info = np.iinfo(dtype)
        return rng.integers(max(info.min, -100), min(info.max, 100), shape).astype(dtype)
    return (rng.random(shape) * 4).astype(dtype)  # positive: e8m0 holds powers of two only


def test_platform_and_devices():
    assert runtime.platform() == "cpu"
    devs = runtime.devices()
    assert len(devs) == 1 and devs[0]["kind"] == "cpu"
    info = runtime.plugin_info()
    assert info["api_version"].startswith("0.")
    assert "xla_version" in info and "stablehlo_current_version" in info


@pytest.mark.parametrize("name", sorted(ALL_DTYPES))
def test_dtype_round_trip(name):
    host = sample(ALL_DTYPES[name])
    buf = runtime.to_device(host)
    assert buf.dtype == name and buf.shape == [3, 5]
    back = runtime.to_numpy(buf)
    assert back.dtype == host.dtype
    np.testing.assert_array_equal(back.view(np.uint8), host.view(np.uint8))


@pytest.mark.parametrize("name", ["pred", "s64", "bf16", "c64", "f8e4m3fn"])
def test_dtype_through_a_program(name):
    host = sample(ALL_DTYPES[name], (2, 3))
    (out,) = runtime.execute(identity(f"tensor<2x3x{MLIR[name]}>"), host)
    np.testing.assert_array_equal(out.view(np.uint8), host.view(np.uint8))


def test_strided_host_arrays():
    base = np.arange(60, dtype=np.float32).reshape(6, 10)
    for view in (base[::2, 1::3], base.T, base[:, ::-1]):
        np.testing.assert_array_equal(runtime.to_numpy(runtime.to_device(view)), view)


def test_execute_add_and_matmul():
    a, b = np.arange(4, dtype=np.float32), np.full(4, 0.5, np.float32)
    np.testing.assert_array_equal(runtime.execute(ADD_F32_4, a, b)[0], a + b)
    x, y = sample(np.float32, (8, 16)), sample(np.float32, (16, 4), seed=1)
    np.testing.assert_allclose(runtime.execute(matmul(8, 16, 4), x, y)[0], x @ y, rtol=1e-5)


def test_memory_cache_hits_and_no_recompile():
    prog = matmul(3, 7, 2)
    x, y = sample(np.float32, (3, 7)), sample(np.float32, (7, 2))
    runtime.execute(prog, x, y)
    before = runtime.metrics()
    for _ in range(5):
        runtime.execute(prog, x, y)
    after = runtime.metrics()
    assert after.get("compiles", 0) == before.get("compiles", 0)
    assert after["cache.memory_hits"] - before.get("cache.memory_hits", 0) == 5


def test_donation_consumes_only_donated_inputs():
    a = runtime.to_device(np.ones(4, np.float32))
    b = runtime.to_device(np.arange(4, dtype=np.float32))
    (out,) = runtime.execute_buffers(ADD_DONATING, [a, b], donate=[0])
    np.testing.assert_array_equal(runtime.to_numpy(out), [1, 2, 3, 4])
    assert a.is_deleted() and not b.is_deleted()
    with pytest.raises(runtime.PjrtError):
        runtime.to_numpy(a)

    kept = runtime.to_device(np.ones(4, np.float32))
    (out,) = runtime.execute_buffers(ADD_DONATING, [kept, b])  # not donated: input survives
    assert not kept.is_deleted()
    np.testing.assert_array_equal(runtime.to_numpy(kept), np.ones(4))
    np.testing.assert_array_equal(runtime.to_numpy(out), [1, 2, 3, 4])


@pytest.mark.parametrize("args, message", [
    ((np.ones(4, np.float32),), "takes 2 arguments, got 1"),
    ((np.ones(4, np.float32), np.ones(4, np.int32)), "argument 1: program expects tensor<4xf32>, got tensor<4xi32>"),
    ((np.ones(4, np.float32), np.ones(5, np.float32)), "argument 1"),
])
def test_bad_arguments_raise(args, message):
    with pytest.raises(runtime.PjrtError, match=message):
        runtime.execute(ADD_F32_4, *args)


def test_malformed_program_raises_with_plugin_message():
    with pytest.raises(runtime.PjrtError, match="garbage"):
        runtime.execute("module { garbage }")
    with pytest.raises(runtime.PjrtError, match="device index 7 out of range"):
        runtime.execute(ADD_F32_4, np.ones(4, np.float32), np.ones(4, np.float32), device=7)
    # still alive and working
    np.testing.assert_array_equal(runtime.execute(ADD_F32_4, np.ones(4, np.float32), np.ones(4, np.float32))[0], 2)


def test_unsupported_host_dtype():
    with pytest.raises(TypeError, match="no PJRT equivalent"):
        runtime.to_device(np.array(["a"]))


CACHE_PROBE = textwrap.dedent("""
    import numpy as np, json
    from torch_tpu import runtime
    from programs import matmul
    out = runtime.execute(matmul(5, 6, 7), np.ones((5, 6), np.float32), np.ones((6, 7), np.float32))[0]
    assert (out == 6).all()
    print(json.dumps(runtime.metrics()))
""")


def probe(python, env):
    import json
    proc = python(f"import sys; sys.path.insert(0, 'tests')\n{CACHE_PROBE}", env=env)
    return json.loads(proc.stdout.strip().splitlines()[-1]), proc.stderr


def test_disk_cache_survives_processes(python, tmp_path):
    env = {"TORCH_TPU_CACHE_DIR": str(tmp_path)}
    first, _ = probe(python, env)
    assert first["compiles"] == 1 and "cache.disk_hits" not in first
    assert len(glob.glob(str(tmp_path / "*.pjrt"))) == 1
    second, _ = probe(python, env)
    assert second.get("compiles", 0) == 0 and second["cache.disk_hits"] == 1


def test_corrupt_cache_entry_is_recompiled_and_overwritten(python, tmp_path):
    env = {"TORCH_TPU_CACHE_DIR": str(tmp_path)}
    probe(python, env)
    (entry,) = glob.glob(str(tmp_path / "*.pjrt"))
    data = bytearray(open(entry, "rb").read())
    data[len(data) // 2] ^= 0xFF
    open(entry, "wb").write(bytes(data))
    metrics, stderr = probe(python, env)
    assert metrics["compiles"] == 1 and metrics["cache.disk_corrupt"] == 1
    assert "corrupt" in stderr
    open(entry, "wb").write(b"short")
    metrics, _ = probe(python, env)
    assert metrics["compiles"] == 1
    metrics, _ = probe(python, env)  # the overwritten entry is good again
    assert metrics.get("compiles", 0) == 0 and metrics["cache.disk_hits"] == 1


def test_cache_can_be_turned_off(python, tmp_path):
    metrics, _ = probe(python, {"TORCH_TPU_CACHE_DIR": str(tmp_path), "TORCH_TPU_CACHE": "0"})
    assert metrics["compiles"] == 1
    assert not os.listdir(tmp_path)


def test_multiple_cpu_devices_and_cross_device_copy(python):
    proc = python(textwrap.dedent("""
        import numpy as np
        from torch_tpu import runtime
        assert len(runtime.devices()) == 3, runtime.devices()
        a = runtime.to_device(np.arange(6, dtype=np.float32), device=0)
        b = a.copy_to(2)
        print(runtime.to_numpy(b).tolist())
    """), env={"TORCH_TPU_NUM_DEVICES": "3"})
    assert proc.stdout.strip().splitlines()[-1] == "[0.0, 1.0, 2.0, 3.0, 4.0, 5.0]"


@pytest.mark.parametrize("env, message", [
    ({"TORCH_TPU_PJRT_PLUGIN": "/nonexistent/plugin.so"}, "does not exist"),
    ({"TORCH_TPU_PJRT_PLUGIN": "/usr/lib/x86_64-linux-gnu/libm.so.6"}, "not a PJRT plugin"),
    ({"TORCH_TPU_PLATFORM": "tpu"}, "pip install libtpu"),
    ({"TORCH_TPU_PLATFORM": "abacus"}, "expected one of cpu, cuda, tpu"),
])
def test_missing_plugin_messages(python, env, message):
    proc = python(textwrap.dedent("""
        from torch_tpu import runtime
        try:
            runtime.platform()
        except Exception as e:
            print(type(e).__name__, e)
    """), env=env)
    assert message in proc.stdout, proc.stdout + proc.stderr


def test_memory_cache_is_bounded_and_reloads_evicted_programs(python, tmp_path):
    # every loaded executable holds JIT-code memory mappings (a per-process limit): the memory tier keeps
    # at most TORCH_TPU_CACHE_MEMORY_ENTRIES; evicted programs come back from the disk tier
    code = """
import json, torch, torch_tpu
x = torch.arange(6.0, device="tpu")
outs = [(x + 1).cpu(), (x * 2).cpu(), (x - 3).cpu(), (x + 1).cpu()]
c = torch_tpu.metrics.counters()
print(json.dumps({"ok": [o.tolist() for o in outs], "evicted": c.get("cache.memory_evictions", 0),
                  "disk_hits": c.get("cache.disk_hits", 0)}))
"""
    env = {"TORCH_TPU_CACHE_DIR": str(tmp_path), "TORCH_TPU_CACHE_MEMORY_ENTRIES": "2"}
    out = json.loads(python(code, env=env).stdout.strip().splitlines()[-1])
    x = [float(i) for i in range(6)]
    assert out["ok"] == [[v + 1 for v in x], [v * 2 for v in x], [v - 3 for v in x], [v + 1 for v in x]]
    assert out["evicted"] >= 2 and out["disk_hits"] >= 1  # x + 1 was evicted, then loaded from disk


def test_buffer_bytes_are_counted_per_device(python):
    # every pjrt::Buffer adds its on-device bytes to its device's counters and takes them away when freed
    proc = python(textwrap.dedent("""
        import json
        import numpy as np
        from torch_tpu import _C, runtime
        runtime.ensure_initialized()
        before = [_C.device_memory(d)["allocated_bytes"] for d in range(3)]
        a = runtime.to_device(np.zeros(1000, np.float32), device=2)
        b = a.copy_to(1)
        held = [_C.device_memory(d)["allocated_bytes"] for d in range(3)]
        del a
        after = [_C.device_memory(d)["allocated_bytes"] for d in range(3)]
        m = _C.device_memory(2)
        print(json.dumps({"before": before, "held": held, "after": after, "peak": m["peak_allocated_bytes"],
                          "allocs": m["allocs"], "frees": m["frees"]}))
    """), env={"TORCH_TPU_NUM_DEVICES": "3"})
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    assert out["before"] == [0, 0, 0]
    assert out["held"] == [0, 4000, 4000] and out["after"] == [0, 4000, 0]
    assert out["peak"] == 4000 and out["allocs"] == 1 and out["frees"] == 1


def test_cache_entry_records_its_key(python, tmp_path):
    # entries are `TPUEXE2\n | key size | payload size | sha256(key, payload) | key | payload`: the key
    # text (program, options, platform, versions) is stored and compared on load
    probe(python, {"TORCH_TPU_CACHE_DIR": str(tmp_path)})
    (entry,) = glob.glob(str(tmp_path / "*.pjrt"))
    data = open(entry, "rb").read()
    assert data[:8] == b"TPUEXE2\n"
    key_size = int.from_bytes(data[8:16], "little")
    payload_size = int.from_bytes(data[16:24], "little")
    assert len(data) == 56 + key_size + payload_size
    key = data[56:56 + key_size]
    assert b"stablehlo.dot_general" in key and b"tensor<5x6xf32>" in key
