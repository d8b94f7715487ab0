"""QR, symmetric eigendecomposition and SVD (csrc/lower/linalg_spectral.cpp) against CPU. Eigen- and singular
vectors are compared after fixing their sign (the largest-magnitude entry of each vector made positive)."""
import pytest
import torch

from tpu_check import both_raise, check

torch.manual_seed(0)


def unsign(v):
    """Columns of v with their largest-magnitude entry made positive (vectors are unique only up to sign)."""
    idx = v.detach().abs().argmax(-2, keepdim=True)
    return v * torch.gather(v.detach(), -2, idx).sign()


@pytest.mark.parametrize("shape,mode", [((5, 3), "reduced"), ((3, 5), "reduced"), ((2, 4, 4), "reduced"),
                                        ((5, 3), "complete"), ((3, 5), "complete"), ((2, 4, 4), "r")])
def test_qr(shape, mode):
    grad = mode == "reduced" or (mode == "complete" and shape[-2] <= shape[-1])  # CPU's backward rejects the rest
    check(lambda a: torch.linalg.qr(a, mode=mode), torch.randn(shape), grad=grad, atol=1e-4, rtol=1e-4)


def test_qr_out_and_rank_deficient():
    a = torch.randn(4, 3)
    a[:, 1] = 0
    check(lambda a: torch.linalg.qr(a), a)
    check(lambda a: torch.linalg.qr(a, out=(a.new_empty(0), a.new_empty(0))), torch.randn(4, 3))
    check(lambda a: torch.geqrf(a), torch.randn(2, 5, 3))
    check(lambda a: torch.geqrf(a, out=(a.new_empty(0), a.new_empty(0))), torch.randn(3, 4))


def test_householder_product_and_ormqr():
    a, tau, c = torch.randn(5, 3), torch.randn(3), torch.randn(5, 2)
    check(torch.linalg.householder_product, a, tau, grad=True, atol=2e-4, rtol=2e-4)
    check(lambda a, t, c: torch.ormqr(a, t, c, left=True, transpose=True), a, tau, c, grad=True, atol=2e-4, rtol=2e-4)
    check(lambda a, t, c: torch.ormqr(a, t, c.mT, left=False), a, tau, c)


@pytest.mark.parametrize("n,uplo", [(1, "L"), (5, "U"), (9, "L")])
def test_eigh(n, uplo):
    a = torch.randn(2, n, n)
    check(lambda a: (lambda r: (r[0], unsign(r[1])))(torch.linalg.eigh(a, UPLO=uplo)), a, grad=True, atol=1e-4, rtol=1e-4)


def test_eigh_float64_and_eigvalsh():
    a = torch.randn(6, 6, dtype=torch.float64)
    check(lambda a: torch.linalg.eigvalsh(a + a.mT), a)
    check(torch.linalg.eigvalsh, torch.randn(3, 4, 4), grad=True)


@pytest.mark.parametrize("shape", [(5, 3), (3, 5), (2, 6, 4), (1, 1)])
def test_svd(shape):
    def f(a):
        u, s, vh = torch.linalg.svd(a, full_matrices=False)
        return unsign(u), s, unsign(vh.mT)
    check(f, torch.randn(shape), grad=True, atol=1e-4, rtol=1e-4)


@pytest.mark.parametrize("shape", [(5, 3)])
def test_svd_full_matrices(shape):
    a = torch.randn(shape)
    u, s, vh = torch.linalg.svd(a.to("tpu"), full_matrices=True)
    u, s, vh = u.cpu(), s.cpu(), vh.cpu()
    eye = lambda n: torch.eye(n)
    torch.testing.assert_close(u.mT @ u, eye(u.shape[-1]), atol=1e-5, rtol=0)
    torch.testing.assert_close(vh @ vh.mT, eye(vh.shape[-1]), atol=1e-5, rtol=0)
    k = min(shape)
    torch.testing.assert_close((u[:, :k] * s) @ vh[:k], a, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(s, torch.linalg.svdvals(a))


def test_svdvals_and_derived():
    a = torch.randn(2, 5, 4)
    check(torch.linalg.svdvals, a, grad=True)
    check(torch.linalg.pinv, a, grad=True, atol=1e-4, rtol=1e-4)
    check(lambda a: torch.linalg.matrix_norm(a, "nuc"), a, grad=True)
    check(torch.linalg.cond, torch.randn(4, 4), rtol=1e-4, atol=1e-4)
    low = torch.randn(8, 3) @ torch.randn(3, 7)  # rank 3
    check(torch.linalg.matrix_rank, low)
    check(torch.linalg.pinv, low, atol=1e-4, rtol=1e-4)
    check(lambda a: torch.linalg.pinv(a @ a.mT, hermitian=True), torch.randn(4, 4), atol=1e-4, rtol=1e-4)


@pytest.mark.parametrize("driver,m", [("gelsy", 5), ("gelsd", 5), ("gels", 3)])
def test_lstsq(driver, m):
    a, b = torch.randn(2, m, 3) + 3 * torch.eye(m, 3), torch.randn(2, m, 2)
    check(lambda a, b: torch.linalg.lstsq(a, b, driver=driver), a, b, grad=driver == "gelsy", atol=1e-4, rtol=1e-4)
    check(lambda a, b: torch.linalg.lstsq(a, b, driver=driver), a[0], b[0, :, 0])


def test_complex():
    a, h = torch.randn(4, 3, dtype=torch.complex64), torch.randn(4, 4, dtype=torch.complex64)
    check(torch.linalg.qr, a)
    check(torch.geqrf, a.mT)
    check(lambda a, c: torch.ormqr(*torch.geqrf(a), c, transpose=True), a, torch.randn(4, 2, dtype=torch.complex64))
    check(lambda a: (lambda u, s, vh: (s, (u * s) @ vh, u.abs(), vh.abs()))(*torch.linalg.svd(a, full_matrices=False)), a)
    check(lambda h: (lambda e, v: (e, v.abs(), (v * e) @ v.mH))(*torch.linalg.eigh(h + h.mH, UPLO="U")), h)
    check(lambda a, b: torch.linalg.lstsq(a, b, driver="gelsd"), a, torch.randn(4, 2, dtype=torch.complex64))


def test_errors():
    both_raise(RuntimeError, torch.linalg.qr, torch.randn(3))
    both_raise(RuntimeError, torch.linalg.eigh, torch.randn(3, 4))
    both_raise(RuntimeError, torch.linalg.svd, torch.randn(3))
    both_raise(RuntimeError, lambda a: torch.linalg.qr(a, mode="bad"), torch.randn(3, 3))
    both_raise(RuntimeError, torch.linalg.lstsq, torch.randn(()), torch.randn(()))
    both_raise(RuntimeError, torch.geqrf, torch.randn(3))
