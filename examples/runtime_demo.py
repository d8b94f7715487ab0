"""Prints the PJRT platform and devices, then runs a small matmul through the runtime, checked
against numpy. Run with `make demo`."""
import sys
import time

import numpy as np

from torch_tpu import runtime

M, K, N = 64, 128, 32
MATMUL = f"""module {{
  func.func public @main(%a: tensor<{M}x{K}xf32>, %b: tensor<{K}x{N}xf32>) -> tensor<{M}x{N}xf32> {{
    %0 = stablehlo.dot_general %a, %b, contracting_dims = [1] x [0],
         precision = [HIGHEST, HIGHEST] : (tensor<{M}x{K}xf32>, tensor<{K}x{N}xf32>) -> tensor<{M}x{N}xf32>
    return %0 : tensor<{M}x{N}xf32>
  }}
}}"""


def main():
    info = runtime.plugin_info()
    print(f"platform: {runtime.platform()}  plugin: {info['path']}")
    print(f"PJRT C API {info['api_version']}, xla_version {info.get('xla_version')}, "
          f"StableHLO {info.get('stablehlo_current_version')}")
    for d in runtime.devices():
        print(f"  device {d['id']}: {d['kind']} ({d['description']})")
    rng = np.random.default_rng(0)
    a = rng.standard_normal((M, K), dtype=np.float32)
    b = rng.standard_normal((K, N), dtype=np.float32)
    t0 = time.perf_counter()
    (out,) = runtime.execute(MATMUL, a, b)
    print(f"matmul {M}x{K} @ {K}x{N}: {1e3 * (time.perf_counter() - t0):.1f} ms (first call, "
          f"{'disk cache hit' if runtime.metrics().get('cache.disk_hits') else 'compiled'})")
    err = float(np.abs(out - a @ b).max())
    print(f"max |tpu - numpy| = {err:.2e}")
    if err > 1e-3:
        sys.exit("mismatch against numpy")
    print("metrics:", {k: round(v, 4) for k, v in sorted(runtime.metrics().items())})


if __name__ == "__main__":
    main()
