"""Per-column covariate laws of LinearRegression (issue 23, finding 4).

Exactness: damcmc (generic and compiled paths) with a Bernoulli covariate against the exact
posterior of a tiny release computed independently by prior-weighted (importance) sampling; the
wrong variant (the default N(0, I) covariates on the same release) must fail the comparison.
"""

from __future__ import annotations

import math
import warnings

import numpy as np
import pytest

import privpost as pp
from privpost.errors import IncompatibleError, ModelFitWarning, PrivpostError
from privpost.mechanisms import Laplace
from privpost.models import LinearRegression
from privpost.queries import RegressionStats
from privpost.releases.release import release

from test_damcmc import _ess

Z_MAX = 4.5     # per statistic; a handful of statistics per test


# ------------------------------------------------------------------------------ the laws
def test_simulate_draws_each_column_from_its_law_python_and_compiled():
    p = 4
    m = LinearRegression(p=p, sigma2=1.0, covariates="bernoulli;uniform;categorical;normal",
                         covariate_bounds=[[0, 1], [2, 5], [1, 3], [-1, 1]],
                         covariate_probs=[0.2, None, [0.5, 0.3, 0.2], None], m=[0, 0, 0, 3.0])
    theta = np.array([0.0, 1.0, 1.0, 1.0, 1.0])
    n = 20000
    py = m.simulate({"beta": theta}, n, np.random.default_rng(0))[:, :p]
    cm = m.compiled_model()
    co = np.empty((n, p + 1))
    cm.simulate(theta, co, np.random.default_rng(1))
    for x in (py, co[:, :p]):
        assert set(np.unique(x[:, 0])) == {0.0, 1.0}
        z = (x[:, 0].mean() - 0.2) / math.sqrt(0.2 * 0.8 / n)
        assert abs(z) < Z_MAX
        assert x[:, 1].min() >= 2 and x[:, 1].max() <= 5
        for q in (0.1, 0.5, 0.9):      # uniform quantiles: binomial z of the empirical CDF
            assert abs(((x[:, 1] <= 2 + 3 * q).mean() - q) / math.sqrt(q * (1 - q) / n)) < Z_MAX
        assert set(np.unique(x[:, 2])) == {1.0, 2.0, 3.0}
        for lev, pr in zip((1, 2, 3), (0.5, 0.3, 0.2)):
            assert abs(((x[:, 2] == lev).mean() - pr) / math.sqrt(pr * (1 - pr) / n)) < Z_MAX
        assert abs((x[:, 3].mean() - 3.0) / math.sqrt(1.0 / n)) < Z_MAX
    # the y column is beta_0 + x beta + N(0, 1)
    rec = m.simulate({"beta": theta}, n, np.random.default_rng(2))
    e = rec[:, p] - rec[:, :p].sum(axis=1)
    assert abs(e.mean() / math.sqrt(1.0 / n)) < Z_MAX


def test_log_likelihood_is_the_product_of_the_column_laws():
    m = LinearRegression(p=2, sigma2=2.0, covariates="bernoulli,uniform",
                         covariate_bounds=[[0, 1], [0, 4]], covariate_probs=[0.3, None])
    beta = np.array([0.5, 1.0, -1.0])
    recs = np.array([[1.0, 2.0, 0.0], [0.0, 0.5, 1.0], [0.5, 1.0, 0.0], [1.0, 5.0, 0.0]])
    ll = m.log_likelihood({"beta": beta}, recs)
    for i in range(2):
        x, y = recs[i, :2], recs[i, 2]
        px = (0.3 if x[0] == 1 else 0.7) / 4.0
        e = y - beta[0] - x @ beta[1:]
        exact = math.log(px) - 0.5 * e * e / 2.0 - 0.5 * math.log(2 * math.pi * 2.0)
        assert ll[i] == pytest.approx(exact, rel=1e-12)
    assert ll[2] == -np.inf and ll[3] == -np.inf      # 0.5 is not binary; 5 is outside (0, 4)


@pytest.mark.parametrize("kwargs, field", [
    (dict(covariates="normal,poisson"), "covariates[1]"),
    (dict(covariates="normal"), "covariates"),
    (dict(covariates=["normal"] * 5), "covariates"),
    (dict(covariates=3), "covariates"),
    (dict(covariates="uniform,normal"), "covariate_bounds"),
    (dict(covariates="uniform,normal", covariate_bounds=[[1, 0], [0, 1]]), "covariate_bounds"),
    (dict(covariates="uniform,normal", covariate_bounds=[[0, np.inf], [0, 1]]), "covariate_bounds"),
    (dict(covariates="categorical,normal", covariate_bounds=[[0, 1.5], [0, 1]]),
     "covariate_bounds[0]"),
    (dict(covariates="categorical,normal", covariate_bounds=[[0, 1e9], [0, 1]]),
     "covariate_bounds[0]"),
    (dict(covariates="bernoulli,normal", covariate_probs=[1.0, None]), "covariate_probs[0]"),
    (dict(covariates="bernoulli,normal", covariate_probs=["x", None]), "covariate_probs[0]"),
    (dict(covariates="bernoulli,normal", covariate_probs=[0.5, 0.5]), "covariate_probs[1]"),
    (dict(covariates="bernoulli,normal", covariate_probs=[0.5]), "covariate_probs"),
    (dict(covariates="categorical,normal", covariate_bounds=[[0, 2], [0, 1]],
          covariate_probs=[[0.5, 0.5], None]), "covariate_probs[0]"),
    (dict(covariates="bernoulli,normal", hyperprior="niw"), "covariates"),
])
def test_bad_covariate_declarations_are_refused_naming_the_field(kwargs, field):
    with pytest.raises(PrivpostError, match=re.escape(field)):
        LinearRegression(p=2, **kwargs)


