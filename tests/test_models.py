"""Tests of privpost.models: shapes, simulation moments, exactness of the updates, the Dirichlet
slice sampler, query compatibility, specs and serialisation, the compiled fast path.

Statistical checks use z-scores with standard errors estimated from the Monte Carlo sample
(threshold Z = 4.5, fixed seeds), so every test fails when a formula is off by more than a few
Monte Carlo standard errors.
"""

from __future__ import annotations

import json
import math
import re

import numpy as np
import pytest
from scipy.special import digamma, gammaln, polygamma

import privpost.models as M
from privpost.errors import DataError, IncompatibleError, PrivpostError
from privpost.models import (BetaBernoulli, Dirichlet, DirichletCategorical, ExponentialGamma,
                             LinearRegression, NaiveBayesLogLinear, NormalInverseGamma,
                             NormalKnownVariance, PoissonGamma, model_from_dict, model_from_spec)

Z = 4.5


# ---------------------------------------------------------------------------------- helpers
def assert_mean(samples, expected, z=Z, what=""):
    """Sample mean within z standard errors of ``expected`` (elementwise)."""
    s = np.asarray(samples, dtype=np.float64)
    n = s.shape[0]
    se = s.std(axis=0, ddof=1) / math.sqrt(n)
    err = np.abs(s.mean(axis=0) - expected)
    assert np.all(err <= z * se + 1e-12), (
        f"{what}: mean {s.mean(axis=0)} vs expected {expected} (se {se})")


def assert_var(samples, expected, z=Z, what=""):
    """Sample variance within z standard errors (from the 4th moment) of ``expected``."""
    s = np.asarray(samples, dtype=np.float64)
    n = s.shape[0]
    d2 = (s - s.mean(axis=0)) ** 2
    v = d2.sum(axis=0) / (n - 1)
    se = d2.std(axis=0, ddof=1) / math.sqrt(n)
    assert np.all(np.abs(v - expected) <= z * se + 1e-12), (
        f"{what}: var {v} vs expected {expected} (se {se})")


def assert_moments(samples, mean, var, what=""):
    assert_mean(samples, mean, what=what)
    assert_var(samples, var, what=what)


def repeated_updates(model, params, records, n_draws, seed):
    """n_draws independent applications of update to the same records (exact draws)."""
    rng = np.random.default_rng(seed)
    out = [model.update(params, records, rng) for _ in range(n_draws)]
    return {k: np.array([o[k] for o in out]) for k in out[0]}


def beta_moments(a, b):
    return a / (a + b), a * b / ((a + b) ** 2 * (a + b + 1))


def dirichlet_moments(alpha):
    a0 = alpha.sum(axis=-1, keepdims=True)
    return alpha / a0, alpha * (a0 - alpha) / (a0 ** 2 * (a0 + 1))


ALL_MODELS = {
    "beta-bernoulli": lambda: BetaBernoulli(a=2, b=3),
    "poisson-gamma": lambda: PoissonGamma(shape=2, rate=0.5),
    "exponential-gamma": lambda: ExponentialGamma(shape=8, rate=2),
    "normal-known-variance": lambda: NormalKnownVariance(mu0=1, tau0=2, sigma=1.5),
    "normal-inverse-gamma": lambda: NormalInverseGamma(mu0=0.5, kappa0=2, alpha0=3, beta0=2),
    "dirichlet-categorical": lambda: DirichletCategorical(alpha=[1, 2, 3]),
    "naive-bayes": lambda: NaiveBayesLogLinear(n_levels=[2, 3], n_classes=3),
    "regression-known": lambda: LinearRegression(p=2, sigma2=2.0, tau2=4.0, m=[0.9, -1.17]),
    "regression-nig": lambda: LinearRegression(p=2, a0=4, b0=3),
    "regression-indep-niw": lambda: LinearRegression(p=2, a0=4, b0=3, prior="independent",
                                                     hyperprior="niw", nu0=6),
    "dirichlet": lambda: Dirichlet(parts=3),
    "dirichlet-copula": lambda: Dirichlet(parts=3, prior_shape=[2, 3, 4], prior_rate=0.5,
                                          prior_corr=[[1, .5, .2], [.5, 1, .3], [.2, .3, 1]]),
}

RECORD_LAYOUT = {  # per-record shape and dtype kind of simulate()
    "beta-bernoulli": ((), "f"), "poisson-gamma": ((), "f"), "exponential-gamma": ((), "f"),
    "normal-known-variance": ((), "f"), "normal-inverse-gamma": ((), "f"),
    "dirichlet-categorical": ((), "i"), "naive-bayes": ((3,), "i"),
    "regression-known": ((3,), "f"), "regression-nig": ((3,), "f"),
    "regression-indep-niw": ((3,), "f"), "dirichlet": ((3,), "f"), "dirichlet-copula": ((3,), "f"),
}


# ---------------------------------------------------------------------------------- protocol
@pytest.mark.parametrize("key", sorted(ALL_MODELS))
def test_protocol_shapes_and_dtypes(key):
    model = ALL_MODELS[key]()
    rng = np.random.default_rng(1)
    params = model.prior_sample(rng)
    assert set(params) == set(model.param_shapes)
    for name, shape in model.param_shapes.items():
        v = np.asarray(params[name])
        assert v.shape == shape and v.dtype == np.float64 and np.all(np.isfinite(v)), name
    x = model.simulate(params, 7, rng)
    tail, kind = RECORD_LAYOUT[key]
    assert x.shape == (7,) + tail and x.dtype.kind == kind
    assert x.dtype.itemsize == 8
    new = model.update(params, x, rng)
    assert set(new) == set(model.param_shapes)
    for name, shape in model.param_shapes.items():
        v = np.asarray(new[name])
        assert v.shape == shape and v.dtype == np.float64 and np.all(np.isfinite(v)), name
    ll = model.log_likelihood(new, x)
    assert ll.shape == (7,) and np.all(np.isfinite(ll))
    assert np.isfinite(model.log_prior(new))
    assert model.validate_records(x).shape == x.shape
    # reproducible, and posterior_predictive is simulate
    a = model.simulate(params, 5, np.random.default_rng(3))
    b = model.posterior_predictive(params, 5, np.random.default_rng(3))
    np.testing.assert_array_equal(a, b)
    u1 = model.update(params, x, np.random.default_rng(4))
    u2 = model.update(params, x, np.random.default_rng(4))
    for name in u1:
        np.testing.assert_array_equal(u1[name], u2[name])
    # prior_sample/simulate take a seed as well
    np.testing.assert_array_equal(model.prior_sample(11)[next(iter(params))],
                                  model.prior_sample(np.random.default_rng(11))[next(iter(params))])


