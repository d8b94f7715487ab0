"""Bounded dynamism for torch.compile(backend="tpu"): a dimension marked with
`torch._dynamo.mark_dynamic(t, dim, min=..., max=...)` runs padded to one of at most 8 bucket sizes,
so every size up to `max` reuses its bucket's programs.

XLA CPU rejects bounded-dynamic types, so padding is ours: inputs are padded with zeros on the host
(no program per size), and Dynamo's FX graph runs through `_Masker`, which gives every value a
*validity mask* (a bool tensor broadcastable to it, computed in the program from the true sizes, a
runtime operand) and rewrites the ops that mix positions: reductions, softmax, sort, scans, norms,
attention and losses see the padding as their neutral element or not at all, and every other result
is zeroed outside its mask, so garbage never meets a valid value (nor its gradient: the graph is
differentiated by aot_autograd after masking). Outputs are packed (valid elements first, row-major)
and returned as views of the true shape. An op the masker does not know on padded data makes the
graph fall back to exact shapes (one program per size), reported in `torch_tpu.metrics.report()`;
data-dependent shapes (nonzero, masked_select, ...) raise.
"""
import math
import operator

import torch
import torch.fx

MAX_BUCKETS = 8
_buckets = []  # set_buckets(): explicit sizes, or empty for powers of two


def set_buckets(sizes=None):
    """Bucket sizes for dynamic dimensions (at most 8, ascending), e.g. [128, 256, 512]; sizes above a
    dimension's max are dropped and the max is always a bucket. None: powers of two (the default)."""
    if sizes is None:
        _buckets.clear()
        return
    sizes = sorted({int(s) for s in sizes})
    if not sizes or sizes[0] < 1 or len(sizes) > MAX_BUCKETS:
        raise ValueError(f"torch_tpu.set_buckets: expected 1 to {MAX_BUCKETS} positive sizes, got {sizes}")
    _buckets[:] = sizes


def buckets(lo, hi):
    """The bucket sizes of a dimension with sizes lo..hi: at most 8, the last is hi."""
    if _buckets:
        sizes = [s for s in _buckets if lo <= s < hi] + [hi]
    else:
        sizes = [1 << k for k in range(max(lo, 1).bit_length() - 1, hi.bit_length()) if lo <= 1 << k < hi] + [hi]
    return sizes[-MAX_BUCKETS:]


def mark_dynamic(tensor, dim, max, min=2):
    """torch_tpu.mark_dynamic(t, dim, max): `dim` of `t` varies between `min` and `max` in
    torch.compile(backend="tpu"). A size below 2 is left static (PyTorch specializes sizes 0 and 1:
    that size compiles its own program once)."""
    if tensor.shape[dim] >= 2:
        torch._dynamo.mark_dynamic(tensor, dim, min=min, max=max)


class Unsupported(Exception):
    """The masker cannot run this graph padded: it runs with exact shapes instead."""


def _expr(value):
    return value.node.expr if isinstance(value, torch.SymInt) else None


def bounded_symbols(gm):
    """{symbol: (lo, hi)} of the graph's inputs' dynamic sizes, if all of them have a finite max."""
    symbols = {}
    for value in (n.meta.get("example_value") for n in gm.graph.nodes if n.op == "placeholder"):
        sizes = value.shape if isinstance(value, torch.Tensor) else [value]
        for size in sizes:
            expr = _expr(size)
            if expr is None:
                continue
            env = size.node.shape_env
            for sym in expr.free_symbols:
                r = env.var_to_range.get(sym)
                try:
                    lo, hi = max(int(r.lower), 1), int(r.upper)
                except (AttributeError, TypeError, ValueError):  # no range, or an infinite max
                    return None
                if hi > 1 << 20:
                    return None
                symbols[sym] = (lo, hi)
    return symbols


def _evaluate(expr, env):
    """expr (sympy, over the dynamic sizes) at `env` (ints, or 0-d tensors inside a program)."""
    import sympy
    if expr.is_Integer:
        return int(expr)
    if expr.is_Symbol:
        return env[expr]
    args = [_evaluate(a, env) for a in expr.args]
    if isinstance(expr, sympy.Add):
        return sum(args[1:], args[0])
    if isinstance(expr, sympy.Mul):
        return math.prod(args[1:], start=args[0])
    if isinstance(expr, sympy.Pow) and expr.args[1].is_Integer:
        return args[0] ** int(expr.args[1])
    if type(expr).__name__ == "FloorDiv":
        return args[0] // args[1]
    raise Unsupported(f"the size expression {expr}")


def _dims(value):
    """[(dim, expr)] of a FakeTensor's dynamic dims."""
    return [(d, _expr(s)) for d, s in enumerate(value.shape) if _expr(s) is not None]


