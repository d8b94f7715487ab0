"""torch.distributed backend "tpu_dist": collectives on tpu tensors, staged through host memory.

PJRT's XLA CPU plugin has no cross-process collectives, so every call copies its tpu tensors to the
host, runs the same collective on an internal Gloo group (built from the group's own store, rank,
size and timeout) and copies the results back into the caller's tensors with `copy_` (views and
tensor objects stay the same). CPU tensors given to the same group go to Gloo unstaged, so
"tpu_dist" alone serves both devices.

Why a `ProcessGroup` subclass and not a `Backend`: a c10d `Backend` cannot be constructed from
Python, a `ProcessGroup` can (PyTorch's trampoline forwards C++ callers such as DDP's reducer to the
Python methods). c10d then uses this object as the whole group, also for "cpu:gloo,tpu:tpu_dist".

Debug mode (TORCH_TPU_LAUNCH_BLOCKING=1): each collective first all-gathers a fingerprint of the call
so ranks that disagree raise naming each other instead of hanging; see `_check_same_call`.

Devices: the CPU plugin gives each process one device, tpu:0, whatever LOCAL_RANK is.
`local_device()` maps LOCAL_RANK onto the devices this process has; alternatively set
TORCH_TPU_NUM_DEVICES to the local world size so that tpu:<LOCAL_RANK> exists in every process.

Distributed PJRT client (CUDA plugin, libtpu; never the CPU plugin): when a group of two or more
ranks is created before the runtime has started, the runtime starts there with a *distributed*
client: node_id = rank, num_nodes = world size (CUDA also: visible_devices = [LOCAL_RANK], one GPU per
process), and the plugin's key-value get/try_get/put callbacks backed by the group's c10d Store
(keys under "tpu_dist/pjrt/"), so every process's client sees the global topology. Collectives
still go through host staging and Gloo; see `_request_distributed_client`.
"""
import datetime
import hashlib
import os
import time
import warnings

import torch
import torch.distributed as dist
from torch.distributed import distributed_c10d as c10d

NAME = "tpu_dist"
_FP_BYTES = 256  # fixed size of a debug-mode fingerprint, so the check is one all_gather


def _debug():
    from torch_tpu import _aten
    return _aten.mode() == "debug"


def _desc(tensors, shapes=True):
    """float32[4, 3] per tensor: what every rank must agree on."""
    return ", ".join(str(t.dtype).removeprefix("torch.") + (str(list(t.shape)) if shapes else "") for t in tensors)


def _op(opts):
    op = opts.reduceOp
    return getattr(getattr(op, "op", op), "name", str(op))


def local_device():
    """torch.device("tpu", LOCAL_RANK) folded onto this process's devices (tpu:0 with one device).

    On CUDA under torchrun, before the runtime starts: tpu:0 without starting it, since the
    distributed client that init_process_group will create shows this process one GPU."""
    from torch_tpu import _C
    world = os.environ.get("WORLD_SIZE", "1").strip()
    if (not _C.initialized() and os.environ.get("LOCAL_RANK", "").strip().isdigit()
            and world.isdigit() and int(world) > 1 and _platform() == "cuda"):
        return torch.device("tpu", 0)
    return torch.device("tpu", int(os.environ.get("LOCAL_RANK", "0")) % max(torch.tpu.device_count(), 1))


def _on_tpu(t):
    return t.device.type == "tpu"


class _Staging:
    """Host stand-ins for one call's tpu tensors; `finish` writes results back into the originals."""

    def __init__(self):
        self.back = []

    def read(self, t):
        return t.detach().to("cpu").contiguous() if _on_tpu(t) else t

    def write(self, t):
        if not _on_tpu(t):
            return t
        h = torch.empty(t.shape, dtype=t.dtype)
        self.back.append((t, h))
        return h

    def update(self, t):
        if not _on_tpu(t):
            return t
        h = t.detach().to("cpu").contiguous()
        self.back.append((t, h))
        return h

    def finish(self):
        with torch.no_grad():  # Gloo writes CPU tensors without autograd; so do we
            for t, h in self.back:
                t.copy_(h)
        self.back = []