@pytest.mark.parametrize("key", sorted(ALL_MODELS))
def test_to_dict_and_spec_round_trip(key):
    model = ALL_MODELS[key]()
    d = json.loads(json.dumps(model.to_dict()))
    back = model_from_dict(d)
    assert type(back) is type(model) and back.to_dict() == model.to_dict()
    again = model_from_spec(model.to_spec())
    assert again.to_dict() == model.to_dict()
    assert model_from_spec(json.dumps(model.to_dict())).to_dict() == model.to_dict()
    # the rebuilt model behaves identically
    p1 = model.prior_sample(np.random.default_rng(5))
    p2 = back.prior_sample(np.random.default_rng(5))
    for k in p1:
        np.testing.assert_array_equal(p1[k], p2[k])
    assert repr(model).startswith(type(model).__name__ + "(")


def test_log_likelihood_and_prior_values():
    """Spot values against scipy.stats (independent implementation)."""
    from scipy import stats

    x = np.array([0.0, 1.0, 1.0])
    m = BetaBernoulli(2, 3)
    np.testing.assert_allclose(m.log_likelihood({"theta": 0.3}, x), stats.bernoulli.logpmf(x, 0.3))
    assert math.isclose(m.log_prior({"theta": 0.3}), stats.beta.logpdf(0.3, 2, 3))
    m = PoissonGamma(2, 0.5)
    c = np.array([0.0, 3.0, 7.0])
    np.testing.assert_allclose(m.log_likelihood({"lam": 2.5}, c), stats.poisson.logpmf(c, 2.5))
    assert math.isclose(m.log_prior({"lam": 2.5}), stats.gamma.logpdf(2.5, 2, scale=2.0))
    m = ExponentialGamma(8, 2)
    np.testing.assert_allclose(m.log_likelihood({"lam": 1.5}, c), stats.expon.logpdf(c, scale=1 / 1.5))
    m = NormalInverseGamma(0.5, 2, 3, 2)
    pr = {"mu": 0.1, "sigma2": 1.7}
    np.testing.assert_allclose(m.log_likelihood(pr, c), stats.norm.logpdf(c, 0.1, math.sqrt(1.7)))
    want = stats.invgamma.logpdf(1.7, 3, scale=2) + stats.norm.logpdf(0.1, 0.5, math.sqrt(1.7 / 2))
    assert math.isclose(m.log_prior(pr), want)
    m = DirichletCategorical([1, 2, 3])
    p = np.array([0.2, 0.3, 0.5])
    assert math.isclose(m.log_prior({"p": p}), stats.dirichlet.logpdf(p, [1, 2, 3]))
    m = Dirichlet(3, prior_shape=2, prior_rate=0.5)
    a = np.array([1.5, 2.0, 4.0])
    comp = np.array([[0.2, 0.3, 0.5], [0.6, 0.1, 0.3]])
    np.testing.assert_allclose(m.log_likelihood({"alpha": a}, comp),
                               [stats.dirichlet.logpdf(r, a) for r in comp])
    assert math.isclose(m.log_prior({"alpha": a}), stats.gamma.logpdf(a, 2, scale=2).sum())
    # copula with identity correlation = independent prior
    mc = Dirichlet(3, prior_shape=2, prior_rate=0.5, prior_corr=np.eye(3))
    assert math.isclose(mc.log_prior({"alpha": a}), m.log_prior({"alpha": a}))
    # regression: covariate + response densities, NIW prior
    lr = LinearRegression(p=2, prior="independent", a0=3, b0=2, hyperprior="niw", nu0=5,
                          Psi0=[[2, .3], [.3, 1]], mu0=[1, -1], kappa0=2)
    prm = {"beta": np.array([0.5, -1, 2]), "sigma2": 0.7, "m": np.array([0.8, -0.9]),
           "S": np.array([[1.5, 0.2], [0.2, 0.9]])}
    rec = np.array([[0.3, -1.2, 0.4], [1.1, 0.2, -2.0]])
    want = (stats.multivariate_normal.logpdf(rec[:, :2], prm["m"], prm["S"])
            + stats.norm.logpdf(rec[:, 2], 0.5 - rec[:, 0] + 2 * rec[:, 1], math.sqrt(0.7)))
    np.testing.assert_allclose(lr.log_likelihood(prm, rec), want)
    want = (stats.multivariate_normal.logpdf(prm["beta"], np.zeros(3), 4 * np.eye(3))
            + stats.invgamma.logpdf(0.7, 3, scale=2)
            + stats.invwishart.logpdf(prm["S"], df=5, scale=[[2, .3], [.3, 1]])
            + stats.multivariate_normal.logpdf(prm["m"], [1, -1], prm["S"] / 2))
    assert math.isclose(lr.log_prior(prm), want, rel_tol=1e-10)
    nb = NaiveBayesLogLinear(n_levels=[2, 3], n_classes=2)
    prm = {"p": np.array([0.4, 0.6]), "q1": np.array([[0.3, 0.7], [0.9, 0.1]]),
           "q2": np.array([[0.2, 0.3, 0.5], [0.1, 0.1, 0.8]])}
    r = np.array([[1, 0, 2], [0, 1, 1]])
    np.testing.assert_allclose(nb.log_likelihood(prm, r),
                               np.log([0.6 * 0.9 * 0.8, 0.4 * 0.7 * 0.3]))


