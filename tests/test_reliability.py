"""Reliability: fork safety, device memory accounting, compile cache integrity, environment checks.

Everything that could crash or hang runs in a fresh interpreter with a timeout (the `python` fixture,
or subprocess.run here)."""
import glob
import json
import os
import shutil
import subprocess
import sys
import textwrap

import numpy as np
import pytest
import torch

import torch_tpu  # noqa: F401
from torch_tpu import runtime

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
FORK_MESSAGE = ("Cannot re-initialize tpu in forked subprocess. To use tpu with multiprocessing, you must use "
                "the 'spawn' start method")


def last_json(proc):
    return json.loads(proc.stdout.strip().splitlines()[-1])


def run_file(path, env=None, timeout=240):
    """Runs a script file (spawned children need an importable __main__) with a timeout."""
    proc = subprocess.run([sys.executable, str(path)], capture_output=True, text=True, cwd=ROOT, timeout=timeout,
                          env=dict(os.environ, **(env or {})))
    assert proc.returncode == 0, f"failed ({proc.returncode}):\n{proc.stdout}\n{proc.stderr}"
    return proc


# A forked child reports through a pipe; the parent never waits more than `deadline` seconds for it
# (a hung child is killed and reported as such).
FORK_HARNESS = textwrap.dedent("""
    import json, os, signal, sys, time
    import torch, torch_tpu

    def run_child(body, deadline=60):
        r, w = os.pipe()
        pid = os.fork()
        if pid == 0:
            os.close(r)
            out = {}
            try:
                body(out)
            except BaseException as e:
                out["unexpected"] = f"{type(e).__name__}: {e}"
            code = out.pop("exit", 0)
            os.write(w, json.dumps(out).encode())
            os.close(w)
            sys.exit(code)  # a normal interpreter shutdown in the child
        os.close(w)
        end = time.time() + deadline
        while True:
            done, status = os.waitpid(pid, os.WNOHANG)
            if done:
                break
            if time.time() > end:
                os.kill(pid, signal.SIGKILL)
                os.waitpid(pid, 0)
                return {"hung": True}
            time.sleep(0.05)
        data = b""
        while chunk := os.read(r, 65536):
            data += chunk
        os.close(r)
        result = json.loads(data or b"{}")
        result["exitcode"] = os.waitstatus_to_exitcode(status)
        return result
""")


def test_forked_child_touching_tpu_gets_a_clear_error(python):
    code = FORK_HARNESS + textwrap.dedent("""
        x = torch.arange(4.0, device="tpu")
        assert (x + 1).cpu().tolist() == [1.0, 2.0, 3.0, 4.0]

        def child(out):
            out["bad_fork"] = torch.tpu._is_in_bad_fork()
            out["initialized"] = torch.tpu.is_initialized()
            attempts = {
                "factory": lambda: torch.ones(2, device="tpu"),
                "parent_tensor_op": lambda: (x * 2).cpu(),
                "copy_to_host": lambda: x.cpu(),
                "synchronize": lambda: torch.tpu.synchronize(),
                "lazy_init": lambda: torch.tpu._lazy_init(),
                "runtime_execute": lambda: torch_tpu.runtime.execute("module {}"),
            }
            for name, attempt in attempts.items():
                try:
                    attempt()
                    out[name] = "no error"
                except RuntimeError as e:
                    out[name] = str(e)
            out["exit"] = 3

        result = run_child(child)
        # the parent is unaffected: still initialised, not in a bad fork, and working
        result["parent_bad_fork"] = torch.tpu._is_in_bad_fork()
        result["parent_after"] = (x * 3).cpu().tolist()
        print(json.dumps(result))
    """)
    out = last_json(python(code))
    assert not out.get("hung"), out
    assert "unexpected" not in out, out
    assert out["exitcode"] == 3, out
    assert out["bad_fork"] is True and out["initialized"] is False
    assert out["parent_bad_fork"] is False and out["parent_after"] == [0.0, 3.0, 6.0, 9.0]
    for name in ("factory", "parent_tensor_op", "copy_to_host", "synchronize", "lazy_init", "runtime_execute"):
        assert FORK_MESSAGE in out[name], (name, out[name])
    assert out["factory"] == FORK_MESSAGE and out["lazy_init"] == FORK_MESSAGE


