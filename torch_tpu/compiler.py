"""torch.compile(backend="tpu"): Dynamo's FX graphs, through aot_autograd (forward and backward), run
as whole programs built from the same lowering rules as eager ops.

Each FX graph is called once on tpu tensors while the device records (a capture): its ops become one
deferred-op graph, compiled into one program. Later calls with inputs of the same geometry replay that
program (arguments bound by position, no tracing, no dispatch per op); new geometry captures again.
A graph that cannot be replayed (it reads values on the host, or keeps results outside its outputs)
runs recorded in Fuse mode on every call instead, which needs no replay.
"""
import contextlib
import os
import sys
import traceback

import torch

from torch_tpu import _aten, _plugin, dynamic

# Every capture of a compiled graph: why it happened, where, and whether it compiled a program.
_events = []
_TENSOR = object()  # marks where an output template takes the next output tensor
_forbid = []


def compile_events():
    """[{"graph", "reason", "where", "compiled"}] for every capture of a compiled graph so far."""
    return list(_events)


@contextlib.contextmanager
def no_recompile():
    """Inside the block, any program compile (a compiled graph or an eager op; programs already in the
    memory or disk cache are fine) raises a RuntimeError naming the program: serving code runs
    warmed-up programs only."""
    from torch_tpu import _C
    _forbid.append(True)
    _C.set_compiles_forbidden(True)
    try:
        yield
    finally:
        _forbid.pop()
        _C.set_compiles_forbidden(bool(_forbid))


def _fail_on_recompile():
    return _plugin.env_choice("TORCH_TPU_FAIL_ON_RECOMPILE", ("0", "1")) == "1"


def _user_frame():
    """The innermost frame outside torch and torch_tpu: the user's line that called the model."""
    skip = (os.path.dirname(torch.__file__), os.path.dirname(__file__))
    for frame in reversed(traceback.extract_stack()):
        if not frame.filename.startswith(skip) and "<eval_with_key>" not in frame.filename:
            return f"{frame.filename}:{frame.lineno}"
    return ""


def _compiles():
    from torch_tpu import _C
    return _C.metrics().get("compiles", 0)


def _describe(tensors):
    return [f"{str(t.dtype).replace('torch.', '')}{list(t.shape)}" for t in tensors]


# Dynamo frame and graph kind -> the inputs of its last capture: a recompiled frame says what changed.
_last_inputs = {}


def _changed(before, now):
    if len(before) != len(now):
        return f"the number of tensor inputs changed from {len(before)} to {len(now)}"
    for i, (b, n) in enumerate(zip(before, now)):
        if b != n:
            return f"input {i} changed from {b} to {n}"
    return "a guard on a non-tensor value failed"


class _Graph:
    """One FX graph of a compiled function (a forward, a backward or an inference graph)."""

    def __init__(self, gm, kind, frame):
        self.gm = gm
        self.kind = kind
        self.frame = (frame, kind)
        self.captures = {}  # the graph's non-tensor arguments -> [(CompiledGraph, output template)]
        self.unreplayable = {}  # non-tensor arguments -> why the graph runs recorded instead
        self._boxed_call = True

    def __call__(self, args):
        args = list(args)
        tensors = [a for a in args if isinstance(a, torch.Tensor)]
        if not tensors or any(t.device.type != "tpu" for t in tensors):
            return self.gm(*args)  # mixed devices: plain eager execution of the graph
        key = tuple(a for a in args if not isinstance(a, torch.Tensor))
        captured = self.captures.get(key, ())
        for graph, template in captured:
            outs = _aten.replay(graph, tensors)
            if outs is not None:
                return _assemble(template, outs)
        if key in self.unreplayable:
            with _recording(tensors):
                return self.gm(*args)
        before = _last_inputs.get(self.frame)
        now = _describe(tensors)
        if captured:
            reason = captured[-1][0].mismatch(tensors)
        elif before is not None:
            reason = ("recompiled frame: " if not (self.captures or self.unreplayable) else "") + _changed(before, now)
        else:
            reason = "new graph" if "bucket" not in self.kind else f"new {self.kind}"
        _last_inputs[self.frame] = now
        return self._capture(args, tensors, key, reason, recompile=bool(captured) or before is not None)

    def _capture(self, args, tensors, key, reason, recompile):
        before = _compiles()
        graph = _aten.capture_begin(tensors)
        try:
            outs = self.gm(*args)
        except BaseException:
            _aten.capture_abort(tensors)
            raise
        flat = list(outs) if isinstance(outs, (tuple, list)) else [outs]
        out_tensors = [o for o in flat if isinstance(o, torch.Tensor)]
        if any(o.device.type != "tpu" for o in out_tensors):
            why = "an output is not a tpu tensor"
            _aten.capture_abort(tensors)
            _aten.flush()
        else:
            why = _aten.capture_end(graph, tensors, out_tensors)
        if why:
            self.unreplayable[key] = why
        else:
            template = [_TENSOR if isinstance(o, torch.Tensor) else o for o in flat]
            self.captures.setdefault(key, []).append((graph, (template, isinstance(outs, (tuple, list)))))
        compiled = _compiles() > before
        name = graph.name or f"{self.kind} graph of {len(self.gm.graph.nodes)} FX nodes"
        _events.append({"graph": name, "reason": reason + (f" (runs recorded each call: {why})" if why else ""),
                        "where": _user_frame(), "compiled": compiled})
        if compiled and recompile and _fail_on_recompile():
            raise RuntimeError(f"tpu: recompiled {name} ({reason}) at {_events[-1]['where']}, and "
                               "TORCH_TPU_FAIL_ON_RECOMPILE=1 forbids recompiles after the first compile")
        return outs


