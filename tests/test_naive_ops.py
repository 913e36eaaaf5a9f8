"""Tests of the naive plug-in baseline, the non-private reference and OPS (seed 004)."""

from __future__ import annotations

import math
import warnings

import numpy as np
import pytest
from scipy import special, stats

import privpost as pp
from privpost.errors import IncompatibleError
from privpost.inference import naive, nonprivate, ops
from privpost.mechanisms import Laplace
from privpost.models import (BetaBernoulli, DirichletCategorical, ExponentialGamma,
                             LinearRegression, NaiveBayesLogLinear, PoissonGamma)
from privpost.queries import Histogram, NaiveBayesCounts, RegressionStats, Sum, TruncatedSum

from _tolerance import K_MCSE, P_CHECK

warnings.filterwarnings("ignore", category=FutureWarning)


# ============================================================================================
# nonprivate
# ============================================================================================

@pytest.mark.parametrize("model,records", [
    (BetaBernoulli(2, 3), (np.arange(100) % 3 == 0).astype(float)),
    (DirichletCategorical([1.0, 2.0, 3.0]), np.arange(90) % 3),
    (PoissonGamma(2.0, 1.0), (np.arange(80) % 7).astype(float)),
    (ExponentialGamma(2.0, 1.0), np.linspace(0.1, 3.0, 60)),
])
def test_nonprivate_matches_closed_form(model, records):
    post = nonprivate.run(model, None, records=records, draws=4000, chains=2, seed=1)
    hyp = model.nonprivate_posterior(records)
    name = next(iter(model.param_shapes))
    if "alpha" in hyp:
        a = np.asarray(hyp["alpha"])
        ref_mean = a / a.sum()
        ref_sd = np.sqrt(ref_mean * (1 - ref_mean) / (a.sum() + 1))
    elif "a" in hyp:
        ref = stats.beta(hyp["a"], hyp["b"])
        ref_mean, ref_sd = ref.mean(), ref.std()
    else:
        ref = stats.gamma(hyp["shape"], scale=1 / hyp["rate"])
        ref_mean, ref_sd = ref.mean(), ref.std()
    N = 8000
    assert np.all(np.abs(post.mean(name) - ref_mean) < K_MCSE * np.asarray(ref_sd) / math.sqrt(N))
    assert post.draws[name].shape[:2] == (2, 4000)


def test_nonprivate_regression_uses_model_update_and_clamp():
    rng = np.random.default_rng(2)
    x = rng.normal(0, 1, 200)
    y = 0.5 + 2.0 * x + rng.normal(0, 0.5, 200)
    rec = np.column_stack([x, y])
    q = RegressionStats(bounds_x=[(-1, 1)], bounds_y=(-2, 2))
    rel = pp.release(rec, query=q, mechanism=Laplace(epsilon=1.0), seed=3)
    model = LinearRegression(p=1, sigma2=0.25)
    post = nonprivate.run(model, rel, records=rec, draws=500, chains=2, seed=4)
    clamped = nonprivate.run(model, rel, records=rec, draws=500, chains=2, seed=4, clamp=True)
    assert abs(post.mean("beta")[1] - 2.0) < 0.15
    ref = model.nonprivate_posterior(np.clip(rec, [-1, -2], [1, 2]))
    se = np.sqrt(np.diag(ref["beta_cov"]) / 1000)
    assert np.all(np.abs(clamped.mean("beta") - ref["beta0"]) < K_MCSE * se)
    assert abs(clamped.mean("beta")[1] - post.mean("beta")[1]) > 0.05   # clamping matters here
    assert any("clamped" in n for n in clamped.notes)
    with pytest.raises(IncompatibleError):
        nonprivate.run(model, rel)                       # records are required
    with pytest.raises(pp.errors.DataError):
        nonprivate.run(model, rel, records=rec[:10])     # n mismatch


# ============================================================================================
# naive
# ============================================================================================

def test_naive_projections_and_formula():
    x = np.zeros(50)
    x[:2] = 1
    rel = pp.release(x, query=Sum(bounds=(0, 1)), mechanism=Laplace(epsilon=0.1), seed=5)
    post = naive.run(BetaBernoulli(1, 1), rel, draws=4000, chains=1, seed=6)
    s_hat = float(np.clip(rel.observed[0], 0, 50))
    ref = stats.beta(1 + s_hat, 1 + 50 - s_hat)
    assert abs(post.mean("theta") - ref.mean()) < 5 * ref.std() / math.sqrt(4000)
    assert any("clipped to [0, n = 50]" in n for n in post.notes)
    assert post.exact is False