class Bucketed:
    """What the backend returns for a graph with bounded dynamic sizes."""

    def __init__(self, gm, symbols, compile_static, fallback, remember):
        self.gm, self.symbols, self.compile_static, self.fallback = gm, symbols, compile_static, fallback
        self.remember = remember
        self.order = sorted(symbols, key=str)
        self.inputs = []  # per input: ("int", expr) | ("tensor", [(dim, expr)]) | None
        self.where = {}  # symbol -> (input index, dim or None) that gives its size
        metas = [n.meta.get("example_value") for n in gm.graph.nodes if n.op == "placeholder"]
        for i, value in enumerate(metas):
            if isinstance(value, torch.Tensor):
                dims = _dims(value)
                self.inputs.append(("tensor", dims) if dims else None)
                for d, expr in dims:
                    if expr.is_Symbol:
                        self.where.setdefault(expr, (i, d))
            elif _expr(value) is not None:
                self.inputs.append(("int", _expr(value)))
                if _expr(value).is_Symbol:
                    self.where.setdefault(_expr(value), (i, None))
            else:
                self.inputs.append(None)
        self.unsupported = None if set(self.where) >= set(symbols) else "a dynamic size is not an input's dim"
        self.programs = {}  # bucket sizes -> compiled padded function
        self.outputs = [v for v in gm.graph.nodes if v.op == "output"][0]

    def __call__(self, *args):
        devices = {a.device.type for a in args if isinstance(a, torch.Tensor)}
        if self.unsupported is None and devices == {"tpu"}:  # (no tensor input: nothing to pad)
            sizes = {}
            for sym, (i, d) in self.where.items():
                sizes[sym] = int(args[i] if d is None else args[i].shape[d])
            padded = {sym: next(b for b in buckets(*self.symbols[sym]) if b >= sizes[sym]) for sym in self.order}
            key = tuple(padded[s] for s in self.order)
            self.remember([a for a in args if isinstance(a, torch.Tensor)])
            try:
                program = self.programs.get(key) or self._build(key, padded)
                return self._run(program, args, sizes, padded)
            except Unsupported as e:
                self.unsupported = str(e)
                from torch_tpu import compiler
                compiler.note_event("graph with dynamic sizes", f"runs with exact shapes: {e}")
        return self.fallback(*args)

    def _build(self, key, padded):
        masker = _Masker(self.gm, self.order, padded)
        ints = {i: _evaluate(spec[1], padded) for i, spec in enumerate(self.inputs) if spec and spec[0] == "int"}

        def padded_graph(*tensors_and_sizes):
            *tensors, true = tensors_and_sizes
            it = iter(tensors)
            return masker.run_padded(*[ints[i] if i in ints else next(it) for i in range(len(self.inputs))], true)

        program = self.compile_static(padded_graph, "x".join(f"{s}={padded[s]}" for s in self.order))
        self.programs[key] = program
        return program

    def _run(self, program, args, sizes, padded):
        device = next(a.device for a in args if isinstance(a, torch.Tensor))
        call = []
        for a, spec in zip(args, self.inputs):
            if spec is None:
                call.append(a)
            elif spec[0] == "tensor":
                call.append(_pad(a, [(d, _evaluate(e, padded)) for d, e in spec[1]]))
        true = torch.tensor([sizes[s] for s in self.order], dtype=torch.int64).to(device)
        outs = iter(program(*call, true))
        results = []
        for meta in _output_metas(self.outputs):
            if isinstance(meta, torch.SymInt):
                results.append(_evaluate(_expr(meta), sizes))
            else:
                results.append(_unpack(next(outs), meta, sizes))
        return results


def _output_metas(output_node):
    return [a.meta.get("example_value") if isinstance(a, torch.fx.Node) else None
            for a in torch.utils._pytree.tree_leaves(output_node.args[0])]


def _unpack(value, meta, sizes):
    """A packed padded output -> a view of its true shape (its valid elements come first)."""
    if not isinstance(value, torch.Tensor) or not isinstance(meta, torch.Tensor) or not _dims(meta):
        return value
    shape = [int(_evaluate(_expr(s), sizes)) if _expr(s) is not None else int(s) for s in meta.shape]
    return value.reshape(-1)[:math.prod(shape)].view(shape)


class _HostPad(torch.autograd.Function):
    """Pads on the host: a device program would compile once per true size."""

    @staticmethod
    def forward(ctx, x, *pads):
        ctx.shape = x.shape
        host = x.detach().cpu()
        out = torch.zeros([p for p in pads], dtype=x.dtype)
        out[tuple(slice(0, n) for n in x.shape)] = host
        return out.to(x.device)

    @staticmethod
    def backward(ctx, grad):
        return (grad[tuple(slice(0, n) for n in ctx.shape)],) + (None,) * len(grad.shape)


def _pad(x, dims):
    shape = list(x.shape)
    for d, n in dims:
        if x.shape[d] > n:
            raise Unsupported(f"size {x.shape[d]} beyond its bucket {n}")
        shape[d] = n
    if list(x.shape) == shape:
        return x
    return _HostPad.apply(x, *shape)


# ----------------------------------------------------------------------------------------------
# The masker: runs Dynamo's graph on padded values, keeping a validity mask per value.

_OPERATOR_NAMES = {"truediv": "div", "floordiv": "floor_divide", "and_": "bitwise_and", "or_": "bitwise_or",
                   "xor": "bitwise_xor", "invert": "bitwise_not", "mod": "remainder", "matmul": "matmul",
                   "iadd": "add_", "isub": "sub_", "imul": "mul_", "itruediv": "div_", "iand": "bitwise_and_",
                   "ior": "bitwise_or_"}
_ELEMENTWISE_EXTRA = {"to", "float", "double", "half", "bfloat16", "int", "long", "bool", "type_as", "contiguous",
                      "clone", "detach", "dropout", "where", "add", "sub", "mul", "div", "eq", "ne", "lt", "le",
                      "gt", "ge", "floor_divide", "remainder", "type", "ones_like", "zeros_like", "full_like",
                      "empty_like", "rand_like", "randn_like", "alias", "fill", "masked_fill", "clamp", "clip",
                      "rsub", "true_divide", "tril", "triu"}
_VIEWS = {"view", "reshape", "flatten", "unflatten", "permute", "transpose", "t", "unsqueeze", "squeeze", "expand",
          "expand_as", "narrow", "split", "chunk", "unbind", "movedim", "swapaxes", "repeat", "select", "flip",
          "view_as", "reshape_as", "tile", "unfold"}
_DATA_DEPENDENT = {"nonzero", "masked_select", "unique", "unique_consecutive", "bincount", "argwhere", "item",
                   "tolist", "masked_scatter", "nonzero_static", "histc"}
