"""Tests of the DA-MCMC sampler (privpost.inference.damcmc), DESIGN.md §6.

Statistical checks compare sampler output with posteriors computed exactly (enumeration or
closed-form mixtures) with tolerances from the chain's own Monte Carlo error: |estimate - exact|
< K_MCSE MCSE (tests/_tolerance.py: family-wise), MCSE from the ArviZ effective sample size of
the relevant function of the draws.
Every statistical check has a companion showing that a deliberately wrong target fails it.
"""

from __future__ import annotations

import itertools
import math
import os
import signal
import threading
import types
import warnings

import numpy as np
import pytest
from scipy import optimize, special, stats

from privpost.errors import IncompatibleError, PrivpostError
from privpost.inference import _kernels
from privpost.inference.damcmc import Sampler, run
from privpost.mechanisms import (DiscreteGaussian, DiscreteLaplace, Gaussian, Laplace,
                                 RandomizedResponse)
from privpost.models import BetaBernoulli, DirichletCategorical, NormalKnownVariance
from privpost.queries import Histogram, RegressionStats, Sum
from privpost.releases.release import Release

warnings.filterwarnings("ignore", category=FutureWarning)  # arviz refactor notice

from _tolerance import K_MCSE  # noqa: E402  (family-wise; tests/_tolerance.py)


# ============================================================================================
# Monte Carlo error helpers
# ============================================================================================

def _ess(x) -> float:
    import arviz as az

    return float(az.ess(np.atleast_2d(np.asarray(x, dtype=float)), method="mean"))


def z_mean(draws, exact) -> float:
    """(mean - exact) / MCSE; draws (chains, draws)."""
    se = draws.std() / math.sqrt(_ess(draws))
    return (draws.mean() - exact) / se


def z_sd(draws, exact_sd) -> float:
    """(sd - exact) / MCSE(sd), MCSE by the delta method on the squared deviations."""
    y = (draws - draws.mean()) ** 2
    se_var = y.std() / math.sqrt(_ess(y))
    return (math.sqrt(y.mean()) - exact_sd) / (se_var / (2 * exact_sd))


def z_cdf(draws, xi, q) -> float:
    """(empirical P(theta <= xi) - q) / MCSE at the exact q-quantile xi."""
    ind = (draws <= xi).astype(float)
    se = math.sqrt(q * (1 - q) / _ess(ind))
    return (ind.mean() - q) / se


def z_scores(draws, mean, sd, quantiles: dict) -> dict:
    out = {"mean": z_mean(draws, mean), "sd": z_sd(draws, sd)}
    for q, xi in quantiles.items():
        out[f"q{q}"] = z_cdf(draws, xi, q)
    return out


# ============================================================================================
# exact posteriors
# ============================================================================================

def beta_bernoulli_exact(a, b, n, s_obs, logpdf_noise):
    """Private posterior of theta: mixture over k = sum(x) of Beta(a + k, b + n - k) with weights
    BetaBinomial(k; n, a, b) * eta(s_obs | k) (DESIGN §6: p(s|theta) = sum_k Binom Lap)."""
    k = np.arange(n + 1)
    logw = (special.gammaln(n + 1) - special.gammaln(k + 1) - special.gammaln(n - k + 1)
            + special.betaln(a + k, b + n - k) - special.betaln(a, b)
            + np.array([logpdf_noise(s_obs - kk) for kk in k]))
    w = np.exp(logw - logw.max())
    w /= w.sum()
    A, B = a + k, b + n - k
    mean = float(w @ (A / (A + B)))
    m2 = float(w @ (A * (A + 1) / ((A + B) * (A + B + 1))))
    sd = math.sqrt(m2 - mean ** 2)

    def cdf(x):
        return float(w @ stats.beta.cdf(x, A, B))

    qs = {q: optimize.brentq(lambda x: cdf(x) - q, 1e-12, 1 - 1e-12) for q in (0.1, 0.5, 0.9)}
    return {"mean": mean, "sd": sd, "quantiles": qs, "weights": w}


def _quadrature_mean(a, b, n, s_obs, logpdf_noise):
    """Same posterior mean by brute-force quadrature over theta (independent cross-check)."""
    th = np.linspace(1e-6, 1 - 1e-6, 20001)
    k = np.arange(n + 1)
    lik = (stats.binom.pmf(k[:, None], n, th[None, :])
           * np.exp([logpdf_noise(s_obs - kk) for kk in k])[:, None]).sum(axis=0)
    dens = stats.beta.pdf(th, a, b) * lik
    return float(np.trapezoid(th * dens, th) / np.trapezoid(dens, th))


def sum_release(n, s_obs, mech, bounds=(0, 1)):
    q = Sum(bounds=bounds)
    m = mech.calibrate(q.sensitivity(mech.sensitivity_norm, "replace"))
    return Release(query=q, mechanism=m, n=n, observed=np.array([float(s_obs)]))


