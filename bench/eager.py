"""Strict-eager overheads: median time per op on a cache hit (tpu vs CPU PyTorch, same run), and
the tiny Llama training step on tpu and on CPU. Prints figures and ratios; asserts nothing."""
import os
import statistics
import sys
import time

import torch

import torch_tpu  # noqa: F401

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "examples"))
import tiny_llama  # noqa: E402


def per_op_us(fn, x, y, reps=400):
    """Median per-op time over batches of 20 dependent ops, including the final sync."""
    for _ in range(3):
        fn(x, y)
    if x.device.type == "tpu":
        torch.tpu.synchronize()
    times = []
    for _ in range(reps // 20):
        t0 = time.perf_counter()
        z = x
        for _ in range(20):
            z = fn(z, y)
        if z.device.type == "tpu":
            torch.tpu.synchronize()
        times.append((time.perf_counter() - t0) / 20)
    return 1e6 * statistics.median(times)


def ops():
    a = torch.rand(1024)
    m = torch.rand(64, 64)
    return [
        ("add 1024", lambda x, y: x + y, a, a),
        ("mul 1024", lambda x, y: x * y, a, a),
        ("mm 64x64", lambda x, y: x @ y * 0.01, m, m),
        ("sum 1024", lambda x, y: (x.sum() + y)[:1].expand(1024), a, a),
    ]


def train_step_ms(device, steps=6):
    torch.manual_seed(0)
    t0 = time.perf_counter()
    tiny_llama.train(device, 2, batch_size=8)  # warm-up (compiles on tpu)
    warm = time.perf_counter() - t0
    t0 = time.perf_counter()
    tiny_llama.train(device, steps, batch_size=8)
    return 1e3 * (time.perf_counter() - t0) / steps, warm


def main():
    print(f"{'op':<12}{'tpu us':>10}{'cpu us':>10}{'tpu/cpu':>10}")
    for name, fn, x, y in ops():
        t = per_op_us(fn, x.to("tpu"), y.to("tpu"))
        c = per_op_us(fn, x, y)
        print(f"{name:<12}{t:>10.1f}{c:>10.1f}{t / c:>10.1f}")
    tpu_ms, tpu_warm = train_step_ms("tpu")
    cpu_ms, _ = train_step_ms("cpu")
    print(f"tiny Llama train step (batch 8x128): tpu {tpu_ms:.0f} ms, cpu {cpu_ms:.0f} ms, "
          f"tpu/cpu {tpu_ms / cpu_ms:.2f} (tpu first 2 steps incl. compiles: {tpu_warm:.1f} s)")


if __name__ == "__main__":
    main()
