"""Tests of the non-centred (interweaving) theta-move of DA-MCMC (``damcmc.run(interweave=...)``).

Statistical checks follow tests/test_damcmc.py: |estimate - exact| < K_MCSE MCSE (MCSE from the
ArviZ ESS), each with a companion showing that a deliberately wrong acceptance fails.
"""

from __future__ import annotations

import math
import warnings

import numpy as np
import pytest
from scipy import stats

from privpost.errors import IncompatibleError, PrivpostError
from privpost.inference.damcmc import Sampler, run
from privpost.mechanisms import Laplace
from privpost.models import BetaBernoulli, NormalKnownVariance
from privpost.models.linear_regression import LinearRegression
from privpost.queries import RegressionStats, Sum
from privpost.releases.release import Release

from _tolerance import P_CHECK
from test_damcmc import (A_, B_, K_MCSE, N_, S_, beta_bernoulli_exact, laplace_logpdf,
                         sum_release, z_mean, z_scores)

warnings.filterwarnings("ignore", category=FutureWarning)


@pytest.fixture(scope="module")
def exact_a():
    return beta_bernoulli_exact(A_, B_, N_, S_, laplace_logpdf(1.0))


class _FlatPriorRatio(BetaBernoulli):
    """Deliberately wrong non-centred acceptance: the prior ratio is dropped (flat log_prior in
    the support), while the centred update still uses the Beta(a, b) prior."""

    def log_prior(self, params):
        t = float(params["theta"])
        return 0.0 if 0.0 < t < 1.0 else -np.inf


class _BadInnovations(BetaBernoulli):
    """Deliberately wrong: innovations redrawn from U(0, 1) ignoring x (not u | x, theta)."""

    def innovations(self, params, records, rng):
        return rng.random(np.asarray(records).shape[0])


def _run_bb(model, interweave, seed=11, draws=6000, fast_path=False):
    # the generic path's move (tests/test_damcmc_compiled_interweave.py: the compiled one)
    rel = sum_release(N_, S_, Laplace(scale=1.0))
    return run(model, rel, draws=draws, warmup=300, chains=4, seed=seed, cores=1,
               progress=False, interweave=interweave, fast_path=fast_path)


# ============================================================================================
# exact Beta-Bernoulli target (enumeration), interweave on
# ============================================================================================

def test_beta_bernoulli_exact_with_interweave(exact_a):
    post = _run_bb(BetaBernoulli(A_, B_), 2, draws=3000)
    th = post.draws["theta"]
    z = z_scores(th, exact_a["mean"], exact_a["sd"], exact_a["quantiles"])
    assert all(abs(v) < K_MCSE for v in z.values()), z
    acc = post.chain_stats["interweave_accept_rate"]
    assert acc.shape == (4,) and np.all((acc > 0.1) & (acc < 0.9)), acc
    assert any("interweaving" in note for note in post.notes)
    assert any("NumPy proposals" in note for note in post.notes)  # generic path


def test_dropped_prior_ratio_is_detected(exact_a):
    post = _run_bb(_FlatPriorRatio(A_, B_), 3, draws=2000)
    z = z_scores(post.draws["theta"], exact_a["mean"], exact_a["sd"], exact_a["quantiles"])
    assert max(abs(v) for v in z.values()) > 2 * K_MCSE, z


def test_wrong_innovations_are_rejected_up_front():
    """from_innovations(innovations(x)) must reproduce x; damcmc checks it before sampling."""
    with pytest.raises(IncompatibleError, match="reproduce"):
        _run_bb(_BadInnovations(A_, B_), 1, draws=10)


# ============================================================================================
# regression: tiny noise -> conjugate posterior given the true records
# ============================================================================================

def _regression_release(records, scale):
    q = RegressionStats(bounds_x=[(-10, 10), (-10, 10)], bounds_y=(-10, 10), sensitivity=13)
    s = q.statistic(records)
    return Release(query=q, mechanism=Laplace(scale=scale).calibrate(13.0), n=records.shape[0],
                   observed=np.asarray(s, dtype=float))


def test_tiny_noise_regression_gives_conjugate_posterior():
    model = LinearRegression(p=2, sigma2=2.0, tau2=4.0, m=[0.9, -1.17])
    rng = np.random.default_rng(3)
    x = model.simulate({"beta": np.array([-1.8, -2.9, -0.66])}, 40, rng)
    rel = _regression_release(x, 1e-6)
    post = run(model, rel, draws=1500, warmup=300, chains=2, seed=4, cores=1, progress=False,
               init={"params": {"beta": np.zeros(3)}, "records": x}, interweave=2)
    ref = model.nonprivate_posterior(x)
    mu, cov = np.array(ref["beta0"]), np.array(ref["beta_cov"])
    b = post.draws["beta"]
    for j in range(3):
        sd = math.sqrt(cov[j, j])
        qs = {q: mu[j] + sd * stats.norm.ppf(q) for q in (0.1, 0.5, 0.9)}
        z = z_scores(b[..., j], mu[j], sd, qs)
        assert all(abs(v) < K_MCSE for v in z.values()), (j, z)
    # the latent records reproduce the released statistic: log eta stays at its maximum
    assert post.sample_stats["log_eta"].min() > -9 * math.log(2e-6) - 30
    # the wrong limit (posterior shifted by 1 sd) is rejected
    assert abs(z_mean(b[..., 1], mu[1] + math.sqrt(cov[1, 1]))) > 2 * K_MCSE


class _RegFlatPrior(LinearRegression):
    """Deliberately wrong non-centred acceptance for regression: prior ratio dropped."""

    def log_prior(self, params):
        return 0.0