def test_forked_child_not_touching_tpu_exits_normally(python):
    code = FORK_HARNESS + textwrap.dedent("""
        x = torch.arange(4.0, device="tpu")
        (x + 1).cpu()

        def child(out):
            out["cpu_sum"] = float(torch.arange(10.0).sum())
            out["exit"] = 0

        result = run_child(child)
        result["parent_after"] = (x + 2).cpu().tolist()
        print(json.dumps(result))
    """)
    out = last_json(python(code))
    assert not out.get("hung"), out
    assert out == {"cpu_sum": 45.0, "exitcode": 0, "parent_after": [2.0, 3.0, 4.0, 5.0]}


def test_child_forked_before_the_runtime_starts_can_use_tpu(python):
    code = FORK_HARNESS + textwrap.dedent("""
        torch.manual_seed(0)  # seeding does not start the runtime (queued, as in torch.cuda)
        assert not torch_tpu._C.initialized()

        def child(out):
            out["bad_fork"] = torch.tpu._is_in_bad_fork()
            out["value"] = (torch.arange(3.0, device="tpu") * 2).cpu().tolist()

        result = run_child(child, deadline=120)
        print(json.dumps(result))
    """)
    out = last_json(python(code))
    assert out == {"bad_fork": False, "value": [0.0, 2.0, 4.0], "exitcode": 0}, out


def test_spawn_pool_uses_tpu(tmp_path):
    script = tmp_path / "spawn_pool.py"
    script.write_text(textwrap.dedent("""
        import json
        import torch
        import torch.multiprocessing as mp
        import torch_tpu  # noqa: F401


        def work(k):
            x = torch.arange(4.0, device="tpu") * k
            return float(x.sum().item()), torch.tpu._is_in_bad_fork()


        if __name__ == "__main__":
            y = torch.ones(3, device="tpu").sum().item()  # the parent has started tpu
            with mp.get_context("spawn").Pool(2) as pool:
                results = pool.map(work, [1, 2, 3])
            print(json.dumps({"parent": y, "results": results}))
    """))
    out = last_json(run_file(script))
    assert out == {"parent": 3.0, "results": [[6.0, False], [12.0, False], [18.0, False]]}


def test_dataloader_fork_workers_while_tpu_is_initialised(python):
    code = textwrap.dedent("""
        import json
        import torch
        import torch_tpu  # noqa: F401
        from torch.utils.data import DataLoader, Dataset

        class Data(Dataset):
            def __len__(self):
                return 16
            def __getitem__(self, i):
                # workers only touch CPU tensors; they know they cannot use tpu
                return torch.full((3,), float(i)), torch.tensor(torch.tpu._is_in_bad_fork())

        w = torch.ones(3, device="tpu")
        (w * 2).cpu()  # tpu is initialised in the parent
        loader = DataLoader(Data(), batch_size=4, num_workers=2, multiprocessing_context="fork")
        total, flags = 0.0, []
        for epoch in range(2):
            for x, bad in loader:
                total += float((x.to("tpu") * w).sum().item())
                flags += bad.tolist()
        print(json.dumps({"total": total, "flags": sorted(set(flags)),
                          "parent_bad_fork": torch.tpu._is_in_bad_fork()}))
    """)
    out = last_json(python(code))
    assert out == {"total": 2 * 3 * sum(range(16)), "flags": [True], "parent_bad_fork": False}


def test_seeding_before_start_is_applied_when_the_runtime_starts(python):
    code = textwrap.dedent("""
        import json, torch, torch_tpu
        torch.manual_seed(123)
        started = torch_tpu._C.initialized()
        a = torch.rand(5, device="tpu").cpu()
        torch.manual_seed(123)
        b = torch.rand(5, device="tpu").cpu()
        print(json.dumps({"started_by_seed": started, "same": bool(torch.equal(a, b)),
                          "initial_seed": torch.tpu.initial_seed()}))
    """)
    assert last_json(python(code)) == {"started_by_seed": False, "same": True, "initial_seed": 123}


# ---------------------------------------------------------------- memory accounting

MIB = 1 << 20


