"""Writes docs/op_coverage.md from a sweep's results (run.py's JSON lines and their .meta.json).

  python -m tests.opinfo.report [--results build/opinfo/results.jsonl] [--out docs/op_coverage.md]
"""
import argparse
import collections
import json
import os
import subprocess

from .run import DEFAULT_RESULTS, ROOT

FORWARD_DTYPES = ["float32", "bfloat16", "float16", "int64", "int32", "bool", "float64", "complex64"]
BACKWARD_DTYPES = ["float32", "bfloat16", "complex64"]
CORE_DTYPES = ["float32", "bfloat16"]  # the dtypes the core ATen table verifies each op in
COLUMNS = [("forward", d) for d in FORWARD_DTYPES] + [("backward", d) for d in BACKWARD_DTYPES] + \
    [("inplace", None), ("out", None), ("error", "-")]
# Core ops without a derivative: their results are integer or bool (comparisons, bitwise, arg*, masks),
# sizes, or fresh values (creation, random), or they write out= tensors: "n/a" in the backward columns of
# the core table. A *_backward op is itself a derivative (its own, double backward, is not swept).
NO_BACKWARD_PREFIXES = ("eq", "ne", "lt", "le", "gt", "ge", "bitwise_", "logical_", "isinf", "isnan", "argmax",
                        "argmin", "any", "all", "nonzero", "sym_", "empty", "scalar_tensor", "full", "rand",
                        "arange", "_local_scalar_dense", "resize_", "copy")
# Core ops with no values to compare: metadata (sizes, strides) and random draws.
NO_VALUES_PREFIXES = ("sym_", "empty_strided", "rand")


def no_backward(op):
    name, _, overload = op.partition(".")
    return op.startswith(NO_BACKWARD_PREFIXES) or name.endswith("_backward") or name == "col2im" or \
        overload.endswith("out")
MARK = {"pass": "ok", "fail": "FAIL", "cpu-fallback": "fb", "not-supported-on-cpu": "-", "no-samples": "0",
        "crash": "CRASH", "timeout": "HANG"}
RAN = ("pass", "fail", "cpu-fallback", "crash", "timeout")  # statuses that count in a pass rate
TOP_CAUSES = 30


def load(path):
    with open(path) as f:
        results = [json.loads(ln) for ln in f if ln.strip()]
    meta = {}
    if os.path.exists(path + ".meta.json"):
        with open(path + ".meta.json") as f:
            meta = json.load(f)
    return results, meta


def cause_of(detail):
    from .harness import cause_of as cause  # imports torch: only when writing the report
    return cause(detail)


def core_aten_ops():
    """The core ATen overloads (torch.Tag.core), named like lowered_ops(): "name" or "name.overload"."""
    import torch
    core = set()
    for full in torch._C._dispatch_get_all_op_names():
        ns, _, rest = full.partition("::")
        if ns != "aten":
            continue
        name, _, overload = rest.partition(".")
        try:
            packet = getattr(torch.ops.aten, name)
            op = getattr(packet, overload or "default")
        except (AttributeError, RuntimeError):
            continue
        if torch.Tag.core in op.tags:
            core.add(rest)
    return core


def cause_key(r):
    if r["status"] in ("crash", "timeout"):
        return f"{r['status']}: {r['op']}"
    cause = cause_of(r.get("detail", ""))
    if "values differ" in cause or "tpu raised nothing" in cause:
        ops = r.get("aten_ops") or []
        where = ", ".join(f"aten::{o}" for o in ops) if 0 < len(ops) <= 3 else r["op"]
        return f"{cause} ({where})"
    return cause


def kernel_kind(name, lowered):
    import torch
    if name in lowered:
        return "lowered"
    full = "aten::" + name
    if torch._C._dispatch_has_kernel_for_dispatch_key(full, "PrivateUse1"):
        return "tpu kernel"
    for key in ("CompositeExplicitAutograd", "CompositeExplicitAutogradNonFunctional", "CompositeImplicitAutograd"):
        if torch._C._dispatch_has_kernel_for_dispatch_key(full, key):
            return "composite"
    return "missing"


def pct(a, b):
    return f"{100.0 * a / b:.1f}%" if b else "-"


def git_commit():
    try:
        out = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True)
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=ROOT,
                               capture_output=True, text=True).stdout.strip()
        return out.stdout.strip() + (" (with uncommitted changes)" if dirty else "")
    except OSError:
        return "?"


