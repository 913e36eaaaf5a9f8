"""Collapsed pair moves of the count table (theta integrated out; issue 21, brief "flat").

``privpost.inference._count_moves.pair_move_c`` with Dirichlet concentrations ``ai, aj >= 1``
draws ``k`` exactly from ``f(k) ∝ Gamma(ai + ci + k) Gamma(aj + cj - k) / (Gamma(ci + k + 1)
Gamma(cj - k + 1)) prod_m eta_m(r_m - k v_m)``: its draws are compared by a chi-square test with
that pmf computed independently (scipy's ``gammaln`` and the mechanisms' own ``logpdf``), on
enumerated ranges, on ranges drawn through the hat, and on a huge range. Wrong variant: the
Dirichlet-multinomial terms left out (the pair's conditional given equal cell probabilities)
must be rejected. The chain-level check (partially collapsed Gibbs: collapsed sweep, then theta
given the table) is ``tests/test_damcmc_counts.py::test_tiny_histogram_against_enumeration``
(concentrations 1, 1, 2: now collapsed by default) plus the wrong-concentration variant below.
"""

from __future__ import annotations

import itertools
import math
import warnings

import numpy as np
import pytest
from scipy import special

import privpost
from privpost.errors import PrivpostError
from privpost.inference import _count_latent
from privpost.inference import _count_moves as cm
from privpost.mechanisms import DiscreteGaussian, DiscreteLaplace, Gaussian, Laplace
from privpost.models import DirichletCategorical
from privpost.queries import Histogram

from _tolerance import K_MCSE, P_CHECK
from test_count_moves import P_WRONG, _args, chisq_p
from test_damcmc import z_mean
from test_damcmc_counts import _rel, histogram_exact

warnings.filterwarnings("ignore", category=FutureWarning)

MECHS = {
    "laplace": lambda: Laplace(scale=2.5),
    "discrete_laplace": lambda: DiscreteLaplace(scale=2.5),
    "gaussian": lambda: Gaussian(scale=3.0),
    "discrete_gaussian": lambda: DiscreteGaussian(scale=3.0),
}


def reference_logf(ks, ci, cj, ai, aj, s, T, v, mechs, *, drop_dm=False):
    """Independent unnormalised log f(k) of the collapsed pair: Dirichlet-multinomial weights of
    (ci + k, cj - k) times the mechanisms' densities of ``s_m`` at ``T_m + k v_m``."""
    ks = np.asarray(ks, dtype=float)
    out = -special.gammaln(ci + ks + 1) - special.gammaln(cj - ks + 1)
    if not drop_dm:
        out = out + special.gammaln(ai + ci + ks) + special.gammaln(aj + cj - ks)
    for s_m, T_m, v_m, mech in zip(s, T, v, mechs):
        out = out + mech.logpdf(np.array([s_m]), (T_m + ks * v_m)[:, None])
    return out


@pytest.mark.parametrize("conc", [(1.0, 1.0), (2.5, 1.0), (6.0, 9.0)])
@pytest.mark.parametrize("cells", [(4, 7), (30, 45)])
@pytest.mark.parametrize("mech", list(MECHS))
def test_collapsed_pair_move_matches_enumeration(mech, cells, conc):
    """Ranges of 12 points (enumerated) and 76 points (mode, drop points, hat); one released
    coordinate counting cell i (v = 1), observed away from the current table."""
    ci, cj = map(float, cells)
    ai, aj = conc
    m = MECHS[mech]().calibrate(1.0)
    s, T, v = [ci + np.round(0.35 * cj)], [ci], [1.0]
    r, v_, w, l2 = _args(s, T, v, [m])
    draws = cm.sample_many(20_000, ci, cj, 0.0, r, v_, w, l2, np.random.default_rng(7), ai, aj)
    ks = np.arange(-ci, cj + 1)
    assert chisq_p(draws, ks, reference_logf(ks, ci, cj, ai, aj, s, T, v, [m])) > P_CHECK
    # cm.pmf (the test helper) agrees with the reference
    _, pm = cm.pmf(ci, cj, 0.0, r, v_, w, l2, ai=ai, aj=aj)
    ref = reference_logf(ks, ci, cj, ai, aj, s, T, v, [m])
    ref = np.exp(ref - special.logsumexp(ref))
    assert np.allclose(pm, ref, atol=1e-12)


