"""What the device did: ops dispatched, programs compiled (and by which op and Python line), cache
hits, compile seconds, host syncs and CPU fallbacks. `report()` prints it; `counters()` returns it."""
from torch_tpu import _C


def counters():
    return dict(_C.metrics())


def reset():
    _C.reset_metrics()


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
    text = "\n".join(lines)
    print(text, file=file)
    return text
