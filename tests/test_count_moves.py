"""Tests of the exact pair move of count-level DA-MCMC (privpost.inference._count_moves; issue 21).

The move draws i.i.d. from a discrete law, so its draws are compared with the exact pmf by a
chi-square goodness-of-fit test (cells merged to expected counts >= 20) whose p-value must exceed
1e-4 (a false failure at 1 seed in 10^4); the reference pmf is computed independently of the
move's code, from the mechanisms' own ``logpdf`` and scipy's ``gammaln``. Each check has a
wrong variant (the multinomial coefficient's ``lgamma`` terms dropped, or a wrong noise scale)
that must be rejected at p < 1e-10.
"""

from __future__ import annotations

import math

import mpmath
import numpy as np
import pytest
from scipy import special, stats

from privpost.inference import _count_moves as cm
from privpost.inference._kernels import weights_for
from privpost.mechanisms import DiscreteGaussian, DiscreteLaplace, Gaussian, Laplace

P_OK = 1e-4
P_WRONG = 1e-10

MECHS = {
    "laplace": lambda: Laplace(scale=2.5),
    "discrete_laplace": lambda: DiscreteLaplace(scale=2.5),
    "gaussian": lambda: Gaussian(scale=3.0),
    "discrete_gaussian": lambda: DiscreteGaussian(scale=3.0),
}


def _calibrated(name):
    return MECHS[name]().calibrate(1.0)


def reference_logf(ks, ci, cj, log_pi, log_pj, s, T, v, mechs, *, drop_lgamma=False):
    """Independent unnormalised log f(k): Multinomial(c_i + k, c_j - k | p) times the
    mechanisms' densities of ``s_m`` at ``T_m + k v_m`` (``T = A c`` now)."""
    ks = np.asarray(ks, dtype=float)
    out = (ci + ks) * log_pi + (cj - ks) * log_pj
    if not drop_lgamma:
        out = out - special.gammaln(ci + ks + 1) - special.gammaln(cj - ks + 1)
    for s_m, T_m, v_m, mech in zip(s, T, v, mechs):
        out = out + mech.logpdf(np.array([s_m]), (T_m + ks * v_m)[:, None])
    return out


def _args(s, T, v, mechs):
    r = np.asarray(s, float) - np.asarray(T, float)
    v = np.asarray(v, float)
    w = np.array([weights_for(mc.kernel, mc.scale, 1)[0] for mc in mechs])
    l2 = np.array([mc.kernel == "l2" for mc in mechs])
    return r, v, w, l2


def chisq_p(draws, ks, logf) -> float:
    """p-value of the chi-square test of the draws against the pmf ``exp(logf)`` on ``ks`` (cells
    merged left to right until each expects >= 20 draws; the support's ends absorb the rest)."""
    p = np.exp(logf - logf.max())
    p /= p.sum()
    n = draws.size
    ks = np.asarray(ks)
    idx = (draws - ks[0]).astype(np.int64)
    assert idx.min() >= 0 and idx.max() < ks.size, "a draw fell outside the support"
    counts = np.bincount(idx, minlength=ks.size).astype(float)
    obs, exp_ = [], []
    co = ce = 0.0
    for c, e in zip(counts, p * n):
        co += c
        ce += e
        if ce >= 20:
            obs.append(co)
            exp_.append(ce)
            co = ce = 0.0
    obs[-1] += co
    exp_[-1] += ce
    obs, exp_ = np.array(obs), np.array(exp_)
    chi = ((obs - exp_) ** 2 / exp_).sum()
    return float(stats.chi2.sf(chi, len(obs) - 1))