def test_memory_allocated_follows_tensors():
    torch.tpu.synchronize()
    torch.tpu.reset_peak_memory_stats()
    base = torch.tpu.memory_allocated()
    assert torch.tpu.max_memory_allocated() == base
    x = torch.ones(16 * MIB, device="tpu")  # 64 MiB of float32
    torch.tpu.synchronize()
    held = torch.tpu.memory_allocated()
    assert abs(held - base - 64 * MIB) < MIB, (base, held)
    assert torch.tpu.max_memory_allocated() >= held
    assert torch.tpu.memory_reserved() >= held
    assert torch.accelerator.memory_allocated() == held
    assert torch.tpu.memory_stats()["allocated_bytes.all.current"] == held
    assert torch.accelerator.memory_stats()["allocated_bytes.all.current"] == held
    del x
    torch.tpu.synchronize()
    after = torch.tpu.memory_allocated()
    assert abs(after - base) < MIB, (base, after)
    assert torch.tpu.max_memory_allocated() >= base + 64 * MIB  # the peak stays
    assert torch.accelerator.max_memory_allocated() >= base + 64 * MIB
    torch.tpu.reset_peak_memory_stats()
    assert torch.tpu.max_memory_allocated() == torch.tpu.memory_allocated()
    y = torch.ones(4 * MIB, device="tpu")
    torch.tpu.synchronize()
    assert torch.tpu.max_memory_allocated() >= torch.tpu.memory_allocated() >= after + 16 * MIB - MIB
    del y
    torch.accelerator.reset_peak_memory_stats()
    assert torch.accelerator.max_memory_allocated() == torch.tpu.memory_allocated()


def test_mem_get_info_stats_and_summary():
    torch.ones(8, device="tpu").cpu()
    free, total = torch.tpu.mem_get_info()
    assert 0 < free <= total  # the cpu plugin's devices are host memory
    assert torch.accelerator.get_memory_info()[1] == total
    assert torch.tpu.get_device_properties().total_memory == total
    stats = torch.tpu.memory_stats()
    for key in ("allocated_bytes.all.current", "allocated_bytes.all.peak", "reserved_bytes.all.current",
                "allocation.all.current", "num_ooms"):
        assert key in stats and stats[key] >= 0
    summary = torch.tpu.memory_summary()
    assert isinstance(summary, str) and "allocated" in summary and "executable cache" in summary
    assert "capacity" in summary


def test_donated_buffer_is_not_counted_twice():
    from programs import ADD_DONATING
    torch.tpu.synchronize()
    a = runtime.to_device(np.ones(4, np.float32))
    b = runtime.to_device(np.arange(4, dtype=np.float32))
    before = torch.tpu.memory_allocated()
    (out,) = runtime.execute_buffers(ADD_DONATING, [a, b], donate=[0])
    assert a.is_deleted()
    assert torch.tpu.memory_allocated() == before  # `a`'s memory became `out`'s
    np.testing.assert_array_equal(runtime.to_numpy(out), [1, 2, 3, 4])
    del a, b, out
    assert torch.tpu.memory_allocated() == before - 32


# ---------------------------------------------------------------- compile cache integrity

SIN_COS = textwrap.dedent("""
    import json, os, torch, torch_tpu
    d = os.environ["TORCH_TPU_CACHE_DIR"]
    x = torch.tensor([0.1, 0.5, 1.0, 2.0]).to("tpu")
    before = set(os.listdir(d))
    s = torch.sin(x).cpu()
    after_sin = set(os.listdir(d))
    c = torch.cos(x).cpu()
    after_cos = set(os.listdir(d))
    x = torch.tensor([0.1, 0.5, 1.0, 2.0])
    print(json.dumps({"sin_ok": bool(torch.allclose(s, x.sin())), "cos_ok": bool(torch.allclose(c, x.cos())),
                      "sin_files": sorted(after_sin - before), "cos_files": sorted(after_cos - after_sin),
                      "metrics": torch_tpu.metrics.counters()}))
""")


