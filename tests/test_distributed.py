"""The "tpu_dist" torch.distributed backend: real multi-process jobs on localhost.

Each job spawns one process per rank (a fresh runtime each) that runs a scenario below; every tpu
collective is compared with the same collective on CPU tensors through a plain Gloo group.
"""
import copy
import datetime
import os
import socket
import subprocess
import sys
import tempfile
import time
import traceback

import pytest
import torch
import torch.distributed as dist

pytestmark = pytest.mark.skipif(not (dist.is_available() and dist.is_gloo_available()),
                                reason="torch without distributed/Gloo")

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
JOB_TIMEOUT = 120


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _worker(scenario, rank, world_size, port, errdir):
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), RANK=str(rank),
                      WORLD_SIZE=str(world_size), LOCAL_RANK=str(rank))
    try:
        torch.set_num_threads(1)
        torch.manual_seed(0)
        globals()[scenario](rank, world_size)
        if dist.is_initialized():
            dist.destroy_process_group()
    except BaseException:
        with open(os.path.join(errdir, f"rank{rank}.txt"), "w") as f:
            f.write(traceback.format_exc())
        os._exit(1)  # no atexit teardown that could wait on dead peers


def _torchrun_entry(scenario):
    torch.set_num_threads(1)
    globals()[scenario](int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"]))
    dist.destroy_process_group()
    print("scenario ok", flush=True)


def _launch(scenario, world_size=2, timeout=JOB_TIMEOUT, env=None):
    """Runs `scenario` on `world_size` spawned ranks; kills them all if one fails or time runs out.
    `env` is added to the ranks' environment before they start (torch_tpu reads it at import)."""
    import torch.multiprocessing as mp
    from unittest import mock
    ctx = mp.get_context("spawn")
    port = _free_port()
    with tempfile.TemporaryDirectory() as errdir:
        procs = [ctx.Process(target=_worker, args=(scenario, r, world_size, port, errdir)) for r in range(world_size)]
        with mock.patch.dict(os.environ, env or {}):
            for p in procs:
                p.start()
        deadline = time.monotonic() + timeout
        while any(p.is_alive() for p in procs) and time.monotonic() < deadline:
            if any(p.exitcode not in (None, 0) for p in procs):
                time.sleep(2)  # let the others fail on their own and say why
                break
            time.sleep(0.1)
        hung = [r for r, p in enumerate(procs) if p.is_alive()]
        for p in procs:
            if p.is_alive():
                p.kill()
            p.join()
        errors = "".join(f"--- rank {f[4:-4]}:\n" + open(os.path.join(errdir, f)).read()
                         for f in sorted(os.listdir(errdir)))
    assert not errors and not hung and all(p.exitcode == 0 for p in procs), (
        f"{scenario}: ranks still running after the deadline or failed: {hung} "
        f"exit codes {[p.exitcode for p in procs]}\n{errors}")


# ---------------------------------------------------------------- scenarios (run in the ranks)

def _same(make, run, gloo):
    """run(tensors, group) on tpu copies of make()'s tensors through the default (tpu_dist) group, and on
    the CPU originals through a Gloo group: results must match (also the tensors a call only reads)."""
    from torch.utils._pytree import tree_map
    cpu = make()
    tpu = tree_map(lambda t: t.to("tpu"), cpu)
    run(tpu, None)
    run(cpu, gloo)
    got = tree_map(lambda t: t.cpu(), tpu)
    torch.testing.assert_close(got, cpu, rtol=0, atol=0)


def _ints(dtype, *shape, lo=-3, hi=4):
    return torch.randint(lo, hi, shape).to(dtype)  # small integers: every order of a sum is exact


def collectives(rank, ws):
    dist.init_process_group("cpu:gloo,tpu:tpu_dist", device_id=torch.device("tpu", 0),
                           timeout=datetime.timedelta(seconds=60))
    assert dist.get_backend() == "cpu:gloo,tpu:tpu_dist"
    gloo = dist.new_group(backend="gloo")
    torch.manual_seed(rank)
    R = dist.ReduceOp
    for dt in (torch.float32, torch.int64, torch.bfloat16):
        ops = [R.SUM, R.PRODUCT, R.MIN, R.MAX] + ([R.BAND, R.BOR, R.BXOR] if dt == torch.int64 else [R.AVG])
        for op in ops:
            _same(lambda: [_ints(dt, 5, 3)], lambda t, g: dist.all_reduce(t[0], op=op, group=g), gloo)
        _same(lambda: [_ints(dt, 7)], lambda t, g: dist.broadcast(t[0], src=1, group=g), gloo)
        _same(lambda: [_ints(dt, 6), _ints(dt, 6)], lambda t, g: dist.reduce(t[0], dst=1, group=g), gloo)
        _same(lambda: [[torch.zeros(4, dtype=dt) for _ in range(ws)], _ints(dt, 4)],
              lambda t, g: dist.all_gather(t[0], t[1], group=g), gloo)
        _same(lambda: [torch.zeros(ws * 3, 2, dtype=dt), _ints(dt, 3, 2)],
              lambda t, g: dist.all_gather_into_tensor(t[0], t[1], group=g), gloo)
        _same(lambda: [torch.zeros(3, dtype=dt), [_ints(dt, 3) for _ in range(ws)]],
              lambda t, g: dist.reduce_scatter(t[0], t[1], group=g), gloo)
        _same(lambda: [torch.zeros(2, 3, dtype=dt), _ints(dt, 2 * ws, 3)],
              lambda t, g: dist.reduce_scatter_tensor(t[0], t[1], group=g), gloo)
        _same(lambda: [[torch.zeros(2, dtype=dt) for _ in range(ws)], [_ints(dt, 2) for _ in range(ws)]],
              lambda t, g: dist.all_to_all(t[0], t[1], group=g), gloo)
        # uneven: rank r sends r + j + 1 rows to rank j
        ins, outs = [rank + j + 1 for j in range(ws)], [j + rank + 1 for j in range(ws)]
        _same(lambda: [torch.zeros(sum(outs), 2, dtype=dt), _ints(dt, sum(ins), 2)],
              lambda t, g: dist.all_to_all_single(t[0], t[1], outs, ins, group=g), gloo)
        _same(lambda: [_ints(dt, 3), [torch.zeros(3, dtype=dt) for _ in range(ws)] if rank == 0 else []],
              lambda t, g: dist.gather(t[0], t[1] or None, dst=0, group=g), gloo)
        _same(lambda: [torch.zeros(3, dtype=dt), [_ints(dt, 3) for _ in range(ws)] if rank == 1 else []],
              lambda t, g: dist.scatter(t[0], t[1] or None, src=1, group=g), gloo)

    # coalesced forms
    _same(lambda: [[[torch.zeros(2), torch.zeros(3, 2)] for _ in range(ws)], [_ints(torch.float32, 2),
                                                                              _ints(torch.float32, 3, 2)]],
          lambda t, g: dist.all_gather_coalesced(t[0], t[1], group=g), gloo)
    _same(lambda: [_ints(torch.float32, 4), _ints(torch.float32, 2, 2)],
          lambda t, g: dist.all_reduce_coalesced(t, group=g), gloo)

    # results land in the caller's tensors, views included
    base = torch.zeros(4, 6, device="tpu")
    view = base[:, 1::2]
    dist.all_reduce(view.fill_(rank + 1))
    expect = torch.zeros(4, 6)
    expect[:, 1::2] = ws * (ws + 1) / 2
    torch.testing.assert_close(base.cpu(), expect)
    out = torch.zeros(ws, 3, device="tpu")
    dist.all_gather(list(out.unbind(0)), torch.full((3,), float(rank), device="tpu"))
    torch.testing.assert_close(out.cpu(), torch.arange(ws, dtype=torch.float32)[:, None].expand(ws, 3))

    # async_op: the work completes on wait(); its future carries the tensors
    x = torch.full((5,), float(rank), device="tpu")
    w = dist.all_reduce(x, async_op=True)
    w.wait()
    assert w.is_completed()
    torch.testing.assert_close(x.cpu(), torch.full((5,), float(sum(range(ws)))))
    y = torch.ones(2, device="tpu")
    fut = dist.all_reduce(y, async_op=True).get_future()
    torch.testing.assert_close(fut.wait()[0].cpu(), torch.full((2,), float(ws)))
    z = torch.zeros(ws * 2, device="tpu")
    dist.all_gather_into_tensor(z, torch.full((2,), rank + 1.0, device="tpu"), async_op=True).wait()
    torch.testing.assert_close(z.cpu(), torch.arange(1.0, ws + 1).repeat_interleave(2))

    # point to point: send/recv, isend/irecv, recv from any rank, a batch ring exchange
    t = torch.arange(4.0, device="tpu") + 10 * rank
    if rank == 0:
        dist.send(t, dst=1)
        got = torch.zeros(4, device="tpu")
        dist.irecv(got, src=1).wait()
        torch.testing.assert_close(got.cpu(), torch.arange(4.0) + 10)
        got2 = torch.zeros(4, device="tpu")
        assert dist.recv(got2) == 1
        torch.testing.assert_close(got2.cpu(), torch.arange(4.0) + 10)
    elif rank == 1:
        got = torch.zeros(4, device="tpu")
        dist.recv(got, src=0)
        torch.testing.assert_close(got.cpu(), torch.arange(4.0))
        dist.isend(t, dst=0).wait()
        dist.send(t, dst=0)
    recv = torch.zeros(3, dtype=torch.int64, device="tpu")
    ops = [dist.P2POp(dist.isend, torch.full((3,), rank, device="tpu"), (rank + 1) % ws),
           dist.P2POp(dist.irecv, recv, (rank - 1) % ws)]
    for w in dist.batch_isend_irecv(ops):
        w.wait()
    torch.testing.assert_close(recv.cpu(), torch.full((3,), (rank - 1) % ws))

    # sub-groups of the backend, barrier, object collectives (through Gloo on the host)
    sub = dist.new_group([0, 1])
    s = torch.ones(2, device="tpu")
    dist.all_reduce(s, group=sub)
    torch.testing.assert_close(s.cpu(), torch.full((2,), 2.0))
    dist.barrier()
    objs = [None] * ws
    dist.all_gather_object(objs, {"rank": rank})
    assert objs == [{"rank": r} for r in range(ws)]
    # CPU tensors given to the tpu_dist group go to Gloo unstaged
    c = torch.ones(3)
    dist.all_reduce(c)
    torch.testing.assert_close(c, torch.full((3,), float(ws)))

    from torch_tpu.distributed import local_device
    assert local_device() == torch.device("tpu", 0)  # one device per process: LOCAL_RANK folds onto tpu:0

    # last, as it breaks the group: rank 1 never joins, rank 0's collective times out naming itself
    short = dist.new_group(timeout=datetime.timedelta(seconds=3))
    store = dist.distributed_c10d._get_default_store()
    if rank == 0:
        with pytest.raises(RuntimeError, match=r"all_reduce.*[Tt]imed out"):
            dist.all_reduce(torch.ones(2, device="tpu"), group=short)
        store.set("rank0_done", "1")
        store.wait(["rank1_done"], datetime.timedelta(seconds=60))  # rank 0 hosts the store: leave last
    else:
        store.wait(["rank0_done"], datetime.timedelta(seconds=60))
        store.set("rank1_done", "1")
    os._exit(0)  # skip the teardown of a broken group


def debug_checks(rank, ws):
    """TORCH_TPU_LAUNCH_BLOCKING=1: ranks that disagree on a collective raise instead of hanging."""
    import torch_tpu
    assert torch_tpu.get_execution_mode() == "debug"
    dist.init_process_group("tpu_dist", device_id=torch.device("tpu", 0), timeout=datetime.timedelta(seconds=30))
    # calls whose arguments legitimately differ between ranks pass the check
    x = torch.ones(4, device="tpu")
    dist.all_reduce(x)
    outs = [torch.zeros(3, device="tpu") for _ in range(ws)] if rank == 0 else None
    dist.gather(torch.full((3,), float(rank), device="tpu"), outs, dst=0)
    ins, outs_ = [rank + j + 1 for j in range(ws)], [j + rank + 1 for j in range(ws)]
    dist.all_to_all_single(torch.zeros(sum(outs_), device="tpu"), torch.ones(sum(ins), device="tpu"), outs_, ins)
    objs = [None] * ws
    dist.gather_object({"r": rank}, objs if rank == 0 else None, dst=0)
    dist.barrier()
    torch.testing.assert_close(x.cpu(), torch.full((4,), float(ws)))

    # another collective on each rank: both raise, naming the ranks and their calls
    with pytest.raises(RuntimeError, match=r"collective mismatch .*: rank 0 called all_reduce\(float32\[4\], "
                                           r"op=SUM\) but rank 1 called all_gather_into_tensor\(float32\[2\]"):
        if rank == 0:
            dist.all_reduce(torch.ones(4, device="tpu"))
        else:
            dist.all_gather_into_tensor(torch.zeros(2 * ws, device="tpu"), torch.ones(2, device="tpu"))
    # same collective, other shape / dtype / root
    with pytest.raises(RuntimeError, match=r"rank 0 called broadcast\(float32\[3\], src=0\) but rank 1 called "
                                           r"broadcast\(int64\[3\], src=1\)"):
        dist.broadcast(torch.zeros(3, device="tpu", dtype=torch.int64 if rank else torch.float32), src=rank)
    # the group is still usable after a mismatch: the check itself completed on every rank
    y = torch.full((2,), float(rank), device="tpu")
    dist.all_reduce(y)
    torch.testing.assert_close(y.cpu(), torch.full((2,), float(sum(range(ws)))))

    # a rank that dies: the survivor raises within the group's timeout
    short = dist.new_group(timeout=datetime.timedelta(seconds=10))
    store = dist.distributed_c10d._get_default_store()
    if rank == 1:
        store.wait(["ready"])  # rank 0 is out of every earlier collective (and hosts the store)
        os._exit(0)
    store.set("ready", "1")
    start = time.monotonic()
    with pytest.raises(RuntimeError, match=r"tpu_dist: all_reduce failed \(rank 0 of a group of 2\)"):
        dist.all_reduce(torch.ones(2, device="tpu"), group=short)
    assert time.monotonic() - start < 20
    os._exit(0)  # skip the teardown of a broken group


def world4(rank, ws):
    from torch_tpu.distributed import local_device
    dev = local_device()  # tpu:LOCAL_RANK: the job sets TORCH_TPU_NUM_DEVICES
    assert dev.index == int(os.environ["LOCAL_RANK"]), dev
    torch.tpu.set_device(dev)
    dist.init_process_group("tpu_dist", device_id=dev)
    gloo = dist.new_group(backend="gloo")
    torch.manual_seed(rank)
    _same(lambda: [_ints(torch.float32, 6)], lambda t, g: dist.all_reduce(t[0], group=g), gloo)
    ins, outs = [(rank * j) % 3 for j in range(ws)], [(j * rank) % 3 for j in range(ws)]  # some empty
    _same(lambda: [torch.zeros(sum(outs), dtype=torch.int64), _ints(torch.int64, sum(ins))],
          lambda t, g: dist.all_to_all_single(t[0], t[1], outs, ins, group=g), gloo)
    # two disjoint sub-groups; every rank takes part in creating both
    evens, odds = dist.new_group([0, 2]), dist.new_group([1, 3])
    mine = evens if rank % 2 == 0 else odds
    x = torch.full((3,), float(rank), device=dev)
    dist.all_reduce(x, group=mine)
    assert x.device == dev
    torch.testing.assert_close(x.cpu(), torch.full((3,), 4.0 if rank % 2 else 2.0))
    o = torch.zeros(2, device="tpu")
    dist.all_gather_into_tensor(o, torch.full((1,), float(rank), device="tpu"), group=mine)
    torch.testing.assert_close(o.cpu(), torch.tensor([0.0, 2.0]) + rank % 2)
    # new_subgroups: consecutive blocks of ranks, [0, 1] and [2, 3]
    cur, _ = dist.new_subgroups(group_size=2)
    z = torch.full((2,), float(rank), device="tpu")
    dist.all_reduce(z, group=cur)
    torch.testing.assert_close(z.cpu(), torch.full((2,), 1.0 if rank < 2 else 5.0))
    _dcp_load(ws)


def _mlp():
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.Tanh(), torch.nn.Linear(16, 4))


