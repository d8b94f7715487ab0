"""torch.tpu: the device module, shaped like torch.cuda.

As with torch.cuda, the runtime starts lazily (first tpu tensor or query), RNG seeds set before that
are queued and applied when it starts, and a child forked after it started cannot use tpu
(`_is_in_bad_fork()`; use the 'spawn' start method).
"""
import collections
import contextlib

import torch

from torch_tpu import _aten, _C, _plugin, runtime


def _apply_env():
    """Applies TORCH_TPU_LAUNCH_BLOCKING and TORCH_TPU_CPU_FALLBACK (at import). A bad value is left
    for the runtime's start to report (a RuntimeError naming the variable): import never fails."""
    for name, setter in (("TORCH_TPU_LAUNCH_BLOCKING", _aten.set_launch_blocking),
                         ("TORCH_TPU_CPU_FALLBACK", _aten.set_cpu_fallback)):
        try:
            setter(_plugin.env_flag(name))
        except _plugin.EnvironmentVariableError:
            pass


def is_available():
    return _aten.device_count() > 0


def device_count():
    return _aten.device_count()


def current_device():
    return _aten.current_device()


def _index(device):
    if device is None:
        return current_device()
    if isinstance(device, int):
        return device
    device = torch.device(device)
    return device.index if device.index is not None else current_device()


def set_device(device):
    _aten.set_device(_index(device))


class device:
    """Context manager that makes `device` the current tpu device."""

    def __init__(self, device):
        self.idx = _index(device)
        self.prev = -1

    def __enter__(self):
        self.prev = current_device()
        _aten.set_device(self.idx)

    def __exit__(self, *exc):
        _aten.set_device(self.prev)
        return False


def synchronize(device=None):
    _aten.synchronize(-1 if device is None else _index(device))


def _lazy_init():
    if _C.in_bad_fork():
        raise RuntimeError(runtime.FORK_ERROR)
    _aten.ensure_runtime()  # raises saying what to install when no plugin can start


def _is_in_bad_fork():
    """True in a child forked after tpu was initialised in its parent (tpu cannot be used there)."""
    return _C.in_bad_fork()


def is_initialized():
    return _C.initialized() and not _C.in_bad_fork()


# --- RNG: like torch.cuda, seeding before the runtime starts does not start it; the last seed of
# each kind is applied when it starts.
_queued_seeds = collections.OrderedDict()  # kind -> callable


def _run_queued_seeds():
    calls = list(_queued_seeds.values())
    _queued_seeds.clear()
    for call in calls:
        call()


runtime.on_start(_run_queued_seeds)


def _lazy_seed(kind, call):
    if is_initialized():
        call()
    else:
        _queued_seeds.pop(kind, None)
        _queued_seeds[kind] = call


def default_generator(device=None):
    return _aten.default_generator(_index(device))


def manual_seed(seed):
    seed, idx = int(seed), current_device()
    _lazy_seed("one", lambda: default_generator(idx).manual_seed(seed))


def manual_seed_all(seed):
    seed = int(seed)

    def call():
        for d in range(device_count()):
            default_generator(d).manual_seed(seed)

    _lazy_seed("all", call)


def seed():
    idx = current_device()
    _lazy_seed("one", lambda: default_generator(idx).seed())


def seed_all():
    def call():
        for d in range(device_count()):
            default_generator(d).seed()

    _lazy_seed("all", call)


def initial_seed():
    return default_generator().initial_seed()


def get_rng_state(device=None):
    return default_generator(device).get_state()


def set_rng_state(new_state, device=None):
    default_generator(device).set_state(new_state)


def get_rng_state_all():
    return [get_rng_state(d) for d in range(device_count())]


def set_rng_state_all(states):
    for d, s in enumerate(states):
        set_rng_state(s, d)


# --- properties and memory
def get_device_name(device=None):
    runtime.ensure_initialized()
    return f"{runtime.platform()}:{runtime.devices()[_index(device)]['kind']}"


class _Properties:
    def __init__(self, idx):
        d = runtime.devices()[idx]
        self.name = get_device_name(idx)
        self.platform = runtime.platform()
        self.kind = d["kind"]
        self.total_memory = _C.device_memory(idx)["total_bytes"]

    def __repr__(self):
        return f"_TpuDeviceProperties(name='{self.name}', total_memory={self.total_memory // 2**20}MB)"


def get_device_properties(device=None):
    runtime.ensure_initialized()
    return _Properties(_index(device))


def _memory(device):
    _lazy_init()
    return _C.device_memory(_index(device))


def memory_allocated(device=None):
    """Bytes of the device buffers torch_tpu holds on `device` (live tensors, pooled scalars)."""
    return _memory(device)["allocated_bytes"]


def max_memory_allocated(device=None):
    """Peak of memory_allocated since the start or the last reset_peak_memory_stats()."""
    return _memory(device)["peak_allocated_bytes"]


def memory_reserved(device=None):
    """memory_allocated, or the plugin allocator's pool where the plugin says (GPU, TPU)."""
    return _memory(device)["reserved_bytes"]


def max_memory_reserved(device=None):
    return _memory(device)["peak_reserved_bytes"]


