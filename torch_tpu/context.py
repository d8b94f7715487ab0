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


_MODES = ("strict", "fuse", "debug")
_flush_hooks = []


def set_execution_mode(mode):
    """Selects how tpu ops run: "strict" (each op launched asynchronously, the default), "fuse"
    (DeferAndFuse: ops are recorded and run as one program at the next host sync, optimizer step, end
    of backward or `torch_tpu.sync()`), or "debug" (each op launched and waited for)."""
    if mode not in _MODES:
        raise ValueError(f"tpu execution mode must be one of {_MODES}, got {mode!r}")
    if mode == "fuse":
        _install_flush_hooks()
    _aten.set_mode(mode)


def get_execution_mode():
    return _aten.mode()


@contextlib.contextmanager
def execution_mode(mode):
    """Runs the block in `mode` (see set_execution_mode); what the block recorded is run at its end."""
    previous = get_execution_mode()
    set_execution_mode(mode)
    try:
        yield
    finally:
        set_execution_mode(previous)


def sync():
    """Runs everything recorded so far (DeferAndFuse) without waiting for it to finish."""
    _aten.flush()


def _install_flush_hooks():
    """In Fuse mode a graph is also cut at the end of each backward pass and after each optimizer
    step, so a training loop records the same graphs every step."""
    if _flush_hooks:
        return
    import torch
    import torch.autograd
    from torch.optim.optimizer import register_optimizer_step_post_hook

    @torch._disable_dynamo  # runs after a compiled optimizer step, never inside its graph
    def flush_if_fusing(*_):
        if _aten.mode() == "fuse":
            _aten.flush()

    _flush_hooks.append(register_optimizer_step_post_hook(flush_if_fusing))
    run_backward = getattr(torch.autograd, "_engine_run_backward", None)
    if run_backward is not None:  # what torch.autograd.backward and grad call
        def engine_run_backward(*args, **kwargs):
            try:
                return run_backward(*args, **kwargs)
            finally:
                flush_if_fusing()

        torch.autograd._engine_run_backward = engine_run_backward
        _flush_hooks.append(run_backward)


def _apply_env():
    """TORCH_TPU_DEFER_AND_FUSE=1 selects Fuse mode at import (TORCH_TPU_LAUNCH_BLOCKING=1 wins). A bad
    value is left for the runtime's start to report (a RuntimeError naming the variable)."""
    from torch_tpu import _plugin
    try:
        fuse = _plugin.env_choice("TORCH_TPU_DEFER_AND_FUSE", ("0", "1")) == "1"
    except _plugin.EnvironmentVariableError:
        return
    if fuse and _aten.mode() != "debug":
        set_execution_mode("fuse")
