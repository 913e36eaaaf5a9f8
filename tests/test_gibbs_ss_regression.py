"""Tests of gibbs-ss for linear regression (seed 003 ch. 5): CLT moments against the thesis's
(corrected) formulas and Monte Carlo, PSD validity of every sampled statistic, the conjugate
limit, the three covariate-moment sources and the noisy-moment release."""

from __future__ import annotations

import itertools
import math
import warnings

import numpy as np
import pytest

import privpost as pp
from privpost.errors import IncompatibleError, PrivpostError
from privpost.inference import _gibbs_regression as R
from privpost.inference import gibbs_ss
from privpost.mechanisms import Gaussian, Laplace
from privpost.models import LinearRegression
from privpost.queries import CovariateMoments, RegressionStats

from _tolerance import K_MCSE

warnings.filterwarnings("ignore", category=FutureWarning)


def _data(n, p, beta, s2, m, S, seed):
    rng = np.random.default_rng(seed)
    x = rng.multivariate_normal(m, S, size=n)
    y = beta[0] + x @ beta[1:] + math.sqrt(s2) * rng.standard_normal(n)
    return np.column_stack([x, y])


# ============================================================================================
# CLT moments
# ============================================================================================

def _thesis_moments(theta, s2, M4):
    """Seed 003 Eq. 5.3 with the extract's correction (Cov(x_i y, x_j y) uses xi_{ik,jl}),
    written with explicit sums over the augmented x (unit feature included)."""
    k = theta.shape[0]
    eta = M4[:, :, 0, 0]
    xi = M4 - eta[:, :, None, None] * eta[None, None, :, :]
    E_xx = eta
    E_xy = eta @ theta
    E_yy = s2 + theta @ eta @ theta
    C_xx_xx = xi
    C_xx_xy = np.einsum("ijkl,l->ijk", xi, theta)
    C_xx_yy = np.einsum("ijkl,k,l->ij", xi, theta, theta)
    C_xy_xy = s2 * eta + np.einsum("ikjl,k,l->ij", xi, theta, theta)
    C_xy_yy = np.einsum("ijkl,j,k,l->i", xi, theta, theta, theta) + 2 * s2 * eta @ theta
    V_yy = 2 * s2 ** 2 + np.einsum("ijkl,i,j,k,l->", xi, theta, theta, theta, theta) \
        + 4 * s2 * theta @ eta @ theta
    return dict(E_xx=E_xx, E_xy=E_xy, E_yy=E_yy, C_xx_xx=C_xx_xx, C_xx_xy=C_xx_xy,
                C_xx_yy=C_xx_yy, C_xy_xy=C_xy_xy, C_xy_yy=C_xy_yy, V_yy=V_yy)


@pytest.mark.parametrize("p", [1, 2, 3])
def test_stat_moments_match_thesis_formulas(p):
    rng = np.random.default_rng(p)
    k = p + 1
    m = rng.normal(size=p) * 0.3
    L = rng.normal(size=(p, p)) * 0.3
    S = L @ L.T + 0.05 * np.eye(p)
    theta = rng.normal(size=k)
    s2 = 0.3
    M4 = R.gaussian_moment_tensor(m[None], S[None])
    mu, Sig = R.stat_moments(M4, theta[None], np.array([s2]), R.stat_pairs(p))
    T = _thesis_moments(theta, s2, M4[0])
    pairs = R.stat_pairs(p)
    y = p + 1
    for e, (a, b) in enumerate(pairs):
        if b == y and a < y:
            assert mu[0, e] == pytest.approx(T["E_xy"][a])
        elif a == y:
            assert mu[0, e] == pytest.approx(T["E_yy"])
        else:
            assert mu[0, e] == pytest.approx(T["E_xx"][a, b])
    for e, (a, b) in enumerate(pairs):
        for f, (c, d) in enumerate(pairs):
            ty = int(b == y) + int(a == y), int(d == y) + int(c == y)
            if ty == (0, 0):
                ref = T["C_xx_xx"][a, b, c, d]
            elif ty == (0, 1):
                ref = T["C_xx_xy"][a, b, c]
            elif ty == (1, 0):
                ref = T["C_xx_xy"][c, d, a]
            elif ty == (0, 2):
                ref = T["C_xx_yy"][a, b]
            elif ty == (2, 0):
                ref = T["C_xx_yy"][c, d]
            elif ty == (1, 1):
                ref = T["C_xy_xy"][a, c]
            elif ty == (1, 2):
                ref = T["C_xy_yy"][a]
            elif ty == (2, 1):
                ref = T["C_xy_yy"][c]
            else:
                ref = T["V_yy"]
            assert Sig[0, e, f] == pytest.approx(ref, rel=1e-9, abs=1e-12)


