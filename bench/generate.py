"""Programs compiled per generated token: a tiny Llama (Transformers) decoding greedily on tpu with the
default dynamic cache and with a static cache (the decode step compiled by Transformers with
torch.compile(backend="tpu"), and eager with disable_compile=True), 4 and then 16 new tokens, each count in a fresh process
without the persistent compile cache. Prints figures; asserts nothing."""
import os
import subprocess
import sys

CHILD = """
import sys, warnings
import torch, torch_tpu, transformers
warnings.filterwarnings("ignore")
torch.manual_seed(0)
cfg = transformers.LlamaConfig(vocab_size=100, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                               num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64)
model = transformers.LlamaForCausalLM(cfg).to("tpu")
ids = torch.randint(0, 100, (1, 5)).to("tpu")
kw = {"static": {"cache_implementation": "static"},
      "static-eager": {"cache_implementation": "static", "disable_compile": True}}.get(sys.argv[1], {})
n = int(sys.argv[2])
model.generate(ids, max_new_tokens=n, min_new_tokens=n, do_sample=False, **kw)
print(int(torch_tpu.metrics.counters().get("compiles", 0)))
"""


def compiles(cache, tokens):
    env = dict(os.environ, TORCH_TPU_CACHE="0")
    out = subprocess.run([sys.executable, "-c", CHILD, cache, str(tokens)], capture_output=True, text=True,
                         env=env, check=True)
    return int(out.stdout.split()[-1])


def main():
    print("tiny Llama greedy decoding on tpu: programs compiled (fresh process, no persistent cache)")
    for cache in ("dynamic", "static", "static-eager"):
        short, long = compiles(cache, 4), compiles(cache, 16)
        print(f"  {cache:<12} cache: 4 tokens {short:4d}, 16 tokens {long:4d}, "
              f"{(long - short) / 12:.1f} per additional token (goal: 0 after the first two)")


if __name__ == "__main__":
    main()