def test_naive_known_bias_near_zero():
    """Clear truth: theta = 0.02, n = 50, epsilon = 0.1 (Laplace scale 10). Clipping the noisy
    count at 0 biases the naive posterior mean upwards (E[max(s + L, 0)] ~ s + b/2 for small
    s), and its 90% intervals are too narrow to cover: over 300 releases the average naive
    posterior mean is > 0.08 and coverage of the true value < 60%."""
    rng = np.random.default_rng(7)
    theta, n = 0.02, 50
    means, cover = [], []
    model = BetaBernoulli(1, 1)
    for r in range(300):
        x = (rng.random(n) < theta).astype(float)
        rel = pp.release(x, query=Sum(bounds=(0, 1)), mechanism=Laplace(epsilon=0.1), seed=r)
        post = naive.run(model, rel, draws=400, chains=1, seed=r)
        lo, hi = post.interval("theta", 0.9)
        means.append(post.mean("theta"))
        cover.append(lo <= theta <= hi)
    assert np.mean(means) > 0.08
    assert np.mean(cover) < 0.6


def test_naive_categorical_and_truncated():
    rng = np.random.default_rng(8)
    xc = rng.integers(0, 3, 300)
    rel = pp.release(xc, query=Histogram(3), mechanism=Laplace(epsilon=0.05), seed=9)
    post = naive.run(DirichletCategorical([1, 1, 1]), rel, seed=10)
    assert np.allclose(post.draws["p"].sum(-1), 1)
    xp = rng.poisson(5.0, 1000).astype(float)
    relp = pp.release(xp, query=TruncatedSum(bounds=(0, 4)), mechanism=Laplace(epsilon=1.0),
                      seed=11)
    postp = naive.run(PoissonGamma(1.0, 0.1), relp, seed=12)
    assert postp.interval("lam", 0.99)[1] < 4.0     # truncation ignored: badly biased down
    assert any("truncated sum is used as if it were the full sum" in n for n in postp.notes)


def test_naive_regression_psd_projection():
    rng = np.random.default_rng(13)
    x = rng.normal(0, 0.3, 20)
    rec = np.column_stack([x, 0.2 + 0.5 * x + rng.normal(0, 0.1, 20)])
    q = RegressionStats(bounds_x=[(-1, 1)], bounds_y=(-1, 1))
    found = False
    for seed in range(30):
        rel = pp.release(rec, query=q, mechanism=Laplace(epsilon=0.05), seed=seed)
        post = naive.run(LinearRegression(p=1, sigma2=None, a0=2, b0=0.1), rel, draws=200,
                         chains=2, seed=seed)
        assert np.all(np.isfinite(post.draws["beta"])) and np.all(post.draws["sigma2"] > 0)
        if any("projected to PSD" in n for n in post.notes):
            found = True
    assert found


def test_naive_naive_bayes_and_incompatible():
    rng = np.random.default_rng(14)
    rec = np.column_stack([rng.integers(0, 2, 200), rng.integers(0, 3, 200),
                           rng.integers(0, 2, 200)])
    q = NaiveBayesCounts(n_classes=2, n_levels=[3, 2])
    rel = pp.release(rec, query=q, mechanism=Laplace(epsilon=1.0), seed=15)
    model = NaiveBayesLogLinear(n_levels=[3, 2], n_classes=2)
    post = naive.run(model, rel, draws=100, chains=2, seed=16)
    assert set(post.draws) == set(model.param_shapes)
    assert np.allclose(post.draws["q1"].sum(-1), 1)
    with pytest.raises(IncompatibleError):
        naive.run(BetaBernoulli(1, 1), rel)


# ============================================================================================
# OPS
# ============================================================================================

def test_ops_bound_values_and_errata():
    C, _ = ops.ops_bound(BetaBernoulli(1, 1), a0=0.1)
    assert C == pytest.approx(math.log(9))
    # seed 004 Fig. 1: a0 = 0.2, eps = 1 -> T = 2 ln 4 = 2.7726 (the text's "2.7")
    C2, _ = ops.ops_bound(BetaBernoulli(1, 1), a0=0.2)
    assert 2 * C2 / 1.0 == pytest.approx(2.772588722, rel=1e-9)
    Ck, _ = ops.ops_bound(DirichletCategorical([1, 1, 1]), a0=0.05)
    assert Ck == pytest.approx(math.log(0.9 / 0.05))
    Ce, _ = ops.ops_bound(ExponentialGamma(), param_bounds=(0.5, 4), data_bounds=(0, 2))
    assert Ce == pytest.approx(8.0)


