"""Exactness of count-level ``damcmc`` (issue 21; DESIGN §10; privpost.inference._count_table).

Each statistical check compares the chain with an exact or independently computed answer
(record-level ``damcmc`` on the same release with the Monte Carlo error of both chains,
enumeration of the tables, quadrature of the exact marginal likelihood) with |z| < 4 from
ESS-based Monte Carlo standard errors, and has a wrong variant that must fail (the multinomial /
binomial coefficient left out of the law of the table, or a wrong noise scale).
"""

from __future__ import annotations

import itertools
import math
import warnings

import numpy as np
import pytest
from scipy import special, stats

import privpost
from privpost.errors import IncompatibleError, PrivpostError
from privpost.inference import _count_latent
from privpost.inference.damcmc import run
from privpost.mechanisms import DiscreteGaussian, DiscreteLaplace, Gaussian, Laplace
from privpost.models import BetaBernoulli, DirichletCategorical, NormalKnownVariance
from privpost.queries import Histogram, Mean, Sum
from privpost.releases.release import Release, ReleaseSet

from test_damcmc import _ess, beta_bernoulli_exact, z_cdf, z_mean

warnings.filterwarnings("ignore", category=FutureWarning)  # arviz refactor notice

K = 4.0
KW = dict(chains=4, progress=False)

MECHS = {
    "laplace": lambda: Laplace(scale=2.0),
    "gaussian": lambda: Gaussian(scale=2.5),
    "discrete_laplace": lambda: DiscreteLaplace(scale=2.0),
    "discrete_gaussian": lambda: DiscreteGaussian(scale=2.5),
}


def _rel(query, mech, n, observed):
    m = mech.calibrate(query.sensitivity(mech.sensitivity_norm, "replace"))
    return Release(query=query, mechanism=m, n=n, observed=np.atleast_1d(np.asarray(observed,
                                                                                    float)))


def z_two(a, b) -> float:
    """(mean a - mean b) / sqrt(MCSE_a^2 + MCSE_b^2); a, b: (chains, draws)."""
    se2 = a.var() / _ess(a) + b.var() / _ess(b)
    return float((a.mean() - b.mean()) / math.sqrt(se2))


def z_two_cdf(a, b, x) -> float:
    """Difference of the empirical P(. <= x) of two chains over its two-chain MCSE."""
    ia, ib = (a <= x).astype(float), (b <= x).astype(float)
    pa, pb = ia.mean(), ib.mean()
    se2 = max(pa * (1 - pa), 1e-12) / _ess(ia) + max(pb * (1 - pb), 1e-12) / _ess(ib)
    return float((pa - pb) / math.sqrt(se2))


def compare_chains(a, b) -> dict:
    """Both directions: the mean, and the CDFs at each chain's own quartiles."""
    out = {"mean": z_two(a, b)}
    for name, src in (("a", a), ("b", b)):
        for q in (0.25, 0.5, 0.75):
            out[f"cdf@{name}{q}"] = z_two_cdf(a, b, float(np.quantile(src, q)))
    return out


def _is_counts(post) -> bool:
    return _count_latent.latent_of(post)[0] == "counts"


# ============================================================================================
# count level vs record level on the same releases
# ============================================================================================

