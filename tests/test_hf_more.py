"""More Hugging Face Transformers architectures on tpu against CPU (tiny random configs, built offline):
the mixture-of-experts Qwen2-MoE (shared expert with a sigmoid gate) and Qwen3-MoE (top-k routing with
normalized weights): forward, loss, every gradient and greedy generation; HuBERT (convolutional feature
encoder, grouped positional convolution with weight norm): forward and every gradient.
tools/models.py sweeps every architecture with looser tolerances (docs/model_coverage.md)."""
import copy
import warnings

import pytest
import torch

import torch_tpu

transformers = pytest.importorskip("transformers")


def qwen2_moe():
    cfg = transformers.Qwen2MoeConfig(vocab_size=100, hidden_size=32, intermediate_size=64, moe_intermediate_size=32,
                                      shared_expert_intermediate_size=32, num_hidden_layers=2, num_attention_heads=4,
                                      num_key_value_heads=2, num_experts=4, num_experts_per_tok=2,
                                      max_position_embeddings=64, decoder_sparse_step=1, mlp_only_layers=[])
    return transformers.Qwen2MoeForCausalLM(cfg)


def qwen3_moe():
    cfg = transformers.Qwen3MoeConfig(vocab_size=100, hidden_size=32, intermediate_size=64, moe_intermediate_size=32,
                                      num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2, num_experts=4,
                                      num_experts_per_tok=2, max_position_embeddings=64,
                                      decoder_sparse_step=1, mlp_only_layers=[], norm_topk_prob=True)
    return transformers.Qwen3MoeForCausalLM(cfg)


def hubert():
    cfg = transformers.HubertConfig(hidden_size=32, num_hidden_layers=2, num_attention_heads=2, intermediate_size=64,
                                    conv_dim=(16, 16), conv_stride=(5, 2), conv_kernel=(10, 3),
                                    num_conv_pos_embeddings=16, num_conv_pos_embedding_groups=4)
    return transformers.HubertModel(cfg)


def build(fn):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model = fn()
    return model.eval()  # no dropout: both devices compute the same function


def assert_grads_match(tpu_model, model):
    grads = [(n, p.grad, q.grad) for (n, p), q in zip(tpu_model.named_parameters(), model.parameters())]
    scale = max(g.abs().max().item() for _, _, g in grads if g is not None)
    checked = 0
    for name, got, want in grads:
        assert (got is None) == (want is None), name
        if want is not None:  # relative to the model's largest gradient: some are exactly zero in theory
            err = (got.cpu() - want).abs().max().item()
            assert err <= 2e-5 * scale, f"{name}: gradient differs by {err:.3g} (largest gradient {scale:.3g})"
            checked += 1
    return checked


@pytest.mark.parametrize("fn", [qwen2_moe, qwen3_moe])
def test_moe_causal_lm_loss_gradients_and_generate_match_cpu(fn):
    model = build(fn)
    tpu_model = copy.deepcopy(model).to("tpu")
    ids = torch.randint(0, 100, (2, 12))
    out = tpu_model(input_ids=ids.to("tpu"), labels=ids.to("tpu"))
    out.loss.backward()
    expected = model(input_ids=ids, labels=ids)
    expected.loss.backward()
    torch.testing.assert_close(out.loss.cpu(), expected.loss, rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(out.logits.cpu(), expected.logits, rtol=1e-4, atol=1e-4)
    experts = [n for n, p in model.named_parameters() if "experts" in n and p.grad is not None]
    assert experts, "no expert received a gradient: the routed path was not exercised"
    assert assert_grads_match(tpu_model, model) == sum(p.grad is not None for p in model.parameters())

    prompt = ids[:1, :6]
    with torch.no_grad():
        got = tpu_model.generate(prompt.to("tpu"), max_new_tokens=3, min_new_tokens=3, do_sample=False)
        want = model.generate(prompt, max_new_tokens=3, min_new_tokens=3, do_sample=False)
    assert got.shape == (1, 9)
    assert torch.equal(got.cpu(), want)


@pytest.mark.parametrize("mode", ["strict", "fuse"])
def test_hubert_forward_and_gradients_match_cpu(mode):
    model = build(hubert)
    tpu_model = copy.deepcopy(model).to("tpu")
    audio = torch.randn(2, 400)
    proj = torch.randn(2, 39, 32)  # a loss whose gradients are far from zero
    with torch_tpu.execution_mode(mode):
        hidden = tpu_model(input_values=audio.to("tpu")).last_hidden_state
        (hidden * proj.to("tpu")).sum().backward()
    want = model(input_values=audio).last_hidden_state
    (want * proj).sum().backward()
    assert hidden.shape == want.shape == (2, 39, 32)
    torch.testing.assert_close(hidden.cpu(), want, rtol=1e-4, atol=1e-4)
    assert assert_grads_match(tpu_model, model) > 0
    # weight norm: the positional convolution's weight_g / weight_v both get gradients
    names = [n for n, p in tpu_model.named_parameters() if "pos_conv" in n and p.grad is not None]
    assert len(names) >= 2, names
