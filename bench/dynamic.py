"""Bounded dynamism: a tiny Llama (Transformers) forward+backward compiled with
torch.compile(backend="tpu") over 64 random sequence lengths in 1..512, with the sequence dim marked
dynamic up to 512 (torch_tpu.mark_dynamic: at most 8 buckets) vs exact shapes (one program per length).
Each mode runs in a fresh process without the persistent compile cache. Prints figures; asserts nothing."""
import os
import subprocess
import sys

CHILD = """
import random, sys, time, warnings
import torch, torch_tpu, transformers
warnings.filterwarnings("ignore")
torch.manual_seed(0)
cfg = transformers.LlamaConfig(vocab_size=128, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                               num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=512)
model = torch.compile(transformers.LlamaForCausalLM(cfg).to("tpu"), backend="tpu")
lengths = random.Random(0).choices(range(1, 513), k=64)
start = time.perf_counter()
for s in lengths:
    ids = torch.randint(0, 128, (2, s)).to("tpu")
    if sys.argv[1] == "bounded":
        torch_tpu.mark_dynamic(ids, 1, max=512)
    model(input_ids=ids, labels=ids, use_cache=False).loss.backward()
    model.zero_grad()
torch.tpu.synchronize()
graphs = sum(e["compiled"] for e in torch_tpu.compiler.compile_events())
print(len(set(lengths)), graphs, int(torch_tpu.metrics.counters().get("compiles", 0)), f"{time.perf_counter() - start:.2f}")
"""


def main():
    print("tiny Llama forward+backward, 64 random lengths in 1..512 (batch 2), fresh process, no persistent cache")
    env = dict(os.environ, TORCH_TPU_CACHE="0")
    seconds = {}
    for mode in ("exact", "bounded"):
        out = subprocess.run([sys.executable, "-c", CHILD, mode], capture_output=True, text=True, env=env,
                             check=True).stdout.split()
        lengths, graphs, programs, seconds[mode] = int(out[0]), int(out[1]), int(out[2]), float(out[3])
        print(f"  {mode:<8} shapes: {graphs:3d} compiled graphs ({programs} programs in all, {lengths} distinct "
              f"lengths), {seconds[mode]:6.1f} s")
    print(f"  bounded dynamism takes {seconds['exact'] / seconds['bounded']:.1f}x less time (goal: >= 4x, <= 8 "
          "buckets: forward and backward programs per bucket)")


if __name__ == "__main__":
    main()
