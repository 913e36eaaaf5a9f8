"""DPreMCMC's exact moves on model (5) (issue 22 item 3): the tempered record proposal
``Dir(w (alpha - 1) + 1)`` and the non-centred alpha move whose innovations' law carries
``c_w(alpha)^b`` (inference/compositional.py, ``_WeightedDirichlet``).

Reference: the alpha-marginal of model (5) (b = 1, d = 2, pseudo-record restricted to
``min x >= a``) by quadrature (tests/_compositional_exact.py), at a weight w = 200 where that
marginal is pulled far from any data-generating alpha by the factor ``c_w(alpha)``
(EXPERIMENTS.md §8.3). Wrong variant: the non-centred move without ``b log c_w(alpha)``.
"""

from __future__ import annotations

import math
import sys
import warnings
from pathlib import Path

import arviz as az
import numpy as np
import pytest

from privpost.inference import damcmc
from privpost.inference.compositional import (DirichletProposal, TemperedDirichletProposal,
                                              dpremcmc_posterior, pseudo_release, weighted_model)
from privpost.mechanisms import Laplace
from privpost.models import Dirichlet
from privpost.queries import CensoredLogMean
from privpost.releases.release import Release

sys.path.insert(0, str(Path(__file__).parent))
from _compositional_exact import alpha_grid, posterior_means, weighted_restricted_loglik  # noqa: E402
from _tolerance import K_MCSE  # noqa: E402

S_OBS, A_CUT, LAM, W = np.array([-1.5, -0.2]), 0.3, 0.3, 200


def _release():
    q = CensoredLogMean(2, A_CUT, W)
    return Release(q, Laplace(scale=LAM).calibrate(q.sensitivity()), W, S_OBS)


@pytest.fixture(scope="module")
def quad():
    A1, A2, _ = alpha_grid(-3.0, 6.0, 110)
    return np.array(posterior_means(weighted_restricted_loglik(S_OBS, A_CUT, LAM, W, A1, A2,
                                                               nodes=800), A1, A2, 2.0, 1.0))


def _z(post, ref):
    a = post.draws["alpha"].reshape(-1, 2)
    mcse = az.mcse(post.to_arviz(), var_names=["alpha"])["alpha"].values
    return (a.mean(0) - ref) / mcse


def test_tempered_constant_is_the_integral_of_the_tempered_density():
    """``c_w(alpha) = int Dir(x | alpha)^w dx`` (d = 2: a Beta integral by quadrature)."""
    from scipy import integrate, stats

    m = weighted_model(Dirichlet(2), 7.0)
    for a in ([1.5, 2.5], [3.0, 1.2]):
        num, _ = integrate.quad(lambda x: stats.beta.pdf(x, *a) ** 7.0, 0, 1, limit=200)
        assert math.isclose(m.log_tempered_constant(a), math.log(num), rel_tol=1e-8)
    assert m.log_tempered_constant([0.8, 2.0]) == -math.inf      # beta_1 = 7(-0.2) + 1 < 0


def test_innovations_round_trip_and_invalid_region_never_moves():
    m = weighted_model(Dirichlet(3), 50.0, floor=1e-3)
    rng = np.random.default_rng(1)
    p = {"alpha": np.array([2.0, 3.0, 4.0])}
    x = m.simulate(p, 20, rng)
    u = m.innovations(p, x, rng)
    assert u.shape == (20, 4) and np.all(u[:, -1] == 0)
    assert np.allclose(m.from_innovations(p, u), x, rtol=1e-9, atol=1e-12)
    assert np.isfinite(m.innovations_log_density(p, u))
    low = {"alpha": np.array([0.5, 3.0, 4.0])}                   # beta_1 = 50(-0.5) + 1 < 0
    ul = m.innovations(low, x, rng)
    assert np.all(ul[:, -1] == 1) and np.allclose(m.from_innovations(low, ul), x)
    assert m.innovations_log_density(p, ul) == -math.inf          # no way out of the region
    assert m.innovations_log_density(low, u) == -math.inf         # nor into it


def test_tempered_proposal_accepts_where_the_seed_proposal_does_not():
    """w = 200, d = 3: from the tempered law, records are accepted on the Laplace ratio alone
    (here: high); from Dir(alpha) the (w - 1) term rejects nearly all of them."""
    rng = np.random.default_rng(2)
    alpha = np.array([20.0, 30.0, 40.0])
    model = weighted_model(Dirichlet(3), 200.0)
    params = {"alpha": alpha}
    x = TemperedDirichletProposal(200.0).propose(np.ones((500, 3)) / 3, params, rng)

    def accept(prop_obj):
        prop = prop_obj.propose(x, params, rng)
        lr = (model.log_likelihood(params, prop) - model.log_likelihood(params, x)
              + prop_obj.log_ratio(x, prop, params))
        return float(np.mean(np.minimum(1.0, np.exp(lr))))
    assert accept(TemperedDirichletProposal(200.0)) == pytest.approx(1.0)   # exact conditional
    assert accept(DirichletProposal()) < 0.05


def test_dpremcmc_moves_match_quadrature_at_w_200(quad):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        post, w, floor = dpremcmc_posterior(Dirichlet(2, prior_shape=2.0, prior_rate=1.0),
                                            _release(), 1, draws=1500, warmup=200, chains=2,
                                            seed=5, progress=False, cores=1)
    assert (w, floor) == (W, A_CUT)
    z = _z(post, quad)
    assert np.all(np.abs(z) < K_MCSE), z


class _NoConstant(type(weighted_model(Dirichlet(2), 2.0))):
    """WRONG: the non-centred move without b log c_w(alpha) (the records' law treated as if
    it were normalised)."""

    def innovations_log_density(self, params, u):
        val = super().innovations_log_density(params, u)
        return val - np.asarray(u).shape[0] * self.log_tempered_constant(params["alpha"]) \
            if val > -math.inf else val


def test_move_without_the_tempered_constant_fails(quad):
    base = Dirichlet(2, prior_shape=2.0, prior_rate=1.0)
    wrong = _NoConstant(base, float(W), A_CUT)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        post = damcmc.run(wrong, pseudo_release(_release(), 1), proposal=TemperedDirichletProposal(W),
                          fast_path=False, interweave=4, draws=1500, warmup=200, chains=2,
                          seed=6, progress=False, cores=1)
    assert np.abs(_z(post, quad)).max() > 2 * K_MCSE, _z(post, quad)


def test_collapse_warning_compares_alpha0_with_the_mle():
    """The warning fires when the posterior median alpha_0 is > 10x MLE(s_L)'s, not below."""
    from types import SimpleNamespace

    from privpost.inference.compositional import _collapse_warning
    from privpost.models.dirichlet_tools import dirichlet_mle

    rel = SimpleNamespace(observed=np.array([-1.6, -1.2, -0.9]))
    ref = float(dirichlet_mle(rel.observed).sum())
    share = np.array([0.2, 0.3, 0.5])
    low = SimpleNamespace(draws={"alpha": np.broadcast_to(2 * ref * share, (2, 10, 3))})
    high = SimpleNamespace(draws={"alpha": np.broadcast_to(30 * ref * share, (2, 10, 3))})
    assert _collapse_warning(low, rel, 150.0) is None
    assert "prior's tail" in _collapse_warning(high, rel, 150.0)
    assert _collapse_warning(high, rel, 1.0) is None                   # w = 1: DPMCMC
