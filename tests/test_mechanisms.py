"""Tests of privpost.mechanisms and the exact integer samplers in privpost._samplers.

Statistical tests use fixed seeds; their tolerances come from the Monte Carlo error (KS and
chi-square p-values, 5 standard errors for moments). Each goodness-of-fit test has a negative
control showing it can fail.
"""

from __future__ import annotations

import json
import math
import warnings
from fractions import Fraction

import numpy as np
import pytest
from scipy import integrate, special, stats

from privpost import _samplers
from privpost.accounting import Privacy
from privpost.errors import PrivpostError, ReleaseError
from privpost.mechanisms import (
    MECHANISMS,
    DiscreteGaussian,
    DiscreteLaplace,
    Gaussian,
    Laplace,
    Mechanism,
    RandomizedResponse,
    analytic_gaussian_delta,
    discrete_gaussian_log_normaliser,
    mechanism_from_dict,
)

from _tolerance import K_MCSE, P_CHECK



# ---------------------------------------------------------------------------------------------
# helpers
# ---------------------------------------------------------------------------------------------

def _cdf_from_logpdf(mech, centre, half_width):
    """Numerical CDF of one coordinate from exp(logpdf), by cumulative trapezoid on a fine grid."""
    x = np.linspace(centre - half_width, centre + half_width, 400_001)
    dens = np.exp(mech.logpdf(x[:, None], np.array([centre])))
    cdf = integrate.cumulative_trapezoid(dens, x, initial=0.0)
    cdf /= cdf[-1]
    return lambda q: np.interp(q, x, cdf)


def _chisquare_vs_logpdf(mech, draws, centre=0):
    """Chi-square of integer draws against exp(logpdf) over a central range plus one tail bin."""
    n = draws.size
    z = np.arange(-400, 401)
    p = np.exp(mech.logpdf((centre + z)[:, None], np.array([centre])))
    keep = p * n >= 5
    zk, pk = z[keep], p[keep]
    counts = np.array([(draws == centre + k).sum() for k in zk])
    tail_p = 1.0 - pk.sum()
    tail_c = n - counts.sum()
    f_obs = np.append(counts, tail_c)
    f_exp = np.append(pk, tail_p) * n
    if tail_p * n < 5:  # merge a tiny tail into the largest bin to keep the test valid
        f_obs, f_exp = f_obs[:-1], f_exp[:-1]
        f_obs[np.argmax(f_exp)] += tail_c
        f_exp[np.argmax(f_exp)] += tail_p * n
    return stats.chisquare(f_obs, f_exp).pvalue


def _dg_moments(sigma):
    z = np.arange(-int(60 * sigma) - 20, int(60 * sigma) + 21, dtype=float)
    w = np.exp(-z * z / (2 * sigma * sigma))
    w /= w.sum()
    return float((w * z * z).sum()), float((w * z ** 4).sum())


def _dl_moments(t):
    z = np.arange(-int(80 * t) - 40, int(80 * t) + 41, dtype=float)
    w = np.exp(-np.abs(z) / t)
    w /= w.sum()
    return float((w * z * z).sum()), float((w * z ** 4).sum())


ALL_CALIBRATED = [
    Laplace(epsilon=0.8).calibrate(2.0),
    Laplace(scale=1.5).calibrate(1.0),
    Gaussian(rho=0.3).calibrate(1.5),
    Gaussian(epsilon=0.7, delta=1e-6).calibrate(1.0),
    Gaussian(scale=2.0).calibrate(1.0),
    Gaussian(scale=2.0, delta=1e-5).calibrate(1.0, neighbours="add-remove"),
    DiscreteLaplace(epsilon=0.5).calibrate(1),
    DiscreteLaplace(scale=2.5).calibrate(2),
    DiscreteGaussian(rho=0.2).calibrate(math.sqrt(2)),
    DiscreteGaussian(scale=0.6).calibrate(1),
    RandomizedResponse(epsilon=1.1, categories=4),
]


# ---------------------------------------------------------------------------------------------
# interface
# ---------------------------------------------------------------------------------------------

def test_registry_and_class_attributes():
    assert set(MECHANISMS) == {"laplace", "gaussian", "discrete_laplace", "discrete_gaussian",
                               "randomized_response"}
    expect = {
        "laplace": ("l1", False, "l1"),
        "gaussian": ("l2", False, "l2"),
        "discrete_laplace": ("l1", True, "l1"),
        "discrete_gaussian": ("l2", True, "l2"),
        "randomized_response": (None, True, None),
    }
    for name, cls in MECHANISMS.items():
        assert issubclass(cls, Mechanism)
        assert cls.name == name
        assert (cls.sensitivity_norm, cls.discrete, cls.kernel) == expect[name]