def test_swapped_cache_entries_are_never_used_for_each_other(python, tmp_path):
    env = {"TORCH_TPU_CACHE_DIR": str(tmp_path)}
    first = last_json(python(SIN_COS, env=env))
    assert first["sin_ok"] and first["cos_ok"]
    (sin_file,), (cos_file,) = first["sin_files"], first["cos_files"]
    sin_path, cos_path = tmp_path / sin_file, tmp_path / cos_file
    os.rename(sin_path, tmp_path / "swap")
    os.rename(cos_path, sin_path)
    os.rename(tmp_path / "swap", cos_path)

    proc = python(SIN_COS, env=env)
    second = last_json(proc)
    assert second["sin_ok"] and second["cos_ok"], second  # sin is sin, cos is cos
    m = second["metrics"]
    assert m.get("cache.disk_key_mismatch") == 2 and m.get("compiles") == 2 and "cache.disk_hits" not in m
    assert "different program" in proc.stderr

    third = last_json(python(SIN_COS, env=env))  # both entries were rewritten for the right programs
    assert third["sin_ok"] and third["cos_ok"]
    assert third["metrics"].get("compiles", 0) == 0 and third["metrics"]["cache.disk_hits"] == 2


PROBE = textwrap.dedent("""
    import json, sys
    sys.path.insert(0, "tests")
    import numpy as np
    from torch_tpu import runtime
    from programs import matmul
    out = runtime.execute(matmul(5, 6, 7), np.ones((5, 6), np.float32), np.ones((6, 7), np.float32))[0]
    print(json.dumps({"ok": bool((out == 6).all()), "metrics": runtime.metrics()}))
""")


def entry_path(python, tmp_path):
    env = {"TORCH_TPU_CACHE_DIR": str(tmp_path)}
    assert last_json(python(PROBE, env=env))["ok"]
    (entry,) = glob.glob(str(tmp_path / "*.pjrt"))
    return entry, env


def test_cache_entry_path_that_is_a_directory_is_skipped(python, tmp_path):
    entry, env = entry_path(python, tmp_path)
    os.remove(entry)
    os.mkdir(entry)
    open(os.path.join(entry, "inside"), "w").write("x")
    for _ in range(2):
        proc = python(PROBE, env=env)
        out = last_json(proc)
        assert out["ok"] and out["metrics"]["compiles"] == 1
        assert "not a regular file" in proc.stderr
    assert os.path.isdir(entry)  # left alone


def test_cache_entry_that_is_a_fifo_is_skipped_without_blocking(python, tmp_path):
    entry, env = entry_path(python, tmp_path)
    os.remove(entry)
    os.mkfifo(entry)
    proc = python(PROBE, env=env)
    assert last_json(proc)["ok"] and "not a regular file" in proc.stderr


@pytest.mark.skipif(os.geteuid() == 0, reason="root reads files whatever their mode")
def test_unreadable_cache_entry_is_recompiled(python, tmp_path):
    entry, env = entry_path(python, tmp_path)
    os.chmod(entry, 0)
    proc = python(PROBE, env=env)
    out = last_json(proc)
    assert out["ok"] and out["metrics"]["compiles"] == 1 and "cannot be read" in proc.stderr


@pytest.mark.skipif(not os.path.exists("/proc/self/mem"), reason="needs /proc")
def test_cache_entry_whose_read_fails_is_recompiled_and_replaced(python, tmp_path):
    # a regular file whose read fails (EIO: /proc/self/mem at offset 0), also for root
    entry, env = entry_path(python, tmp_path)
    os.remove(entry)
    os.symlink("/proc/self/mem", entry)
    proc = python(PROBE, env=env)
    out = last_json(proc)
    assert out["ok"] and out["metrics"]["compiles"] == 1 and out["metrics"]["cache.disk_unreadable"] == 1
    assert "cannot be read" in proc.stderr
    assert not os.path.islink(entry)  # replaced by a good entry
    out = last_json(python(PROBE, env=env))
    assert out["metrics"].get("compiles", 0) == 0 and out["metrics"]["cache.disk_hits"] == 1


def test_old_format_entries_are_recompiled_quietly(python, tmp_path):
    entry, env = entry_path(python, tmp_path)
    data = open(entry, "rb").read()
    assert data.startswith(b"TPUEXE2\n")
    open(entry, "wb").write(b"TPUEXE1\n" + data[8:])  # an entry of the previous format
    proc = python(PROBE, env=env)
    out = last_json(proc)
    assert out["ok"] and out["metrics"]["compiles"] == 1 and out["metrics"]["cache.disk_old_format"] == 1
    assert "corrupt" not in proc.stderr
    out = last_json(python(PROBE, env=env))
    assert out["metrics"].get("compiles", 0) == 0 and out["metrics"]["cache.disk_hits"] == 1