def test_uncorrected_thesis_formula_would_differ():
    """The main-text Eq. 5.3 (xi_{ij,kl} in Cov(x_i y, x_j y)) is wrong: it differs from ours."""
    p = 2
    m = np.array([0.2, -0.1])
    S = np.array([[0.3, 0.1], [0.1, 0.2]])
    theta = np.array([0.1, 0.5, -0.4])
    M4 = R.gaussian_moment_tensor(m[None], S[None])[0]
    eta = M4[:, :, 0, 0]
    xi = M4 - eta[:, :, None, None] * eta[None, None]
    right = 0.3 * eta + np.einsum("ikjl,k,l->ij", xi, theta, theta)
    wrong = 0.3 * eta + np.einsum("ijkl,k,l->ij", xi, theta, theta)
    assert np.abs(right - wrong).max() > 1e-3


def test_stat_moments_match_monte_carlo():
    rng = np.random.default_rng(7)
    p = 2
    m = np.array([0.9, -1.17])
    S = np.array([[1.0, 0.3], [0.3, 2.0]])
    beta = np.array([-1.79, -2.89, -0.66])
    q = RegressionStats(bounds_x=[(-30, 30)] * p, bounds_y=(-60, 60))   # no clamping
    rec = _data(300000, p, beta, 2.0, m, S, 8)
    t = q.t(rec)
    sc = R.Scaling.from_query(q)
    M4 = R.gaussian_moment_tensor(((m - sc.cx) / sc.hx)[None], (S / np.outer(sc.hx, sc.hx))[None])
    bt, s2t = R.normalised_params(beta[None], np.array([2.0]), sc)
    mu, Sig = R.stat_moments(M4, bt, s2t, R.stat_pairs(p))
    se = t.std(0) / math.sqrt(t.shape[0])
    assert np.all(np.abs(mu[0] - t.mean(0)) < K_MCSE * se)
    C = np.cov(t.T)
    assert np.abs(Sig[0] - C).max() < 0.03 * np.abs(C).max()


def test_gaussian_moment_tensor_is_isserlis():
    rng = np.random.default_rng(9)
    m = rng.normal(size=2)
    A = rng.normal(size=(2, 2))
    S = A @ A.T + 0.1 * np.eye(2)
    T = R.gaussian_moment_tensor(m[None], S[None])[0]
    # extract §3.6: E[x_a x_b x_c x_d] for the covariates (indices 1..p of the augmented x)
    for a, b, c, d in itertools.product(range(2), repeat=4):
        ref = (m[a] * m[b] * m[c] * m[d]
               + S[a, b] * m[c] * m[d] + S[a, c] * m[b] * m[d] + S[a, d] * m[b] * m[c]
               + S[b, c] * m[a] * m[d] + S[b, d] * m[a] * m[c] + S[c, d] * m[a] * m[b]
               + S[a, b] * S[c, d] + S[a, c] * S[b, d] + S[a, d] * S[b, c])
        assert T[a + 1, b + 1, c + 1, d + 1] == pytest.approx(ref)
    assert T[0, 0, 0, 0] == 1.0
    np.testing.assert_allclose(T[0, 0, 1:, 1:], S + np.outer(m, m))


def test_original_stats_roundtrip():
    p = 2
    q = RegressionStats(bounds_x=[(-5, 3), (0, 10)], bounds_y=(-20, 4))
    rng = np.random.default_rng(10)
    rec = np.column_stack([rng.uniform(-5, 3, 50), rng.uniform(0, 10, 50), rng.uniform(-20, 4, 50)])
    s_t = q.statistic(rec)
    XtX, Xty, yty = R.original_stats(q, s_t[None], 50, R.Scaling.from_query(q))
    Z = np.column_stack([np.ones(50), rec[:, :2]])
    np.testing.assert_allclose(XtX[0], Z.T @ Z, rtol=1e-10, atol=1e-8)
    np.testing.assert_allclose(Xty[0], Z.T @ rec[:, 2], rtol=1e-10, atol=1e-8)
    assert yty[0] == pytest.approx(rec[:, 2] @ rec[:, 2])