# ---------------------------------------------------------------------------------- simulate moments
def test_simulate_moments_scalar():
    rng = np.random.default_rng(10)
    n = 40000
    x = BetaBernoulli(1, 1).simulate({"theta": 0.3}, n, rng)
    assert set(np.unique(x)) == {0.0, 1.0}
    assert_moments(x, 0.3, 0.21, "bernoulli")
    x = PoissonGamma(1, 1).simulate({"lam": 3.5}, n, rng)
    assert np.all(x == np.round(x)) and x.min() >= 0
    assert_moments(x, 3.5, 3.5, "poisson")
    x = ExponentialGamma(1, 1).simulate({"lam": 2.0}, n, rng)
    assert x.min() > 0
    assert_moments(x, 0.5, 0.25, "exponential")
    x = NormalKnownVariance(0, 1, sigma=1.5).simulate({"mu": -2.0}, n, rng)
    assert_moments(x, -2.0, 2.25, "normal")
    x = NormalInverseGamma().simulate({"mu": 1.0, "sigma2": 0.3}, n, rng)
    assert_moments(x, 1.0, 0.3, "nig")


def test_simulate_moments_categorical_and_naive_bayes():
    rng = np.random.default_rng(11)
    n = 40000
    p = np.array([0.1, 0.6, 0.3])
    x = DirichletCategorical([1, 1, 1]).simulate({"p": p}, n, rng)
    onehot = (x[:, None] == np.arange(3)).astype(float)
    assert_moments(onehot, p, p * (1 - p), "categorical")
    nb = NaiveBayesLogLinear(n_levels=[2, 3], n_classes=3)
    params = {"p": np.array([0.2, 0.5, 0.3]),
              "q1": np.array([[0.9, 0.1], [0.3, 0.7], [0.5, 0.5]]),
              "q2": np.array([[0.1, 0.2, 0.7], [0.6, 0.3, 0.1], [0.2, 0.6, 0.2]])}
    r = nb.simulate(params, n, rng)
    assert r.shape == (n, 3) and r.dtype == np.int64
    assert r[:, 1].max() <= 1 and r[:, 2].max() <= 2
    y1 = (r[:, 0][:, None] == np.arange(3)).astype(float)
    assert_mean(y1, params["p"], what="class")
    # q_k[i, j] = P(x_k = j | y = i): rows are classes (orientation, seed 000 pitfall 12)
    for k, J in ((1, 2), (2, 3)):
        q = params[f"q{k}"]
        for i in range(3):
            sel = r[r[:, 0] == i, k]
            oh = (sel[:, None] == np.arange(J)).astype(float)
            assert_mean(oh, q[i], what=f"q{k}[{i}]")


def test_simulate_moments_regression():
    rng = np.random.default_rng(12)
    n = 40000
    S = np.array([[1.0, 0.6], [0.6, 2.0]])
    model = LinearRegression(p=2, sigma2=0.5, m=[0.9, -1.17], S=S)
    beta = np.array([-1.79, -2.89, -0.66])
    r = model.simulate({"beta": beta}, n, rng)
    x, y = r[:, :2], r[:, 2]
    assert_mean(x, [0.9, -1.17], what="x mean")
    d = x - [0.9, -1.17]
    prods = np.column_stack([d[:, 0] ** 2, d[:, 1] ** 2, d[:, 0] * d[:, 1]])
    assert_mean(prods, [1.0, 2.0, 0.6], what="x cov")
    Zm = np.column_stack([np.ones(n), x])
    bhat, *_ = np.linalg.lstsq(Zm, y, rcond=None)
    se = np.sqrt(0.5 * np.diag(np.linalg.inv(Zm.T @ Zm)))
    assert np.all(np.abs(bhat - beta) <= Z * se), (bhat, beta, se)
    res = y - Zm @ beta
    assert_moments(res, 0.0, 0.5, "residual")
    # unknown sigma2 and NIW covariates: read from params
    m2 = LinearRegression(p=2, hyperprior="niw")
    r = m2.simulate({"beta": beta, "sigma2": 0.3, "m": np.array([2.0, -1.0]), "S": S}, n, rng)
    assert_mean(r[:, :2], [2.0, -1.0], what="niw x mean")
    assert_var(r[:, :2], np.diag(S), what="niw x var")
    assert_var(r[:, 2] - r[:, :2] @ beta[1:], 0.3, what="niw residual var")


def test_simulate_dirichlet_open_simplex_and_moments():
    rng = np.random.default_rng(13)
    model = Dirichlet(parts=3)
    a = np.array([0.5, 2.0, 4.0])
    x = model.simulate({"alpha": a}, 40000, rng)
    np.testing.assert_allclose(x.sum(axis=1), 1.0, rtol=0, atol=1e-12)
    mean, var = dirichlet_moments(a)
    assert_moments(x, mean, var, "dirichlet x")
    assert_mean(np.log(x), digamma(a) - digamma(a.sum()), what="E log x")
    # tiny concentrations: gamma variates underflow in linear space; records stay positive
    tiny = model.simulate({"alpha": np.array([1e-3, 1e-3, 1e-3])}, 2000, rng)
    assert np.all(tiny > 0) and np.all(np.isfinite(np.log(tiny)))
    np.testing.assert_allclose(tiny.sum(axis=1), 1.0, rtol=0, atol=1e-12)
    ll = model.log_likelihood({"alpha": np.array([1e-3, 1e-3, 1e-3])}, tiny)
    assert np.all(np.isfinite(ll))


# ---------------------------------------------------------------------------------- conjugate updates
N_UPD = 4000


def test_update_beta_bernoulli_exact():
    m = BetaBernoulli(a=2, b=3)
    x = np.array([1.0] * 11 + [0.0] * 19)
    d = repeated_updates(m, m.prior_sample(0), x, N_UPD, 20)
    assert_moments(d["theta"], *beta_moments(13, 22), "theta")
    assert m.nonprivate_posterior(x) == {"a": 13.0, "b": 22.0}