# ---------------------------------------------------------------- environment variables

TOUCH_TPU = textwrap.dedent("""
    import torch
    import torch_tpu  # noqa: F401
    assert torch.device("tpu").type == "tpu"  # import never fails: the value is checked at first use
    for attempt in range(2):
        try:
            torch.ones(2, device="tpu").cpu()
            print("NO ERROR")
        except RuntimeError as e:
            print("ERROR", str(e).replace("\\n", " "))
""")


@pytest.mark.parametrize("name, value, accepted", [
    ("TORCH_TPU_NUM_DEVICES", "abc", "from 1 to 64"),
    ("TORCH_TPU_NUM_DEVICES", "-1", "from 1 to 64"),
    ("TORCH_TPU_NUM_DEVICES", "0", "from 1 to 64"),
    ("TORCH_TPU_NUM_DEVICES", "100000", "from 1 to 64"),
    ("TORCH_TPU_NUM_DEVICES", "2.5", "from 1 to 64"),
    ("TORCH_TPU_CACHE_MEMORY_ENTRIES", "lots", "from 1 to 1048576"),
    ("TORCH_TPU_CACHE_MEMORY_ENTRIES", "-3", "from 1 to 1048576"),
    ("TORCH_TPU_CACHE_MEMORY_ENTRIES", "0", "from 1 to 1048576"),
    ("TORCH_TPU_CACHE_MEMORY_ENTRIES", "99999999999999999999", "from 1 to 1048576"),
    ("TORCH_TPU_CACHE_MAPPINGS", "many", "from 64 to 1073741824"),
    ("TORCH_TPU_CACHE_MAPPINGS", "10", "from 64 to 1073741824"),
    ("TORCH_TPU_LAUNCH_BLOCKING", "maybe", "0 or 1"),
    ("TORCH_TPU_LAUNCH_BLOCKING", "2", "0 or 1"),
    ("TORCH_TPU_CPU_FALLBACK", "please", "0 or 1"),
    ("TORCH_TPU_CACHE", "sometimes", "0 or 1"),
    ("TORCH_TPU_PLATFORM", "abacus", "expected one of cpu, cuda, tpu"),
    ("TORCH_TPU_CACHE_DIR", "<file>", "a directory"),
    ("TORCH_TPU_PJRT_PLUGIN", "<dir>", "is not a file"),
])
def test_bad_environment_values_raise_naming_the_variable(python, tmp_path, name, value, accepted):
    if value == "<file>":
        value = str(tmp_path / "a_file")
        open(value, "w").write("not a directory")
    if value == "<dir>":
        value = str(tmp_path)
    proc = python(TOUCH_TPU, env={name: value}, check=False)
    assert proc.returncode == 0, proc.stdout + proc.stderr  # never an abort
    lines = proc.stdout.strip().splitlines()
    assert len(lines) == 2 and all(line.startswith("ERROR") for line in lines), proc.stdout + proc.stderr
    assert name in lines[0] and accepted in lines[0], lines[0]
    assert "could not register" not in proc.stderr


@pytest.mark.parametrize("name, value, accepted", [
    ("TORCH_TPU_NUM_DEVICES", "100000", "from 1 to 64"),
    ("TORCH_TPU_FUSE_MAX_OPS", "0", "from 1 to 100000"),
    ("TORCH_TPU_FUSE_MAX_OPS", "10000000", "from 1 to 100000"),
    ("TORCH_TPU_FUSE_MAX_OPS", "many", "from 1 to 100000"),
    ("TORCH_TPU_DEFER_AND_FUSE", "maybe", "one of 0, 1"),
])
def test_bad_environment_value_from_the_torch_free_runtime(python, name, value, accepted):
    proc = python(textwrap.dedent("""
        from torch_tpu import runtime
        try:
            runtime.platform()
            print("NO ERROR")
        except RuntimeError as e:
            print(type(e).__name__, e)
    """), env={name: value})
    line = proc.stdout.strip().splitlines()[-1]
    assert line.startswith(f"EnvironmentVariableError {name}={value!r} is not valid"), line
    assert accepted in line


