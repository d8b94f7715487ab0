"""The distributed PJRT client (CUDA plugin, libtpu) as far as this machine (XLA CPU plugin) allows:
create options as the plugin sees them (PJRT_NamedValue), the key-value callbacks called as a plugin
calls them (over a dict and over c10d stores), and when torch_tpu/distributed.py asks for the client.
The GPU run is scripts/device-check."""
import datetime
import os
import subprocess
import sys
import textwrap
import threading
import time

import pytest
import torch
import torch.distributed as dist

import torch_tpu  # noqa: F401
from torch_tpu import _C
from torch_tpu import distributed as tpu_dist

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def test_option_encoding():
    rows = _C._encode_client_options({"node_id": 1, "num_nodes": 4, "visible_devices": [3, 5],
                                      "preallocate": False, "allocator": "platform", "memory_fraction": 0.5})
    assert rows == [("node_id", "int64", 1, 1), ("num_nodes", "int64", 4, 1),
                    ("visible_devices", "int64_list", [3, 5], 2), ("preallocate", "bool", False, 1),
                    ("allocator", "string", "platform", 8), ("memory_fraction", "float", 0.5, 1)]
    assert _C._encode_client_options({"visible_devices": ()}) == [("visible_devices", "int64_list", [], 0)]


def test_client_options_per_platform():
    opts = tpu_dist.client_options
    assert opts("cuda", 1, 4, local_rank=5, local_gpus=4) == {"node_id": 1, "num_nodes": 4, "visible_devices": [1]}
    assert opts("cuda", 0, 2, local_rank=0, local_gpus=0) == {"node_id": 0, "num_nodes": 2}  # no GPU seen: all
    assert opts("tpu", 3, 8) == {}  # libtpu: the key-value store only
    assert opts("cpu", 0, 2) is None and opts(None, 0, 2) is None  # host staging, client unchanged


class DictStore:
    """The three callables over a dict, counting calls."""

    def __init__(self):
        self.data, self.calls = {}, []

    def get(self, key, timeout_ms):
        self.calls.append(("get", key, timeout_ms))
        if key == "raise-timeout":
            raise TimeoutError("too slow")
        if key == "raise":
            raise ValueError("store broke")
        return self.data.get(key)

    def put(self, key, value):
        self.calls.append(("put", key))
        self.data[key] = value

    def try_get(self, key):
        self.calls.append(("try_get", key))
        return self.data.get(key)

    def call(self, op, key, value=b"", timeout_ms=0, try_get=True):
        return _C._kv_call(self.get, self.put, self.try_get if try_get else None, op, key, value, timeout_ms)


def test_kv_callbacks_dict_store():
    s = DictStore()
    before = _C._kv_values_outstanding()
    assert s.call("put", "cuda:topology/0", b"a\0b") is None
    assert s.data["cuda:topology/0"] == b"a\0b"  # binary values pass unchanged
    assert s.call("get", "cuda:topology/0", timeout_ms=1500) == b"a\0b"
    assert s.calls[-1] == ("get", "cuda:topology/0", 1500)  # the plugin's timeout reaches the store
    assert s.call("try_get", "cuda:topology/0") == b"a\0b"
    s.data["empty"] = b""
    assert s.call("get", "empty", timeout_ms=1) == b""
    assert _C._kv_values_outstanding() == before  # every value freed by the deleter it came with

    with pytest.raises(_C.PjrtError, match=r"DEADLINE_EXCEEDED: .*key 'missing' not set within 20 ms"):
        s.call("get", "missing", timeout_ms=20)
    with pytest.raises(_C.PjrtError, match=r"NOT_FOUND: .*key 'missing' not found"):
        s.call("try_get", "missing")
    with pytest.raises(_C.PjrtError, match=r"DEADLINE_EXCEEDED: .*get 'raise-timeout': TimeoutError: too slow"):
        s.call("get", "raise-timeout", timeout_ms=5)
    with pytest.raises(_C.PjrtError, match=r"UNKNOWN: .*get 'raise': ValueError: store broke"):
        s.call("get", "raise", timeout_ms=5)
    with pytest.raises(_C.PjrtError, match=r"UNIMPLEMENTED"):  # a store without try_get
        s.call("try_get", "cuda:topology/0", try_get=False)
    assert _C._kv_values_outstanding() == before


