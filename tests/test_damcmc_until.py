"""damcmc's default run length: run until converged (issue 13), with iteration budgets only."""

from __future__ import annotations

import math
import warnings

import numpy as np
import pytest
from scipy import special

from privpost import diagnostics
from privpost.errors import ConvergenceWarning, PrivpostError
from privpost.inference.damcmc import run
from privpost.mechanisms import Laplace
from privpost.models import BetaBernoulli
from privpost.queries import Sum
from privpost.releases.release import Release

from _tolerance import K_MCSE

A, B, N, S_OBS, SCALE = 1.0, 1.0, 60, 40.0, 8.0


def _release(scale=SCALE):
    q = Sum(bounds=(0, 1))
    m = Laplace(scale=scale).calibrate(q.sensitivity("l1", "replace"))
    return Release(query=q, mechanism=m, n=N, observed=np.array([S_OBS]))


def _exact_mean(scale):
    """E[theta | s] in closed form: sum over the count k of the beta-binomial weight times the
    Laplace density of s - k, times the conjugate mean (a + k) / (a + b + n)."""
    k = np.arange(N + 1)
    logw = (special.gammaln(N + 1) - special.gammaln(k + 1) - special.gammaln(N - k + 1)
            + special.betaln(A + k, B + N - k) - special.betaln(A, B)
            - np.abs(S_OBS - k) / scale)
    w = np.exp(logw - logw.max())
    return float(np.sum(w * (A + k) / (A + B + N)) / w.sum())


def test_runs_until_the_thresholds_and_is_exact():
    post = run(BetaBernoulli(A, B), _release(), chains=4, seed=5, progress=False, cores=1,
               max_draws=40_000)
    assert post.converged is True
    d = diagnostics.diagnose(post.draws["theta"])
    assert d["r_hat"] <= 1.01 and d["ess_bulk"] >= 400 and d["ess_tail"] >= 400
    assert any(n.startswith("run until converged") and "(converged;" in n for n in post.notes)
    z = (float(post.mean("theta")) - _exact_mean(SCALE)) / d["mcse_mean"]
    assert abs(z) < K_MCSE, z
    wrong = (float(post.mean("theta")) - _exact_mean(2 * SCALE)) / d["mcse_mean"]
    assert abs(wrong) > K_MCSE, wrong          # the wrong noise scale is detected


def test_rounds_give_the_same_chain_as_one_fixed_run_and_any_cores():
    # the record path (the count table converges in one round here: tests/test_damcmc_counts).
    # The check needs a run of more than one round; whether the first round already converges
    # depends on the seed (at seed offset 1, seed 9's does), so take the first seed from 9 on
    # whose run needs a second round
    kw = dict(chains=2, progress=False, latent="records")
    for seed in range(9, 40):
        auto = run(BetaBernoulli(A, B), _release(), seed=seed, cores=1, max_draws=40_000,
                   warmup=200, **kw)
        if auto.n_draws > 1000:                      # it took more than one round
            break
    else:
        pytest.fail("no seed in 9..39 needed a second round")
    fixed = run(BetaBernoulli(A, B), _release(), seed=seed, cores=1, draws=auto.n_draws,
                warmup=200, **kw)
    np.testing.assert_array_equal(auto.draws["theta"], fixed.draws["theta"])
    pooled = run(BetaBernoulli(A, B), _release(), seed=seed, cores=2, max_draws=40_000,
                 warmup=200, **kw)
    np.testing.assert_array_equal(auto.draws["theta"], pooled.draws["theta"])


def test_draw_budget_stops_and_warns():
    # 2 x 150 draws cannot reach ESS 400 (the count-level default draws Beta-Bernoulli
    # independently since its collapsed move, so a hard release no longer suffices)
    with pytest.warns(ConvergenceWarning, match="NOT CONVERGED"):
        post = run(BetaBernoulli(A, B), _release(scale=200.0), chains=2, seed=1,
                   progress=False, cores=1, max_draws=150, warmup=50)
    assert post.n_draws == 150 and post.converged is False
    assert any("draw budget of 150 per chain spent" in n for n in post.notes)


def test_fixed_draws_still_work_and_budgets_are_validated():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        post = run(BetaBernoulli(A, B), _release(), draws=30, warmup=10, chains=2, seed=1,
                   progress=False, cores=1)
    assert post.n_draws == 30 and not any("run until" in n for n in post.notes)
    with pytest.raises(PrivpostError, match="max_draws"):
        run(BetaBernoulli(A, B), _release(), max_draws=0, progress=False)
    with pytest.raises(PrivpostError, match="max_seconds"):
        run(BetaBernoulli(A, B), _release(), max_seconds=-1, progress=False)
    assert math.isfinite(_exact_mean(SCALE))


@pytest.mark.slow
@pytest.mark.parametrize("key", ["beta-bernoulli", "poisson-gamma", "exponential-gamma",
                                 "normal-known-variance", "normal-inverse-gamma",
                                 "dirichlet-categorical", "naive-bayes", "regression-known",
                                 "regression-nig", "regression-indep-niw", "dirichlet",
                                 "dirichlet-copula"])
def test_every_builtin_model_converges_or_warns(key):
    """Issue 13's 'done when': the default damcmc run on every built-in model reaches the
    thresholds or warns (here with a 3,000-draw budget; about 1 min in all on an idle machine)."""
    from test_models import ALL_MODELS

    from privpost.queries import (CensoredLogMean, Histogram, Mean, NaiveBayesCounts,
                                  RegressionStats)
    from privpost.releases.release import release

    n = 60
    reg = RegressionStats([(-3, 3), (-3, 3)], (-6, 6))
    queries = {"beta-bernoulli": Sum((0, 1)), "poisson-gamma": Sum((0, 20)),
               "exponential-gamma": Sum((0, 5)), "normal-known-variance": Mean((-6, 6), n),
               "normal-inverse-gamma": Mean((-6, 6), n), "dirichlet-categorical": Histogram(3),
               "naive-bayes": NaiveBayesCounts(3, [2, 3]), "regression-known": reg,
               "regression-nig": reg, "regression-indep-niw": reg,
               "dirichlet": CensoredLogMean(3, 1e-3, n),
               "dirichlet-copula": CensoredLogMean(3, 1e-3, n)}
    model = ALL_MODELS[key]()
    rng = np.random.default_rng(1)
    recs = model.simulate(model.prior_sample(rng), n, rng)
    rel = release(recs, query=queries[key], mechanism=Laplace(epsilon=1.0), seed=2)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        post = run(model, rel, chains=2, warmup=300, max_draws=3000, seed=1, progress=False,
                   cores=1)
    warned = any(issubclass(w.category, ConvergenceWarning) for w in caught)
    ok = not diagnostics.check(post.draws)
    assert post.converged is ok and warned is (not ok)
