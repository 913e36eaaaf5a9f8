"""Seed 002's methods (privpost.inference.compositional*): derived values of extract §3.6, the
Dirichlet MLE, DPMCMC and DPreMCMC (b = n) against quadrature, the (w - 1) term of DPreMCMC,
DPapprox against quadrature of model (6), DPABC's 10% acceptance, DPBoots vs Boots, priors,
and every Table 1 method/prior pair through pp.infer and the CLI."""

import math
import sys
from pathlib import Path

import arviz as az
import numpy as np
import pytest
from typer.testing import CliRunner

import privpost as pp
from privpost.releases.dpss import dpss_release
from privpost.errors import IncompatibleError, PrivpostError
from privpost.inference import damcmc
from privpost.inference.compositional import (DirichletProposal, dpboots_draws, dpmcmc_posterior,
                                              pseudo_release, weighted_model)
from privpost.inference.compositional_priors import fit_gamma_copula
from privpost.models.dirichlet_tools import (censored_mean_logs, censoring_bias,
                                                censoring_proportion, dirichlet_mle,
                                                expected_mean_log)
from privpost.mechanisms import Laplace
from privpost.models import Dirichlet
from privpost.queries import CensoredLogMean
from privpost.releases.release import Release

sys.path.insert(0, str(Path(__file__).parent))
from _compositional_exact import (alpha_grid, censored_n1_loglik, clt_model6_loglik,  # noqa: E402
                                  n1_release, posterior_means)

from _tolerance import K_MCSE

ALPHAS = {1: [3.3, 4.4], 2: [0.5, 0.5, 0.5], 3: [2.2, 3.3, 4.4], 4: [2, 20, 2],
          5: [2.2, 3.3, 4.4, 5.5, 6.6]}
GRID = [0.1, 1e-2, 1e-3]


# ------------------------------------------------------------------ extract §3.6 values
@pytest.mark.parametrize("k,props,bias", [
    (1, [6.283e-3, 3.794e-6, 1.938e-9], [2.0e-3, 1.16e-6, 5.9e-10]),
    (2, [0.3162, 0.1000, 3.162e-2], [0.6325, 0.2000, 6.325e-2]),
    (3, [6.832e-2, 5.548e-4, 3.602e-6], [3.39e-2, 2.55e-4, 1.64e-6]),
    (4, [0.4566, 1.467e-2, 1.663e-4], [0.364, 7.69e-3, 8.4e-5]),
    (5, [0.1985, 2.292e-3, 1.560e-5], [0.111, 1.07e-3, 7.1e-6])])
def test_censoring_values_of_extract(k, props, bias):
    for a, p, b in zip(GRID, props, bias):
        assert censoring_proportion(ALPHAS[k], a) == pytest.approx(p, rel=2e-3)
        assert censoring_bias(ALPHAS[k], a) == pytest.approx(b, rel=2e-2)
    if k == 2:   # closed forms: sqrt(a) and 2 sqrt(a)
        for a in GRID:
            assert censoring_proportion(ALPHAS[2], a) == pytest.approx(math.sqrt(a), rel=1e-10)
            assert censoring_bias(ALPHAS[2], a) == pytest.approx(2 * math.sqrt(a), rel=1e-7)


def test_censoring_bias_against_simulation_of_the_query():
    """The bias formula is what the CensoredLogMean query does to simulated records."""
    rng = np.random.default_rng(0)
    x = rng.dirichlet(ALPHAS[4], 400_000)
    a = 0.1
    q = CensoredLogMean(3, a, x.shape[0])
    diff = q.statistic(x) - np.log(x).mean(0)
    se = np.sqrt((np.log(np.maximum(x, a)) - np.log(x)).var(0).sum()) / 3 / math.sqrt(len(x))
    assert abs(diff.mean() - censoring_bias(ALPHAS[4], a)) < K_MCSE * se
    # a wrong value fails
    assert abs(diff.mean() - 0.5 * censoring_bias(ALPHAS[4], a)) > K_MCSE * se