_SIZE_USERS = _VIEWS | {"new_ones", "new_zeros", "new_empty", "new_full", "zeros", "ones", "empty", "full",
                        "arange", "getitem", "pad", "randn", "rand", "randint", "size", "tensor_split", "Size"}
_NO_TENSOR = {"_set_grad_enabled", "_log_api_usage_once", "size", "dim", "numel", "new_ones", "new_zeros",
              "new_empty", "new_full", "new_tensor"}  # (new_*: the mask comes from the result's sizes)


def _is_elementwise(name):
    if name in _ELEMENTWISE_EXTRA:
        return True
    op = getattr(torch.ops.aten, name, None)
    if op is None or not hasattr(op, "overloads"):
        return False
    return any(torch.Tag.pointwise in getattr(op, o).tags for o in op.overloads())


def _name(node):
    if node.op == "call_method":
        return node.target
    name = getattr(node.target, "__name__", str(node.target))
    if node.target in vars(operator).values():
        return _OPERATOR_NAMES.get(name, name)
    return name


def _leaves(args, kwargs):
    return torch.utils._pytree.tree_leaves((args, kwargs))


def _arg(args, kwargs, index, name, default=None):
    if len(args) > index:
        return args[index]
    return kwargs.get(name, default)


def _full(mask, like):
    return mask.expand(like.shape)


def _neutral(dtype, high):
    if dtype == torch.bool:
        return high
    if dtype.is_floating_point:
        return math.inf if high else -math.inf
    info = torch.iinfo(dtype)
    return info.max if high else info.min


def _reduce_dims(x, dim):
    if dim is None:
        return list(range(x.dim()))
    return [d % max(x.dim(), 1) for d in ([dim] if isinstance(dim, int) else dim)]


class _Masker(torch.fx.Interpreter):
    """Runs Dynamo's graph on padded inputs; `run_padded(*inputs, true_sizes)` is what aot_autograd
    traces and compiles once per bucket."""

    def __init__(self, gm, order, padded):
        super().__init__(gm)
        self.order, self.padded = order, padded
        self.masks = {}  # id(value) -> (value, mask, whether its padded positions hold zeros)
        self.zeros, self.canonical, self.origin = {}, {}, {}
        self.symbolic = {n.name for n in gm.graph.nodes
                         if isinstance(n.meta.get("example_value"), torch.SymInt)}

    def run_padded(self, *args):
        *inputs, true = args
        self.true = {sym: true[i] for i, sym in enumerate(self.order)}
        self.masks, self.zeros, self.canonical, self.origin = {}, {}, {}, {}
        self.device = true.device
        self._inputs = iter(inputs)
        try:
            return tuple(self.run(*inputs))
        finally:
            self.masks, self.zeros, self.canonical, self.origin = {}, {}, {}, {}

    # -- masks ---------------------------------------------------------------------------------
    def entry(self, value):
        entry = self.masks.get(id(value)) if isinstance(value, torch.Tensor) else None
        return entry if entry is not None and entry[0] is value else None

    def mask(self, value):
        entry = self.entry(value)
        return entry[1] if entry else None

    def zeroed(self, value):
        """Whether `value` holds zeros (False) at its padded positions."""
        entry = self.entry(value)
        return entry is None or entry[2]

    def set_mask(self, value, mask, zeroed=False):
        if mask is not None and isinstance(value, torch.Tensor):
            self.masks[id(value)] = (value, mask, zeroed)

    def result(self, value, mask, zero=False):
        """`value` with zeros outside `mask` (`zero`: it has them already), its mask recorded."""
        if mask is None:
            return value
        if not zero:
            value = self.sanitize(value, mask)
        self.set_mask(value, mask, zeroed=True)
        return value

    def full_mask(self, value):
        m = self.mask(value)
        return _full(m, value) if m is not None else torch.ones(value.shape, dtype=torch.bool, device=value.device)

    def shape_mask(self, meta, value):
        """The mask of a value made from sizes alone: along each dynamic dim its first n are valid."""
        mask = None
        for d, expr in _dims(meta):
            m = self.prefix(value.dim(), d, value.shape[d], expr)
            mask = m if mask is None else mask & m
        return mask

    def prefix(self, rank, dim, size, expr):
        """The one mask tensor of rank `rank` whose first expr(true sizes) of `size` along `dim` are valid."""
        key = (rank, dim, size, expr)
        if key not in self.canonical:
            shape = [1] * rank
            shape[dim] = size
            m = (torch.arange(size, device=self.device) < _evaluate(expr, self.true)).view(shape)
            self.canonical[key] = m
            self.origin[id(m)] = (m, expr)
        return self.canonical[key]

    def derived(self, mask, source):
        """`mask`, moved from `source` by an op that keeps its padded dim whole (a view, unsqueeze, a
        reduction along other dims): the canonical tensor when `source` is one prefix (shared masks make
        equal masks identical, which spares ANDs and zeroing)."""
        origin = self.origin.get(id(source))
        dims = [d for d in range(mask.dim()) if mask.shape[d] != 1]
        if origin is None or origin[0] is not source or len(dims) != 1 or mask.shape[dims[0]] != source.numel():
            return mask
        return self.prefix(mask.dim(), dims[0], mask.shape[dims[0]], origin[1])

    def sanitize(self, value, mask):
        key = (value.dtype, value.device)
        if key not in self.zeros:  # one zero per dtype in the program
            self.zeros[key] = torch.zeros((), dtype=value.dtype, device=value.device)
        return torch.where(mask, value, self.zeros[key])

    # -- the interpreter -------------------------------------------------------------------------
    def placeholder(self, target, args, kwargs):
        value = super().placeholder(target, args, kwargs)
        node = next(n for n in self.graph.nodes if n.op == "placeholder" and n.target == target)
        meta = node.meta.get("example_value")
        if isinstance(value, torch.Tensor) and isinstance(meta, torch.Tensor):
            self.set_mask(value, self.shape_mask(meta, value), zeroed=True)  # padded with zeros
        return value

    def output(self, target, args, kwargs):
        outs = torch.utils._pytree.tree_leaves(args[0])
        metas = _output_metas(next(n for n in self.module.graph.nodes if n.op == "output"))
        return [self.pack(o) if isinstance(m, torch.Tensor) and _dims(m) else o
                for o, m in zip(outs, metas) if isinstance(o, torch.Tensor)]

    def pack(self, value):
        """Valid elements first, in row-major order: the true tensor's contents."""
        mask = self.mask(value)
        if mask is None:
            return value
        flat = value.reshape(-1)
        valid = _full(mask, value).reshape(-1)
        position = torch.where(valid, torch.cumsum(valid.to(torch.int64), 0) - 1, flat.numel())
        packed = torch.zeros(flat.numel() + 1, dtype=value.dtype, device=value.device)
        return packed.scatter(0, position, flat)[:flat.numel()]

    def run_node(self, n):
        if n.op not in ("call_function", "call_method"):
            if n.op == "call_module":
                raise Unsupported(f"module call {n.target}")
            return super().run_node(n)
        args, kwargs = self.fetch_args_kwargs_from_env(n)
        name = _name(n)
        meta = n.meta.get("example_value")
        if name in _DATA_DEPENDENT:
            raise NotImplementedError(
                f"tpu: {name} has a data-dependent shape, which a graph with dynamic dimensions "
                f"(torch._dynamo.mark_dynamic) does not support; compute it outside the compiled function")
        uses_size = any(isinstance(a, torch.fx.Node) and a.name in self.symbolic for a in _leaves(n.args, n.kwargs))
        if uses_size and name not in _SIZE_USERS and not isinstance(meta, (torch.SymInt, int)):
            raise Unsupported(f"a dynamic size is used as a value by {name}")
        tensors = [a for a in _leaves(args, kwargs) if isinstance(a, torch.Tensor)]
        masked = [t for t in tensors if self.mask(t) is not None]
        if not masked or name in _NO_TENSOR:
            return self.unmasked(n, args, kwargs, meta)
        rule = _RULES.get(name)
        if rule is None:
            if name in _VIEWS:
                rule = _structural
            elif _is_elementwise(name):
                rule = _elementwise
            elif name.endswith("_") and _is_elementwise(name[:-1]):
                rule = _inplace
            else:
                raise Unsupported(f"{name} on a padded value")
        return rule(self, n, name, args, kwargs)

    def call(self, n, args, kwargs):
        if n.op == "call_method":
            self_obj, *rest = args
            return getattr(self_obj, n.target)(*rest, **kwargs)
        return n.target(*args, **kwargs)

    def unmasked(self, n, args, kwargs, meta):
        out = self.call(n, args, kwargs)
        metas = meta if isinstance(meta, (tuple, list)) else [meta]
        values = out if isinstance(out, (tuple, list)) else [out]
        for value, m in zip(values, metas):
            if isinstance(value, torch.Tensor) and isinstance(m, torch.Tensor) and _dims(m):
                self.set_mask(value, self.shape_mask(m, value))
        return out