# The same sweep rerun in other execution modes (`make opinfo MODE=fuse|compile`) lies beside the
# Strict one; each adds a pass-rate column.
MODES = {"fuse": "Fuse", "compile": "Compiled"}


def mode_results_path(results_path, mode):
    return results_path.replace(".jsonl", f"-{mode}.jsonl")


def group_by_variant(results):
    groups = collections.OrderedDict()
    for r in results:
        key = (r["variant"], r["dtype"] if r["variant"] in ("forward", "backward") else "")
        groups.setdefault(key, collections.Counter())[r["status"]] += 1
    return groups


def render(results, meta, modes=None, mode_metas=None):
    import torch
    import torch_tpu

    lines = []
    w = lines.append
    minutes = meta.get("seconds", 0) / 60
    ops = list(dict.fromkeys(r["op"] for r in results))
    w("# Op coverage: PyTorch's OpInfo database on tpu")
    w("")
    w("Generated by `tests/opinfo` (harness.py compares each OpInfo sample on tpu with CPU PyTorch; run.py runs")
    w("the sweep in worker subprocesses; report.py writes this page). Do not edit by hand: rerun")
    command = meta.get("command", "python -m tests.opinfo.run --full")
    w(f"`{command if len(command) < 200 else command[:197] + '...'}`.")
    w("")
    w(f"- sweep: {meta.get('started', '?')}, {minutes:.1f} minutes, {meta.get('workers', '?')} worker process(es), "
      f"at most {meta.get('max_samples') or 'all'} samples per case")
    if meta.get("updated"):
        w(f"- ops rerun since (`--update`): {'; '.join(meta['updated'])}")
    w(f"- machine: {meta.get('machine', '?')}")
    w(f"- torch {torch.__version__}, torch_tpu {torch_tpu.__version__}, commit {git_commit()}")
    w(f"- {len(ops)} OpInfos, {len(results)} cases (a case is one op, variant and dtype); "
      f"{sum(r.get('compiles', 0) for r in results)} programs compiled, "
      f"{sum(r.get('disk_hits', 0) for r in results)} loaded from the disk compile cache")
    w("")
    w("Statuses: `ok` pass (every sample agrees with CPU); `FAIL` (details below); `fb` passes only with")
    w("`torch_tpu.cpu_fallback()` (the aten ops that fell back are listed); `-` CPU PyTorch does not support")
    w("the dtype; `0` no applicable sample; `CRASH` the worker process died; `HANG` the case timed out; blank:")
    w("the OpInfo has no such variant. Forward runs each dtype the op supports on CPU; backward compares the")
    w("gradients of every differentiable input (float32 and bfloat16); inplace and out run float32 (else the first dtype")
    w("the op supports); error runs `op.error_inputs` and expects tpu to raise CPU's exception type.")
    w("Ops marked * compare only result metadata (random or undefined values). Sort-like ops accept any")
    w("indices that select CPU's values (ties have no specified order). A value mismatch (result or")
    w("gradient) passes when tpu is as close to the op's float64 result as CPU is (CPU rounds after every")
    w(f"step of some accumulations): {sum(r.get('float64_ref', 0) for r in results)} results passed that way.")
    w("Tolerances: tests/opinfo/harness.py DEFAULT_TOL by result dtype, TOL_OVERRIDES per op (with reasons).")
    w("")
    w("Commands: `python -m tests.opinfo.run --full` (this page), `python -m tests.opinfo.run --update --ops a,b`")
    w("(rerun a few ops and rewrite this page), `python -m pytest -q tests/opinfo` (the CI slice).")
    w("")

    # totals ------------------------------------------------------------------------------------
    w("## Totals")
    w("")
    modes, mode_metas = modes or {}, mode_metas or {}
    for mode, rows in modes.items():
        cap = mode_metas.get(mode, {}).get("max_samples")
        w(f"Column \"{MODES[mode]} pass rate\" reruns the same sweep with `make opinfo MODE={mode}` ({len(rows)} cases"
          + (f", at most {cap} samples per case" if cap else "")
          + ("; forward and backward calls through `torch.compile(backend=\"tpu\")`, each compared on a replay)." if mode == "compile"
             else "; DeferAndFuse).") )
    if modes:
        w("")
    extra = "".join(f" {MODES[m]} pass rate |" for m in modes)
    w("| variant | dtype | cases | pass | fail | cpu-fallback | crash/hang | not on CPU | no samples | pass rate | pass or fallback |" + extra)
    w("|---|---|---|---|---|---|---|---|---|---|---|" + "---|" * len(modes))
    groups = group_by_variant(results)
    mode_groups = {m: group_by_variant(rows) for m, rows in modes.items()}
    mode_summary = {m: collections.defaultdict(collections.Counter) for m in modes}
    for m, g in mode_groups.items():
        for key, c in g.items():
            mode_summary[m][key[0]].update(c)

    def rate(c):
        return pct(c["pass"], sum(c[s] for s in RAN)) if c else "-"

    def mode_rates(key, bold=False):
        table = mode_summary if bold else mode_groups
        return "".join(f" {'**' if bold else ''}{rate(table[m].get(key))}{'**' if bold else ''} |" for m in modes)
    order = [("forward", d) for d in FORWARD_DTYPES] + [("backward", d) for d in BACKWARD_DTYPES] + \
        [("inplace", ""), ("out", ""), ("error", "")]
    order += [k for k in groups if k not in order]
    summary = collections.OrderedDict()
    for key in order:
        c = groups.get(key)
        if not c:
            continue
        ran = sum(c[s] for s in RAN)
        w(f"| {key[0]} | {key[1] or 'all'} | {sum(c.values())} | {c['pass']} | {c['fail']} | {c['cpu-fallback']} | "
          f"{c['crash'] + c['timeout']} | {c['not-supported-on-cpu']} | {c['no-samples']} | {pct(c['pass'], ran)} | "
          f"{pct(c['pass'] + c['cpu-fallback'], ran)} |" + mode_rates(key))
        s = summary.setdefault(key[0], collections.Counter())
        s.update(c)
    for variant, c in summary.items():
        ran = sum(c[s] for s in RAN)
        w(f"| **{variant}** | **all** | {sum(c.values())} | {c['pass']} | {c['fail']} | {c['cpu-fallback']} | "
          f"{c['crash'] + c['timeout']} | {c['not-supported-on-cpu']} | {c['no-samples']} | **{pct(c['pass'], ran)}** | "
          f"{pct(c['pass'] + c['cpu-fallback'], ran)} |" + mode_rates(variant, bold=True))
    by_op = collections.defaultdict(list)
    for r in results:
        by_op[r["op"]].append(r)
    clean = sum(all(r["status"] not in ("fail", "cpu-fallback", "crash", "timeout") for r in rs) for rs in by_op.values())
    w("")
    w(f"OpInfos with no failing case: {clean} of {len(by_op)}. Crashes and hangs: "
      f"{', '.join(sorted({r['op'] for r in results if r['status'] in ('crash', 'timeout')})) or 'none'}.")
    w("")

    # cases that pass in Strict but not in another mode -----------------------------------------
    strict_status = {(r["op"], r["variant"], r["dtype"]): r["status"] for r in results}
    for mode, rows in modes.items():
        worse = [r for r in rows if r["status"] in ("fail", "crash", "timeout")
                 and strict_status.get((r["op"], r["variant"], r["dtype"])) == "pass"]
        w(f"## Cases that pass in Strict and fail in {MODES[mode]} mode: {len(worse)}")
        w("")
        if worse:
            w("| OpInfo | variant | dtype | status | detail |")
            w("|---|---|---|---|---|")
            for r in worse:
                w(f"| {md(r['op'])} | {r['variant']} | {r['dtype'] or 'all'} | {r['status']} | "
                  f"{md(str(r.get('detail', '')).split(chr(10))[0][:160])} |")
            w("")

    # failure causes ----------------------------------------------------------------------------
    w(f"## The {TOP_CAUSES} most common failure causes")
    w("")
    w("Cases that fail natively (FAIL, fb, CRASH, HANG) grouped by cause: the aten op without a lowering, or")
    w("the first line of the error with numbers elided; value mismatches are grouped by the aten ops the")
    w("case dispatched (at most 3, else by OpInfo). `fb` counts the cases that pass with the CPU fallback.")
    w("")
    w("| # | cases | fb | cause | OpInfos (first 6) |")
    w("|---|---|---|---|---|")
    causes = collections.defaultdict(list)
    for r in results:
        if r["status"] in ("fail", "cpu-fallback", "crash", "timeout"):
            causes[cause_key(r)].append(r)
    ranked = sorted(causes.items(), key=lambda kv: (-len(kv[1]), kv[0]))
    for i, (cause, rs) in enumerate(ranked[:TOP_CAUSES], 1):
        names = list(dict.fromkeys(f"{r['op']}" for r in rs))
        nfb = sum(r["status"] == "cpu-fallback" for r in rs)
        w(f"| {i} | {len(rs)} | {nfb} | {md(cause)} | {md(', '.join(names[:6]))}{' ...' if len(names) > 6 else ''} |")
    w("")
    defects = [(c, rs) for c, rs in ranked if not c.startswith("no tpu lowering")]
    if defects:
        w("## Defects other than missing lowerings")
        w("")
        w("Every failure cause that is not an op without a lowering: wrong values, dtypes or shapes,")
        w("missing or different errors, glue limitations.")
        w("")
        w("| cases | fb | cause | OpInfos (first 6) |")
        w("|---|---|---|---|")
        for cause, rs in defects:
            names = list(dict.fromkeys(r["op"] for r in rs))
            nfb = sum(r["status"] == "cpu-fallback" for r in rs)
            w(f"| {len(rs)} | {nfb} | {md(cause)} | {md(', '.join(names[:6]))}{' ...' if len(names) > 6 else ''} |")
        w("")
    fb = collections.Counter()
    for r in results:
        for o in r.get("fallback_ops", ()):
            fb[o] += 1
    if fb:
        w("## ATen ops that cpu-fallback cases needed")
        w("")
        w("Lowering these turns `fb` cases into native passes (count: cases that needed the op).")
        w("")
        w(", ".join(f"`{o}` ({n})" for o, n in fb.most_common()))
        w("")

    # core ATen ---------------------------------------------------------------------------------
    core = core_aten_ops()
    from torch_tpu import _aten
    lowered = set(_aten.lowered_ops())
    fwd_ok, bwd_ok = collections.defaultdict(set), collections.defaultdict(set)
    seen, seen_fail = collections.defaultdict(set), set()
    status = {(r["op"], r["variant"], r["dtype"]): r["status"] for r in results}
    for r in results:
        fw = set(r.get("aten_ops", ()))
        bw = set(r.get("aten_ops_bw", ()))
        if r["op"].startswith("aten.") and r["op"][5:] in core:  # core_extra's OpInfo calls the op itself
            fw.add(r["op"][5:])
        for o in fw | bw:
            seen[o].add(r["op"])
        if r["status"] == "pass" and not r.get("meta_only"):
            if r["variant"] == "backward":
                bwd_ok[r["dtype"]] |= fw
                fwd_ok[r["dtype"]] |= fw | bw
            elif r["variant"] != "error":
                fwd_ok[r["dtype"]] |= fw
        elif r["status"] in ("fail", "crash", "timeout"):
            seen_fail |= fw | bw
    kinds = {o: kernel_kind(o, lowered) for o in core}
    no_bw = {o for o in core if no_backward(o)}

    def cpu_lacks(o, variant, d):  # every OpInfo that dispatches o lacks d on CPU
        return bool(seen[o]) and all(status.get((n, variant, d), "not-supported-on-cpu") == "not-supported-on-cpu"
                                     for n in seen[o])
    ints_ok = fwd_ok["int64"] | fwd_ok["int32"] | fwd_ok["bool"]
    verified = {}  # (op, variant, dtype) -> ok / FAIL / untested / n/a / - (CPU lacks the dtype)
    for o in core:
        for d in CORE_DTYPES:
            for v, ok in (("forward", fwd_ok[d]), ("backward", bwd_ok[d])):
                if v == "backward" and o in no_bw:
                    verified[o, v, d] = "n/a"
                elif v == "forward" and o.startswith(NO_VALUES_PREFIXES):
                    verified[o, v, d] = "n/a"
                elif o in ok:
                    verified[o, v, d] = "ok"
                elif o.startswith("bitwise_") and o in ints_ok:  # integer-only: its integer cases verify it
                    verified[o, v, d] = "ok" if d == "float32" else "n/a"
                elif cpu_lacks(o, v, d):
                    verified[o, v, d] = "-"
                else:
                    verified[o, v, d] = "FAIL" if o in seen_fail else "untested"
    runs = {o for o in core if kinds[o] != "missing"}
    fwd_all = {o for o in runs if all(verified[o, "forward", d] in ("ok", "n/a", "-") for d in CORE_DTYPES)}
    bwd_all = {o for o in runs if all(verified[o, "backward", d] in ("ok", "n/a", "-") for d in CORE_DTYPES)}
    w("## Core ATen ops")
    w("")
    w(f"The core ATen opset: the {len(core)} `torch.ops.aten` overloads tagged `torch.Tag.core` in torch "
      f"{torch.__version__}. `lowered`: a rule in the lowering table (`torch_tpu._aten.lowered_ops()`); "
      "`tpu kernel`: a kernel of torch_tpu's own that is not a lowering (views, metadata); `composite`: runs "
      "PyTorch's decomposition into other ops (natively, no CPU fallback); `missing`: none of these. An op's "
      "forward is verified in a dtype when a passing case of that dtype dispatched it to tpu (value-compared, "
      "not metadata-only); its backward when a passing backward case of that dtype dispatched it in the forward "
      "pass (its derivative was checked). `n/a`: no derivative (integer, bool or fresh results, out= "
      "overloads, *_backward ops whose own derivative is double backward) or no values to compare (sizes, "
      "random draws); `-`: CPU PyTorch has no kernel for the dtype in any OpInfo that dispatches the op "
      "(counted as verified: there is nothing to compare against). The sweep records the aten ops each case dispatches with a TorchDispatchMode; "
      "`tests/opinfo/core_extra.py` adds OpInfos for core ops that op_db does not reach.")
    w("")
    kc = collections.Counter(kinds.values())
    w("| core ops | lowered | tpu kernel | composite | missing | forward verified (float32 and bfloat16) | "
      "backward verified or n/a (float32 and bfloat16) | both |")
    w("|---|---|---|---|---|---|---|---|")
    w(f"| {len(core)} | {kc['lowered']} | {kc['tpu kernel']} | {kc['composite']} | {kc['missing']} | "
      f"{len(fwd_all)} | {len(bwd_all)} | {len(fwd_all & bwd_all)} |")
    w("")
    w("| core op | kind | forward float32 | forward bfloat16 | backward float32 | backward bfloat16 | OpInfos that dispatch it (first 3) |")
    w("|---|---|---|---|---|---|---|")
    for o in sorted(core):
        cells = " | ".join(verified[o, v, d] for v in ("forward", "backward") for d in CORE_DTYPES)
        w(f"| `{o}` | {kinds[o]} | {cells} | {md(', '.join(sorted(seen.get(o, ()))[:3]))} |")
    w("")

    # per op ------------------------------------------------------------------------------------
    w("## Per op")
    w("")
    w("| op | " + " | ".join(f"{v} {d}" if v == "forward" else v for v, d in COLUMNS) + " |")
    w("|---" * (len(COLUMNS) + 1) + "|")
    for name in sorted(by_op):
        rs = by_op[name]
        row = []
        for v, d in COLUMNS:
            r = next((r for r in rs if r["variant"] == v and (d is None or r["dtype"] == d)), None)
            row.append(MARK.get(r["status"], r["status"]) if r else "")
        whole_op = [r for r in rs if r["variant"] == "*"]  # a crash or hang between cases
        if whole_op:
            row[0] = MARK[whole_op[0]["status"]]
        star = any(r.get("meta_only") for r in rs)
        w(f"| `{name}`{' *' if star else ''} | " + " | ".join(row) + " |")
    w("")
    w("## Failure details")
    w("")
    w("The first failing sample of each failing case (and the aten ops a cpu-fallback case needed).")
    w("")
    for name in sorted(by_op):
        bad = [r for r in by_op[name] if r["status"] in ("fail", "crash", "timeout", "cpu-fallback")]
        if not bad:
            continue
        w(f"- `{name}`")
        for r in bad:
            extra = f" (fell back: {', '.join(r['fallback_ops'])})" if r.get("fallback_ops") else ""
            w(f"  - {r['variant']} {r['dtype']}: {MARK[r['status']]}{extra}: {md(r.get('detail', ''))}")
    w("")
    return "\n".join(lines)


def md(text):
    return str(text).replace("|", "\\|").replace("\n", " ")


def write(results_path=DEFAULT_RESULTS, out_path=os.path.join(ROOT, "docs", "op_coverage.md")):
    results, meta = load(results_path)
    loaded = {m: load(mode_results_path(results_path, m)) for m in MODES
              if os.path.exists(mode_results_path(results_path, m))}
    text = render(results, meta, {m: rows for m, (rows, _) in loaded.items()},
                  {m: mode_meta for m, (_, mode_meta) in loaded.items()})
    with open(out_path, "w") as f:
        f.write(text)
    return text


def main():
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--results", default=DEFAULT_RESULTS)
    p.add_argument("--out", default=os.path.join(ROOT, "docs", "op_coverage.md"))
    a = p.parse_args()
    write(a.results, a.out)
    print(f"report: {a.out}")


if __name__ == "__main__":
    main()