@pytest.mark.parametrize("k,want", [(1, (-0.94006, -0.61120)), (2, (-2, -2, -2)),
                                    (3, (-1.69689, -1.20636, -0.87749)),
                                    (4, (-2.73429, -0.18655, -2.73429)),
                                    (5, (-2.52385, -2.03332, -1.70446, -1.45705, -1.25874))])
def test_mean_log_and_mle_roundtrip(k, want):
    s = expected_mean_log(ALPHAS[k])
    np.testing.assert_allclose(s, want, atol=1e-5)
    np.testing.assert_allclose(dirichlet_mle(s), ALPHAS[k], rtol=1e-8)


def test_mle_nonexistence_and_vectorised():
    out = dirichlet_mle(np.array([[0.0, -1.0], expected_mean_log([3.3, 4.4]), [np.nan, -1]]))
    assert np.isnan(out[0]).all() and np.isnan(out[2]).all()
    np.testing.assert_allclose(out[1], [3.3, 4.4], rtol=1e-8)


# ------------------------------------------------------------------ DPMCMC / DPreMCMC exact
S_OBS, A_CUT, LAM = np.array([-1.5, -0.2]), 0.3, 0.3


@pytest.fixture(scope="module")
def quad_refs():
    A1, A2, _ = alpha_grid()
    right = posterior_means(censored_n1_loglik(S_OBS, A_CUT, LAM, A1, A2, True), A1, A2, 2.0, 1.0)
    wrong = posterior_means(censored_n1_loglik(S_OBS, A_CUT, LAM, A1, A2, False), A1, A2, 2.0, 1.0)
    return np.array(right), np.array(wrong)


def _n1_release():
    return n1_release(S_OBS, A_CUT, LAM)


def _zscores(post, ref):
    a = post.draws["alpha"]
    idata = post.to_arviz()
    mcse = az.mcse(idata, var_names=["alpha"])["alpha"].values
    return (a.reshape(-1, 2).mean(0) - ref) / mcse


def test_dpmcmc_matches_quadrature_and_not_the_uncensored_target(quad_refs):
    right, wrong = quad_refs
    post = dpmcmc_posterior(Dirichlet(2, prior_shape=2.0, prior_rate=1.0), _n1_release(),
                            draws=2000, warmup=200, chains=2, seed=11, progress=False, cores=1)
    assert np.all(np.abs(_zscores(post, right)) < K_MCSE), _zscores(post, right)
    assert np.abs(_zscores(post, wrong)).max() > 6     # censoring ignored -> detectably wrong


def test_dpremcmc_with_b_equal_n_is_dpmcmc(quad_refs):
    """b = n: weight 1, the (w-1) term vanishes, Algorithm 2 with Dir(alpha) proposals targets
    DPMCMC's posterior (checked against the same quadrature)."""
    right, wrong = quad_refs
    rel = _n1_release()
    post = damcmc.run(weighted_model(Dirichlet(2, prior_shape=2.0, prior_rate=1.0), 1.0),
                      pseudo_release(rel, 1), proposal=DirichletProposal(), draws=2000,
                      warmup=200, chains=2, seed=12, progress=False, cores=1, fast_path=False)
    assert np.all(np.abs(_zscores(post, right)) < K_MCSE)
    assert np.abs(_zscores(post, wrong)).max() > 6


class _Frozen:
    """Weighted Dirichlet whose alpha never moves: the chain samples the pseudo-record law."""

    def __new__(cls, alpha, weight):
        m = weighted_model(Dirichlet(2), weight)
        m.update = lambda params, records, rng: {"alpha": np.asarray(alpha, float)}
        m.prior_sample = lambda rng: {"alpha": np.asarray(alpha, float)}
        return m


