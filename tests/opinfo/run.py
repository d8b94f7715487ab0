"""The OpInfo sweep: every OpInfo of op_db (or a subset) on tpu against CPU, in worker subprocesses
that are restarted every --chunk ops and after a crash or a hang, so neither loses the sweep. Results
go to a JSON-lines file as they arrive (--resume continues an interrupted sweep, --update reruns a
few ops of a finished one); then report.py writes docs/op_coverage.md.

  python -m tests.opinfo.run --full                       # the whole op_db, every sample
  python -m tests.opinfo.run --full --max-samples 4       # bounded: at most 4 samples per case
  python -m tests.opinfo.run --ops add,sin --no-report    # a few ops; results in build/opinfo/
  python -m tests.opinfo.run --update --ops sort,topk      # rerun two ops of the last sweep, rewrite the report
  python -m tests.opinfo.run --match '^nn\\.functional\\.' --variants forward --dtypes float32
"""
import argparse
import collections
import json
import os
import platform
import re
import select
import signal
import subprocess
import sys
import threading
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
DEFAULT_RESULTS = os.path.join(ROOT, "build", "opinfo", "results.jsonl")


def all_op_names():
    """op_db's names (and core_extra's), without importing torch in the parent (a subprocess lists them)."""
    code = ("import warnings; warnings.filterwarnings('ignore');"
            "from torch.testing._internal.common_methods_invocations import op_db;"
            "from tests.opinfo.core_extra import OPS;"
            "print('\\n'.join(o.name + ('.' + o.variant_test_name if o.variant_test_name else '') for o in op_db + OPS))")
    env = dict(os.environ, TORCH_DEVICE_BACKEND_AUTOLOAD="0")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, env=env, cwd=ROOT)
    return [ln for ln in out.stdout.splitlines() if ln.strip()]


def log_tail(path, start, n=6):
    try:
        with open(path, "rb") as f:
            f.seek(start)
            lines = [ln.strip() for ln in f.read().decode(errors="replace").splitlines() if ln.strip()]
    except OSError:
        return ""
    keys = ("Fatal Python error", "terminate called", "what():", "Segmentation fault", "Aborted", "Check failed", "F0", "Error")
    picked = [ln for ln in lines if any(k in ln for k in keys)]
    frames = [ln for ln in lines if ln.startswith('File "')][:1]  # faulthandler: innermost frame first
    return " | ".join((picked or lines)[-n:] + frames)[:400]


