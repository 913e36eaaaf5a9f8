"""The MRF theta update's HMC step with its step size adapted in a warm-up and then frozen
(:class:`privpost.inference._count_occupied.HMCStep`, used by ``OccupiedTable`` through
:meth:`privpost.models.CliqueMRF.update_counts` ``(step_size=step.eps, info=step.info)``).

Exact target: ``p(theta | counts)`` of ``CliqueMRF([2, 2], [[0], [1]])`` (two independent binary
variables, one clique each, prior ``N(0, 1)`` per log-potential) given a FIXED table of
``N = 10`` records with ``x_0 = 1`` in 1 and ``x_1 = 1`` in 5 of them. The likelihood depends on
``theta`` only through ``a_k = theta_k[1] - theta_k[0]``, and the prior makes ``a_0, a_1`` and
the unidentified sums independent, so the posterior of ``a_k`` is the one-dimensional density
``N(a; 0, 2) sigmoid(a)^{n_k} sigmoid(-a)^{N - n_k}``, computed on a fine grid (the exact CDF
and quantiles; the grid's error is below 1e-4 in probability against a standard error of 0.01).

Invariance test (the kernel alone, no chain): ``M`` independent exact draws of ``theta`` (``a_k``
by inverse CDF, the sums from the prior), one kernel step from each with the frozen step size;
the stepped ``a_k`` must still have the exact law: at the 10/25/50/75/90 % quantiles the
fraction below is Binomial(M, q) / M under invariance, so ``z = (frac - q) / sqrt(q (1 - q) /
M)`` has an exact standard error (independent draws: no ESS to estimate), |z| < K_MCSE.

WRONG variants (must fail, |z| > 2 K_MCSE):

* the step size set from the chain's current state instead of frozen (``log eps`` +-1 as
  ``a_0`` is above or below its posterior median): a state-dependent HMC step is not reversible
  (max |z| 21.9-26.8 at the M = 1000 used below, seeds 0-7, against 1.16-2.32 for the frozen
  step; eps adapted to 1.23-1.65; measured on the compiled kernel of models/_mrf_kernel.py --
  22.4-26.9 against 0.95-2.12 on the former Python kernel);
* the mass matrix evaluated at the current theta (``B' N Cov_theta(t) B + I``, a
  Riemannian metric without its log-determinant term): update_counts' docstring requires a mass
  that does not depend on theta, and this is why (max |z| 10.7-17.0 at M = 6000, seeds 0-3:
  too close to 2 K_MCSE = 10 for "fails at any seed", so the test uses M = 15,000, where the
  expected |z| is 1.6 times larger, 17-27; 2 s with the compiled kernel).

Not a wrong variant: continuing HMCStep's own Robbins--Monro adaptation into the kept
iterations (gain ``5 t^-0.6``, diminishing) -- measured |z| <= 3.0 on chains of 2 x 2000 draws
even at a constant gain of 1, on two posteriors (N = 4 and 1000 records), as the theory of
diminishing adaptation allows; the test instead checks that HMCStep does freeze (``record(False)``
never moves ``eps``). A wrong kinetic-energy term inside ``update_counts`` is out of reach of its
public arguments except through a theta-dependent mass (the slow variant above); note that a
``mass_chol`` that is not lower triangular is accepted silently and then draws momenta from
``L L'`` while the kinetic energy uses the lower triangle only.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

import privpost as pp
from privpost.errors import PrivpostError
from privpost.inference._count_occupied import HMCStep
from privpost.mechanisms import Laplace
from privpost.models import CliqueMRF
from privpost.queries.marginal_tables import MarginalTables

from _tolerance import K_MCSE, count_checks

N_REC, ONES = 10, (1, 5)                  # records; records with x_k = 1
QS = np.array([0.1, 0.25, 0.5, 0.75, 0.9])


def _model():
    return CliqueMRF([2, 2], [[0], [1]], prior_sd=1.0)


def _counts():
    """The model's clique tables (d,) = (4,) of the fixed table."""
    return np.array([N_REC - ONES[0], ONES[0], N_REC - ONES[1], ONES[1]], dtype=float)


