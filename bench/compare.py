"""One Llama-style train step (examples/tiny_llama.py: 4 layers, dim 256, batch 8 x 128, AdamW) in every
way this machine can run it: PyTorch CPU eager, Inductor on CPU, JAX `jit` on XLA CPU (run in a separate
environment, `make compare` installs it), and tpu Strict, Fuse and compiled (torch.compile(backend="tpu")).
Prints the steady-state step time, tokens/s, the first step's time (compiles included) and ratios.
Goals (printed, never asserted): compiled >= 1.0x JAX and >= 1.0x Inductor.

    python bench/compare.py [--steps N] [--jax-python PATH] [--options k=v,...]
"""
import argparse
import json
import os
import subprocess
import sys
import time

import torch
import torch.nn.functional as F

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "examples"))
import tiny_llama  # noqa: E402

BATCH, SEQ = 8, 128


def torch_step_times(device, steps, backend=None, mode=None, options=None):
    import torch_tpu
    torch._dynamo.reset()
    torch.manual_seed(0)
    cfg = tiny_llama.Config()
    model = tiny_llama.TinyLlama(cfg).to(device)
    compiled = backend is not None
    # a compiled step keeps AdamW's step counters on the device (capturable), so the update is one graph too
    opt = torch.optim.AdamW(model.parameters(), lr=3e-3, weight_decay=0.1, capturable=compiled and device != "cpu")
    kwargs = {"options": options} if options else {}
    forward = torch.compile(model, backend=backend, **kwargs) if compiled else model
    update = torch.compile(opt.step, backend=backend, **kwargs) if compiled else opt.step
    gen = torch.Generator().manual_seed(0)
    x = torch.randint(0, cfg.vocab_size, (BATCH, SEQ), generator=gen).to(device)
    y = torch.randint(0, cfg.vocab_size, (BATCH, SEQ), generator=gen).to(device)
    times = []
    with (torch_tpu.execution_mode(mode) if mode else _nothing()):
        for _ in range(steps + 2):
            t = time.perf_counter()
            loss = F.cross_entropy(forward(x).view(-1, cfg.vocab_size), y.view(-1))
            opt.zero_grad(set_to_none=True)
            loss.backward()
            update()
            loss.item()
            if device != "cpu":
                torch.tpu.synchronize()
            times.append(time.perf_counter() - t)
    return times


class _nothing:
    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


JAX_STEP = r'''
import json, sys, time
import jax, jax.numpy as jnp
V, D, L, H, FF, S, B = 256, 256, 4, 4, 688, 128, 8
HD = D // H
key = jax.random.PRNGKey(0)
def normal(k, shape, std=0.02): return std * jax.random.normal(k, shape, jnp.float32)
keys = iter(jax.random.split(key, 64))
params = {"emb": normal(next(keys), (V, D)), "head": normal(next(keys), (D, V)), "norm": jnp.ones(D), "layers": [
    {"n1": jnp.ones(D), "n2": jnp.ones(D), "wq": normal(next(keys), (D, D)), "wk": normal(next(keys), (D, D)),
     "wv": normal(next(keys), (D, D)), "wo": normal(next(keys), (D, D)), "w1": normal(next(keys), (D, FF)),
     "w3": normal(next(keys), (D, FF)), "w2": normal(next(keys), (FF, D))} for _ in range(L)]}
inv = 1.0 / (10000.0 ** (jnp.arange(0, HD, 2) / HD))
ang = jnp.outer(jnp.arange(S), inv); ang = jnp.concatenate([ang, ang], -1)
cos, sin = jnp.cos(ang), jnp.sin(ang)
def rms(x, w): return x * jax.lax.rsqrt(jnp.mean(x * x, -1, keepdims=True) + 1e-5) * w
def rope(x):
    h = x.shape[-1] // 2
    return x * cos + jnp.concatenate([-x[..., h:], x[..., :h]], -1) * sin
def forward(p, idx):
    x = p["emb"][idx]
    mask = jnp.tril(jnp.ones((S, S), bool))
    for l in p["layers"]:
        h = rms(x, l["n1"])
        q, k, v = [(h @ l[w]).reshape(B, S, H, HD).transpose(0, 2, 1, 3) for w in ("wq", "wk", "wv")]
        q, k = rope(q), rope(k)
        a = jnp.where(mask, q @ k.transpose(0, 1, 3, 2) / jnp.sqrt(HD), -jnp.inf)
        o = (jax.nn.softmax(a, -1) @ v).transpose(0, 2, 1, 3).reshape(B, S, D)
        x = x + o @ l["wo"]
        h = rms(x, l["n2"])
        x = x + (jax.nn.silu(h @ l["w1"]) * (h @ l["w3"])) @ l["w2"]
    return rms(x, p["norm"]) @ p["head"]
def loss_fn(p, x, y):
    logits = forward(p, x)
    return -jnp.mean(jnp.take_along_axis(jax.nn.log_softmax(logits, -1), y[..., None], -1))
def adamw(p, g, m, v, t, lr=3e-3, b1=0.9, b2=0.999, eps=1e-8, wd=0.1):
    m = jax.tree.map(lambda m, g: b1 * m + (1 - b1) * g, m, g)
    v = jax.tree.map(lambda v, g: b2 * v + (1 - b2) * g * g, v, g)
    def upd(p, m, v):
        return p * (1 - lr * wd) - lr * (m / (1 - b1 ** t)) / (jnp.sqrt(v / (1 - b2 ** t)) + eps)
    return jax.tree.map(upd, p, m, v), m, v
@jax.jit
def step(p, m, v, t, x, y):
    loss, g = jax.value_and_grad(loss_fn)(p, x, y)
    p, m, v = adamw(p, g, m, v, t)
    return p, m, v, loss
m = jax.tree.map(jnp.zeros_like, params); v = jax.tree.map(jnp.zeros_like, params)
x = jax.random.randint(next(keys), (B, S), 0, V); y = jax.random.randint(next(keys), (B, S), 0, V)
times = []
for i in range(int(sys.argv[1]) + 2):
    t0 = time.perf_counter()
    params, m, v, loss = step(params, m, v, float(i + 1), x, y)
    loss.block_until_ready()
    times.append(time.perf_counter() - t0)
print(json.dumps({"times": times, "version": jax.__version__}))
'''