@pytest.mark.parametrize("model_cls,ok", [(LinearRegression, True), (_RegFlatPrior, False)])
def test_huge_noise_regression_gives_the_prior(model_cls, ok):
    """epsilon -> 0: eta is flat, the private posterior of beta is its N(0, 4 I) prior; with
    several non-centred moves per iteration their prior ratio matters."""
    model = model_cls(p=2, sigma2=2.0, tau2=4.0, m=[0.9, -1.17])
    x = model.simulate({"beta": np.array([-1.8, -2.9, -0.66])}, 20, np.random.default_rng(8))
    rel = _regression_release(x, 1e7)
    post = run(model, rel, draws=800, warmup=200, chains=2, seed=9, cores=1, progress=False,
               interweave=2)
    b = post.draws["beta"]
    zs = []
    for j in range(3):
        qs = {q: 2.0 * stats.norm.ppf(q) for q in (0.1, 0.5, 0.9)}
        zs.append(z_scores(b[..., j], 0.0, 2.0, qs))
    worst = max(abs(v) for z in zs for v in z.values())
    if ok:
        assert worst < K_MCSE, zs
    else:  # the walk is flat in beta: it diffuses far beyond the prior (sd 2)
        assert worst > 2 * K_MCSE or b.reshape(-1, 3).std(axis=0).max() > 4.0, zs


def test_regression_round_trip_and_acceptance_formula():
    """One non-centred step by hand: records x* = g(beta*, u) and the MH ratio
    p(beta*) eta(s | T*) / (p(beta) eta(s | T))."""
    model = LinearRegression(p=2, sigma2=2.0, m=[0.9, -1.17])
    rng = np.random.default_rng(0)
    x = model.simulate({"beta": np.array([1.0, -1.0, 0.5])}, 30, rng)
    params = {"beta": np.array([0.3, -0.2, 0.1])}
    u = model.innovations(params, x, rng)
    assert np.allclose(model.from_innovations(params, u), x)
    assert np.array_equal(u[:, :2], x[:, :2])
    new = {"beta": np.array([0.5, -0.1, 0.0])}
    x2 = model.from_innovations(new, u)
    assert np.array_equal(x2[:, :2], x[:, :2])
    assert np.allclose((x2[:, 2] - x2[:, :2] @ new["beta"][1:] - new["beta"][0]),
                       (x[:, 2] - x[:, :2] @ params["beta"][1:] - params["beta"][0]))
    # Bernoulli: u | x is uniform on the right side of theta
    bb = BetaBernoulli(2, 2)
    xb = bb.simulate({"theta": 0.3}, 2000, rng)
    ub = bb.innovations({"theta": 0.3}, xb, rng)
    assert np.array_equal(bb.from_innovations({"theta": 0.3}, ub), xb)
    assert stats.kstest(ub, "uniform").pvalue > P_CHECK


# ============================================================================================
# options, determinism, errors
# ============================================================================================

def test_same_seed_same_draws():
    a = _run_bb(BetaBernoulli(A_, B_), 2, seed=21, draws=300)
    b = _run_bb(BetaBernoulli(A_, B_), 2, seed=21, draws=300)
    c = _run_bb(BetaBernoulli(A_, B_), 2, seed=22, draws=300)
    assert np.array_equal(a.draws["theta"], b.draws["theta"])
    assert not np.array_equal(a.draws["theta"], c.draws["theta"])
    off = _run_bb(BetaBernoulli(A_, B_), 0, seed=21, draws=300)
    assert not np.array_equal(a.draws["theta"], off.draws["theta"])
    assert "interweave_accept_rate" not in off.chain_stats


def test_same_draws_in_worker_processes():
    rel = sum_release(N_, S_, Laplace(scale=1.0))
    kw = dict(draws=200, warmup=50, chains=2, seed=3, progress=False, interweave=1)
    a = run(BetaBernoulli(A_, B_), rel, cores=1, **kw)
    b = run(BetaBernoulli(A_, B_), rel, cores=2, **kw)
    assert np.array_equal(a.draws["theta"], b.draws["theta"])


def test_interweave_options_and_errors():
    rel = sum_release(N_, S_, Laplace(scale=1.0))
    class _NoCompiledMove(BetaBernoulli):   # BetaBernoulli has the compiled move since #13
        def compiled_model(self):
            return super().compiled_model()._replace(interweave=None)

    with pytest.raises(IncompatibleError, match="interweav"):
        run(_NoCompiledMove(A_, B_), rel, draws=5, warmup=0, chains=1, progress=False,
            interweave=1, fast_path=True)
    with pytest.raises(PrivpostError, match="interweave"):
        run(BetaBernoulli(A_, B_), rel, draws=5, warmup=0, chains=1, progress=False,
            interweave=-1)
    with pytest.raises(PrivpostError, match="interweave"):
        run(BetaBernoulli(A_, B_), rel, draws=5, warmup=0, chains=1, progress=False,
            interweave=1.5)
    relq = Release(query=Sum(bounds=(-5, 5)), mechanism=Laplace(scale=1.0).calibrate(10.0), n=5,
                   observed=np.array([1.0]))
    class _NoProtocol(NormalKnownVariance):   # NormalKnownVariance has the protocol since #13
        innovations = None

    with pytest.raises(IncompatibleError, match="innovations"):
        run(_NoProtocol(), relq, draws=5, warmup=0, chains=1, progress=False,
            interweave=True)
    # step-level API: no adaptation unless asked, proposal state present
    s = Sampler(BetaBernoulli(A_, B_), rel, interweave=2)
    st = s.init(np.random.default_rng(0))
    assert st.iw is not None and st.adapting is False
    for _ in range(20):
        s.step(st, np.random.default_rng(1))
    assert st.iw.proposed == 40
    assert s.recompute(st) < 1e-12
