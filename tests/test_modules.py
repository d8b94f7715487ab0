"""nn.Module on tpu: moving modules keeps Parameter identity, so tied weights stay tied (as on CUDA);
recurrent and transformer layers (whose fused kernels PyTorch calls on accelerators) match CPU."""
import copy

import pytest
import torch

from tpu_check import assert_close, flat


class TiedLM(torch.nn.Module):
    """An embedding and an LM head sharing one weight, as GPT-2, BERT and T5 do."""

    def __init__(self):
        super().__init__()
        self.emb = torch.nn.Embedding(50, 16)
        self.body = torch.nn.Linear(16, 16)
        self.head = torch.nn.Linear(16, 50, bias=False)
        self.head.weight = self.emb.weight

    def forward(self, ids):
        return self.head(torch.tanh(self.body(self.emb(ids))))


def storages(m):
    return {p.untyped_storage().data_ptr() for _, p in m.named_parameters(remove_duplicate=False)}


@pytest.mark.parametrize("move", [
    lambda m: m.to("tpu"),
    lambda m: m.tpu(),
    lambda m: m.to(device="tpu", dtype=torch.float32),
    lambda m: m.to_empty(device="tpu"),
])
def test_tied_weights_stay_tied(move):
    m = TiedLM()
    cpu_params = {id(p) for p in m.parameters()}
    moved = move(m)
    assert moved.head.weight is moved.emb.weight
    assert moved.emb.weight.device.type == "tpu"
    assert {id(p) for p in moved.parameters()} == cpu_params  # the same Parameter objects, moved
    assert len(storages(moved)) == 3  # emb/head, body.weight, body.bias: the tied weight is stored once


def test_tied_gradients_match_cpu():
    ref = TiedLM()
    m = copy.deepcopy(ref).to("tpu")
    ids = torch.randint(0, 50, (4, 7))
    ref(ids).logsumexp(-1).sum().backward()
    m(ids.to("tpu")).logsumexp(-1).sum().backward()
    assert m.head.weight.grad is m.emb.weight.grad
    # the tied gradient sums the head's and the embedding's contributions, as on CPU
    torch.testing.assert_close(m.emb.weight.grad.cpu(), ref.emb.weight.grad, rtol=1e-4, atol=1e-5)
    torch.testing.assert_close(m.body.weight.grad.cpu(), ref.body.weight.grad, rtol=1e-4, atol=1e-5)


def test_tied_weights_survive_load_state_dict_and_the_way_back():
    ref = TiedLM()
    m = TiedLM().tpu()
    m.load_state_dict(ref.state_dict())
    assert m.head.weight is m.emb.weight
    torch.testing.assert_close(m.head.weight.cpu(), ref.emb.weight)
    back = m.to("cpu")
    assert back.head.weight is back.emb.weight and back.emb.weight.device.type == "cpu"
    torch.testing.assert_close(back.emb.weight, ref.emb.weight)


def test_optimizer_keeps_updating_the_moved_parameters():
    m = TiedLM()
    opt = torch.optim.SGD(m.parameters(), lr=0.1)  # built before the move, as many scripts do
    ref = copy.deepcopy(m)
    ref_opt = torch.optim.SGD(ref.parameters(), lr=0.1)
    m.to("tpu")
    ids = torch.randint(0, 50, (2, 5))
    for model, o, x in ((m, opt, ids.to("tpu")), (ref, ref_opt, ids)):
        model(x).sum().backward()
        o.step()
    torch.testing.assert_close(m.emb.weight.cpu(), ref.emb.weight, rtol=1e-4, atol=1e-5)


# ---------------------------------------------------------------- recurrent and transformer layers
def run_both(module, *inputs, backward=True):
    """module(*inputs) on CPU and on a tpu copy: outputs, input gradients and parameter gradients match."""
    moved = copy.deepcopy(module).to("tpu")
    cpu_in = [x.detach().requires_grad_(x.is_floating_point() and backward) for x in inputs]
    tpu_in = [x.detach().to("tpu").requires_grad_(x.is_floating_point() and backward) for x in inputs]
    expected, actual = module(*cpu_in), moved(*tpu_in)
    assert_close(flat(actual), flat(expected))
    if backward:
        sum(o.sum() for o in flat(expected)).backward()
        sum(o.sum() for o in flat(actual)).backward()
        assert_close([x.grad for x in tpu_in if x.grad is not None], [x.grad for x in cpu_in if x.grad is not None])
        assert_close([p.grad for p in moved.parameters()], [p.grad for p in module.parameters()])


@pytest.mark.parametrize("cls", [torch.nn.LSTM, torch.nn.GRU, torch.nn.RNN])
@pytest.mark.parametrize("kw", [dict(num_layers=2, batch_first=True), dict(bidirectional=True), dict(bias=False)],
                         ids=["two_layers", "bidirectional", "no_bias"])
def test_recurrent_layers(cls, kw):
    torch.manual_seed(0)
    run_both(cls(5, 7, **kw).double(), torch.randn(3, 4, 5, dtype=torch.float64))