class Sweep:
    def __init__(self, args):
        self.args = args
        self.queue = collections.deque()
        self.lock = threading.Lock()
        self.out = open(args.results, "a")
        self.done_ops = 0
        self.total_ops = 0
        self.t0 = time.time()
        self.fatal = None

    def emit(self, rec):
        with self.lock:
            self.out.write(json.dumps(rec) + "\n")
            self.out.flush()

    def take(self):
        with self.lock:
            chunk = []
            while self.queue and len(chunk) < self.args.chunk:
                chunk.append(self.queue.popleft())
            return chunk

    def give_back(self, ops):
        with self.lock:
            self.queue.extendleft(reversed(ops))

    def progress(self, name, wid):
        with self.lock:
            self.done_ops += 1
            if not self.args.quiet:
                el = time.time() - self.t0
                print(f"[{self.done_ops}/{self.total_ops} {el:7.0f}s w{wid}] {name}", flush=True)

    def worker_loop(self, wid):
        log_path = os.path.join(os.path.dirname(self.args.results), f"worker{wid}.log")
        config = json.dumps({"variants": self.args.variants, "dtypes": self.args.dtypes,
                             "max_samples": self.args.max_samples, "record": not self.args.no_record})
        startup_failures = 0
        while True:
            chunk = self.take()
            if not chunk:
                return
            log = open(log_path, "ab")
            log_start = log.tell()
            proc = subprocess.Popen([sys.executable, "-m", "tests.opinfo.worker", config], cwd=ROOT,
                                    stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=log,
                                    env=dict(os.environ, PYTHONUNBUFFERED="1"))
            proc.stdin.write(("\n".join(chunk) + "\n").encode())
            proc.stdin.close()
            remaining = list(chunk)
            current, case = None, None
            started = time.time()
            buf = b""
            reason = None
            while True:
                if current is not None and time.time() - started > self.args.timeout:
                    reason = "timeout"
                    break
                ready, _, _ = select.select([proc.stdout], [], [], 1.0)
                if not ready:
                    continue
                data = os.read(proc.stdout.fileno(), 1 << 16)
                if not data:
                    break
                buf += data
                while b"\n" in buf:
                    line, buf = buf.split(b"\n", 1)
                    msg = json.loads(line)
                    if "start" in msg:
                        current, case, started = msg["start"], None, time.time()
                    elif "case" in msg:
                        case, started = (msg["variant"], msg["dtype"]), time.time()
                    elif "done" in msg:
                        remaining.remove(msg["done"])
                        self.progress(msg["done"], wid)
                        current, case = None, None
                    else:
                        case = None
                        self.emit(msg)
            if reason == "timeout":
                proc.kill()
            rc = proc.wait()
            log.close()
            if current is not None:
                variant, dtype = case or ("*", "-")
                if reason == "timeout":
                    detail = f"timeout: no result within {self.args.timeout}s"
                else:
                    sig = -rc if rc < 0 else None
                    what = f"killed by {signal.Signals(sig).name}" if sig else f"exited with status {rc}"
                    detail = f"worker {what}: {log_tail(log_path, log_start)}"
                self.emit({"op": current, "variant": variant, "dtype": dtype, "status": reason or "crash",
                           "detail": detail, "samples": 0, "seconds": round(time.time() - started, 3)})
                remaining.remove(current)
                self.progress(current, wid)
            elif remaining and rc != 0:
                if len(remaining) == len(chunk):  # died before its first op: a build in progress?
                    startup_failures += 1
                    if startup_failures >= 3:
                        with self.lock:
                            self.queue.clear()
                        self.fatal = f"worker exited with status {rc} before its first op: {log_tail(log_path, log_start)}"
                        return
                    time.sleep(30)
            if len(remaining) < len(chunk):
                startup_failures = 0
            self.give_back(remaining)

    def run(self, ops):
        self.queue.extend(ops)
        self.total_ops = len(ops)
        threads = [threading.Thread(target=self.worker_loop, args=(w,)) for w in range(self.args.workers)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        self.out.close()
        if self.fatal:
            raise SystemExit(self.fatal)


def machine():
    cpu = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo") as f:
            m = re.search(r"model name\s*:\s*(.*)", f.read())
            cpu = m.group(1).strip() if m else cpu
    except OSError:
        pass
    try:
        with open("/proc/meminfo") as f:
            kib = int(re.search(r"MemTotal:\s*(\d+)", f.read()).group(1))
            mem = f"{kib / 2**20:.0f} GiB RAM"
    except (OSError, AttributeError):
        mem = ""
    load = ""
    if hasattr(os, "getloadavg"):
        load = "load average at start %.1f" % os.getloadavg()[0]
    return ", ".join(x for x in [f"{platform.node()}", f"{os.cpu_count()} x {cpu}", mem, platform.platform(), load] if x)


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sel = p.add_mutually_exclusive_group(required=True)
    sel.add_argument("--full", action="store_true", help="every OpInfo of op_db")
    sel.add_argument("--ops", help="comma-separated OpInfo names (name or name.variant_test_name)")
    sel.add_argument("--match", help="regular expression on OpInfo names")
    p.add_argument("--variants", type=lambda s: s.split(","), default=None,
                   help="subset of forward,backward,inplace,out,error")
    p.add_argument("--dtypes", type=lambda s: s.split(","), default=None, help="subset of the forward dtypes")
    p.add_argument("--max-samples", type=int, default=None, help="at most this many samples per case")
    p.add_argument("--workers", type=int, default=1)
    p.add_argument("--chunk", type=int, default=40, help="ops per worker process before it is restarted")
    p.add_argument("--timeout", type=float, default=300, help="seconds one case may take before it counts as hung")
    p.add_argument("--results", default=DEFAULT_RESULTS)
    keep = p.add_mutually_exclusive_group()
    keep.add_argument("--resume", action="store_true", help="keep the results file and skip the ops it has")
    keep.add_argument("--update", action="store_true",
                      help="keep the results file and replace the selected ops' results (rerun a few ops)")
    p.add_argument("--no-record", action="store_true", help="do not record the aten ops each case dispatches")
    p.add_argument("--report", default=os.path.join(ROOT, "docs", "op_coverage.md"))
    p.add_argument("--no-report", action="store_true")
    p.add_argument("--quiet", action="store_true")
    args = p.parse_args(argv)

    names = all_op_names()
    if args.ops:
        wanted = args.ops.split(",")
        unknown = [n for n in wanted if n not in names]
        if unknown:
            p.error(f"unknown OpInfo names: {unknown}")
        names = wanted
    elif args.match:
        names = [n for n in names if re.search(args.match, n)]
    os.makedirs(os.path.dirname(args.results), exist_ok=True)
    meta_path = args.results + ".meta.json"
    keep = args.resume or args.update
    old_meta = {}
    if keep and os.path.exists(meta_path):
        with open(meta_path) as f:
            old_meta = json.load(f)
    if keep and os.path.exists(args.results):
        with open(args.results) as f:
            old = [json.loads(ln) for ln in f if ln.strip()]
        if args.resume:  # skip the ops already there
            seen = {r["op"] for r in old}
            names = [n for n in names if n not in seen]
        else:  # --update: drop the selected ops' records, then rerun them
            rerun = set(names)
            with open(args.results, "w") as f:
                f.writelines(json.dumps(r) + "\n" for r in old if r["op"] not in rerun)
    elif os.path.exists(args.results):
        os.remove(args.results)

    if args.update:  # rerun with the sweep's own settings unless told otherwise
        for k in ("max_samples", "variants", "dtypes"):
            if getattr(args, k) is None and old_meta.get(k) is not None:
                setattr(args, k, old_meta[k])
    t0 = time.time()
    meta = {"started": time.strftime("%Y-%m-%d %H:%M:%S %Z", time.localtime(t0)), "machine": machine(),
            "command": "python -m tests.opinfo.run " + " ".join(argv if argv is not None else sys.argv[1:]),
            "workers": args.workers, "max_samples": args.max_samples, "variants": args.variants,
            "dtypes": args.dtypes, "timeout": args.timeout}
    meta.update({k: old_meta[k] for k in ("started", "machine", "command", "workers", "max_samples", "variants",
                                          "dtypes", "timeout") if k in old_meta})
    previous_seconds = old_meta.get("seconds", 0.0)
    Sweep(args).run(names)
    if args.update:  # the sweep's duration stays the full sweep's; the reruns are listed
        meta["seconds"] = previous_seconds or round(time.time() - t0, 1)
        meta["updated"] = old_meta.get("updated", []) + [f"{len(names)} ops rerun in {time.time() - t0:.0f}s "
                                                         f"on {time.strftime('%Y-%m-%d %H:%M')}"]
    else:
        meta["seconds"] = round(previous_seconds + time.time() - t0, 1)
    meta["finished"] = time.strftime("%Y-%m-%d %H:%M:%S %Z")
    with open(meta_path, "w") as f:
        json.dump(meta, f, indent=1)
    print(f"sweep: {len(names)} ops in {time.time() - t0:.0f}s; results in {args.results}")
    if not args.no_report:
        from . import report
        report.write(args.results, args.report)
        print(f"report: {args.report}")


if __name__ == "__main__":
    main()