@pytest.mark.parametrize("conc", [(2.5, 1.0), (6.0, 9.0)])
def test_collapsed_pair_move_without_dirichlet_terms_fails(conc):
    """Wrong variant: the same move with the Dirichlet-multinomial terms dropped (ai = 0: the
    conditional at equal cell probabilities) is rejected against the collapsed pmf."""
    ci, cj = 30.0, 45.0
    ai, aj = conc
    m = Laplace(scale=6.0).calibrate(1.0)
    s, T, v = [ci + np.round(0.35 * cj)], [ci], [1.0]
    r, v_, w, l2 = _args(s, T, v, [m])
    draws = cm.sample_many(20_000, ci, cj, 0.0, r, v_, w, l2, np.random.default_rng(8))
    ks = np.arange(-ci, cj + 1)
    assert chisq_p(draws, ks, reference_logf(ks, ci, cj, ai, aj, s, T, v, [m])) < P_WRONG
    # and it is the law it should be (the reference without the terms)
    assert chisq_p(draws, ks, reference_logf(ks, ci, cj, ai, aj, s, T, v, [m],
                                             drop_dm=True)) > P_CHECK


def test_collapsed_pair_move_huge_range():
    """Cells of 3e8 and 5e8 units (alpha 1.5 and 4), a Gaussian coordinate on cell i: the draws
    must fit the pmf enumerated on a window of +-60 sd around the mode (the rest of the range has
    mass < 1e-700), computed in the cancellation-free form."""
    ci, cj, ai, aj = 3.0e8, 5.0e8, 1.5, 4.0
    m = Gaussian(scale=4.0).calibrate(1.0)
    s, T, v = [ci + 11.3], [ci], [1.0]
    r, v_, w, l2 = _args(s, T, v, [m])
    draws = cm.sample_many(20_000, ci, cj, 0.0, r, v_, w, l2, np.random.default_rng(9), ai, aj)
    ks = np.arange(-250.0, 260.0)
    lf = np.array([cm._log_f_rel(k, 0.0, ci, cj, 0.0, ai, aj, r, v_, w, l2, 1) for k in ks])
    # independently: the Gaussian factor dominates; the gamma terms by mpmath-free Stirling via
    # scipy at these sizes are cancellation-prone, so check their slope instead: log f(k+1) -
    # log f(k) - eta part = log((ai + ci + k) (cj - k)) - log((ci + k + 1) (aj + cj - k - 1))
    k0 = 5.0
    d = lf[ks == k0 + 1][0] - lf[ks == k0][0]
    eta = float(m.logpdf(np.array(s), np.array([[T[0] + k0 + 1]]))[0]
                - m.logpdf(np.array(s), np.array([[T[0] + k0]]))[0])
    dm = (np.log(ai + ci + k0) + np.log(cj - k0) - np.log(ci + k0 + 1) - np.log(aj + cj - k0 - 1))
    assert abs(d - (eta + dm)) < 1e-9
    assert draws.min() >= ks[0] and draws.max() <= ks[-1]
    assert chisq_p(draws, ks, lf) > P_CHECK


# ============================================================================================
# chain level: the partially collapsed Gibbs chain (collapsed sweep, then p | c)
# ============================================================================================

def test_collapsed_default_and_its_limits():
    rel = _rel(Histogram(3), DiscreteLaplace(scale=1.2), 7, [5.0, 0.0, 1.0])
    law = DirichletCategorical(np.array([1.0, 1.0, 2.0])).count_latent(rel)
    assert law.collapsed and np.array_equal(law.col_alpha, [1.0, 1.0, 2.0])
    # concentrations below 1: the collapsed conditional is not log-concave -> given-theta moves
    law = DirichletCategorical(np.array([0.5, 1.0, 2.0])).count_latent(rel)
    assert not law.collapsed and not law.col_alpha.any()
    post = privpost.infer(DirichletCategorical(np.array([1.0, 1.0, 2.0])), rel, method="damcmc",
                          draws=50, warmup=20, seed=1, chains=2, progress=False)
    assert any("collapsed" in nt for nt in post.notes)
    from privpost.inference._count_table import CountTable
    with pytest.raises(PrivpostError, match="collapsed"):
        CountTable(names=law.names, shapes=law.shapes, groups=law.groups, totals=law.totals,
                   coords=law.coords, log_probs=law.log_probs, update=law.update,
                   prior_sample=law.prior_sample, dirichlet=law.dirichlet, collapsed=True)