def test_update_poisson_and_exponential_exact():
    rng = np.random.default_rng(21)
    x = rng.poisson(3.0, size=20).astype(float)
    m = PoissonGamma(shape=2, rate=0.5)
    d = repeated_updates(m, m.prior_sample(0), x, N_UPD, 22)
    sh, rt = 2 + x.sum(), 0.5 + 20
    assert_moments(d["lam"], sh / rt, sh / rt ** 2, "poisson lam")
    assert m.nonprivate_posterior(x) == {"shape": sh, "rate": rt}
    x = rng.exponential(0.5, size=25)
    m = ExponentialGamma(shape=3, rate=1)
    d = repeated_updates(m, m.prior_sample(0), x, N_UPD, 23)
    sh, rt = 3 + 25, 1 + x.sum()
    assert_moments(d["lam"], sh / rt, sh / rt ** 2, "exponential lam")
    post = m.nonprivate_posterior(x)
    assert post["shape"] == sh and math.isclose(post["rate"], rt)


def test_update_normal_models_exact():
    rng = np.random.default_rng(24)
    x = rng.normal(2.0, 1.5, size=15)
    m = NormalKnownVariance(mu0=1, tau0=2, sigma=1.5)
    d = repeated_updates(m, m.prior_sample(0), x, N_UPD, 25)
    prec = 1 / 4 + 15 / 2.25
    mean = (1 / 4 + x.sum() / 2.25) / prec
    assert_moments(d["mu"], mean, 1 / prec, "nkv mu")
    post = m.nonprivate_posterior(x)
    assert math.isclose(post["mu0"], mean) and math.isclose(post["tau0"], prec ** -0.5)

    x = rng.normal(-1.0, 0.8, size=4)  # few records: the prior terms matter
    m = NormalInverseGamma(mu0=0.5, kappa0=2, alpha0=6, beta0=2)
    d = repeated_updates(m, m.prior_sample(0), x, N_UPD, 26)
    n, xb = 4, x.mean()
    kn, an = 2 + n, 6 + n / 2
    mun = (2 * 0.5 + n * xb) / kn
    bn = 2 + 0.5 * ((x - xb) ** 2).sum() + 0.5 * 2 * n * (xb - 0.5) ** 2 / kn
    assert_moments(d["sigma2"], bn / (an - 1), bn ** 2 / ((an - 1) ** 2 * (an - 2)), "nig sigma2")
    assert_moments(d["mu"], mun, bn / ((an - 1) * kn), "nig mu")
    post = m.nonprivate_posterior(x)
    np.testing.assert_allclose([post["mu0"], post["kappa0"], post["alpha0"], post["beta0"]],
                               [mun, kn, an, bn])


def test_update_dirichlet_categorical_exact():
    m = DirichletCategorical(alpha=[1, 2, 3])
    x = np.array([0] * 5 + [1] * 2 + [2] * 9)
    d = repeated_updates(m, m.prior_sample(0), x, N_UPD, 27)
    post = np.array([6.0, 4.0, 12.0])
    assert_moments(d["p"], *dirichlet_moments(post), "categorical p")
    assert m.nonprivate_posterior(x) == {"alpha": post.tolist()}
    with pytest.raises(DataError, match="out of range"):
        m.validate_records([0, 3])


def test_update_naive_bayes_exact_and_orientation():
    rng = np.random.default_rng(28)
    I, levels = 3, [2, 3]
    m = NaiveBayesLogLinear(n_levels=levels, n_classes=I, class_alpha=[1, 2, 3], feature_alpha=2.0)
    x = np.column_stack([rng.integers(0, I, 40), rng.integers(0, 2, 40), rng.integers(0, 3, 40)])
    d = repeated_updates(m, m.prior_sample(0), x, N_UPD, 29)
    ny = np.array([np.sum(x[:, 0] == i) for i in range(I)])
    assert_moments(d["p"], *dirichlet_moments(np.array([1, 2, 3]) + ny), "class p")
    for k, J in enumerate(levels, start=1):
        counts = np.array([[np.sum((x[:, 0] == i) & (x[:, k] == j)) for j in range(J)]
                           for i in range(I)])
        assert d[f"q{k}"].shape == (N_UPD, I, J)
        np.testing.assert_allclose(d[f"q{k}"].sum(axis=2), 1.0)  # rows (classes) sum to 1
        assert_moments(d[f"q{k}"], *dirichlet_moments(2.0 + counts), f"q{k}")
        np.testing.assert_allclose(m.nonprivate_posterior(x)["feature_alpha"][k - 1], 2.0 + counts)


def _regression_data(rng, n=25):
    x = rng.normal([0.9, -1.17], 1.0, size=(n, 2))
    y = -1.79 - 2.89 * x[:, 0] - 0.66 * x[:, 1] + rng.normal(0, math.sqrt(2), n)
    return np.column_stack([x, y])


def test_update_regression_known_sigma2_exact():
    rng = np.random.default_rng(30)
    r = _regression_data(rng)
    m = LinearRegression(p=2, sigma2=2.0, tau2=4.0)
    d = repeated_updates(m, m.prior_sample(0), r, N_UPD, 31)
    Zm = np.column_stack([np.ones(len(r)), r[:, :2]])
    cov = np.linalg.inv(Zm.T @ Zm / 2.0 + np.eye(3) / 4.0)
    mean = cov @ (Zm.T @ r[:, 2]) / 2.0
    assert_moments(d["beta"], mean, np.diag(cov), "beta")
    # the covariance, through linear combinations
    for w in (np.array([1.0, 1.0, 0.0]), np.array([0.0, 1.0, -1.0]), np.array([1.0, -1.0, 1.0])):
        assert_moments(d["beta"] @ w, w @ mean, w @ cov @ w, f"beta.{w}")
    post = m.nonprivate_posterior(r)
    np.testing.assert_allclose(post["beta0"], mean)
    np.testing.assert_allclose(post["beta_cov"], cov)
    # the update uses the records as given (no clamping): scaling y scales the posterior mean
    big = r.copy()
    big[:, 2] *= 100
    assert abs(np.mean(repeated_updates(m, {}, big, 50, 1)["beta"][:, 0])) > 20 * abs(mean[0]) / 2