# ----------------------------------------------------------------------------------------------
# Rules: how an op runs on padded values, and the mask of its result.

# Elementwise ops that keep zeros at padded positions (f(0) = 0) with a finite derivative there, so a
# padded position's gradient stays zero too: their results need no zeroing.
_KEEP_ZERO = {"neg", "silu", "relu", "relu6", "gelu", "tanh", "sin", "sinh", "tan", "atan", "asin", "asinh", "erf",
              "abs", "to", "float", "double", "half", "bfloat16", "type", "type_as", "contiguous", "clone",
              "detach", "alias", "dropout", "hardtanh", "leaky_relu", "elu", "selu", "celu", "mish", "hardswish",
              "softsign", "log1p", "expm1", "trunc", "round", "floor", "ceil", "sign", "sgn", "square",
              "positive", "nan_to_num", "deg2rad", "rad2deg", "tril", "triu"}
_PRODUCTS = {"mul", "multiply", "bitwise_and", "logical_and"}  # zero if any padded factor is
_SUMS = {"add", "sub", "subtract", "bitwise_or", "logical_or", "maximum", "minimum"}  # zero if all terms are


def _keeps_zero(mk, name, args, kwargs):
    tensors = [a for a in _leaves(args, kwargs) if isinstance(a, torch.Tensor)]
    masked = [t for t in tensors if mk.mask(t) is not None]
    if not all(mk.zeroed(t) for t in masked):
        return False
    if name in _KEEP_ZERO or name in _PRODUCTS:
        return name in _PRODUCTS or len(masked) == 1 and args[0] is masked[0]
    if name in ("div", "true_divide"):
        return args[0] is masked[0] and len(tensors) == 1 and isinstance(args[1], (int, float)) and args[1] != 0
    if name == "pow":
        return args[0] is masked[0] and len(tensors) == 1 and isinstance(args[1], (int, float)) and args[1] >= 1
    if name in _SUMS:  # every term padded in the same places, no unpadded term
        scalars = [a for a in args if not isinstance(a, torch.Tensor)]
        return len(masked) == len(tensors) == len(args) - len(scalars) and not scalars and \
            all(mk.mask(t) is mk.mask(masked[0]) for t in masked)
    return False


