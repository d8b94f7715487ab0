"""Finds the PJRT plugin for this machine and the client options it needs, and reads torch_tpu's
environment variables (each checked: a bad value raises EnvironmentVariableError naming the variable
and what it accepts, when the runtime first starts).

TORCH_TPU_PJRT_PLUGIN=/path/to/plugin.so overrides discovery. TORCH_TPU_PLATFORM=cpu|cuda|tpu
picks a platform; by default: tpu if libtpu and a TPU are present, else cuda if a CUDA plugin and
a GPU are present, else cpu. Plugins are found inside their installed registry packages.

Variables: TORCH_TPU_PJRT_PLUGIN (a plugin .so), TORCH_TPU_PLATFORM (cpu, cuda, tpu),
TORCH_TPU_NUM_DEVICES (cpu devices, 1 to 64), TORCH_TPU_CACHE (0/1: disk compile cache),
TORCH_TPU_CACHE_DIR (its directory), TORCH_TPU_CACHE_MEMORY_ENTRIES (executables kept in memory,
1 to 2^20; read by the C++ runtime), TORCH_TPU_CACHE_MAPPINGS (memory mappings the process may
hold before cached executables are shed; default half of vm.max_map_count), TORCH_TPU_LAUNCH_BLOCKING (0/1), TORCH_TPU_CPU_FALLBACK (0/1),
TORCH_TPU_DEFER_AND_FUSE (0 or 1), TORCH_TPU_FUSE_MAX_OPS (ops per fused program, 1 to 100000).
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


class EnvironmentVariableError(RuntimeError):
    """A TORCH_TPU_* environment variable holds a value torch_tpu does not accept."""


class PluginVariableError(PluginNotFound, EnvironmentVariableError):
    """TORCH_TPU_PLATFORM or TORCH_TPU_PJRT_PLUGIN holds a value torch_tpu does not accept."""


_TRUE = ("1", "true", "yes", "on")
_FALSE = ("0", "false", "no", "off")
MAX_NUM_DEVICES = 64
MAX_CACHE_MEMORY_ENTRIES = 1 << 20
MAX_FUSE_OPS = 100000


def _raw(name):
    value = os.environ.get(name)
    return None if value is None or value.strip() == "" else value


def _bad(name, value, accepted):
    return EnvironmentVariableError(f"{name}={value!r} is not valid: expected {accepted}")


def env_flag(name, default=False):
    """A boolean variable: 1/true/yes/on or 0/false/no/off (any case); unset or empty: `default`."""
    value = _raw(name)
    if value is None:
        return default
    v = value.strip().lower()
    if v in _TRUE:
        return True
    if v in _FALSE:
        return False
    raise _bad(name, value, "0 or 1 (also true/false, yes/no, on/off)")


def env_int(name, default, lo, hi, what="a whole number"):
    """An integer variable in [lo, hi]; unset or empty: `default`."""
    value = _raw(name)
    if value is None:
        return default
    v = value.strip()
    if not (v.isascii() and v.isdigit()) or len(v) > 12 or not lo <= int(v) <= hi:
        raise _bad(name, value, f"{what} from {lo} to {hi} (default {default})")
    return int(v)


def default_mappings():
    """Half of vm.max_map_count: XLA CPU's JIT code takes several memory mappings per executable."""
    try:
        with open("/proc/sys/vm/max_map_count") as f:
            return int(f.read()) // 2
    except (OSError, ValueError):
        return 65530 // 2


def env_choice(name, choices, default=None):
    """A variable that is exactly one of `choices`; unset or empty: `default`."""
    value = _raw(name)
    if value is None:
        return default
    if value.strip() not in choices:
        raise _bad(name, value, "one of " + ", ".join(choices))
    return value.strip()


def env_platform():
    value = _raw("TORCH_TPU_PLATFORM")
    if value is None:
        return None
    v = value.strip().lower()
    if v not in _PACKAGES:
        raise PluginVariableError(f"TORCH_TPU_PLATFORM={value!r} is not valid: expected one of cpu, cuda, tpu")
    return v


def env_plugin_path():
    value = _raw("TORCH_TPU_PJRT_PLUGIN")
    if value is None:
        return None
    if not os.path.exists(value):
        raise PluginVariableError(f"TORCH_TPU_PJRT_PLUGIN={value} does not exist: expected the path of a PJRT "
                             "plugin .so (or leave it unset to find an installed plugin)")
    if not os.path.isfile(value):
        raise PluginVariableError(f"TORCH_TPU_PJRT_PLUGIN={value} is not a file: expected the path of a PJRT "
                             "plugin .so (or leave it unset to find an installed plugin)")
    return value


def num_devices():
    return env_int("TORCH_TPU_NUM_DEVICES", 1, 1, MAX_NUM_DEVICES, "a whole number of cpu devices")


def check_environment():
    """Reads every TORCH_TPU_* variable; raises EnvironmentVariableError for the first bad one."""
    env_plugin_path()
    env_platform()
    num_devices()
    cache_dir()
    env_int("TORCH_TPU_CACHE_MEMORY_ENTRIES", 4096, 1, MAX_CACHE_MEMORY_ENTRIES, "a whole number of executables")
    env_int("TORCH_TPU_CACHE_MAPPINGS", default_mappings(), 64, 1 << 30, "a whole number of memory mappings")
    env_flag("TORCH_TPU_LAUNCH_BLOCKING")
    env_flag("TORCH_TPU_CPU_FALLBACK")
    env_choice("TORCH_TPU_DEFER_AND_FUSE", ("0", "1"))
    env_int("TORCH_TPU_FUSE_MAX_OPS", 1000, 1, MAX_FUSE_OPS, "a whole number of ops per fused program")
    env_choice("TORCH_TPU_DEVICE_CHECKS", ("0", "1"))
    env_choice("TORCH_TPU_FAIL_ON_RECOMPILE", ("0", "1"))


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
        return {"cpu_device_count": num_devices()}
    if platform == "cuda":
        return {"preallocate": False}
    return {}


def discover():
    """Returns (platform, plugin path); raises PluginNotFound saying what to install."""
    override = env_plugin_path()
    requested = env_platform()
    if override:
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
    """The disk compile cache's directory ("" when TORCH_TPU_CACHE=0)."""
    if not env_flag("TORCH_TPU_CACHE", True):
        return ""
    path = _raw("TORCH_TPU_CACHE_DIR")
    if path is None:
        return os.path.join(os.path.expanduser("~"), ".cache", "torch_tpu")
    if os.path.exists(path) and not os.path.isdir(path):
        raise _bad("TORCH_TPU_CACHE_DIR", path, "a directory (created if missing), or TORCH_TPU_CACHE=0 "
                   "to turn the disk cache off")
    return path