def test_store_callbacks_over_c10d_stores():
    """distributed.py's callbacks over the group's store: prefixed keys, a key set while get waits,
    a missing key timing out, and a TCPStore that still works after such a timeout."""
    tcp = dist.TCPStore("127.0.0.1", 0, 1, True, timeout=datetime.timedelta(seconds=10))
    hashed = dist.HashStore()
    hashed.set_timeout(datetime.timedelta(seconds=10))
    for base in (hashed, tcp):
        store = dist.PrefixStore(tpu_dist._PJRT_KEY_PREFIX, base)
        get, put, try_get = tpu_dist._store_callbacks(store)

        def call(op, key, value=b"", timeout_ms=0):
            return _C._kv_call(get, put, try_get, op, key, value, timeout_ms)

        call("put", "k", b"\x00\xff")
        assert base.get("tpu_dist/pjrt/k") == b"\x00\xff"
        assert call("get", "k", timeout_ms=1000) == b"\x00\xff"
        assert call("try_get", "k") == b"\x00\xff"
        with pytest.raises(_C.PjrtError, match="NOT_FOUND"):
            call("try_get", "nope")
        t0 = time.monotonic()
        with pytest.raises(_C.PjrtError, match="DEADLINE_EXCEEDED"):
            call("get", "nope", timeout_ms=100)
        assert 0.09 < time.monotonic() - t0 < 5
        later = threading.Timer(0.1, lambda: store.set("late", b"v"))  # another node's put
        later.start()
        assert call("get", "late", timeout_ms=5000) == b"v"
        later.join()
        assert call("get", "k", timeout_ms=10) == b"\x00\xff"  # still in step after the timeout


def _rank(rank, port, errdir):
    """One rank of a 2-rank job: the CPU plugin is left alone; then, as on CUDA (platform patched, the
    CPU plugin ignores node_id/num_nodes), init_process_group with device_id (c10d starts the runtime
    to check the device before the group exists) ends with a distributed client on the group's store."""
    import traceback
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), RANK=str(rank), WORLD_SIZE="2",
                      LOCAL_RANK=str(rank))
    try:
        tpu_dist._request_distributed_client(dist.HashStore(), rank, 2)  # CPU: nothing, runtime not started
        assert _C.distributed_client() is None and not _C.initialized()
        tpu_dist._client_requested = False
        tpu_dist._platform = lambda: "cuda"
        assert tpu_dist.local_device() == torch.device("tpu", 0) and not _C.initialized()
        dist.init_process_group("tpu_dist", device_id=torch.device("tpu", 0),
                                timeout=datetime.timedelta(seconds=30))
        d = _C.distributed_client()
        assert d == {"options": {"node_id": rank, "num_nodes": 2}, "try_get": True, "active": True}, d
        x = torch.full((3,), float(rank + 1), device="tpu")
        dist.all_reduce(x)
        assert x.cpu().tolist() == [3.0] * 3
        sub = dist.new_group([0, 1])  # a second group: nothing more
        dist.all_reduce(x, group=sub)
        try:
            _C.configure_distributed_client({}, lambda k, t: None, lambda k, v: None)
            raise AssertionError("configure after the start did not raise")
        except _C.PjrtError as e:
            assert "FAILED_PRECONDITION" in str(e) and "already started" in str(e), e
        dist.destroy_process_group()
    except BaseException:
        with open(os.path.join(errdir, f"rank{rank}.txt"), "w") as f:
            f.write(traceback.format_exc())
        os._exit(1)


def test_process_group_makes_distributed_client(tmp_path, monkeypatch):
    import socket
    import torch.multiprocessing as mp
    monkeypatch.setenv("TORCH_TPU_PLATFORM", "cpu")
    monkeypatch.delenv("TORCH_TPU_PJRT_PLUGIN", raising=False)
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    ctx = mp.get_context("spawn")
    procs = [ctx.Process(target=_rank, args=(r, port, str(tmp_path))) for r in range(2)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(90)
    for p in procs:
        if p.is_alive():
            p.kill()
            p.join()
    errors = "".join(open(os.path.join(tmp_path, f)).read() for f in sorted(os.listdir(tmp_path)))
    assert not errors and all(p.exitcode == 0 for p in procs), errors or [p.exitcode for p in procs]


SUBPROCESS_CUDA_OPTIONS = textwrap.dedent("""
    import torch
    import torch_tpu
    from torch_tpu import _C
    _C.configure_distributed_client({"node_id": 0, "num_nodes": 1, "visible_devices": [0]},
                                    lambda k, t: None, lambda k, v: None, lambda k: None)
    assert _C.distributed_client()["active"] is False
    _C.clear_distributed_client()
    assert _C.distributed_client() is None
    _C.configure_distributed_client({"node_id": 0, "num_nodes": 1, "cpu_device_count": 2},
                                    lambda k, t: None, lambda k, v: None)
    assert (torch.arange(4, device="tpu") + 1).sum().item() == 10
    d = _C.distributed_client()
    assert d["active"] and d["options"]["num_nodes"] == 1 and not d["try_get"], d
    assert torch.tpu.device_count() == 2  # the distributed options override the platform's defaults
    print("ok")
""")


def test_distributed_client_options_reach_the_runtime():
    env = dict(os.environ, TORCH_TPU_PLATFORM="cpu")
    env.pop("TORCH_TPU_PJRT_PLUGIN", None)
    proc = subprocess.run([sys.executable, "-c", SUBPROCESS_CUDA_OPTIONS], capture_output=True, text=True, timeout=120,
                          cwd=ROOT, env=env)
    assert proc.returncode == 0 and proc.stdout.strip().endswith("ok"), proc.stdout + proc.stderr