def test_ops_poisson_bound_brute_force():
    lo, hi, xmax = 0.5, 8.0, 12
    C, _ = ops.ops_bound(PoissonGamma(), param_bounds=(lo, hi), data_bounds=(0, xmax))
    xs = np.arange(xmax + 1)
    worst = 0.0
    for lam in np.exp(np.linspace(math.log(lo), math.log(hi), 400)):
        f = stats.poisson.logpmf(xs, lam)
        worst = max(worst, f.max() - f.min())
    assert worst <= C + 1e-9
    assert worst == pytest.approx(C, rel=1e-3)


def _tempered_logdens(model, x, T, a0, grid):
    n1 = x.sum()
    a = (model.a - 1 + n1) / T + 1
    b = (model.b - 1 + len(x) - n1) / T + 1
    Z = special.betainc(a, b, 1 - a0) - special.betainc(a, b, a0)
    return stats.beta.logpdf(grid, a, b) - math.log(Z)


def test_ops_privacy_by_density_ratio():
    """For neighbouring data sets the OPS output densities differ by at most e^{eps/q} per draw,
    and the bound is nearly attained (seed 004 §2.5: the worst case is reachable)."""
    model = BetaBernoulli(1, 1)
    a0, eps, q = 0.1, 1.0, 2
    n = 30
    grid = np.linspace(a0, 1 - a0, 2001)
    C = math.log((1 - a0) / a0)
    T = 2 * C * q / eps
    worst = 0.0
    for k in range(n):
        x = np.r_[np.ones(k), np.zeros(n - k)]
        x2 = x.copy()
        x2[-1] = 1.0                                        # replace one record 0 -> 1
        d = _tempered_logdens(model, x, T, a0, grid) - _tempered_logdens(model, x2, T, a0, grid)
        worst = max(worst, np.abs(d).max())
    assert worst <= eps / q + 1e-9
    assert worst > 0.5 * eps / q
    rel = ops.ops_release(np.r_[np.ones(10), np.zeros(20)], model, eps, draws=q, a0=a0, seed=1)
    assert rel.privacy.epsilon == pytest.approx(eps)
    assert rel.temperature == pytest.approx(T)
    assert rel.epsilon_per_draw == pytest.approx(eps / q)


def test_ops_draws_follow_tempered_truncated_beta():
    model = BetaBernoulli(2, 3)
    x = np.r_[np.ones(40), np.zeros(60)]
    rel = ops.ops_release(x, model, 0.5, draws=20000, a0=0.1, seed=2)
    T = rel.temperature
    a = (2 - 1 + 40) / T + 1
    b = (3 - 1 + 60) / T + 1
    th = rel.draws["theta"]
    assert th.min() >= 0.1 and th.max() <= 0.9
    F = lambda t: (special.betainc(a, b, t) - special.betainc(a, b, 0.1)) / (   # noqa: E731
        special.betainc(a, b, 0.9) - special.betainc(a, b, 0.1))
    assert stats.kstest(th, F).pvalue > P_CHECK
    # likelihood-only tempering gives Beta(a + n1/T, b + n0/T)
    rel2 = ops.ops_release(x, model, 0.5, draws=20000, a0=0.1, seed=3, temper_prior=False)
    a2, b2 = 2 + 40 / T, 3 + 60 / T
    F2 = lambda t: (special.betainc(a2, b2, t) - special.betainc(a2, b2, 0.1)) / (   # noqa: E731
        special.betainc(a2, b2, 0.9) - special.betainc(a2, b2, 0.1))
    assert stats.kstest(rel2.draws["theta"], F2).pvalue > P_CHECK


def test_ops_temperature_never_below_one():
    x = np.r_[np.ones(3), np.zeros(7)]
    rel = ops.ops_release(x, BetaBernoulli(1, 1), 100.0, draws=2, a0=0.1, seed=4)
    assert rel.temperature == 1.0
    assert rel.privacy.epsilon == pytest.approx(2 * 2 * math.log(9))
    assert any("only" in n for n in rel.notes)


