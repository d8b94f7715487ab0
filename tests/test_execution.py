"""The execution model: positions are runtime operands, in-place updates donate their buffer,
integer scalars are exact. Compile counts come from torch_tpu.metrics."""
import pytest
import torch

import torch_tpu


def compiles():
    return torch_tpu.metrics.counters().get("compiles", 0)


def test_indexing_in_a_loop_compiles_once():
    x = torch.randn(64, 128, device="tpu")
    xc = x.cpu()
    (x[0] * 2).sum().cpu()  # warm-up: the programs for one row
    before = compiles()
    for i in range(32):
        y = (x[i] * 2).sum()
        torch.testing.assert_close(y.cpu(), (xc[i] * 2).sum(), rtol=1e-5, atol=1e-4)
    assert compiles() == before


def test_kv_cache_writes_compile_once():
    cache = torch.zeros(1, 8, 256, 64, device="tpu")
    k = torch.randn(1, 8, 1, 64, device="tpu")
    expected = torch.zeros(1, 8, 256, 64)
    cache[:, :, 0:1] = k
    expected[:, :, 0:1] = k.cpu()
    before = compiles()
    for pos in range(1, 32):
        cache[:, :, pos:pos + 1] = k * pos
        expected[:, :, pos:pos + 1] = k.cpu() * pos
    assert compiles() - before <= 1  # k * pos: the multiply, once
    assert torch.equal(cache.cpu(), expected)


@pytest.mark.parametrize("dtype", [torch.int64, torch.float32, torch.bool])
def test_growing_sequence_compiles_once_per_capacity(dtype):
    # generation's bookkeeping: append a token to a [1, n] sequence, read its last element
    expected = torch.arange(5).reshape(1, 5).to(dtype)
    seq = expected.to("tpu")
    before = None
    for i in range(70):
        token = torch.tensor([[i % 3]]).to(dtype)
        seq = torch.cat([seq, token.to("tpu")], dim=-1)
        expected = torch.cat([expected, token], dim=-1)
        last = seq[:, -1:].clone() + 0
        assert torch.equal(last.cpu(), expected[:, -1:] + 0)
        if i == 1:
            before = compiles()
    assert seq.shape == expected.shape and seq.is_contiguous()
    assert torch.equal(seq.cpu(), expected)
    assert compiles() - before <= 4  # crossing from a capacity of 64 elements to 128: cat, clone, add


@pytest.mark.parametrize("dims", [(0, (3, 4), (2, 4)), (2, (1, 3, 4), (1, 3, 2)), (1, (1, 3, 4), (1, 2, 4))])
def test_cat_results_with_spare_capacity_behave_as_exact_ones(dims):
    dim, a_shape, b_shape = dims
    a, b = torch.randn(a_shape), torch.randn(b_shape)
    out = torch.cat([a.to("tpu"), b.to("tpu")], dim)
    assert torch.equal(out.cpu(), torch.cat([a, b], dim))
    assert out.stride() == torch.cat([a, b], dim).stride()
    out.view(-1)[0] = 7.0  # its own storage: writes reach neither input
    assert torch.equal(out.cpu().view(-1)[1:], torch.cat([a, b], dim).view(-1)[1:])
    assert torch.equal(a.to("tpu").cpu(), a)
    again = torch.cat([out, out[:1]], dim)  # a result grown again, and read in part
    assert torch.equal(again.cpu(), torch.cat([out.cpu(), out.cpu()[:1]], dim))


@pytest.mark.parametrize("view", [
    lambda t, i: t[i],                 # contiguous row
    lambda t, i: t[:, i],              # strided column
    lambda t, i: t[i:i + 2, 1:5:2],    # strided box
    lambda t, i: t.view(-1)[i:i + 7],  # flat window
])
def test_views_at_other_offsets_reuse_the_program_and_read_right(view):
    t = torch.randn(12, 12)
    d = t.to("tpu")
    (view(d, 0) + 1).cpu()
    before = compiles()
    for i in range(1, 9):
        torch.testing.assert_close((view(d, i) + 1).cpu(), view(t, i) + 1)
        w = d.clone()
        view(w, i).mul_(-1)  # a partial in-place write at that offset
        e = t.clone()
        view(e, i).mul_(-1)
        torch.testing.assert_close(w.cpu(), e)
    assert compiles() - before <= 3  # clone, and the in-place write (mul.out + copy_), each once


def test_int64_scalars_are_exact_beyond_2_53():
    big = 2**60 + 1
    t = torch.tensor([1, -3], dtype=torch.int64, device="tpu")
    assert (t + big).tolist() == [1 + big, -3 + big]
    assert (t * (2**53 + 1)).tolist() == [2**53 + 1, -3 * (2**53 + 1)]
    assert torch.full((2,), big, device="tpu").tolist() == [big, big]
    assert (t.fill_(-(2**62) - 7)).tolist() == [-(2**62) - 7] * 2