@pytest.mark.parametrize("mech", list(MECHS))
@pytest.mark.parametrize("query", ["sum", "mean"])
def test_beta_bernoulli_counts_match_records(mech, query):
    n = 24
    if MECHS[mech]().discrete and query == "mean":
        pytest.skip("a discrete mechanism needs an integer statistic")
    q = Sum(bounds=(0, 1), integer=MECHS[mech]().discrete) if query == "sum" else \
        Mean(bounds=(0, 1), n=n)
    obs = 19.0 if query == "sum" else 19.4 / n
    mc = MECHS[mech]()
    if query == "mean":
        mc = type(mc)(scale=mc.scale / n)
    rel = _rel(q, mc, n, obs)
    model = BetaBernoulli(2.0, 2.0)
    a = run(model, rel, latent="counts", draws=3000, warmup=300, seed=11, **KW)
    b = run(model, rel, latent="records", draws=3000, warmup=300, seed=12, **KW)
    assert _is_counts(a) and not _is_counts(b)
    z = compare_chains(a.draws["theta"], b.draws["theta"])
    assert all(abs(v) < K for v in z.values()), z
    # and both against the exact mixture; the wrong variant (noise scale doubled) fails
    scale = rel.mechanism.scale
    coef = 1.0 if query == "sum" else 1.0 / n

    def logpdf(z_, sc=scale):
        return float(rel.mechanism.logpdf([obs], [obs - z_ * coef])) if sc == scale else \
            float(type(rel.mechanism)(scale=sc).calibrate(1.0).logpdf([obs], [obs - z_ * coef]))

    ex = beta_bernoulli_exact(2.0, 2.0, n, obs / coef, logpdf)
    assert abs(z_mean(a.draws["theta"], ex["mean"])) < K
    wrong = beta_bernoulli_exact(2.0, 2.0, n, obs / coef, lambda z_: logpdf(z_, 4 * scale))
    assert abs(z_mean(a.draws["theta"], wrong["mean"])) > K


def test_histogram_counts_match_records():
    alpha = np.array([1.0, 2.0, 1.5])
    rel = _rel(Histogram(3), DiscreteGaussian(scale=1.5), 15, [2.0, 9.0, 4.0])
    model = DirichletCategorical(alpha)
    a = run(model, rel, latent="counts", draws=3000, warmup=300, seed=3, **KW)
    b = run(model, rel, latent="records", draws=3000, warmup=300, seed=4, **KW)
    for j in range(3):
        z = compare_chains(a.draws["p"][..., j], b.draws["p"][..., j])
        assert all(abs(v) < K for v in z.values()), (j, z)
    # wrong variant: a record-level chain on a release with 4x the noise is told apart
    wrong_rel = _rel(Histogram(3), DiscreteGaussian(scale=6.0), 15, [2.0, 9.0, 4.0])
    w = run(model, wrong_rel, latent="records", draws=3000, warmup=300, seed=5, **KW)
    assert max(abs(z_two(a.draws["p"][..., j], w.draws["p"][..., j])) for j in range(3)) > K


# ============================================================================================
# a tiny histogram (and a release set of it) against enumeration
# ============================================================================================

def histogram_exact(alpha, n, rels, *, drop_coefficient=False):
    """Posterior of p by enumeration of the tables c (sum n): a mixture of Dirichlet(alpha + c)
    with weights DirMult(c; n, alpha) prod_r eta_r(s_r | c). Returns (weights, tables)."""
    K_ = alpha.shape[0]
    tables = np.array([c for c in itertools.product(range(n + 1), repeat=K_) if sum(c) == n],
                      dtype=float)
    logw = (special.gammaln(alpha.sum()) - special.gammaln(alpha.sum() + n)
            + (special.gammaln(alpha + tables) - special.gammaln(alpha)).sum(axis=1))
    if not drop_coefficient:
        logw += special.gammaln(n + 1) - special.gammaln(tables + 1).sum(axis=1)
    for r in rels:
        logw += np.array([r.mechanism.logpdf(r.observed, c) for c in tables])
    w = np.exp(logw - logw.max())
    return w / w.sum(), tables


def _mixture_mean_cdf(alpha, w, tables, j, x):
    A = alpha[j] + tables[:, j]
    B = alpha.sum() + tables.sum(axis=1) - A
    return float(w @ (A / (A + B))), float(w @ stats.beta.cdf(x, A, B))