def test_project_stats_keeps_n_and_sums():
    p = 2
    q = RegressionStats(bounds_x=[(-1, 1)] * p, bounds_y=(-1, 1))
    rng = np.random.default_rng(11)
    s = rng.normal(0, 20, size=(50, q.dim))
    out = R.project_stats(q, s, 30)
    assert np.all(R.is_psd_stat(q, out, 30))
    xty0, _, xtx0 = q.unpack(s, 30)
    xty1, _, xtx1 = q.unpack(out, 30)
    np.testing.assert_allclose(xtx1[:, 0, :], xtx0[:, 0, :])     # n and the covariate sums
    np.testing.assert_allclose(xty1[:, 0], xty0[:, 0])            # sum of y
    ok = R.is_psd_stat(q, s, 30)
    np.testing.assert_allclose(out[ok], s[ok])                   # PSD inputs unchanged


def test_is_psd_stat_closed_form_agrees_with_eigvalsh():
    """p = 1 uses the closed-form smallest eigenvalue of the 2x2 Schur complement; it must give
    the eigvalsh decision (away from rounding-level ties) at both tolerances, and exact zeros."""
    q = RegressionStats(bounds_x=[(-1, 1)], bounds_y=(-1, 1))
    rng = np.random.default_rng(21)
    s = rng.normal(0, 10, size=(4000, q.dim))
    n = 30
    B = R._gram(q, s, n)
    w = np.linalg.eigvalsh(R._schur(B, float(n))).min(axis=-1)
    clear = np.abs(w) > 1e-9 * n
    for tol in (0.0, 1e-9):
        expect = w >= -tol * n
        got = R.is_psd_stat(q, s, n, tol=tol)
        np.testing.assert_array_equal(got[clear], expect[clear])
    assert 100 < np.sum(w >= 0) < 3900                            # both outcomes exercised
    # a rank-one Gram matrix (all records equal) is PSD with a zero eigenvalue
    rec = np.tile([0.5, -0.25], (n, 1))
    assert R.is_psd_stat(q, q.t(rec).sum(axis=0)[None, :], n, tol=0.0)[0]


def test_mvn_factors_reproduce_mvn_sample_on_subsets():
    """MvnFactors draws exactly what mvn_sample draws on the same subset with the same random
    numbers, including when some covariances in the stack are singular (eigen square root)."""
    from privpost.inference import _gibbs_core as core
    rng = np.random.default_rng(5)
    A = rng.normal(size=(6, 3, 3))
    cov = A @ np.swapaxes(A, -1, -2)
    cov[2] = np.outer([1.0, 2.0, 0.5], [1.0, 2.0, 0.5])           # singular: Cholesky fails
    mean = rng.normal(size=(6, 3))
    f = core.MvnFactors(cov)
    assert f.ok.tolist() == [True, True, False, True, True, True]
    for idx in (np.arange(6), np.array([0, 1, 3]), np.array([2, 4]), np.array([5])):
        a = f.sample(np.random.default_rng(9), mean[idx], idx)
        b = core.mvn_sample(np.random.default_rng(9), mean[idx], cov[idx])
        np.testing.assert_array_equal(a, b)


# ============================================================================================
# sampler
# ============================================================================================

M1 = np.array([0.0])
S1 = np.array([[0.09]])


def test_every_sampled_statistic_is_psd():
    """Small n, large noise (projections and rejections happen): every retained latent
    statistic gives a PSD Gram matrix, and every draw is finite."""
    rec = _data(10, 1, np.array([0.1, 0.5]), 0.05, M1, S1, 12)
    q = RegressionStats(bounds_x=[(-1, 1)], bounds_y=(-1, 1))
    rel = pp.release(rec, query=q, mechanism=Laplace(epsilon=0.1), seed=13)
    model = LinearRegression(p=1, sigma2=None, a0=2.0, b0=0.1, m=M1, S=S1)
    post = gibbs_ss.run(model, rel, draws=400, warmup=100, chains=4, seed=14, max_tries=2)
    stat = post.sample_stats["stat"].reshape(-1, q.dim)
    assert np.all(R.is_psd_stat(q, stat, 10, tol=1e-9))
    assert post.sample_stats["projected"].any()          # the projection path was exercised
    assert np.all(np.isfinite(post.draws["beta"])) and np.all(post.draws["sigma2"] > 0)
    assert any("PSD projection" in nt for nt in post.notes)