def reset_peak_memory_stats(device=None):
    _lazy_init()
    _C.reset_peak_memory(_index(device))


def reset_max_memory_allocated(device=None):
    reset_peak_memory_stats(device)


def reset_accumulated_memory_stats(device=None):
    _lazy_init()
    _C.reset_accumulated_memory(_index(device))


def mem_get_info(device=None):
    """(free, total) bytes: the plugin's memory limit, or for the cpu platform the host's memory."""
    m = _memory(device)
    return (m["free_bytes"], m["total_bytes"])


def memory_stats(device=None):
    """torch.cuda.memory_stats-style counters ("allocated_bytes.all.current", ...) for `device`."""
    m = _memory(device)
    stats = {}

    def put(name, current, peak, allocated, freed):
        stats[f"{name}.all.current"] = current
        stats[f"{name}.all.peak"] = max(peak, current)
        stats[f"{name}.all.allocated"] = allocated
        stats[f"{name}.all.freed"] = freed

    count = (m["buffers"], m["peak_buffers"], m["allocs"], m["frees"])
    nbytes = (m["allocated_bytes"], m["peak_allocated_bytes"], m["bytes_allocated_total"], m["bytes_freed_total"])
    put("allocation", *count)
    put("active", *count)
    put("segment", *count)
    put("allocated_bytes", *nbytes)
    put("active_bytes", *nbytes)
    put("requested_bytes", *nbytes)
    put("reserved_bytes", m["reserved_bytes"], m["peak_reserved_bytes"], nbytes[2], nbytes[3])
    stats["num_alloc_retries"] = 0
    stats["num_ooms"] = 0
    stats["free_bytes"] = m["free_bytes"]
    stats["total_bytes"] = m["total_bytes"]
    if m["plugin_reports"]:
        stats["plugin.bytes_in_use"] = m["plugin_bytes_in_use"]
        stats["plugin.bytes_limit"] = m["plugin_bytes_limit"]
    return collections.OrderedDict(sorted(stats.items()))


def memory_summary(device=None, abbreviated=False):
    """A printable report of device memory and the compile cache."""
    idx = _index(device)
    m = _memory(idx)
    cache = runtime.cache_info()

    def size(n):
        for unit in ("B", "KiB", "MiB", "GiB"):
            if abs(n) < 1024 or unit == "GiB":
                return f"{n:.0f} {unit}" if unit == "B" else f"{n:.2f} {unit}"
            n /= 1024

    rows = [
        ("allocated (live buffers)", size(m["allocated_bytes"]), size(m["peak_allocated_bytes"])),
        ("reserved", size(m["reserved_bytes"]), size(m["peak_reserved_bytes"])),
        ("buffers", str(m["buffers"]), str(m["peak_buffers"])),
    ]
    width = 74
    lines = ["=" * width, f" torch_tpu memory summary, device tpu:{idx} ({get_device_name(idx)})", "-" * width,
             f" {'':<28}{'current':>20}{'peak':>20}"]
    lines += [f" {name:<28}{cur:>20}{peak:>20}" for name, cur, peak in rows]
    if not abbreviated:
        lines += ["-" * width,
                  f" {'allocations / frees':<28}{m['allocs']:>20}{m['frees']:>20}",
                  f" {'free / total':<28}{size(m['free_bytes']):>20}{size(m['total_bytes']):>20}"]
        if m["plugin_reports"]:
            lines.append(f" {'plugin bytes in use':<28}{size(m['plugin_bytes_in_use']):>20}")
    lines += ["-" * width,
              f" executable cache: {cache['memory_entries']} in memory (capacity {cache['memory_capacity']}), "
              f"disk: {cache['disk_dir'] or 'off'}",
              "=" * width]
    return "\n".join(lines) + "\n"


def empty_cache():
    pass  # buffers are freed when their last tensor dies; PJRT owns the pools


def is_bf16_supported(including_emulation=True):
    return True


def get_amp_supported_dtype():
    return [torch.bfloat16, torch.float16, torch.float32]


# --- streams and events: one ordered stream per device (PJRT orders work by data dependencies)
class Stream:
    def __init__(self, device=None, priority=0):
        self.device = torch.device("tpu", _index(device))
        self.device_index = self.device.index
        self.device_type = self.device.type
        self.stream_id = 0
        self.priority = priority

    def synchronize(self):
        synchronize(self.device_index)

    def wait_stream(self, stream):
        pass

    def wait_event(self, event):
        pass

    def record_event(self, event=None):
        event = event or Event()
        event.record(self)
        return event

    def query(self):
        return True

    def __eq__(self, other):
        return isinstance(other, Stream) and other.device == self.device

    def __hash__(self):
        return hash(self.device)


class Event:
    def __init__(self, enable_timing=False, blocking=False, interprocess=False):
        self.device = None

    def record(self, stream=None):
        self.device = (stream or current_stream()).device_index

    def wait(self, stream=None):
        pass

    def query(self):
        return True

    def synchronize(self):
        synchronize(self.device)


def current_stream(device=None):
    return Stream(device)


def default_stream(device=None):
    return Stream(device)


@contextlib.contextmanager
def stream(s):
    yield s


def set_stream(s):
    pass