class _Work(dist._Work):
    """Gloo's work for a staged call: wait() waits for Gloo, then copies results back (once).

    Copies back happen in the waiting thread, never in Gloo's, so tpu tensors are only ever touched
    by the caller's threads.
    """

    def __init__(self, pg, name, inner, staging, result):
        super().__init__()
        self._pg, self._name, self._inner, self._staging, self._result = pg, name, inner, staging, result
        self._done = False
        self._error = None

    def _fail(self, e):
        self._error = RuntimeError(f"tpu_dist: {self._name} failed (rank {self._pg._rank} of a group of "
                                   f"{self._pg._size}): {e}")
        raise self._error from e

    def wait(self, timeout=None):
        if self._error is not None:
            raise self._error
        if self._done:
            return True
        try:
            for w in self._inner:
                # c10d's "no timeout" is 0: wait up to the group's timeout then
                if timeout is None or not timeout:
                    w.wait()
                else:
                    w.wait(timeout)
        except Exception as e:
            self._fail(e)
        self._staging.finish()
        self._done = True
        return True

    def is_completed(self):  # True once it finished, failed or not (the failure raises at wait())
        if not self._done and self._error is None and all(w.is_completed() for w in self._inner):
            try:
                self.wait()
            except RuntimeError:
                pass
        return self._done or self._error is not None

    def is_success(self):
        return self._done and self._error is None

    def exception(self):
        return self._error

    def _source_rank(self):  # recv from any rank: whom Gloo received from
        self.wait()
        return self._inner[0]._source_rank()

    source_rank = _source_rank

    def result(self):
        self.wait()
        return self._result

    def get_future(self):
        fut = torch.futures.Future()
        try:
            self.wait()
            fut.set_result(self._result)
        except Exception as e:
            fut.set_exception(e)
        return fut