def test_dpremcmc_record_step_has_the_w_minus_1_term():
    """With alpha frozen and b = 1, the record law is Beta(x|alpha)^w x Laplace terms. Compare
    E[log eta] with 1-D quadrature; the variant without the (w-1) term targets Beta^1 x Laplace
    and fails."""
    alpha, w, a, lam, s = np.array([2.0, 3.0]), 10.0, 0.05, 0.3, np.array([-1.0, -0.4])
    x = (np.arange(200_000) + 0.5) / 200_000
    lx, l1x = np.log(np.maximum(x, a)), np.log(np.maximum(1 - x, a))
    log_eta = -(np.abs(s[0] - lx) + np.abs(s[1] - l1x)) / lam - 2 * math.log(2 * lam)

    def expect(power):
        lw = power * ((alpha[0] - 1) * np.log(x) + (alpha[1] - 1) * np.log1p(-x)) + log_eta
        wt = np.exp(lw - lw.max())
        return float((wt * log_eta).sum() / wt.sum())

    q = CensoredLogMean(2, a, 1)
    rel = Release(q, Laplace(scale=lam).calibrate(q.sensitivity()), 1, s)
    post = damcmc.run(_Frozen(alpha, w), rel, proposal=DirichletProposal(), draws=4000,
                      warmup=200, chains=2, seed=3, progress=False, cores=1, fast_path=False)
    le = post.sample_stats["log_eta"]
    import arviz as az
    ess = float(az.ess(np.atleast_2d(le)))
    se = le.std() / math.sqrt(ess)
    assert abs(le.mean() - expect(w)) < K_MCSE * se
    assert abs(le.mean() - expect(1.0)) > 6 * se


# ------------------------------------------------------------------ DPapprox vs quadrature
def test_dpapprox_matches_model6_quadrature():
    """Model (6) for d = 2, N = 20, lambda = 0.15: alpha posterior means by 4-D quadrature;
    the variant with Sigma_alpha (not / N) is rejected."""
    from privpost.inference.compositional_approx import _chain
    from privpost.inference._gibbs_common import Progress

    s, lam, N = np.array([-1.0, -0.6]), 0.15, 20
    A1, A2, _ = alpha_grid(-1.5, 3.0, 45)
    right = np.array(posterior_means(clt_model6_loglik(s, lam, N, A1, A2, m=61), A1, A2, 2.0, 0.5))
    wrong = np.array(posterior_means(clt_model6_loglik(s, lam, N, A1, A2, m=61,
                                                        divide_by_n=False), A1, A2, 2.0, 0.5))
    model = Dirichlet(2, prior_shape=2.0, prior_rate=0.5)
    rngs = [np.random.default_rng(i) for i in range(2)]
    draws = np.stack([_chain(model, s, lam, N, 1500, 300, 3, r, Progress(1, False, ""), 0)[0]
                      for r in rngs])
    from privpost.posterior import Posterior
    post = Posterior(draws={"alpha": draws})
    assert np.all(np.abs(_zscores(post, right)) < K_MCSE), (_zscores(post, right), right)
    assert np.abs(_zscores(post, wrong)).max() > 6


# ------------------------------------------------------------------ ABC, bootstrap, priors
@pytest.fixture(scope="module")
def small_sets():
    x = np.random.default_rng(7).dirichlet([2.2, 3.3, 4.4], 400)
    return x, dpss_release(x, 0.5, 1.0, seed=1), dpss_release(x, 0.5, 1.0, split=0.25, seed=2)


def test_dpabc_accepts_exactly_ten_percent(small_sets):
    x, rs, _ = small_sets
    post = pp.infer(Dirichlet(3), rs, method="dpabc", prior="p1", draws=60, chains=1, seed=1)
    assert post.draws["alpha"].shape == (1, 60, 3)
    assert int(post.chain_stats["proposals"][0]) == 600
    d = post.sample_stats["distance"].ravel()
    assert np.all(d <= post.chain_stats["tolerance"][0])
    assert any("acceptance 0.1" in n for n in post.notes)
    # the accepted draws are the closest: a fresh simulation at the accepted alphas is closer to
    # s_L on average than at prior draws
    rng = np.random.default_rng(0)
    acc = post.draws["alpha"].reshape(-1, 3)
    pri = rng.gamma(1.0, 10.0, size=(60, 3))
    sL = rs.releases[1].observed
    a = rs.releases[1].query.threshold
    dist = lambda A: np.sqrt(((censored_mean_logs(A, 400, a, rng) - sL) ** 2).sum(1)).mean()  # noqa
    assert dist(acc) < dist(pri)


