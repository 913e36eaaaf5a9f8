"""Covariate notes say what applies to the posterior (issue #23, Deliver 3 leftover).

LinearRegression's Bernoulli / categorical covariate probabilities are model parameters
(``q_x{j}``, ``pi_x{j}``) learned by a conjugate update given the covariates. Not every method
does that: gibbs-ss with released covariate moments (``covariate_moments="noisy"``) does not
use the model's covariate law at all (no ``q`` draws), and naive draws ``q`` from a plug-in of
the noisy column sum and a categorical column's probabilities from their prior. Each posterior
has exactly one ``"covariate model: "`` note, and no note claims a probability is learned when
the posterior has no draws of it or the method does not learn it. The wrong variant: the
model's own (default) note on the gibbs-ss posterior, which the detector flags.
"""

from __future__ import annotations

import re
import warnings

import numpy as np
import pytest

import privpost as pp
from _tolerance import K_MCSE
from privpost.inference._gibbs_regression import release_with_moments
from privpost.mechanisms import Laplace
from privpost.models import LinearRegression
from privpost.models.linear_regression import COVARIATE_NOTE, COVARIATE_UNUSED
from privpost.queries import RegressionStats


def _claims_learned(note: str, name: str) -> bool:
    """``note`` says parameter ``name`` is learned (not "NOT learned", not "not inferred")."""
    return re.search(rf"with {name} ~ [^;]*?(?<!NOT )learned", note) is not None


def _covariate_notes(post) -> list[str]:
    return [n for n in post.notes if n.startswith(COVARIATE_NOTE)]


def _records(n=200, seed=0):
    rng = np.random.default_rng(seed)
    x = np.column_stack([rng.random(n) < 0.2, rng.integers(0, 3, n)]).astype(float)
    y = 1.0 + x @ [0.5, -0.4] + rng.normal(0.0, 0.3, n)
    return np.column_stack([x, y])


QUERY = RegressionStats([(0, 1), (0, 2)], (-3, 4))


def _model(**kw):
    return LinearRegression(2, sigma2=0.09, covariates=["bernoulli", "categorical"],
                            covariate_bounds=[(0, 1), (0, 2)], **kw)


def _infer(*args, **kw):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return pp.infer(*args, **kw)


def test_gibbs_ss_with_released_moments_says_the_law_is_not_used():
    rs = release_with_moments(_records(), QUERY, 2.0, seed=1)
    m = _model()
    post = _infer(m, rs, method="gibbs-ss", draws=40, warmup=40, chains=2, seed=0)
    (note,) = _covariate_notes(post)
    assert note.startswith(COVARIATE_UNUSED + "gibbs-ss with covariate_moments='noisy'")
    assert note.endswith("q_x1, pi_x2 not inferred (no draws)")
    assert "q_x1" not in post.draws and "pi_x2" not in post.draws
    for n in post.notes:
        assert not _claims_learned(n, "q_x1") and not _claims_learned(n, "pi_x2"), n
    # wrong variant: the model's own note (what infer added before) claims what is not so
    assert _claims_learned(m.covariate_note(), "q_x1")
    assert _claims_learned(m.covariate_note(), "pi_x2")


def test_gibbs_ss_with_released_moments_and_the_default_normal_law():
    rs = release_with_moments(_records(), QUERY, 2.0, seed=1)
    post = _infer(LinearRegression(2, sigma2=0.09), rs, method="gibbs-ss", draws=40, warmup=40,
                  chains=2, seed=0)
    (note,) = _covariate_notes(post)
    assert note == (COVARIATE_UNUSED + "gibbs-ss with covariate_moments='noisy' (the "
                    "covariates' moments come from the CovariateMoments release): the model's "
                    "law (x ~ N_2(m, S), m = [0.0, 0.0], S = I) does not enter this posterior")
    # the law's mismatch with the bounds does not concern a posterior that ignores it, and no
    # advice to declare column types (they would change nothing here)
    assert not any("contradicts the release's bounds" in n for n in post.notes)
    assert "the default: no column types declared" not in note
    # with covariate_moments='prior' the fixed normal law is used: the model's note
    rel = rs.releases[0]
    post = _infer(LinearRegression(2, sigma2=0.09, m=[0.5, 1.0], S=[[1, 0], [0, 1]]), rel,
                  method="gibbs-ss", draws=40, warmup=40, chains=2, seed=0)
    (note,) = _covariate_notes(post)
    assert note.startswith(COVARIATE_NOTE + "x ~ N_2(m, S), m = [0.5, 1.0]")


def test_naive_says_how_it_draws_the_probabilities():
    rel = pp.release(_records(), query=QUERY, mechanism=Laplace(epsilon=2.0), seed=1)
    post = _infer(_model(), rel, method="naive", draws=40, chains=2, seed=0)
    (note,) = _covariate_notes(post)
    assert "q_x1 ~ Beta(1, 1) learned by the plug-in Beta(a + s, b + n - s)" in note
    assert "pi_x2 ~ Dirichlet(1 x 3) NOT learned: drawn from this prior" in note
    assert not _claims_learned(note, "pi_x2")
    assert {"q_x1", "pi_x2"} <= set(post.draws)


@pytest.mark.parametrize("covariates", [["bernoulli", "categorical"], ["bernoulli", "uniform"]])
def test_methods_that_learn_the_probabilities_say_so(covariates):
    m = LinearRegression(2, sigma2=0.09, covariates=covariates, covariate_bounds=[(0, 1), (0, 2)])
    x = _records()
    rel = pp.release(x, query=QUERY, mechanism=Laplace(epsilon=2.0), seed=1)
    post = _infer(m, rel, method="nonprivate", records=x, draws=100, chains=2, seed=0)
    (note,) = _covariate_notes(post)
    assert note == m.covariate_note()
    assert _claims_learned(note, "q_x1") and "q_x1" in post.draws
    # learned indeed: the conjugate update given the records, q_x1 ~ Beta(1 + s, 1 + n - s),
    # independent draws (closed-form mean and standard error; tests/_tolerance.py)
    s, n = x[:, 0].sum(), x.shape[0]
    mean = (1 + s) / (2 + n)
    se = np.sqrt(mean * (1 - mean) / (3 + n) / post.draws["q_x1"].size)
    assert abs(post.draws["q_x1"].mean() - mean) < K_MCSE * se
    # wrong variant: draws of the prior Beta(1, 1) (not learned) fail the same check
    prior = np.random.default_rng(1).beta(1, 1, size=post.draws["q_x1"].size)
    assert abs(prior.mean() - mean) > 2 * K_MCSE * se