@pytest.mark.parametrize("prior", ["conjugate", "independent", "known"])
def test_conjugate_limit_regression(prior):
    """Tiny noise, no clamping: gibbs-ss = the non-private posterior (closed form)."""
    p = 2
    m = np.array([0.2, -0.1])
    S = np.array([[0.04, 0.01], [0.01, 0.03]])
    beta = np.array([0.1, 0.8, -0.5])
    rec = _data(500, p, beta, 0.02, m, S, 15)
    q = RegressionStats(bounds_x=[(-2, 2)] * p, bounds_y=(-3, 3))
    rel = pp.release(rec, query=q, mechanism=Laplace(scale=1e-4), seed=16)
    kw = dict(m=m, S=S, tau2=1.0)
    model = (LinearRegression(p=p, sigma2=0.02, **kw) if prior == "known"
             else LinearRegression(p=p, sigma2=None, a0=2.0, b0=0.05, prior=prior, **kw))
    post = gibbs_ss.run(model, rel, draws=1000, warmup=300, chains=4, seed=17)
    ref = pp.infer(model, rel, method="nonprivate", records=rec, draws=4000, chains=1, seed=1)
    for j in range(p + 1):
        sd = ref.sd("beta")[j]
        assert abs(post.mean("beta")[j] - ref.mean("beta")[j]) < 0.1 * sd
        assert post.sd("beta")[j] == pytest.approx(sd, rel=0.1)
    if prior != "known":
        assert post.mean("sigma2") == pytest.approx(ref.mean("sigma2"), rel=0.03)


def test_update_mode_infers_covariate_law():
    p = 1
    rec = _data(2000, p, np.array([0.1, 0.5]), 0.05, np.array([0.2]), np.array([[0.04]]), 18)
    q = RegressionStats(bounds_x=[(-1, 1)], bounds_y=(-1, 1))
    rel = pp.release(rec, query=q, mechanism=Laplace(epsilon=50.0), seed=19)
    model = LinearRegression(p=1, sigma2=None, a0=2.0, b0=0.1, hyperprior="niw",
                             Psi0=np.array([[0.1]]), nu0=5)
    post = gibbs_ss.run(model, rel, draws=500, warmup=300, chains=2, seed=20)
    assert set(post.draws) == set(model.param_shapes) == {"beta", "sigma2", "m", "S"}
    assert post.draws["S"].shape == (2, 500, 1, 1)
    assert abs(post.mean("m")[0] - 0.2) < 0.03
    assert post.mean("S")[0, 0] == pytest.approx(0.04, rel=0.2)
    assert abs(post.mean("beta")[1] - 0.5) < 0.1


def test_covariate_moment_options_are_checked():
    p = 1
    rec = _data(100, p, np.array([0.1, 0.5]), 0.05, M1, S1, 21)
    q = RegressionStats(bounds_x=[(-1, 1)], bounds_y=(-1, 1))
    rel = pp.release(rec, query=q, mechanism=Laplace(epsilon=1.0), seed=22)
    fixed = LinearRegression(p=1, m=M1, S=S1)
    niw = LinearRegression(p=1, hyperprior="niw")
    with pytest.raises(IncompatibleError):
        gibbs_ss.run(fixed, rel, covariate_moments="update", draws=5, warmup=0)
    with pytest.raises(IncompatibleError):
        gibbs_ss.run(niw, rel, covariate_moments="prior", draws=5, warmup=0)
    with pytest.raises(IncompatibleError, match="ReleaseSet"):
        gibbs_ss.run(fixed, rel, covariate_moments="noisy", draws=5, warmup=0)   # no moment release
    with pytest.raises(PrivpostError):
        gibbs_ss.run(fixed, rel, covariate_moments="bogus", draws=5, warmup=0)
    with pytest.raises(IncompatibleError):
        gibbs_ss.run(LinearRegression(p=2), rel, draws=5, warmup=0)