def test_calibration_values():
    m = Laplace(epsilon=0.5).calibrate(2.0)
    assert m.scale == 4.0 and m.sensitivity == 2.0
    assert m.privacy == Privacy.pure(0.5)
    m = Laplace(scale=2.0).calibrate(1.0)
    assert m.privacy.kind == "pure" and m.privacy.epsilon == 0.5
    g = Gaussian(rho=0.125).calibrate(1.0)
    assert g.scale == 2.0 and g.privacy == Privacy.zcdp(0.125)
    g = Gaussian(scale=2.0).calibrate(1.0)
    assert g.privacy == Privacy.zcdp(0.125)
    d = DiscreteLaplace(epsilon=0.25).calibrate(2)
    assert d.scale == 8.0 and d.privacy == Privacy.pure(0.25)
    d = DiscreteGaussian(rho=0.5).calibrate(1)
    assert d.scale == 1.0 and d.privacy == Privacy.zcdp(0.5)
    # neighbour relation is carried into the guarantee
    assert Laplace(epsilon=1.0).calibrate(1.0, neighbours="add-remove").privacy.neighbours == \
        "add-remove"
    # calibrate returns a new object, the original stays uncalibrated
    base = Laplace(epsilon=1.0)
    base.calibrate(3.0)
    assert base.scale is None and base.sensitivity is None


def test_scale_rounding_never_weakens_privacy():
    for eps in (0.1, 0.3, 0.7, 1.1, 3.3):
        for sens in (1.0, 0.3, 7.0):
            b = Laplace(epsilon=eps).calibrate(sens).scale
            assert Fraction(sens) / Fraction(b) <= Fraction(eps)
    for rho in (0.01, 0.3, 0.7, 2.2):
        for sens in (1.0, math.sqrt(2), 3.0):
            s = Gaussian(rho=rho).calibrate(sens).scale
            assert Fraction(sens) ** 2 <= 2 * Fraction(rho) * Fraction(s) ** 2
            assert s == pytest.approx(sens / math.sqrt(2 * rho), rel=1e-15)


# ---------------------------------------------------------------------------------------------
# continuous samplers vs logpdf (KS)
# ---------------------------------------------------------------------------------------------

@pytest.mark.parametrize("mech, half", [
    (Laplace(scale=1.3), 60.0),
    (Gaussian(scale=2.1), 30.0),
])
def test_seeded_continuous_samples_match_logpdf(mech, half):
    centre = 5.0
    # 100,000 draws: a 10% wrong scale moves the CDF by at most ~0.018 (Laplace), so the wrong
    # variant's KS statistic is ~5.5 / sqrt(n) -> p ~ 1e-26, below 1e-6 at any seed (at 20,000
    # draws it was ~2.5 / sqrt(n), p ~ 1e-5: seed offset 1 gave 6e-6)
    x = mech.sample(np.full(100_000, centre), seed=2024)
    cdf = _cdf_from_logpdf(mech, centre, half)
    assert stats.kstest(x, cdf).pvalue > P_CHECK
    # negative control: a 10% wrong scale is detected
    wrong = type(mech)(scale=mech.scale * 1.1)
    assert stats.kstest(x, _cdf_from_logpdf(wrong, centre, half)).pvalue < 1e-6


# ---------------------------------------------------------------------------------------------
# discrete samplers vs logpdf (chi-square)
# ---------------------------------------------------------------------------------------------

@pytest.mark.parametrize("mech", [
    DiscreteLaplace(scale=2.5),
    DiscreteLaplace(scale=0.4),
    DiscreteGaussian(scale=2.6),
    DiscreteGaussian(scale=0.6),
])
def test_seeded_discrete_samples_match_logpdf(mech):
    centre = 7
    x = mech.sample(np.full(20_000, centre), seed=99)
    assert x.dtype == np.float64 and np.all(x == np.round(x))
    assert _chisquare_vs_logpdf(mech, x.astype(np.int64), centre) > P_CHECK
    wrong = type(mech)(scale=mech.scale * 1.15)
    assert _chisquare_vs_logpdf(wrong, x.astype(np.int64), centre) < 1e-6


def test_discrete_gaussian_pmf_against_direct_sum():
    for sigma in (0.2, 0.7, 1.9, 2.0, 2.1, 5.3, 37.5, 400.0):
        m = DiscreteGaussian(scale=sigma)
        zmax = int(60 * sigma) + 10
        zz = np.arange(-zmax, zmax + 1, dtype=float)
        logz = special.logsumexp(-zz * zz / (2 * sigma * sigma))
        assert discrete_gaussian_log_normaliser(sigma) == pytest.approx(logz, rel=1e-13,
                                                                          abs=1e-13)
        z = np.arange(-int(5 * sigma) - 3, int(5 * sigma) + 4, dtype=float)
        expect = -z * z / (2 * sigma * sigma) - logz
        got = m.logpdf(z[:, None] + 3.0, np.array([3.0]))
        np.testing.assert_allclose(got, expect, rtol=1e-12, atol=1e-12)