def test_collapsed_chain_with_wrong_concentrations_fails():
    """Wrong variant at chain level: collapsed moves weighted with concentrations 1 while the
    prior has (6, 1, 1) -- the table then follows the wrong marginal law -- must be rejected
    by the enumerated posterior mean that the right chain matches."""
    alpha = np.array([6.0, 1.0, 1.0])
    n = 8
    rel = _rel(Histogram(3), DiscreteLaplace(scale=2.0), n, [2.0, 4.0, 2.0])
    model = DirichletCategorical(alpha)
    w, tables = histogram_exact(alpha, n, [rel])
    exact = (w @ (alpha + tables)) / (alpha.sum() + n)
    zs = {}
    for name, col in (("right", alpha), ("wrong", np.ones(3))):
        law = model.count_latent(rel)
        law.n_shift = 0                  # the pair moves and the theta draw only
        law.col_alpha = col.copy()
        post = _count_latent.run(law, model, rel, draws=3000, warmup=300, chains=4, seed=5,
                                 progress=False)
        zs[name] = [abs(z_mean(post.draws["p"][..., j], exact[j])) for j in range(3)]
    assert max(zs["right"]) < K_MCSE, zs
    assert max(zs["wrong"]) > K_MCSE, zs


def test_enumeration_helper_is_consistent():
    """histogram_exact's weights sum over every composition of n (sanity of the reference)."""
    w, tables = histogram_exact(np.ones(3), 4, [])
    assert len(tables) == len([c for c in itertools.product(range(5), repeat=3) if sum(c) == 4])
    assert np.allclose(w, 1.0 / len(tables))      # DM(1,1,1) is uniform on compositions


# ============================================================================================
# the matching sweep keeps the table's exact law (given theta, and collapsed)
# ============================================================================================

def _sweep_problem():
    """test_count_sweep's tiny problem (groups of 4, 2 and 1 cells; a Laplace and a Gaussian
    coordinate across groups): every table and its law given LOG_P, and its collapsed law for
    concentrations COL (Dirichlet-multinomial per group instead of the multinomial)."""
    import test_count_sweep as ts

    tabs, lp = ts._tables()
    col = np.array([1.0, 2.0, 1.5, 3.0, 1.0, 2.5, 1.0])
    lp_col = lp.copy()
    for cells, tot in zip(ts.GROUPS, ts.TOTALS):
        pg = np.exp(ts.LOG_P[cells])
        pg = pg / pg.sum()
        x = tabs[:, cells]
        lp_col -= (x * np.log(pg)).sum(axis=1)                     # multinomial -> DM
        lp_col += (special.gammaln(col[cells] + x) - special.gammaln(col[cells])).sum(axis=1)
    return ts, tabs, lp, lp_col, col


def _matching_run(ts, tabs, lp, col, wrong=False, n_draws=30_000, seed=11):
    from privpost.inference import _count_table as ct

    law = ts._Law()
    L, co = law.law, law.law.coords
    perm = np.zeros(L.J, dtype=np.int64)
    probs = np.exp(lp - special.logsumexp(lp))
    rng = np.random.default_rng(seed)
    start = rng.choice(len(tabs), size=n_draws, p=probs)
    index = {tuple(t): q for q, t in enumerate(tabs)}
    out = np.empty(n_draws, dtype=np.int64)
    for t in range(n_draws):
        c = tabs[start[t]].copy()
        ct.matching_sweep(c, ts.LOG_P, col, 1, L.grp_ptr, L.grp_cells, perm, L.cell_ptr,
                          L.cell_coord, L.cell_coef, co.s, co.w, co.l2, law.r, law.b_idx,
                          law.b_r, law.b_v, law.b_w, law.b_l2, rng)
        assert c.sum() == sum(ts.TOTALS) and c.min() >= 0
        out[t] = index[tuple(c)]
    return ts._chisq_p(out, probs), float(np.mean(out != start))