def test_noisy_moment_release_and_sampler():
    p = 1
    rec = _data(1000, p, np.array([0.1, 0.5]), 0.05, M1, S1, 23)
    q = RegressionStats(bounds_x=[(-1, 1)], bounds_y=(-1, 1))
    rset = R.release_with_moments(rec, q, 2.0, seed=24)
    assert isinstance(rset, pp.ReleaseSet)
    rel, mom = rset.releases
    assert rel.query == q and isinstance(mom.query, CovariateMoments)
    assert mom.query.bounds_x == q.bounds_x and mom.n == rel.n == 1000
    assert rel.privacy.epsilon == pytest.approx(1.0)
    assert mom.privacy.epsilon == pytest.approx(1.0)
    assert rset.total_privacy().epsilon == pytest.approx(2.0)     # sequential composition
    # sensitivity of the moment vector: monomials x, x^2, x^3, x^4 -> widths 2, 1, 2, 1
    assert mom.mechanism.sensitivity == pytest.approx(6.0)
    xt = q.normalise(rec)[0][:, 1]
    true = np.array([np.mean(xt ** k) for k in range(1, 5)])
    assert np.all(np.abs(mom.observed / 1000 - true) < 10 * mom.mechanism.scale / 1000)
    model = LinearRegression(p=1, sigma2=None, a0=2.0, b0=0.1, m=M1, S=S1)
    post = gibbs_ss.run(model, rset, covariate_moments="noisy", draws=300, warmup=200,
                        chains=2, seed=25)
    assert any("Gibbs-SS-Noisy" in nt for nt in post.notes)
    assert any("noise is NOT modelled" in nt for nt in post.notes)
    assert any("together 2-DP" in nt for nt in post.notes)
    assert np.all(np.isfinite(post.draws["beta"]))
    # a release set with a moment release defaults to the noisy mode
    post2 = gibbs_ss.run(model, rset, draws=300, warmup=200, chains=2, seed=25)
    np.testing.assert_array_equal(post2.draws["beta"], post.draws["beta"])


def test_release_set_json_round_trip_feeds_noisy_mode(tmp_path):
    """Curator: two releases of one table saved as one document; analyst: loads it and runs
    gibbs-ss noisy mode through infer -- the same posterior as from the in-memory set."""
    rec = _data(400, 2, np.array([0.1, 0.6, -0.3]), 0.05, np.array([0.1, -0.2]),
                np.array([[0.09, 0.02], [0.02, 0.04]]), 40)
    q = RegressionStats(bounds_x=[(-1, 1), (-1, 1)], bounds_y=(-2, 2))
    rset = R.release_with_moments(rec, q, 4.0, split=0.25, seed=41)
    path = rset.save(tmp_path / "set.json")
    loaded = pp.ReleaseSet.load(path)
    assert [r.query for r in loaded.releases] == [r.query for r in rset.releases]
    for r0, r1 in zip(rset.releases, loaded.releases):
        np.testing.assert_array_equal(r0.observed, r1.observed)
        assert r1.mechanism.scale == r0.mechanism.scale
    assert loaded.total_privacy() == rset.total_privacy()
    assert loaded.total_privacy().epsilon == pytest.approx(4.0)
    assert loaded.releases[1].privacy.epsilon == pytest.approx(1.0)      # split = 0.25
    model = LinearRegression(p=2, sigma2=None, a0=2.0, b0=0.1)
    kw = dict(method="gibbs-ss", covariate_moments="noisy", draws=200, warmup=100, chains=2,
              seed=42)
    post = pp.infer(model, loaded, **kw)
    ref = pp.infer(model, rset, **kw)
    np.testing.assert_array_equal(post.draws["beta"], ref.draws["beta"])
    np.testing.assert_array_equal(post.draws["sigma2"], ref.draws["sigma2"])
    assert post.release["schema"] == "privpost.release-set/1"
    assert [d["query"]["type"] for d in post.release["releases"]] == [
        "regression_stats", "covariate_moments"]
    assert post.release["total_privacy"]["epsilon"] == pytest.approx(4.0)