def _exact():
    """Per a_k: the grid (G,), the exact CDF on it (G,) and the exact quantiles at QS."""
    grid = np.linspace(-30.0, 30.0, 300_001)
    out = []
    for n1 in ONES:
        lw = -grid ** 2 / 4 - n1 * np.logaddexp(0, -grid) - (N_REC - n1) * np.logaddexp(0, grid)
        w = np.exp(lw - lw.max())
        cdf = np.cumsum(w) - 0.5 * w          # midpoint: P(a <= grid[j])
        cdf /= cdf[-1] + 0.5 * w[-1]
        out.append((grid, cdf, np.interp(QS, cdf, grid)))
    return out


def _exact_draws(ex, M, rng):
    """M independent draws (M, 4) of theta from p(theta | counts)."""
    a = np.stack([np.interp(rng.random(M), cdf, grid) for grid, cdf, _ in ex], axis=1)
    s = math.sqrt(2.0) * rng.standard_normal((M, 2))          # theta_k[0] + theta_k[1]: prior
    return np.column_stack([(s[:, 0] - a[:, 0]) / 2, (s[:, 0] + a[:, 0]) / 2,
                            (s[:, 1] - a[:, 1]) / 2, (s[:, 1] + a[:, 1]) / 2])


def _mass_chol(model, theta=None):
    """Cholesky factor (2, 2) of ``B' N Cov_theta(t) B + I / sigma^2`` (at theta = 0: the
    model's default diagonal mass, here through the dense ``mass_chol`` path the count table
    uses)."""
    B = model.identified_basis()[0]
    H = B.T @ (N_REC * model.cell_covariance(theta)) @ B
    return np.linalg.cholesky(H + np.eye(B.shape[1]) / model.prior_sd ** 2)


def _adapted_step(model, counts, L, rng, warmup=300):
    """An HMCStep adapted on one chain's warm-up, then frozen."""
    step = HMCStep(model.step_size)
    theta = np.zeros(model.dim)
    for _ in range(warmup):
        theta = model.update_counts(theta, counts, float(N_REC), rng, mass_chol=L,
                                    step_size=step.eps, info=step.info)
        step.record(adapting=True)
    return step


def _invariance_z(model, counts, step, M, rng, *, state_step=0.0, moving_mass=False):
    """z-scores (2, 5) of the stepped a_k at the exact quantiles, after one kernel step from each
    of M exact draws. ``state_step``: wrong variant, log eps +- this by a_0 against its median;
    ``moving_mass``: wrong variant, the mass evaluated at the current theta."""
    ex = _exact()
    L0 = _mass_chol(model)
    eps0 = step.eps
    out = np.empty((M, 2))
    for i, theta in enumerate(_exact_draws(ex, M, rng)):
        if state_step:
            step.log_eps = math.log(eps0) + (state_step if theta[1] - theta[0] > ex[0][2][2]
                                             else -state_step)
        L = _mass_chol(model, theta) if moving_mass else L0
        new = model.update_counts(theta, counts, float(N_REC), rng, mass_chol=L,
                                  step_size=step.eps, info=step.info)
        step.record(adapting=False)
        out[i] = new[1] - new[0], new[3] - new[2]
    step.log_eps = math.log(eps0)
    z = np.stack([((out[:, k, None] <= ex[k][2]).mean(axis=0) - QS) / np.sqrt(QS * (1 - QS) / M)
                  for k in range(2)])
    count_checks(z.size)
    return z


def test_frozen_hmc_step_leaves_the_exact_posterior_invariant():
    model, counts = _model(), _counts()
    rng = np.random.default_rng(11)
    step = _adapted_step(model, counts, _mass_chol(model), rng)
    eps, t = step.eps, step.t
    assert 0.05 < eps < 7.4 and t == 300
    z = _invariance_z(model, counts, step, 1000, rng)
    # frozen: the kept steps never moved eps, and counted their acceptance
    assert step.eps == eps and step.t == t and step.kept == 1000
    assert 0.3 < step.accept_sum / step.kept <= 1.0
    assert np.max(np.abs(z)) < K_MCSE, z
    # WRONG: the step size set from the current state (not frozen)
    zw = _invariance_z(model, counts, step, 1000, rng, state_step=1.0)
    assert np.max(np.abs(zw)) > 2 * K_MCSE, zw


