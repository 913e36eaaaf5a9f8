"""Data-driven starting values of damcmc (issue 13): a poor prior no longer leaves chains stuck."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

from privpost.errors import ConvergenceWarning, PrivpostError
from privpost.inference import _start
from privpost.inference.damcmc import _Problem, run
from privpost.mechanisms import Laplace
from privpost.models import BetaBernoulli, NormalInverseGamma
from privpost.queries import Mean, Sum
from privpost.releases.release import Release


def _age_release():
    # the example: a mean age of 53.4 over 500 records, clamped to [18, 95], eps = 1
    q = Mean(bounds=(18, 95), n=500)
    m = Laplace(epsilon=1.0).calibrate(q.sensitivity("l1", "replace"))
    return Release(query=q, mechanism=m, n=500, observed=np.array([53.4]))


def _run(start, **kw):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        return run(NormalInverseGamma(), _age_release(), draws=300, warmup=300, chains=4,
                   seed=11, progress=False, cores=1, start=start, **kw)


def test_prior_start_reproduces_the_stuck_chains_and_is_flagged():
    post = _run("prior", interweave=False)   # the run: no non-centred move
    # every record simulated at mu ~ N(0, sigma2) clamps to 18: the release has no say
    assert abs(float(post.mean("mu"))) < 5
    assert post.converged is False
    assert any(n.startswith("NOT CONVERGED") for n in post.notes)


@pytest.mark.parametrize("interweave", [False, "auto"])
def test_data_start_puts_the_chains_where_the_release_says(interweave):
    post = _run("data", interweave=interweave)
    mu = post.draws["mu"]
    assert 45 < float(mu.mean()) < 62
    assert np.all(np.abs(mu.mean(axis=1) - 53.4) < 10)           # every chain, not just one
    assert any(n.startswith("start: each chain's records shifted") for n in post.notes)


def test_shifted_starts_reproduce_the_release_and_are_dispersed():
    p = _Problem(NormalInverseGamma(), _age_release())
    rngs = [np.random.default_rng(i) for i in range(4)]
    inits, note = _start.data_inits(p, rngs)
    assert inits is not None and "shifted" in note
    Ts = np.array([p.t(i["records"]).sum() for i in inits])
    # within a few noise scales (0.154 on the mean) of the release, and not all equal
    assert np.all(np.abs(Ts - 53.4) < 6 * p.scale)
    assert np.ptp(Ts) > 0 and np.ptp([float(i["params"]["mu"]) for i in inits]) > 0


def test_plugin_start_for_conjugate_models():
    q = Sum(bounds=(0, 1))
    m = Laplace(epsilon=0.5).calibrate(q.sensitivity("l1", "replace"))
    rel = Release(query=q, mechanism=m, n=200, observed=np.array([150.0]))
    p = _Problem(BetaBernoulli(1, 1), rel)
    inits, note = _start.data_inits(p, [np.random.default_rng(i) for i in range(4)])
    assert "plug-in" in note
    th = np.array([float(i["params"]["theta"]) for i in inits])
    assert np.all(np.abs(th - 0.75) < 0.15) and np.ptp(th) > 0
    # the prior start would sit anywhere in (0, 1): the data start is the narrower one
    with pytest.raises(PrivpostError, match="start must be"):
        run(BetaBernoulli(1, 1), rel, draws=10, warmup=0, chains=1, start="somewhere")


def test_user_init_wins_over_data_start():
    q = Sum(bounds=(0, 1))
    m = Laplace(epsilon=1.0).calibrate(q.sensitivity("l1", "replace"))
    rel = Release(query=q, mechanism=m, n=20, observed=np.array([15.0]))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        post = run(BetaBernoulli(1, 1), rel, draws=5, warmup=0, chains=2, seed=1,
                   progress=False, cores=1, init={"theta": 0.5})
    assert not any(n.startswith("start:") for n in post.notes)



# ---- issue 22: a data start for every model and query ----------------------------------------

def _dirichlet_release(alpha=(10.0, 1.4, 14.0), n=800, eps=1.0, seed=5):
    from privpost.models import Dirichlet
    from privpost.queries import CensoredLogMean
    from privpost.releases.release import release

    x = Dirichlet(3).simulate({"alpha": np.array(alpha)}, n, np.random.default_rng(seed))
    return release(x, CensoredLogMean(3, 0.0006944, n), Laplace(epsilon=eps),
                   seed=np.random.default_rng(seed + 1))


def test_dirichlet_plugin_start_is_the_mle_of_renoised_releases():
    from privpost.models.dirichlet_tools import dirichlet_mle
    from privpost.models import Dirichlet

    rel = _dirichlet_release()
    p = _Problem(Dirichlet(3), rel)
    inits, note = _start.data_inits(p, [np.random.default_rng(i) for i in range(4)])
    assert "model's plug-in estimate" in note
    a = np.array([i["params"]["alpha"] for i in inits])
    mle = dirichlet_mle(np.asarray(rel.observed))
    # dispersed (re-noised) about the MLE of the release, on the log scale
    assert np.ptp(a[:, 0]) > 0 and np.all(np.abs(np.log(a / mle)) < 1.0)
    # typed-in release (a plain document, no records behind it) gives the same kind of start
    from privpost.releases.release import Release
    typed = Release(rel.query, rel.mechanism, rel.n, np.asarray(rel.observed).tolist())
    assert "plug-in" in _start.data_inits(_Problem(Dirichlet(3), typed),
                                          [np.random.default_rng(0)])[1]
    # no MLE (sum exp(s) >= 1): the plug-in declines
    assert Dirichlet(3).plugin_params(rel.query, np.zeros(3), rel.n, None) is None


def test_best_simulated_start_when_no_plugin_exists():
    from privpost.models import Dirichlet

    class NoPlugin(Dirichlet):
        def plugin_params(self, query, s, n, rng):
            return None

    rel = _dirichlet_release(n=300, eps=2.0)
    p = _Problem(NoPlugin(3), rel)
    inits, note = _start.data_inits(p, [np.random.default_rng(i) for i in range(3)])
    assert "best fits the release" in note

    def lg(recs):
        return float(p.log_g(np.ascontiguousarray(p.t(recs).sum(axis=0)), p.s_obs, p.weight))

    chosen = [lg(i["records"]) for i in inits]
    rng = np.random.default_rng(99)
    prior = [lg(p.model.simulate(p.model.prior_sample(rng), rel.n, rng)) for _ in range(16)]
    # each chain's pick beats the median prior draw (the wrong variant, a prior start, does not)
    assert min(chosen) > np.median(prior), (chosen, prior)
    assert len({round(c, 9) for c in chosen}) > 1          # dispersed


def test_dirichlet_auto_moves_follow_the_noise_to_sampling_ratio():
    from privpost.models import Dirichlet

    m = Dirichlet(3)
    prm = {"alpha": np.array([10.0, 1.4, 14.0])}
    k_noisy, why = m.interweave_auto_steps(3128, 2 * 0.007 ** 2, prm)        # eps = 1
    k_quiet, _ = m.interweave_auto_steps(3128, 2 * 0.0007 ** 2, prm)         # eps = 10
    assert (k_noisy, k_quiet) == (m.MOVES_WHEN_NOISY, 0) and "noise / sampling" in why
    m5 = Dirichlet(5)                      # 2 moves per free part of the simplex beyond D = 3
    prm5 = {"alpha": np.array([2.2, 3.3, 4.4, 5.5, 6.6])}
    assert m5.interweave_auto_steps(5000, 2 * 0.01 ** 2, prm5)[0] == 8
    assert m5.interweave_auto_steps(5000, 1e-12, prm5)[0] == 0
    rel = _dirichlet_release(n=800, eps=10.0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        post = run(Dirichlet(3), rel, draws=20, warmup=10, chains=1, seed=1, progress=False,
                   fast_path=True)
    assert any("interweave='auto': 0 non-centred" in n for n in post.notes), post.notes
