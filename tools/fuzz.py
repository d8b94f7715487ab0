"""Random op and argument combinations on tpu against CPU PyTorch: shapes with 0-size dims, several
dtypes, bad dims, out-of-range indices, non-contiguous and overlapping (expanded) views. A case fails
on a wrong exception type, a silent mismatch, an abort or a hang (the cases run in a worker process
that is restarted after a crash, each with a time limit).

    python tools/fuzz.py [--cases N] [--seed S] [--timeout SECONDS]     (make fuzz)
"""
import argparse
import json
import os
import random
import subprocess
import sys

DTYPES = ["float32", "float64", "bfloat16", "int64", "int32", "bool"]
UNARY = ["abs", "neg", "exp", "log", "sqrt", "sin", "tanh", "sigmoid", "floor", "round", "sign", "logical_not",
         "bitwise_not", "reciprocal", "square", "isnan", "relu", "cumsum0", "flip0", "clone", "contiguous"]
BINARY = ["add", "sub", "mul", "div", "floor_divide", "remainder", "maximum", "minimum", "eq", "lt", "pow",
          "bitwise_and", "logical_or", "atan2", "where"]
REDUCE = ["sum", "mean", "prod", "amax", "amin", "argmax", "std", "var", "all", "any", "logsumexp", "norm"]
INDEX = ["getitem", "gather", "index_select", "take", "scatter_add", "index_add", "index_fill", "embedding",
         "setitem"]


def make_case(rng):
    """A JSON-able description of one call."""
    rank = rng.choice([0, 1, 2, 3])
    shape = [rng.choice([0, 1, 2, 3, 5]) if rng.random() < 0.15 else rng.choice([1, 2, 3, 4, 6]) for _ in range(rank)]
    view = rng.choice(["plain", "plain", "transpose", "stride", "expand", "offset"])
    kind = rng.choice(["unary", "binary", "reduce", "index"])
    op = rng.choice({"unary": UNARY, "binary": BINARY, "reduce": REDUCE, "index": INDEX}[kind])
    case = {"kind": kind, "op": op, "shape": shape, "dtype": rng.choice(DTYPES), "view": view,
            "seed": rng.randrange(2**31)}
    if kind == "reduce":
        case["dim"] = rng.choice([None, 0, -1, 1, 3, -4])  # some out of range
        case["keepdim"] = rng.random() < 0.5
    if kind == "binary":
        case["other"] = rng.choice(["tensor", "scalar", "broadcast"])
        case["other_dtype"] = rng.choice(DTYPES)
    if kind == "index":
        case["dim"] = rng.choice([0, -1, 1, 2])
        case["bad"] = rng.random() < 0.3  # an out-of-range index
    return case