# ---------------------------------------------------------------------------------------------
# exact samplers: secure path moments
# ---------------------------------------------------------------------------------------------

def _check_moments(x, var, m4):
    n = x.size
    assert np.issubdtype(x.dtype, np.integer)
    se_mean = math.sqrt(var / n)
    se_var = math.sqrt((m4 - var * var) / n)
    assert abs(x.mean()) < 5 * se_mean
    assert abs((x.astype(float) ** 2).mean() - var) < 5 * se_var


@pytest.mark.parametrize("t", [0.3, 1.7, 6.25])
def test_secure_discrete_laplace_moments(t):
    x = _samplers.sample_discrete_laplace(t, 3000, seed=None)
    q = math.exp(-1 / t)
    var = 2 * q / (1 - q) ** 2
    v2, m4 = _dl_moments(t)
    assert var == pytest.approx(v2, rel=1e-10)
    _check_moments(x, var, m4)


@pytest.mark.parametrize("sigma", [0.8, 2.3, 15.0])
def test_secure_discrete_gaussian_moments(sigma):
    x = _samplers.sample_discrete_gaussian(sigma, 3000, seed=None)
    var, m4 = _dg_moments(sigma)
    _check_moments(x, var, m4)


def test_secure_discrete_mechanisms_through_sample():
    m = DiscreteGaussian(rho=0.5).calibrate(3)  # sigma = 3
    x = m.sample(np.full(3000, 10.0))
    var, m4 = _dg_moments(m.scale)
    _check_moments((x - 10).astype(np.int64), var, m4)


def test_bernoulli_exp_frequencies():
    src = _samplers.NumpySource(np.random.default_rng(5))
    n = 20_000
    for g in (Fraction(0), Fraction(3, 10), Fraction(1), Fraction(17, 10), Fraction(5, 2)):
        k = sum(_samplers.bernoulli_exp(g, src) for _ in range(n))
        p = math.exp(-g)
        assert abs(k / n - p) <= 5 * math.sqrt(p * (1 - p) / n) + 1e-12


def test_numpy_source_large_bounds_uniform():
    src = _samplers.NumpySource(np.random.default_rng(1))
    n = 3 * 2 ** 70 + 1  # needs two 64-bit words
    draws = np.array([src.randbelow(n) / n for _ in range(4000)])
    assert draws.min() >= 0 and draws.max() < 1
    assert stats.kstest(draws, "uniform").pvalue > P_CHECK
    sec = _samplers.SecureSource()
    assert all(0 <= sec.randbelow(7) < 7 for _ in range(100))
    assert {sec.randbelow(3) for _ in range(200)} == {0, 1, 2}


# ---------------------------------------------------------------------------------------------
# secure continuous path (OpenDP)
# ---------------------------------------------------------------------------------------------

def test_secure_continuous_path_uses_opendp_and_has_right_moments():
    n = 4000
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)  # the fallback warns; OpenDP must work
        xl = Laplace(scale=1.5).sample(np.full(n, 3.0))
        xg = Gaussian(scale=0.7).sample(np.full(n, -2.0))
    b, s = 1.5, 0.7
    zl, zg = xl - 3.0, xg + 2.0
    assert abs(zl.mean()) < K_MCSE * math.sqrt(2 * b * b / n)
    assert abs((zl ** 2).mean() - 2 * b * b) < K_MCSE * math.sqrt(20 * b ** 4 / n)
    assert abs(zg.mean()) < K_MCSE * math.sqrt(s * s / n)
    assert abs((zg ** 2).mean() - s * s) < K_MCSE * math.sqrt(2 * s ** 4 / n)
    # two secure draws differ
    assert not np.array_equal(Laplace(scale=1.0).sample(np.zeros(5)),
                              Laplace(scale=1.0).sample(np.zeros(5)))


# ---------------------------------------------------------------------------------------------
# normalisation of logpdf
# ---------------------------------------------------------------------------------------------

@pytest.mark.parametrize("mech", [Laplace(scale=0.7), Gaussian(scale=1.9)])
def test_continuous_logpdf_integrates_to_one(mech):
    f = lambda x: math.exp(mech.logpdf(np.array([x]), np.array([0.4])))  # noqa: E731
    total = sum(integrate.quad(f, a, b, limit=200, epsabs=1e-13)[0]
                for a, b in [(-np.inf, 0.4), (0.4, np.inf)])
    assert total == pytest.approx(1.0, abs=1e-8)


@pytest.mark.parametrize("mech", [DiscreteLaplace(scale=0.3), DiscreteLaplace(scale=4.2),
                                  DiscreteGaussian(scale=0.3), DiscreteGaussian(scale=4.2),
                                  DiscreteGaussian(scale=1e-6)])