@pytest.mark.parametrize("case", ["one", "set"])
def test_tiny_histogram_against_enumeration(case):
    alpha = np.array([1.0, 1.0, 2.0])
    n = 7
    rels = [_rel(Histogram(3), DiscreteLaplace(scale=1.2), n, [5.0, 0.0, 1.0])]
    if case == "set":      # a second release of the same table, another kernel family
        rels.append(_rel(Histogram(3), Gaussian(scale=1.0), n, [4.6, 1.3, 0.8]))
    release = rels[0] if case == "one" else ReleaseSet(rels)
    model = DirichletCategorical(alpha)
    post = privpost.infer(model, release, method="damcmc", draws=4000, warmup=300, seed=21, **KW)
    assert _is_counts(post)
    draws = post.draws["p"]
    w, tables = histogram_exact(alpha, n, rels)
    ww, _ = histogram_exact(alpha, n, rels, drop_coefficient=True)
    wrong_z = []
    for j in range(3):
        x = float(np.median(draws[..., j]))
        mean, cdf = _mixture_mean_cdf(alpha, w, tables, j, x)
        assert abs(z_mean(draws[..., j], mean)) < K
        assert abs(z_cdf(draws[..., j], x, cdf)) < K
        wmean, _ = _mixture_mean_cdf(alpha, ww, tables, j, x)
        wrong_z.append(abs(z_mean(draws[..., j], wmean)))
    assert max(wrong_z) > K, wrong_z


def test_release_set_of_sum_and_mean_against_enumeration():
    """A Sum with Laplace noise and a Mean with Gaussian noise of the same 0/1 records (mixed
    kernel families: the record path refuses this set, the count path takes it)."""
    n = 30
    r1 = _rel(Sum(bounds=(0, 1)), Laplace(scale=3.0), n, 21.3)
    r2 = _rel(Mean(bounds=(0, 1), n=n), Gaussian(scale=2.0 / n), n, 0.64)
    post = privpost.infer(BetaBernoulli(1.5, 1.0), ReleaseSet([r1, r2]), method="damcmc",
                          draws=4000, warmup=300, seed=2, **KW)
    assert _is_counts(post)

    def logpdf(z_):     # k = s1 - z
        k = 21.3 - z_
        return float(r1.mechanism.logpdf([21.3], [k]) + r2.mechanism.logpdf([0.64], [k / n]))

    ex = beta_bernoulli_exact(1.5, 1.0, n, 21.3, logpdf)
    th = post.draws["theta"]
    assert abs(z_mean(th, ex["mean"])) < K
    for q, xi in ex["quantiles"].items():
        assert abs(z_cdf(th, xi, q)) < K
    wrong = beta_bernoulli_exact(1.5, 1.0, n, 21.3,
                                 lambda z_: float(r1.mechanism.logpdf([21.3], [21.3 - z_])))
    assert abs(z_mean(th, wrong["mean"])) > K


# ============================================================================================
# Beta-Bernoulli at census scale against quadrature of the exact marginal likelihood
# ============================================================================================

def bb_quadrature(a, b, n, s, mech, *, drop_coefficient=False, k_lo=None, k_hi=None,
                  grid=None):
    """Posterior of theta on ``grid`` from p(s | theta) = sum_k Binom(k; n, theta) eta(s - k)
    summed over k in [k_lo, k_hi] (the rest of the sum is bounded by the noise density there,
    ``< e^-40`` of its peak for the windows used). Returns (grid, normalised density)."""
    k = np.arange(k_lo, k_hi + 1, dtype=float)
    log_noise = mech.logpdf(np.array([s]), k[:, None])
    logc = (special.gammaln(n + 1) - special.gammaln(k + 1) - special.gammaln(n - k + 1)
            if not drop_coefficient else np.zeros_like(k))
    base = logc + log_noise
    out = np.empty(grid.shape[0])
    for i, t in enumerate(grid):
        out[i] = special.logsumexp(base + k * math.log(t) + (n - k) * math.log1p(-t))
    out += stats.beta.logpdf(grid, a, b)
    dens = np.exp(out - out.max())
    return grid, dens / np.trapezoid(dens, grid)


def _grid_mean_cdf(grid, dens, xs):
    mean = float(np.trapezoid(grid * dens, grid))
    cdf = np.concatenate([[0.0], np.cumsum(0.5 * (dens[1:] + dens[:-1]) * np.diff(grid))])
    return mean, [min(max(float(np.interp(x, grid, cdf)), 0.0), 1.0) for x in xs]


