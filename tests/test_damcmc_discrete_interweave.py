"""Non-centred (interweaving) theta-move of DA-MCMC for discrete records: PoissonGamma.

Randomised innovations u | x, lam ~ U(F(x - 1), F(x)) (F the Poisson CDF), x = F^-1(u; lam).
Statistical checks as in tests/test_damcmc.py: |estimate - exact| < 4 MCSE against the exact
posterior (n-fold convolution of the clamped-count pmf + quadrature over lam), and a wrong
innovation law that still round-trips must fail by more than 4 MCSE.
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from scipy import stats
from scipy.special import pdtr

from privpost import diagnostics

from privpost.inference.damcmc import run
from privpost.mechanisms import Laplace
from privpost.models import PoissonGamma
from privpost.queries import Sum
from privpost.release import Release

from test_damcmc import K_MCSE, poisson_clamped_exact, z_mean, z_sd

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
        assert stats.kstest(ud, "uniform").pvalue > 1e-4
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