def _elementwise(mk, n, name, args, kwargs):
    out = mk.call(n, args, kwargs)
    mask = None
    for t in _leaves(args, kwargs):
        m = mk.mask(t)
        if m is not None and m is not mask:
            mask = m if mask is None else mask & m
    return mk.result(out, mask, zero=_keeps_zero(mk, name, args, kwargs))


def _replace_tensors(mk, args, kwargs, with_):
    return torch.utils._pytree.tree_map(lambda a: with_(a) if isinstance(a, torch.Tensor) else a, (args, kwargs))


_DIMWISE = {"transpose", "permute", "t", "swapaxes", "swapdims", "movedim", "flip"}
_RESHAPES = {"view", "reshape", "flatten", "unflatten", "view_as", "reshape_as", "squeeze", "unsqueeze"}


def _reshaped_mask(m, shape, new_shape):
    """A broadcastable mask of `shape` reshaped to `new_shape`, if each padded dim survives whole (the
    same size after the same leading elements); else None."""
    new = [1] * len(new_shape)
    before_out = [math.prod(new_shape[:e]) for e in range(len(new_shape))]
    for d in range(len(shape)):
        if m.shape[d] == 1:
            continue
        before = math.prod(shape[:d])
        e = next((e for e in range(len(new_shape)) if before_out[e] == before and new_shape[e] == shape[d]), None)
        if e is None or m.shape[d] != shape[d]:
            return None
        new[e] = shape[d]
    return m.reshape(new)


def _indexed_mask(m, x, index):
    """mask[index] for a basic index (ints, slices, None, ...): dims where the mask is 1 stay 1."""
    index = index if isinstance(index, tuple) else (index,)
    if any(not (i is None or i is Ellipsis or isinstance(i, (int, slice))) for i in index):
        return None
    explicit = sum(1 for i in index if i is not None and i is not Ellipsis)
    out, d = [], 0
    for i in index:
        if i is Ellipsis:
            out.extend([slice(None)] * (x.dim() - explicit))
            d += x.dim() - explicit
            continue
        if i is not None and m.shape[d] == 1 and x.shape[d] != 1:
            i = 0 if isinstance(i, int) else slice(None)
        out.append(i)
        d += i is not None
    return m[tuple(out)]


def _small_mask(mk, name, args, kwargs, out):
    x, m = args[0], mk.mask(args[0])
    if m.dim() != x.dim() or isinstance(out, (tuple, list)):
        return None
    if name in _DIMWISE:
        return getattr(m, name)(*args[1:], **kwargs)
    if name in ("expand", "expand_as"):
        return m.reshape([1] * (out.dim() - m.dim()) + list(m.shape))
    if name in _RESHAPES:
        return _reshaped_mask(m, list(x.shape), list(out.shape))
    if name == "getitem":
        return _indexed_mask(m, x, args[1])
    return None


def _structural(mk, n, name, args, kwargs):
    """Views, cat, indexing with slices: the same op on the masks."""
    out = mk.call(n, args, kwargs)
    tensors = [t for t in _leaves(args, kwargs) if isinstance(t, torch.Tensor)]
    small = _small_mask(mk, name, args, kwargs, out) if tensors == [args[0]] else None
    if small is not None:
        mk.set_mask(out, small if name == "flip" else mk.derived(small, mk.mask(args[0])), mk.zeroed(args[0]))
        return out
    margs, mkwargs = _replace_tensors(mk, args, kwargs, mk.full_mask)
    if name == "view":
        name = "reshape"
    mout = getattr(margs[0], name)(*margs[1:], **mkwargs) if n.op == "call_method" else n.target(*margs, **mkwargs)
    zeroed = all(mk.zeroed(t) for t in _leaves(args, kwargs) if isinstance(t, torch.Tensor))
    for value, m in zip(out if isinstance(out, (tuple, list)) else [out],
                        mout if isinstance(mout, (tuple, list)) else [mout]):
        mk.set_mask(value, m, zeroed)
    return out


def _cat(mk, n, name, args, kwargs):
    tensors = _arg(args, kwargs, 0, "tensors")
    dim = _arg(args, kwargs, 1, "dim", 0)
    out = mk.call(n, args, kwargs)
    zeroed = all(mk.zeroed(t) for t in tensors)
    first = mk.mask(tensors[0])
    if name == "cat" and first is not None and first.shape[dim] == 1 and all(mk.mask(t) is first for t in tensors):
        mk.set_mask(out, first, zeroed)
        return out
    masks = [mk.full_mask(t) for t in tensors]
    mk.set_mask(out, torch.cat(masks, dim) if name == "cat" else torch.stack(masks, dim), zeroed)
    return out


def _getitem(mk, n, name, args, kwargs):
    """Indexing with index tensors: the mask is indexed the same way, with a False slot at the end of
    each indexed dim that padded index positions point to."""
    x, index = args
    if not isinstance(x, torch.Tensor):
        return mk.call(n, args, kwargs)
    if not any(isinstance(i, torch.Tensor) for i in _leaves(index, {})):
        return _structural(mk, n, name, args, kwargs)
    out = x[index]
    index = index if isinstance(index, tuple) else (index,)
    if any(isinstance(i, torch.Tensor) and i.dtype == torch.bool for i in index):
        raise NotImplementedError("tpu: indexing with a boolean mask has a data-dependent shape, which a graph "
                                  "with dynamic dimensions (torch._dynamo.mark_dynamic) does not support")
    xm = mk.full_mask(x)
    new_index, dim = [], 0
    for i in index:
        if i is None:
            new_index.append(i)
            continue
        if i is Ellipsis:
            dim = xm.dim() - sum(1 for j in index if j is not None and j is not Ellipsis) + dim
            new_index.append(i)
            continue
        if isinstance(i, torch.Tensor):
            size = xm.shape[dim]
            xm = torch.cat([xm, torch.zeros_like(xm.narrow(dim, 0, 1))], dim)
            i = i % size
            im = mk.mask(i)
            if im is not None:
                i = torch.where(im, i, size)
        new_index.append(i)
        dim += 1
    mk.set_mask(out, xm[tuple(new_index)])
    return out


