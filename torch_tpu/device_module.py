"""torch.tpu: the device module, shaped like torch.cuda."""
import contextlib
import os

import torch

from torch_tpu import _aten, _C, runtime


def _apply_env():
    _aten.set_launch_blocking(os.environ.get("TORCH_TPU_LAUNCH_BLOCKING", "0") == "1")
    _aten.set_cpu_fallback(os.environ.get("TORCH_TPU_CPU_FALLBACK", "0") == "1")


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
    _aten.ensure_runtime()  # raises saying what to install when no plugin can start


# --- RNG
def default_generator(device=None):
    return _aten.default_generator(_index(device))


def manual_seed(seed):
    default_generator().manual_seed(int(seed))


def manual_seed_all(seed):
    for d in range(device_count()):
        default_generator(d).manual_seed(int(seed))


def seed():
    default_generator().seed()


def seed_all():
    for d in range(device_count()):
        default_generator(d).seed()


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
        stats = _C.memory_stats(idx)
        self.name = get_device_name(idx)
        self.platform = runtime.platform()
        self.kind = d["kind"]
        self.total_memory = stats["bytes_limit"] if stats["bytes_limit"] > 0 else 0

    def __repr__(self):
        return f"_TpuDeviceProperties(name='{self.name}', total_memory={self.total_memory // 2**20}MB)"


def get_device_properties(device=None):
    runtime.ensure_initialized()
    return _Properties(_index(device))


def memory_allocated(device=None):
    runtime.ensure_initialized()
    return _C.memory_stats(_index(device))["bytes_in_use"]


def max_memory_allocated(device=None):
    runtime.ensure_initialized()
    s = _C.memory_stats(_index(device))
    return max(s["peak_bytes_in_use"], s["bytes_in_use"])


def reset_peak_memory_stats(device=None):
    pass  # PJRT keeps the peak itself and offers no reset


def mem_get_info(device=None):
    runtime.ensure_initialized()
    s = _C.memory_stats(_index(device))
    total = s["bytes_limit"] if s["bytes_limit"] > 0 else 0
    return (max(total - s["bytes_in_use"], 0), total)


def empty_cache():
    pass  # buffers are freed when their last tensor dies; PJRT owns the pools


def is_bf16_supported(including_emulation=True):
    return True


def get_amp_supported_dtype():
    return [torch.bfloat16, torch.float16, torch.float32]


def _is_in_bad_fork():
    return False


def is_initialized():
    return _C.initialized()


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
