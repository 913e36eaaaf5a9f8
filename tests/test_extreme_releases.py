"""Inference on extreme but valid releases (issue #15): n = 1, epsilon from 1e-6 to 1e3,
observed values of +-1e12, all records clamped. Every method returns finite draws or a clear
PrivpostError; damcmc stays exact (Beta-Bernoulli against quadrature, with a wrong variant).
"""

from __future__ import annotations

import math
import warnings

import numpy as np
import pytest
from scipy import stats

import privpost as pp
from privpost.errors import PrivpostError
from privpost.inference import infer
from privpost.mechanisms import Gaussian, Laplace
from privpost.models import model_from_spec
from privpost.queries import Sum
from privpost.releases.release import Release

from _tolerance import K_MCSE

warnings.filterwarnings("ignore", category=FutureWarning)

A, B = 2.0, 3.0
MODEL = f"beta-bernoulli:a={A:g},b={B:g}"


def _release(n, eps, observed, gaussian=False):
    """A Sum(0, 1) release of n records, all 7.0 (every record clamped to 1); ``observed``
    replaces the noisy value when given (a valid document: any finite value is possible)."""
    mech = Gaussian(rho=eps * eps / 2) if gaussian else Laplace(epsilon=eps)
    rel = pp.release(np.full(n, 7.0), query=Sum((0.0, 1.0)), mechanism=mech, seed=n)
    if observed is None:
        return rel
    doc = rel.to_dict()
    doc["observed"] = [float(observed)]
    return Release.from_dict(doc)


@pytest.mark.parametrize("gaussian", [False, pytest.param(True, marks=pytest.mark.slow)])
@pytest.mark.parametrize("observed", [None, 1e12, -1e12])
@pytest.mark.parametrize("eps", [1e-6, 1.0, 1e3])
@pytest.mark.parametrize("n", [1, 5])
def test_every_method_gives_finite_draws_or_a_clear_refusal(n, eps, observed, gaussian):
    rel = _release(n, eps, observed, gaussian)
    model = model_from_spec(MODEL)
    for method, opts in (("damcmc", dict(draws=100, warmup=50, chains=2, cores=1)),
                         ("gibbs-ss", dict(draws=100, warmup=50, chains=2)),
                         ("naive", dict(draws=100, chains=2))):
        try:
            post = infer(model, rel, method=method, seed=1, progress=False, **opts)
        except PrivpostError as exc:
            assert str(exc)
            continue
        theta = np.asarray(post.draws["theta"])
        assert theta.shape == (2, 100) and np.all(np.isfinite(theta)), method
        assert np.all((theta >= 0) & (theta <= 1)), method


# ------------------------------------------------------------------------ exactness
def _quadrature(n, y, logpdf):
    """Posterior mean and sd of theta by quadrature over theta of
    Beta(theta; A, B) * sum_s Binom(s; n, theta) * eta(y - s)   (independent of privpost)."""
    th = np.linspace(1e-9, 1 - 1e-9, 40001)
    s = np.arange(n + 1)
    lw = np.array([logpdf(y - k) for k in s])
    lw -= lw.max()
    lik = (stats.binom.pmf(s[:, None], n, th[None, :]) * np.exp(lw)[:, None]).sum(axis=0)
    dens = stats.beta.pdf(th, A, B) * lik
    z = np.trapezoid(dens, th)
    mean = np.trapezoid(th * dens, th) / z
    sd = math.sqrt(np.trapezoid((th - mean) ** 2 * dens, th) / z)
    return mean, sd


def _laplace(b):
    return lambda z: -abs(z) / b


def _ess(x):
    import arviz as az

    return float(az.ess(np.atleast_2d(np.asarray(x, dtype=float)), method="mean"))


@pytest.mark.parametrize("n, eps, y", [
    (1, 1e-6, 0.3),        # noise dwarfs everything: the prior
    (1, 1e3, 1.0),         # noise negligible: Beta(A + 1, B)
    (3, 1.0, 1e12),        # impossible-looking but valid: weights e^{s/b}
    (3, 1.0, -1e12),
    (3, 1.0, 2.3),
])
def test_damcmc_is_exact_on_extreme_beta_bernoulli(n, eps, y):
    rel = _release(n, eps, y)
    b = rel.mechanism.scale
    post = infer(model_from_spec(MODEL), rel, method="damcmc", draws=3000, warmup=300,
                 chains=2, cores=1, seed=7, progress=False)
    theta = np.asarray(post.draws["theta"])
    mean, sd = _quadrature(n, y, _laplace(b))
    mcse = theta.std() / math.sqrt(_ess(theta))
    z = (theta.mean() - mean) / mcse
    assert abs(z) < K_MCSE, (z, theta.mean(), mean)
    assert abs(theta.std() - sd) < 0.1 * sd


def test_the_exactness_check_has_power():
    """Wrong variant: the same comparison against the quadrature of a wrong target (noise
    scale x3, and the noise ignored) must fail for the informative case."""
    n, y = 3, 2.3
    rel = _release(n, 1.0, y)
    b = rel.mechanism.scale
    post = infer(model_from_spec(MODEL), rel, method="damcmc", draws=3000, warmup=300,
                 chains=2, cores=1, seed=7, progress=False)
    theta = np.asarray(post.draws["theta"])
    mcse = theta.std() / math.sqrt(_ess(theta))
    wrong_scale, _ = _quadrature(n, y, _laplace(3 * b))
    no_noise = (A + y) / (A + B + n)                      # Beta(A + y, B + n - y) mean
    assert abs(theta.mean() - wrong_scale) / mcse > K_MCSE
    assert abs(theta.mean() - no_noise) / mcse > K_MCSE