def laplace_logpdf(b):
    return lambda z: -abs(z) / b - math.log(2 * b)


# Problem (a): 8 Bernoulli records, Laplace noise of scale 1 on their sum, observed 6.7 (far from
# the prior predictive centre, so the noise scale matters).
A_, B_, N_, S_ = 2.0, 2.0, 8, 6.7


@pytest.fixture(scope="module")
def exact_a():
    return beta_bernoulli_exact(A_, B_, N_, S_, laplace_logpdf(1.0))


def test_exact_mixture_matches_quadrature(exact_a):
    q = _quadrature_mean(A_, B_, N_, S_, laplace_logpdf(1.0))
    assert abs(q - exact_a["mean"]) < 1e-7


def _theta(post):
    return post.draws["theta"]


# ============================================================================================
# (a) exact target by enumeration, both paths, several sweeps per iteration
# ============================================================================================

@pytest.mark.parametrize("fast_path,k", [(False, 1), (True, 1), (False, 3)])
def test_beta_bernoulli_laplace_exact(exact_a, fast_path, k):
    rel = sum_release(N_, S_, Laplace(scale=1.0))
    post = run(BetaBernoulli(A_, B_), rel, draws=6000, warmup=300, chains=4, seed=11,
               cores=1, progress=False, fast_path=fast_path, sweeps_per_iteration=k)
    z = z_scores(_theta(post), exact_a["mean"], exact_a["sd"], exact_a["quantiles"])
    assert all(abs(v) < K_MCSE for v in z.values()), z
    assert post.exact is True
    assert any("exact" in note for note in post.notes)


def test_wrong_scale_is_detected(exact_a):
    """Power check: sampling with Laplace scale 3 instead of 1 must fail the same comparison."""
    rel = sum_release(N_, S_, Laplace(scale=3.0))
    post = run(BetaBernoulli(A_, B_), rel, draws=6000, warmup=300, chains=4, seed=11,
               cores=1, progress=False)
    z = z_scores(_theta(post), exact_a["mean"], exact_a["sd"], exact_a["quantiles"])
    assert max(abs(v) for v in z.values()) > 2 * K_MCSE, z


# ============================================================================================
# (b) epsilon -> infinity: the non-private conjugate posterior
# ============================================================================================

def test_tiny_noise_gives_nonprivate_posterior():
    n, k_true = 10, 6
    rel = Release(query=Sum(bounds=(0, 1)), mechanism=Laplace(scale=1e-6).calibrate(1.0), n=n,
                  observed=np.array([k_true + 3e-7]))
    post = run(BetaBernoulli(2.0, 3.0), rel, draws=4000, warmup=300, chains=4, seed=5,
               cores=1, progress=False)
    ref = stats.beta(2.0 + k_true, 3.0 + n - k_true)
    qs = {q: ref.ppf(q) for q in (0.1, 0.5, 0.9)}
    z = z_scores(_theta(post), ref.mean(), ref.std(), qs)
    assert all(abs(v) < K_MCSE for v in z.values()), z
    # the latent records reproduce the observed count exactly
    assert np.allclose(post.sample_stats["log_eta"][:, -1],
                       -math.log(2e-6) - 3e-7 / 1e-6, atol=1e-6)
    # and the wrong limit (off by one count) is rejected
    wrong = stats.beta(2.0 + k_true + 1, 3.0 + n - k_true - 1)
    assert abs(z_mean(_theta(post), wrong.mean())) > 2 * K_MCSE


def test_huge_noise_gives_the_prior():
    """epsilon -> 0: eta is flat, the private posterior is the prior."""
    rel = sum_release(N_, S_, Laplace(scale=1e7))
    post = run(BetaBernoulli(A_, B_), rel, draws=3000, warmup=100, chains=4, seed=6,
               cores=1, progress=False, latent="records")
    ref = stats.beta(A_, B_)
    z = z_scores(_theta(post), ref.mean(), ref.std(), {q: ref.ppf(q) for q in (0.1, 0.9)})
    assert all(abs(v) < K_MCSE for v in z.values()), z
    assert post.sample_stats["accept_rate"].mean() > 0.999


# ============================================================================================
# (c) Prop. 3.1: alpha >= exp(-epsilon) per proposal under pure epsilon-DP (replace-one)
# ============================================================================================

def _random_pairs(query, records_fn, rng, n_pairs):
    """Random states: T = sum of contributions of random records; t_cur, t_prop = contributions
    of two random records (the replaced one and its replacement)."""
    n = 20
    out = []
    for _ in range(n_pairs):
        recs = records_fn(rng, n + 1)
        t = query.t(recs)
        out.append((t[:n].sum(axis=0), t[0], t[n]))
    return out