def _train(model, xs, ys, steps, after_loss=lambda loss: loss):
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    losses = []
    for i in range(steps):
        opt.zero_grad()
        loss = torch.nn.functional.mse_loss(model(xs[i]), ys[i])
        loss.backward()
        opt.step()
        losses.append(after_loss(loss.detach()).item())
    return losses


class _Partly(torch.nn.Module):
    """A model whose forward skips one of its layers."""

    def __init__(self):
        super().__init__()
        self.used, self.unused = torch.nn.Linear(8, 4), torch.nn.Linear(8, 4)

    def forward(self, x):
        return self.used(x)


def ddp(rank, ws):
    from torch.nn.parallel import DistributedDataParallel as DDP
    dist.init_process_group("tpu_dist", device_id=torch.device("tpu", 0))
    steps, batch = 5, 8
    g = torch.Generator().manual_seed(1)
    xs, ys = torch.randn(steps, batch, 8, generator=g), torch.randn(steps, batch, 4, generator=g)
    ref = _train(_mlp().to("tpu"), xs.to("tpu"), ys.to("tpu"), steps)  # one process, the full batch

    def global_loss(loss):
        dist.all_reduce(loss, op=dist.ReduceOp.AVG)
        return loss

    part = slice(rank * batch // ws, (rank + 1) * batch // ws)
    model = DDP(_mlp().to("tpu"))
    losses = _train(model, xs[:, part].to("tpu"), ys[:, part].to("tpu"), steps, global_loss)
    torch.testing.assert_close(losses, ref, rtol=1e-5, atol=1e-5)
    # the replicas stayed identical
    flat = torch.cat([p.detach().reshape(-1) for p in model.parameters()])
    first = flat.clone()
    dist.broadcast(first, src=0)
    torch.testing.assert_close(flat.cpu(), first.cpu(), rtol=0, atol=0)

    # no_sync: the first micro-batch's gradients stay local, the next backward averages their sums;
    # equal to one process accumulating the full-batch gradients of both micro-batches
    mse = torch.nn.functional.mse_loss
    single = _mlp().to("tpu")
    for i in range(2):
        mse(single(xs[i].to("tpu")), ys[i].to("tpu")).backward()
    model = DDP(_mlp().to("tpu"))
    with model.no_sync():
        mse(model(xs[0, part].to("tpu")), ys[0, part].to("tpu")).backward()
    local = model.module[0].bias.grad.clone()
    mse(model(xs[1, part].to("tpu")), ys[1, part].to("tpu")).backward()
    for p, q in zip(model.parameters(), single.parameters()):
        torch.testing.assert_close(p.grad.cpu(), q.grad.cpu(), rtol=1e-5, atol=1e-5)
    others = [torch.zeros_like(local) for _ in range(ws)]
    dist.all_gather(others, local)
    assert not torch.equal(others[0].cpu(), others[1].cpu())  # no_sync did not all-reduce

    # find_unused_parameters (its bookkeeping goes through pinned host memory): a layer the forward skips
    torch.manual_seed(2)
    cpu = _Partly()
    single = copy.deepcopy(cpu).to("tpu")
    mse(single(xs[0].to("tpu")), ys[0].to("tpu")).backward()
    model = DDP(copy.deepcopy(cpu).to("tpu"), find_unused_parameters=True)
    mse(model(xs[0, part].to("tpu")), ys[0, part].to("tpu")).backward()
    torch.testing.assert_close(model.module.used.weight.grad.cpu(), single.used.weight.grad.cpu(), rtol=1e-5, atol=1e-5)
    assert model.module.unused.weight.grad is None
    _ddp_llama(rank, ws)


def sharded(rank, ws):
    """DTensor ops and FSDP2 over a tpu DeviceMesh, both through the functional collectives."""
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.tensor import Replicate, Shard, distribute_tensor
    dist.init_process_group("tpu_dist", device_id=torch.device("tpu", 0))
    mesh = init_device_mesh("tpu", (ws,))
    a, w = torch.randn(4, 6), torch.randn(6, 3)
    d = distribute_tensor(a.to("tpu"), mesh, [Shard(0)])
    assert d.to_local().shape == (4 // ws, 6) and d.to_local().device.type == "tpu"
    dw = distribute_tensor(w.to("tpu"), mesh, [Replicate()])
    torch.testing.assert_close((d @ dw).full_tensor().cpu(), a @ w)
    torch.testing.assert_close(d.sum(0).full_tensor().cpu(), a.sum(0))  # a Partial sum: all_reduce
    torch.testing.assert_close(d.redistribute(mesh, [Replicate()]).to_local().cpu(), a)

    steps, batch = 5, 8
    g = torch.Generator().manual_seed(1)
    xs, ys = torch.randn(steps, batch, 8, generator=g), torch.randn(steps, batch, 4, generator=g)
    ref = _train(_mlp().to("tpu"), xs.to("tpu"), ys.to("tpu"), steps)
    model = _fsdp_mlp(mesh)
    part = slice(rank * batch // ws, (rank + 1) * batch // ws)

    def global_loss(loss):
        dist.all_reduce(loss, op=dist.ReduceOp.AVG)
        return loss

    losses = _train(model, xs[:, part].to("tpu"), ys[:, part].to("tpu"), steps, global_loss)
    torch.testing.assert_close(losses, ref, rtol=1e-5, atol=1e-5)

    # torch.distributed.checkpoint of the sharded model; the test loads it on 1 and on 4 ranks
    import torch.distributed.checkpoint as dcp
    ckpt = os.environ["TPU_DIST_CKPT"]
    dcp.save(model.state_dict(), checkpoint_id=ckpt)
    full = {k: v.full_tensor().cpu() for k, v in model.state_dict().items()}
    if rank == 0:
        torch.save(full, ckpt + ".expect.pt")

    # tensor parallel: column- then row-wise sharded Linear layers equal the plain MLP, grads too
    from torch.distributed.tensor.parallel import ColwiseParallel, RowwiseParallel, parallelize_module
    x = torch.randn(5, 8, generator=g).to("tpu")
    single = _mlp().to("tpu")
    single(x).square().sum().backward()
    tp = parallelize_module(_mlp().to("tpu"), mesh, {"0": ColwiseParallel(), "2": RowwiseParallel()})
    assert tp[0].weight.to_local().shape == (16 // ws, 8)
    out = tp(x)
    torch.testing.assert_close(out.cpu(), single(x).detach().cpu(), rtol=1e-5, atol=1e-5)
    out.square().sum().backward()
    for (name, p), q in zip(tp.named_parameters(), single.parameters()):
        torch.testing.assert_close(p.grad.full_tensor().cpu(), q.grad.cpu(), rtol=1e-5, atol=1e-5, msg=name)

    # tensor-parallel attention: q/k/v projections column-wise (each rank its heads), output row-wise
    x = torch.randn(2, 6, 16, generator=g).to("tpu")
    torch.manual_seed(3)
    single = _Attention().to("tpu")
    single(x).square().sum().backward()
    torch.manual_seed(3)
    tp = parallelize_module(_Attention().to("tpu"), mesh, {"wq": ColwiseParallel(), "wk": ColwiseParallel(),
                                                           "wv": ColwiseParallel(), "wo": RowwiseParallel()})
    out = tp(x)
    torch.testing.assert_close(out.cpu(), single(x).detach().cpu(), rtol=1e-5, atol=1e-5)
    out.square().sum().backward()
    for (name, p), q in zip(tp.named_parameters(), single.parameters()):
        torch.testing.assert_close(p.grad.full_tensor().cpu(), q.grad.cpu(), rtol=1e-5, atol=1e-5, msg=name)

    _fsdp_llama(rank, ws, mesh)


class _Attention(torch.nn.Module):
    """Causal self-attention whose head count follows its projections' (local) width, as tensor
    parallel needs."""

    def __init__(self, dim=16, head_dim=4):
        super().__init__()
        self.head_dim = head_dim
        self.wq, self.wk, self.wv, self.wo = (torch.nn.Linear(dim, dim, bias=False) for _ in range(4))

    def forward(self, x):
        b, t, _ = x.shape
        q, k, v = (w(x).view(b, t, -1, self.head_dim).transpose(1, 2) for w in (self.wq, self.wk, self.wv))
        out = torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True)
        return self.wo(out.transpose(1, 2).reshape(b, t, -1))


def _fsdp_mlp(mesh):
    from torch.distributed.fsdp import fully_shard
    model = _mlp().to("tpu")
    for layer in model:
        if isinstance(layer, torch.nn.Linear):
            fully_shard(layer, mesh=mesh)
    return fully_shard(model, mesh=mesh)


def _dcp_load(ws):
    """Loads `sharded`'s 2-rank checkpoint into an FSDP2 model sharded over `ws` ranks."""
    import torch.distributed.checkpoint as dcp
    from torch.distributed.device_mesh import init_device_mesh
    model = _fsdp_mlp(init_device_mesh("tpu", (ws,)))
    ckpt = os.environ["TPU_DIST_CKPT"]
    state = model.state_dict()
    dcp.load(state, checkpoint_id=ckpt)
    expect = torch.load(ckpt + ".expect.pt")
    for k, v in model.state_dict().items():
        assert v.to_local().shape[0] == v.shape[0] // ws and v.to_local().device.type == "tpu"
        torch.testing.assert_close(v.full_tensor().cpu(), expect[k], rtol=0, atol=0, msg=k)


def _ddp_llama(rank, ws):
    """DDP of examples/tiny_llama.py's model (small config) against one process on the full batch."""
    from torch.nn.parallel import DistributedDataParallel as DDP
    _parallel_llama(rank, ws, DDP)


def _fsdp_llama(rank, ws, mesh):
    """FSDP2 of the tiny Llama (each block, then the model) against one process on the full batch."""
    from torch.distributed.fsdp import fully_shard

    def shard(model):
        for block in model.layers:
            fully_shard(block, mesh=mesh)
        return fully_shard(model, mesh=mesh)
    _parallel_llama(rank, ws, shard)


def _parallel_llama(rank, ws, wrap):
    """10 AdamW steps of the tiny Llama, each rank on its part of the batch, wrapped by `wrap`: the global
    losses equal one process's on the full batch."""
    sys.path.insert(0, os.path.join(ROOT, "examples"))
    import tiny_llama
    cfg = tiny_llama.Config(dim=32, n_layers=2, n_heads=2, hidden_dim=64, seq_len=16)
    steps, batch = 10, 4
    g = torch.Generator().manual_seed(2)
    tokens = torch.randint(0, cfg.vocab_size, (steps, batch, cfg.seq_len + 1), generator=g)

    def run(model, rows, after_loss, wrap=lambda m: m):
        model = wrap(model.to("tpu"))  # DDP wraps the model where it will train
        opt = torch.optim.AdamW(model.parameters(), lr=1e-2)
        losses = []
        for i in range(steps):
            t = tokens[i, rows].to("tpu")
            opt.zero_grad()
            logits = model(t[:, :-1])
            loss = torch.nn.functional.cross_entropy(logits.reshape(-1, cfg.vocab_size), t[:, 1:].reshape(-1))
            loss.backward()
            opt.step()
            losses.append(after_loss(loss.detach()).item())
        return losses

    torch.manual_seed(0)
    ref = run(tiny_llama.TinyLlama(cfg), slice(None), lambda x: x) if rank == 0 else None  # compiles: once
    torch.manual_seed(0)
    part = slice(rank * batch // ws, (rank + 1) * batch // ws)
    losses = run(tiny_llama.TinyLlama(cfg), part, lambda x: dist.all_reduce(x, op=dist.ReduceOp.AVG) or x, wrap)
    if rank == 0:  # every rank holds the same global losses
        torch.testing.assert_close(losses, ref, rtol=1e-5, atol=1e-5)


def test_collectives_match_gloo():
    _launch("collectives")


def test_debug_mode_checks_collectives():
    _launch("debug_checks", env={"TORCH_TPU_LAUNCH_BLOCKING": "1"})


def test_ddp_matches_single_process():
    _launch("ddp")


def test_init_variants_in_process():
    """One-rank groups in this process: every way of choosing the backend ends at tpu_dist for tpu."""
    from torch_tpu.distributed import ProcessGroupTPU
    for backend, kw in [("tpu_dist", {}), ("cpu:gloo,tpu:tpu_dist", {"device_id": torch.device("tpu", 0)}),
                        (None, {})]:
        dist.init_process_group(backend, store=dist.HashStore(), rank=0, world_size=1, **kw)
        try:
            assert isinstance(dist.distributed_c10d._get_default_group(), ProcessGroupTPU)
            x = torch.arange(3.0, device="tpu")
            dist.all_reduce(x)
            torch.testing.assert_close(x.cpu(), torch.arange(3.0))
        finally:
            dist.destroy_process_group()


@pytest.mark.filterwarnings("ignore:torch.distributed is disabled")  # single-process load: intended
def test_sharded_and_torchrun_world_size_4(tmp_path):
    """DTensor, FSDP2 and tensor parallel on 2 spawned ranks, which save a DCP checkpoint of the FSDP2
    model; torchrun's 4 ranks (env:// rendezvous; TORCH_TPU_NUM_DEVICES=4 makes tpu:<LOCAL_RANK> exist)
    load it resharded, and so does this process without a process group."""
    import torch.distributed.checkpoint as dcp
    ckpt = str(tmp_path / "ckpt")
    _launch("sharded", env={"TPU_DIST_CKPT": ckpt})

    script = (f"import sys; sys.path.insert(0, {os.path.dirname(os.path.abspath(__file__))!r}); "
              "import test_distributed; test_distributed._torchrun_entry('world4')")
    with tempfile.NamedTemporaryFile("w", suffix=".py", delete=False) as f:
        f.write(script)
    try:
        env = dict(os.environ, TORCH_TPU_NUM_DEVICES="4", OMP_NUM_THREADS="1", TPU_DIST_CKPT=ckpt)
        # own session: a hung job is killed with its workers, not just torchrun
        proc = subprocess.Popen([sys.executable, "-m", "torch.distributed.run", "--nproc-per-node", "4",
                                 "--master-addr", "127.0.0.1", "--master-port", str(_free_port()), f.name],
                                stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env, cwd=ROOT,
                                start_new_session=True)
        try:
            out, _ = proc.communicate(timeout=JOB_TIMEOUT)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, 9)
            out, _ = proc.communicate()
    finally:
        os.unlink(f.name)
    assert proc.returncode == 0 and out.count("scenario ok") == 4, out

    model = _mlp().to("tpu")
    state = model.state_dict()
    dcp.load(state, checkpoint_id=ckpt, no_dist=True)
    model.load_state_dict(state)
    expect = torch.load(ckpt + ".expect.pt")
    for k, v in model.state_dict().items():
        assert v.device.type == "tpu"
        torch.testing.assert_close(v.cpu(), expect[k], rtol=0, atol=0, msg=k)
