"""Accounting for k adaptive Gaussian mechanisms (seed 001): paper's route and exact GDP.

Check values: extract 001 §4.2 (Theorem-1 table), computed there from the paper's formulas.
"""

import math

import numpy as np
import pytest
from scipy import integrate, stats

from privpost import accounting as A
from privpost.errors import PrivpostError

SIGMA_T1 = 2 * 1.35624

# n, k(n), eps1, exact eps, exact delta  (extract 001 §4.2)
THEOREM1 = [
    (10, 4, 0.395572, 2.8471, 0.047434),
    (100, 21, 0.176905, 3.7322, 1.2625e-3),
    (1000, 144, 0.068515, 4.4425, 3.7315e-5),
    (10 ** 4, 1085, 0.025018, 5.0195, 1.1356e-6),
    (10 ** 6, 72382, 0.003064, 5.9877, 1.0905e-9),
]
CORRECTED = [3.5258, 4.4232, 5.1119, 5.6924, 6.6663]


@pytest.mark.parametrize("row", THEOREM1)
def test_theorem1_table(row):
    n, k, eps1, eps, delta = row
    got_k, got_eps1, got_eps, got_delta = A.theorem1_exact(n, 1, 0.5, 1.5, 1, SIGMA_T1)
    assert got_k == k
    assert got_eps1 == pytest.approx(eps1, abs=1e-6)
    assert got_eps == pytest.approx(eps, abs=1e-3)
    assert got_delta == pytest.approx(delta, rel=1e-3)
    # the paper's eq. (4) for delta is correct (within the floor on k)
    eq4 = 1.25 * n ** -1.5 / math.log(n) + n ** -1.5
    assert got_delta <= eq4 * (1 + 1e-9)


def test_eq3_is_an_understatement_and_corrected_bound_holds():
    paper = A.theorem1_eq3(1, 0.5, 1.5, 1, SIGMA_T1)
    assert paper == pytest.approx(2.78698, abs=1e-5)
    for (n, *_), corr in zip(THEOREM1, CORRECTED):
        exact = A.theorem1_exact(n, 1, 0.5, 1.5, 1, SIGMA_T1)[2]
        # flagged erratum: eq. (3) is below the exact advanced-composition epsilon for every n
        assert exact > paper
        c = A.theorem1_eq3_corrected(n, 1, 0.5, 1.5, 1, SIGMA_T1)
        assert c == pytest.approx(corr, abs=1e-4)
        assert c >= A.theorem1_exact(n, 1, 0.5, 1.5, 1, SIGMA_T1, floor=False)[2]
    with pytest.raises(PrivpostError):
        A.theorem1_exact(1, 1, 0.5, 1.5, 1, SIGMA_T1)


def test_paper_bound_2eps_is_above_exact_term():
    e, d = A.advanced_composition(0.3, 1e-8, 50, 1e-6)
    ep, dp = A.advanced_composition_paper(0.3, 1e-8, 50, 1e-6)
    assert ep > e and d == dp
    with pytest.raises(PrivpostError):
        A.advanced_composition_paper(1.2, 1e-8, 50, 1e-6)


def _profile_quadrature(eps, mu):
    """δ(ε) of N(0,1) vs N(μ,1) by numerical integration of (p - e^ε q)_+ (independent of the
    closed form)."""
    f = lambda x: max(stats.norm.pdf(x, mu) - math.exp(eps) * stats.norm.pdf(x), 0.0)
    cut = eps / mu + mu / 2      # p > e^ε q  <=>  x > cut
    val, _ = integrate.quad(f, cut, cut + 40, epsabs=1e-14, limit=200)
    return val


@pytest.mark.parametrize("eps,mu", [(0.5, 0.3), (1.0, 0.5), (2.0, 1.5), (0.1, 0.05)])
def test_gdp_delta_matches_quadrature(eps, mu):
    assert A.gaussian_dp_delta(eps, mu) == pytest.approx(_profile_quadrature(eps, mu),
                                                         rel=1e-6, abs=1e-15)