class ProcessGroupTPU(dist.ProcessGroup):
    """The "tpu_dist" group: each method stages tpu tensors and runs Gloo's collective of that name."""

    def __init__(self, store, rank, size, timeout):
        super().__init__(rank, size)
        self._rank, self._size = rank, size
        self._gloo = dist.ProcessGroupGloo(store, rank, size, timeout)
        # c10d asks the group for a backend per device type (device_id's eager connect, barrier's
        # device, object collectives): answer with Gloo, which never sees a tpu tensor from us.
        for device in ("cpu", "tpu"):
            self._register_backend(torch.device(device), dist.ProcessGroup.BackendType.CUSTOM, self._gloo)

    def getBackendName(self):
        return NAME

    def __repr__(self):
        return f"ProcessGroupTPU(rank={self._rank}, size={self._size})"

    def _check_same_call(self, name, fingerprint):
        """Debug mode: all ranks must be in the same collective with the same shapes/dtypes/op/root.

        A small Gloo all_gather of the fingerprint runs first, so a mismatch raises here naming the
        ranks instead of hanging (or silently mixing buffers) inside the real collective; a dead peer
        fails this all_gather within the group timeout.
        """
        call = f"{name}({fingerprint})"
        raw = call.encode()
        if len(raw) > _FP_BYTES:  # keep a prefix to read, and a digest so long calls still compare
            raw = raw[:_FP_BYTES - 18] + b"~" + hashlib.sha1(raw).hexdigest()[:16].encode() + b")"
        mine = torch.zeros(_FP_BYTES, dtype=torch.uint8)
        mine[:len(raw)] = torch.frombuffer(bytearray(raw), dtype=torch.uint8)
        every = [torch.empty_like(mine) for _ in range(self._size)]
        try:
            self._gloo.allgather([every], [mine]).wait()
        except Exception as e:
            raise RuntimeError(f"tpu_dist: {name} failed (rank {self._rank} of a group of {self._size}) while "
                               f"checking that every rank calls it (debug mode): {e}") from e
        calls = [bytes(t.tolist()).rstrip(b"\0").decode(errors="replace") for t in every]
        if len(set(calls)) > 1:
            by_call = {}
            for r, c in enumerate(calls):
                by_call.setdefault(c, []).append(r)
            said = [f"rank{'s' if len(rs) > 1 else ''} {', '.join(map(str, rs))} called {c}"
                    for c, rs in sorted(by_call.items(), key=lambda kv: kv[1][0])]
            raise RuntimeError(f"tpu_dist: collective mismatch (seen by rank {self._rank} of a group of "
                               f"{self._size}): " + " but ".join(said))

    def _run(self, name, staging, launch, result, fingerprint=None):
        if fingerprint is not None and _debug():
            self._check_same_call(name, fingerprint)
        try:
            inner = launch()
        except Exception as e:  # bad arguments or a closed peer: raise naming the collective
            _Work(self, name, [], staging, result)._fail(e)
        return _Work(self, name, inner if isinstance(inner, list) else [inner], staging, result)

    # --- reductions and broadcasts (in place) ---
    def allreduce(self, tensors, opts=None):
        s = _Staging()
        hs = [s.update(t) for t in tensors]
        opts = opts or dist.AllreduceOptions()
        return self._run("all_reduce", s, lambda: self._gloo.allreduce(hs, opts), tensors,
                         f"{_desc(tensors)}, op={_op(opts)}")

    def allreduce_coalesced(self, tensors, opts=None):
        s = _Staging()
        hs = [s.update(t) for t in tensors]
        opts = opts or dist.AllreduceCoalescedOptions()
        return self._run("all_reduce_coalesced", s, lambda: self._gloo.allreduce_coalesced(hs, opts), tensors,
                         f"{_desc(tensors)}, op={_op(opts)}")

    def broadcast(self, tensors, opts=None):
        s = _Staging()
        hs = [s.update(t) for t in tensors]
        opts = opts or dist.BroadcastOptions()
        return self._run("broadcast", s, lambda: self._gloo.broadcast(hs, opts), tensors,
                         f"{_desc(tensors)}, src={opts.rootRank}")

    def reduce(self, tensors, opts=None):
        s = _Staging()
        hs = [s.update(t) for t in tensors]
        opts = opts or dist.ReduceOptions()
        return self._run("reduce", s, lambda: self._gloo.reduce(hs, opts), tensors,
                         f"{_desc(tensors)}, op={_op(opts)}, dst={opts.rootRank}")

    # --- gathers ---
    def allgather(self, output_lists, inputs, opts=None):
        s = _Staging()
        outs = [[s.write(t) for t in lst] for lst in output_lists]
        ins = [s.read(t) for t in inputs]
        opts = opts or c10d.AllgatherOptions()
        return self._run("all_gather", s, lambda: self._gloo.allgather(outs, ins, opts), output_lists,
                         f"{_desc(inputs)} into {[len(o) for o in output_lists]}")

    def allgather_coalesced(self, output_lists, inputs, opts=None):
        s = _Staging()
        outs = [[s.write(t) for t in lst] for lst in output_lists]
        ins = [s.read(t) for t in inputs]
        opts = opts or c10d.AllgatherOptions()
        return self._run("all_gather_coalesced", s, lambda: self._gloo.allgather_coalesced(outs, ins, opts),
                         output_lists, _desc(inputs))

    def _allgather_base(self, output, input, opts=None):
        s = _Staging()
        out, inp = s.write(output), s.read(input)
        opts = opts or c10d.AllgatherOptions()
        return self._run("all_gather_into_tensor", s, lambda: self._gloo._allgather_base(out, inp, opts), [output],
                         f"{_desc([input])} into {_desc([output])}")

    all_gather_single = _allgather_base

    def all_gather_single_coalesced(self, outputs, inputs, opts=None):
        s = _Staging()
        pairs = [(s.write(o), s.read(i)) for o, i in zip(outputs, inputs)]
        opts = opts or c10d.AllgatherOptions()
        return self._run("all_gather_into_tensor_coalesced", s,
                         lambda: [self._gloo._allgather_base(o, i, opts) for o, i in pairs], outputs,
                         f"{_desc(inputs)} into {_desc(outputs)}")

    allgather_into_tensor_coalesced = all_gather_single_coalesced

    def gather(self, output_lists, inputs, opts=None):
        s = _Staging()
        outs = [[s.write(t) for t in lst] for lst in output_lists]
        ins = [s.read(t) for t in inputs]
        opts = opts or dist.GatherOptions()  # only the root passes outputs
        return self._run("gather", s, lambda: self._gloo.gather(outs, ins, opts), output_lists,
                         f"{_desc(inputs)}, dst={opts.rootRank}")

    # --- scatters ---
    def scatter(self, outputs, input_lists, opts=None):
        s = _Staging()
        outs = [s.write(t) for t in outputs]
        ins = [[s.read(t) for t in lst] for lst in input_lists]
        opts = opts or dist.ScatterOptions()  # only the root passes inputs
        return self._run("scatter", s, lambda: self._gloo.scatter(outs, ins, opts), outputs,
                         f"{_desc(outputs)}, src={opts.rootRank}")

    def reduce_scatter(self, outputs, input_lists, opts=None):
        s = _Staging()
        outs = [s.write(t) for t in outputs]
        ins = [[s.read(t) for t in lst] for lst in input_lists]
        opts = opts or dist.ReduceScatterOptions()
        return self._run("reduce_scatter", s, lambda: self._gloo.reduce_scatter(outs, ins, opts), outputs,
                         f"{_desc(outputs)}, op={_op(opts)}")

    def _reduce_scatter_base(self, output, input, opts=None):
        s = _Staging()
        out, inp = s.write(output), s.read(input)
        opts = opts or dist.ReduceScatterOptions()
        return self._run("reduce_scatter_tensor", s, lambda: self._gloo._reduce_scatter_base(out, inp, opts),
                         [output], f"{_desc([input])} into {_desc([output])}, op={_op(opts)}")

    reduce_scatter_single = _reduce_scatter_base

    def reduce_scatter_single_coalesced(self, outputs, inputs, opts=None):
        s = _Staging()
        pairs = [(s.write(o), s.read(i)) for o, i in zip(outputs, inputs)]
        opts = opts or dist.ReduceScatterOptions()
        return self._run("reduce_scatter_tensor_coalesced", s,
                         lambda: [self._gloo._reduce_scatter_base(o, i, opts) for o, i in pairs], outputs,
                         f"{_desc(inputs)} into {_desc(outputs)}, op={_op(opts)}")

    reduce_scatter_tensor_coalesced = reduce_scatter_single_coalesced

    # --- all-to-all ---
    def alltoall(self, outputs, inputs, opts=None):
        s = _Staging()
        outs = [s.write(t) for t in outputs]
        ins = [s.read(t) for t in inputs]
        opts = opts or dist.AllToAllOptions()  # the sizes may differ between ranks: compare dtypes
        return self._run("all_to_all", s, lambda: self._gloo.alltoall(outs, ins, opts), outputs,
                         _desc(inputs, shapes=False))

    def alltoall_base(self, output, input, output_splits, input_splits, opts=None):
        s = _Staging()
        out, inp = s.write(output), s.read(input)
        opts = opts or dist.AllToAllOptions()
        return self._run("all_to_all_single", s,
                         lambda: self._gloo.alltoall_base(out, inp, output_splits, input_splits, opts), [output],
                         _desc([input], shapes=False))

    all_to_all_single = alltoall_base

    # --- synchronization and point-to-point ---
    def barrier(self, opts=None):
        opts = opts or dist.BarrierOptions()
        if opts.device is not None and opts.device.type != "cpu":
            opts.device = torch.device("cpu")  # Gloo's barrier allreduces a CPU tensor
        return self._run("barrier", _Staging(), lambda: self._gloo.barrier(opts), [], "")

    def send(self, tensors, dst, tag=0):
        s = _Staging()
        hs = [s.read(t) for t in tensors]
        return self._run(f"send to rank {dst}", s, lambda: self._gloo.send(hs, dst, tag), tensors)

    def recv(self, tensors, src, tag=0):
        s = _Staging()
        hs = [s.write(t) for t in tensors]
        return self._run(f"recv from rank {src}", s, lambda: self._gloo.recv(hs, src, tag), tensors)

    def recv_anysource(self, tensors, tag=0):
        s = _Staging()
        hs = [s.write(t) for t in tensors]
        return self._run("recv from any rank", s, lambda: self._gloo.recv_anysource(hs, tag), tensors)

    def shutdown(self):
        self._gloo.shutdown()

    def abort(self):
        self._gloo.abort()