def test_discrete_logpdf_sums_to_one(mech):
    z = np.arange(-2000, 2001, dtype=float)[:, None]
    total = np.exp(mech.logpdf(z + 2.0, np.array([2.0]))).sum()
    assert total == pytest.approx(1.0, abs=1e-12)


def test_randomized_response_pmf_sums_to_one():
    m = RandomizedResponse(epsilon=0.9, categories=5)
    r = np.arange(5, dtype=float)
    for c in range(5):
        assert np.exp(m.logpdf(r[:, None], np.array([c]))).sum() == pytest.approx(1.0, abs=1e-14)


# ---------------------------------------------------------------------------------------------
# logpdf values, shapes, broadcasting
# ---------------------------------------------------------------------------------------------

def test_logpdf_values_and_broadcasting():
    lap = Laplace(scale=1.3)
    gau = Gaussian(scale=0.8)
    rng = np.random.default_rng(0)
    o = rng.normal(size=(4, 3))
    t = rng.normal(size=(3,))
    np.testing.assert_allclose(lap.logpdf(o, t), stats.laplace.logpdf(o, t, 1.3).sum(-1),
                               rtol=1e-13)
    np.testing.assert_allclose(gau.logpdf(o, t), stats.norm.logpdf(o, t, 0.8).sum(-1), rtol=1e-13)
    assert lap.logpdf(np.zeros((2, 5, 3)), np.zeros((5, 1))).shape == (2, 5)
    assert np.ndim(lap.logpdf(np.zeros(3), np.ones(3))) == 0
    dl = DiscreteLaplace(scale=2.0)
    z = np.arange(-5, 6)
    q = math.exp(-0.5)
    np.testing.assert_allclose(dl.logpdf(z[:, None], [0]),
                               np.log((1 - q) / (1 + q)) - np.abs(z) / 2.0, rtol=1e-13)
    # non-integer offsets are impossible under discrete noise
    assert dl.logpdf([0.5], [0]) == -np.inf
    assert DiscreteGaussian(scale=1.0).logpdf([1.0, 2.25], [0.0, 0.0]) == -np.inf


# ---------------------------------------------------------------------------------------------
# analytic Gaussian mechanism
# ---------------------------------------------------------------------------------------------

def _bw_delta(eps, sigma, sens):
    # independent implementation of Balle & Wang (2018) Thm 8 for the test
    a, b = sens / (2 * sigma), eps * sigma / sens
    return stats.norm.cdf(a - b) - math.exp(eps) * stats.norm.cdf(-a - b)


@pytest.mark.parametrize("eps, delta, sens", [
    (0.1, 1e-5, 1.0), (0.5, 1e-6, 2.0), (0.9, 1e-3, 0.3), (3.0, 1e-8, 1.0), (8.0, 1e-10, 5.0),
])
def test_analytic_gaussian_calibration(eps, delta, sens):
    m = Gaussian(epsilon=eps, delta=delta).calibrate(sens)
    sigma = m.scale
    got = _bw_delta(eps, sigma, sens)
    assert abs(got - delta) <= 1e-9
    assert abs(got - delta) <= 1e-6 * delta  # much tighter than the absolute target
    assert analytic_gaussian_delta(eps, sigma, sens) <= delta
    assert _bw_delta(eps, sigma * (1 - 1e-6), sens) > delta  # smallest such sigma
    if eps < 1:
        classical = sens * math.sqrt(2 * math.log(1.25 / delta)) / eps
        assert sigma < classical
    assert m.privacy == Privacy.approx(eps, delta)


def test_gaussian_scale_and_delta_reports_analytic_epsilon():
    m = Gaussian(scale=3.0, delta=1e-5).calibrate(2.0)
    p = m.privacy
    assert p.kind == "approx" and p.delta == 1e-5
    assert abs(_bw_delta(p.epsilon, 3.0, 2.0) - 1e-5) <= 1e-9
    assert m.rho == pytest.approx(4.0 / 18.0)


def test_gaussian_renyi_divergence_matches_rho():
    # zCDP claim: D_alpha(N(0, s^2) || N(D, s^2)) = alpha D^2/(2 s^2) <= rho alpha
    m = Gaussian(rho=0.4).calibrate(1.5)
    s = m.scale
    for alpha in (1.5, 2.0, 5.0):
        f = lambda x: math.exp(alpha * stats.norm.logpdf(x, 0, s)  # noqa: E731
                               + (1 - alpha) * stats.norm.logpdf(x, 1.5, s))
        d = math.log(integrate.quad(f, -60, 60, limit=200)[0]) / (alpha - 1)
        assert d <= 0.4 * alpha * (1 + 1e-7)
        assert d == pytest.approx(0.4 * alpha, rel=1e-6)


