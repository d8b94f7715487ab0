"""`from_pretrained(..., device_map="auto")` places models on tpu.

Accelerate and Transformers list the accelerators they know by name (cuda, xpu, npu, ...) and give
every other device no memory, so "auto", "balanced" and "sequential" silently kept models on the CPU.
Once Transformers' accelerate integration is imported, its memory inventory also lists tpu:0 with the
memory the device has free; the rest of its placement logic (splitting, CPU and disk offload) is
unchanged. A CUDA device, when present, keeps precedence.
"""
import importlib.abc
import importlib.util
import sys

_MODULE = "transformers.integrations.accelerate"


def _tpu_memory():
    import torch

    if torch.cuda.is_available() or not torch.tpu.is_available():
        return {}
    free, _ = torch.tpu.mem_get_info(0)
    return {"tpu:0": free}


def _patch(module):
    inventory = module.get_max_memory
    if getattr(inventory, "_lists_tpu", False):
        return

    def get_max_memory(max_memory=None):
        # Accelerate rejects device names it does not know: tpu entries bypass it.
        given = {k: v for k, v in (max_memory or {}).items() if isinstance(k, str) and k.startswith("tpu")}
        rest = inventory(None if max_memory is None else {k: v for k, v in max_memory.items() if k not in given})
        if max_memory is None:
            given = _tpu_memory()
        elif given:
            from accelerate.utils import convert_file_size_to_int

            given = {k: convert_file_size_to_int(v) if isinstance(v, str) else v for k, v in given.items()}
        return {**given, **rest}

    get_max_memory._lists_tpu = True
    module.get_max_memory = get_max_memory


class _Finder(importlib.abc.MetaPathFinder):
    """Patches the module right after its first import, whoever imports it."""

    def find_spec(self, name, path, target=None):
        if name != _MODULE:
            return None
        sys.meta_path.remove(self)
        try:
            spec = importlib.util.find_spec(name)
        finally:
            sys.meta_path.insert(0, self)
        if spec is None or spec.loader is None:
            return None
        exec_module = spec.loader.exec_module

        def exec_and_patch(module):
            exec_module(module)
            _patch(module)

        spec.loader.exec_module = exec_and_patch
        return spec


def install():
    if _MODULE in sys.modules:
        _patch(sys.modules[_MODULE])
    elif not any(isinstance(f, _Finder) for f in sys.meta_path):
        sys.meta_path.insert(0, _Finder())