CASES_C = {
    "sum-laplace": (Sum(bounds=(-2, 3)), Laplace,
                    lambda r, m: r.uniform(-4, 5, m)),
    "regression-laplace-13": (RegressionStats([(-10, 10), (-10, 10)], (-10, 10), sensitivity=13),
                              Laplace, lambda r, m: r.uniform(-12, 12, (m, 3))),
    "histogram-discrete-laplace": (Histogram(4), DiscreteLaplace,
                                   lambda r, m: r.integers(0, 4, m)),
}


@pytest.mark.parametrize("case", sorted(CASES_C))
@pytest.mark.parametrize("eps", [0.1, 1.0, 3.0])
def test_acceptance_lower_bound(case, eps):
    query, mech_cls, records_fn = CASES_C[case]
    mech = mech_cls(epsilon=eps).calibrate(query.sensitivity("l1", "replace"))
    rng = np.random.default_rng(hash((case, eps)) % 2**32)
    d = query.dim
    worst = np.inf
    for T, tc, tp in _random_pairs(query, records_fn, rng, 400):
        # s_dp anywhere: near T, or far away
        s = T + rng.normal(0, 3 * mech.scale, d) * rng.choice([0.1, 1, 10])
        if mech.discrete:
            s = np.round(s)
        lr = _kernels.log_ratio("l1", T, s, tc, tp, mech.scale)
        # the compiled kernel's ratio is the mechanism's density ratio
        want = float(mech.logpdf(s, T - tc + tp) - mech.logpdf(s, T))
        assert lr == pytest.approx(want, rel=1e-9, abs=1e-9)
        worst = min(worst, lr)
        # and the sweep accepts whenever log u < -epsilon
        acc = _kernels.sweep("l1", T.copy(), s, tc[None, :].copy(), tp[None, :],
                             None, np.array([-eps - 1e-9]), mech.scale)
        assert acc[0]
    assert worst >= -eps - 1e-9
    # the bound is attained up to a small slack on these domains (the check has power)
    assert worst < -0.3 * eps


def test_acceptance_bound_fails_for_a_miscalibrated_scale():
    """Calibrating a histogram to its add/remove sensitivity (1) but sampling replace-one
    neighbours breaks the exp(-eps) bound (it becomes exp(-2 eps)): the check detects it."""
    eps = 1.0
    q = Histogram(3)
    scale = 1.0 / eps          # add/remove sensitivity 1 instead of replace-one 2
    T = np.array([5.0, 5.0, 5.0])
    s = np.array([3.0, 7.0, 5.0])
    lr = _kernels.log_ratio("l1", T, s, q.t([1])[0], q.t([0])[0], scale)
    assert lr < -eps - 0.5


def test_kernel_matches_mechanism_density_l2():
    rng = np.random.default_rng(3)
    for mech in (Gaussian(scale=1.7).calibrate(1.0), DiscreteGaussian(scale=2.3).calibrate(1.0)):
        for _ in range(50):
            T = np.round(rng.normal(0, 5, 4))
            s = T + np.round(rng.normal(0, 3, 4))
            tc = rng.integers(0, 2, 4).astype(float)
            tp = rng.integers(0, 2, 4).astype(float)
            lr = _kernels.log_ratio("l2", T, s, tc, tp, mech.scale)
            want = float(mech.logpdf(s, T - tc + tp) - mech.logpdf(s, T))
            assert lr == pytest.approx(want, rel=1e-9, abs=1e-9)


def test_sweep_is_sequential_metropolis():
    """One sweep over 3 records equals three single-record Metropolis steps in order."""
    rng = np.random.default_rng(7)
    tc = rng.uniform(0, 1, (3, 2))
    tp = rng.uniform(0, 1, (3, 2))
    s = np.array([1.0, 2.5])
    log_u = np.log(rng.uniform(size=3))
    T = tc.sum(axis=0)
    T1, tc1 = T.copy(), tc.copy()
    acc = _kernels.sweep("l1", T1, s, tc1, tp, None, log_u, 0.4)
    T2, tc2 = T.copy(), tc.copy()
    for i in range(3):
        new = T2 - tc2[i] + tp[i]
        ratio = (-np.abs(s - new).sum() + np.abs(s - T2).sum()) / 0.4
        if log_u[i] < ratio:
            T2, tc2[i] = new, tp[i]
            assert acc[i]
        else:
            assert not acc[i]
    np.testing.assert_allclose(T1, T2, rtol=0, atol=1e-12)
    np.testing.assert_array_equal(tc1, tc2)


# ============================================================================================
# (d) running sums recomputed from scratch agree
# ============================================================================================