def build(case, torch):
    """The case's inputs on CPU (deterministic from its seed) and the call, as fn(device_tensors...)."""
    g = torch.Generator().manual_seed(case["seed"])
    dtype = getattr(torch, case["dtype"])

    def tensor(shape, dt):
        if dt == torch.bool:
            return torch.rand(shape, generator=g) < 0.5
        if dt.is_floating_point:
            return (torch.randn(shape, generator=g) * 3).to(dt)
        return torch.randint(-5, 6, shape, generator=g).to(dt)

    base_shape = list(case["shape"])
    view = case["view"]
    if view == "stride" and base_shape:
        base_shape[-1] *= 2
    if view == "offset":
        base_shape = [base_shape[0] + 1] + base_shape[1:] if base_shape else base_shape
    if view == "expand" and base_shape:
        base_shape[0] = 1
    x = tensor(base_shape, dtype)

    def shaped(t):
        if view == "transpose" and t.dim() >= 2:
            return t.transpose(0, 1)
        if view == "stride" and t.dim():
            return t[..., ::2]
        if view == "offset" and t.dim():
            return t[1:]
        if view == "expand" and t.dim():
            return t.expand(*case["shape"])
        return t

    kind, op = case["kind"], case["op"]
    args = [x]
    if kind == "unary":
        special = {"cumsum0": lambda a: a.cumsum(0) if a.dim() else a.cumsum(0),
                   "flip0": lambda a: a.flip(0) if a.dim() else a.flip(()),
                   "relu": torch.relu}
        fn = lambda a: (special.get(op) or getattr(torch, op, None) or getattr(a, op))(shaped(a)) \
            if op not in ("clone", "contiguous") else getattr(shaped(a), op)()  # noqa: E731
    elif kind == "binary":
        other_dtype = getattr(torch, case["other_dtype"])
        if case["other"] == "scalar":
            scalar = 2 if not other_dtype.is_floating_point else 1.5
            fn = lambda a: getattr(torch, op)(shaped(a), scalar) if op != "where" else \
                torch.where(shaped(a) > 0, shaped(a), scalar)  # noqa: E731
        else:
            shp = list(shaped(x).shape)
            y = tensor(shp[-1:] if case["other"] == "broadcast" else shp, other_dtype)
            args.append(y)
            fn = lambda a, b: getattr(torch, op)(shaped(a), b) if op != "where" else \
                torch.where(b.bool() if b.dtype != torch.bool else b, shaped(a), 0)  # noqa: E731
    elif kind == "reduce":
        dim, keep = case["dim"], case["keepdim"]
        if op == "argmax":
            fn = lambda a: torch.argmax(shaped(a), dim=dim, keepdim=keep)  # noqa: E731
        elif op in ("std", "var"):
            fn = lambda a: getattr(torch, op)(shaped(a), dim=dim, keepdim=keep)  # noqa: E731
        elif dim is None:
            fn = lambda a: getattr(torch, op)(shaped(a))  # noqa: E731
        else:
            fn = lambda a: getattr(torch, op)(shaped(a), dim, keepdim=keep)  # noqa: E731
    else:
        dim = case["dim"]
        xs = shaped(x)
        size = xs.shape[dim] if xs.dim() > (dim if dim >= 0 else -dim - 1) else 1
        hi = size + 3 if case["bad"] else max(size, 1)
        lo = -size if not case["bad"] else -size - 3
        idx = torch.randint(lo if op in ("getitem", "index_select", "take", "index_fill", "setitem") else 0,
                            hi, (3,), generator=g) if size or case["bad"] else torch.zeros(0, dtype=torch.long)
        args.append(idx)
        if op == "getitem":
            fn = lambda a, i: shaped(a)[i]  # noqa: E731
        elif op == "setitem":
            def fn(a, i):
                t = shaped(a).clone()
                t[i] = 1
                return t
        elif op == "gather":
            fn = lambda a, i: torch.gather(shaped(a), dim, i.reshape([-1] + [1] * (shaped(a).dim() - 1)).abs())  # noqa: E731
        elif op == "index_select":
            fn = lambda a, i: torch.index_select(shaped(a), dim, i)  # noqa: E731
        elif op == "take":
            fn = lambda a, i: torch.take(shaped(a), i)  # noqa: E731
        elif op == "scatter_add":
            fn = lambda a, i: shaped(a).clone().scatter_add(dim, i.abs().reshape([-1] + [1] * (shaped(a).dim() - 1)),  # noqa: E731
                                                             torch.ones_like(shaped(a))[:3] if shaped(a).dim() else shaped(a))
        elif op == "index_add":
            fn = lambda a, i: shaped(a).index_add(dim, i, shaped(a).index_select(dim, i.clamp(0, 0)) * 0 + 1)  # noqa: E731
        elif op == "index_fill":
            fn = lambda a, i: shaped(a).index_fill(dim, i, 1)  # noqa: E731
        else:  # embedding
            fn = lambda a, i: torch.nn.functional.embedding(i.abs(), shaped(a).reshape(shaped(a).shape[0], -1)  # noqa: E731
                                                            if shaped(a).dim() else shaped(a))
    return args, fn