def test_dpboots_near_boots_without_noise_and_wider_with_noise():
    rng = np.random.default_rng(3)
    x = rng.dirichlet([2.2, 3.3, 4.4], 500)
    a = 1e-6
    s_cens = np.log(np.maximum(x, a)).mean(0)
    B = 400
    boots = pp.infer(Dirichlet(3), None, method="boots", records=x, draws=B, seed=1)
    bt = boots.draws["alpha"].reshape(-1, 3)
    dp, _ = dpboots_draws(s_cens, 1e-12, a, 500, B, np.random.default_rng(2))
    for j in range(3):   # same mean and sd within Monte Carlo error (B i.i.d. replicates each)
        se_m = math.sqrt(bt[:, j].var() / B + dp[:, j].var() / B)
        assert abs(bt[:, j].mean() - dp[:, j].mean()) < K_MCSE * se_m
        assert dp[:, j].std() == pytest.approx(bt[:, j].std(), rel=0.25)
    noisy, _ = dpboots_draws(s_cens, 0.05, a, 500, B, np.random.default_rng(2))
    assert np.all(noisy.std(0) > 1.5 * bt.std(0))    # privacy noise widens the intervals


def test_fit_gamma_copula_recovers_parameters():
    rng = np.random.default_rng(0)
    from scipy import stats
    R = np.array([[1, 0.6], [0.6, 1]])
    z = rng.multivariate_normal([0, 0], R, size=20000)
    u = stats.norm.cdf(z)
    x = np.column_stack([stats.gamma.ppf(u[:, 0], 3.0, scale=1 / 2.0),
                         stats.gamma.ppf(u[:, 1], 5.0, scale=1 / 0.5)])
    shape, rate, Rh = fit_gamma_copula(x)
    np.testing.assert_allclose(shape, [3.0, 5.0], rtol=0.05)
    np.testing.assert_allclose(rate, [2.0, 0.5], rtol=0.05)
    assert Rh[0, 1] == pytest.approx(0.6, abs=0.03)


TABLE1 = [("dpboots", None), ("dpmcmc", "p1"), ("dpmcmc", "p3"), ("dpmcmc", "p4"),
          ("dpremcmc", "p1"), ("dpremcmc", "p3"), ("dpremcmc", "p4"),
          ("dpabc", "p1"), ("dpabc", "p2"), ("dpabc", "p3"), ("dpabc", "p4"), ("dpabc", "p5"),
          ("dpapprox", "p1"), ("dpapprox", "p3"), ("dpapprox", "p4")]


@pytest.mark.parametrize("method,prior", TABLE1)
def test_every_table1_method_runs_on_one_release(small_sets, method, prior):
    x, rs, rss = small_sets
    rel = rss if prior not in (None, "p1") else rs
    kw = dict(draws=40, chains=1, seed=5, prior_draws=200) if method != "dpboots" else \
        dict(draws=40, chains=1, seed=5)
    if method in ("dpmcmc", "dpremcmc", "dpapprox"):
        kw["warmup"] = 40
    if method in ("dpmcmc", "dpremcmc"):
        kw["progress"] = False
    if prior:
        kw["prior"] = prior
    if prior == "p5":      # short fixed p5 chains (the default runs them until converged)
        kw["p5_options"] = {"draws": 40}
    import warnings
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        post = pp.infer(Dirichlet(3), rel, method=method, **kw)
    a = post.draws["alpha"]
    assert a.shape[-1] == 3 and np.all(a > 0)
    assert post.notes and any("DPss release" in n for n in post.notes)
    if prior not in (None, "p1"):
        assert any(f"prior {prior}" in n for n in post.notes)
    if method != "dpmcmc":
        assert not post.exact