def test_cache_memory_entries_checked_in_cpp_too(python):
    # straight to the C++ runtime, past the Python checks: an error, not an abort
    proc = python(textwrap.dedent("""
        from torch_tpu import _C, _plugin
        platform, path = _plugin.discover()
        try:
            _C.init(path, platform, {}, "")
        except RuntimeError as e:
            print(type(e).__name__, e)
    """), env={"TORCH_TPU_CACHE_MEMORY_ENTRIES": "12abc"})
    assert "PjrtError" in proc.stdout and "TORCH_TPU_CACHE_MEMORY_ENTRIES='12abc'" in proc.stdout
    assert "from 1 to 1048576" in proc.stdout


def test_cached_executables_are_shed_before_the_process_runs_out_of_memory_mappings(python):
    # XLA CPU's JIT code takes several memory mappings per executable; past vm.max_map_count compiles fail
    # and the process crashes. The memory tier sheds least recently used executables above the budget.
    proc = python(textwrap.dedent("""
        import torch, torch_tpu
        def mappings():
            with open("/proc/self/maps") as f:
                return sum(1 for _ in f)
        start, peak = mappings(), 0
        for n in range(1, 241):  # a program per size
            assert (torch.arange(n, device="tpu") * 3 + 1).sum().item() == 3 * n * (n - 1) // 2 + n
            peak = max(peak, mappings())
        print(start, peak, torch_tpu.metrics.counters().get("cache.memory_evictions", 0))
    """), env={"TORCH_TPU_CACHE_MAPPINGS": "2500", "TORCH_TPU_CACHE": "0"})
    start, peak, evicted = map(float, proc.stdout.split()[-3:])
    assert start < 2500 and evicted > 0
    assert peak < 2500 + 32 * 16, (start, peak)  # at most a count's worth of new executables past the budget


@pytest.mark.parametrize("env, expect", [
    ({"TORCH_TPU_LAUNCH_BLOCKING": "true"}, {"blocking": True}),
    ({"TORCH_TPU_LAUNCH_BLOCKING": " 0 "}, {"blocking": False}),
    ({"TORCH_TPU_CACHE": "off"}, {"cache_dir": ""}),
    ({"TORCH_TPU_NUM_DEVICES": "2", "TORCH_TPU_CACHE_MEMORY_ENTRIES": "7"}, {"devices": 2, "capacity": 7}),
    ({"TORCH_TPU_PLATFORM": "CPU", "TORCH_TPU_NUM_DEVICES": ""}, {"devices": 1}),
])
def test_good_environment_values(python, env, expect):
    proc = python(textwrap.dedent("""
        import json, torch, torch_tpu
        from torch_tpu import _aten, runtime
        torch.ones(2, device="tpu").cpu()
        info = runtime.cache_info()
        print(json.dumps({"blocking": _aten.launch_blocking(), "cache_dir": info["disk_dir"],
                          "devices": torch.tpu.device_count(), "capacity": info["memory_capacity"]}))
    """), env=env)
    out = last_json(proc)
    assert {k: out[k] for k in expect} == expect


# ---------------------------------------------------------------- broken plugins

FAKE_PLUGINS = {
    "null_api": "const void* GetPjrtApi(void) { return 0; }",
    "future_api": textwrap.dedent("""
        #include <stddef.h>
        struct Header { size_t struct_size; void* extension_start; };
        struct Api { size_t struct_size; void* extension_start; struct Header h; int major; int minor; void* fns[4]; };
        static struct Api api = {sizeof(struct Api), 0, {sizeof(struct Header) + 8, 0}, 7, 0, {0}};
        const struct Api* GetPjrtApi(void) { return &api; }
    """),
}


