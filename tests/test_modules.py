"""nn.Module on tpu: moving modules keeps Parameter identity, so tied weights stay tied (as on CUDA)."""
import copy

import pytest
import torch


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