def test_hmc_mass_that_moves_with_theta_is_not_invariant():
    """WRONG: the mass matrix at the current theta breaks invariance; the same kernel
    with the mass frozen at theta = 0 passes."""
    model, counts = _model(), _counts()
    rng = np.random.default_rng(12)
    step = _adapted_step(model, counts, _mass_chol(model), rng)
    z = _invariance_z(model, counts, step, 15_000, rng)
    assert np.max(np.abs(z)) < K_MCSE, z
    zw = _invariance_z(model, counts, step, 15_000, rng, moving_mass=True)
    assert np.max(np.abs(zw)) > 2 * K_MCSE, zw


def test_hmc_step_adapts_by_robbins_monro_then_freezes():
    """The recursion ``log eps += (a - target) min(1, 5 t^-0.6)``, clipped to [-12, 2], in the
    warm-up; ``record(adapting=False)`` never changes eps; bad starting steps are refused."""
    step = HMCStep(0.5, target=0.75)
    log_eps = math.log(0.5)
    for t, a in enumerate([0.2, 0.9, 1.0, 0.0, 0.75, 0.6], start=1):
        step.info["accept_prob"] = a
        step.record(adapting=True)
        log_eps += (a - 0.75) * min(1.0, 5.0 * t ** -0.6)
        assert step.log_eps == pytest.approx(log_eps, abs=1e-12) and step.t == t
    frozen = step.eps
    for a in (0.0, 1.0, 0.3):
        step.info["accept_prob"] = a
        step.record(adapting=False)
        assert step.eps == frozen
    assert step.kept == 3 and step.accept_sum == pytest.approx(1.3)
    big = HMCStep(5.0, target=0.0)
    for _ in range(50):
        big.info["accept_prob"] = 1.0
        big.record(adapting=True)
    assert big.log_eps == 2.0                       # clipped above
    small = HMCStep(1e-3, target=1.0)
    for _ in range(2000):
        small.info["accept_prob"] = 0.0
        small.record(adapting=True)
    assert small.log_eps == -12.0                   # clipped below
    for bad in (0.0, -1.0, float("nan"), float("inf")):
        with pytest.raises(PrivpostError, match="step size"):
            HMCStep(bad)


def test_count_table_update_reads_the_step_and_reports_its_acceptance():
    """The count table's theta update (``OccupiedTable``'s ``update``) takes its step size from
    the HMCStep and writes ``info["accept_prob"]`` in [0, 1] -- what the adaptation reads."""
    model = _model()
    dom = np.array([[0, 0], [0, 1], [1, 0], [1, 1]])
    c = np.array([4.0, 5.0, 0.0, 1.0])              # x_0 = 1 once, x_1 = 1 six times
    rel = pp.release(np.repeat(dom, c.astype(int), axis=0),
                     query=MarginalTables([2, 2], [[0], [1]]),
                     mechanism=Laplace(epsilon=1.0), seed=3)
    law = model.count_latent(rel)
    assert law.hmc_step == model.step_size
    params = model.prior_sample(np.random.default_rng(0))
    draws = {}
    for eps in (0.05, 1.5):
        step = HMCStep(eps)
        out = law.update(params, c, np.random.default_rng(1), step=step)
        a = step.info["accept_prob"]
        assert 0.0 <= a <= 1.0
        draws[eps] = model.flatten(out)
    assert not np.allclose(draws[0.05], draws[1.5])   # the step size reached the kernel


def test_update_counts_refuses_a_mass_factor_that_is_not_lower_triangular():
    """``mass_chol`` must be a lower Cholesky factor: the kernel draws momenta as ``L xi`` and
    computes the kinetic energy from the lower triangle only, so an upper-triangular (``L'``),
    full or non-positive-diagonal matrix would silently give a wrong kernel."""
    import numpy as np

    from privpost.errors import PrivpostError
    from privpost.models import CliqueMRF

    model = CliqueMRF([2, 2], [[0], [1]], prior_sd=2.0)
    r = model.identified_basis()[0].shape[1]
    theta = np.zeros(model.dim)
    counts = np.array([9.0, 1.0, 5.0, 5.0])
    rng = np.random.default_rng(0)
    good = np.linalg.cholesky(np.eye(r) * 3.0 + 0.5)
    model.update_counts(theta, counts, 10.0, rng, mass_chol=good)        # accepted
    for bad in (good.T, -good,
                np.where(np.eye(r, dtype=bool), np.nan, good)):
        with pytest.raises(PrivpostError, match="mass_chol"):
            model.update_counts(theta, counts, 10.0, rng, mass_chol=bad)