@pytest.mark.skipif(shutil.which("cc") is None, reason="needs a C compiler")
@pytest.mark.parametrize("kind, message", [
    ("null_api", "GetPjrtApi() returned NULL"),
    ("future_api", "speaks C API 7.0"),
])
def test_broken_plugin_gives_an_error_not_a_crash(python, tmp_path, kind, message):
    src, lib = tmp_path / f"{kind}.c", tmp_path / f"lib{kind}.so"
    src.write_text(FAKE_PLUGINS[kind])
    subprocess.run(["cc", "-shared", "-fPIC", "-o", str(lib), str(src)], check=True, timeout=60)
    proc = python(textwrap.dedent("""
        import torch, torch_tpu
        from torch_tpu import runtime
        for attempt in (runtime.platform, lambda: torch.ones(2, device="tpu")):
            try:
                attempt()
                print("NO ERROR")
            except RuntimeError as e:
                print("ERROR", type(e).__name__, str(e).replace("\\n", " "))
    """), env={"TORCH_TPU_PJRT_PLUGIN": str(lib)}, check=False)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    lines = proc.stdout.strip().splitlines()
    assert len(lines) == 2 and all(line.startswith("ERROR") and message in line for line in lines), proc.stdout


NESTED = """
import sys
import numpy as np
from torch_tpu import runtime
n = int(sys.argv[1])
lines = ["module {", " func.func @main(%x: tensor<f32>) -> tensor<f32> {", "  %c = stablehlo.constant dense<0> : tensor<i32>"]
lines += [f'  %r{k} = "stablehlo.case"(%c) ({{' for k in range(n)] + ["  stablehlo.return %x : tensor<f32>"]
for k in reversed(range(n)):
    lines.append("  }) : (tensor<i32>) -> tensor<f32>")
    if k:
        lines.append(f"  stablehlo.return %r{k} : tensor<f32>")
lines += ["  return %r0 : tensor<f32>", " }", "}"]
try:
    print("OK", runtime.execute("\\n".join(lines), np.float32(2.0))[0])
except runtime.PjrtError as e:
    print("REJECTED", e)
"""

RECURSIVE = """
import numpy as np
from torch_tpu import runtime
prog = '''module {
  func.func @main(%x: tensor<f32>) -> tensor<f32> {
    %0 = func.call @f(%x) : (tensor<f32>) -> tensor<f32>
    return %0 : tensor<f32>
  }
  func.func private @f(%x: tensor<f32>) -> tensor<f32> {
    %0 = func.call @g(%x) : (tensor<f32>) -> tensor<f32>
    return %0 : tensor<f32>
  }
  func.func private @g(%x: tensor<f32>) -> tensor<f32> {
    %0 = call @f(%x) : (tensor<f32>) -> tensor<f32>
    return %0 : tensor<f32>
  }
}'''
try:
    runtime.execute(prog, np.float32(1.0))
    print("RAN")
except runtime.PjrtError as e:
    print("REJECTED", e)
"""


@pytest.mark.parametrize("depth,accepted", [(150, True), (5000, False)])
def test_deeply_nested_program_is_rejected_not_crashing(depth, accepted):
    proc = subprocess.run([sys.executable, "-c", NESTED, str(depth)], capture_output=True, text=True, timeout=300, cwd=ROOT)
    assert proc.returncode == 0, proc.stderr[-2000:]
    if accepted:
        assert proc.stdout.startswith("OK 2.0"), proc.stdout
    else:
        assert "REJECTED" in proc.stdout and "nested deeper than" in proc.stdout, proc.stdout


def test_recursive_program_is_rejected_not_crashing():
    proc = subprocess.run([sys.executable, "-c", RECURSIVE], capture_output=True, text=True, timeout=300, cwd=ROOT)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "REJECTED" in proc.stdout and "recursive call: @" in proc.stdout, proc.stdout


# A script that ends right after a backward on tpu: PyTorch's autograd thread for the device still held the
# finished graph task, and released it (with Python objects) while the interpreter finalized. That aborted the
# process ("terminate called without an active exception") about one run in two.
EXIT_AFTER_BACKWARD = textwrap.dedent("""
    import torch
    x = torch.randn(1, 7, 15, 12, 13).contiguous(memory_format=torch.channels_last_3d).squeeze(0).requires_grad_()
    torch.nn.functional.max_pool3d(x, (5, 6, 7)).sum().backward()
    y = x.detach().to("tpu").requires_grad_()
    torch.nn.functional.max_pool3d(y, (5, 6, 7)).sum().backward()
    print(y.grad.sum().item())
""")


def test_exit_right_after_a_backward_does_not_abort(tmp_path):
    script = tmp_path / "exit_after_backward.py"
    script.write_text(EXIT_AFTER_BACKWARD)
    for _ in range(6):
        run_file(script)