def test_update_regression_nig_exact():
    rng = np.random.default_rng(32)
    r = _regression_data(rng, n=15)
    V0 = np.array([[2.0, 0.3, 0.0], [0.3, 1.0, 0.2], [0.0, 0.2, 3.0]])
    b0 = np.array([3.0, -2.0, 2.0])  # far from the data: the c0 term of b_n matters
    m = LinearRegression(p=2, beta0=b0, beta_cov=V0, a0=4, b0=3)
    d = repeated_updates(m, m.prior_sample(0), r, N_UPD, 33)
    Zm = np.column_stack([np.ones(len(r)), r[:, :2]])
    y = r[:, 2]
    L0 = np.linalg.inv(V0)
    Ln = L0 + Zm.T @ Zm
    mun = np.linalg.solve(Ln, L0 @ b0 + Zm.T @ y)
    an = 4 + len(r) / 2
    bn = 3 + 0.5 * (y @ y + b0 @ L0 @ b0 - mun @ Ln @ mun)
    assert_moments(d["sigma2"], bn / (an - 1), bn ** 2 / ((an - 1) ** 2 * (an - 2)), "sigma2")
    cov = bn / (an - 1) * np.linalg.inv(Ln)  # marginal (multivariate t) covariance of beta
    assert_moments(d["beta"], mun, np.diag(cov), "beta")
    w = np.array([1.0, 2.0, -1.0])
    assert_moments(d["beta"] @ w, w @ mun, w @ cov @ w, "beta.w")
    post = m.nonprivate_posterior(r)
    np.testing.assert_allclose(post["beta0"], mun)
    np.testing.assert_allclose(post["beta_cov"], np.linalg.inv(Ln))
    assert math.isclose(post["a0"], an) and math.isclose(post["b0"], bn)
    # the posterior written as a prior reproduces itself with no data
    pm = LinearRegression(**{**m.hyperparameters(), **post})
    assert pm.nonprivate_posterior(np.zeros((0, 3)))["b0"] == pytest.approx(bn)


def test_update_niw_hyperprior_exact():
    rng = np.random.default_rng(34)
    r = _regression_data(rng, n=12)
    p = 2
    mu0, k0, nu0 = np.array([0.5, -0.5]), 2.0, 5.0
    Psi0 = np.array([[1.5, 0.4], [0.4, 1.0]])
    m = LinearRegression(p=2, sigma2=2.0, hyperprior="niw", mu0=mu0, kappa0=k0, nu0=nu0, Psi0=Psi0)
    d = repeated_updates(m, m.prior_sample(0), r, N_UPD, 35)
    x = r[:, :2]
    n = len(x)
    xb = x.mean(axis=0)
    kn, nun = k0 + n, nu0 + n
    mun = (k0 * mu0 + n * xb) / kn
    Psin = Psi0 + (x - xb).T @ (x - xb) + k0 * n / kn * np.outer(xb - mu0, xb - mu0)
    ES = Psin / (nun - p - 1)
    dd = nun - p
    VS = ((dd + 1) * Psin ** 2 + (dd - 1) * np.outer(np.diag(Psin), np.diag(Psin))) / (
        dd * (dd - 1) ** 2 * (dd - 3))
    S = d["S"].reshape(N_UPD, 4)
    assert_moments(S, ES.ravel(), VS.ravel(), "S")
    np.testing.assert_allclose(d["S"], np.swapaxes(d["S"], 1, 2))
    assert np.all(np.linalg.eigvalsh(d["S"]) > 0)
    # m | data is multivariate t: mean mu_n, covariance E[S] / kappa_n
    assert_moments(d["m"], mun, np.diag(ES) / kn, "m")
    assert_mean(d["m"][:, 0] * d["m"][:, 1] - mun[0] * d["m"][:, 1] - mun[1] * d["m"][:, 0]
                + mun[0] * mun[1], ES[0, 1] / kn, what="cov m")
    post = m.nonprivate_posterior(r)
    np.testing.assert_allclose(post["Psi0"], Psin)
    np.testing.assert_allclose(post["mu0"], mun)
    assert post["kappa0"] == kn and post["nu0"] == nun


# ---------------------------------------------------------------------------------- kernel invariance
@pytest.mark.parametrize("key", ["regression-indep-niw", "dirichlet", "naive-bayes"])
def test_prior_predictive_invariance(key):
    """theta ~ prior, x ~ f(.|theta), theta' ~ K(theta, .; x)  =>  theta' ~ prior.

    Holds for any kernel invariant for p(theta | x) (Gibbs sweeps, slice steps), so it tests the
    non-conjugate updates too.
    """
    model = ALL_MODELS[key]()
    rng = np.random.default_rng(40)
    n_rep = 2500
    first, after = [], []
    for _ in range(n_rep):
        th = model.prior_sample(rng)
        x = model.simulate(th, 10, rng)
        first.append(th)
        after.append(model.update(th, x, rng))

    def flat(ps):
        return np.array([np.concatenate([np.ravel(np.log(p[k]) if key == "dirichlet" else p[k])
                                         for k in model.param_shapes]) for p in ps])

    a, b = flat(first), flat(after)
    # two independent samples from the same law: difference of means within z * se
    se = np.sqrt(a.var(axis=0, ddof=1) / n_rep + b.var(axis=0, ddof=1) / n_rep)
    assert np.all(np.abs(a.mean(axis=0) - b.mean(axis=0)) <= Z * se)
    if key == "dirichlet":  # and against the exact prior moments of log(alpha)
        assert_moments(b, digamma(1.0) - math.log(0.1), polygamma(1, 1.0), "log alpha")
    if key == "regression-indep-niw":
        assert_mean(b[:, :3], np.zeros(3), what="beta")
        assert_var(b[:, :3], 4.0 * np.ones(3), what="beta")
        assert_mean(b[:, 3], 3 / (4 - 1), what="sigma2")