def test_ops_truncated_samplers():
    rng = np.random.default_rng(5)
    # far-tail truncated Beta and Gamma stay in range and match the CDF
    x = ops.truncated_beta(rng, 500.0, 5.0, 0.1, 0.9, size=5000)
    assert x.min() >= 0.1 and x.max() <= 0.9 and x.mean() > 0.85
    g = ops.truncated_gamma(rng, 3.0, 2.0, 0.5, 4.0, size=20000)
    F = lambda t: (special.gammainc(3, 2 * t) - special.gammainc(3, 1.0)) / (   # noqa: E731
        special.gammainc(3, 8.0) - special.gammainc(3, 1.0))
    assert stats.kstest(g, F).pvalue > P_CHECK
    d = ops.truncated_dirichlet(rng, np.array([5.0, 1.0, 2.0]), 0.05, 4000)
    assert d.min() >= 0.05 and np.allclose(d.sum(1), 1)
    ref = rng.dirichlet([5.0, 1.0, 2.0], size=200000)
    ref = ref[np.all(ref >= 0.05, axis=1)]
    for k in range(3):
        assert stats.ks_2samp(d[:, k], ref[:, k]).pvalue > P_CHECK


def test_ops_method_on_a_release():
    x = (np.arange(100) % 4 == 0).astype(float)
    rel = pp.release(x, query=Sum(bounds=(0, 1)), mechanism=Laplace(epsilon=0.5), seed=6)
    post = pp.infer(BetaBernoulli(1, 1), rel, method="ops", records=x, draws=10, seed=7)
    assert post.draws["theta"].shape == (1, 10) and not post.exact
    assert any("total 0.5-DP" in n for n in post.notes)
    with pytest.raises(IncompatibleError, match="ops_release"):
        pp.infer(BetaBernoulli(1, 1), rel, method="ops")
    with pytest.raises(IncompatibleError):
        pp.ops_release(x, LinearRegression(p=1), 1.0)
    xp = (np.arange(50) % 6).astype(float)
    relp = pp.release(xp, query=TruncatedSum(bounds=(0, 10)), mechanism=Laplace(epsilon=1.0),
                      seed=8)
    postp = pp.infer(PoissonGamma(), relp, method="ops", records=xp, param_bounds=(0.5, 10),
                     seed=9)
    assert 0.5 <= postp.draws["lam"][0, 0] <= 10
    with pytest.raises(IncompatibleError):
        pp.infer(PoissonGamma(), relp, method="ops", records=xp)   # no param_bounds


# ============================================================================================
# OPS audit additions: degenerate truncations, exact accounting
# ============================================================================================

def _edge_cdf(logf, lo, hi, at_hi, width):
    """Numerical CDF of ∝ exp(logf) on [lo, hi] near one end (log space, fine grid)."""
    t = np.linspace(hi - width, hi, 200_001) if at_hi else np.linspace(lo, lo + width, 200_001)
    lf = logf(t)
    dens = np.exp(lf - lf.max())
    cdf = np.concatenate([[0.0], np.cumsum((dens[1:] + dens[:-1]) / 2 * np.diff(t))])
    cdf /= cdf[-1]
    return lambda x: np.interp(x, t, cdf)


@pytest.mark.parametrize("a, b, at_hi", [(20000.0, 2.0, True), (2.0, 20000.0, False),
                                         (50000.0, 0.5, True)])
def test_truncated_beta_where_the_cdf_underflows(a, b, at_hi):
    """Beta mass far beyond the interval: the interval's probability underflows, and the draws
    must pile up at the *near* end with the right (exponential-like) shape. (The old code
    returned the opposite end point as a point mass: wrong, and a data-dependent point mass
    is not differentially private.)"""
    rng = np.random.default_rng(11)
    lo, hi = 0.1, 0.9
    assert special.betainc(a, b, hi) - special.betainc(a, b, lo) < 1e-200
    x = ops.truncated_beta(rng, a, b, lo, hi, size=20000)
    assert x.min() >= lo and x.max() <= hi
    logf = lambda t: (a - 1) * np.log(t) + (b - 1) * np.log1p(-t)   # noqa: E731
    width = 30.0 / abs((a - 1) / (hi if at_hi else lo) - (b - 1) / (1 - (hi if at_hi else lo)))
    assert stats.kstest(x, _edge_cdf(logf, lo, hi, at_hi, width)).pvalue > P_CHECK
    assert abs(np.median(x) - (hi if at_hi else lo)) < width
    scalar = ops.truncated_beta(rng, a, b, lo, hi)
    assert np.ndim(scalar) == 0 and lo <= scalar <= hi


