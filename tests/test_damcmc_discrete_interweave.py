"""Non-centred (interweaving) theta-move of DA-MCMC for discrete records: PoissonGamma and
DirichletCategorical (random walk in additive log-ratio coordinates, Jacobian prod_j p_j).

Randomised innovations u | x, lam ~ U(F(x - 1), F(x)) (F the Poisson CDF), x = F^-1(u; lam).
Statistical checks as in tests/test_damcmc.py: |estimate - exact| < K_MCSE MCSE against the exact
posterior (n-fold convolution of the clamped-count pmf + quadrature over lam), and a wrong
innovation law that still round-trips must fail by more than K_MCSE MCSE.
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from scipy import stats
from scipy.special import pdtr

from privpost import diagnostics

from privpost.inference.damcmc import run
from privpost.mechanisms import DiscreteGaussian, Laplace
from privpost.models import DirichletCategorical, PoissonGamma
from privpost.queries import Histogram, Sum
from privpost.releases.release import Release

from _tolerance import P_CHECK
from test_damcmc import (K_MCSE, dirichlet_categorical_exact, poisson_clamped_exact, z_mean,
                         z_sd)

warnings.filterwarnings("ignore", category=FutureWarning)

# 5 Poisson counts clamped to [0, 4], Laplace(1) noise on their sum, observed 14.2
SHAPE, RATE, N, BOUND, S_OBS, B = 2.0, 0.5, 5, 4, 14.2, 1.0


def _release(n=N, bound=BOUND, s_obs=S_OBS, b=B):
    return Release(query=Sum(bounds=(0, bound)), mechanism=Laplace(scale=b).calibrate(bound),
                   n=n, observed=np.array([s_obs]))


@pytest.fixture(scope="module")
def exact():
    return poisson_clamped_exact(SHAPE, RATE, N, BOUND, S_OBS, B)


class _UpperEndInnovations(PoissonGamma):
    """Deliberately wrong: u = F(x) (the top of the interval) instead of u ~ U(F(x-1), F(x)).
    It still round-trips (g(lam, F(x)) = x), so damcmc's check passes, but u is not U(0, 1)."""

    def innovations(self, params, records, rng=None):
        return pdtr(np.asarray(records, dtype=np.float64), float(params["lam"]))


def _run(model, interweave, seed=6, draws=1500):
    return run(model, _release(), draws=draws, warmup=300, chains=4, seed=seed, cores=1,
               progress=False, interweave=interweave)


def test_round_trip_is_exact_at_the_boundaries():
    m = PoissonGamma(SHAPE, RATE)
    rng = np.random.default_rng(1)
    for lam in (1e-6, 0.4, 3.0, 40.0, 700.0):
        x = rng.poisson(lam, 4000).astype(np.float64)
        u = m.innovations({"lam": lam}, x, rng)
        assert u.shape == x.shape and np.all((u >= -0.5) & (u <= 1.0) & (u != 0))
        np.testing.assert_array_equal(m.from_innovations({"lam": lam}, u), x)
        # decoded u is U(0, 1) (Kolmogorov-Smirnov, 4000 draws)
        ud = np.where(u > 0, u, 1.0 + u)
        assert stats.kstest(ud, "uniform").pvalue > P_CHECK
    for lam in (0.5, 3.0):  # u = F(k) maps to k, the next float above it to k + 1
        for k in range(5):
            F = pdtr(k, lam)
            got = m.from_innovations({"lam": lam}, np.array([F, np.nextafter(F, 2.0)]))
            np.testing.assert_array_equal(got, [k, k + 1])
    # the wrong variant: not uniform (all mass at interval tops)
    ud = _UpperEndInnovations(SHAPE, RATE).innovations({"lam": 3.0}, rng.poisson(3.0, 4000))
    assert stats.kstest(ud, "uniform").pvalue < 1e-6


def test_poisson_interweave_is_on_by_default_and_exact(exact):
    mean, sd = exact
    post = run(PoissonGamma(SHAPE, RATE), _release(), draws=2000, warmup=300, chains=4, seed=6,
               cores=1, progress=False)
    lam = post.draws["lam"]
    assert abs(z_mean(lam, mean)) < K_MCSE and abs(z_sd(lam, sd)) < K_MCSE
    acc = post.chain_stats["interweave_accept_rate"]
    assert acc.shape == (4,) and np.all((acc > 0.1) & (acc < 0.9)), acc
    # ignoring the clamp (unclamped conjugate answer with sum = s_obs) is detected
    assert abs(z_mean(lam, (SHAPE + S_OBS) / (RATE + N))) > K_MCSE


def test_poisson_several_moves_exact_and_wrong_innovations_fail(exact):
    mean, sd = exact
    good = _run(PoissonGamma(SHAPE, RATE), 3).draws["lam"]
    assert abs(z_mean(good, mean)) < K_MCSE and abs(z_sd(good, sd)) < K_MCSE
    bad = _run(_UpperEndInnovations(SHAPE, RATE), 3).draws["lam"]
    assert max(abs(z_mean(bad, mean)), abs(z_sd(bad, sd))) > K_MCSE