def _rows(mk, x, contracted):
    """The mask of what is left of x when dim `contracted` is summed over (None: all valid)."""
    m = mk.mask(x)
    if m is None or m.shape[contracted] == 1:
        return m
    return _full(m, x).any(contracted, keepdim=True)


def _contracted(mk, x, dim):
    """x with zeros at padded positions when it is padded along the contracted dim."""
    m = mk.mask(x)
    if m is None or m.shape[dim] == 1 or mk.zeroed(x):
        return x
    return mk.sanitize(x, m)


def _linear(mk, n, name, args, kwargs):
    x = args[0]
    bias = _arg(args, kwargs, 2, "bias")
    if mk.mask(args[1]) is not None or mk.mask(bias) is not None:
        raise Unsupported("linear with a padded weight")
    out = mk.call(n, [_contracted(mk, x, -1)] + list(args[1:]), kwargs)
    return mk.result(out, _rows(mk, x, -1), zero=mk.zeroed(x) and bias is None)


def _matmul(mk, n, name, args, kwargs):
    if name == "addmm":  # bias + a @ b
        bias, a, b = args[0], args[1], args[2]
        if mk.mask(bias) is not None or kwargs:
            raise Unsupported("addmm with a padded bias or scaling")
    else:
        bias, (a, b) = None, args[:2]
    if a.dim() < 2 or b.dim() < 2:
        raise Unsupported(f"{name} of a vector")
    ac, bc = _contracted(mk, a, -1), _contracted(mk, b, -2)
    out = mk.call(n, [bias, ac, bc] if bias is not None else [ac, bc] + list(args[2:]), kwargs)
    rows, cols = _rows(mk, a, -1), _rows(mk, b, -2)
    mask = cols if rows is None else rows if cols is None else rows & cols
    return mk.result(out, mask, zero=mk.zeroed(a) and mk.zeroed(b) and bias is None)


def _inplace(mk, n, name, args, kwargs):
    """x.add_(y), x += y, ...: where every padded operand has x's mask (else exact shapes)."""
    target, m = args[0], mk.mask(args[0])
    if m is None or any(mk.mask(t) not in (None, m) for t in _leaves(args[1:], kwargs) if isinstance(t, torch.Tensor)):
        raise Unsupported(f"in-place {name} mixing differently padded values")
    zero = _keeps_zero(mk, name[:-1], args, kwargs)
    out = mk.call(n, args, kwargs)
    if not zero:  # zero it again in place: views of the target must stay zero-padded too
        target.masked_fill_(~m, 0)
    mk.set_mask(target, m, True)
    if out is not target:
        mk.set_mask(out, m, True)
    return out


def _embedding(mk, n, name, args, kwargs):
    ids, weight = args[0], args[1]
    if mk.mask(weight) is not None:
        raise Unsupported("embedding with a padded weight")
    out = mk.call(n, args, kwargs)
    mask = mk.derived(mk.mask(ids).unsqueeze(-1), mk.mask(ids))
    out = mk.result(out, mask)
    return out


def _reduction(mk, n, name, args, kwargs):
    """sum/mean/max/... along dims: padding holds the neutral element; mean and var count valid ones."""
    x = args[0]
    dim = _arg(args, kwargs, 1, "dim")
    if isinstance(dim, torch.Tensor):  # torch.max(a, b) is elementwise
        return _elementwise(mk, n, name, args, kwargs)
    keepdim = bool(_arg(args, kwargs, 2, "keepdim", False))
    dims = _reduce_dims(x, dim)
    small = mk.mask(x)
    if dims and len(dims) < x.dim() and name != "std" and all(small.shape[d] == 1 for d in dims):
        # along unpadded dims: padded rows reduce to zero when they hold zeros
        out = mk.call(n, args, kwargs)
        mask = small if keepdim else small.squeeze(dims)
        zero = mk.zeroed(x) and name != "logsumexp"
        if isinstance(out, tuple):
            return type(out)([mk.result(out[0], mask, zero), mk.result(out[1], mask)])
        return mk.result(out, mk.derived(mask, small), zero)
    xm = mk.full_mask(x)
    if name in ("mean", "nanmean", "var", "std"):
        dtype = kwargs.get("dtype") or (x.dtype if x.dtype.is_floating_point or x.dtype.is_complex else None)
        if dtype is None:
            raise Unsupported(f"{name} of an integer tensor")
        xs = torch.where(xm, x, torch.zeros((), dtype=x.dtype, device=x.device)).to(dtype)
        count = xm.sum(dims, keepdim=True).to(dtype)
        mean = xs.sum(dims, keepdim=True) / count.clamp_min(1)
        if name in ("mean", "nanmean"):
            out = mean
        else:
            correction = kwargs.get("correction")
            if correction is None:
                unbiased = kwargs.get("unbiased", args[2] if len(args) > 2 and isinstance(args[2], bool) and
                                      "keepdim" in kwargs else True)
                correction = 1 if unbiased else 0
            if len(args) > 2 and isinstance(args[2], bool) and "keepdim" not in kwargs:
                keepdim = bool(args[3]) if len(args) > 3 else False
            d = torch.where(xm, xs - mean, torch.zeros((), dtype=dtype, device=x.device))
            out = (d * d).sum(dims, keepdim=True) / (count - correction).clamp_min(0)
            if name == "std":
                out = out.sqrt()
        if not keepdim:
            out = out.squeeze(dims) if dims else out
    else:
        fill = {"sum": 0, "nansum": 0, "prod": 1, "any": False, "all": True}.get(name)
        if fill is None:
            fill = _neutral(x.dtype, high=name in ("amin", "min", "argmin"))
        xf = torch.where(xm, x, torch.full((), fill, dtype=x.dtype, device=x.device))
        out = mk.call(n, [xf] + list(args[1:]), kwargs)
    mask = xm.any(dims, keepdim=True) if dims else xm
    if not keepdim:
        mask = mask.squeeze(dims) if dims else mask
    values = list(out) if isinstance(out, tuple) else [out]
    for v in values:
        mk.set_mask(v, mask if mask.dim() else None)
    if len(dims) == x.dim():
        return out
    if isinstance(out, tuple):
        return type(out)([mk.result(v, mask) for v in values])
    out = mk.result(out, mask)
    return out


