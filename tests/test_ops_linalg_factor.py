"""Factorizations and solves (csrc/lower/linalg_factor.cpp) against CPU: Cholesky, LU, triangular
solves, inverse, solve, det/slogdet, lu_unpack/lu_solve, cholesky_solve/inverse, matrix_exp."""
import pytest
import torch
import torch_tpu  # noqa: F401

from tpu_check import both_raise, check

torch.manual_seed(0)
A = torch.randn(2, 4, 4) + 4 * torch.eye(4)     # well conditioned, batched
SPD = A @ A.mT + torch.eye(4)
B = torch.randn(2, 4, 3)
TOL = dict(rtol=1e-4, atol=1e-4)  # solves amplify float32 rounding by the condition number


def spd(x):  # a differentiable SPD input from any square x
    return x @ x.mT + 4 * torch.eye(x.shape[-1], device=x.device)


def test_cholesky():
    check(lambda x: torch.linalg.cholesky(spd(x)), A, grad=True, **TOL)
    check(lambda x: torch.linalg.cholesky(spd(x), upper=True), A[0], grad=True, **TOL)
    check(lambda x: torch.cholesky(spd(x)), A, **TOL)


def test_cholesky_ex_info():
    # not positive definite: info names the first failing column, like LAPACK
    bad = torch.tensor([[[1., 2.], [2., 1.]], [[4., 0.], [0., 9.]]])
    L, info = check(lambda x: torch.linalg.cholesky_ex(x), bad)
    assert info.cpu().tolist() == [2, 0]
    both_raise(torch.linalg.LinAlgError, torch.linalg.cholesky, bad)


def test_solve_triangular():
    check(lambda a, b: torch.linalg.solve_triangular(a, b, upper=True), A, B, grad=True, **TOL)
    check(lambda a, b: torch.linalg.solve_triangular(a, b, upper=False, left=False, unitriangular=True),
          A, B.mT, grad=True, **TOL)
    check(lambda a, b: torch.triangular_solve(b, a, transpose=True), A, B, grad=True, **TOL)


def test_lu_factor_and_unpack():
    for x in (A, torch.randn(3, 5, 3), torch.randn(3, 5), torch.zeros(3, 3), torch.randn(2, 0, 0)):
        check(torch.linalg.lu_factor_ex, x)  # LU, pivots and info equal CPU's
    check(torch.linalg.lu, torch.randn(2, 5, 3), grad=True, **TOL)
    check(lambda x: torch.lu_unpack(*torch.linalg.lu_factor(x)), torch.randn(4, 3))


def test_lu_solve():
    for left, adjoint in ((True, False), (True, True), (False, False)):
        rhs = B if left else B.mT
        check(lambda a, b: torch.linalg.lu_solve(*torch.linalg.lu_factor(a), b, left=left, adjoint=adjoint),
              A, rhs, grad=True, **TOL)


def test_inv_solve():
    check(torch.linalg.inv, A, grad=True, **TOL)
    check(torch.linalg.solve, A, B, grad=True, **TOL)
    check(lambda a, b: torch.linalg.solve(a, b, left=False), A, B.mT, grad=True, **TOL)
    check(torch.linalg.solve, A, torch.randn(2, 4), grad=True, **TOL)  # vector right-hand side
    check(torch.linalg.solve_ex, A[0], torch.randn(3, 4, 2), **TOL)  # batch broadcast
    both_raise(torch.linalg.LinAlgError, torch.linalg.inv, torch.zeros(3, 3))  # singular
    both_raise(RuntimeError, torch.linalg.solve, A, torch.randn(2, 3, 3))  # bad shapes


def test_det_slogdet():
    check(torch.linalg.det, A, grad=True, **TOL)
    check(torch.linalg.slogdet, A, grad=True, **TOL)
    check(torch.logdet, SPD, grad=True, **TOL)
    check(torch.linalg.det, torch.tensor([[1., 2.], [2., 4.]]))  # singular: 0
    check(torch.linalg.det, torch.randn(2, 0, 0))
    # CPU factors A^T only for contiguous A, and the backward relies on it
    check(lambda a: torch.linalg.det(a.mT), A, grad=True, **TOL)
    check(lambda a: torch.linalg.slogdet(a.mT), A, grad=True, **TOL)
    check(lambda a: torch.ops.aten._linalg_det(a.mT), A, **TOL)
    check(lambda a, b: torch.linalg.solve(a.mT, b), A, B, grad=True, **TOL)


def test_cholesky_solve_inverse():
    L = torch.linalg.cholesky(SPD)
    check(lambda b, l: torch.cholesky_solve(b, l), B, L, grad=True, **TOL)
    check(lambda b, l: torch.cholesky_solve(b, l, upper=True), B, L.mT, **TOL)
    check(torch.cholesky_inverse, L, grad=True, **TOL)


def test_matrix_exp():
    check(torch.linalg.matrix_exp, torch.randn(2, 4, 4), grad=True, **TOL)
    check(torch.linalg.matrix_exp, 3 * torch.randn(3, 3), **TOL)  # needs squarings


@pytest.mark.parametrize("dtype", [torch.int64, torch.bool])
def test_errors(dtype):
    both_raise(RuntimeError, torch.linalg.cholesky, torch.ones(3, 3, dtype=dtype))
    both_raise(RuntimeError, torch.linalg.inv, torch.randn(3, 4))


def test_ldl():
    sym = torch.randn(3, 6, 6)
    sym = sym + sym.mT  # indefinite: 1x1 and 2x2 Bunch-Kaufman pivots
    check(torch.linalg.ldl_factor_ex, sym)  # LD, pivots and info equal CPU's
    check(torch.linalg.ldl_factor_ex, torch.zeros(3, 3))  # singular: info
    LD, piv = torch.linalg.ldl_factor(sym)
    check(torch.linalg.ldl_solve, LD, piv, torch.randn(3, 6, 2), **TOL)


def test_complex():
    Ac = torch.randn(2, 4, 4, dtype=torch.complex64) + 4 * torch.eye(4)
    Bc = torch.randn(2, 4, 3, dtype=torch.complex64)
    Hc = Ac @ Ac.mH
    check(torch.linalg.cholesky_ex, Hc, **TOL)
    check(torch.linalg.lu_factor_ex, Ac, **TOL)  # complex pivots: LAPACK's |re| + |im|
    check(torch.linalg.inv, Ac, **TOL)
    check(torch.linalg.slogdet, Ac, **TOL)
    check(lambda a, b: torch.linalg.lu_solve(*torch.linalg.lu_factor(a), b, left=False, adjoint=True), Ac, Bc.mT, **TOL)
    check(lambda b, a: torch.cholesky_solve(b, torch.linalg.cholesky(a)), Bc, Hc, **TOL)
    check(torch.linalg.matrix_exp, Ac / 4, **TOL)
    for herm in (False, True):  # sytrf / hetrf
        S = Ac + (Ac.mH if herm else Ac.mT)
        LD, piv, info = check(lambda a: torch.linalg.ldl_factor_ex(a, hermitian=herm), S, **TOL)
        check(torch.linalg.ldl_solve, LD.cpu(), piv.cpu(), Bc, hermitian=herm, **TOL)