def test_poisson_interweave_raises_ess_per_iteration_at_small_epsilon():
    """n = 50 counts clamped to [0, 10], eps = 0.1 (Laplace scale 100): lam | x is much narrower
    than lam | s_dp and the centred sampler crawls; same release, seed and length, one chain.
    (benchmarks/bench_discrete_interweave.py measured a ratio of 8-11 at 4000 iterations.)"""
    rng = np.random.default_rng(0)
    x = rng.poisson(4.0, 50)
    s = float(np.minimum(x, 10).sum() + rng.laplace(0.0, 100.0))
    rel = _release(n=50, bound=10, s_obs=s, b=100.0)
    ess = {}
    for iw in (False, 1):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            post = run(PoissonGamma(SHAPE, RATE), rel, draws=3000, warmup=300, chains=1,
                       seed=1, cores=1, progress=False, interweave=iw, fast_path=False)
        ess[iw] = diagnostics.ess_bulk(post.draws["lam"])
    assert ess[1] > 3.0 * ess[False], ess


# ============================================================================================
# DirichletCategorical: u | x, p ~ U(c_{x-1}, c_x], walk on v = log(p_j / p_{k-1})
# ============================================================================================

ALPHA, NC, SIGMA, S_HIST = [1.0, 2.0, 1.0], 6, 1.2, np.array([5.0, -1.0, 3.0])


class _NoJacobian(DirichletCategorical):
    """Deliberately wrong: the walk in log-ratio coordinates without the Jacobian prod_j p_j."""

    def interweave_log_jacobian(self, params):
        return 0.0


def _hist_run(model, interweave, draws):
    rel = Release(query=Histogram(3), mechanism=DiscreteGaussian(scale=SIGMA).calibrate(
        np.sqrt(2.0)), n=NC, observed=S_HIST)
    return run(model, rel, draws=draws, warmup=300, chains=4, seed=3, cores=1, progress=False,
               interweave=interweave)


def test_categorical_round_trip_and_coordinates():
    m = DirichletCategorical(ALPHA)
    rng = np.random.default_rng(2)
    p = {"p": np.array([0.2, 0.5, 0.3])}
    x = m.simulate(p, 4000, rng)
    u = m.innovations(p, x, rng)
    np.testing.assert_array_equal(m.from_innovations(p, u), x)
    assert stats.kstest(u, "uniform").pvalue > P_CHECK
    c = np.cumsum(p["p"])   # u = c_j maps to j, the next float above it to j + 1
    got = m.from_innovations(p, np.array([c[0], np.nextafter(c[0], 2), c[1],
                                          np.nextafter(c[1], 2), 1.0]))
    np.testing.assert_array_equal(got, [0, 1, 1, 2, 2])
    v = m.interweave_to_free(p)
    np.testing.assert_allclose(m.interweave_from_free(p, v)["p"], p["p"], rtol=1e-14)
    # the Jacobian against finite differences of p_{0:k-1}(v)
    J = np.empty((2, 2))
    for j in range(2):
        e = np.zeros(2)
        e[j] = 1e-6
        J[:, j] = (m.interweave_from_free(p, v + e)["p"][:2]
                   - m.interweave_from_free(p, v - e)["p"][:2]) / 2e-6
    assert abs(np.log(abs(np.linalg.det(J))) - m.interweave_log_jacobian(p)) < 1e-6


def test_categorical_interweave_exact_and_missing_jacobian_fails():
    mean, sd = dirichlet_categorical_exact(ALPHA, NC, S_HIST, SIGMA)
    post = _hist_run(DirichletCategorical(ALPHA), 2, 1000)
    p = post.draws["p"]
    assert any("interweaving" in note for note in post.notes)
    for j in range(3):
        zm, zs = z_mean(p[..., j], mean[j]), z_sd(p[..., j], sd[j])
        assert abs(zm) < K_MCSE and abs(zs) < K_MCSE, (j, zm, zs)
    p = _hist_run(_NoJacobian(ALPHA), 2, 1000).draws["p"]
    worst = max(max(abs(z_mean(p[..., j], mean[j])), abs(z_sd(p[..., j], sd[j])))
                for j in range(3))
    assert worst > K_MCSE, worst


def test_categorical_interweave_raises_ess_per_iteration_at_small_epsilon():
    """n = 100 labels, Histogram(3) with Laplace noise of scale 20 (eps = 0.1): worst bulk ESS
    of p_j per iteration, same release, seed and length, one chain."""
    from privpost.models import DirichletCategorical as DC

    rng = np.random.default_rng(0)
    labels = rng.choice(3, size=100, p=[0.2, 0.5, 0.3])
    s = np.bincount(labels, minlength=3) + rng.laplace(0.0, 20.0, 3)
    rel = Release(query=Histogram(3), mechanism=Laplace(scale=20.0).calibrate(2.0), n=100,
                  observed=s)
    ess = {}
    for iw in (False, 1):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            post = run(DC(1.0, k=3), rel, draws=2700, warmup=300, chains=1, seed=1, cores=1,
                       progress=False, interweave=iw, fast_path=False)
        p = post.draws["p"]
        ess[iw] = min(diagnostics.ess_bulk(p[..., j]) for j in range(3))
    # measured here: 119 vs 262 (x2.2); the benchmark's data set gives x17 -- short slow chains
    # make ESS estimates noisy, so the test only asserts a clear gain
    assert ess[1] > 1.5 * ess[False], ess