def test_beta_bernoulli_n_1e7_against_quadrature():
    n = 10 ** 7
    sigma = 2000.0
    s = 3.0e6 + 1234.0
    rel = _rel(Sum(bounds=(0, 1), integer=True), DiscreteGaussian(scale=sigma), n, s)
    post = run(BetaBernoulli(1.0, 1.0), rel, draws=2000, warmup=300, seed=7, **KW)
    assert _is_counts(post)
    th = post.draws["theta"]
    sd = math.sqrt(sigma ** 2 + n * 0.21) / n
    grid = np.linspace(s / n - 9 * sd, s / n + 9 * sd, 721)
    win = dict(k_lo=int(s - 9 * sigma), k_hi=int(s + 9 * sigma), grid=grid)
    g, dens = bb_quadrature(1.0, 1.0, n, s, rel.mechanism, **win)
    xs = [float(np.quantile(th, q)) for q in (0.1, 0.5, 0.9)]
    mean, cdfs = _grid_mean_cdf(g, dens, xs)
    assert abs(z_mean(th, mean)) < K
    for x, c in zip(xs, cdfs):
        assert abs(z_cdf(th, x, c)) < K
    # wrong: the binomial coefficient left out of p(s | theta)
    g, dens_w = bb_quadrature(1.0, 1.0, n, s, rel.mechanism, drop_coefficient=True, **win)
    wmean, _ = _grid_mean_cdf(g, dens_w, xs)
    assert abs(z_mean(th, wmean)) > K


def _centred(law, n_shift):
    """``law`` with moves given theta (not collapsed), ``n_shift`` residual-shift moves."""
    from privpost.inference._count_table import default_pairs

    law.collapsed, law.col_alpha, law.n_match = False, np.zeros(law.J), 0
    law.n_pairs = default_pairs(law.J, float(law.totals.sum()))
    law.n_shift = n_shift
    return law


def test_noise_far_above_sqrt_n_converges():
    """sigma = 3e4 against sqrt(n theta (1 - theta)) ~ 150 at n = 1e5: the default run (the
    collapsed move: an exact draw of the table from p(c | s), then theta | c) converges
    (R-hat <= 1.01, ESS >= 400) to the quadrature answer. With moves given theta instead, the
    residual-shift move is what keeps such a chain mixing: without it the ESS per draw is < 1/5
    of that with it, and the collapsed default beats both."""
    n = 10 ** 5
    sigma = 3.0e4
    s = 42000.0
    rel = _rel(Sum(bounds=(0, 1)), Gaussian(scale=sigma), n, s)
    model = BetaBernoulli(2.0, 2.0)
    with warnings.catch_warnings():
        warnings.simplefilter("error", privpost.errors.ConvergenceWarning)
        post = run(model, rel, seed=5, max_seconds=120, **KW)
    assert post.converged is True
    assert any("collapsed" in nt for nt in post.notes)
    th = post.draws["theta"]
    grid = np.linspace(1e-4, 1 - 1e-4, 801)
    g, dens = bb_quadrature(2.0, 2.0, n, s, rel.mechanism, k_lo=0, k_hi=n, grid=grid)
    xs = [float(np.quantile(th, q)) for q in (0.1, 0.5, 0.9)]
    mean, cdfs = _grid_mean_cdf(g, dens, xs)
    assert abs(z_mean(th, mean)) < K
    for x, c in zip(xs, cdfs):
        assert abs(z_cdf(th, x, c)) < K
    # given theta, without the non-centred move: the centred steps alone barely move theta
    slow = _count_latent.run(_centred(model.count_latent(rel), 0), model, rel, draws=1000,
                             warmup=300, seed=5, **KW)
    shift = _count_latent.run(_centred(model.count_latent(rel), 2), model, rel, draws=1000,
                              warmup=300, seed=5, **KW)
    fast = _count_latent.run(model.count_latent(rel), model, rel, draws=1000, warmup=300,
                             seed=5, **KW)
    e_slow, e_shift, e_fast = (_ess(p.draws["theta"]) for p in (slow, shift, fast))
    assert e_slow < 0.2 * e_shift, (e_slow, e_shift)
    assert e_fast > e_shift, (e_fast, e_shift)