@pytest.mark.parametrize("shape, rate, at_hi", [(5000.0, 1.0, True), (2.0, 5000.0, False)])
def test_truncated_gamma_where_the_cdf_underflows(shape, rate, at_hi):
    rng = np.random.default_rng(12)
    lo, hi = 0.5, 4.0
    x = ops.truncated_gamma(rng, shape, rate, lo, hi, size=20000)
    assert x.min() >= lo and x.max() <= hi
    logf = lambda t: (shape - 1) * np.log(t) - rate * t     # noqa: E731
    end = hi if at_hi else lo
    width = 30.0 / abs((shape - 1) / end - rate)
    assert stats.kstest(x, _edge_cdf(logf, lo, hi, at_hi, width)).pvalue > P_CHECK


def test_edge_rejection_agrees_with_inverse_cdf():
    """Where both apply, the rejection fallback and the inverse CDF give the same law."""
    rng = np.random.default_rng(13)
    a, b = 3000.0, 2.0                              # interval probability ~1e-135: inverse CDF
    x_inv = ops.truncated_beta(rng, a, b, 0.1, 0.9, size=20000)
    x_rej = ops._edge_rejection(rng, a - 1.0, b - 1.0, 0.0, 0.1, 0.9, 20000)
    assert stats.ks_2samp(x_inv, x_rej).pvalue > P_CHECK
    g_inv = ops.truncated_gamma(rng, 300.0, 30.0, 0.5, 4.0, size=20000)
    g_rej = ops._edge_rejection(rng, 299.0, 0.0, -30.0, 0.5, 4.0, 20000)
    assert stats.ks_2samp(g_inv, g_rej).pvalue > P_CHECK


def test_ops_release_concentrated_posterior_is_at_the_right_end():
    """n = 100000 mostly-ones records, budget large enough for T = 1: the tempered posterior
    is concentrated beyond 1 - a0, so every draw must be close to 1 - a0 (not a0)."""
    x = np.r_[np.ones(95_000), np.zeros(5_000)]
    rel = ops.ops_release(x, BetaBernoulli(1, 1), 100.0, draws=10, a0=0.1, seed=14)
    assert rel.temperature == 1.0
    assert np.all(rel.draws["theta"] > 0.899) and np.all(rel.draws["theta"] <= 0.9)


@pytest.mark.parametrize("eps, q, a0", [(1.0, 1, 0.1), (0.3, 3, 0.2), (0.7, 7, 0.05),
                                        (2 * math.log(9), 1, 0.1)])
def test_ops_accounting_is_exact(eps, q, a0):
    """q 2C/T ≤ ε holds exactly (rationals), T ≥ 1, C is not below the exact log((1-a0)/a0),
    and the reported guarantee is q times the per-draw ε = 2C/T (rounded up)."""
    from fractions import Fraction

    x = np.r_[np.ones(5), np.zeros(5)]
    rel = ops.ops_release(x, BetaBernoulli(1, 1), eps, draws=q, a0=a0, seed=15)
    T, C = rel.temperature, rel.C
    assert T >= 1.0
    assert C >= math.log((1 - a0) / a0) and C == pytest.approx(math.log((1 - a0) / a0),
                                                              rel=1e-11)
    assert Fraction(2 * q) * Fraction(C) / Fraction(T) <= Fraction(rel.privacy.epsilon)
    assert rel.privacy.epsilon <= eps
    assert Fraction(rel.epsilon_per_draw) >= 2 * Fraction(C) / Fraction(T)


def test_ops_method_rejects_an_add_remove_budget():
    x = (np.arange(40) % 3 == 0).astype(float)
    rel = pp.release(x, query=Sum(bounds=(0, 1)), mechanism=Laplace(epsilon=0.5),
                     neighbours="add-remove", seed=16)
    with pytest.raises(pp.errors.PrivpostError, match="add/remove"):
        pp.infer(BetaBernoulli(1, 1), rel, method="ops", records=x)
    post = pp.infer(BetaBernoulli(1, 1), rel, method="ops", records=x, epsilon=1.0, seed=17)
    assert post.draws["theta"].shape == (1, 1)