def test_running_sum_has_no_drift():
    q = Sum(bounds=(-1.5, 2.0))
    rel = Release(query=q, mechanism=Laplace(scale=0.7).calibrate(3.5), n=50,
                  observed=np.array([12.3]))
    s = Sampler(NormalKnownVariance(0.0, 2.0, 1.0), rel, sweeps_per_iteration=2)
    rng = np.random.default_rng(1)
    st = s.init(rng)
    for _ in range(3000):
        s.step(st, rng)
    # t_cur tracks the records exactly; T agrees with a fresh sum to rounding
    np.testing.assert_array_equal(st.t_cur, q.t(st.records))
    t_before = st.T.copy()
    drift = s.recompute(st)
    assert drift < 1e-9
    np.testing.assert_allclose(t_before, q.t(st.records).sum(axis=0), atol=1e-9)
    assert math.isfinite(s.log_eta(st))


def test_running_sum_compiled_driver():
    from privpost.inference._damcmc_fast import CompiledChain, resolve_fast_path

    q = Histogram(4)
    rel = Release(query=q, mechanism=DiscreteLaplace(scale=1.5).calibrate(2.0), n=30,
                  observed=np.array([3.0, 12.0, 7.0, 9.0]))
    s = Sampler(DirichletCategorical([1.0, 1.0, 1.0, 1.0]), rel)
    fast = resolve_fast_path(s.problem, True)
    ch = CompiledChain(fast, s, 0, np.random.default_rng(2), None, 10, 2000, 1,
                       recompute_every=0)
    ch.advance(ch.total)
    recs = ch.records[:, 0].astype(np.int64)
    np.testing.assert_array_equal(ch.t_cur, q.t(recs))
    np.testing.assert_array_equal(ch.T, q.t(recs).sum(axis=0))   # counts: exact


# ============================================================================================
# (e) a discrete mechanism: discrete Gaussian on a histogram, exact by enumeration
# ============================================================================================

def dirichlet_categorical_exact(alpha, n, s_obs, sigma):
    alpha = np.asarray(alpha, float)
    K = alpha.size
    A0 = alpha.sum()
    ws, means, m2s = [], [], []
    for c in itertools.product(range(n + 1), repeat=K):
        c = np.array(c)
        if c.sum() != n:
            continue
        logw = (special.gammaln(n + 1) - special.gammaln(c + 1).sum()
                + special.gammaln(A0) - special.gammaln(A0 + n)
                + (special.gammaln(alpha + c) - special.gammaln(alpha)).sum()
                - ((s_obs - c) ** 2).sum() / (2 * sigma ** 2))
        ws.append(logw)
        a = alpha + c
        means.append(a / (A0 + n))
        m2s.append(a * (a + 1) / ((A0 + n) * (A0 + n + 1)))
    w = np.exp(np.array(ws) - max(ws))
    w /= w.sum()
    mean = w @ np.array(means)
    sd = np.sqrt(w @ np.array(m2s) - mean ** 2)
    return mean, sd


@pytest.mark.parametrize("fast_path", [False, True])
def test_discrete_gaussian_histogram_exact(fast_path):
    alpha, n, sigma = [1.0, 2.0, 1.0], 6, 1.2
    s_obs = np.array([5.0, -1.0, 3.0])
    rel = Release(query=Histogram(3), mechanism=DiscreteGaussian(scale=sigma).calibrate(
        math.sqrt(2)), n=n, observed=s_obs)
    mean, sd = dirichlet_categorical_exact(alpha, n, s_obs, sigma)
    post = run(DirichletCategorical(alpha), rel, draws=5000, warmup=300, chains=4, seed=3,
               cores=1, progress=False, fast_path=fast_path)
    p = post.draws["p"]
    for j in range(3):
        zm, zs = z_mean(p[..., j], mean[j]), z_sd(p[..., j], sd[j])
        assert abs(zm) < K_MCSE and abs(zs) < K_MCSE, (j, zm, zs)
    # wrong target (sigma 3x too large) is far off
    wmean, _ = dirichlet_categorical_exact(alpha, n, s_obs, 3 * sigma)
    assert max(abs(z_mean(p[..., j], wmean[j])) for j in range(3)) > 2 * K_MCSE


# ============================================================================================
# (f) Algorithm 2 with a non-trivial user proposal
# ============================================================================================

class FlipProposal:
    """Flip x_i with probability 0.6 from 0 and 0.9 from 1 (else keep): asymmetric, depends on
    x_i only."""

    p_flip = {0.0: 0.6, 1.0: 0.9}

    def __init__(self, correct=True):
        self.correct = correct

    def propose(self, records, params, rng):
        pf = np.where(records == 1.0, 0.9, 0.6)
        flip = rng.random(records.shape[0]) < pf
        return np.where(flip, 1.0 - records, records)

    def log_ratio(self, records, proposed, params):
        # log q(x | x*) - log q(x* | x): for a flip 0 -> 1 it is log(0.9 / 0.6); staying: 0
        if not self.correct:
            return np.zeros(records.shape[0])
        out = np.zeros(records.shape[0])
        up = (records == 0.0) & (proposed == 1.0)
        down = (records == 1.0) & (proposed == 0.0)
        out[up] = math.log(0.9 / 0.6)
        out[down] = math.log(0.6 / 0.9)
        return out


