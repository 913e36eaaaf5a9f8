"""Seed 002's posterior predictive ellipsoid coverage (guo2023_metrics) against values computed
independently (d = 2: Beta-mixture CDFs and root finding; d = 3: the predictive equals the true
law), each with a wrong variant (the chi-square cut-off) that must fail; and the study's
all-15-method wiring."""

import numpy as np
import pytest
from scipy import optimize, stats

from privpost.experiments.guo2023_metrics import (dirichlet_rows, fit_convergence,
                                                  predictive_ellipsoid_coverage)

from _tolerance import K_MCSE


def _exact_d2(atoms, truth, level=0.95):
    """d = 2, posterior = equal-weight atoms: the predictive of x1 is a Beta mixture. The
    ellipsoid is the interval m +- c s (m, s the mixture mean and sd; c solves
    P_mix(|x - m| <= c s) = level); coverage = P_true(|x - m| <= c s). Also returns the
    derivative ratio used for the Monte Carlo se of the cut-off."""
    atoms = np.asarray(atoms, float)
    a, b = atoms[:, 0], atoms[:, 1]
    m1 = a / (a + b)
    m2 = a * (a + 1) / ((a + b) * (a + b + 1))
    m, v = m1.mean(), m2.mean() - m1.mean() ** 2
    s = np.sqrt(v)

    def fmix(x):
        return np.mean([stats.beta.cdf(x, ai, bi) for ai, bi in zip(a, b)])

    def pmix(x):
        return np.mean([stats.beta.pdf(x, ai, bi) for ai, bi in zip(a, b)])

    c = optimize.brentq(lambda c: fmix(m + c * s) - fmix(m - c * s) - level, 1e-6, 50)
    tr = stats.beta(truth[0], truth[1])
    lo, hi = m - c * s, m + c * s
    cov = tr.cdf(hi) - tr.cdf(lo)
    ends = [x for x in (lo, hi) if 0.0 < x < 1.0]       # boundaries inside the support
    ratio = sum(tr.pdf(x) for x in ends) / sum(pmix(x) for x in ends)
    return cov, ratio, c


def _se(cov, ratio, n_pred, n_true, level=0.95):
    """Binomial error of the true-sample share plus the cut-off quantile's error mapped
    through the density ratio (delta method); mean/sd estimation error is smaller still."""
    return np.sqrt(cov * (1 - cov) / n_true + ratio ** 2 * level * (1 - level) / n_pred)