def _tiny_noise_set(rec, bx, by):
    q = RegressionStats(bounds_x=bx, bounds_y=by)
    rel = pp.release(rec, query=q, mechanism=Laplace(scale=1e-4), seed=50)
    mom = R.release_covariate_moments(rec, q, Laplace(scale=1e-4), seed=51)
    return q, pp.ReleaseSet([rel, mom])


def test_noisy_mode_tiny_noise_limit():
    """Tiny noise on both releases: the moment tensor is the sample one, and gibbs-ss noisy mode
    gives the non-private posterior -- whatever the model's (unused) covariate law."""
    p = 2
    rng = np.random.default_rng(52)
    n = 500
    x = np.column_stack([rng.uniform(-0.5, 0.8, n), rng.exponential(0.3, n) - 0.2])  # not normal
    beta = np.array([0.1, 0.8, -0.5])
    y = beta[0] + x @ beta[1:] + math.sqrt(0.02) * rng.standard_normal(n)
    rec = np.column_stack([x, y])
    q, rset = _tiny_noise_set(rec, [(-2, 2), (-2, 2)], (-3, 3))
    # the moments read from the release are the sample moments of (1, x~)
    xt = q.normalise(rec)[0]
    M4 = np.einsum("na,nb,nc,nd->abcd", xt, xt, xt, xt) / n
    prob = R.build_problem(LinearRegression(p=p, sigma2=None), rset)
    assert prob.mode == "noisy"
    np.testing.assert_allclose(prob.M4x_fixed[0], M4, atol=1e-5)
    model = LinearRegression(p=p, sigma2=None, a0=2.0, b0=0.05, tau2=1.0,
                             m=np.array([3.0, -3.0]), S=np.eye(2) * 5.0)    # wrong, unused
    post = pp.infer(model, rset, method="gibbs-ss", covariate_moments="noisy", draws=1000,
                    warmup=300, chains=4, seed=53)
    ref = pp.infer(model, rset.releases[0], method="nonprivate", records=rec, draws=4000,
                   chains=1, seed=1)
    for j in range(p + 1):
        sd = ref.sd("beta")[j]
        assert abs(post.mean("beta")[j] - ref.mean("beta")[j]) < 0.1 * sd
        assert post.sd("beta")[j] == pytest.approx(sd, rel=0.1)
    assert post.mean("sigma2") == pytest.approx(ref.mean("sigma2"), rel=0.03)


def test_noisy_mode_matches_prior_mode_with_the_true_covariate_law():
    """Covariates drawn from the model's law, accurate moment release, noisy statistics: the
    released moments stand in for the law's moments, so noisy mode agrees with prior mode
    (the moments are read on the right scale)."""
    m = np.array([0.2])
    S = np.array([[0.04]])
    n = 5000
    rec = _data(n, 1, np.array([0.1, 0.5]), 0.05, m, S, 54)
    q = RegressionStats(bounds_x=[(-1, 1)], bounds_y=(-1.5, 1.5))
    rel = pp.release(rec, query=q, mechanism=Laplace(epsilon=1.0), seed=55)
    mom = R.release_covariate_moments(rec, q, Laplace(scale=1e-3), seed=56)
    rset = pp.ReleaseSet([rel, mom])
    model = LinearRegression(p=1, sigma2=None, a0=2.0, b0=0.1, m=m, S=S)
    pn = R.build_problem(model, rset, "noisy")
    pr = R.build_problem(model, rset, "prior")
    assert any("not used" in nt for nt in pr.notes)
    np.testing.assert_allclose(pn.M4x_fixed, pr.M4x_fixed, rtol=0.05, atol=0.01)
    kw = dict(draws=1000, warmup=500, chains=4, seed=57)
    post_n = gibbs_ss.run(model, rset, covariate_moments="noisy", **kw)
    post_p = gibbs_ss.run(model, rel, covariate_moments="prior", **kw)
    for j in range(2):
        sd = post_p.sd("beta")[j]
        assert abs(post_n.mean("beta")[j] - post_p.mean("beta")[j]) < 0.2 * sd
        assert post_n.sd("beta")[j] == pytest.approx(sd, rel=0.15)


