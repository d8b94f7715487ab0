"""torch.distributed on tpu: the "tpu_dist" backend against Gloo on CPU tensors, on localhost.

1. all_reduce (SUM, float32) bus bandwidth for 1 KiB..64 MiB on 2 processes: tpu_dist on tpu tensors
   against Gloo on CPU tensors in the same processes, and the ratio per size (on the XLA CPU plugin
   tpu_dist stages through host memory and runs Gloo, so the ratio is the staging's cost).
2. DDP train-step time of examples/tiny_llama.py's model (small config) on 2 processes against 1,
   the same batch per process (weak scaling: 1.0 would be free communication).

Prints figures only (never asserts). Usage: python bench/dist.py [--quick]
"""
import argparse
import datetime
import json
import os
import socket
import statistics
import sys
import tempfile
import time
import traceback

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SIZES = [1 << k for k in range(10, 27, 2)]  # 1 KiB, 4 KiB, ..., 64 MiB
TARGET_S = 0.25  # time per measurement


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _fmt_bytes(n):
    for unit in ("B", "KiB", "MiB", "GiB"):
        if n < 1024:
            return f"{n:g} {unit}"
        n /= 1024
    return f"{n:g} TiB"


def _time_per_call(fn, sync, barrier, budget_s, agree):
    """Seconds per call of fn: warm up, estimate, then time a batch sized to fit the budget (every
    rank makes the same number of calls: `agree` takes the largest count)."""
    fn(); fn(); sync()
    barrier()
    t0 = time.perf_counter()
    fn()
    sync()
    once = time.perf_counter() - t0
    n = agree(max(3, min(200, int(budget_s / max(once, 1e-6)))))
    barrier()
    t0 = time.perf_counter()
    for _ in range(n):
        fn()
    sync()
    return (time.perf_counter() - t0) / n


def _all_reduce_bench(rank, ws, quick):
    import torch
    import torch.distributed as dist
    gloo = dist.new_group(backend="gloo")
    barrier = lambda: dist.barrier(group=gloo)  # noqa: E731

    def agree(n):
        t = torch.tensor([n])
        dist.all_reduce(t, op=dist.ReduceOp.MAX, group=gloo)
        return int(t)

    rows = []
    for size in (SIZES[::2] if quick else SIZES):
        n = size // 4
        host = torch.zeros(n, dtype=torch.float32)  # zeros: repeated sums stay finite
        dev = torch.zeros(n, dtype=torch.float32, device="tpu")
        t_tpu = _time_per_call(lambda: dist.all_reduce(dev), torch.tpu.synchronize, barrier, TARGET_S, agree)
        t_cpu = _time_per_call(lambda: dist.all_reduce(host, group=gloo), lambda: None, barrier, TARGET_S, agree)
        factor = 2 * (ws - 1) / ws  # all_reduce's bus bandwidth: each byte crosses the ring 2(n-1)/n times
        rows.append({"bytes": size, "tpu_s": t_tpu, "gloo_s": t_cpu,
                     "tpu_busbw": size * factor / t_tpu, "gloo_busbw": size * factor / t_cpu})
    return rows


def _ddp_step_time(rank, ws, steps):
    import torch
    import torch.distributed as dist
    from torch.nn.parallel import DistributedDataParallel as DDP
    sys.path.insert(0, os.path.join(ROOT, "examples"))
    import tiny_llama
    cfg = tiny_llama.Config(dim=64, n_layers=2, n_heads=4, hidden_dim=128, seq_len=32)
    batch = 4  # per process
    torch.manual_seed(0)
    model = DDP(tiny_llama.TinyLlama(cfg).to("tpu"))
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    g = torch.Generator().manual_seed(rank)
    tokens = torch.randint(0, cfg.vocab_size, (batch, cfg.seq_len + 1), generator=g).to("tpu")

    def step():
        opt.zero_grad()
        logits = model(tokens[:, :-1])
        loss = torch.nn.functional.cross_entropy(logits.reshape(-1, cfg.vocab_size), tokens[:, 1:].reshape(-1))
        loss.backward()
        opt.step()
        return loss

    for _ in range(3):  # compiles (or loads from the disk cache)
        step().item()
    dist.barrier()
    times = []
    for _ in range(steps):
        t0 = time.perf_counter()
        step().item()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def _worker(job, rank, ws, port, out, quick):
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), RANK=str(rank), WORLD_SIZE=str(ws),
                      LOCAL_RANK=str(rank))
    try:
        import torch
        import torch.distributed as dist
        import torch_tpu  # noqa: F401
        torch.set_num_threads(1)
        dist.init_process_group("tpu_dist", timeout=datetime.timedelta(seconds=120))
        result = {}
        if job == "all_reduce":
            result["all_reduce"] = _all_reduce_bench(rank, ws, quick)
        result["ddp_step_s"] = _ddp_step_time(rank, ws, 5 if quick else 10)
        result["platform"] = torch_tpu._C.platform()
        dist.destroy_process_group()
        if rank == 0:
            with open(out, "w") as f:
                json.dump(result, f)
    except BaseException:
        traceback.print_exc()
        os._exit(1)


def _launch(job, ws, quick, timeout=150):
    import torch.multiprocessing as mp
    ctx = mp.get_context("spawn")
    port = _free_port()
    with tempfile.TemporaryDirectory() as d:
        out = os.path.join(d, "result.json")
        procs = [ctx.Process(target=_worker, args=(job, r, ws, port, out, quick)) for r in range(ws)]
        for p in procs:
            p.start()
        deadline = time.monotonic() + timeout
        for p in procs:
            p.join(max(0.0, deadline - time.monotonic()))
        for p in procs:
            if p.is_alive():
                p.kill()
                p.join()
        if any(p.exitcode != 0 for p in procs) or not os.path.exists(out):
            raise SystemExit(f"{job} on {ws} process(es) failed: exit codes {[p.exitcode for p in procs]}")
        with open(out) as f:
            return json.load(f)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="every other size, fewer DDP steps")
    args = ap.parse_args()
    t0 = time.perf_counter()
    two = _launch("all_reduce", 2, args.quick)
    one = _launch("ddp", 1, args.quick)
    print(f"tpu_dist vs Gloo, 2 processes on localhost (platform: {two['platform']}), all_reduce SUM float32")
    print(f"{'size':>10} {'tpu_dist us':>12} {'Gloo us':>10} {'tpu_dist GB/s':>14} {'Gloo GB/s':>10} "
          f"{'Gloo/tpu_dist bw':>17}")
    for r in two["all_reduce"]:
        print(f"{_fmt_bytes(r['bytes']):>10} {r['tpu_s'] * 1e6:12.1f} {r['gloo_s'] * 1e6:10.1f} "
              f"{r['tpu_busbw'] / 1e9:14.3f} {r['gloo_busbw'] / 1e9:10.3f} {r['gloo_busbw'] / r['tpu_busbw']:16.2f}x")
    s1, s2 = one["ddp_step_s"], two["ddp_step_s"]
    print(f"DDP tiny Llama (dim 64, 2 layers, seq 32, batch 4 per process) step time: 1 process {s1 * 1e3:.1f} ms, "
          f"2 processes {s2 * 1e3:.1f} ms, ratio 2/1 = {s2 / s1:.2f}x (weak scaling, 1.0 = free communication)")
    print(f"(bench took {time.perf_counter() - t0:.0f} s)")


if __name__ == "__main__":
    main()