def test_discrete_gaussian_renyi_divergence_within_rho():
    # CKS 2020: for integer shifts D_alpha(N_Z(0, s^2) || N_Z(mu, s^2)) <= alpha mu^2/(2 s^2)
    m = DiscreteGaussian(rho=0.3).calibrate(2)
    s = m.scale
    z = np.arange(-400, 401, dtype=float)
    for alpha in (1.5, 3.0, 10.0):
        lp = m.logpdf(z[:, None], [0.0])
        lq = m.logpdf(z[:, None], [2.0])
        d = special.logsumexp(alpha * lp + (1 - alpha) * lq) / (alpha - 1)
        assert d <= 0.3 * alpha * (1 + 1e-9)
        assert d == pytest.approx(alpha * 4 / (2 * s * s), rel=1e-9)


# ---------------------------------------------------------------------------------------------
# privacy loss ratio
# ---------------------------------------------------------------------------------------------

def test_laplace_privacy_loss_bounded_and_attained():
    eps, sens = 0.8, 2.0
    m = Laplace(epsilon=eps).calibrate(sens)
    g = np.linspace(-10, 10, 161)
    o = np.stack(np.meshgrid(g, g), -1).reshape(-1, 2)
    v, v2 = np.array([0.0, 0.0]), np.array([1.5, -0.5])  # ||v - v'||_1 = 2 = sensitivity
    loss = np.abs(m.logpdf(o, v) - m.logpdf(o, v2))
    assert loss.max() <= eps + 1e-12
    assert loss.max() >= eps - 1e-12


def test_discrete_laplace_privacy_loss_bounded_and_attained():
    eps, sens = 0.6, 2
    m = DiscreteLaplace(epsilon=eps).calibrate(sens)
    g = np.arange(-12, 13, dtype=float)
    o = np.stack(np.meshgrid(g, g), -1).reshape(-1, 2)
    v, v2 = np.array([0.0, 0.0]), np.array([1.0, -1.0])
    loss = np.abs(m.logpdf(o, v) - m.logpdf(o, v2))
    assert loss.max() <= eps + 1e-12
    assert loss.max() >= eps - 1e-12


def test_randomized_response_log_ratio_bound():
    eps, k = 1.3, 4
    m = RandomizedResponse(epsilon=eps, categories=k)
    r, c, c2 = np.meshgrid(np.arange(k), np.arange(k), np.arange(k), indexing="ij")
    loss = np.abs(m.logpdf(r[..., None], c[..., None]) - m.logpdf(r[..., None], c2[..., None]))
    assert loss.max() <= eps + 1e-12
    assert loss.max() >= eps - 1e-12
    assert m.log_keep == pytest.approx(math.log(math.exp(eps) / (math.exp(eps) + k - 1)))


@pytest.mark.parametrize("seed", [7, None])
def test_randomized_response_sampling(seed):
    eps, k = 0.8, 3
    m = RandomizedResponse(epsilon=eps, categories=k)
    n = 20_000 if seed is not None else 3000
    true = np.full(n, 1)
    rep = m.sample(true, seed=seed)
    assert rep.shape == (n,) and set(np.unique(rep)) <= {0.0, 1.0, 2.0}
    counts = np.array([(rep == j).sum() for j in range(k)])
    probs = np.exp(m.logpdf(np.arange(k)[:, None], np.array([1])))
    assert stats.chisquare(counts, probs * n).pvalue > P_CHECK
    if seed is not None:
        wrong = np.exp(RandomizedResponse(epsilon=eps * 1.15, categories=k).logpdf(
            np.arange(k)[:, None], np.array([1])))
        assert stats.chisquare(counts, wrong * n).pvalue < 1e-6


# ---------------------------------------------------------------------------------------------
# serialisation, reproducibility
# ---------------------------------------------------------------------------------------------

@pytest.mark.parametrize("mech", ALL_CALIBRATED + [Laplace(epsilon=1.0), Gaussian(rho=0.1),
                                                   Gaussian(scale=1.0, delta=1e-6),
                                                   DiscreteGaussian(scale=2.0)])
def test_dict_round_trip(mech):
    d = json.loads(json.dumps(mech.to_dict()))
    back = mechanism_from_dict(d)
    assert type(back) is type(mech)
    assert back.to_dict() == mech.to_dict()
    assert back.scale == mech.scale and back.sensitivity == mech.sensitivity
    if back.calibrated:
        assert back.privacy == mech.privacy


