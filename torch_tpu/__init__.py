"""torch_tpu: a PyTorch device backend that runs ATen ops through OpenXLA PJRT plugins.

`import torch` loads it (torch.backends entry point) unless TORCH_DEVICE_BACKEND_AUTOLOAD=0;
`import torch_tpu` does the same by hand. Afterwards `torch.device("tpu")` works.
"""
__version__ = "0.1.0"

_registered = False


def _register():
    global _registered
    if _registered:
        return
    _registered = True
    import torch

    from torch_tpu import _aten, _fastpath, _meta, context, device_module, runtime  # noqa: F401 (kernels registered on import)

    torch.utils.rename_privateuse1_backend("tpu")
    torch._register_device_module("tpu", device_module)
    torch.utils.generate_methods_for_privateuse1_backend(for_storage=True)
    _aten.set_runtime_initializer(runtime.ensure_initialized)
    torch.set_autocast_dtype("tpu", torch.bfloat16)
    device_module._apply_env()
    context._apply_env()
    import sys
    if "torch._dynamo" in sys.modules:  # else the torch_dynamo_backends entry point finds "tpu" when asked
        from torch_tpu import compiler
        compiler.register()
    from torch_tpu import huggingface
    huggingface.install()  # device_map="auto" places models on tpu
    if torch.distributed.is_available():  # the "tpu_dist" process group backend (torch_tpu/distributed.py)
        from torch_tpu import distributed
        distributed.register()


def _autoload():
    """Entry point for torch.backends autoloading. Never makes `import torch` fail."""
    try:
        _register()
    except Exception as e:  # a broken install must not break torch: tpu just is not available
        import warnings

        warnings.warn(f"torch_tpu could not register the tpu device ({type(e).__name__}: {e}); "
                      "reinstall torch_tpu (make build) to use it")


try:
    from torch_tpu.context import cpu_fallback, execution_mode, get_execution_mode, set_execution_mode, sync  # noqa: F401
    from torch_tpu import metrics  # noqa: F401
    from torch_tpu.compiler import no_recompile  # noqa: F401
    from torch_tpu.dynamic import mark_dynamic, set_buckets  # noqa: F401
except ImportError:  # extension not built: registration below warns
    pass
_autoload()