# ============================================================================================
# the choice of the latent, notes, refusals
# ============================================================================================

def test_latent_choice_and_notes():
    rel = _rel(Sum(bounds=(0, 1)), Laplace(scale=1.0), 50, 30.2)
    model = BetaBernoulli(1.0, 1.0)
    post = run(model, rel, draws=50, warmup=20, seed=1, **KW)
    latent, table = _count_latent.latent_of(post)
    assert latent == "counts"
    assert "Multinomial(n, (1 - theta, theta))" in table and "n = 50" in table
    assert "conditions on the public n = 50" in table
    assert post.sample_stats["log_eta"].shape == (4, 50)
    # records: the old path, with its record statistics
    rec = run(model, rel, latent="records", draws=50, warmup=20, seed=1, **KW)
    assert _count_latent.latent_of(rec) == ("records", None)
    assert "accept_rate" in rec.sample_stats
    # a record-level option under "auto" takes the records; under "counts" it is refused
    rec2 = run(model, rel, draws=50, warmup=20, seed=1, fast_path=False, **KW)
    assert _count_latent.latent_of(rec2)[0] == "records"
    with pytest.raises(PrivpostError, match="sweeps_per_iteration"):
        run(model, rel, latent="counts", sweeps_per_iteration=2, draws=5, warmup=0, **KW)
    with pytest.raises(PrivpostError, match="latent must be one of"):
        run(model, rel, latent="tables", draws=5, warmup=0, **KW)
    # no table declared
    nrel = _rel(Sum(bounds=(-3, 3)), Laplace(scale=1.0), 10, 1.0)
    with pytest.raises(IncompatibleError, match="no exact count table"):
        run(NormalKnownVariance(0.0, 1.0, 1.0), nrel, latent="counts", draws=5, warmup=0,
            **KW)
    # a model that cannot explain the release: its own refusal names the field (review4 D5)
    from privpost.models import CliqueMRF
    from privpost.queries import MarginalTables
    mq = MarginalTables([2, 2], [[0, 1]])
    mrel = privpost.Release(query=mq, mechanism=Laplace(scale=1.0).calibrate(mq.sensitivity("l1")),
                            observed=np.array([1.0, 2.0, 0.0, 2.0]), n=5)
    with pytest.raises(IncompatibleError, match="levels"):
        run(CliqueMRF([3, 2], [[0, 1]]), mrel, latent="counts", draws=5, warmup=0, **KW)
    # a release set on parts of the data is not one table
    part = ReleaseSet([rel, rel], subsets=["D1", "D2"])
    assert model.count_latent(part) is None


def test_log_eta_is_the_mechanism_density_at_the_imputed_table():
    """Tiny noise: the imputed count is the observed one and log_eta is the density there."""
    rel = _rel(Sum(bounds=(0, 1)), Laplace(scale=1e-6), 10, 6 + 3e-7)
    post = run(BetaBernoulli(2.0, 3.0), rel, draws=200, warmup=50, seed=5, **KW)
    assert np.allclose(post.sample_stats["log_eta"], -math.log(2e-6) - 0.3, atol=1e-6)
    ref = stats.beta(2.0 + 6, 3.0 + 4)
    assert abs(z_mean(post.draws["theta"], ref.mean())) < K


# ============================================================================================
# the user's path: privpost declare -> privpost infer, no option
# ============================================================================================

