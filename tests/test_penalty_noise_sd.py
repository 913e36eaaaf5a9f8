"""Penalty MCMC's noise sds: the user's ``noise_sd`` is honoured, one meaning per field
(issue #23, finding 5b).

Before: ``penalty_mcmc(..., noise_sd=2.4, max_iterations=5000)`` silently lowered the noise sd to
0.514 when the budget allowed more than 5000 iterations, and ``release.noise_sd`` was the ratio's
sd in the general variant but the statistic's sd in the exponential-family variant (and a
per-owner sd with several owners). Now:

* ``release.release_sd`` is the sd of the noise on **each released number** -- checked against
  the residuals of the published values around the true ones, recomputed from the records;
* ``release.ratio_sd`` is the sd of the noise on the **log acceptance ratio** (all owners;
  expfam: the largest box move) and equals the ``noise_sd`` argument in every variant --
  checked against the noise the chain actually put on that ratio.

Sample sds of Gaussian residuals have a finite-variance standard error, sd / sqrt(2 (m - 1)).
"""

from __future__ import annotations

import math

import numpy as np
import pytest

import privpost as pp
from privpost.accounting import gaussian_composition_epsilon
from privpost.errors import ReleaseError
from privpost.inference import penalty as P

X = (np.random.default_rng(7).random(400) < 0.3).astype(float)
Z = 4.5          # |z| bound per check (two-sided 7e-6)
pytestmark = pytest.mark.filterwarnings("ignore:penalty-mcmc. bulk ESS")


def _z_sd(sample, sd):
    m = sample.size
    return (sample.std(ddof=1) - sd) / (sd / math.sqrt(2 * (m - 1)))


def test_a_given_noise_sd_is_honoured_when_the_cap_binds():
    res = pp.penalty_mcmc(X, "bernoulli-logit:a=1,b=1", epsilon=20.0, delta=1e-6, noise_sd=2.4,
                          max_iterations=300, seed=1)
    rel = res.release
    assert rel.iterations == 300
    assert rel.ratio_sd == pytest.approx(2.4, rel=1e-12)          # not lowered
    # the privacy is that of 300 iterations at sd 2.4: below the budget, and exact
    sens = 400 ** -0.5                                             # Delta = h = n^-1/2
    assert rel.sensitivity == pytest.approx(sens, rel=1e-12)
    want = gaussian_composition_epsilon(2.4, sens, 300, 1e-6, "tight")
    assert res.privacy.epsilon == pytest.approx(want, rel=1e-9) and want < 20.0
    assert rel.mu == pytest.approx(math.sqrt(300) * sens / 2.4, rel=1e-12)
    assert any("noise_sd=2.4 as given" in n and "less than the budget" in n
               for n in res.posterior.notes), res.posterior.notes
    assert res.iterations_allowed["tight"] > 300


def test_the_default_noise_is_lowered_only_with_a_note():
    res = pp.penalty_mcmc(X, "bernoulli-logit:a=1,b=1", epsilon=20.0, delta=1e-6,
                          max_iterations=300, seed=1)
    assert res.release.ratio_sd < 2.4
    assert res.privacy.epsilon == pytest.approx(20.0, rel=1e-6)     # the whole budget
    assert any("default noise_sd=2.4" in n and "lowered" in n for n in res.posterior.notes)


@pytest.mark.parametrize("variant,owners", [("general", None), ("general", 4),
                                            ("expfam", None), ("expfam", 4)])
def test_release_sd_and_ratio_sd_mean_one_thing_in_every_variant(variant, owners):
    noise = 1.7
    res = pp.penalty_mcmc(X, "bernoulli-logit:a=1,b=1", epsilon=40.0, delta=1e-6,
                          noise_sd=noise, max_iterations=3000, variant=variant, owners=owners,
                          seed=3)
    rel = res.release
    N = len(rel.owner_sizes)
    model = rel.model
    assert rel.ratio_sd == pytest.approx(noise, rel=1e-12)         # the argument, every variant
    idx = np.repeat(np.arange(N), rel.owner_sizes)
    if variant == "general":     # true per-owner partial ratios from the records
        truth = np.stack([np.bincount(idx, weights=model.loglik(p, X) - model.loglik(s, X),
                                      minlength=N)
                          for s, p in zip(rel.states[:-1], rel.proposals)])
        resid = rel.released - truth                               # (k, N)
        ratio_noise = resid.sum(axis=1)                            # noise on the log-ratio
    else:                        # true per-owner statistics S_i (phi(u) = u, S(y) = y)
        truth = np.bincount(idx, weights=X, minlength=N)
        resid = rel.released - truth[None, :]                      # (k, N)
        jump = model.expfam()[0](model.initial() + rel.h) - model.expfam()[0](model.initial())
        ratio_noise = float(jump[0]) * resid.sum(axis=1)           # largest box move
    assert abs(_z_sd(resid.ravel(), rel.release_sd)) < Z
    assert abs(_z_sd(ratio_noise, rel.ratio_sd)) < Z
    if N > 1 or variant == "expfam":      # wrong variant: the two sds differ here, and the
        assert abs(_z_sd(resid.ravel(), rel.ratio_sd)) > 3 * Z   # residuals tell them apart
    # the document stores both, and a ratio_sd that disagrees is refused
    doc = rel.to_dict()
    assert doc["release_sd"] == rel.release_sd and doc["ratio_sd"] == rel.ratio_sd
    again = P.PenaltyRelease.from_dict(doc)
    assert again.ratio_sd == rel.ratio_sd
    doc["ratio_sd"] = rel.ratio_sd * 1.5
    with pytest.raises(ReleaseError, match="ratio_sd"):
        P.PenaltyRelease.from_dict(doc)


def test_documents_written_before_store_release_sd_as_noise_sd():
    rel = pp.penalty_mcmc(X, "bernoulli-logit:a=1,b=1", epsilon=1.0, delta=1e-6, seed=2,
                          max_iterations=50).release
    doc = rel.to_dict()
    doc["noise_sd"] = doc.pop("release_sd")
    doc.pop("ratio_sd")
    assert P.PenaltyRelease.from_dict(doc).release_sd == rel.release_sd
    doc["release_sd"] = doc["noise_sd"]
    with pytest.raises(ReleaseError, match="exactly once"):
        P.PenaltyRelease.from_dict(doc)