def test_independent_prior_gibbs_matches_conditional():
    """One sweep draws beta | sigma2 then sigma2 | beta: check the beta step alone with a
    huge-n-free setup -- with a0 large and b0 tight, sigma2 stays ~ fixed and beta | sigma2 must
    match the known-variance posterior."""
    rng = np.random.default_rng(41)
    r = _regression_data(rng, n=20)
    a0 = 1e6
    b0 = 2.0 * (a0 - 1) * 1.0  # sigma2 ~ 2 (mean), sd ~ 2e-3
    m = LinearRegression(p=2, prior="independent", a0=a0, b0=b0, tau2=4.0)
    d = repeated_updates(m, {"beta": np.zeros(3), "sigma2": 2.0}, r, N_UPD, 42)
    ref = LinearRegression(p=2, sigma2=2.0, tau2=4.0).nonprivate_posterior(r)
    assert_moments(d["beta"], np.array(ref["beta0"]), np.diag(ref["beta_cov"]), "beta|sigma2")


# ---------------------------------------------------------------------------------- Dirichlet slice sampler
def _grid_posterior(records, v, w, lo=-4.0, hi=5.0, m=361):
    """Posterior moments of alpha (D = 2) by quadrature on a log(alpha) grid."""
    n = records.shape[0]
    T = np.log(records).sum(axis=0)
    u = np.linspace(lo, hi, m)
    U1, U2 = np.meshgrid(u, u, indexing="ij")
    A1, A2 = np.exp(U1), np.exp(U2)
    logp = (n * (gammaln(A1 + A2) - gammaln(A1) - gammaln(A2)) + (A1 - 1) * T[0] + (A2 - 1) * T[1]
            + (v - 1) * (U1 + U2) - w * (A1 + A2) + U1 + U2)  # Gamma(v, w) prior, Jacobian
    wgt = np.exp(logp - logp.max())
    wgt /= wgt.sum()
    edge = wgt[0].sum() + wgt[-1].sum() + wgt[:, 0].sum() + wgt[:, -1].sum()
    assert edge < 1e-8, "grid too small"
    return {"alpha": np.array([(wgt * A1).sum(), (wgt * A2).sum()]),
            "log_alpha": np.array([(wgt * U1).sum(), (wgt * U2).sum()]),
            "log_alpha_var": np.array([(wgt * U1 ** 2).sum(), (wgt * U2 ** 2).sum()])}