def test_from_dict_validation():
    good = Laplace(epsilon=1.0).calibrate(2.0).to_dict()
    bad = dict(good, scale=2.5)
    with pytest.raises(ReleaseError, match="scale"):
        mechanism_from_dict(bad)
    with pytest.raises(ReleaseError, match="unknown"):
        mechanism_from_dict(dict(good, colour="red"))
    with pytest.raises(ReleaseError, match="type"):
        mechanism_from_dict(dict(good, type="cauchy"))
    with pytest.raises(ReleaseError, match="type"):
        mechanism_from_dict({"epsilon": 1.0})
    with pytest.raises(ReleaseError, match="epsilon"):
        mechanism_from_dict({"type": "laplace", "epsilon": -1.0, "sensitivity": 1.0})
    g = Gaussian(epsilon=0.5, delta=1e-6).calibrate(1.0).to_dict()
    with pytest.raises(ReleaseError):
        mechanism_from_dict(dict(g, scale=g["scale"] * 0.9))
    # a hand-written document without the parameterisation key
    m = mechanism_from_dict({"type": "discrete_laplace", "epsilon": 0.5, "sensitivity": 1})
    assert m.scale == 2.0 and m.privacy == Privacy.pure(0.5)
    m = mechanism_from_dict({"type": "gaussian", "scale": 2.0, "sensitivity": 1.0})
    assert m.privacy == Privacy.zcdp(0.125)
    assert isinstance(ReleaseError("a", "b"), ValueError)


@pytest.mark.parametrize("mech", ALL_CALIBRATED)
def test_seeded_sampling_is_reproducible(mech):
    if isinstance(mech, RandomizedResponse):
        value = np.array([0, 1, 2, 3, 0, 1, 2, 3] * 4)
    else:
        value = np.arange(32, dtype=float)
    a = mech.sample(value, seed=11)
    b = mech.sample(value, seed=11)
    c = mech.sample(value, seed=np.random.default_rng(11))
    d = mech.sample(value, seed=12)
    assert a.shape == value.shape and a.dtype == np.float64
    np.testing.assert_array_equal(a, b)
    np.testing.assert_array_equal(a, c)
    assert not np.array_equal(a, d)


# ---------------------------------------------------------------------------------------------
# argument validation
# ---------------------------------------------------------------------------------------------

@pytest.mark.parametrize("make", [
    lambda: Laplace(),
    lambda: Laplace(epsilon=1.0, scale=1.0),
    lambda: Laplace(epsilon=float("inf")),
    lambda: Laplace(epsilon=0.0),
    lambda: Laplace(epsilon=-1.0),
    lambda: Laplace(epsilon=float("nan")),
    lambda: Laplace(epsilon="1"),
    lambda: Laplace(epsilon=True),
    lambda: Laplace(scale=0.0),
    lambda: Gaussian(epsilon=1.0),
    lambda: Gaussian(delta=1e-5),
    lambda: Gaussian(epsilon=1.0, delta=0.0),
    lambda: Gaussian(epsilon=1.0, delta=1.0),
    lambda: Gaussian(rho=0.5, epsilon=1.0, delta=1e-5),
    lambda: Gaussian(rho=float("inf")),
    lambda: Gaussian(rho=0.5, scale=1.0),
    lambda: DiscreteLaplace(epsilon=float("inf")),
    lambda: DiscreteGaussian(rho=-0.1),
    lambda: RandomizedResponse(epsilon=1.0, categories=1),
    lambda: RandomizedResponse(epsilon=1.0, categories=2.5),
    lambda: RandomizedResponse(epsilon=float("inf"), categories=3),
    lambda: RandomizedResponse(epsilon=1.0),
])
def test_constructor_errors(make):
    with pytest.raises(ValueError):
        make()


def test_error_messages_are_clear():
    with pytest.raises(PrivpostError, match="epsilon must be finite and > 0"):
        Laplace(epsilon=float("inf"))
    with pytest.raises(PrivpostError, match=r"delta must be in \(0, 1\)"):
        Gaussian(epsilon=1.0, delta=2.0)
    with pytest.raises(PrivpostError, match="parameterisation"):
        Gaussian(epsilon=1.0)