def test_release_set_rejected_by_other_methods():
    from privpost.inference import damcmc, naive

    rec = _data(50, 1, np.array([0.1, 0.5]), 0.05, M1, S1, 60)
    q = RegressionStats(bounds_x=[(-1, 1)], bounds_y=(-1, 1))
    rset = R.release_with_moments(rec, q, 2.0, seed=61)
    model = LinearRegression(p=1, sigma2=None, m=M1, S=S1)
    for method, extra in (("naive", {}), ("nonprivate", {"records": rec}),
                          ("ops", {"records": rec})):
        with pytest.raises(IncompatibleError, match="not a ReleaseSet.*only gibbs-ss"):
            pp.infer(model, rset, method=method, draws=5, **extra)
    # damcmc stacks the releases of a set when each fits the model; a moments release does not
    with pytest.raises(IncompatibleError, match="release set.*covariate_moments.*gibbs-ss"):
        pp.infer(model, rset, method="damcmc", draws=5)
    with pytest.raises(IncompatibleError, match="not a ReleaseSet"):
        naive.run(model, rset, draws=5)
    with pytest.raises(IncompatibleError, match="not a ReleaseSet"):
        damcmc.run(model, rset, draws=5, warmup=0, chains=1, progress=False)
    # each release of the set on its own still works with naive
    post = pp.infer(model, rset.releases[0], method="naive", draws=5, chains=1, seed=1)
    assert post.draws["beta"].shape == (1, 5, 2)


def test_release_set_contents_are_checked():
    from privpost.mechanisms import Laplace as Lap
    from privpost.models import BetaBernoulli
    from privpost.queries import Sum

    rec = _data(60, 1, np.array([0.1, 0.5]), 0.05, M1, S1, 62)
    q = RegressionStats(bounds_x=[(-1, 1)], bounds_y=(-1, 1))
    rel = pp.release(rec, query=q, mechanism=Lap(epsilon=1.0), seed=63)
    mom = R.release_covariate_moments(rec, q, Lap(epsilon=1.0), seed=64)
    q2 = RegressionStats(bounds_x=[(-2, 2)], bounds_y=(-1, 1))
    mom2 = R.release_covariate_moments(rec, q2, Lap(epsilon=1.0), seed=65)
    other = pp.release(rec[:, 1], query=Sum((-1, 1)), mechanism=Lap(epsilon=1.0), seed=66)
    fixed = LinearRegression(p=1, m=M1, S=S1)
    run = dict(draws=5, warmup=0, chains=1)
    with pytest.raises(IncompatibleError, match="same normalised covariates"):
        gibbs_ss.run(fixed, pp.ReleaseSet([rel, mom2]), **run)
    with pytest.raises(IncompatibleError, match="has 2 and 1"):
        gibbs_ss.run(fixed, pp.ReleaseSet([rel, rel, mom]), **run)
    with pytest.raises(IncompatibleError, match="'sum' release"):
        gibbs_ss.run(fixed, pp.ReleaseSet([rel, mom, other]), **run)
    with pytest.raises(IncompatibleError, match="only for LinearRegression"):
        gibbs_ss.run(BetaBernoulli(), pp.ReleaseSet([other]), **run)
    with pytest.raises(IncompatibleError, match="p = 1 covariates, the model p = 2"):
        gibbs_ss.run(LinearRegression(p=2), pp.ReleaseSet([rel, mom]), **run)
    with pytest.raises(IncompatibleError, match="ReleaseSet holding"):       # no moment release
        gibbs_ss.run(fixed, pp.ReleaseSet([rel]), covariate_moments="noisy", **run)
    with pytest.raises(PrivpostError, match="moments= option is gone"):
        gibbs_ss.run(fixed, rel, covariate_moments="noisy", moments=mom, **run)
    with pytest.raises(IncompatibleError):
        R.release_covariate_moments(rec, Sum((-1, 1)), Lap(epsilon=1.0))
    # a set of the statistics release alone works in prior mode; NIW models default to update,
    # saying the moment release is unused
    post = gibbs_ss.run(fixed, pp.ReleaseSet([rel]), **run)
    assert any("Gibbs-SS-Prior" in nt for nt in post.notes)
    post = gibbs_ss.run(LinearRegression(p=1, hyperprior="niw"), pp.ReleaseSet([rel, mom]), **run)
    assert any("Gibbs-SS-Update" in nt for nt in post.notes)
    assert any("CovariateMoments release is not used" in nt for nt in post.notes)


