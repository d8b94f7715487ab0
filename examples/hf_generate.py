"""Greedy generation with a Hugging Face Llama on tpu, loaded with from_pretrained(device_map="tpu").

A small Llama-family model is built from a config (random weights, no download), saved with
save_pretrained, loaded back onto tpu, and decodes with Transformers' static KV cache
(cache_implementation="static": the decode step is compiled with torch.compile(backend="tpu")).
The tokens must equal CPU PyTorch's; exits with status 1 if they do not.

    python examples/hf_generate.py
    python examples/hf_generate.py --new-tokens 32 --report
"""
import argparse
import sys
import tempfile
import time
import warnings

import torch
import transformers


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--new-tokens", type=int, default=16)
    p.add_argument("--prompt-len", type=int, default=8)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--report", action="store_true", help="print torch_tpu.metrics.report()")
    args = p.parse_args()
    warnings.filterwarnings("ignore")
    transformers.logging.set_verbosity_error()
    transformers.utils.logging.disable_progress_bar()

    torch.manual_seed(args.seed)
    cfg = transformers.LlamaConfig(vocab_size=1000, hidden_size=128, intermediate_size=256, num_hidden_layers=2,
                                   num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=256,
                                   bos_token_id=1, eos_token_id=2, pad_token_id=0,
                                   initializer_range=0.2)  # larger random weights: varied tokens
    reference = transformers.LlamaForCausalLM(cfg).eval()
    prompt = torch.randint(3, cfg.vocab_size, (1, args.prompt_len))
    # min_new_tokens: a random model may emit its end-of-sequence id early; decode the full length
    gen = {"max_new_tokens": args.new_tokens, "min_new_tokens": args.new_tokens, "do_sample": False,
           "cache_implementation": "static"}

    with tempfile.TemporaryDirectory() as path:
        reference.save_pretrained(path)
        t0 = time.time()
        model = transformers.LlamaForCausalLM.from_pretrained(path, device_map="tpu")
        print(f"loaded {sum(p.numel() for p in model.parameters()) / 1e6:.2f}M parameters onto "
              f"{next(model.parameters()).device} in {time.time() - t0:.1f} s")

    ids = prompt.to("tpu")
    t0 = time.time()
    first = model.generate(ids, attention_mask=torch.ones_like(ids), **gen).cpu()  # compiles
    warm = time.time() - t0
    t0 = time.time()
    tokens = model.generate(ids, attention_mask=torch.ones_like(ids), **gen).cpu()  # replays
    seconds = time.time() - t0
    print(f"first generate (compiling): {warm:.1f} s; second: {seconds:.2f} s, "
          f"{args.new_tokens / seconds:.1f} tokens/s")

    reference.generate(prompt, attention_mask=torch.ones_like(prompt), **gen)  # warm-up, as for tpu
    t0 = time.time()
    expected = reference.generate(prompt, attention_mask=torch.ones_like(prompt), **gen)
    print(f"CPU PyTorch (eager, static cache): {args.new_tokens / (time.time() - t0):.1f} tokens/s")
    print("tpu:", tokens[0, args.prompt_len:].tolist())
    print("cpu:", expected[0, args.prompt_len:].tolist())
    if args.report:
        import torch_tpu
        torch_tpu.metrics.report()
    if not (torch.equal(tokens, expected) and torch.equal(first, expected)):
        print("FAIL: tpu tokens differ from CPU's")
        return 1
    print("OK: tpu tokens equal CPU's")
    return 0


if __name__ == "__main__":
    sys.exit(main())