def test_algorithm2_user_proposal_exact(exact_a):
    rel = sum_release(N_, S_, Laplace(scale=1.0))
    post = run(BetaBernoulli(A_, B_), rel, draws=6000, warmup=300, chains=4, seed=12,
               cores=1, progress=False, proposal=FlipProposal())
    z = z_scores(_theta(post), exact_a["mean"], exact_a["sd"], exact_a["quantiles"])
    assert all(abs(v) < K_MCSE for v in z.values()), z
    assert any("Algorithm 2" in note for note in post.notes)


def test_algorithm2_wrong_ratio_is_detected(exact_a):
    rel = sum_release(N_, S_, Laplace(scale=1.0))
    post = run(BetaBernoulli(A_, B_), rel, draws=6000, warmup=300, chains=4, seed=12,
               cores=1, progress=False, proposal=FlipProposal(correct=False))
    z = z_scores(_theta(post), exact_a["mean"], exact_a["sd"], exact_a["quantiles"])
    assert max(abs(v) for v in z.values()) > 2 * K_MCSE, z


# ============================================================================================
# (g) validation errors
# ============================================================================================

def test_randomized_response_is_rejected():
    rr = RandomizedResponse(epsilon=1.0, categories=3)
    rel = Release(query=Histogram(3), mechanism=rr, n=4, observed=np.array([0.0, 1.0, 2.0, 1.0]))
    with pytest.raises(IncompatibleError, match="randomized_response has no density usable by "
                                                "damcmc"):
        run(DirichletCategorical([1.0, 1.0, 1.0]), rel, draws=10, warmup=0, chains=1)


def test_model_query_mismatch_is_rejected():
    rel = Release(query=Histogram(3), mechanism=DiscreteLaplace(scale=1.0).calibrate(2.0), n=4,
                  observed=np.array([1.0, 2.0, 1.0]))
    with pytest.raises(IncompatibleError):
        run(BetaBernoulli(1, 1), rel, draws=10, warmup=0, chains=1)


def _fake_release(**kw):
    base = dict(query=Sum(bounds=(0, 1)), mechanism=Laplace(scale=1.0).calibrate(1.0), n=5,
                observed=np.array([2.0]))
    base.update(kw)
    return types.SimpleNamespace(**base)


def test_dimension_mismatch_is_rejected():
    with pytest.raises(IncompatibleError, match="d = 1"):
        run(BetaBernoulli(1, 1), _fake_release(observed=np.array([1.0, 2.0])), draws=10,
            warmup=0, chains=1)


def test_discrete_noise_on_real_query_is_rejected():
    mech = DiscreteLaplace(scale=1.0).calibrate(1.0)
    with pytest.raises(IncompatibleError, match="integer"):
        run(NormalKnownVariance(), _fake_release(mechanism=mech), draws=10, warmup=0, chains=1)


def test_uncalibrated_mechanism_is_rejected():
    with pytest.raises(IncompatibleError, match="scale"):
        run(BetaBernoulli(1, 1), _fake_release(mechanism=Laplace(epsilon=1.0)), draws=10,
            warmup=0, chains=1)


def test_bad_proposal_and_options_are_rejected():
    rel = sum_release(5, 2.0, Laplace(scale=1.0))
    with pytest.raises(IncompatibleError, match="log_ratio"):
        run(BetaBernoulli(1, 1), rel, proposal=types.SimpleNamespace(propose=lambda *a: a[0]),
            draws=10, warmup=0, chains=1)
    with pytest.raises(PrivpostError, match="draws"):
        run(BetaBernoulli(1, 1), rel, draws=0)
    with pytest.raises(PrivpostError, match="thin"):
        run(BetaBernoulli(1, 1), rel, thin=0)
    with pytest.raises(IncompatibleError, match="fast_path=True"):
        run(BetaBernoulli(1, 1), rel, proposal=FlipProposal(), fast_path=True, draws=5,
            warmup=0, chains=1)
    with pytest.raises(IncompatibleError, match="init records"):
        run(BetaBernoulli(1, 1), rel, init={"records": np.zeros(4)}, draws=5, warmup=0,
            chains=1)


# ============================================================================================
# reproducibility, paths, bookkeeping
# ============================================================================================

def test_same_seed_same_draws_regardless_of_cores():
    rel = sum_release(N_, S_, Laplace(scale=1.0))
    kw = dict(draws=200, warmup=50, chains=3, seed=99, progress=False)
    for fast in (False, True):
        a = run(BetaBernoulli(A_, B_), rel, cores=1, fast_path=fast, **kw)
        b = run(BetaBernoulli(A_, B_), rel, cores=2, fast_path=fast, **kw)
        np.testing.assert_array_equal(a.draws["theta"], b.draws["theta"])
        np.testing.assert_array_equal(a.sample_stats["accept_rate"],
                                      b.sample_stats["accept_rate"])
        assert not np.array_equal(a.draws["theta"][0], a.draws["theta"][1])


