"""The torch-free runtime: run StableHLO programs on the PJRT plugin through the compile cache.

    >>> from torch_tpu import runtime
    >>> runtime.platform(), runtime.devices()
    >>> runtime.execute(stablehlo_text, np.ones(4, np.float32), np.ones(4, np.float32))
"""
import os

import ml_dtypes
import numpy as np

from torch_tpu import _C, _plugin

PjrtError = _C.PjrtError
DeviceBuffer = _C.DeviceBuffer

# our dtype names <-> numpy dtypes (ml_dtypes supplies bfloat16 and the float8 types)
_NUMPY = {
    "pred": np.bool_, "s8": np.int8, "s16": np.int16, "s32": np.int32, "s64": np.int64,
    "u8": np.uint8, "u16": np.uint16, "u32": np.uint32, "u64": np.uint64,
    "f16": np.float16, "bf16": ml_dtypes.bfloat16, "f32": np.float32, "f64": np.float64,
    "c64": np.complex64, "c128": np.complex128,
    "f8e5m2": ml_dtypes.float8_e5m2, "f8e4m3fn": ml_dtypes.float8_e4m3fn,
    "f8e5m2fnuz": ml_dtypes.float8_e5m2fnuz, "f8e4m3fnuz": ml_dtypes.float8_e4m3fnuz,
    "f8e8m0fnu": ml_dtypes.float8_e8m0fnu,
}
_NAME = {np.dtype(v): k for k, v in _NUMPY.items()}


EnvironmentVariableError = _plugin.EnvironmentVariableError

FORK_ERROR = ("Cannot re-initialize tpu in forked subprocess. To use tpu with multiprocessing, you must "
              "use the 'spawn' start method")

# Called once, right after the runtime starts (torch.tpu queues RNG seeds here, like torch.cuda).
_start_callbacks = []


def in_bad_fork():
    """True in a child forked after the runtime started: tpu cannot be used there (use 'spawn')."""
    return _C.in_bad_fork()


def ensure_initialized():
    if _C.in_bad_fork():
        raise RuntimeError(FORK_ERROR)
    if not _C.initialized():
        _plugin.check_environment()  # a bad TORCH_TPU_* value raises here, naming the variable
        os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "1")  # the plugin's start-up INFO lines
        platform, path = _plugin.discover()
        _C.init(path, platform, _plugin.client_options(platform), _plugin.cache_dir())
        import atexit
        atexit.register(_report_unraised_errors)
        atexit.register(_let_autograd_threads_finish)
        callbacks, _start_callbacks[:] = list(_start_callbacks), []
        for callback in callbacks:
            callback()


def _report_unraised_errors():
    """At interpreter exit: waits for the work still running and warns about an error no sync raised
    (a failed program, an out-of-range index), instead of losing it."""
    if not _C.initialized() or _C.in_bad_fork():
        return
    from torch_tpu import _aten
    try:
        _aten.synchronize(-1)
    except Exception as e:  # noqa: BLE001 - any error is reported, none raised at exit
        import warnings
        warnings.warn(f"torch_tpu: an error in tpu work was never raised (no host sync read it): "
                      f"{type(e).__name__}: {e}", RuntimeWarning, stacklevel=1)


def _let_autograd_threads_finish():
    """At interpreter exit: PyTorch's autograd thread for tpu releases a finished backward (and the Python
    objects its saved thread-local state holds) just after it wakes the caller. If the interpreter is already
    finalizing by then, that thread cannot take the GIL and the process aborts ("terminate called without an
    active exception"). A short wait without the GIL lets it finish first."""
    import time
    time.sleep(0.02)


def on_start(callback):
    """Runs `callback()` once the runtime has started: now if it has, else right after it starts."""
    if _C.initialized():
        callback()
    else:
        _start_callbacks.append(callback)


def platform():
    """The platform in use: "cpu", "cuda" or "tpu"."""
    ensure_initialized()
    return _C.platform()


def devices():
    ensure_initialized()
    return _C.devices()


def plugin_info():
    """Plugin path, C API version and attributes (xla_version, stablehlo versions, ...)."""
    ensure_initialized()
    return _C.plugin_info()


def dtype_name(dtype):
    try:
        return _NAME[np.dtype(dtype)]
    except KeyError:
        raise TypeError(f"dtype {np.dtype(dtype)} has no PJRT equivalent") from None


def to_device(array, device=0):
    ensure_initialized()
    array = np.asarray(array)
    return _C.from_host(_raw_view(array), dtype_name(array.dtype), device)


def _raw_view(array):
    # the buffer protocol does not export ml_dtypes types: hand over same-layout unsigned ints
    if array.dtype.type.__module__.startswith("ml_dtypes"):
        return array.view(np.dtype(f"u{array.itemsize}"))
    return array


def to_numpy(buffer):
    return np.frombuffer(buffer.to_bytes(), dtype=_NUMPY[buffer.dtype]).reshape(buffer.shape).copy()


def execute(program, *arrays, donate=(), device=0):
    """Compiles `program` (StableHLO text) through the cache and runs it on numpy inputs.

    Returns the outputs as numpy arrays. Inputs named in `donate` (indices) may be consumed by
    outputs the program aliases to them.
    """
    ensure_initialized()
    args = [a if isinstance(a, DeviceBuffer) else to_device(a, device) for a in arrays]
    donated = [i in donate for i in range(len(args))]
    return [to_numpy(b) for b in _C.execute(program, args, donated, device)]


def execute_buffers(program, buffers, donate=(), device=0):
    """Like execute, on device buffers (see to_device); returns device buffers."""
    ensure_initialized()
    return _C.execute(program, list(buffers), [i in donate for i in range(len(buffers))], device)


def cache_info():
    """The compile cache: executables held in memory, the memory tier's capacity, the disk directory."""
    ensure_initialized()
    return _C.cache_info()


def metrics():
    """Counters: compiles, compile_seconds, cache.memory_hits, cache.disk_hits, executions, ..."""
    return _C.metrics()


def reset_metrics():
    _C.reset_metrics()
