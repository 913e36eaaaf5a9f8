"""Learned covariate probabilities of LinearRegression (issue 23, Deliver 3).

* the conjugate update against its closed form (Beta / Dirichlet given fixed covariates), and the
  compiled update drawing the same numbers as the Python one;
* damcmc (generic and compiled paths) with ``q ~ Beta(1, 1)`` learned, on a tiny release, against
  the exact posterior computed independently by prior-weighted (importance) sampling of
  ``(beta, q, x, y)``; the wrong variant (an update with the level counts swapped) must fail.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

import privpost as pp
from privpost.errors import PrivpostError
from privpost.mechanisms import Laplace
from privpost.models import LinearRegression
from privpost.models.covariate_law import CovariateLaw
from privpost.queries import RegressionStats
from privpost.releases.release import release

from test_damcmc import _ess

Z_MAX = 4.5     # per statistic; a handful of statistics per test


def _mixed(**kw):
    return LinearRegression(p=3, sigma2=1.0, covariates="bernoulli;categorical;uniform",
                            covariate_bounds=[[0, 1], [1, 3], [0, 2]], **kw)


def test_learned_parameters_names_prior_and_note():
    m = _mixed(covariate_alpha=[[2, 3], [1, 2, 3], None])
    assert m.param_shapes == {"beta": (4,), "q_x1": (), "pi_x2": (3,)}
    note = m.covariate_note()
    assert "x1 ~ Bernoulli(q_x1) with q_x1 ~ Beta(2, 3) learned" in note
    assert "x2 ~ Categorical(pi_x2) on 1..3 with pi_x2 ~ Dirichlet(1, 2, 3) learned" in note
    # round trip keeps the prior; fixed probabilities are not parameters
    from privpost.models import model_from_dict

    assert model_from_dict(m.to_dict()).covariate_note() == note
    from privpost.models import model_from_spec

    spec = model_from_spec("linear-regression:p=2,sigma2=1,covariates=bernoulli;uniform,"
                           "covariate_bounds=0;1|0;4,covariate_alpha=2;3|none;none")
    assert "q_x1 ~ Beta(2, 3) learned" in spec.covariate_note()
    fixed = _mixed(covariate_probs=[0.3, [0.2, 0.3, 0.5], None])
    assert fixed.param_shapes == {"beta": (4,)}
    # prior density: Beta(2, 3) at q = 0.4 times Dirichlet(1, 2, 3) at (0.2, 0.3, 0.5)
    params = {"beta": np.zeros(4), "q_x1": 0.4, "pi_x2": np.array([0.2, 0.3, 0.5])}
    exact = (math.log(12 * 0.4 * 0.6 ** 2)
             + math.lgamma(6) - math.lgamma(2) - math.lgamma(3) + math.log(0.3) + 2 * math.log(0.5))
    base = fixed.log_prior({"beta": np.zeros(4)})
    assert m.log_prior(params) - base == pytest.approx(exact, rel=1e-12)


@pytest.mark.parametrize("kwargs, field", [
    (dict(covariate_alpha=[[1, 1], None]), "covariate_alpha"),
    (dict(covariate_alpha=[[1, 0], None, None]), "covariate_alpha[0]"),
    (dict(covariate_alpha=[[1, np.inf], None, None]), "covariate_alpha[0]"),
    (dict(covariate_alpha=[1, None, None]), "covariate_alpha[0]"),
    (dict(covariate_alpha=[None, [1, 1], None]), "covariate_alpha[1]"),
    (dict(covariate_alpha=[None, "a;b;c", None]), "covariate_alpha[1]"),
    (dict(covariate_alpha=[None, None, [1, 1]]), "covariate_alpha[2]"),
    (dict(covariate_alpha=[[1, 1], None, None], covariate_probs=[0.5, None, None]),
     "covariate_alpha[0]"),
    (dict(covariate_alpha=[[1, 1e300], None, None]), "covariate_alpha[0]"),
])
def test_bad_priors_are_refused_naming_the_field(kwargs, field):
    with pytest.raises(PrivpostError, match=re.escape(field)):
        _mixed(**kwargs)


import re  # noqa: E402


def test_conjugate_update_matches_the_closed_form_python_and_compiled():
    m = _mixed(covariate_alpha=[[2, 3], [1, 2, 3], None])
    rng = np.random.default_rng(3)
    n = 40
    x = np.column_stack([(rng.random(n) < 0.3).astype(float), rng.integers(1, 4, n),
                         2 * rng.random(n), rng.standard_normal(n)])
    n1 = x[:, 0].sum()
    cnt = np.bincount(x[:, 1].astype(int) - 1, minlength=3)
    a_post, b_post = 2 + n1, 3 + n - n1
    d_post = np.array([1, 2, 3]) + cnt
    cm = m.compiled_model()
    theta0 = np.zeros(4 + 1 + 3)
    R = 4000
    qs = np.empty((2, R))
    pis = np.empty((2, R, 3))
    for r in range(R):
        g = np.random.default_rng([7, r])
        out = m.update({"beta": np.zeros(4)}, x, g)
        qs[0, r], pis[0, r] = out["q_x1"], out["pi_x2"]
        th = theta0.copy()
        cm.update(th, x, np.random.default_rng([7, r]))
        qs[1, r], pis[1, r] = th[4], th[5:]
        if r < 5:     # the compiled update draws the same numbers
            assert th[:4] == pytest.approx(out["beta"], rel=1e-10, abs=1e-12)
            assert th[4] == pytest.approx(out["q_x1"], rel=1e-10)
            assert th[5:] == pytest.approx(out["pi_x2"], rel=1e-10)
    # means against Beta / Dirichlet closed forms (independent draws: z with the exact sd)
    mq, vq = a_post / (a_post + b_post), a_post * b_post / ((a_post + b_post) ** 2
                                                            * (a_post + b_post + 1))
    A = d_post.sum()
    mp = d_post / A
    vp = mp * (1 - mp) / (A + 1)
    for k in range(2):
        assert abs((qs[k].mean() - mq) / math.sqrt(vq / R)) < Z_MAX
        assert np.all(np.abs((pis[k].mean(0) - mp) / np.sqrt(vp / R)) < Z_MAX)
    # wrong variant: the counts swapped (Beta(a + n0, b + n1)) is far off
    wrong = (2 + n - n1) / (5 + n)
    assert abs((qs[0].mean() - wrong) / math.sqrt(vq / R)) > 10 * Z_MAX


def test_simulate_uses_the_learned_probabilities_python_and_compiled():
    m = _mixed()
    theta = {"beta": np.zeros(4), "q_x1": 0.8, "pi_x2": np.array([0.1, 0.1, 0.8])}
    n = 20000
    cm = m.compiled_model()
    flat = np.concatenate([theta["beta"], [theta["q_x1"]], theta["pi_x2"]])
    co = np.empty((n, 4))
    cm.simulate(flat, co, np.random.default_rng(1))
    for x in (m.simulate(theta, n, np.random.default_rng(0)), co):
        assert abs((x[:, 0].mean() - 0.8) / math.sqrt(0.16 / n)) < Z_MAX
        for lev, pr in zip((1, 2, 3), (0.1, 0.1, 0.8)):
            assert abs(((x[:, 1] == lev).mean() - pr) / math.sqrt(pr * (1 - pr) / n)) < Z_MAX
    ll = m.log_likelihood(theta, np.array([[1.0, 3.0, 1.0, 0.0]]))[0]
    assert ll == pytest.approx(math.log(0.8 * 0.8 / 2) - 0.5 * math.log(2 * math.pi), rel=1e-12)


# ------------------------------------------------------------------------------ exactness
# Three records with x = 1, y = 1, x bounds (0, 1), y bounds (-3, 3), Laplace eps = 16 (scale
# 0.5 on the L1 sensitivity 8); model sigma2 = 1, beta ~ N(0, 4 I), q ~ Beta(1, 1) learned. The
# release nearly reveals sum x = 3, so q's posterior is near Beta(4, 1) (mean 0.8); the exact
# posterior by prior-weighted sampling of (beta, q, x, y).
def _tiny_release():
    q = RegressionStats([(0.0, 1.0)], (-3.0, 3.0))
    return release(np.array([[1.0, 1.0]] * 3), q, Laplace(epsilon=16.0), seed=5)


def _exact_by_weighting(rel, M=400_000):
    """Posterior means ``[beta_0, beta_1, q]`` and their standard errors."""
    rng = np.random.default_rng(12345)
    n = rel.n
    beta = 2.0 * rng.standard_normal((M, 2))
    q = rng.random(M)
    x = (rng.random((M, n)) < q[:, None]).astype(float)
    y = beta[:, :1] + x * beta[:, 1:] + rng.standard_normal((M, n))
    T = rel.query.t(np.stack([x, y], -1).reshape(-1, 2), check=False).reshape(M, n, -1).sum(1)
    lw = -np.abs(T - rel.observed).sum(1) / rel.mechanism.scale
    w = np.exp(lw - lw.max())
    w /= w.sum()
    th = np.column_stack([beta, q])
    mu = w @ th
    return mu, np.sqrt(w ** 2 @ (th - mu) ** 2)


@pytest.fixture(scope="module")
def tiny():
    rel = _tiny_release()
    return rel, _exact_by_weighting(rel)


def _z(post, mu, se_ref):
    cols = [post.draws["beta"][..., 0], post.draws["beta"][..., 1], post.draws["q_x1"]]
    return np.array([(d.mean() - mu[j]) / math.sqrt(d.var() / _ess(d) + se_ref[j] ** 2)
                     for j, d in enumerate(cols)])


LEARNED = dict(p=1, sigma2=1.0, tau2=4.0, covariates="bernoulli")


@pytest.mark.parametrize("fast_path", [False, True])
def test_damcmc_learning_q_is_exact(tiny, fast_path):
    rel, (mu, se) = tiny
    post = pp.infer(LinearRegression(**LEARNED), rel, method="damcmc", seed=11,
                    draws=1500, warmup=500, fast_path=fast_path, progress=False,
                    predictive_check=False)
    assert ("fully compiled" in " ".join(post.notes)) == fast_path
    assert any("q_x1 ~ Beta(1, 1) learned" in n for n in post.notes)
    z = _z(post, mu, se)
    assert np.all(np.abs(z) < Z_MAX), z


def test_wrong_variant_swapped_counts_fails_the_same_comparison(tiny, monkeypatch):
    rel, (mu, se) = tiny
    orig = CovariateLaw.level_counts
    monkeypatch.setattr(CovariateLaw, "level_counts",
                        lambda self, x, j: orig(self, x, j)[::-1].copy())
    post = pp.infer(LinearRegression(**LEARNED), rel, method="damcmc", seed=11,
                    draws=1500, warmup=500, fast_path=False, progress=False,
                    predictive_check=False)
    assert np.max(np.abs(_z(post, mu, se))) > Z_MAX


def test_naive_and_nonprivate_give_the_learned_parameters():
    rng = np.random.default_rng(2)
    n = 400
    x = np.column_stack([(rng.random(n) < 0.2).astype(float), 4.0 * rng.random(n)])
    y = 0.5 + x @ np.array([1.0, 0.5]) + rng.standard_normal(n)
    recs = np.column_stack([x, y])
    rel = release(recs, RegressionStats([(0, 1), (0, 4)], (-10, 10)), Laplace(epsilon=50.0),
                  seed=rng)
    m = LinearRegression(p=2, sigma2=1.0, covariates="bernoulli;uniform",
                         covariate_bounds=[[0, 1], [0, 4]])
    a, b = 1 + x[:, 0].sum(), 1 + n - x[:, 0].sum()
    sd = math.sqrt(a * b / ((a + b) ** 2 * (a + b + 1)))
    for method in ("naive", "nonprivate"):
        kw = dict(records=recs) if method == "nonprivate" else {}
        post = pp.infer(m, rel, method=method, seed=4, predictive_check=False, **kw)
        q = post.draws["q_x1"]
        assert np.all((q > 0) & (q < 1))
        # the release's noise on sum x is ~0.3 here: both near Beta(1 + n1, 1 + n0)
        assert abs(q.mean() - a / (a + b)) < 0.5 * sd
    assert m.nonprivate_posterior(recs)["covariate_alpha"] == [[a, b], None]


def test_damcmc_learns_categorical_probabilities_compiled():
    """End to end on the compiled path: a categorical column's pi is learned from a precise
    release (eps = 50, n = 300): its draws lie on the simplex and centre on the level
    frequencies (the release holds sum x and sum x^2, which fix two of the three)."""
    rng = np.random.default_rng(8)
    n = 300
    lev = rng.choice(3, size=n, p=[0.6, 0.3, 0.1]).astype(float)
    y = 0.5 + 0.5 * lev + rng.standard_normal(n)
    rel = release(np.column_stack([lev, y]), RegressionStats([(0, 2)], (-6, 6)),
                  Laplace(epsilon=50.0), seed=rng)
    m = LinearRegression(p=1, sigma2=1.0, covariates="categorical", covariate_bounds=[[0, 2]])
    post = pp.infer(m, rel, method="damcmc", seed=3, draws=500, warmup=300, progress=False,
                    predictive_check=False, fast_path=True)
    assert "fully compiled" in " ".join(post.notes)
    pi = post.draws["pi_x1"]
    assert pi.shape[-1] == 3 and np.allclose(pi.sum(-1), 1.0) and np.all(pi >= 0)
    freq = np.bincount(lev.astype(int), minlength=3) / n
    # posterior sd of each level's share is about sqrt(f (1 - f) / n) <= 0.03
    assert np.all(np.abs(pi.reshape(-1, 3).mean(0) - freq) < 0.1), (pi.reshape(-1, 3).mean(0),
                                                                     freq)