def test_compiled_and_generic_paths_give_the_same_chain():
    """The compiled model functions consume the Generator as the Python ones do, so both paths
    produce the same chain (up to rounding) -- a strong check of the compiled driver."""
    rel = sum_release(N_, S_, Laplace(scale=1.0))
    kw = dict(draws=300, warmup=20, chains=2, seed=4, progress=False, cores=1, thin=2,
              sweeps_per_iteration=2, interweave=False)   # the compiled driver's kernel
    a = run(BetaBernoulli(A_, B_), rel, fast_path=False, **kw)
    b = run(BetaBernoulli(A_, B_), rel, fast_path=True, **kw)
    np.testing.assert_allclose(a.draws["theta"], b.draws["theta"], rtol=1e-12)
    for key in ("log_eta", "accept_rate", "accept_min"):
        np.testing.assert_allclose(a.sample_stats[key], b.sample_stats[key], rtol=1e-12)
    for key in ("record_accept_rate", "min_sweep_accept"):
        np.testing.assert_allclose(a.chain_stats[key], b.chain_stats[key], rtol=1e-12)
    assert "compiled chain driver" in b.notes[1] and "NumPy" in a.notes[1]


@pytest.mark.parametrize("case", ["naive-bayes", "regression"])
def test_builtin_compiled_contributions_and_paths(case):
    """Built-in compiled contributions equal query.t, and both paths give the same chain."""
    from privpost.inference._damcmc_fast import builtin_contrib
    from privpost.models import LinearRegression, NaiveBayesLogLinear
    from privpost.queries import NaiveBayesCounts
    from privpost.releases.release import release

    rng = np.random.default_rng(0)
    if case == "naive-bayes":
        model = NaiveBayesLogLinear(n_levels=[3, 2, 4], n_classes=2)
        query = NaiveBayesCounts(n_classes=2, n_levels=[3, 2, 4])
        mech = DiscreteLaplace(epsilon=2.0)
    else:
        model = LinearRegression(p=2, sigma2=2.0, tau2=4.0, m=[0.9, -1.17])
        query = RegressionStats([(-3, 3), (-2, 4)], (-5, 5), sensitivity=13)
        mech = Laplace(epsilon=3.0)
    recs = model.simulate(model.prior_sample(rng), 40, rng)
    contrib = builtin_contrib(query)
    out = np.zeros((40, query.dim))
    contrib(np.ascontiguousarray(np.asarray(recs, np.float64).reshape(40, -1)), out)
    np.testing.assert_allclose(out, query.t(recs), rtol=1e-13, atol=1e-14)
    rel = release(recs, query=query, mechanism=mech, seed=1)
    kw = dict(draws=60, warmup=10, chains=1, seed=2, progress=False, cores=1, interweave=False)
    a = run(model, rel, fast_path=False, **kw)
    b = run(model, rel, fast_path=True, **kw)
    for name in a.draws:
        np.testing.assert_allclose(a.draws[name], b.draws[name], rtol=1e-9, atol=1e-12)


def test_thin_sweeps_and_stats_shapes():
    rel = sum_release(N_, S_, Laplace(scale=1.0))
    post = run(BetaBernoulli(A_, B_), rel, draws=50, warmup=10, chains=2, thin=3,
               sweeps_per_iteration=4, seed=1, cores=1, progress=False, fast_path=False)
    assert post.draws["theta"].shape == (2, 50)
    for key in ("accept_rate", "accept_min", "log_eta"):
        assert post.sample_stats[key].shape == (2, 50)
    assert np.all(post.sample_stats["accept_min"] <= post.sample_stats["accept_rate"] + 1e-12)
    assert post.chain_stats["record_accept_rate"].shape == (2, N_)
    assert post.chain_stats["min_sweep_accept"].shape == (2,)
    assert np.all((post.chain_stats["record_accept_rate"] >= 0)
                  & (post.chain_stats["record_accept_rate"] <= 1))
    # thinning: draw j of a thin=3 chain is iteration warmup + 3 j + 2 of the unthinned chain
    full = run(BetaBernoulli(A_, B_), rel, draws=150, warmup=10, chains=2, thin=1,
               sweeps_per_iteration=4, seed=1, cores=1, progress=False, fast_path=False)
    np.testing.assert_array_equal(post.draws["theta"], full.draws["theta"][:, 2::3])
    assert np.all(post.sample_stats["accept_min"]
                  == full.sample_stats["accept_min"].reshape(2, 50, 3).min(axis=2))