def test_calibrate_and_use_errors():
    for bad in (0.0, -1.0, float("nan"), float("inf"), "1", None):
        with pytest.raises(ValueError):
            Laplace(epsilon=1.0).calibrate(bad)
    with pytest.raises(PrivpostError, match="integer"):
        DiscreteLaplace(epsilon=1.0).calibrate(1.5)
    with pytest.raises(PrivpostError, match="integer"):
        DiscreteGaussian(rho=1.0).calibrate(1.5)
    assert DiscreteGaussian(rho=1.0).calibrate(math.sqrt(2)).privacy == Privacy.zcdp(1.0)
    assert DiscreteLaplace(epsilon=1.0).calibrate(2.0).sensitivity == 2.0
    with pytest.raises(PrivpostError, match="not calibrated"):
        Laplace(epsilon=1.0).privacy
    with pytest.raises(PrivpostError, match="not calibrated"):
        Laplace(scale=1.0).privacy
    with pytest.raises(PrivpostError, match="calibrate"):
        Gaussian(rho=1.0).sample([1.0, 2.0], seed=0)
    with pytest.raises(PrivpostError, match="calibrate"):
        Gaussian(rho=1.0).logpdf([1.0], [1.0])
    with pytest.raises(PrivpostError, match="integer"):
        DiscreteLaplace(epsilon=1.0).calibrate(1).sample([1.5, 2.0], seed=0)
    with pytest.raises(PrivpostError, match="integer"):
        DiscreteGaussian(scale=1.0).sample([0.25])
    with pytest.raises(PrivpostError, match="finite"):
        Laplace(scale=1.0).sample([np.nan], seed=0)
    with pytest.raises(PrivpostError, match="neighbours"):
        Laplace(epsilon=1.0).calibrate(1.0, neighbours="swap")
    rr = RandomizedResponse(epsilon=1.0, categories=3)
    with pytest.raises(PrivpostError):
        rr.calibrate(2.0)
    assert rr.calibrate(None) == rr and rr.calibrate(1) == rr
    with pytest.raises(PrivpostError, match="categories"):
        rr.sample([0, 3], seed=0)
    with pytest.raises(PrivpostError, match="categories"):
        rr.sample([0.5], seed=0)
    # a scale-built mechanism can add noise before calibration (its privacy is then unknown)
    assert Laplace(scale=1e-9).sample([1.0, 2.0], seed=0) == pytest.approx([1.0, 2.0], abs=1e-6)


# ---------------------------------------------------------------------------------------------
# audit additions: sampling safety, OpenDP scale meaning, exact privacy checks
# ---------------------------------------------------------------------------------------------

def test_opendp_scale_has_our_meaning():
    """OpenDP's own privacy map confirms its ``scale`` is our Laplace b (ε = Δ/b) and our
    Gaussian σ (ρ = Δ²/(2σ²)), so the noise OpenDP adds is the noise we account for."""
    from privpost.mechanisms import _opendp_measurement

    for b, sens in ((2.0, 1.0), (0.7, 3.0)):
        assert _opendp_measurement("laplace", b).map(sens) == pytest.approx(sens / b, rel=1e-12)
    for s, sens in ((2.0, 1.0), (0.9, math.sqrt(2))):
        assert _opendp_measurement("gaussian", s).map(sens) == pytest.approx(
            sens ** 2 / (2 * s * s), rel=1e-12)


def test_secure_path_never_uses_numpy_generators(monkeypatch):
    """seed=None (real releases) must not touch NumPy's generators: continuous noise comes from
    OpenDP, discrete noise and randomized response from the OS CSPRNG."""
    import privpost._rng as rng_mod

    def forbidden(*args, **kwargs):
        raise AssertionError("a NumPy generator was used on the seed=None path")

    monkeypatch.setattr(np.random, "default_rng", forbidden)
    monkeypatch.setattr(rng_mod, "as_generator", forbidden)
    monkeypatch.setattr(np.random, "Generator", forbidden)
    for mech in ALL_CALIBRATED:
        value = np.array([0, 1, 2, 3]) if isinstance(mech, RandomizedResponse) else \
            np.arange(4, dtype=float)
        out = mech.sample(value)
        assert out.shape == value.shape and np.all(np.isfinite(out))


def test_secure_continuous_path_has_no_numpy_fallback(monkeypatch):
    """If OpenDP fails, a release must fail rather than fall back to floating-point NumPy noise."""
    import privpost.mechanisms as mm

    def broken(kind, scale):
        raise RuntimeError("opendp unavailable")

    monkeypatch.setattr(mm, "_opendp_measurement", broken)
    monkeypatch.setattr(np.random, "default_rng", lambda *a, **k: pytest.fail("NumPy fallback"))
    with pytest.raises(PrivpostError, match="OpenDP"):
        Laplace(scale=1.0).sample([0.0])
    with pytest.raises(PrivpostError, match="OpenDP"):
        Gaussian(scale=1.0).sample([0.0])


def _mp_bw_delta(eps, sigma, sens):
    """Balle & Wang's exact δ(ε, σ) in 60-digit arithmetic: ∫ max(0, p − e^ε q) of
    N(0, σ²) vs N(Δ, σ²), written through Φ (independent of double-precision rounding)."""
    mp = pytest.importorskip("mpmath")
    mp.mp.dps = 60
    eps, sigma, sens = mp.mpf(eps), mp.mpf(sigma), mp.mpf(sens)
    a, b = sens / (2 * sigma), eps * sigma / sens
    return mp.ncdf(a - b) - mp.e ** eps * mp.ncdf(-a - b)