def _batch_means_check(chain, expected, n_batches=40, z=Z, what=""):
    c = np.asarray(chain)
    b = c[: (len(c) // n_batches) * n_batches].reshape(n_batches, -1, *c.shape[1:]).mean(axis=1)
    se = b.std(axis=0, ddof=1) / math.sqrt(n_batches)
    err = np.abs(c.mean(axis=0) - expected)
    assert np.all(err <= z * se), f"{what}: {c.mean(axis=0)} vs {expected} (se {se})"


@pytest.mark.parametrize("method,steps", [("univariate", 1), ("hyperrect", 3)])
def test_dirichlet_slice_sampler_matches_grid_posterior(method, steps):
    rng = np.random.default_rng(50)
    records = rng.dirichlet([2.0, 3.0], size=15)
    model = Dirichlet(parts=2, prior_shape=1.0, prior_rate=0.1, slice_method=method,
                      slice_steps=steps)
    ref = _grid_posterior(records, 1.0, 0.1)
    params = {"alpha": np.array([20.0, 0.5])}  # far from the posterior mass
    chain = []
    for it in range(6500):
        params = model.update(params, records, rng)
        if it >= 500:
            chain.append(params["alpha"])
    chain = np.array(chain)
    _batch_means_check(np.log(chain), ref["log_alpha"], what=f"{method} E log alpha")
    _batch_means_check(np.log(chain) ** 2, ref["log_alpha_var"], what=f"{method} E log^2 alpha")
    _batch_means_check(chain, ref["alpha"], what=f"{method} E alpha")


def test_dirichlet_slice_sampler_detects_wrong_target():
    """The grid check has power: a chain for different data is rejected."""
    rng = np.random.default_rng(51)
    records = rng.dirichlet([2.0, 3.0], size=15)
    other = rng.dirichlet([3.0, 2.0], size=15)
    model = Dirichlet(parts=2)
    ref = _grid_posterior(records, 1.0, 0.1)
    params = {"alpha": np.array([2.0, 3.0])}
    chain = []
    for _ in range(3000):
        params = model.update(params, other, rng)
        chain.append(np.log(params["alpha"]))
    with pytest.raises(AssertionError):
        _batch_means_check(np.array(chain), ref["log_alpha"])


def test_dirichlet_copula_prior_sample_and_invariance():
    model = ALL_MODELS["dirichlet-copula"]()
    rng = np.random.default_rng(52)
    draws = np.array([model.prior_sample(rng)["alpha"] for _ in range(6000)])
    v, w = np.array([2.0, 3.0, 4.0]), 0.5
    assert_moments(draws, v / w, v / w ** 2, "copula marginals")
    # normal scores have the requested correlation
    from scipy.stats import gamma, norm
    zs = norm.ppf(gamma.cdf(draws, v, scale=1 / w))
    c = np.corrcoef(zs.T)
    np.testing.assert_allclose(c[np.triu_indices(3, 1)], [0.5, 0.2, 0.3], atol=0.05)
    # prior -> simulate -> update leaves the prior invariant
    after = []
    for th in draws[:1500]:
        x = model.simulate({"alpha": th}, 10, rng)
        after.append(model.update({"alpha": th}, x, rng)["alpha"])
    after = np.log(after)
    la = np.log(draws)
    se = np.sqrt(la.var(axis=0, ddof=1) / len(la) + after.var(axis=0, ddof=1) / len(after))
    assert np.all(np.abs(la.mean(axis=0) - after.mean(axis=0)) <= Z * se)
    # with no records the slice chain targets the prior itself: the copula's correlation of the
    # normal scores (and the marginals) must come out of the chain
    params = {"alpha": np.array([1.0, 1.0, 1.0])}
    empty = np.zeros((0, 3))
    chain = []
    for it in range(4200):
        params = model.update(params, empty, rng)
        if it >= 200:
            chain.append(params["alpha"])
    zc = norm.ppf(gamma.cdf(np.array(chain), v, scale=1 / w))
    prods = np.column_stack([zc[:, 0] * zc[:, 1], zc[:, 0] * zc[:, 2], zc[:, 1] * zc[:, 2]])
    _batch_means_check(prods, [0.5, 0.2, 0.3], what="copula score correlations")
    _batch_means_check(zc, np.zeros(3), what="copula score means")


def test_dirichlet_validation():
    m = Dirichlet(parts=3)
    with pytest.raises(DataError, match="> 0"):
        m.validate_records([[0.5, 0.5, 0.0]])
    with pytest.raises(DataError, match="sum to 1"):
        m.validate_records([[0.5, 0.4, 0.3]])
    with pytest.raises(DataError, match=r"shape \(n, 3\)"):
        m.validate_records([[0.5, 0.5]])
    with pytest.raises(PrivpostError, match="correlation"):
        Dirichlet(parts=2, prior_corr=[[2, 0], [0, 2]])
    with pytest.raises(PrivpostError, match="slice_method"):
        Dirichlet(parts=2, slice_method="doubling")


# ---------------------------------------------------------------------------------- check_query
def test_check_query_with_real_queries():
    Q = pytest.importorskip("privpost.queries")
    s, mean = Q.Sum(bounds=(0, 1)), Q.Mean(bounds=(0, 1), n=10)
    hist3 = Q.Histogram(categories=3)
    nbq = Q.NaiveBayesCounts(n_classes=3, n_levels=[2, 3])
    reg2 = Q.RegressionStats(bounds_x=[(-10, 10)] * 2, bounds_y=(-10, 10))
    reg3 = Q.RegressionStats(bounds_x=[(-10, 10)] * 3, bounds_y=(-10, 10))
    tsum = Q.TruncatedSum(bounds=(0, 5))
    clm = Q.CensoredLogMean(parts=3, threshold=1e-3, n=100)

    def ok(model, q):
        model.check_query(q)

    def bad(model, q, pattern):
        with pytest.raises(IncompatibleError, match=pattern):
            model.check_query(q)

    for m in (BetaBernoulli(), NormalKnownVariance(), NormalInverseGamma()):
        ok(m, s), ok(m, mean)
        bad(m, hist3, "fits: Sum, Mean")
    ok(PoissonGamma(), tsum), ok(ExponentialGamma(), tsum), ok(ExponentialGamma(), s)
    bad(BetaBernoulli(), reg2, "cannot explain a 'regression_stats' release")
    ok(DirichletCategorical([1, 1, 1]), hist3)
    bad(DirichletCategorical([1, 1, 1, 1]), hist3, "3 categories, the model 4")
    bad(DirichletCategorical([1, 1, 1]), s, "fits: Histogram")
    nb = NaiveBayesLogLinear(n_levels=[2, 3], n_classes=3)
    ok(nb, nbq)
    bad(NaiveBayesLogLinear(n_levels=[2, 3], n_classes=4), nbq, "3 classes, the model 4")
    bad(NaiveBayesLogLinear(n_levels=[2, 4], n_classes=3), nbq, r"levels \[2, 3\] differ")
    bad(NaiveBayesLogLinear(n_levels=[2, 3, 2], n_classes=3), nbq, "2 features, the model 3")
    bad(nb, hist3, "fits: NaiveBayesCounts")
    lr = LinearRegression(p=2, sigma2=2.0)
    ok(lr, reg2)
    bad(lr, reg3, "p = 3 covariates, the model p = 2")
    bad(lr, hist3, "fits: RegressionStats")
    ok(Dirichlet(parts=3), clm)
    bad(Dirichlet(parts=2), clm, "3 parts, the model 2")
    bad(Dirichlet(parts=3), s, "fits: CensoredLogMean")


def test_check_query_stand_ins_by_name():
    class Stand:
        def __init__(self, name, **kw):
            self.name = name
            self.__dict__.update(kw)

    DirichletCategorical([1, 1]).check_query(Stand("histogram", categories=2))
    LinearRegression(p=1).check_query(Stand("regression-stats", bounds_x=[(0, 1)]))
    with pytest.raises(IncompatibleError):
        LinearRegression(p=2).check_query(Stand("regression_stats", bounds_x=[(0, 1)]))
    with pytest.raises(IncompatibleError):
        BetaBernoulli().check_query(Stand("censored_log_mean", parts=2))


# ---------------------------------------------------------------------------------- specs
def test_model_from_spec_parsing():
    m = model_from_spec("beta-bernoulli:a=1,b=1")
    assert isinstance(m, BetaBernoulli) and (m.a, m.b) == (1.0, 1.0)
    m = model_from_spec("  Beta_Bernoulli : a = 0.5 , b=2 ")
    assert (m.a, m.b) == (0.5, 2.0)
    assert isinstance(model_from_spec("beta-bernoulli"), BetaBernoulli)
    m = model_from_spec("linear-regression:p=2,sigma2=2,tau2=4,m=0.9;-1.17,S=1;0.5|0.5;2")
    assert m.p == 2 and m.sigma2 == 2.0 and m.param_shapes == {"beta": (3,)}
    np.testing.assert_allclose(m.m, [0.9, -1.17])
    np.testing.assert_allclose(m.S, [[1, 0.5], [0.5, 2]])
    m = model_from_spec("linear-regression:p=1,sigma2=none,hyperprior=niw,nu0=50")
    assert set(m.param_shapes) == {"beta", "sigma2", "m", "S"}
    m = model_from_spec("dirichlet-categorical:alpha=1;2;3")
    np.testing.assert_allclose(m.alpha, [1, 2, 3])
    m = model_from_spec("naive-bayes:n_classes=5,n_levels=3,n_features=5")
    assert m.n_levels == (3,) * 5 and m.param_shapes["q5"] == (5, 3)
    m = model_from_spec("dirichlet:parts=3,prior_shape=1,prior_rate=0.1,slice_method=hyperrect")
    assert m.slice_method == "hyperrect"
    m = model_from_spec({"type": "poisson-gamma", "shape": 2, "rate": 3})
    assert (m.shape, m.rate) == (2.0, 3.0)
    m = model_from_spec('{"type": "exponential-gamma", "shape": 8}')
    assert m.shape == 8.0
    assert model_from_spec(m) is m


@pytest.mark.parametrize("spec,pattern", [
    ("betabernoulli:a=1", "unknown model 'betabernoulli'; available: beta-bernoulli"),
    ("beta-bernoulli:a=1,c=2", r"unknown parameter 'c' for model 'beta-bernoulli'; expected: a, b"),
    ("beta-bernoulli:a=-1", "a must be a finite number > 0"),
    ("beta-bernoulli:a", "expected key=value"),
    ("beta-bernoulli:a=1,a=2", "given twice"),
    ("beta-bernoulli:a=", "has no value"),
    ("beta-bernoulli:a=1@", "cannot parse value"),
    ("linear-regression:sigma2=2", "needs parameter 'p'"),
    ("linear-regression:p=0", "p must be an integer >= 1"),
    ("linear-regression:p=2,m=1;2;3", r"m must have shape \(2,\)"),
    ("linear-regression:p=2,S=1;2|2;1", "S must be positive definite"),
    ("linear-regression:p=2,hyperprior=iw", "hyperprior must be None or 'niw'"),
    ("linear-regression:p=2,nu0=3", "needs hyperprior='niw'"),
    ("linear-regression:p=2,hyperprior=niw,m=0;0", "m and S are parameters"),
    ("linear-regression:p=2,prior=flat", "prior must be 'conjugate' or 'independent'"),
    ("naive-bayes:n_classes=3", "needs parameter 'n_levels'"),
    ("naive-bayes:n_classes=3,n_levels=3", "give n_features"),
    ("naive-bayes:n_classes=3,n_levels=3;1", "n_levels entry must be an integer >= 2"),
    ("dirichlet-categorical:alpha=1", "needs k"),
    ("dirichlet-categorical:alpha=1;2,k=3", "alpha has 2 entries but k = 3"),
    ("dirichlet:parts=3,prior_rate=1;2", r"prior_rate must have shape \(3,\)"),
    (":a=1", "no model name"),
    ("{bad json", "does not parse"),
])
def test_model_from_spec_errors(spec, pattern):
    with pytest.raises(ValueError, match=pattern):
        model_from_spec(spec)


def test_to_spec_unrepresentable_values_and_nb_class_count():
    nb = NaiveBayesLogLinear(n_levels=[2, 3], class_alpha=[1, 1, 1],
                             feature_alpha=[np.ones((3, 2)), 2 * np.ones((3, 3))])
    assert nb.n_classes == 3
    with pytest.raises(PrivpostError, match="use to_dict"):
        nb.to_spec()
    assert model_from_dict(json.loads(json.dumps(nb.to_dict()))).to_dict() == nb.to_dict()
    with pytest.raises(PrivpostError, match="give n_classes"):
        NaiveBayesLogLinear(n_levels=[2, 3])


def test_model_from_dict_errors():
    with pytest.raises(PrivpostError, match="'type'"):
        model_from_dict({"a": 1})
    with pytest.raises(PrivpostError, match="expected 'beta-bernoulli'"):
        BetaBernoulli.from_dict({"type": "poisson-gamma"})


def test_registry_and_exports():
    assert set(M.MODELS) >= {"beta-bernoulli", "poisson-gamma", "exponential-gamma",
                             "normal-known-variance", "normal-inverse-gamma",
                             "dirichlet-categorical", "naive-bayes", "linear-regression",
                             "dirichlet"}
    for name in M.__all__:
        assert hasattr(M, name)
    with pytest.raises(ValueError, match="already registered"):
        @M.register_model
        class Clash(BetaBernoulli):
            name = "beta-bernoulli"


def test_user_model_example_from_docstring():
    """The worked example in privpost.models.base runs as written and passes the checks."""
    import privpost.models.base as base

    src = re.search(r"# --- example: user model ---\n(.*?)# --- end example ---", base.__doc__, re.S)
    code = "\n".join(line[4:] for line in src.group(1).splitlines())
    ns: dict = {}
    try:
        exec(compile(code, "<docstring example>", "exec"), ns)
        model = ns["model"]
        assert model.name == "poisson-lognormal" and model.mu == 1.0
        assert model_from_dict(model.to_dict()).to_dict() == model.to_dict()
        rng = np.random.default_rng(60)
        Q = pytest.importorskip("privpost.queries")
        model.check_query(Q.Sum(bounds=(0, 10)))
        with pytest.raises(IncompatibleError):
            model.check_query(Q.Histogram(categories=3))
        # invariance of its Metropolis update (prior -> data -> update)
        before, after = [], []
        for _ in range(3000):
            th = model.prior_sample(rng)
            x = model.simulate(th, 5, rng)
            before.append(math.log(th["lam"]))
            after.append(math.log(model.update(th, x, rng)["lam"]))
        assert_moments(np.array(after), 1.0, 0.25, "user model log lam")
        assert np.isfinite(model.log_joint(th, x))
    finally:
        M.MODELS.pop("poisson-lognormal", None)


# ---------------------------------------------------------------------------------- compiled fast path
@pytest.mark.parametrize("key", ["beta-bernoulli", "regression-known", "regression-indep-niw",
                                 "naive-bayes", "dirichlet"])
def test_compiled_model_reproduces_python(key):
    fast = pytest.importorskip("privpost.inference._damcmc_fast")
    model = ALL_MODELS[key]()
    cm = model.compiled_model()
    assert cm is not None
    params = model.prior_sample(np.random.default_rng(70))
    x = model.simulate(params, 30, np.random.default_rng(71))
    rw = cm.record_width
    xf = np.ascontiguousarray(np.asarray(x, dtype=np.float64).reshape(30, rw))
    r1, r2 = np.random.default_rng(72), np.random.default_rng(72)
    theta = fast.pack_params(params, model.param_shapes)
    for _ in range(3):  # a few chained updates: same stream, same draws
        py = model.update(params, x, r1)
        cm.update(theta, xf, r2)
        np.testing.assert_allclose(theta, fast.pack_params(py, model.param_shapes), rtol=1e-9)
        params = py
    out = np.zeros((25, rw))
    cm.simulate(theta, out, r2)
    want = model.simulate(params, 25, r1)
    np.testing.assert_allclose(out, np.asarray(want, dtype=np.float64).reshape(25, rw), rtol=1e-9)
    assert r1.random() == r2.random()
