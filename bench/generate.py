"""Programs compiled per generated token: a tiny Llama (Transformers) decoding 16 tokens greedily on tpu
with the default dynamic cache and with a static cache (the decode step compiled by Transformers with
torch.compile(backend="tpu"), and eager with disable_compile=True), each in a fresh process without the
persistent compile cache. The count is read at every decoding step. Prints figures; asserts nothing."""
import os
import subprocess
import sys

CHILD = """
import sys, time, warnings
import torch, torch_tpu, transformers
warnings.filterwarnings("ignore")
torch.manual_seed(0)
cfg = transformers.LlamaConfig(vocab_size=100, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                               num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64)
model = transformers.LlamaForCausalLM(cfg).to("tpu")
ids = torch.randint(0, 100, (1, 5)).to("tpu")
kw = {"static": {"cache_implementation": "static"},
      "static-eager": {"cache_implementation": "static", "disable_compile": True}}.get(sys.argv[1], {})
seen = []
class Count(transformers.LogitsProcessor):
    def __call__(self, input_ids, scores):
        seen.append(int(torch_tpu.metrics.counters().get("compiles", 0)))
        return scores
start = time.perf_counter()
model.generate(ids, max_new_tokens=16, min_new_tokens=16, do_sample=False, logits_processor=[Count()], **kw)
print(*seen, f"{time.perf_counter() - start:.2f}")
"""


def main():
    print("tiny Llama, 16 greedy tokens on tpu: programs compiled (fresh process, no persistent cache)")
    env = dict(os.environ, TORCH_TPU_CACHE="0")
    for cache in ("dynamic", "static", "static-eager"):
        out = subprocess.run([sys.executable, "-c", CHILD, cache], capture_output=True, text=True, env=env,
                             check=True).stdout.split()
        seen, seconds = [int(v) for v in out[:-1]], float(out[-1])
        print(f"  {cache:<12} cache: {seen[0]:4d} by the first token, {seen[1] - seen[0]:3d} for the second, "
              f"{(seen[-1] - seen[1]) / (len(seen) - 2):.1f} per later token (goal: 0); {seconds:.1f} s cold")


if __name__ == "__main__":
    main()