def test_matching_sweep_keeps_the_table_law_given_theta():
    ts, tabs, lp, _, _ = _sweep_problem()
    p, moved = _matching_run(ts, tabs, lp, np.zeros(7))
    assert moved > 0.3 and p > P_CHECK, (p, moved)


def test_collapsed_matching_sweep_keeps_the_collapsed_law():
    ts, tabs, _, lp_col, col = _sweep_problem()
    p, moved = _matching_run(ts, tabs, lp_col, col)
    assert moved > 0.3 and p > P_CHECK, (p, moved)


def test_collapsed_sweep_does_not_keep_the_law_given_theta():
    """Wrong variant: collapsed weights against the law given theta (the sweep alone, without
    the theta draw, is not a move of that law)."""
    ts, tabs, lp, _, col = _sweep_problem()
    p, moved = _matching_run(ts, tabs, lp, col)
    assert moved > 0.3 and p < P_WRONG, (p, moved)


# ============================================================================================
# Beta-Bernoulli: every iteration an independent exact draw (theta-marginal sampler)
# ============================================================================================

def test_beta_bernoulli_collapsed_is_the_exact_marginal_sampler_at_1e7():
    """Beta(2.5, 4) prior (Dirichlet-multinomial terms active, counts ~3e6: the Stirling form),
    n = 1e7, Laplace noise of scale 3000 on the sum: the one collapsed move draws c from
    p(c | s) = BetaBinomial(c; n, 2.5, 4) eta(s - c) / Z exactly and theta | c is Beta, so the
    draws are independent (lag-1 autocorrelation ~ 0, ESS ~ the number of draws) and match
    quadrature of p(theta | s) ∝ Beta(theta; 2.5, 4) sum_c Binom(c; n, theta) eta(s - c); the
    wrong variant (binomial coefficient dropped from the quadrature) fails."""
    from test_damcmc import _ess, z_cdf
    from test_damcmc_counts import _grid_mean_cdf, bb_quadrature

    from privpost.models import BetaBernoulli
    from privpost.queries import Sum

    n = 10 ** 7
    b_noise = 3000.0
    s = 3.0e6 + 777.0
    rel = _rel(Sum(bounds=(0, 1)), Laplace(scale=b_noise), n, s)
    model = BetaBernoulli(2.5, 4.0)
    law = model.count_latent(rel)
    assert law.collapsed and law.n_shift == 0 and law.n_match == 1
    post = _count_latent.run(law, model, rel, draws=2000, warmup=50, chains=4, seed=13,
                             progress=False)
    th = post.draws["theta"]
    x = th - th.mean()
    lag1 = float((x[:, 1:] * x[:, :-1]).mean() / (x * x).mean())
    assert abs(lag1) < K_MCSE / math.sqrt(th.size), lag1          # independent draws
    assert _ess(th) > 0.7 * th.size
    sd = math.sqrt(2 * b_noise ** 2 + n * 0.21) / n
    grid = np.linspace(s / n - 9 * sd, s / n + 9 * sd, 241)
    # the Laplace factor is < e^-30 of its peak beyond +-30 scales: the rest of the sum is
    # bounded by e^-30 times the (bounded) binomial mass there
    win = dict(k_lo=int(s - 30 * b_noise), k_hi=int(s + 30 * b_noise), grid=grid)
    g, dens = bb_quadrature(2.5, 4.0, n, s, rel.mechanism, **win)
    xs = [float(np.quantile(th, q)) for q in (0.1, 0.5, 0.9)]
    mean, cdfs = _grid_mean_cdf(g, dens, xs)
    assert abs(z_mean(th, mean)) < K_MCSE
    for xx, cc in zip(xs, cdfs):
        assert abs(z_cdf(th, xx, cc)) < K_MCSE
    g, dens_w = bb_quadrature(2.5, 4.0, n, s, rel.mechanism, drop_coefficient=True, **win)
    wmean, _ = _grid_mean_cdf(g, dens_w, xs)
    assert abs(z_mean(th, wmean)) > K_MCSE, (z_mean(th, mean), z_mean(th, wmean))
