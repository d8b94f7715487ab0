"""Out-of-range indices and integer division by zero are never silent: each op checks on the device
(XLA would clamp or drop), and the next host sync raises CPU's exception with CPU's message, the op
and the Python line, without an extra sync. Debug mode raises at the op itself."""
import re

import pytest
import torch
import torch.nn.functional as F

import torch_tpu

LINE = re.compile(r"\(tpu: aten::\S+ at .*test_device_checks\.py:\d+\)")


def x5():
    return torch.arange(5.0)


# name -> (call on tensors of one device, the indices' device arguments built inside)
CASES = {
    "getitem": lambda d: x5().to(d)[torch.tensor([7]).to(d)],
    "getitem_negative": lambda d: x5().to(d)[torch.tensor([-9]).to(d)],
    "index_put": lambda d: x5().to(d).index_put_((torch.tensor([7]).to(d),), torch.tensor([1.0]).to(d)),
    "setitem": lambda d: x5().to(d).__setitem__(torch.tensor([5]).to(d), 1.0),
    "gather": lambda d: x5().to(d).gather(0, torch.tensor([7]).to(d)),
    "gather_negative": lambda d: x5().to(d).gather(0, torch.tensor([-1]).to(d)),
    "scatter": lambda d: x5().to(d).scatter(0, torch.tensor([7]).to(d), torch.tensor([1.0]).to(d)),
    "scatter_add": lambda d: x5().to(d).scatter_add(0, torch.tensor([7]).to(d), torch.tensor([1.0]).to(d)),
    "index_select": lambda d: x5().to(d).index_select(0, torch.tensor([7]).to(d)),
    "index_fill": lambda d: x5().to(d).index_fill(0, torch.tensor([7]).to(d), 1.0),
    "index_add": lambda d: x5().to(d).index_add(0, torch.tensor([7]).to(d), torch.tensor([1.0]).to(d)),
    "index_copy": lambda d: x5().to(d).index_copy(0, torch.tensor([7]).to(d), torch.tensor([1.0]).to(d)),
    "index_reduce": lambda d: x5().to(d).index_reduce(0, torch.tensor([7]).to(d), torch.tensor([1.0]).to(d), "prod"),
    "take": lambda d: x5().to(d).take(torch.tensor([7]).to(d)),
    "put_": lambda d: x5().to(d).put_(torch.tensor([7]).to(d), torch.tensor([1.0]).to(d)),
    "embedding": lambda d: F.embedding(torch.tensor([7]).to(d), torch.ones(5, 3).to(d)),
    "embedding_negative": lambda d: F.embedding(torch.tensor([-1]).to(d), torch.ones(5, 3).to(d)),
    "nll_loss": lambda d: F.nll_loss(torch.zeros(2, 5).to(d), torch.tensor([1, 7]).to(d)),
    "cross_entropy": lambda d: F.cross_entropy(torch.zeros(2, 5).to(d), torch.tensor([-3, 1]).to(d)),
    "floor_divide": lambda d: torch.tensor([4, 5]).to(d) // torch.tensor([2, 0]).to(d),
    "remainder": lambda d: torch.tensor([4, 5]).to(d) % torch.tensor([0, 1]).to(d),
    "div_trunc": lambda d: torch.tensor([4]).to(d).div(torch.tensor([0]).to(d), rounding_mode="trunc"),
    "fmod_scalar": lambda d: torch.fmod(torch.tensor([4]).to(d), 0),
    "multinomial": lambda d: torch.multinomial(torch.tensor([-1.0, 2.0]).to(d), 1),
}


def cpu_error(name):
    with pytest.raises(Exception) as info:
        CASES[name]("cpu")
    return info.value


@pytest.fixture(params=["strict", "fuse"])
def mode(request):
    with torch_tpu.execution_mode(request.param):
        yield request.param


@pytest.mark.parametrize("name", CASES)
def test_raised_at_the_next_sync_as_on_cpu(name, mode):
    expected = cpu_error(name)
    try:
        CASES[name]("tpu")  # no sync here: the op itself does not raise
    except Exception as e:  # noqa: BLE001 - an op may not raise before the sync
        pytest.fail(f"raised at the op instead of the next sync: {e!r}")
    with pytest.raises(type(expected)) as info:
        torch.tpu.synchronize()
    assert type(info.value) is type(expected)
    message = str(info.value).splitlines()[0]
    assert message.startswith(str(expected).splitlines()[0]), (message, str(expected))
    assert LINE.search(message), message
    torch.tpu.synchronize()  # raised once, then cleared


@pytest.mark.parametrize("name", ["getitem", "gather", "take", "nll_loss", "floor_divide", "index_fill",
                                  "put_", "index_reduce", "multinomial"])
def test_debug_mode_raises_at_the_op(name):
    expected = cpu_error(name)
    with torch_tpu.execution_mode("debug"):
        with pytest.raises(type(expected)):
            CASES[name]("tpu")
    torch.tpu.synchronize()


def test_error_survives_later_work_and_a_host_read_raises_it(mode):
    x = torch.arange(5.0, device="tpu")
    bad = x[torch.tensor([9], device="tpu")]
    for _ in range(50):
        x = x * 1.0 + 0.0
    with pytest.raises(IndexError, match="index 9 is out of bounds for dimension 0 with size 5"):
        x.sum().item()
    del bad
    assert x.sum().item() == 10.0


def test_valid_indices_raise_nothing(mode):
    x = torch.arange(10.0, device="tpu").reshape(2, 5)
    i = torch.tensor([0, 4, -1, -5], device="tpu")
    assert x[1, i].cpu().tolist() == [5.0, 9.0, 9.0, 5.0]
    assert F.embedding(torch.tensor([0, 4], device="tpu"), x.t()).shape == (2, 2)
    assert F.cross_entropy(x, torch.tensor([4, -100], device="tpu")).isfinite().item()
    assert (torch.tensor([5], device="tpu") // torch.tensor([2], device="tpu")).item() == 2
    torch.tpu.synchronize()


def test_compiled_graph_checks_every_replay():
    torch._dynamo.reset()
    g = torch.compile(lambda x, i: x[i] * 2, backend="tpu")
    x = torch.arange(5.0, device="tpu")
    for k in (1, 2):
        assert g(x, torch.tensor([k], device="tpu")).item() == 2.0 * k
    g(x, torch.tensor([11], device="tpu"))  # a replay
    with pytest.raises(IndexError, match="index 11 is out of bounds"):
        torch.tpu.synchronize()


def test_checks_can_be_turned_off_for_measuring():
    import os
    import subprocess
    import sys
    code = ("import torch; x = torch.arange(5.0, device='tpu'); "
            "print(x[torch.tensor([7], device='tpu')].item())")
    off = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                         env=dict(os.environ, TORCH_TPU_DEVICE_CHECKS="0"))
    assert off.returncode == 0 and off.stdout.split()[-1] == "4.0", off.stderr  # XLA clamps
    on = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert on.returncode != 0 and "IndexError: index 7 is out of bounds" in on.stderr
    bad = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                         env=dict(os.environ, TORCH_TPU_DEVICE_CHECKS="yes"))
    assert bad.returncode != 0 and "TORCH_TPU_DEVICE_CHECKS" in bad.stderr


def test_unraised_error_is_reported_at_exit():
    import subprocess
    import sys
    code = "import torch; x = torch.arange(5.0, device='tpu'); y = x[torch.tensor([7], device='tpu')]; print('end')"
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0 and proc.stdout.strip() == "end", proc.stderr
    assert "never raised" in proc.stderr and "IndexError: index 7 is out of bounds" in proc.stderr