@pytest.mark.parametrize("cls", [torch.nn.LSTMCell, torch.nn.GRUCell])
def test_recurrent_cells_and_their_double_backward(cls):
    torch.manual_seed(0)
    cell = cls(3, 4).double()
    run_both(cell, torch.randn(2, 3, dtype=torch.float64))

    def second(m, x):
        out = m(x)
        h = out[0] if isinstance(out, tuple) else out
        g, = torch.autograd.grad(h.pow(2).sum(), x, create_graph=True)
        return torch.autograd.grad(g.sum(), x)[0]
    x = torch.randn(2, 3, dtype=torch.float64, requires_grad=True)
    assert_close(second(copy.deepcopy(cell).to("tpu"), x.detach().to("tpu").requires_grad_()), second(cell, x))


def test_lstm_on_packed_sequences():
    torch.manual_seed(0)
    lstm = torch.nn.LSTM(3, 4)
    packed = torch.nn.utils.rnn.pack_padded_sequence(torch.randn(5, 2, 3), torch.tensor([5, 3]))
    expected, _ = lstm(packed)
    actual, _ = copy.deepcopy(lstm).to("tpu")(packed.to("tpu"))
    assert_close(actual.data, expected.data)


@pytest.mark.parametrize("norm_first", [False, True])
@pytest.mark.parametrize("activation", ["relu", "gelu"])
def test_transformer_encoder_layer_inference_fast_path(norm_first, activation):
    # eval + no_grad: PyTorch calls its fused kernel (_transformer_encoder_layer_fwd) on tpu too
    torch.manual_seed(0)
    layer = torch.nn.TransformerEncoderLayer(16, 4, 32, dropout=0.0, batch_first=True, norm_first=norm_first,
                                             activation=activation).eval()
    x, pad = torch.randn(2, 5, 16), torch.tensor([[False] * 5, [False] * 3 + [True] * 2])
    with torch.no_grad():
        run_both(layer, x, backward=False)
        expected = layer(x, src_key_padding_mask=pad)
        actual = copy.deepcopy(layer).to("tpu")(x.to("tpu"), src_key_padding_mask=pad.to("tpu"))
        assert_close(actual, expected)


@pytest.mark.parametrize("shape", [(0, 10, 16), (2, 0, 16)], ids=["no_batch", "no_sequence"])
def test_transformer_encoder_layer_inference_on_empty_input(shape):
    layer = torch.nn.TransformerEncoderLayer(16, 4, 32, batch_first=True, dtype=torch.float64).eval()
    with torch.no_grad():
        run_both(layer, torch.rand(*shape, dtype=torch.float64), backward=False)


def test_transformer_encoder_and_attention_inference():
    torch.manual_seed(0)
    encoder = torch.nn.TransformerEncoder(torch.nn.TransformerEncoderLayer(16, 4, 32, dropout=0.0, batch_first=True),
                                          2, enable_nested_tensor=False).eval()
    attention = torch.nn.MultiheadAttention(16, 4, batch_first=True).eval()
    x, pad = torch.randn(2, 5, 16), torch.tensor([[False] * 5, [False] * 3 + [True] * 2])
    with torch.no_grad():
        expected = encoder(x, src_key_padding_mask=pad)
        actual = copy.deepcopy(encoder).to("tpu")(x.to("tpu"), src_key_padding_mask=pad.to("tpu"))
        assert_close(actual, expected)
        # with nested tensors CPU zeroes the padded positions; tpu (no nested tensors) computes them
        encoder.use_nested_tensor = True
        nested = copy.deepcopy(encoder).to("tpu")(x.to("tpu"), src_key_padding_mask=pad.to("tpu"))
        assert_close(nested[~pad.to("tpu")], encoder(x, src_key_padding_mask=pad)[~pad])
        for average in (True, False):
            mask = pad.to("tpu")
            actual = copy.deepcopy(attention).to("tpu")(*[x.to("tpu")] * 3, key_padding_mask=mask,
                                                        average_attn_weights=average)
            assert_close(actual, attention(x, x, x, key_padding_mask=pad, average_attn_weights=average))


def test_lstm_backward_where_no_gradient_reaches_the_cells():
    # autograd's gradgrad checks pass undefined gradients: the cell backward then has no results
    torch.manual_seed(0)
    lstm = torch.nn.LSTM(4, 4).double()
    x = torch.rand(1, 3, 4, dtype=torch.float64)
    for module, inp in ((lstm, x.clone().requires_grad_()), (copy.deepcopy(lstm).to("tpu"), x.to("tpu").requires_grad_())):
        out, (h, c) = module(inp)
        outs = [torch._C._functions.UndefinedGrad()(o) for o in (out, h, c)]
        grads = torch.autograd.grad(outs, [inp], [torch.ones_like(o) for o in outs], allow_unused=True)
        assert grads[0] is None or not grads[0].any()


def test_recurrent_and_transformer_layers_compiled():
    torch.manual_seed(0)
    lstm = torch.nn.LSTM(5, 7, num_layers=2)
    x = torch.randn(3, 2, 5)
    compiled = torch.compile(copy.deepcopy(lstm).to("tpu"), backend="tpu")
    assert_close(compiled(x.to("tpu"))[0], lstm(x)[0])
    layer = torch.nn.TransformerEncoderLayer(16, 4, 32, dropout=0.0, batch_first=True).eval()
    x = torch.randn(2, 5, 16)
    compiled = torch.compile(copy.deepcopy(layer).to("tpu"), backend="tpu")
    with torch.no_grad():
        assert_close(compiled(x.to("tpu")), layer(x))