# ---- the distributed PJRT client (CUDA, TPU)

_PJRT_KEY_PREFIX = "tpu_dist/pjrt"  # PrefixStore adds the "/"
_client_requested = False  # once per process: the first group of 2+ ranks (the world) decides


def _platform():
    """The platform the runtime runs on or will start on, without starting it (None: no plugin)."""
    from torch_tpu import _C, _plugin
    if _C.initialized():
        return _C.platform()
    try:
        return _plugin.discover()[0]
    except Exception:  # noqa: BLE001 - the runtime's own start raises it, naming what to install
        return None


def _local_gpu_count():
    """GPUs this process may use: CUDA_VISIBLE_DEVICES' entries, else the /dev/nvidiaN nodes."""
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    if visible is not None and visible.strip() != "":
        return len([v for v in visible.split(",") if v.strip() != ""])
    import glob
    return len(glob.glob("/dev/nvidia[0-9]*"))


def client_options(platform, rank, size, local_rank=None, local_gpus=None):
    """PJRT create options of rank `rank`'s distributed client, or None where the client stays as it
    is (the CPU plugin: host staging through Gloo, no cross-process client).

    CUDA (the options jax's CUDA plugin gets from jax.distributed): node_id, num_nodes, and with
    LOCAL_RANK (torchrun) visible_devices = [LOCAL_RANK % local GPUs], one GPU per process, tpu:0 in
    each. libtpu: no options, only the key-value store (it reads its topology from its environment).
    """
    if platform == "cuda":
        options = {"node_id": int(rank), "num_nodes": int(size)}
        if local_rank is None:
            raw = os.environ.get("LOCAL_RANK", "").strip()
            local_rank = int(raw) if raw.isdigit() else None
        if local_gpus is None:
            local_gpus = _local_gpu_count()
        if local_rank is not None and local_gpus > 0:
            options["visible_devices"] = [local_rank % local_gpus]
        return options
    if platform == "tpu":
        return {}
    return None