def test_in_place_updates_donate_the_old_buffer(python):
    # A 256 MiB tensor updated in place (whole and in part) many times: the process's peak memory grows
    # far less than another copy, because each update writes into the donated buffer.
    proc = python("""
import resource, torch, torch_tpu
rss = lambda: resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
small = torch.ones(128, device="tpu")
small.add_(1); small[0:2] = small[2:4]; small.mul_(1); small.cpu()  # the small programs, before the peak is read
x = torch.ones(64 * 1024 * 1024, device="tpu")
torch.tpu.synchronize()
base = rss()
x.add_(1); x[0:128] = small; x.mul_(2)
for i in range(6):
    x.add_(1)
    x[i * 128:(i + 1) * 128] = small
    x.mul_(2)
torch.tpu.synchronize()
print(rss() - base, x[1000].item())
""")
    growth, value = proc.stdout.split()
    v = 4.0  # (1 + 1) * 2
    for _ in range(6):
        v = (v + 1) * 2
    assert float(value) == v
    assert float(growth) < 128, f"peak memory grew by {growth} MiB: the 256 MiB buffer was copied"


def test_donation_keeps_buffers_shared_with_other_storages():
    # out= shares its result's buffer with the out tensor's storage: a later in-place update of one must
    # not clobber the other.
    a = torch.arange(6.0, device="tpu")
    out = torch.empty(6, device="tpu")
    torch.mul(a, 2, out=out)
    view = out[:]
    out.add_(1)
    assert out.tolist() == [1.0, 3.0, 5.0, 7.0, 9.0, 11.0]
    assert view.tolist() == out.tolist()
    assert a.tolist() == [0.0, 1.0, 2.0, 3.0, 4.0, 5.0]


@pytest.mark.parametrize("mode", ["strict", "fuse"])
def test_threads_sharing_tensors(mode):
    # Python threads using tpu tensors, one storage updated by all of them: no crash, no lost update.
    import threading
    errors = []
    with torch_tpu.execution_mode(mode):
        shared = torch.zeros(256, device="tpu")

        def work():
            try:
                x = torch.randn(256, device="tpu")
                for i in range(100):
                    x = (x * 0.5 + shared).sin()
                    shared.add_(1)
                    if i % 25 == 0:
                        x.sum().item()
                assert torch.isfinite(x.cpu()).all()
            except Exception as e:  # reported below, with the thread's error
                errors.append(e)

        threads = [threading.Thread(target=work) for _ in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert not errors, errors
        assert torch.equal(shared.cpu(), torch.full((256,), 400.0))


@pytest.mark.parametrize("mode", ["1", "0"])
def test_exit_with_pending_work(python, mode):
    proc = python("""
import torch, torch_tpu
x = torch.randn(1 << 20, device="tpu")
for _ in range(20):
    x = x.sin() * 2
print("done")
""", env={"TORCH_TPU_DEFER_AND_FUSE": mode})
    assert proc.stdout.strip() == "done" and proc.returncode == 0


@pytest.mark.parametrize("mode", ["strict", "fuse"])
def test_scalar_value_checks_run_on_cache_hits(mode):
    # the programs are cached by the valid calls; a bad scalar value must still raise CPU's error
    with torch_tpu.execution_mode(mode):
        for device in ("cpu", "tpu"):
            x = torch.tensor([2, 3], device=device)
            f = torch.randn(4, device=device)
            assert x.pow(2).tolist() == [4, 9]
            torch.nn.functional.softshrink(f, 0.5)
            with pytest.raises(RuntimeError, match="negative integer powers"):
                x.pow(-1)
            with pytest.raises(RuntimeError, match=r"lambda must be in range \[0, .*\] for input dtype Float, but found -0.5"):
                torch.nn.functional.softshrink(f, -0.5)
            with pytest.raises(RuntimeError, match="from=.*to="):
                f.uniform_(1.0, 0.0)
            assert x.pow(3).tolist() == [8, 27]


def test_item_loop_reads_a_small_storage_once_and_sees_every_write():
    # x[i].item() reads the whole (small) storage to the host once; a write installs new contents
    x = torch.arange(100.0).to("tpu")
    x[0].item()
    before = torch_tpu.metrics.counters().get("host_syncs", 0)
    assert [x[i].item() for i in range(100)] == [float(i) for i in range(100)]
    assert torch_tpu.metrics.counters().get("host_syncs", 0) == before
    x[3] = -1.0
    assert x[3].item() == -1.0 and x[4].item() == 4.0
    x.mul_(2)
    assert x[5].item() == 10.0
    y = x[10:20]  # another view of the same storage
    y.add_(1)
    assert x[10].item() == 21.0 and y[0].item() == 21.0
    assert x[50:].sum().item() == sum(2.0 * i for i in range(50, 100))


def test_element_loop_over_a_large_storage_reads_it_whole():
    # all(t) or a loop of t[i].item() over a 4 MB storage: after a few single reads, the whole storage once
    x = torch.arange(1_000_000.0).to("tpu")
    before = torch_tpu.metrics.counters().get("host_syncs", 0)
    assert [x[i].item() for i in range(0, 1_000_000, 997)] == [float(i) for i in range(0, 1_000_000, 997)]
    assert torch_tpu.metrics.counters().get("host_syncs", 0) - before <= 4
    assert all(x[:-1] < x[1:])
    x[7] = -3.0  # a write installs new contents: the next reads see it
    assert x[7].item() == -3.0 and x[8].item() == 8.0
    assert [x[i].item() for i in range(5, 10)] == [5.0, 6.0, -3.0, 8.0, 9.0]