def _along_dim(mk, n, name, args, kwargs, fill):
    """The op along dim (args[1]) with padding filled with `fill`; along an unpadded dim, the op itself."""
    x = args[0]
    dim = _arg(args, kwargs, 1, "dim")
    if isinstance(dim, int) and mk.mask(x).shape[dim] == 1:
        return mk.mask(x), mk.call(n, args, kwargs)
    xm = mk.full_mask(x)
    xf = torch.where(xm, x, torch.full((), fill, dtype=x.dtype, device=x.device)) if fill is not None else x
    return xm, mk.call(n, [xf] + list(args[1:]), kwargs)


def _softmax(mk, n, name, args, kwargs):
    x = args[0]
    fill = torch.finfo(x.dtype).min if x.dtype.is_floating_point else None
    xm, out = _along_dim(mk, n, name, args, kwargs, fill)
    out = mk.result(out, xm)
    return out


def _scan(mk, n, name, args, kwargs):
    x = args[0]
    fill = {"cumsum": 0, "cumprod": 1, "logcumsumexp": -math.inf,
            "cummax": _neutral(x.dtype, False), "cummin": _neutral(x.dtype, True)}[name]
    xm, out = _along_dim(mk, n, name, args, kwargs, fill)
    values = list(out) if isinstance(out, tuple) else [out]
    fixed = [mk.result(v, xm) for v in values]
    return type(out)(fixed) if isinstance(out, tuple) else fixed[0]


def _sort(mk, n, name, args, kwargs):
    x = args[0]
    if name == "topk":
        k = _arg(args, kwargs, 1, "k")
        dim = _arg(args, kwargs, 2, "dim", -1)
        high = not _arg(args, kwargs, 3, "largest", True)
        call_kwargs = dict(kwargs)
    else:
        dim = _arg(args, kwargs, 1, "dim", -1)
        if isinstance(dim, bool):
            raise Unsupported(f"{name} with positional descending")
        high = not kwargs.get("descending", _arg(args, kwargs, 2, "descending", False))
        call_kwargs = dict(kwargs, stable=True) if name in ("sort", "argsort") else dict(kwargs)
    xm = mk.full_mask(x)
    xf = torch.where(xm, x, torch.full((), _neutral(x.dtype, high), dtype=x.dtype, device=x.device))
    out = mk.call(n, [xf] + list(args[1:]), call_kwargs)
    indices = out if name == "argsort" else out[1]
    mask = xm.gather(dim, indices)
    values = [out] if name == "argsort" else list(out)
    fixed = [mk.result(v, mask) for v in values]
    return fixed[0] if name == "argsort" else type(out)(fixed)


def _diff(mk, n, name, args, kwargs):
    x = args[0]
    if _arg(args, kwargs, 1, "n", 1) != 1:
        raise Unsupported("diff with n > 1")
    dim = _arg(args, kwargs, 2, "dim", -1)
    parts = [kwargs.get("prepend", args[3] if len(args) > 3 else None), x,
             kwargs.get("append", args[4] if len(args) > 4 else None)]
    m = torch.cat([mk.full_mask(p) for p in parts if p is not None], dim)
    out = mk.call(n, args, kwargs)
    size = m.shape[dim]
    mask = m.narrow(dim, 1, size - 1) & m.narrow(dim, 0, size - 1)
    out = mk.result(out, mask)
    return out


def _pad_rule(mk, n, name, args, kwargs):
    mode = _arg(args, kwargs, 2, "mode", "constant")
    if mode != "constant":
        raise Unsupported(f"pad with mode {mode!r}")
    out = mk.call(n, args, kwargs)
    pad = _arg(args, kwargs, 1, "pad")
    mask = torch.nn.functional.pad(mk.full_mask(args[0]), pad, value=True)
    mk.set_mask(out, mask, mk.zeroed(args[0]))
    return out


def _layer_norm(mk, n, name, args, kwargs):
    x, shape = args[0], _arg(args, kwargs, 1, "normalized_shape")
    weight, bias = _arg(args, kwargs, 2, "weight"), _arg(args, kwargs, 3, "bias")
    eps = _arg(args, kwargs, 4, "eps", 1e-5)
    if any(mk.mask(t) is not None for t in (weight, bias) if t is not None):
        raise Unsupported("layer_norm with a padded weight")
    dims = list(range(x.dim() - len(shape), x.dim()))
    if all(mk.mask(x).shape[d] == 1 for d in dims):  # normalized dims unpadded: the op itself
        return mk.result(mk.call(n, args, kwargs), mk.mask(x))
    xm = mk.full_mask(x)
    count = xm.sum(dims, keepdim=True).clamp_min(1).to(x.dtype)
    zero = torch.zeros((), dtype=x.dtype, device=x.device)
    mean = torch.where(xm, x, zero).sum(dims, keepdim=True) / count
    centered = torch.where(xm, x - mean, zero)
    var = (centered * centered).sum(dims, keepdim=True) / count
    out = centered * torch.rsqrt(var + eps)
    if weight is not None:
        out = out * weight
    if bias is not None:
        out = out + bias
    out = mk.result(out, xm)
    return out


