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
from privpost.release import Release


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