@pytest.mark.parametrize("method,prior,match", [
    ("dpmcmc", "p2", "Table 1"), ("dpapprox", "p5", "Table 1"), ("dpboots", "p1", "no prior"),
    ("dpmcmc", "p4", "split")])
def test_wrong_pairs_are_refused(small_sets, method, prior, match):
    _, rs, _ = small_sets
    with pytest.raises(IncompatibleError, match=match):
        pp.infer(Dirichlet(3), rs, method=method, prior=prior)


def test_model_and_release_checks(small_sets):
    _, rs, _ = small_sets
    with pytest.raises(IncompatibleError, match="parts"):
        pp.infer(Dirichlet(2), rs, method="dpabc")
    with pytest.raises(PrivpostError, match="single release"):
        pp.infer(Dirichlet(3), rs.releases[1], method="dpabc")
    with pytest.raises(PrivpostError, match="b must be"):
        pp.infer(Dirichlet(3), rs, method="dpremcmc", b=10_000)


def test_cli_infer_with_prior(tmp_path, small_sets):
    _, _, rss = small_sets
    p = rss.save(tmp_path / "s.json")
    res = CliRunner().invoke(pp.cli.app if hasattr(pp, "cli") else __import__(
        "privpost.cli", fromlist=["app"]).app,
        ["infer", str(p), "--model", "dirichlet:parts=3", "--method", "dpabc", "--option",
         "prior=p3", "--option", "prior_draws=200", "--draws", "30", "--chains", "1",
         "--seed", "1", "--json"])
    assert res.exit_code == 0, res.output
    assert "prior p3" in res.output


# ------------------------------------------------------------------ DPreMCMC's proper target
W_RE, N_RE = 4.0, 4


def _n4_release():
    """A release of n = 4 records with the quadrature's Laplace scale: b = 1 gives w = 4."""
    q = CensoredLogMean(2, A_CUT, N_RE)
    return Release(q, Laplace(scale=LAM).calibrate(q.sensitivity()), N_RE, S_OBS)


@pytest.fixture(scope="module")
def quad_weighted():
    from _compositional_exact import weighted_restricted_loglik

    A1, A2, _ = alpha_grid(-4.0, 3.0, 70)
    ll = weighted_restricted_loglik(S_OBS, A_CUT, LAM, W_RE, A1, A2, nodes=150)
    right = posterior_means(ll, A1, A2, 2.0, 1.0)
    w1 = posterior_means(censored_n1_loglik(S_OBS, A_CUT, LAM, A1, A2, True, nodes=150),
                         A1, A2, 2.0, 1.0)
    # candidate (a): each pseudo-record normalised, Dir(x|alpha)^w / int Dir^w (alpha-marginal
    # = prior x E[Laplace] under the tempered law), on the same support
    lz = weighted_restricted_loglik(S_OBS, A_CUT, LAM, W_RE, A1, A2, nodes=150, laplace=False)
    normed = posterior_means(ll - lz, A1, A2, 2.0, 1.0)
    return np.array(right), np.array(w1), np.array(normed)


def test_dpremcmc_default_target_matches_quadrature(quad_weighted):
    """support='uncensored' (default), b = 1, w = 4: the alpha-marginal of model (5) with the
    pseudo-record restricted to min(x) >= a, by quadrature. Wrong targets that must fail:
    DPMCMC's (w = 1) and the per-pseudo-record normalised model (candidate (a)). (The sampler
    without the (w - 1) term happens to land within |z| < 2 of this small case; the (w - 1)
    term itself is pinned by test_dpremcmc_record_step_has_the_w_minus_1_term.)"""
    from privpost.inference.compositional import dpremcmc_posterior

    right, w1, normed = quad_weighted
    prior = Dirichlet(2, prior_shape=2.0, prior_rate=1.0)
    kw = dict(draws=3000, warmup=300, chains=2, progress=False, cores=1)
    post, w, floor = dpremcmc_posterior(prior, _n4_release(), 1, seed=21, **kw)
    assert (w, floor) == (W_RE, A_CUT)
    z = _zscores(post, right)
    assert np.all(np.abs(z) < K_MCSE), z
    assert np.abs(_zscores(post, w1)).max() > 6, _zscores(post, w1)   # not DPMCMC's target
    assert np.abs(_zscores(post, normed)).max() > 6, _zscores(post, normed)


