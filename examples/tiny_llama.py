"""A tiny Llama-style decoder trained on a byte-level corpus, in plain PyTorch.

It is meant as an end-to-end workload for a new device backend, so it sticks
to common ops: embedding, linear, mean/rsqrt (RMSNorm), cat/outer (rotary
tables), scaled_dot_product_attention, silu, cross_entropy and AdamW.

    python examples/tiny_llama.py --device cpu --steps 50
    python examples/tiny_llama.py --device tpu --steps 50 --report
"""

import argparse
import math
import os
import sys
import time
from dataclasses import dataclass

import torch
import torch.nn as nn
import torch.nn.functional as F

CORPUS_PATH = os.path.join(os.path.dirname(os.path.abspath(__file__)), "data", "corpus.txt")


@dataclass
class Config:
    vocab_size: int = 256  # byte-level tokenizer
    dim: int = 256
    n_layers: int = 4
    n_heads: int = 4
    hidden_dim: int = 688
    seq_len: int = 128
    norm_eps: float = 1e-5
    rope_theta: float = 10000.0


class RMSNorm(nn.Module):
    def __init__(self, dim, eps=1e-5):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(dim))

    def forward(self, x):
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps) * self.weight


def rope_tables(head_dim, seq_len, theta=10000.0):
    """Real-valued cos/sin tables of shape (seq_len, head_dim)."""
    inv_freq = 1.0 / (theta ** (torch.arange(0, head_dim, 2, dtype=torch.float32) / head_dim))
    t = torch.arange(seq_len, dtype=torch.float32)
    freqs = torch.outer(t, inv_freq)  # (seq_len, head_dim / 2)
    emb = torch.cat((freqs, freqs), dim=-1)  # (seq_len, head_dim)
    return emb.cos(), emb.sin()


def rotate_half(x):
    half = x.shape[-1] // 2
    return torch.cat((-x[..., half:], x[..., :half]), dim=-1)


def apply_rope(x, cos, sin):
    # x: (batch, heads, seq, head_dim); cos/sin: (seq, head_dim)
    return x * cos + rotate_half(x) * sin


