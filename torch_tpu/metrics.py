"""What the device did: ops dispatched, programs compiled (and by which op and Python line), cache
hits, compile seconds, host syncs, CPU fallbacks, and why each torch.compile graph was captured. `report()` prints it (with the device memory
torch_tpu holds); `counters()` returns it.

Compile cache counters: cache.memory_hits, cache.memory_evictions, cache.disk_hits,
cache.disk_load_seconds, cache.disk_corrupt (bad checksum or unloadable), cache.disk_key_mismatch (an
intact entry written for another program), cache.disk_unreadable (a read error, or a path that is
not a regular file), cache.disk_old_format (an entry of an older format: recompiled)."""
from torch_tpu import _C


def counters():
    return dict(_C.metrics())


def reset():
    _C.reset_metrics()


def _memory_lines():
    if not _C.initialized() or _C.in_bad_fork():
        return []
    lines = ["  device memory held (current / peak):"]
    for d in range(len(_C.devices())):
        m = _C.device_memory(d)
        lines.append(f"    tpu:{d}  {m['allocated_bytes'] / 2**20:.1f} MiB / {m['peak_allocated_bytes'] / 2**20:.1f} MiB"
                     f" in {m['buffers']} buffers")
    info = _C.cache_info()
    lines.append(f"  executables in memory: {info['memory_entries']} (capacity {info['memory_capacity']})")
    return lines


def _compiled_graph_lines():
    import sys
    compiler = sys.modules.get("torch_tpu.compiler")
    events = compiler.compile_events() if compiler else []
    if not events:
        return []
    lines = ["  torch.compile graphs captured (why, where; * = compiled a new program):"]
    for e in events:
        lines.append(f"    {'*' if e['compiled'] else ' '} {e['graph']}: {e['reason']}" +
                     (f" at {e['where']}" if e["where"] else ""))
    return lines


def report(file=None):
    c = counters()
    lines = ["torch_tpu metrics"]
    plain = {k: v for k, v in c.items() if ":" not in k}
    for k in sorted(plain):
        v = plain[k]
        lines.append(f"  {k:<28} {v:.3f}" if k.endswith("seconds") else f"  {k:<28} {int(v)}")
    compiles = sorted(((k.split(":", 1)[1], v) for k, v in c.items() if k.startswith("compiles_by:")),
                      key=lambda kv: -kv[1])
    if compiles:
        lines.append("  programs compiled, by op and Python line:")
        lines += [f"    {int(v):>5}  {where}" for where, v in compiles]
    fallbacks = sorted((k.split(":", 1)[1], v) for k, v in c.items() if k.startswith("cpu_fallback:"))
    if fallbacks:
        lines.append("  CPU fallbacks, by op:")
        lines += [f"    {int(v):>5}  aten::{op}" for op, v in fallbacks]
    lines += _compiled_graph_lines()
    lines += _memory_lines()
    text = "\n".join(lines)
    print(text, file=file)
    return text