def run_case(case, torch):
    """'ok', or a failure description."""
    args, fn = build(case, torch)
    try:
        expected = fn(*args)
        expected_error = None
    except Exception as e:  # noqa: BLE001
        expected, expected_error = None, e
    try:
        actual = fn(*[a.to("tpu") for a in args])
        actual = actual.cpu() if isinstance(actual, torch.Tensor) else actual
        torch.tpu.synchronize()
        actual_error = None
    except Exception as e:  # noqa: BLE001
        actual, actual_error = None, e
        try:
            torch.tpu.synchronize()
        except Exception:  # noqa: BLE001 - a second report of the same error
            pass
    if expected_error is not None or actual_error is not None:
        if type(expected_error) is type(actual_error):
            return "ok"
        if expected_error is not None and actual_error is not None and isinstance(actual_error, NotImplementedError) \
                and "not implemented for" in str(expected_error):
            return "ok"  # both lack the dtype
        if "INDICES element is out of DATA bounds" in str(expected_error) and isinstance(actual_error, IndexError):
            return "ok"  # CPU's int32 index_select kernel words it so; its other dtypes raise IndexError, as tpu
        if expected_error is not None and actual_error is None and "not implemented for" in str(expected_error):
            return "ok"  # tpu accepts a dtype CPU's kernel lacks (CUDA is the oracle for what a device accepts)
        return (f"exception: CPU {type(expected_error).__name__}: {str(expected_error).splitlines()[0][:150] if expected_error else '-'}; "
                f"tpu {type(actual_error).__name__}: {str(actual_error).splitlines()[0][:150] if actual_error else '-'}")
    if expected.shape != actual.shape or expected.dtype != actual.dtype:
        return f"metadata: CPU {expected.dtype}{list(expected.shape)}, tpu {actual.dtype}{list(actual.shape)}"
    if expected.dtype.is_floating_point or expected.dtype.is_complex:
        tol = {torch.bfloat16: 2e-2, torch.float16: 2e-3, torch.float32: 1e-4}.get(expected.dtype, 1e-7)
        # reductions of float32 accumulate in another order: relative to the inputs' magnitude
        scale = max(1.0, float(args[0].abs().double().max()) if args[0].numel() and args[0].dtype != torch.bool else 1.0)
        ok = torch.allclose(actual.double(), expected.double(), rtol=tol, atol=tol * scale, equal_nan=True)
    else:
        ok = torch.equal(actual, expected)
    return "ok" if ok else "values differ"


def worker(cases_path, start):
    import torch  # noqa: F401 - loads tpu
    cases = json.load(open(cases_path))
    for k in range(start, len(cases)):
        print(f"START {k}", flush=True)
        try:
            result = run_case(cases[k], torch)
        except Exception as e:  # noqa: BLE001 - the harness itself (a case it cannot build)
            result = f"harness: {type(e).__name__}: {e}"
        print(f"RESULT {k} {json.dumps(result)}", flush=True)


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--cases", type=int, default=2000)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--timeout", type=float, default=120, help="seconds without progress before a case counts as hung")
    p.add_argument("--worker", nargs=2, help=argparse.SUPPRESS)
    a = p.parse_args(argv)
    if a.worker:
        return worker(a.worker[0], int(a.worker[1]))
    import tempfile
    rng = random.Random(a.seed)
    cases = [make_case(rng) for _ in range(a.cases)]
    path = os.path.join(tempfile.mkdtemp(prefix="tpu-fuzz-"), "cases.json")
    json.dump(cases, open(path, "w"))
    results, start = {}, 0
    while start < len(cases):
        errors = open(path + ".stderr", "w+")  # a file: a full pipe would stall the worker
        proc = subprocess.Popen([sys.executable, __file__, "--worker", path, str(start)], stdout=subprocess.PIPE,
                                stderr=errors, text=True)
        current = start
        import selectors
        sel = selectors.DefaultSelector()
        sel.register(proc.stdout, selectors.EVENT_READ)
        while True:
            if not sel.select(timeout=a.timeout):
                proc.kill()
                results[current] = "hang"
                break
            line = proc.stdout.readline()
            if not line:
                proc.wait()
                if current not in results:
                    errors.seek(0)
                    results[current] = f"crash (exit {proc.returncode}): {errors.read().strip().splitlines()[-1:]}"
                break
            if line.startswith("START"):
                current = int(line.split()[1])
            elif line.startswith("RESULT"):
                _, k, res = line.split(" ", 2)
                results[int(k)] = json.loads(res)
        start = max(results) + 1 if results else len(cases)
    failures = {k: r for k, r in results.items() if r != "ok"}
    for k, r in sorted(failures.items()):
        print(f"case {k}: {r}\n    {json.dumps(cases[k])}")
    print(f"{len(cases)} cases (seed {a.seed}): {len(cases) - len(failures)} ok, {len(failures)} failed")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