@pytest.mark.parametrize("cells", [(6, 9), (1, 1), (16, 19)])
@pytest.mark.parametrize("mech", list(MECHS))
def test_pair_move_matches_enumeration_every_kernel(mech, cells):
    """Ranges of 16 and 3 points (drawn by enumeration, ``cm.ENUM_MAX``) and of 36 points (mode
    search and rejection from the hat)."""
    mc = _calibrated(mech)
    ci, cj = cells
    assert (ci + cj + 1 <= cm.ENUM_MAX) == (cells != (16, 19))
    pi, pj = 0.3, 0.2
    s = [4.7 if not mc.discrete else 5.0]
    T = [ci]          # coordinate m counts cell i: A[m, i] = 1, A[m, j] = 0
    v = [1.0]
    r, v_, w, l2 = _args(s, T, v, [mc])
    rng = np.random.default_rng(101)
    draws = cm.sample_many(40000, float(ci), float(cj), math.log(pi / pj), r, v_, w, l2, rng)
    ks = np.arange(-ci, cj + 1)
    good = reference_logf(ks, ci, cj, math.log(pi), math.log(pj), s, T, v, [mc])
    assert chisq_p(draws, ks, good) > P_OK
    wrong = reference_logf(ks, ci, cj, math.log(pi), math.log(pj), s, T, v, [mc],
                           drop_lgamma=True)
    assert chisq_p(draws, ks, wrong) < P_WRONG


def test_pair_move_several_coordinates_mixed_kernels():
    """Three released coordinates (a ReleaseSet's stacked rows): cell i counted with coefficient
    1 in one and 2 in another, cell j in the third; Laplace and Gaussian rows together."""
    mechs = [_calibrated("laplace"), _calibrated("gaussian"), _calibrated("discrete_gaussian")]
    ci, cj = 12, 7
    s, T, v = [13.2, 20.5, 4.0], [12.0, 24.0, 7.0], [1.0, 2.0, -1.0]
    r, v_, w, l2 = _args(s, T, v, mechs)
    rng = np.random.default_rng(7)
    draws = cm.sample_many(40000, float(ci), float(cj), math.log(0.4 / 0.6), r, v_, w, l2, rng)
    ks = np.arange(-ci, cj + 1)
    good = reference_logf(ks, ci, cj, math.log(0.4), math.log(0.6), s, T, v, mechs)
    assert chisq_p(draws, ks, good) > P_OK
    # wrong variant: the Gaussian row's scale doubled in the reference
    wrong_mechs = [mechs[0], Gaussian(scale=6.0).calibrate(1.0), mechs[2]]
    wrong = reference_logf(ks, ci, cj, math.log(0.4), math.log(0.6), s, T, v, wrong_mechs)
    assert chisq_p(draws, ks, wrong) < P_WRONG


@pytest.mark.parametrize("side", ["hi", "lo"])
def test_pair_move_boundary_mode(side):
    """Mode at an end of the range (c_j = 0 units left to move / all in one cell): the flat part
    of the hat meets the boundary and only one tail exists."""
    mc = _calibrated("discrete_laplace")
    ci, cj = 3, 40
    pi, pj = (0.99, 0.01) if side == "hi" else (0.01, 0.99)
    s = [60.0] if side == "hi" else [-5.0]
    T, v = [ci], [1.0]
    r, v_, w, l2 = _args(s, T, v, [mc])
    draws = cm.sample_many(30000, float(ci), float(cj), math.log(pi / pj), r, v_, w, l2,
                           np.random.default_rng(3))
    ks = np.arange(-ci, cj + 1)
    good = reference_logf(ks, ci, cj, math.log(pi), math.log(pj), s, T, v, [mc])
    mode = ks[np.argmax(good)]
    assert mode == (cj if side == "hi" else -ci)
    assert chisq_p(draws, ks, good) > P_OK
    wrong = reference_logf(ks, ci, cj, math.log(pi), math.log(pj), s, T, v, [mc],
                           drop_lgamma=True)
    assert chisq_p(draws, ks, wrong) < P_WRONG


def test_pair_move_empty_range_and_zero_cells():
    r, v, w, l2 = _args([1.0], [0.0], [1.0], [_calibrated("gaussian")])
    rng = np.random.default_rng(0)
    assert cm.pair_move(0.0, 0.0, 0.3, r, v, w, l2, 1, rng) == 0.0
    # c_i = 0: k in [0, c_j]
    d = cm.sample_many(2000, 0.0, 5.0, 0.0, r, v, w, l2, rng)
    assert d.min() >= 0 and d.max() <= 5