def test_dpremcmc_b_equal_n_through_dpremcmc_posterior_is_dpmcmc(quad_refs):
    """b = n: w = 1, no restriction (floor 0) -- DPMCMC's target, by the same quadrature."""
    from privpost.inference.compositional import dpremcmc_posterior

    right, wrong = quad_refs
    post, w, floor = dpremcmc_posterior(Dirichlet(2, prior_shape=2.0, prior_rate=1.0),
                                        _n1_release(), 1, draws=2000, warmup=200, chains=2,
                                        seed=23, progress=False, cores=1)
    assert (w, floor) == (1.0, 0.0)
    assert np.all(np.abs(_zscores(post, right)) < K_MCSE)
    assert np.abs(_zscores(post, wrong)).max() > 6


def test_dpremcmc_support_option_validated_and_seed_variant_warns():
    rng = np.random.default_rng(4)
    x = rng.dirichlet([0.5, 0.5, 0.5], 400)
    rs = dpss_release(x, 0.125, 0.375, seed=rng)
    with pytest.raises(PrivpostError, match="support"):
        pp.infer(Dirichlet(3), rs, method="dpremcmc", support="improper")
    with pytest.warns(UserWarning, match="no joint target"):
        pp.infer(Dirichlet(3), rs, method="dpremcmc", weight_term=False, draws=50, warmup=50,
                 chains=1, seed=1, progress=False)
    post = pp.infer(Dirichlet(3), rs, method="dpremcmc", draws=50, warmup=50, chains=1,
                    seed=1, progress=False)
    assert any("restricted to min_j x_j >= a" in str(n) for n in post.notes)


def test_dpapprox_moves_at_eps_1e10():
    """At eps = 1e10 (noise ~ 0) DPapprox's posterior is the CLT posterior given s_L = S_0(D, a):
    its sd must match the non-private posterior's (the sampler used to freeze there: numpy's
    Wald draw is nan when its mean overflows, and a move-less warm-up gave a zero covariance)."""
    import warnings

    rng = np.random.default_rng(8)
    x = rng.dirichlet([2.2, 3.3, 4.4], 2000)
    rs = dpss_release(x, 0.25e10, 0.75e10, seed=rng)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ap = pp.infer(Dirichlet(3), rs, method="dpapprox", draws=400, warmup=300, chains=1,
                      seed=1, progress=False)
        ex = pp.infer(Dirichlet(3), None, method="nonprivate", records=x, draws=400,
                      warmup=300, chains=1, seed=2, progress=False)
    sd_ap = ap.draws["alpha"].reshape(-1, 3).std(0)
    sd_ex = ex.draws["alpha"].reshape(-1, 3).std(0)
    assert np.all(sd_ap > 0.6 * sd_ex) and np.all(sd_ap < 1.6 * sd_ex), (sd_ap, sd_ex)
    m_ap, m_ex = ap.draws["alpha"].reshape(-1, 3).mean(0), ex.draws["alpha"].reshape(-1, 3).mean(0)
    assert np.all(np.abs(m_ap - m_ex) < 1.0 * sd_ex), (m_ap, m_ex, sd_ex)


