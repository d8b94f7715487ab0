"""Bounded dynamism: torch._dynamo.mark_dynamic(t, dim, min=, max=) with torch.compile(backend="tpu").
Every size up to max runs padded to its bucket; results equal CPU's exact-shape results, and a second
pass over all sizes compiles nothing."""
import pytest
import torch
import torch.nn.functional as F

import torch_tpu
from torch_tpu import compiler, dynamic


@pytest.fixture(autouse=True)
def fresh_dynamo():
    torch._dynamo.reset()
    yield
    torch._dynamo.reset()
    torch_tpu.set_buckets(None)


def close(actual, expected, tol=1e-5):
    torch.testing.assert_close(actual.cpu(), expected, rtol=tol, atol=tol, equal_nan=True)


def bucket_events(start):
    """Captures of a bucket's graph (each compiles its program, unless an earlier test did)."""
    return [e for e in compiler.compile_events()[start:] if "bucket" in e["reason"]]


def test_default_buckets_are_at_most_eight_powers_of_two():
    assert dynamic.buckets(2, 64) == [2, 4, 8, 16, 32, 64]
    assert dynamic.buckets(1, 512) == [4, 8, 16, 32, 64, 128, 256, 512]
    assert dynamic.buckets(2, 100) == [2, 4, 8, 16, 32, 64, 100]
    torch_tpu.set_buckets([8, 32, 1000])
    assert dynamic.buckets(2, 64) == [8, 32, 64]
    with pytest.raises(ValueError, match="set_buckets"):
        torch_tpu.set_buckets(list(range(1, 11)))