def test_monomial_exponents_match_the_query():
    """The sampler's monomial bookkeeping and the CovariateMoments query agree on the order."""
    for p in (1, 2, 3):
        np.testing.assert_array_equal(R.monomial_exponents(p, 4),
                                      CovariateMoments([(-1, 1)] * p).exponents)


def test_project_moments_gives_psd_moment_matrix():
    p = 2
    expo = R.monomial_exponents(p, 4)
    rng = np.random.default_rng(26)
    vals = rng.normal(0, 0.5, size=expo.shape[0])
    out = R.project_moments(expo, vals, p)
    T = R.moment_tensor_from_monomials(expo, out, p)
    basis = [np.zeros(p, int)] + [a for a in expo if a.sum() <= 2]
    table = {tuple(a): v for a, v in zip(map(tuple, expo), out)}
    table[(0, 0)] = 1.0
    H = np.array([[table[tuple(a + b)] for b in basis] for a in basis])
    assert np.linalg.eigvalsh(H).min() > -1e-8
    assert T[0, 0, 0, 0] == 1.0


def test_gaussian_mechanism_regression_runs():
    rec = _data(200, 1, np.array([0.1, 0.5]), 0.05, M1, S1, 27)
    q = RegressionStats(bounds_x=[(-1, 1)], bounds_y=(-1, 1))
    rel = pp.release(rec, query=q, mechanism=Gaussian(rho=0.5), seed=28)
    post = gibbs_ss.run(LinearRegression(p=1, sigma2=0.05, m=M1, S=S1), rel, draws=200,
                        warmup=100, chains=2, seed=29)
    assert "Gaussian noise conditioned on directly" in post.notes
    assert set(post.draws) == {"beta"}


def test_collapsed_log_target_is_the_marginal_clt_density():
    from scipy import stats

    rec = _data(300, 1, np.array([0.1, 0.5]), 0.05, M1, S1, 30)
    q = RegressionStats(bounds_x=[(-1, 1)], bounds_y=(-1, 1))
    rel = pp.release(rec, query=q, mechanism=Laplace(epsilon=1.0), seed=31)
    model = LinearRegression(p=1, sigma2=None, a0=2.0, b0=0.1, m=M1, S=S1, tau2=2.0)
    prob = R.build_problem(model, rel)
    state = R.init_state(np.random.default_rng(1), prob, model, 2)
    beta = np.array([[0.1, 0.4], [0.0, 0.7]])
    s2 = np.array([0.05, 0.2])
    got = R.collapsed_log_target(prob, state, beta, s2)
    m, V = R.clt(prob, state, beta, s2)
    ref = []
    for c in range(2):
        ll = stats.multivariate_normal(m[c], V[c] + np.diag(state.omega[c])).logpdf(prob.z)
        lp = (stats.multivariate_normal(np.zeros(2), s2[c] * 2.0 * np.eye(2)).logpdf(beta[c])
              + stats.invgamma(2.0, scale=0.1).logpdf(s2[c]) + math.log(s2[c]))
        ref.append(ll + lp)
    # equal up to an additive constant
    assert got[1] - got[0] == pytest.approx(ref[1] - ref[0], abs=1e-8)


@pytest.mark.slow
def test_collapsed_step_improves_mixing():
    """Seed 000's regression at n = 100, epsilon = 1: noise dominates, the thesis's Gibbs steps
    alone give a few dozen effective draws; with the collapsed step several hundred."""
    import arviz as az

    m = np.array([0.900142, -1.173346])
    model = LinearRegression(p=2, sigma2=2.0, tau2=4.0, m=m)
    rec = model.simulate({"beta": np.array([-1.794971, -2.889003, -0.662027])}, 100,
                         np.random.default_rng(2022))
    q = RegressionStats(bounds_x=[(-10, 10)] * 2, bounds_y=(-10, 10), sensitivity=13)
    rel = pp.release(rec, query=q, mechanism=Laplace(epsilon=1.0), seed=2023)
    ess = {}
    for col in (False, True):
        post = R.run(model, rel, draws=2000, warmup=1000, chains=4, seed=3, collapsed=col)
        ess[col] = min(float(az.ess(np.atleast_2d(post.draws["beta"][:, :, j]))) for j in range(3))
    assert ess[True] > 3 * ess[False]
