"""Finds the PJRT plugin for this machine and the client options it needs.

TORCH_TPU_PJRT_PLUGIN=/path/to/plugin.so overrides discovery. TORCH_TPU_PLATFORM=cpu|cuda|tpu
picks a platform; by default: tpu if libtpu and a TPU are present, else cuda if a CUDA plugin and
a GPU are present, else cpu. Plugins are found inside their installed registry packages.
"""
import glob
import importlib.util
import os

# platform -> [(package, plugin file inside it)], first found wins
_PACKAGES = {
    "cpu": [("xla_plugins.xla_cpu_pjrt", "xla_cpu_pjrt.so")],
    "cuda": [("jax_plugins.xla_cuda13", "xla_cuda_plugin.so"), ("jax_plugins.xla_cuda12", "xla_cuda_plugin.so")],
    "tpu": [("libtpu", "libtpu.so")],
}
_INSTALL_HINT = {
    "cpu": "pip install xla-cpu-pjrt",
    "cuda": "pip install jax-cuda13-pjrt (or jax-cuda12-pjrt)",
    "tpu": "pip install libtpu",
}


class PluginNotFound(RuntimeError):
    pass


def _package_dir(name):
    try:
        spec = importlib.util.find_spec(name)
    except (ImportError, ValueError):
        return None
    if spec is None or not spec.submodule_search_locations:
        return None
    return list(spec.submodule_search_locations)[0]


def find_plugin(platform):
    for package, filename in _PACKAGES[platform]:
        d = _package_dir(package)
        if d and os.path.exists(os.path.join(d, filename)):
            return os.path.join(d, filename)
    return None


def _has_hardware(platform):
    if platform == "tpu":
        return bool(glob.glob("/dev/accel*") or glob.glob("/dev/vfio/[0-9]*"))
    if platform == "cuda":
        return bool(glob.glob("/dev/nvidia[0-9]*"))
    return True


def client_options(platform):
    if platform == "cpu":
        return {"cpu_device_count": int(os.environ.get("TORCH_TPU_NUM_DEVICES", "1"))}
    if platform == "cuda":
        return {"preallocate": False}
    return {}


def discover():
    """Returns (platform, plugin path); raises PluginNotFound saying what to install."""
    override = os.environ.get("TORCH_TPU_PJRT_PLUGIN")
    requested = os.environ.get("TORCH_TPU_PLATFORM", "").lower() or None
    if requested and requested not in _PACKAGES:
        raise PluginNotFound(f"TORCH_TPU_PLATFORM={requested!r}: expected one of cpu, cuda, tpu")
    if override:
        if not os.path.exists(override):
            raise PluginNotFound(f"TORCH_TPU_PJRT_PLUGIN={override} does not exist")
        return requested or _guess_platform(override), override
    if requested:
        path = find_plugin(requested)
        if not path:
            raise PluginNotFound(f"no PJRT plugin for platform {requested!r}: {_INSTALL_HINT[requested]}")
        return requested, path
    for platform in ("tpu", "cuda", "cpu"):
        path = find_plugin(platform)
        if path and _has_hardware(platform):
            return platform, path
    raise PluginNotFound("no PJRT plugin found: " + _INSTALL_HINT["cpu"] + " (CPU), "
                         + _INSTALL_HINT["cuda"] + " (NVIDIA GPU) or " + _INSTALL_HINT["tpu"] + " (TPU)")


def _guess_platform(path):
    name = os.path.basename(path).lower()
    return "tpu" if "tpu" in name else "cuda" if ("cuda" in name or "gpu" in name) else "cpu"


def cache_dir():
    if os.environ.get("TORCH_TPU_CACHE", "1") == "0":
        return ""
    return os.environ.get("TORCH_TPU_CACHE_DIR") or os.path.join(os.path.expanduser("~"), ".cache", "torch_tpu")