def test_cli_declared_census_table_runs_count_level(tmp_path):
    """A typed-in histogram of 10^8 people with discrete Gaussian noise at a stated rho: the
    declare path writes it, ``privpost infer`` takes the count table with no option and says
    so in --json; ``--option latent=records`` is refused by the record path's size limit."""
    import json

    from typer.testing import CliRunner

    from privpost.cli import app

    runner = CliRunner()
    path = tmp_path / "census.json"
    res = runner.invoke(app, ["declare", "--query", "histogram", "--categories", "4",
                              "--value", "31000123,25999001,19000456,24000420",
                              "--mechanism", "discrete_gaussian", "--rho", "0.5",
                              "--n", "100000000", "-o", str(path)])
    assert res.exit_code == 0, res.output
    res = runner.invoke(app, ["infer", str(path), "--model", "dirichlet-categorical:alpha=1",
                              "--seed", "3", "--json"])
    assert res.exit_code == 0, res.output
    doc = json.loads(res.stdout)
    assert doc["latent"] == "counts" and doc["converged"] is True
    assert "Multinomial(n, p)" in doc["latent_table"] and "n = 100000000" in doc["latent_table"]
    assert abs(doc["summary"]["p[0]"]["mean"] - 0.31000123) < 1e-4
    res = runner.invoke(app, ["infer", str(path), "--model", "dirichlet-categorical:alpha=1",
                              "--option", "latent=records", "--json"])
    assert res.exit_code != 0 and "max_latent" in res.output


@pytest.mark.parametrize("moves", ["given-theta", "collapsed"])
def test_generic_python_chain_matches_exact(moves):
    """The CountTable chain of a model without the compiled Dirichlet driver (the path the
    naive-Bayes and MRF tables take): BetaBernoulli's table with ``dirichlet`` removed, its
    theta update, logit-scale residual-shift move and Python iteration -- with pair moves given
    theta, or collapsed ones along a matching (theta then drawn by the Python update) --
    against the exact mixture; wrong variant: the noise scale doubled."""
    n = 20
    rel = _rel(Sum(bounds=(0, 1)), Laplace(scale=2.0), n, 15.5)
    model = BetaBernoulli(2.0, 2.0)
    law = model.count_latent(rel)
    if moves == "given-theta":
        _centred(law, 2)
    else:
        assert law.collapsed and law.n_match == 1
        law.n_shift = 2
    law.dirichlet = None
    post = _count_latent.run(law, model, rel, draws=3000, warmup=300, seed=4, **KW)
    th = post.draws["theta"]

    def lp(z_, b=2.0):
        return -abs(z_) / b - math.log(2 * b)

    ex = beta_bernoulli_exact(2.0, 2.0, n, 15.5, lp)
    assert abs(z_mean(th, ex["mean"])) < K
    for q, xi in ex["quantiles"].items():
        assert abs(z_cdf(th, xi, q)) < K
    wrong = beta_bernoulli_exact(2.0, 2.0, n, 15.5, lambda z_: lp(z_, 8.0))
    assert abs(z_mean(th, wrong["mean"])) > K
    assert "shift acceptance" in " ".join(post.notes)


def test_rounds_equal_one_fixed_run():
    """A run until converged equals a fixed run of its final length (same seed): the compiled
    chain consumes its generator in the same order however its iterations are split."""
    rel = _rel(Histogram(3), DiscreteLaplace(scale=30.0), 5000, [1500.0, 2100.0, 1400.0])
    model = DirichletCategorical(np.ones(3))
    auto = run(model, rel, seed=8, max_draws=20_000, warmup=200, **KW)
    fixed = run(model, rel, seed=8, draws=auto.n_draws, warmup=200, **KW)
    np.testing.assert_array_equal(auto.draws["p"], fixed.draws["p"])


def test_releases_of_different_fields_are_not_one_table():
    a = _rel(Sum(bounds=(0, 1), columns=["x"]), Laplace(scale=1.0), 10, 3.0)
    b = _rel(Sum(bounds=(0, 1), columns=["y"]), Laplace(scale=1.0), 10, 4.0)
    assert BetaBernoulli(1, 1).count_latent(ReleaseSet([a, b])) is None
    assert BetaBernoulli(1, 1).count_latent(ReleaseSet([a, a])) is not None