class Attention(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        assert cfg.dim % cfg.n_heads == 0
        self.n_heads = cfg.n_heads
        self.head_dim = cfg.dim // cfg.n_heads
        self.wq = nn.Linear(cfg.dim, cfg.dim, bias=False)
        self.wk = nn.Linear(cfg.dim, cfg.dim, bias=False)
        self.wv = nn.Linear(cfg.dim, cfg.dim, bias=False)
        self.wo = nn.Linear(cfg.dim, cfg.dim, bias=False)

    def forward(self, x, cos, sin):
        b, t, d = x.shape
        q = self.wq(x).view(b, t, self.n_heads, self.head_dim).transpose(1, 2)
        k = self.wk(x).view(b, t, self.n_heads, self.head_dim).transpose(1, 2)
        v = self.wv(x).view(b, t, self.n_heads, self.head_dim).transpose(1, 2)
        q = apply_rope(q, cos, sin)
        k = apply_rope(k, cos, sin)
        out = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        out = out.transpose(1, 2).reshape(b, t, d)
        return self.wo(out)


class FeedForward(nn.Module):
    """SwiGLU MLP: w2(silu(w1 x) * w3 x)."""

    def __init__(self, cfg):
        super().__init__()
        self.w1 = nn.Linear(cfg.dim, cfg.hidden_dim, bias=False)
        self.w3 = nn.Linear(cfg.dim, cfg.hidden_dim, bias=False)
        self.w2 = nn.Linear(cfg.hidden_dim, cfg.dim, bias=False)

    def forward(self, x):
        return self.w2(F.silu(self.w1(x)) * self.w3(x))


class Block(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        self.attn_norm = RMSNorm(cfg.dim, cfg.norm_eps)
        self.attn = Attention(cfg)
        self.ffn_norm = RMSNorm(cfg.dim, cfg.norm_eps)
        self.ffn = FeedForward(cfg)

    def forward(self, x, cos, sin):
        x = x + self.attn(self.attn_norm(x), cos, sin)
        return x + self.ffn(self.ffn_norm(x))


class TinyLlama(nn.Module):
    def __init__(self, cfg=None):
        super().__init__()
        self.cfg = cfg = cfg or Config()
        self.tok_emb = nn.Embedding(cfg.vocab_size, cfg.dim)
        self.layers = nn.ModuleList(Block(cfg) for _ in range(cfg.n_layers))
        self.norm = RMSNorm(cfg.dim, cfg.norm_eps)
        self.lm_head = nn.Linear(cfg.dim, cfg.vocab_size, bias=False)
        cos, sin = rope_tables(cfg.dim // cfg.n_heads, cfg.seq_len, cfg.rope_theta)
        # Non-persistent buffers: they follow .to(device) but stay out of state_dict.
        self.register_buffer("rope_cos", cos, persistent=False)
        self.register_buffer("rope_sin", sin, persistent=False)
        self._init_weights()

    def _init_weights(self):
        # GPT-2 style: N(0, 0.02), residual output projections scaled down by depth.
        for name, p in self.named_parameters():
            if p.dim() == 2:
                std = 0.02
                if name.endswith("wo.weight") or name.endswith("w2.weight"):
                    std = 0.02 / math.sqrt(2 * self.cfg.n_layers)
                nn.init.normal_(p, mean=0.0, std=std)

    def forward(self, idx):
        t = idx.shape[1]
        assert t <= self.cfg.seq_len, f"sequence length {t} > {self.cfg.seq_len}"
        x = self.tok_emb(idx)
        cos, sin = self.rope_cos[:t], self.rope_sin[:t]
        for layer in self.layers:
            x = layer(x, cos, sin)
        return self.lm_head(self.norm(x))


def num_params(model):
    return sum(p.numel() for p in model.parameters())


def load_corpus(path=CORPUS_PATH):
    """Byte-level tokenization: each byte of the file is one token (0..255)."""
    with open(path, "rb") as f:
        data = f.read()
    return torch.frombuffer(bytearray(data), dtype=torch.uint8).to(torch.int64)


def batches(tokens, batch_size, seq_len, seed):
    """Endless deterministic stream of (x, y) CPU int64 batches of random windows."""
    g = torch.Generator().manual_seed(seed)
    window = torch.arange(seq_len + 1)
    high = tokens.numel() - seq_len - 1
    while True:
        starts = torch.randint(0, high, (batch_size,), generator=g)
        chunk = tokens[starts[:, None] + window]  # (batch, seq_len + 1)
        yield chunk[:, :-1].contiguous(), chunk[:, 1:].contiguous()


def maybe_import_backend(device):
    """Importing torch_tpu registers the 'tpu' device; only needed for it."""
    # Parse the string by hand: torch.device("tpu") fails until torch_tpu is imported.
    kind = device.type if isinstance(device, torch.device) else str(device).split(":")[0]
    if kind == "tpu":
        import torch_tpu  # noqa: F401


class Progress:
    """One-line progress bar redrawn in place with '\\r' (no tqdm)."""

    def __init__(self, total, unit="tok", width=30, stream=None):
        self.total, self.unit, self.width = total, unit, width
        self.stream = stream or sys.stdout
        self.start = time.perf_counter()
        self.count = 0

    def update(self, step, loss, n):
        self.count += n
        elapsed = max(time.perf_counter() - self.start, 1e-9)
        filled = int(self.width * step / self.total)
        bar = "#" * filled + "-" * (self.width - filled)
        self.stream.write(
            f"\r{step:>{len(str(self.total))}}/{self.total} [{bar}] "
            f"loss {loss:.4f} {self.count / elapsed:,.0f} {self.unit}/s"
        )
        self.stream.flush()

    def close(self):
        self.stream.write("\n")
        self.stream.flush()


def train(device, steps, seed=0, batch_size=8, lr=3e-3, config=None, model=None, progress=False, compile=None):
    """Train for `steps` steps on `device` and return the per-step losses (floats). `compile`: a
    torch.compile backend name for the model's forward and backward (e.g. "tpu").

    The model is built on CPU under torch.manual_seed(seed), so its initial
    weights are the same whatever the device; batches come from a CPU
    generator seeded with `seed` and are moved to the device each step.
    """
    maybe_import_backend(device)
    device = torch.device(device)
    if model is None:
        torch.manual_seed(seed)
        model = TinyLlama(config or Config())
    cfg = model.cfg
    model = model.to(device)
    model.train()
    opt = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=0.1)
    forward = torch.compile(model, backend=compile) if compile else model
    data = batches(load_corpus(), batch_size, cfg.seq_len, seed)
    bar = Progress(steps) if progress else None
    losses = []
    for step in range(1, steps + 1):
        x, y = next(data)
        x, y = x.to(device), y.to(device)
        logits = forward(x)
        loss = F.cross_entropy(logits.view(-1, cfg.vocab_size), y.view(-1))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        losses.append(loss.item())
        if bar:
            bar.update(step, losses[-1], x.numel())
    if bar:
        bar.close()
    return losses


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--device", default="cpu")
    p.add_argument("--steps", type=int, default=50)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--batch-size", type=int, default=8)
    p.add_argument("--lr", type=float, default=3e-3)
    p.add_argument("--threads", type=int, default=0, help="torch.set_num_threads (0: leave as is)")
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    p.add_argument("--report", action="store_true", help="print torch_tpu.metrics.report() at the end")
    args = p.parse_args(argv)
    if args.threads:
        torch.set_num_threads(args.threads)

    cfg = Config()
    torch.manual_seed(args.seed)
    model = TinyLlama(cfg)
    print(f"TinyLlama: {num_params(model):,} parameters, device {args.device}, "
          f"{args.steps} steps of {args.batch_size}x{cfg.seq_len} tokens")
    t0 = time.perf_counter()
    losses = train(args.device, args.steps, seed=args.seed, batch_size=args.batch_size,
                   lr=args.lr, model=model, progress=not args.no_progress)
    elapsed = time.perf_counter() - t0
    final = sum(losses[-5:]) / len(losses[-5:])
    print(f"first loss {losses[0]:.4f}, final loss (mean of last {len(losses[-5:])}) {final:.4f}, "
          f"{elapsed / len(losses):.3f} s/step")

    if args.report:
        import torch_tpu

        torch_tpu.metrics.report()

    if not final < losses[0]:
        print("FAIL: the loss did not go down", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