def test_balle_wang_formula_is_the_hockey_stick_divergence():
    """The closed form equals the brute-force hockey-stick divergence ∫ max(0, p − e^ε q)."""
    for eps, sigma, sens in ((0.5, 1.3, 1.0), (2.0, 0.6, 1.5), (0.05, 4.0, 2.0)):
        p = lambda x: stats.norm.pdf(x, 0.0, sigma)          # noqa: E731
        q = lambda x: stats.norm.pdf(x, sens, sigma)         # noqa: E731
        # p > e^ε q exactly for x < x* (log-likelihood ratio is linear in x)
        xstar = sens / 2 - eps * sigma * sigma / sens
        hs = integrate.quad(lambda x: p(x) - math.exp(eps) * q(x), -np.inf, xstar,
                            epsabs=1e-14, epsrel=1e-12)[0]
        assert analytic_gaussian_delta(eps, sigma, sens) == pytest.approx(hs, rel=1e-8, abs=1e-14)


@pytest.mark.parametrize("eps, delta, sens", [
    (0.1, 1e-5, 1.0), (3.0, 1e-8, 1.0), (8.0, 1e-10, 5.0), (0.01, 1e-12, 1.0), (1e-4, 1e-12, 1.0),
    (50.0, 1e-15, 1.0),
])
def test_analytic_gaussian_calibration_is_certified(eps, delta, sens):
    """The exact δ (high precision) at the calibrated σ never exceeds the target δ, including
    where double-precision cancellation would otherwise overshoot it."""
    sigma = Gaussian(epsilon=eps, delta=delta).calibrate(sens).scale
    assert _mp_bw_delta(eps, sigma, sens) <= delta
    assert float(_mp_bw_delta(eps, sigma, sens)) == pytest.approx(delta, rel=1e-6)
    reported = Gaussian(scale=sigma, delta=delta).calibrate(sens).privacy.epsilon
    assert _mp_bw_delta(reported, sigma, sens) <= delta
    assert reported == pytest.approx(eps, rel=1e-6)


def test_discrete_gaussian_multidimensional_renyi_divergence():
    """CKS 2020 multivariate statement: for an integer shift vector μ with ||μ||₂ = Δ the Rényi
    divergence of independent discrete Gaussians is α ||μ||²/(2σ²) ≤ ρα (exact sums)."""
    for shift in ([1.0, -1.0], [2.0, 1.0, 0.0], [1.0, 1.0, 1.0]):
        mu = np.array(shift)
        sens = math.sqrt(float(mu @ mu))
        m = DiscreteGaussian(rho=0.35).calibrate(sens)
        z = np.arange(-300, 301, dtype=float)
        for alpha in (1.5, 4.0):
            total = 0.0
            for mj in mu:          # independent coordinates: divergences add
                lp = m.logpdf(z[:, None], [0.0])
                lq = m.logpdf(z[:, None], [mj])
                total += special.logsumexp(alpha * lp + (1 - alpha) * lq) / (alpha - 1)
            assert total <= 0.35 * alpha * (1 + 1e-9)
            assert total == pytest.approx(alpha * sens ** 2 / (2 * m.scale ** 2), rel=1e-9)


def test_discrete_laplace_epsilon_is_sensitivity_over_scale():
    """ε = Δ/t for the pmf ∝ exp(−|z|/t): the log pmf ratio of integer shifts is ≤ ||shift||₁/t,
    attained (exact values, multi-dimensional)."""
    m = DiscreteLaplace(scale=2.5).calibrate(3)
    eps = m.privacy.epsilon
    assert Fraction(eps) >= Fraction(3) / Fraction(2.5) and eps == pytest.approx(1.2, rel=1e-15)
    g = np.arange(-10, 11, dtype=float)
    o = np.stack(np.meshgrid(g, g), -1).reshape(-1, 2)
    loss = np.abs(m.logpdf(o, [0.0, 0.0]) - m.logpdf(o, [2.0, -1.0]))   # ||shift||_1 = 3
    assert loss.max() == pytest.approx(3 / 2.5, rel=1e-12)


def test_discrete_release_is_exact_integer_arithmetic():
    m = DiscreteLaplace(scale=1.0).calibrate(1)
    big = 2.0 ** 53
    with pytest.raises(PrivpostError, match="2\\*\\*53"):
        for seed in range(50):           # some draw is nonzero and pushes past 2**53
            m.sample([big], seed=seed)
    out = m.sample([2.0 ** 52 + 1], seed=3)
    assert out[0] == np.round(out[0])


def test_randomized_response_is_replace_one_only():
    rr = RandomizedResponse(epsilon=1.0, categories=3)
    with pytest.raises(PrivpostError, match="replace-one"):
        rr.calibrate(None, neighbours="add-remove")
    assert rr.calibrate(None).privacy == Privacy.pure(1.0)