def _bound(names, args, kwargs):
    """The call's arguments by name (for rules that call the functional op with some replaced)."""
    return {**dict(zip(names, args)), **kwargs}


def _sdpa(mk, n, name, args, kwargs):
    call = _bound(["query", "key", "value", "attn_mask", "dropout_p", "is_causal", "scale", "enable_gqa"],
                  args, kwargs)
    q, k = call["query"], call["key"]
    L, S = q.shape[-2], k.shape[-2]
    call["key"], call["value"] = _contracted(mk, k, -2), _contracted(mk, call["value"], -2)
    qvalid = _rows(mk, q, -1)
    if qvalid is None:
        qvalid = torch.ones(L, 1, dtype=torch.bool, device=q.device)
    kvalid = _rows(mk, k, -1)
    kvalid = torch.ones(1, S, dtype=torch.bool, device=q.device) if kvalid is None else kvalid.transpose(-1, -2)
    if kvalid.dim() > 2 and 1 != kvalid.shape[-3] != q.shape[-3]:  # grouped-query attention: fewer kv heads
        kvalid = kvalid.any(-3, keepdim=True)
    allowed = kvalid
    if call.get("is_causal"):
        allowed = allowed & torch.ones(L, S, dtype=torch.bool, device=q.device).tril()
        call["is_causal"] = False
    am = call.get("attn_mask")
    allowed = allowed | ~qvalid  # rows of padded queries attend everywhere: finite, then zeroed
    if am is None or am.dtype == torch.bool:
        call["attn_mask"] = allowed if am is None else (am & allowed) | ~qvalid
    else:
        call["attn_mask"] = torch.where(allowed, am, torch.full((), -math.inf, dtype=am.dtype, device=am.device))
    out = torch.nn.functional.scaled_dot_product_attention(**call)
    out = mk.result(out, qvalid)
    return out


def _cross_entropy(mk, n, name, args, kwargs):
    call = _bound(["input", "target", "weight", "size_average", "ignore_index", "reduce", "reduction",
                   "label_smoothing"], args, kwargs)
    x, target = call["input"], call["target"]
    if target.dtype.is_floating_point:
        raise Unsupported(f"{name} with class probabilities")
    ignore = call.get("ignore_index", -100)
    tm = mk.full_mask(target)
    if mk.mask(x) is not None:
        tm = tm & (mk.full_mask(x).any(1) if x.dim() > 1 else mk.full_mask(x))
    call["target"] = torch.where(tm, target, torch.full((), ignore, dtype=target.dtype, device=target.device))
    out = getattr(torch.nn.functional, name)(**call)
    if call.get("reduction", "mean") == "none":
        out = mk.result(out, tm)
    return out


def _pointwise_loss(mk, n, name, args, kwargs):
    reduction = kwargs.pop("reduction", "mean")
    if len(args) > 2:
        raise Unsupported(f"{name} with positional options")
    out = getattr(torch.nn.functional, name)(*args, reduction="none", **kwargs)
    mask = mk.full_mask(args[0]) & mk.full_mask(args[1])
    out = torch.where(mask, out, torch.zeros((), dtype=out.dtype, device=out.device))
    if reduction == "none":
        mk.set_mask(out, mask)
        return out
    total = out.sum()
    return total if reduction == "sum" else total / mask.sum().clamp_min(1).to(out.dtype)


def _gather(mk, n, name, args, kwargs):
    x, dim, index = args[0], _arg(args, kwargs, 1, "dim"), _arg(args, kwargs, 2, "index")
    out = mk.call(n, args, kwargs)
    xm = mk.full_mask(x)
    size = xm.shape[dim]
    xm = torch.cat([xm, torch.zeros_like(xm.narrow(dim, 0, 1))], dim)
    i = index % size
    if mk.mask(index) is not None:
        i = torch.where(mk.full_mask(index), i, size)
    if name == "gather":
        mask = xm.gather(dim, i)
    else:
        mask = xm.index_select(dim, i)
    out = mk.result(out, mask)
    return out


_RULES = {"cat": _cat, "concat": _cat, "concatenate": _cat, "stack": _cat, "getitem": _getitem,
          "linear": _linear, "matmul": _matmul, "mm": _matmul, "bmm": _matmul, "addmm": _matmul,
          "embedding": _embedding,
          "softmax": _softmax, "log_softmax": _softmax, "cumsum": _scan, "cumprod": _scan, "cummax": _scan,
          "cummin": _scan, "logcumsumexp": _scan, "sort": _sort, "argsort": _sort, "topk": _sort, "diff": _diff,
          "pad": _pad_rule, "layer_norm": _layer_norm, "scaled_dot_product_attention": _sdpa,
          "cross_entropy": _cross_entropy, "nll_loss": _cross_entropy, "mse_loss": _pointwise_loss,
          "l1_loss": _pointwise_loss, "smooth_l1_loss": _pointwise_loss, "huber_loss": _pointwise_loss,
          "binary_cross_entropy": _pointwise_loss, "binary_cross_entropy_with_logits": _pointwise_loss,
          "gather": _gather, "index_select": _gather, "take_along_dim": None}
for _r in ("sum", "nansum", "mean", "nanmean", "var", "std", "amax", "amin", "max", "min", "prod", "any", "all",
           "logsumexp", "argmax", "argmin"):
    _RULES[_r] = _reduction
del _RULES["take_along_dim"]