import re  # noqa: E402  (used by the parametrised test above)


def test_round_trip_and_spec():
    from privpost.models import model_from_dict, model_from_spec
    from privpost.models.spec import model_for_release

    m = LinearRegression(p=2, sigma2=1.0, covariates=["bernoulli", "uniform"],
                         covariate_bounds=[[0, 1], [0, 4]], covariate_probs=[0.3, None])
    m2 = model_from_dict(m.to_dict())
    assert m2.covariate_note() == m.covariate_note()
    assert "Bernoulli(0.3) (fixed)" in m.covariate_note() and "U(0, 4)" in m.covariate_note()
    m3 = model_from_spec("linear-regression:p=2,sigma2=1,covariates=bernoulli;uniform,"
                         "covariate_bounds=0;1|0;4")
    assert m3.covariate_note() == LinearRegression(
        p=2, sigma2=1.0, covariates="bernoulli,uniform",
        covariate_bounds=[[0, 1], [0, 4]]).covariate_note()
    rel = release(np.zeros((5, 3)), RegressionStats([(0, 1), (0, 4)], (-1, 1)),
                  Laplace(epsilon=1.0), seed=0)
    model, inferred = model_for_release("linear-regression:sigma2=1,covariates=bernoulli;uniform",
                                        rel)
    assert inferred == {"p": 2, "covariate_bounds": [[0.0, 1.0], [0.0, 4.0]]}
    assert "U(0, 4)" in model.covariate_note()
    with pytest.raises(PrivpostError, match="covariates"):
        model_for_release("linear-regression:sigma2=1,covariates=bernoulli;gamma", rel)


# ------------------------------------------------------------------------------ exactness
# Two records with x = 0, y = -2, y bounds (-3, 3), x bounds (0, 1), Laplace eps = 16 (scale 0.5
# on an L1 sensitivity of 8); model: sigma2 = 1, beta ~ N(0, 4 I), x ~ Bernoulli(0.3). The exact
# posterior mean of beta by prior-weighted sampling (importance ESS ~ 36,000): it differs from the
# N(0, 1)-covariate posterior by about 0.45 posterior sd in both coordinates.
def _tiny_release():
    q = RegressionStats([(0.0, 1.0)], (-3.0, 3.0))
    return release(np.array([[0.0, -2.0], [0.0, -2.0]]), q, Laplace(epsilon=16.0), seed=5)


def _exact_by_weighting(rel, M=300_000):
    """Posterior mean ``(2,)`` and its standard error of beta under the Bernoulli(0.3) model."""
    rng = np.random.default_rng(12345)
    n = rel.n
    beta = 2.0 * rng.standard_normal((M, 2))
    x = (rng.random((M, n)) < 0.3).astype(float)
    y = beta[:, :1] + x * beta[:, 1:] + rng.standard_normal((M, n))
    T = rel.query.t(np.stack([x, y], -1).reshape(-1, 2), check=False).reshape(M, n, -1).sum(1)
    lw = -np.abs(T - rel.observed).sum(1) / rel.mechanism.scale
    w = np.exp(lw - lw.max())
    w /= w.sum()
    mu = w @ beta
    return mu, np.sqrt(w ** 2 @ (beta - mu) ** 2)


@pytest.fixture(scope="module")
def tiny():
    rel = _tiny_release()
    return rel, _exact_by_weighting(rel)


def _z(post, mu, se_ref):
    d = post.draws["beta"]
    out = []
    for j in range(2):
        dj = d[..., j]
        out.append((dj.mean() - mu[j]) / math.sqrt(dj.var() / _ess(dj) + se_ref[j] ** 2))
    return np.array(out)


BERN = dict(p=1, sigma2=1.0, tau2=4.0, covariates="bernoulli", covariate_probs=[0.3])


@pytest.mark.parametrize("fast_path", [False, True])
def test_damcmc_with_a_bernoulli_covariate_is_exact(tiny, fast_path):
    rel, (mu, se) = tiny
    post = pp.infer(LinearRegression(**BERN), rel, method="damcmc", seed=11, draws=1500,
                    warmup=500, fast_path=fast_path, progress=False, predictive_check=False)
    assert ("fully compiled" in " ".join(post.notes)) == fast_path
    assert np.all(np.abs(_z(post, mu, se)) < Z_MAX), _z(post, mu, se)