def test_init_options():
    rel = sum_release(N_, S_, Laplace(scale=1.0))
    recs = np.ones(N_)
    post = run(BetaBernoulli(A_, B_), rel, draws=5, warmup=0, chains=2, seed=1, cores=1,
               progress=False, init={"params": {"theta": 0.5}, "records": recs})
    assert post.draws["theta"].shape == (2, 5)
    post = run(BetaBernoulli(A_, B_), rel, draws=5, warmup=0, chains=2, seed=1, cores=1,
               progress=False, init=[{"theta": 0.2}, {"theta": 0.8}])
    assert post.draws["theta"].shape == (2, 5)
    with pytest.raises(PrivpostError, match="one per chain"):
        run(BetaBernoulli(A_, B_), rel, draws=5, chains=3, init=[{"theta": 0.2}])


def test_progress_bar_runs(capsys):
    rel = sum_release(N_, S_, Laplace(scale=1.0))
    post = run(BetaBernoulli(A_, B_), rel, draws=20, warmup=5, chains=2, seed=1, cores=1,
               progress=True)
    assert post.draws["theta"].shape == (2, 20)


class _InterruptingModel(BetaBernoulli):
    """Raises KeyboardInterrupt (as Ctrl-C would) at the given update call."""

    def __init__(self, at):
        super().__init__(A_, B_)
        self.at, self.calls = at, 0

    def compiled_model(self):
        return None

    def update(self, params, records, rng):
        self.calls += 1
        if self.calls == self.at:
            raise KeyboardInterrupt
        return super().update(params, records, rng)


def test_interrupt_in_process_returns_partial_posterior():
    rel = sum_release(N_, S_, Laplace(scale=1.0))
    post = run(_InterruptingModel(at=700), rel, draws=1000, warmup=100, chains=2, seed=1,
               cores=1, progress=False, latent="records")
    n_draws = post.draws["theta"].shape[1]
    assert 0 < n_draws < 1000
    assert post.draws["theta"].shape == (2, n_draws)
    assert any("interrupted" in note for note in post.notes)


def test_interrupt_with_worker_processes():
    rel = sum_release(N_, S_, Laplace(scale=1.0))
    # a process started in the background by a non-interactive shell inherits SIGINT ignored
    # (POSIX), and Python then keeps it ignored: install the Ctrl-C handler for this test
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    timer = threading.Timer(2.0, lambda: os.kill(os.getpid(), signal.SIGINT))
    timer.start()
    try:
        post = run(BetaBernoulli(A_, B_), rel, draws=10_000_000, warmup=10, chains=2, seed=1,
                   cores=2, progress=False, fast_path=False)
    finally:
        timer.cancel()
        signal.signal(signal.SIGINT, previous)
    n_draws = post.draws["theta"].shape[1]
    assert 0 < n_draws < 10_000_000
    assert any("interrupted" in note for note in post.notes)


def test_posterior_exports_to_arviz():
    rel = sum_release(N_, S_, Laplace(scale=1.0))
    post = run(BetaBernoulli(A_, B_), rel, draws=100, warmup=10, chains=2, seed=1, cores=1,
               progress=False, latent="records")
    idata = post.to_arviz()
    assert "accept_rate" in idata.sample_stats
    assert post.model is not None and post.release is not None


# ============================================================================================
# the compiled protocol with a user model (docs/internals.md, "Compiled fast path")
# ============================================================================================

class _UserNormal(NormalKnownVariance):
    """A user model implementing compiled_model() (correctly, or with a layout bug)."""


    name = "user-normal-test"

    def __init__(self, broken=False):
        super().__init__(0.0, 2.0, 1.0)
        self.broken = broken

    def compiled_model(self):
        from numba import njit

        from privpost.inference._damcmc_fast import CompiledModel

        key = ("user-normal", self.broken)
        if key in _USER_CACHE:
            return _USER_CACHE[key]
        prec0, inv_s2, mu0, sigma = self._prec0, self._inv_s2, self.mu0, self.sigma
        broken = self.broken

        @njit
        def update(theta, records, rng):
            n = records.shape[0]
            tot = 0.0
            for i in range(n):
                tot += records[i, 0]
            prec = prec0 + n * inv_s2
            mean = (mu0 * prec0 + tot * inv_s2) / prec
            theta[0] = mean + rng.standard_normal() / math.sqrt(prec)

        @njit
        def simulate(theta, out, rng):
            for r in range(out.shape[0]):
                out[r, 0] = theta[0] + sigma * rng.standard_normal()

        # the bug: a record layout that is not the Python one
        _USER_CACHE[key] = CompiledModel(record_width=2 if broken else 1, update=update,
                                         simulate=simulate)
        return _USER_CACHE[key]


_USER_CACHE: dict = {}