def test_dpmcmc_chains_start_dispersed_about_the_mle():
    """Each chain starts at the MLE of the statistic re-noised with fresh Laplace noise: the starts
    differ (a shared start hides modes from split R-hat), scatter about MLE(s_L) as the statistic's
    noise does, and are reproducible from the seed. The shared-MLE variant fails the first check."""
    from privpost.inference.compositional import INIT_NOTE, _init_from
    from privpost.models.dirichlet_tools import dirichlet_mle

    x = np.random.default_rng(3).dirichlet([2.0, 3.0, 4.0], 2000)
    q = CensoredLogMean(3, 1e-3, len(x))
    scale = 0.02
    rel = Release(q, Laplace(scale=scale).calibrate(q.sensitivity()), len(x), q.statistic(x))
    inits = _init_from(rel, {"chains": 200, "seed": 5})
    starts = np.array([i["alpha"] for i in inits])
    assert starts.shape == (200, 3) and np.all(np.isfinite(starts))
    shared = np.repeat(dirichlet_mle(np.asarray(rel.observed))[None], 200, axis=0)
    assert np.all(np.ptp(starts, 0) > 0) and not np.any(np.ptp(shared, 0) > 0)
    # the spread is that of MLE(s_L + noise): independently simulated with the same noise
    rng = np.random.default_rng(99)
    ref = np.array([dirichlet_mle(np.asarray(rel.observed) + rng.laplace(0, scale, 3))
                    for _ in range(2000)])
    ok = np.all(np.isfinite(ref), axis=1)
    ratio = np.log(starts).std(0) / np.log(ref[ok]).std(0)
    assert np.all((ratio > 0.75) & (ratio < 1.33)), ratio           # sd of sd: ~5% at 200
    again = np.array([i["alpha"] for i in _init_from(rel, {"chains": 200, "seed": 5})])
    np.testing.assert_array_equal(starts, again)
    post = dpmcmc_posterior(Dirichlet(3), rel, draws=20, warmup=10, chains=2, seed=1,
                            progress=False, cores=1)
    assert INIT_NOTE in post.notes


# ------------------------------------------------- every method of Table 1 on one DPss release
@pytest.fixture(scope="module")
def split_release_file(tmp_path_factory, small_sets):
    return small_sets[2].save(tmp_path_factory.mktemp("t1") / "split.json")


@pytest.mark.parametrize("label", __import__(
    "privpost.experiments.guo2023_sim", fromlist=["ALL_METHODS"]).ALL_METHODS)
def test_cli_runs_every_table1_method_on_one_split_release(label, split_release_file):
    """Issue 10's first 'done when': each of the 15 DP methods of the seed's Table 1 runs from
    ``privpost infer`` on the same split DPss release, and says which method, which prior and
    (for the approximate ones) which approximation it ran; damcmc's 'exact' note is restated for
    what it is exact for."""
    import json

    from privpost.cli import app
    from privpost.experiments.guo2023_sim import SIM_METHODS

    method, prior, _ = SIM_METHODS[label]
    args = ["infer", str(split_release_file), "--model", "dirichlet:parts=3", "--method",
            method, "--draws", "40", "--warmup", "40", "--seed", "3", "--json"]
    if prior:
        args += ["--option", f"prior={prior}", "--option", "prior_draws=100"]
    if prior == "p5":      # short fixed p5 chains (the default runs them until converged)
        args += ["--option", 'p5_options={"draws": 40}']
    res = CliRunner().invoke(app, args)
    assert res.exit_code == 0, res.output
    out = json.loads(res.output[res.output.index("{"):])
    assert out["method"] == method
    notes = " ".join(out["notes"])
    if prior not in (None, "p1"):
        assert f"prior {prior}" in notes
        assert out["exact"] is False
    if method in ("dpremcmc", "dpabc", "dpapprox", "dpboots") or prior not in (None, "p1"):
        assert out["exact"] is False
        assert not any(n.startswith("exact: ") for n in out["notes"]), out["notes"]
    else:
        assert out["exact"] is True
    means = np.array([row["mean"] for key, row in out["summary"].items()
                      if key.startswith("alpha[")])          # named by part (alpha[x1], ...)
    assert means.shape == (3,), list(out["summary"])
    assert np.all(np.isfinite(means)) and np.all(means > 0)