def _store_callbacks(store, poll_s=0.001, max_poll_s=0.05):
    """get(key, timeout_ms), put(key, value), try_get(key) over a c10d Store, as the runtime's
    distributed client calls them (from plugin threads, with the GIL).

    get polls `check` instead of calling `wait` with a timeout: a timed-out wait leaves a TCPStore
    client's connection out of step (its next reply is the late one). A negative timeout means the
    store's own timeout. Missing keys give None; the runtime turns that into DEADLINE_EXCEEDED (get)
    or NOT_FOUND (try_get) for the plugin.
    """
    def try_get(key):
        return store.get(key) if store.check([key]) else None

    def get(key, timeout_ms):
        if timeout_ms < 0:
            timeout_ms = int(store.timeout / datetime.timedelta(milliseconds=1))
        deadline = time.monotonic() + timeout_ms / 1000
        delay = poll_s
        while True:
            value = try_get(key)
            if value is not None:
                return value
            left = deadline - time.monotonic()
            if left <= 0:
                return None
            time.sleep(min(delay, left))
            delay = min(delay * 2, max_poll_s)

    def put(key, value):
        store.set(key, value)

    return get, put, try_get


def _request_distributed_client(store, rank, size):
    """On CUDA/TPU, starts the runtime with a distributed client for this group (the first of 2+
    ranks in this process): every rank creates its group here, so the clients' topology exchange
    (which waits for all num_nodes processes) happens now, not at some rank's first tpu tensor.
    The CPU plugin: nothing (it has no cross-process client; collectives are staged through Gloo)."""
    global _client_requested
    if _client_requested or size < 2:
        return
    platform = _platform()
    options = client_options(platform, rank, size)
    if options is None:
        return
    _client_requested = True
    from torch_tpu import _C, runtime
    if _C.initialized():
        if _C.distributed_client() is not None:
            return
        if not _runtime_is_pristine():
            warnings.warn(f"tpu_dist: the tpu runtime ({platform}) was in use before the process group, so its "
                          "PJRT client is not a distributed client (collectives are staged through Gloo "
                          "either way); create the process group before the first tpu tensor", RuntimeWarning)
            return
        # Started only to be asked about devices (c10d's device_id check and accelerator lookup run
        # before the group exists): no buffer or executable lives yet, so start it again, distributed.
        _C.shutdown()
    get, put, try_get = _store_callbacks(dist.PrefixStore(_PJRT_KEY_PREFIX, store))
    _C.configure_distributed_client(options, get, put, try_get)
    runtime.ensure_initialized()


def _runtime_is_pristine():
    """True while the running runtime holds no device buffer and no compiled program."""
    from torch_tpu import _C
    if _C.cache_info()["memory_entries"]:
        return False
    return all(_C.device_memory(i)["buffers"] == 0 for i in range(len(_C.devices())))


def _create(store, rank, size, timeout):
    _request_distributed_client(store, rank, size)
    return ProcessGroupTPU(store, rank, size, timeout)


def register():
    """Makes init_process_group("tpu_dist") (and "cpu:gloo,tpu:tpu_dist", or no backend) use this group."""
    if NAME.upper() in dist.Backend._plugins:
        return
    try:
        dist.Backend.register_backend(NAME, _create, devices=["tpu"])
    except Exception as e:  # a changed c10d API must not take the tpu device down with it
        import warnings
        warnings.warn(f"torch_tpu: could not register the {NAME} process group backend "
                      f"({type(e).__name__}: {e})")