def test_user_compiled_model_runs_and_matches_generic():
    rel = Release(query=Sum(bounds=(-3, 3)), mechanism=Laplace(scale=2.0).calibrate(6.0), n=20,
                  observed=np.array([9.5]))
    kw = dict(draws=200, warmup=20, chains=1, seed=8, progress=False, cores=1, interweave=False)
    a = run(_UserNormal(), rel, fast_path=False, **kw)
    b = run(_UserNormal(), rel, fast_path=True, **kw)
    np.testing.assert_allclose(a.draws["mu"], b.draws["mu"], rtol=1e-9)


def test_broken_compiled_model_is_caught():
    from privpost.inference._damcmc_fast import resolve_fast_path

    rel = Release(query=Sum(bounds=(-30, 30)), mechanism=Laplace(scale=2.0).calibrate(60.0),
                  n=20, observed=np.array([9.5]))
    with pytest.raises(IncompatibleError, match="compiled"):
        run(_UserNormal(broken=True), rel, fast_path=True, draws=5, warmup=0, chains=1)
    s = Sampler(_UserNormal(broken=True), rel)
    with pytest.warns(RuntimeWarning, match="not using the compiled fast path"):
        assert resolve_fast_path(s.problem, "auto", work=1e12) is None
    # short runs never compile under "auto"
    assert resolve_fast_path(Sampler(_UserNormal(), rel).problem, "auto", work=10.0) is None


# ============================================================================================
# longer studies (pytest -m slow)
# ============================================================================================

def poisson_clamped_exact(shape, rate, n, bound, s_obs, b):
    """Posterior of lam for Poisson records clamped to [0, bound] inside a Sum query, Laplace(b)
    noise: p(s | lam) = sum_k P(sum_i min(x_i, bound) = k | lam) Lap(s - k), the pmf of the
    clamped sum by n-fold convolution; quadrature over lam. The grid must reach far into the
    prior's tail: as lam grows every record clamps to ``bound`` and the likelihood tends to a
    constant, so a grid cut at lam = 15 understated the posterior sd (1.090 against 1.103 for
    the discrete-interweave case, found by an independent rejection sampler)."""
    hi = stats.gamma.ppf(1 - 1e-12, shape, scale=1 / rate)
    lam = np.linspace(1e-4, hi, 8001)
    j = np.arange(bound)
    like = np.empty_like(lam)
    ks = np.arange(n * bound + 1)
    lap = np.exp(-np.abs(s_obs - ks) / b)
    for i, lm in enumerate(lam):
        pmf = np.append(stats.poisson.pmf(j, lm), stats.poisson.sf(bound - 1, lm))
        tot = np.array([1.0])
        for _ in range(n):
            tot = np.convolve(tot, pmf)
        like[i] = tot @ lap
    dens = stats.gamma.pdf(lam, shape, scale=1 / rate) * like
    dens /= np.trapezoid(dens, lam)
    mean = np.trapezoid(lam * dens, lam)
    sd = math.sqrt(np.trapezoid((lam - mean) ** 2 * dens, lam))
    return mean, sd


@pytest.mark.slow
@pytest.mark.parametrize("fast_path", [False, True])
def test_poisson_clamped_sum_exact(fast_path):
    """A clamped query: the model updates on unclamped latent counts, t clamps them."""
    from privpost.models import PoissonGamma

    n, bound, s_obs, b = 12, 4, 31.3, 2.0
    rel = Release(query=Sum(bounds=(0, bound)), mechanism=Laplace(scale=b).calibrate(bound),
                  n=n, observed=np.array([s_obs]))
    mean, sd = poisson_clamped_exact(2.0, 0.5, n, bound, s_obs, b)
    # centred sampler on both paths (the non-centred move has its own tests); 40,000 draws:
    # the posterior's right tail (every record clamped, flat likelihood) is visited rarely, and
    # at 20,000 draws the ESS of the squared deviations overstated the precision of the sd
    post = run(PoissonGamma(2.0, 0.5), rel, draws=40000, warmup=1000, chains=4, seed=21,
               cores=2, progress=False, fast_path=fast_path, interweave=False)
    lam = post.draws["lam"]
    assert abs(z_mean(lam, mean)) < K_MCSE and abs(z_sd(lam, sd)) < K_MCSE
    # ignoring the clamp (the unclamped conjugate answer with k = s_obs) is detected
    naive_mean = (2.0 + s_obs) / (0.5 + n)
    assert abs(z_mean(lam, naive_mean)) > 2 * K_MCSE


@pytest.mark.slow
def test_beta_bernoulli_long_run_process_pool(exact_a):
    rel = sum_release(N_, S_, Laplace(scale=1.0))
    post = run(BetaBernoulli(A_, B_), rel, draws=100_000, warmup=1000, chains=4, seed=31,
               cores=2, progress=False, sweeps_per_iteration=2)
    z = z_scores(_theta(post), exact_a["mean"], exact_a["sd"], exact_a["quantiles"])
    assert all(abs(v) < K_MCSE for v in z.values()), z
