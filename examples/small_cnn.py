"""A small CNN trained on a synthetic, deterministic 10-class image dataset.

An end-to-end workload for a new device backend using common vision ops:
conv2d, batch_norm, relu, max_pool2d, adaptive_avg_pool2d, linear,
cross_entropy and SGD with momentum. The data is generated on the CPU from
a seeded torch.Generator, so no download is needed.

    python examples/small_cnn.py --device cpu --steps 50
    python examples/small_cnn.py --device tpu --steps 50 --report
"""

import argparse
import sys
import time

import torch
import torch.nn as nn
import torch.nn.functional as F

NUM_CLASSES = 10
SIZE = 16


def patterns(size=SIZE):
    """Ten clean 1 x size x size class templates with values in {-1, 1}."""
    r = torch.arange(size, dtype=torch.float32)
    yy, xx = torch.meshgrid(r, r, indexing="ij")
    c = (size - 1) / 2
    dist = ((yy - c) ** 2 + (xx - c) ** 2).sqrt()
    masks = [
        (yy.long() % 4) < 2,                                # horizontal stripes
        (xx.long() % 4) < 2,                                # vertical stripes
        ((xx + yy).long() % 6) < 3,                         # diagonal stripes
        ((xx - yy).long() % 6) < 3,                         # anti-diagonal stripes
        ((xx.long() // 4 + yy.long() // 4) % 2) == 0,       # checkerboard
        (dist > 3) & (dist < 6),                            # ring
        dist < 4,                                           # disc
        ((xx - c).abs() < 2) | ((yy - c).abs() < 2),        # plus
        ((xx - yy).abs() < 2) | ((xx + yy - 2 * c).abs() < 2),  # X
        (xx < c) & (yy < c) | (xx > c) & (yy > c),          # quadrants
    ]
    imgs = torch.stack([m.float() * 2 - 1 for m in masks])
    return imgs.unsqueeze(1)  # (10, 1, size, size)


def make_batch(batch_size, generator, noise=0.8, max_shift=3):
    """Random labels; templates shifted by up to max_shift pixels, plus noise."""
    protos = patterns()
    labels = torch.randint(0, NUM_CLASSES, (batch_size,), generator=generator)
    shifts = torch.randint(-max_shift, max_shift + 1, (batch_size, 2), generator=generator)
    imgs = torch.stack([
        torch.roll(protos[int(lbl)], shifts=(int(dy), int(dx)), dims=(1, 2))
        for lbl, (dy, dx) in zip(labels, shifts)
    ])
    imgs = imgs + noise * torch.randn(imgs.shape, generator=generator)
    return imgs, labels


def batches(batch_size, seed):
    """Endless deterministic stream of (images float32, labels int64) on the CPU."""
    g = torch.Generator().manual_seed(seed)
    while True:
        yield make_batch(batch_size, g)


class SmallCNN(nn.Module):
    def __init__(self, num_classes=NUM_CLASSES, width=16):
        super().__init__()
        w = width
        self.conv1 = nn.Conv2d(1, w, 3, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(w)
        self.conv2 = nn.Conv2d(w, 2 * w, 3, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(2 * w)
        self.conv3 = nn.Conv2d(2 * w, 4 * w, 3, padding=1, bias=False)
        self.bn3 = nn.BatchNorm2d(4 * w)
        self.fc = nn.Linear(4 * w, num_classes)

    def forward(self, x):
        x = F.max_pool2d(F.relu(self.bn1(self.conv1(x))), 2)  # 16 -> 8
        x = F.max_pool2d(F.relu(self.bn2(self.conv2(x))), 2)  # 8 -> 4
        x = F.relu(self.bn3(self.conv3(x)))
        x = F.adaptive_avg_pool2d(x, 1).flatten(1)
        return self.fc(x)


def num_params(model):
    return sum(p.numel() for p in model.parameters())


def maybe_import_backend(device):
    """Importing torch_tpu registers the 'tpu' device; only needed for it."""
    # Parse the string by hand: torch.device("tpu") fails until torch_tpu is imported.
    kind = device.type if isinstance(device, torch.device) else str(device).split(":")[0]
    if kind == "tpu":
        import torch_tpu  # noqa: F401


class Progress:
    """One-line progress bar redrawn in place with '\\r' (no tqdm)."""

    def __init__(self, total, unit="img", width=30, stream=None):
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


def train(device, steps, seed=0, batch_size=32, lr=0.05, momentum=0.9, model=None, progress=False):
    """Train for `steps` steps on `device` and return the per-step losses (floats).

    The model is built on CPU under torch.manual_seed(seed) so the initial
    weights do not depend on the device; batches are generated on the CPU
    from a generator seeded with `seed` and moved to the device each step.
    """
    maybe_import_backend(device)
    device = torch.device(device)
    if model is None:
        torch.manual_seed(seed)
        model = SmallCNN()
    model = model.to(device)
    model.train()
    opt = torch.optim.SGD(model.parameters(), lr=lr, momentum=momentum, weight_decay=5e-4)
    data = batches(batch_size, seed)
    bar = Progress(steps) if progress else None
    losses = []
    for step in range(1, steps + 1):
        x, y = next(data)
        x, y = x.to(device), y.to(device)
        loss = F.cross_entropy(model(x), y)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        losses.append(loss.item())
        if bar:
            bar.update(step, losses[-1], x.shape[0])
    if bar:
        bar.close()
    return losses


@torch.no_grad()
def evaluate(model, device, n=512, seed=12345):
    """Accuracy on a fresh deterministic batch (eval-mode batch norm)."""
    model.eval()
    x, y = make_batch(n, torch.Generator().manual_seed(seed))
    pred = model(x.to(device)).argmax(1).cpu()
    model.train()
    return (pred == y).float().mean().item()


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--device", default="cpu")
    p.add_argument("--steps", type=int, default=50)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--batch-size", type=int, default=32)
    p.add_argument("--lr", type=float, default=0.05)
    p.add_argument("--threads", type=int, default=0, help="torch.set_num_threads (0: leave as is)")
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    p.add_argument("--report", action="store_true", help="print torch_tpu.metrics.report() at the end")
    args = p.parse_args(argv)
    if args.threads:
        torch.set_num_threads(args.threads)

    torch.manual_seed(args.seed)
    model = SmallCNN()
    print(f"SmallCNN: {num_params(model):,} parameters, device {args.device}, "
          f"{args.steps} steps of {args.batch_size} images")
    t0 = time.perf_counter()
    losses = train(args.device, args.steps, seed=args.seed, batch_size=args.batch_size,
                   lr=args.lr, model=model, progress=not args.no_progress)
    elapsed = time.perf_counter() - t0
    final = sum(losses[-5:]) / len(losses[-5:])
    acc = evaluate(model, model.fc.weight.device)
    print(f"first loss {losses[0]:.4f}, final loss (mean of last {len(losses[-5:])}) {final:.4f}, "
          f"eval accuracy {acc:.1%}, {elapsed / len(losses):.4f} s/step")

    if args.report:
        import torch_tpu

        torch_tpu.metrics.report()

    if not final < losses[0]:
        print("FAIL: the loss did not go down", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
