"""Context managers and switches of the tpu execution modes."""
import contextlib

from torch_tpu import _aten


@contextlib.contextmanager
def cpu_fallback(enabled=True):
    """Runs ops that have no tpu lowering on the CPU (copying inputs and results) inside the block."""
    previous = _aten.cpu_fallback()
    _aten.set_cpu_fallback(enabled)
    try:
        yield
    finally:
        _aten.set_cpu_fallback(previous)