@contextlib.contextmanager
def _recording(tensors):
    """Records the block into one graph of the inputs' device and runs it at the end (Fuse mode)."""
    _aten.capture_begin(tensors)
    try:
        yield
    finally:
        _aten.capture_abort(tensors)
        _aten.flush()


def _assemble(template, outs):
    flat, is_sequence = template
    it = iter(outs)
    result = [next(it) if o is _TENSOR else o for o in flat]
    return result if is_sequence else result[0]


def note_event(graph, reason, compiled=False):
    _events.append({"graph": graph, "reason": reason, "where": _user_frame(), "compiled": compiled})


def _check_static():
    import torch._dynamo.config as config
    if not config.assume_static_by_default:
        raise RuntimeError("torch.compile(..., backend=\"tpu\", dynamic=True) is not supported: use dynamic=None "
                           "(the default; a new shape recompiles). For variable sizes, mark dimensions with "
                           "torch._dynamo.mark_dynamic(tensor, dim, max=...) (bounded dynamism).")


def tpu_backend(gm, example_inputs, mode=None, options=None):
    """The Dynamo backend "tpu". `options` are XLA compile options for this model's programs, e.g.
    {"xla_cpu_use_onednn": True} (see README, torch.compile); `mode` is accepted and has no effect."""
    _check_static()
    register()
    from torch._dynamo.backends.common import aot_autograd
    from torch._functorch.aot_autograd import make_boxed_func  # noqa: F401 (boxed calling convention)

    from torch._guards import CompileContext
    compile_id = CompileContext.current_compile_id()
    frame = compile_id.frame_id if compile_id is not None else None

    def compiler(kind):
        def compile_graph(fx, _inputs):
            graph = _Graph(fx, kind, frame)
            if options:
                return _with_options(graph, options)
            return graph
        return compile_graph

    backend = aot_autograd(fw_compiler=compiler("forward"), bw_compiler=compiler("backward"),
                           inference_compiler=compiler("inference"), keep_inference_input_mutations=True)
    exact = backend(gm, example_inputs)
    symbols = dynamic.bounded_symbols(gm)
    if not symbols:
        return exact

    def compile_bucket(padded_graph, bucket):
        """The padded graph of one bucket: static shapes, differentiated after masking."""
        from torch._functorch.aot_autograd import aot_function
        bucketed = lambda kind: compiler(f"{kind} (bucket {bucket})")  # noqa: E731
        return aot_function(padded_graph, fw_compiler=bucketed("forward"), bw_compiler=bucketed("backward"),
                            inference_compiler=bucketed("inference"), keep_inference_input_mutations=True)

    def remember(tensors):  # so that a recompile beyond the bounds says what changed
        for kind in ("forward", "inference"):
            _last_inputs[(frame, kind)] = _describe(tensors)

    return dynamic.Bucketed(gm, symbols, compile_bucket, exact, remember)


tpu_backend.reset = _last_inputs.clear  # torch._dynamo.reset(): frame ids start again


def _with_options(graph, options):
    """XLA compile option overrides for the programs this graph compiles."""
    from torch_tpu import _C
    overrides = sorted((str(k), v) for k, v in options.items())
    for name, value in overrides:
        if not isinstance(value, (bool, int, float, str)):
            raise TypeError(f"torch.compile option {name!r} for backend \"tpu\" must be a bool, int, float "
                            f"or str (an XLA compile option), got {type(value).__name__}")

    def call(args):
        _C.set_compile_overrides(overrides)
        try:
            return graph(args)
        finally:
            _C.set_compile_overrides([])

    call._boxed_call = True
    return call


_registered = []


def register():
    """Registers the "tpu" Dynamo backend (also found through the torch_dynamo_backends entry point)
    and the tpu DeviceInterface. Called when Dynamo is imported, so `import torch` stays fast."""
    if _registered:
        return
    _registered.append(True)
    from torch._dynamo.backends.registry import _BACKENDS, register_backend
    from torch._dynamo import device_interface as interfaces

    if "tpu" not in _BACKENDS:  # (the entry point registers it by name when Dynamo looks it up)
        register_backend(name="tpu")(tpu_backend)

    class TorchTpuInterface(interfaces.DeviceInterface):
        """What Dynamo needs to know of the tpu device module (replacing PyTorch's placeholder "tpu"
        interface for torch_xla, which has no device functions)."""
        current_device = staticmethod(torch.tpu.current_device)
        set_device = staticmethod(torch.tpu.set_device)
        device_count = staticmethod(torch.tpu.device_count)
        is_available = staticmethod(torch.tpu.is_available)
        synchronize = staticmethod(torch.tpu.synchronize)

        @staticmethod
        def is_bf16_supported(including_emulation=False):
            return True

    interfaces.get_interface_for_device("cpu")  # PyTorch's own registrations first, then ours
    interfaces.register_interface_for_device("tpu", TorchTpuInterface)
