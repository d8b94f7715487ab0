"""Hugging Face Transformers models on tpu against CPU (tiny random configs, built offline): forward,
loss and every gradient. GPT-2 ties its embedding and LM head; Mixtral routes with histc on int32;
wav2vec2 uses weight norm."""
import copy
import warnings

import pytest
import torch

import torch_tpu

transformers = pytest.importorskip("transformers")


def gpt2():
    cfg = transformers.GPT2Config(vocab_size=100, n_positions=32, n_embd=32, n_layer=2, n_head=2,
                                  bos_token_id=0, eos_token_id=0)
    ids = torch.randint(0, 100, (2, 12))
    return transformers.GPT2LMHeadModel(cfg), {"input_ids": ids, "labels": ids}, lambda out: out.loss


def mixtral():
    cfg = transformers.MixtralConfig(vocab_size=100, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                                     num_attention_heads=4, num_key_value_heads=2, num_local_experts=4,
                                     num_experts_per_tok=2, max_position_embeddings=64)
    ids = torch.randint(0, 100, (2, 12))
    return transformers.MixtralForCausalLM(cfg), {"input_ids": ids, "labels": ids}, lambda out: out.loss


def wav2vec2():
    cfg = transformers.Wav2Vec2Config(hidden_size=32, num_hidden_layers=2, num_attention_heads=2, intermediate_size=64,
                                      conv_dim=(16, 16), conv_stride=(5, 2), conv_kernel=(10, 3),
                                      num_conv_pos_embeddings=16, num_conv_pos_embedding_groups=4)
    proj = torch.randn(2, 39, 32)  # a loss whose gradients are far from zero
    return (transformers.Wav2Vec2Model(cfg), {"input_values": torch.randn(2, 400)},
            lambda out: (out.last_hidden_state * proj.to(out.last_hidden_state.device)).sum())


@pytest.mark.parametrize("mode", ["strict", "fuse"])
@pytest.mark.parametrize("build", [gpt2, mixtral, wav2vec2])
def test_forward_loss_and_gradients_match_cpu(build, mode):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model, inputs, loss_of = build()
    model.eval()  # no dropout: both devices compute the same function
    tpu_model = copy.deepcopy(model).to("tpu")
    with torch_tpu.execution_mode(mode):
        loss = loss_of(tpu_model(**{k: v.to("tpu") for k, v in inputs.items()}))
        loss.backward()
    expected = loss_of(model(**inputs))
    expected.backward()
    torch.testing.assert_close(loss.cpu(), expected, rtol=1e-5, atol=1e-5)
    grads = [(n, p.grad, q.grad) for (n, p), q in zip(tpu_model.named_parameters(), model.parameters())]
    scale = max(g.abs().max().item() for _, _, g in grads if g is not None)
    for name, got, want in grads:
        assert (got is None) == (want is None), name
        if want is not None:  # relative to the model's largest gradient: some are exactly zero in theory
            err = (got.cpu() - want).abs().max().item()
            assert err <= 2e-5 * scale, f"{name}: gradient differs by {err:.3g} (largest gradient {scale:.3g})"


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_from_pretrained_device_map_tpu_and_greedy_generate(tmp_path, dtype):
    pytest.importorskip("accelerate")  # what makes device_map work
    cfg = transformers.LlamaConfig(vocab_size=100, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                                   num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64,
                                   tie_word_embeddings=True)
    reference = transformers.LlamaForCausalLM(cfg)
    reference.save_pretrained(tmp_path)  # safetensors
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model = transformers.LlamaForCausalLM.from_pretrained(tmp_path, device_map="tpu", dtype=dtype)
    p = next(model.parameters())
    assert p.device.type == "tpu" and p.dtype == dtype
    assert model.lm_head.weight is model.model.embed_tokens.weight  # still tied after loading
    ids = torch.randint(0, 100, (1, 5))
    reference = reference.to(dtype)
    logits = model(ids.to("tpu")).logits
    torch.testing.assert_close(logits.cpu().float(), reference(ids).logits.float(),
                               **({"rtol": 2e-2, "atol": 2e-2} if dtype == torch.bfloat16 else {}))
    got = model.generate(ids.to("tpu"), max_new_tokens=4, do_sample=False)
    assert got.shape == (1, 9) and torch.equal(got[:, :5].cpu(), ids)
    if dtype == torch.float32:  # in bfloat16, near-ties of random logits may round either way
        assert torch.equal(got.cpu(), reference.generate(ids, max_new_tokens=4, do_sample=False))


def load_with_device_map(tmp_path, layers, **kw):
    """A tiny Llama saved to tmp_path and loaded back with from_pretrained(**kw); and the original."""
    pytest.importorskip("accelerate")
    cfg = transformers.LlamaConfig(vocab_size=100, hidden_size=32, intermediate_size=64, num_hidden_layers=layers,
                                   num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64)
    reference = transformers.LlamaForCausalLM(cfg)
    reference.save_pretrained(tmp_path)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return transformers.LlamaForCausalLM.from_pretrained(tmp_path, **kw), reference


@pytest.mark.parametrize("device_map", ["auto", "balanced", "sequential"])
def test_device_map_auto_places_on_tpu(tmp_path, device_map):
    model, reference = load_with_device_map(tmp_path, 2, device_map=device_map)
    assert {p.device.type for p in model.parameters()} == {"tpu"}
    ids = torch.randint(0, 100, (1, 5))
    torch.testing.assert_close(model(ids.to("tpu")).logits.cpu(), reference(ids).logits)


def test_device_map_auto_splits_between_tpu_and_cpu_by_max_memory(tmp_path):
    model, reference = load_with_device_map(tmp_path, 4, device_map="auto",
                                            max_memory={"tpu:0": "120KB", "cpu": "1GB"})
    placed = set(model.hf_device_map.values())
    assert placed == {"tpu:0", "cpu"}, model.hf_device_map
    assert model.model.layers[0].mlp.up_proj.weight.device.type == "tpu"
    ids = torch.randint(0, 100, (1, 5))
    torch.testing.assert_close(model(ids).logits.cpu(), reference(ids).logits)


class CompilesPerStep(transformers.LogitsProcessor if hasattr(transformers, "LogitsProcessor") else object):
    """Programs compiled so far, read at every decoding step."""

    def __init__(self):
        self.seen = []

    def __call__(self, input_ids, scores):
        self.seen.append(int(torch_tpu.metrics.counters().get("compiles", 0)))
        return scores


@pytest.mark.parametrize("compiled", [False, True], ids=["eager", "compiled"])
def test_static_cache_generation_compiles_nothing_after_the_second_token(compiled):
    # the decode step at every position, and the growing input_ids bookkeeping (cat, reads of the last
    # token, the stopping criteria): one set of programs serves every step
    cfg = transformers.LlamaConfig(vocab_size=100, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                                   num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64)
    torch.manual_seed(0)
    reference = transformers.LlamaForCausalLM(cfg)
    model = copy.deepcopy(reference).to("tpu")
    ids = torch.randint(0, 100, (1, 5))
    kw = dict(max_new_tokens=12, min_new_tokens=12, do_sample=False, cache_implementation="static",
              disable_compile=not compiled)
    steps = CompilesPerStep()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        got = model.generate(ids.to("tpu"), logits_processor=[steps], **kw)
        expected = reference.generate(ids, **{**kw, "disable_compile": True})
    assert len(steps.seen) == 12
    assert steps.seen[2:] == [steps.seen[2]] * 10, steps.seen
    assert torch.equal(got.cpu(), expected)
