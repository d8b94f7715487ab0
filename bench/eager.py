"""Eager execution on tpu, Strict and Fuse, against CPU PyTorch and the raw PJRT floor, all measured in
this one run: cached-op host time, per-op record cost, the tiny Llama training step, the two
position loops (x[i], KV-cache writes) and an x[i].item() loop. Prints figures and ratios; asserts nothing."""
import os
import statistics
import sys
import time

import torch

import torch_tpu
from torch_tpu import _C, runtime

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "examples"))
import tiny_llama  # noqa: E402

ADD = """module {
  func.func public @main(%a: tensor<1024xf32>, %b: tensor<1024xf32>) -> tensor<1024xf32> {
    %0 = stablehlo.add %a, %b : tensor<1024xf32>
    return %0 : tensor<1024xf32>
  }
}"""


def counters():
    return torch_tpu.metrics.counters()


def sync(x):
    if isinstance(x, torch.Tensor) and x.device.type == "tpu":
        torch.tpu.synchronize()
    elif hasattr(x, "block_until_ready"):
        x.block_until_ready()


def per_op_us(step, x, n=20, reps=40):
    """Median time per op over chains of `n` dependent ops, including the final wait."""
    for _ in range(3):
        y = x
        for _ in range(n):
            y = step(y)
        sync(y)
    times = []
    for _ in range(reps):
        t0 = time.perf_counter()
        y = x
        for _ in range(n):
            y = step(y)
        sync(y)
        times.append((time.perf_counter() - t0) / n)
    return 1e6 * statistics.median(times)


def cached_op():
    a = torch.rand(1024)
    t = a.to("tpu")
    da = runtime.to_device(a.numpy())
    floor = per_op_us(lambda y: _C.execute(ADD, [y, da], [], 0)[0], da)
    cpu = per_op_us(lambda y: y + a, a)
    with torch_tpu.execution_mode("strict"):
        strict = per_op_us(lambda y: y + t, t)
    with torch_tpu.execution_mode("fuse"):
        fuse = per_op_us(lambda y: y + t, t)
        y = t
        torch_tpu.sync()
        n = 500
        t0 = time.perf_counter()
        for _ in range(n):
            y = y + t
        record = 1e6 * (time.perf_counter() - t0) / n
        sync(y)
    print("cached `a + b` (1024 f32), host time per op:")
    print(f"  raw PJRT execute (floor) {floor:7.1f} us")
    print(f"  CPU PyTorch              {cpu:7.1f} us")
    print(f"  tpu Strict               {strict:7.1f} us   {strict / floor:.2f}x the floor (goal <= 1.3x)")
    print(f"  tpu Fuse, incl. run      {fuse:7.1f} us")
    print(f"  tpu Fuse, record only    {record:7.1f} us   (goal <= 3 us)")


def train_step(device, mode, steps):
    """Seconds per step (after 2 warm-up steps), programs launched and ops dispatched per step."""
    with torch_tpu.execution_mode(mode):
        torch.manual_seed(0)
        model = tiny_llama.TinyLlama()
        tiny_llama.train(device, 2, batch_size=8, model=model)
        before = counters()
        t0 = time.perf_counter()
        tiny_llama.train(device, steps, batch_size=8, model=model)
        seconds = (time.perf_counter() - t0) / steps
        after = counters()
    per_step = lambda k: (after.get(k, 0) - before.get(k, 0)) / steps  # noqa: E731
    return seconds, per_step("executions"), per_step("ops_dispatched"), after.get("compiles", 0) - before.get("compiles", 0)


def training(steps=4):
    cpu, *_ = train_step("cpu", "strict", steps)
    strict, s_exec, s_ops, s_comp = train_step("tpu", "strict", steps)
    fuse, f_exec, f_ops, f_comp = train_step("tpu", "fuse", steps)
    print("tiny Llama train step (4 layers, dim 256, batch 8x128, AdamW):")
    print(f"  CPU eager   {1e3 * cpu:7.0f} ms")
    print(f"  tpu Strict  {1e3 * strict:7.0f} ms  {strict / cpu:.2f}x CPU (goal <= 1.2x); "
          f"{s_exec:.0f} programs/step for {s_ops:.0f} ops; {s_comp:.0f} compiles after warm-up")
    print(f"  tpu Fuse    {1e3 * fuse:7.0f} ms  {strict / fuse:.2f}x faster than Strict (goal >= 1.5x); "
          f"{f_exec:.0f} programs/step for {f_ops:.0f} ops; {f_comp:.0f} compiles after warm-up")