def along_dim_ops(x, w, target, index):
    """Everything that reduces, normalizes, sorts, scans, attends or indexes along dim 1 (dynamic)."""
    h = x @ w
    b, s, d = h.shape
    heads = h.view(b, s, 2, d // 2).transpose(1, 2)
    attn = F.scaled_dot_product_attention(heads, heads, heads)
    causal = F.scaled_dot_product_attention(heads, heads, heads, is_causal=True)
    values, order = h.sort(dim=1)
    top = h.topk(2, dim=1).values
    ce = F.cross_entropy(h.reshape(-1, d), target.reshape(-1))
    ce_sum = F.cross_entropy(h.transpose(1, 2), target, reduction="sum")
    picked = h.gather(1, index.unsqueeze(-1).expand(-1, -1, d))
    loss = (h.sum(1).sum() + h.mean(1).sum() + h.var(1).sum() + h.std(1, correction=0).sum()
            + h.softmax(1).pow(2).sum() + h.log_softmax(1).sum() / 100 + F.layer_norm(h, (d,)).pow(2).sum()
            + h.cumsum(1).sum() / 10 + attn.sum() + causal.pow(2).sum() + values[:, 0].sum() + top.sum()
            + ce + ce_sum / 10 + picked.sum() + h.amax(1).sum() + h.logsumexp(1).sum()
            + h.flip(1).cumsum(1)[:, -1].sum())
    return loss, h.argmax(1), order, causal.transpose(1, 2).reshape(b, s, d), h.size(1) * 2


@pytest.mark.parametrize("mode", ["strict", "fuse"])
def test_reductions_softmax_norms_sort_attention_and_losses_along_a_dynamic_dim(mode):
    torch.manual_seed(0)
    w = torch.randn(4, 4, dtype=torch.float64).float().requires_grad_()
    wt = w.detach().to("tpu").requires_grad_()
    compiled = torch.compile(along_dim_ops, backend="tpu")
    start = len(compiler.compile_events())
    with torch_tpu.execution_mode(mode):
        for s in (5, 3, 8, 12, 7, 2, 16):
            x = torch.randn(2, s, 4)
            target = torch.randint(0, 4, (2, s))
            index = torch.randint(0, s, (2, s))
            args = [t.to("tpu") for t in (x, wt, target, index)]
            for t in (args[0], args[2], args[3]):
                torch._dynamo.mark_dynamic(t, 1, min=2, max=16)
            out = compiled(*args)
            ref = along_dim_ops(x, w, target, index)
            out[0].backward()
            ref[0].backward()
            close(out[0], ref[0].detach(), 1e-4)
            assert torch.equal(out[1].cpu(), ref[1]) and torch.equal(out[2].cpu(), ref[2])
            close(out[3], ref[3].detach())
            assert out[4] == ref[4] == 2 * s
            close(wt.grad, w.grad, 1e-4)
            w.grad = None
            wt.grad = None
    # buckets 2, 4, 8, 16: a forward and a backward program each
    assert len(bucket_events(start)) == 8


def contractions_and_in_place(x, w, b):
    s = x.shape[1]
    prefix_sums = torch.ones(s, s, device=x.device).tril() @ x  # contracts a made-up [s, s] tensor
    prefix_sums = prefix_sums + torch.ones(s, s, device=x.device) @ torch.ones(s, 4, device=x.device)
    y = x.clone()
    y += x * 2
    y.mul_(0.5)
    projected = torch.addmm(b, y.reshape(-1, y.shape[-1]), w).view(x.shape[0], s, -1)
    return prefix_sums.sum(1), projected.amax(1), (projected @ y.transpose(1, 2)).softmax(-1)


def test_contractions_over_made_up_tensors_in_place_ops_and_addmm():
    torch.manual_seed(0)
    w, b = torch.randn(4, 4), torch.randn(4)
    compiled = torch.compile(contractions_and_in_place, backend="tpu")
    start = len(compiler.compile_events())
    for s in (3, 6, 5, 8):
        x = torch.randn(2, s, 4)
        xt = x.to("tpu")
        torch._dynamo.mark_dynamic(xt, 1, min=2, max=8)
        for out, ref in zip(compiled(xt, w.to("tpu"), b.to("tpu")), contractions_and_in_place(x, w, b)):
            close(out, ref)
    assert len(bucket_events(start)) == 2  # buckets 4 and 8: no fallback to exact shapes


def tiny_llama():
    from transformers import LlamaConfig, LlamaForCausalLM
    config = LlamaConfig(vocab_size=128, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                         num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=256)
    torch.manual_seed(0)
    cpu = LlamaForCausalLM(config)
    tpu = LlamaForCausalLM(config).to("tpu")
    tpu.load_state_dict(cpu.state_dict())
    return cpu, tpu


def test_tiny_llama_forward_backward_over_every_length_compiles_once_per_bucket():
    cpu, tpu = tiny_llama()
    compiled = torch.compile(tpu, backend="tpu")
    start = len(compiler.compile_events())
    top = 24
    for sweep in range(2):
        torch.manual_seed(1)
        for s in range(1, top + 1):
            ids = torch.randint(0, 128, (2, s))
            ids_tpu = ids.to("tpu")
            torch_tpu.mark_dynamic(ids_tpu, 1, max=top)
            if sweep == 1:
                with torch_tpu.no_recompile():
                    out = compiled(input_ids=ids_tpu, labels=ids_tpu, use_cache=False)
                    out.loss.backward()
                    torch.tpu.synchronize()
                tpu.zero_grad()
                continue
            out = compiled(input_ids=ids_tpu, labels=ids_tpu, use_cache=False)
            out.loss.backward()
            ref = cpu(input_ids=ids, labels=ids, use_cache=False)
            ref.loss.backward()
            close(out.loss, ref.loss.detach())
            close(out.logits, ref.logits.detach())
            for p, q in zip(cpu.parameters(), tpu.parameters()):
                close(q.grad, p.grad)
            cpu.zero_grad()
            tpu.zero_grad()
    # buckets 2, 4, 8, 16, 24 (length 1 is PyTorch's static specialization): forward + backward each
    assert len(bucket_events(start)) == 2 * len(dynamic.buckets(2, top)) == 10


def test_decode_step_with_a_dynamic_kv_cache_length():
    from transformers import DynamicCache
    cpu, tpu = tiny_llama()
    cpu.eval()
    tpu.eval()

    def step(ids, keys, values, position):
        cache = DynamicCache()
        for i, (k, v) in enumerate(zip(keys, values)):
            cache.update(k, v, i)
        out = tpu(input_ids=ids, past_key_values=cache, position_ids=position, use_cache=True)
        return out.logits, [layer.keys for layer in out.past_key_values.layers]

    compiled = torch.compile(step, backend="tpu")
    start = len(compiler.compile_events())
    with torch.no_grad():
        for length in range(1, 33):
            ids = torch.randint(0, 128, (1, length + 1))
            ref = cpu(input_ids=ids, use_cache=True)
            prefill = cpu(input_ids=ids[:, :length], use_cache=True).past_key_values.layers
            keys = [layer.keys.to("tpu") for layer in prefill]
            values = [layer.values.to("tpu") for layer in prefill]
            for t in keys + values:
                torch_tpu.mark_dynamic(t, 2, max=32)
            new = torch.tensor(ids[:, length:].tolist()).to("tpu")
            logits, cache_keys = compiled(new, keys, values, torch.tensor([[length]]).to("tpu"))
            close(logits[0, -1], ref.logits[0, -1])
            assert cache_keys[1].shape == (1, 2, length + 1, 8)
            close(cache_keys[1], ref.past_key_values.layers[1].keys)
    assert len(bucket_events(start)) == len(dynamic.buckets(2, 32)) == 5  # (length 1: PyTorch's specialization)


def test_bert_encoder_with_padding_masks_over_variable_lengths():
    from transformers import BertConfig, BertModel
    config = BertConfig(vocab_size=64, hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
                        intermediate_size=48, max_position_embeddings=64)
    torch.manual_seed(0)
    cpu = BertModel(config).eval()
    tpu = BertModel(config).to("tpu").eval()
    tpu.load_state_dict(cpu.state_dict())
    compiled = torch.compile(tpu, backend="tpu")
    start = len(compiler.compile_events())
    with torch.no_grad():
        for s in (6, 11, 3, 14, 9):
            ids = torch.randint(0, 64, (3, s))
            mask = torch.ones(3, s, dtype=torch.int64)
            mask[1, s // 2:] = 0  # a padded sequence in the batch
            args = {"input_ids": ids.to("tpu"), "attention_mask": mask.to("tpu")}
            for t in args.values():
                torch_tpu.mark_dynamic(t, 1, max=16)
            out = compiled(**args)
            ref = cpu(input_ids=ids, attention_mask=mask)
            close(out.last_hidden_state, ref.last_hidden_state, 2e-5)
            close(out.pooler_output, ref.pooler_output, 2e-5)
    assert len(bucket_events(start)) == 3  # buckets 4, 8, 16


def test_a_size_beyond_max_recompiles_and_says_why():
    compiled = torch.compile(lambda x: x.softmax(1).sum(1), backend="tpu")
    for s in (3, 7):
        x = torch.randn(2, s)
        xt = x.to("tpu")
        torch._dynamo.mark_dynamic(xt, 1, min=2, max=8)
        close(compiled(xt), x.softmax(1).sum(1))
    start = len(compiler.compile_events())
    x = torch.randn(2, 20)
    close(compiled(x.to("tpu")), x.softmax(1).sum(1))
    events = compiler.compile_events()[start:]
    assert events and events[0]["compiled"]
    assert "changed from float32[2, 7] to float32[2, 20]" in events[0]["reason"]


def runs_with_exact_shapes(f, why):
    """f over two sizes equals CPU's results, and the report says why it ran with exact shapes."""
    compiled = torch.compile(f, backend="tpu")
    for s in (3, 6):
        x = torch.randn(2, s)
        xt = x.to("tpu")
        torch._dynamo.mark_dynamic(xt, 1, min=2, max=8)
        close(compiled(xt), f(x))
    assert any(f"runs with exact shapes: {why}" in e["reason"] for e in compiler.compile_events())


def test_an_op_the_masker_does_not_know_runs_with_exact_shapes():
    runs_with_exact_shapes(lambda x: x.roll(1, 1).cumsum(1), "roll on a padded value")


def test_data_dependent_shapes_in_a_dynamic_graph_raise_naming_the_op():
    def f(x):
        return torch.nonzero(x > 0).sum()

    compiled = torch.compile(f, backend="tpu")
    xt = torch.randn(2, 5).to("tpu")
    torch._dynamo.mark_dynamic(xt, 1, min=2, max=8)
    with torch._dynamo.config.patch(capture_dynamic_output_shape_ops=True):
        with pytest.raises(Exception, match="nonzero has a data-dependent shape"):
            compiled(xt)


def test_a_dynamic_size_used_as_a_value_runs_with_exact_shapes():
    runs_with_exact_shapes(lambda x: x.sum(1) / x.shape[1], "a dynamic size is used as a value by div")