def jax_step_times(python, steps):
    if not python or not os.path.exists(python):
        return None, "no JAX environment (make compare installs one in .venv-bench)"
    proc = subprocess.run([python, "-c", JAX_STEP, str(steps)], capture_output=True, text=True, timeout=1800)
    if proc.returncode != 0:
        return None, proc.stderr.strip().splitlines()[-1] if proc.stderr.strip() else "failed"
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    return out["times"], f"jax {out['version']}"


def parse_options(text):
    options = {}
    for item in filter(None, text.split(",")):
        k, v = item.split("=", 1)
        options[k] = {"true": True, "false": False}.get(v.lower(), int(v) if v.lstrip("-").isdigit() else v)
    return options or None


def summarize(times):
    steady = sorted(times[2:])
    return steady[len(steady) // 2], times[0]


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--steps", type=int, default=5, help="timed steps after two warm-up steps (median shown)")
    p.add_argument("--jax-python", default=os.path.join(ROOT, ".venv-bench", "bin", "python"))
    p.add_argument("--only", default="", help="comma-separated subset of rows")
    p.add_argument("--options", default="", help="XLA options for the compiled row, e.g. xla_cpu_use_onednn=true")
    a = p.parse_args(argv)
    torch.set_num_threads(os.cpu_count())
    import torch_tpu  # noqa: F401
    rows = {
        "PyTorch CPU eager": lambda: torch_step_times("cpu", a.steps),
        "Inductor CPU": lambda: torch_step_times("cpu", a.steps, backend="inductor"),
        "JAX jit (XLA CPU)": lambda: jax_step_times(a.jax_python, a.steps),
        "tpu Strict": lambda: torch_step_times("tpu", a.steps, mode="strict"),
        "tpu Fuse": lambda: torch_step_times("tpu", a.steps, mode="fuse"),
        "tpu compiled": lambda: torch_step_times("tpu", a.steps, backend="tpu", options=parse_options(a.options)),
    }
    only = [r.strip() for r in a.only.split(",") if r.strip()]
    results = {}
    for name, fn in rows.items():
        if only and name not in only:
            continue
        out = fn()
        note = ""
        if isinstance(out, tuple):
            out, note = out
        results[name] = (summarize(out) if out else None, note)
        print(f"  ran {name}" + (f" ({note})" if note else ""), file=sys.stderr)
    tokens = BATCH * SEQ
    base = {k: results[k][0][0] for k in ("PyTorch CPU eager", "Inductor CPU", "JAX jit (XLA CPU)")
            if k in results and results[k][0]}
    print(f"Train step of examples/tiny_llama.py (4 layers, dim 256, batch {BATCH}x{SEQ}, AdamW), "
          f"median of {a.steps} steps after 2 warm-up steps, torch {torch.__version__}, {os.cpu_count()} CPUs")
    head = "| run | step (s) | tokens/s | first step (s) |" + "".join(f" vs {k} |" for k in base)
    print(head)
    print("|---|---|---|---|" + "---|" * len(base))
    for name, (summary, note) in results.items():
        if summary is None:
            print(f"| {name} | - | - | - |" + " - |" * len(base) + f" {note}")
            continue
        step, first = summary
        ratios = "".join(f" {b / step:.2f}x |" for b in base.values())
        print(f"| {name} | {step:.3f} | {tokens / step:,.0f} | {first:.2f} |{ratios}")
    print("Ratios above 1.0x are faster than the baseline. Goals: tpu compiled >= 1.0x JAX jit and >= 1.0x Inductor CPU.")


if __name__ == "__main__":
    main()
