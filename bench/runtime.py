"""Runtime overheads on this machine: a cached tiny program through torch_tpu.runtime beside the
same op in numpy, and cold compile versus disk-cache load. Prints figures and ratios."""
import os
import statistics
import tempfile
import time

os.environ.setdefault("TORCH_TPU_CACHE_DIR", tempfile.mkdtemp(prefix="torch_tpu_bench_"))

import numpy as np  # noqa: E402

from torch_tpu import _C, runtime  # noqa: E402

ADD = """module {
  func.func public @main(%a: tensor<1024xf32>, %b: tensor<1024xf32>) -> tensor<1024xf32> {
    %0 = stablehlo.add %a, %b : tensor<1024xf32>
    return %0 : tensor<1024xf32>
  }
}"""


def median_us(fn, reps=2000):
    for _ in range(50):
        fn()
    times = []
    for _ in range(reps):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return 1e6 * statistics.median(times)


def program(i):  # a distinct program per call, so each one is a cold compile
    return ADD.replace("%0 = stablehlo.add %a, %b", f"%c = stablehlo.constant dense<{i}.0> : tensor<1024xf32>\n"
                       f"    %s = stablehlo.add %a, %b : tensor<1024xf32>\n    %0 = stablehlo.add %s, %c")


def main():
    a = np.random.rand(1024).astype(np.float32)
    b = np.random.rand(1024).astype(np.float32)
    da, db = runtime.to_device(a), runtime.to_device(b)
    t_np = median_us(lambda: np.add(a, b))
    t_exec = median_us(lambda: runtime.execute(ADD, a, b))
    t_buf = median_us(lambda: _C.execute(ADD, [da, db], [], 0)[0].block_until_ready())
    print(f"add 1024 f32, numpy:                          {t_np:8.2f} us")
    print(f"add 1024 f32, runtime.execute (numpy in/out): {t_exec:8.2f} us  ({t_exec / t_np:.0f}x numpy)")
    print(f"add 1024 f32, device buffers, cached program: {t_buf:8.2f} us  ({t_buf / t_np:.0f}x numpy)")

    cold, warm = [], []
    for i in range(5):
        p = program(i)
        t0 = time.perf_counter()
        runtime.execute(p, a, b)
        cold.append(time.perf_counter() - t0)
        _C.clear_memory_cache()
        t0 = time.perf_counter()
        runtime.execute(p, a, b)
        warm.append(time.perf_counter() - t0)
    c, w = 1e3 * statistics.median(cold), 1e3 * statistics.median(warm)
    print(f"cold compile + run:   {c:8.2f} ms")
    print(f"disk-cache load + run:{w:8.2f} ms  (compile/disk = {c / w:.1f}x)")
    print("metrics:", {k: round(v, 4) for k, v in sorted(runtime.metrics().items())})


if __name__ == "__main__":
    main()