def test_wrong_variant_normal_covariates_fails_the_same_comparison(tiny):
    rel, (mu, se) = tiny
    post = pp.infer(LinearRegression(p=1, sigma2=1.0, tau2=4.0), rel, method="damcmc", seed=11,
                    draws=1500, warmup=500, fast_path=True, progress=False,
                    predictive_check=False)
    assert np.max(np.abs(_z(post, mu, se))) > Z_MAX


# ------------------------------------------------------------------------------ notes + check
# seed 0 draws a Laplace noise of -253 (8.4 scales) on XtX[0,2]: the check rightly flags it
def _treated_dose_release(seed=1, n=2000):
    rng = np.random.default_rng(seed)
    x = np.column_stack([(rng.random(n) < 0.5).astype(float), 4.0 * rng.random(n)])
    y = 0.5 + 1.0 * x[:, 0] + 0.5 * x[:, 1] + rng.standard_normal(n)
    return release(np.column_stack([x, y]), RegressionStats([(0, 1), (0, 4)], (-10, 10)),
                   Laplace(epsilon=0.5), seed=rng)


def _covariate_note(post):
    notes = [n for n in post.notes if n.startswith("covariate model:")]
    assert len(notes) == 1, post.notes
    return notes[0]


def test_every_regression_posterior_states_its_covariate_model_and_the_check_warns():
    rel = _treated_dose_release()
    with pytest.warns(ModelFitWarning, match="joint p"):
        post = pp.infer(LinearRegression(p=2, sigma2=1.0), rel, method="naive", seed=0)
    note = _covariate_note(post)
    assert note.startswith("covariate model: x ~ N_2(m, S)")
    assert "the default: no column types declared" in note
    assert any("does not reproduce the release" in n for n in post.notes)
    # N(0, 1) for a column bounded by (0, 1): 34% of the mass inside, stated and warned
    assert any(n.startswith("MODEL MISFIT: covariate model contradicts the release's bounds: "
                            "x1 ~ N(0, 1) "
                            "has 34%") for n in post.notes)
    good = LinearRegression(p=2, sigma2=1.0, covariates="bernoulli,uniform",
                            covariate_bounds=[[0, 1], [0, 4]])
    with warnings.catch_warnings():   # exact posterior of the right model: the check passes
        warnings.simplefilter("error", ModelFitWarning)
        post = pp.infer(good, rel, method="damcmc", seed=0, draws=400, warmup=400,
                        progress=False)
    assert _covariate_note(post) == ("covariate model: x1 ~ Bernoulli(q_x1) with q_x1 ~ "
                                     "Beta(1, 1) learned (conjugate update); x2 ~ U(0, 4) "
                                     "(independent across kinds)")
    assert any(n.startswith("posterior predictive check") for n in post.notes)
    assert not any(n.startswith("MODEL MISFIT") for n in post.notes)
    with pytest.raises(PrivpostError, match="predictive_check"):
        pp.infer(good, rel, method="naive", predictive_check="no")


def test_gibbs_ss_refuses_normal_moments_for_non_normal_columns():
    rel = _treated_dose_release(n=50)
    good = LinearRegression(p=2, sigma2=1.0, covariates="bernoulli,uniform",
                            covariate_bounds=[[0, 1], [0, 4]])
    with pytest.raises(IncompatibleError, match="covariates"):
        pp.infer(good, rel, method="gibbs-ss")


def test_cli_declares_covariates_and_reports_a_misfit(tmp_path):
    from typer.testing import CliRunner

    from privpost.cli import app

    path = tmp_path / "rel.json"
    _treated_dose_release().save(path)
    runner = CliRunner()

    def infer(spec, *extra):
        res = runner.invoke(app, ["infer", str(path), "--model", spec, "--method", "naive",
                                  "--json", *extra])
        assert res.exit_code == 0, res.output
        import json

        return json.loads(res.output)["notes"]

    notes = infer("linear-regression:sigma2=1")
    assert any(n.startswith("MODEL MISFIT: posterior predictive check") for n in notes)
    assert any(n.startswith("MODEL MISFIT: covariate model contradicts") for n in notes)
    notes = infer("linear-regression:sigma2=1,covariates=bernoulli;uniform",
                  "--option", "predictive_check=false")
    # naive states what it does with q_x1 (a plug-in of the noisy sum: test_covariate_notes)
    assert ("covariate model: x1 ~ Bernoulli(q_x1) with q_x1 ~ Beta(1, 1) learned by the "
            "plug-in Beta(a + s, b + n - s), s the column's noisy sum (X'X's intercept row) "
            "clipped to [0, n]; x2 ~ U(0, 4) (independent across kinds)") in notes
    assert not any("predictive check" in n for n in notes)
    res = runner.invoke(app, ["infer", str(path), "--model",
                              "linear-regression:sigma2=1,covariates=bernoulli;unifrm"])
    assert res.exit_code == 1 and "covariates[1]" in res.output