def loops(n=32):
    print(f"position loops ({n} iterations; compiles / wall time, first run incl. compiles):")
    for mode in ("strict", "fuse"):
        with torch_tpu.execution_mode(mode):
            before = counters().get("compiles", 0)
            t0 = time.perf_counter()
            x = torch.randn(64, 128, device="tpu")
            for i in range(n):
                y = (x[i] * 2).sum()
            y.item()
            t1 = time.perf_counter()
            mid = counters().get("compiles", 0)
            cache = torch.zeros(1, 8, 256, 64, device="tpu")
            k = torch.randn(1, 8, 1, 64, device="tpu")
            for pos in range(n):
                cache[:, :, pos:pos + 1] = k
            cache.sum().item()
            t2 = time.perf_counter()
            end = counters().get("compiles", 0)
        print(f"  {mode:<7} x[i]: {mid - before:.0f} compiles, {1e3 * (t1 - t0):6.1f} ms;  "
              f"cache[:, :, pos] = k: {end - mid:.0f} compiles, {1e3 * (t2 - t1):6.1f} ms")


def item_loop(n=1000):
    """Reading a tensor element by element (tests and data loaders do): x[i].item() per element."""
    times = {}
    for device in ("cpu", "tpu"):
        x = torch.arange(float(n), device=device)
        x[0].item()
        t0 = time.perf_counter()
        for i in range(n):
            x[i].item()
        times[device] = 1e6 * (time.perf_counter() - t0) / n
    print(f"x[i].item() over {n} elements: tpu {times['tpu']:.1f} us, CPU {times['cpu']:.1f} us "
          f"({times['tpu'] / times['cpu']:.1f}x)")


def shape_per_step(n=24):
    """An eager loop whose shapes change every step (each op compiles anew), as in tests and variable-size
    data: small tensors compile at XLA CPU's LLVM level 0 with its loop emitters; overriding both gives
    XLA's defaults."""
    print(f"new shapes every step ({n} steps of 5 ops on < 128 elements; cold compiles):")
    configs = (("small-program options (default)", []),
               ("loop emitters off", [("xla_cpu_use_fusion_emitters", True)]),
               ("XLA's defaults", [("xla_backend_optimization_level", 3), ("xla_cpu_use_fusion_emitters", True)]))
    results = {}
    for k, (label, overrides) in enumerate(configs):
        _C.set_compile_overrides(overrides)
        before = _C.metrics()
        t0 = time.perf_counter()
        for i in range(n):  # sizes no other run of this process used, so every program is new
            x = torch.randn(60 + i + k * n, device="tpu")
            x.cumsum(0).tanh().mul(2).sum().item()
        results[label] = time.perf_counter() - t0
        after = _C.metrics()
        ms = 1e3 * (after["compile_seconds"] - before.get("compile_seconds", 0)) / (after["compiles"] - before.get("compiles", 0))
        print(f"  {label:<32} {1e3 * results[label]:7.0f} ms, {ms:5.1f} ms per compile")
    _C.set_compile_overrides([])
    print(f"  ratio: {results[configs[-1][0]] / results[configs[0][0]]:.2f}x faster than XLA's defaults")


def check_cost(steps=4, rounds=2):
    """The tiny Llama step with and without device-side checks (TORCH_TPU_DEVICE_CHECKS=0), each in its
    own process, alternating; the median of each."""
    import subprocess
    code = ("import sys; sys.path.insert(0, 'bench'); import eager; "
            f"print(eager.train_step('tpu', sys.argv[1], {steps})[0])")
    root = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
    print("device-side checks (index bounds, targets, division by zero) in the tiny Llama step:")
    for mode in ("strict", "fuse"):
        times = {"1": [], "0": []}
        for _ in range(rounds):
            for on in ("1", "0"):
                out = subprocess.run([sys.executable, "-c", code, mode], capture_output=True, text=True, cwd=root,
                                     env=dict(os.environ, TORCH_TPU_DEVICE_CHECKS=on), check=True)
                times[on].append(float(out.stdout.split()[-1]))
        with_checks, without = statistics.median(times["1"]), statistics.median(times["0"])
        print(f"  {mode:<7} {1e3 * with_checks:6.0f} ms with checks, {1e3 * without:6.0f} ms without: "
              f"{100 * (with_checks / without - 1):+.1f}% (goal <= 2%)")


def main():
    cached_op()
    loops()
    item_loop()
    shape_per_step()
    training()
    check_cost()


if __name__ == "__main__":
    main()