def test_lgamma_difference_at_census_scale():
    """The cancellation-free lgamma difference against 50-digit mpmath at a ~ 1e9."""
    mpmath.mp.dps = 50
    for a, d in [(1e9 + 1, 37.0), (3e8 + 1, -12345.0), (2e4, 9000.0), (5e9, 1.0),
                 (12.0, 5.0), (1e9, -999999.0)]:
        ref = float(mpmath.loggamma(mpmath.mpf(a) + d) - mpmath.loggamma(mpmath.mpf(a)))
        got = cm._lgamma_diff(a, d)
        assert abs(got - ref) <= 1e-9 * max(1.0, abs(ref)), (a, d, got, ref)


@pytest.mark.parametrize("mech", ["gaussian", "discrete_laplace"])
def test_pair_move_huge_range(mech):
    """c ~ 1e9 in each cell: k ranges over 2.1e9 values. The prior part (sd ~ 2.3e4) and the noise
    (scale 2e4) pull apart by 2e4 and the draws must fit their compromise. The pmf is enumerated
    on a window around the draws whose ends are >= 8 nats below the mode (log-concavity bounds
    everything outside by geometric tails); the reference uses scipy's gammaln (absolute error
    ~ 1e-6 at 1e9), independent of the move's Stirling differences. Wrong variant: the binomial
    coefficient dropped."""
    mc = type(MECHS[mech]())(scale=2.0e4).calibrate(1.0)
    ci, cj = 1.2e9, 0.9e9
    pi = (ci - 2.0e4) / (ci + cj)
    pj = 1.0 - pi
    s, T, v = [ci + 2.0e4], [ci], [1.0]
    r, v_, w, l2 = _args(s, T, v, [mc])
    draws = cm.sample_many(30000, ci, cj, math.log(pi / pj), r, v_, w, l2,
                           np.random.default_rng(11))
    lo, hi = int(draws.min()) - 30000, int(draws.max()) + 30000
    ks = np.arange(lo, hi + 1)
    logf = reference_logf(ks, ci, cj, math.log(pi), math.log(pj), s, T, v, [mc])
    assert logf[0] < logf.max() - 8 and logf[-1] < logf.max() - 8   # window holds the mass
    assert chisq_p(draws, ks, logf) > P_OK
    wrong = reference_logf(ks, ci, cj, math.log(pi), math.log(pj), s, T, v, [mc],
                           drop_lgamma=True)
    assert chisq_p(draws, ks, wrong) < P_WRONG


def test_pair_move_is_reproducible_from_the_generator():
    r, v, w, l2 = _args([3.0], [2.0], [1.0], [_calibrated("gaussian")])
    a = cm.sample_many(100, 10.0, 10.0, 0.1, r, v, w, l2, np.random.default_rng(5))
    b = cm.sample_many(100, 10.0, 10.0, 0.1, r, v, w, l2, np.random.default_rng(5))
    assert np.array_equal(a, b)


def test_forward_difference_and_relative_log_f_agree_with_log_f():
    mechs = [_calibrated("laplace"), _calibrated("gaussian")]
    r, v, w, l2 = _args([3.3, -1.0], [1.0, 2.0], [1.0, -2.0], mechs)
    for k in range(-10, 14):
        d = cm.forward_diff(float(k), 10.0, 14.0, 0.2, r, v, w, l2, 2)
        ref = (cm.log_f(k + 1.0, 10.0, 14.0, 0.2, r, v, w, l2, 2)
               - cm.log_f(float(k), 10.0, 14.0, 0.2, r, v, w, l2, 2))
        assert abs(d - ref) < 1e-9
        rel = cm.log_f_rel(float(k), 3.0, 10.0, 14.0, 0.2, r, v, w, l2, 2)
        ref = (cm.log_f(float(k), 10.0, 14.0, 0.2, r, v, w, l2, 2)
               - cm.log_f(3.0, 10.0, 14.0, 0.2, r, v, w, l2, 2))
        assert abs(rel - ref) < 1e-9
