"""A sweep worker (started by run.py): reads OpInfo names from stdin, one a line, runs their cases and
writes one JSON object a line on its protocol stream (the original stdout; anything the ops print goes
to stderr):
  {"start": op}  {"case": op, "variant": v, "dtype": d}  <result dict>  {"done": op}
so the parent knows which case was running when the process died or hung.
Usage: python -m tests.opinfo.worker '<json config: variants, dtypes, max_samples, record>'
"""
import faulthandler
import json
import os
import sys
import warnings


def main():
    config = json.loads(sys.argv[1]) if len(sys.argv) > 1 else {}
    proto = os.fdopen(os.dup(1), "w", buffering=1)
    os.dup2(2, 1)  # stray prints must not corrupt the protocol
    faulthandler.enable()  # a segfault leaves a Python traceback in the worker log
    warnings.filterwarnings("ignore")

    import torch

    from . import harness

    dtypes = None
    if config.get("dtypes"):
        dtypes = [getattr(torch, d) for d in config["dtypes"]]
    variants = config.get("variants") or harness.VARIANTS
    ops = harness.ops_by_name()

    def send(obj):
        proto.write(json.dumps(obj) + "\n")

    for line in sys.stdin:
        name = line.strip()
        if not name:
            continue
        send({"start": name})
        op = ops[name]
        if os.environ.get("OPINFO_SELFTEST_CRASH") == name:  # run.py's crash handling, tested by hand
            import ctypes
            ctypes.string_at(0)
        if os.environ.get("OPINFO_SELFTEST_HANG") == name:
            import time
            time.sleep(1e6)
        for variant in variants:
            for dtype, supported in harness.variant_dtypes(op, variant):
                if dtypes is not None and dtype != "-" and dtype not in dtypes:
                    continue
                if not supported:
                    send({"op": name, "variant": variant, "dtype": harness.dtype_name(dtype),
                          "status": "not-supported-on-cpu", "samples": 0, "seconds": 0.0})
                    continue
                send({"case": name, "variant": variant, "dtype": harness.dtype_name(dtype)})
                send(harness.run_case(op, variant, dtype, config.get("max_samples"), config.get("record", True)))
        send({"done": name})
    proto.flush()
    os._exit(0)  # skip interpreter teardown: the runtime's threads are not ours to join here


if __name__ == "__main__":
    main()