def test_tight_between_exact_and_paper():
    """tight ε ≥ the exact (lower-bound) profile of the worst pair, tight ≤ advanced."""
    for sigma, delta_, k in [(2.4, 1e-6, 300), (5.0, 1e-5, 50), (1.0, 1e-6, 10)]:
        sens = 1 / math.sqrt(1000)
        tight = A.gaussian_composition_epsilon(sigma, sens, k, delta_, "tight")
        adv = A.gaussian_composition_epsilon(sigma, sens, k, delta_, "advanced")
        assert tight <= adv
        mu = math.sqrt(k) * sens / sigma
        # lower bound: the k-fold composition of fixed neighbours is exactly N(0,1) vs N(mu,1)
        assert _profile_quadrature(tight, mu) <= delta_ * (1 + 1e-6)
        assert _profile_quadrature(tight * (1 - 1e-3), mu) > delta_
    # wrong variant: composing mu linearly (k*Delta/sigma) overstates epsilon -> not tight
    wrong = A.gaussian_dp_epsilon(300 / 2.4 / math.sqrt(1000), 1e-6)
    assert wrong > A.gaussian_composition_epsilon(2.4, 1 / math.sqrt(1000), 300, 1e-6) * 5


def test_tight_against_dp_accounting_pld():
    dpa = pytest.importorskip("dp_accounting")
    from dp_accounting.pld import pld_privacy_accountant

    for sigma_over_sens, k, delta_ in [(20.0, 100, 1e-6), (5.0, 10, 1e-5)]:
        acc = pld_privacy_accountant.PLDAccountant(value_discretization_interval=1e-4)
        acc.compose(dpa.GaussianDpEvent(sigma_over_sens), k)
        pld = acc.get_epsilon(delta_)
        tight = A.gaussian_composition_epsilon(sigma_over_sens, 1.0, k, delta_)
        assert tight <= pld + 1e-9
        assert pld <= tight * 1.01 + 1e-3


def test_calibration_roundtrip_and_iterations():
    sens = 1 / math.sqrt(1000)
    for acc in A.ACCOUNTANTS:
        s = A.calibrate_gaussian_sigma(1.0, 1e-6, 100, sens, acc)
        assert A.gaussian_composition_epsilon(s, sens, 100, 1e-6, acc) <= 1.0
        assert A.gaussian_composition_epsilon(s * 0.999, sens, 100, 1e-6, acc) > 1.0
        k = A.max_gaussian_compositions(2.4, sens, 1.0, 1e-6, acc)
        assert k >= 1
        assert A.gaussian_composition_epsilon(2.4, sens, k, 1e-6, acc) <= 1.0
        assert A.gaussian_composition_epsilon(2.4, sens, k + 1, 1e-6, acc) > 1.0
    kt = A.max_gaussian_compositions(2.4, sens, 1.0, 1e-6, "tight")
    ka = A.max_gaussian_compositions(2.4, sens, 1.0, 1e-6, "advanced")
    assert kt > 10 * ka
    # mu* and its epsilon
    mu = A.gaussian_dp_mu(1.0, 1e-6)
    assert A.gaussian_dp_delta(1.0, mu) <= 1e-6 < A.gaussian_dp_delta(1.0, mu * 1.0001)
    assert A.max_gaussian_compositions(0.001, 1.0, 0.1, 1e-6) == 0


def test_theorem2_needs_eps_below_one():
    assert A.gaussian_mechanism_epsilon(1.0, 10.0, 1e-5) == pytest.approx(
        math.sqrt(2 * math.log(1.25e5)) / 10)
    with pytest.raises(PrivpostError, match="epsilon < 1"):
        A.gaussian_mechanism_epsilon(1.0, 1.0, 1e-5)


@pytest.mark.parametrize("bad", [dict(sigma=-1), dict(sigma=float("nan")), dict(delta=1.5),
                                 dict(k=0), dict(k=2.5), dict(accountant="rdp"),
                                 dict(sigma="x")])
def test_hostile_inputs(bad):
    kw = dict(sigma=1.0, sensitivity=0.1, k=10, delta=1e-6, accountant="tight")
    kw.update(bad)
    with pytest.raises(PrivpostError):
        A.gaussian_composition_epsilon(**kw)