def test_ellipsoid_coverage_d2_beta_mixture_matches_exact_and_chi2_cutoff_fails():
    atoms = [(0.4, 4.0), (1.0, 6.0)]                    # skewed: c is not 1.96
    truth = (0.5, 4.0)
    S, per, n_true = 2000, 100, 200_000                 # 200,000 predictive records
    draws = np.repeat(np.array(atoms), S // 2, axis=0)
    exact, ratio, c = _exact_d2(atoms, truth)
    se = _se(exact, ratio, S * per, n_true)
    got = predictive_ellipsoid_coverage(draws, truth, np.random.default_rng(1), per_draw=per,
                                        n_true=n_true)
    assert abs(got - exact) / se < K_MCSE, (got, exact, se)
    assert abs(c - 1.96) > 0.1                          # the case separates the readings
    wrong = predictive_ellipsoid_coverage(draws, truth, np.random.default_rng(1), per_draw=per,
                                          n_true=n_true, cutoff="chi2")
    assert abs(wrong - exact) / se > 6, (wrong, exact, se)
    # the component left out does not matter (affine invariance of Mahalanobis distances)
    other = predictive_ellipsoid_coverage(draws, truth, np.random.default_rng(1), per_draw=per,
                                          n_true=n_true, drop=0)
    assert abs(other - exact) / se < K_MCSE


def test_ellipsoid_coverage_is_the_level_when_the_predictive_is_the_truth_d3():
    truth = np.array([0.5, 0.5, 0.5])                   # alpha2: far from Gaussian
    S, per, n_true = 1000, 100, 100_000
    draws = np.tile(truth, (S, 1))
    se = _se(0.95, 1.0, S * per, n_true)
    got = predictive_ellipsoid_coverage(draws, truth, np.random.default_rng(2), per_draw=per,
                                        n_true=n_true)
    assert abs(got - 0.95) / se < K_MCSE, (got, se)
    wrong = predictive_ellipsoid_coverage(draws, truth, np.random.default_rng(2), per_draw=per,
                                          n_true=n_true, cutoff="chi2")
    assert abs(wrong - 0.95) / se > 6, (wrong, se)
    # a wrong posterior (alpha off by 3x) scores well below the level
    bad = predictive_ellipsoid_coverage(draws * 3.0, truth, np.random.default_rng(2),
                                        per_draw=per, n_true=n_true)
    assert 0.95 - bad > 10 * se


def test_dirichlet_rows_is_dirichlet_and_survives_tiny_alpha():
    rng = np.random.default_rng(3)
    a = np.array([2.0, 3.0, 5.0])
    x = dirichlet_rows(np.tile(a, (40_000, 1)), rng)
    mean, var = a / a.sum(), a * (a.sum() - a) / (a.sum() ** 2 * (a.sum() + 1))
    z = (x.mean(0) - mean) / np.sqrt(var / x.shape[0])
    assert np.all(np.abs(z) < K_MCSE), z
    tiny = dirichlet_rows(np.full((50, 3), 1e-4), rng)
    assert np.all(np.isfinite(tiny)) and np.allclose(tiny.sum(1), 1)
    assert np.isnan(predictive_ellipsoid_coverage(np.full((5, 3), np.nan), a, rng))


def test_fit_convergence_flags_a_stuck_chain():
    rng = np.random.default_rng(4)
    good = rng.normal(size=(2, 400, 3))
    r, e = fit_convergence(good)
    assert r < 1.05 and e > 300
    stuck = good.copy()
    stuck[1] += 5.0                                     # the chains disagree
    r2, _ = fit_convergence(stuck)
    assert r2 > 1.5


def test_simulation_study_has_all_fifteen_methods_and_the_ellipsoid(tmp_path):
    from privpost.experiments.guo2023_sim import ALL_METHODS, SIM_METHODS, run_sim
    from privpost.experiments.reproduce import _Ctx
    from privpost.inference.compositional import METHOD_PRIORS

    # the 15 DP methods of the seed's Table 1 (extract §2.11)
    table1 = ["DPBoots"] + [f"{m}{p}" for m, ps in (
        ("DPMCMC", "134"), ("DPreMCMC", "134"), ("DPABC", "12345"), ("DPapprox", "134"))
        for p in (f"p{c}" for c in ps)]
    assert list(ALL_METHODS) == table1 and len(table1) == 15
    for lab, (meth, prior, split) in SIM_METHODS.items():
        if prior is not None:
            assert prior in METHOD_PRIORS[meth]
            assert split == (prior != "p1")
    s = {"alphas": ("alpha1",), "n": (60,), "epsilon": (1e10,), "replicates": 1,
         "methods": ("DPMCMCp3", "DPABCp2", "DPapproxp3"), "draws": 30, "warmup": 30,
         "prior_draws": 40, "rule_alphas": (), "rule_n": (), "rule_epsilon": (), "rule_reps": 0}
    rep = run_sim(_Ctx("guo2023-compositional", "quick", s, tmp_path, 1,
                       {"workers": 1, "scheduler": None, "progress": False}))
    rows = {r[1]: r for r in rep.headline["rows"]}
    assert set(rows) == {"Boots", "MCMCp1", "DPMCMCp3", "DPABCp2", "DPapproxp3"}
    for r in rows.values():
        assert 0.5 < r[12] <= 1.0              # ellipsoid coverage at eps = 1e10
        assert np.isfinite(r[14]) and r[15] > 0   # max R-hat, min ESS
    assert "ellipsoid 95%" in rep.markdown
