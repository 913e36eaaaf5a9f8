"""The clique-margins latent of naive Bayes (``privpost.inference._count_margins``; issue 21).

Exact references, computed without privpost's samplers: the private posterior of a tiny naive
Bayes (2 classes, 2 binary features, N = 4 records) by enumeration over all 330 JOINT tables
(``tests/_count_tables_exact.py``: a finite mixture of conjugate Dirichlet posteriors), and the
exact law of the margins ``p(m | s)`` by summing those joint tables' weights by their margins --
so the Dirichlet-multinomial law of the margins the engine uses is checked, not assumed.
Tolerances: |z| < K_MCSE from ESS-based Monte Carlo errors of means of bounded parameters,
CDFs at exact quantiles and indicator frequencies (all with finite variances). Wrong variants
that must fail: the refresh's ratio with the class-count term ``DM(n') / DM(n)`` added, and the
pair moves with the Dirichlet-multinomial factor dropped.
"""

from __future__ import annotations

import itertools
import math
import warnings

import numpy as np
import pytest

import privpost as pp
from privpost.errors import PrivpostError
from privpost.inference import _count_latent
from privpost.inference._count_margins import MarginsLatent, default_moves, noise_ratio
from privpost.mechanisms import DiscreteGaussian, Gaussian, Laplace
from privpost.models import NaiveBayesLogLinear
from privpost.models._count_tables import naive_bayes_margins, naive_bayes_table
from privpost.queries import NaiveBayesCounts
from privpost.releases.release import ReleaseSet

from _count_tables_exact import NBExact, draws_of
from _mrf_exact import compositions
from _tolerance import count_checks
from test_damcmc import K_MCSE, _ess, z_cdf, z_mean
from test_damcmc_counts_tables import _agree

warnings.filterwarnings("ignore", category=FutureWarning)  # arviz refactor notice

X4 = np.array([[0, 0, 1], [0, 0, 0], [1, 1, 1], [0, 1, 0]])
ENTRIES = [("p", 0), ("q1", 0, 0), ("q1", 1, 0), ("q2", 0, 1)]


def tiny_model(feature_alpha=3.0):
    # feature_alpha != 1: the Dirichlet-multinomial factor of the pair moves matters
    return NaiveBayesLogLinear(n_levels=[2, 2], n_classes=2, class_alpha=[1.0, 2.0],
                               feature_alpha=feature_alpha)


def tiny_release(mech=None, seed=3, x=X4):
    mech = Laplace(epsilon=2.0) if mech is None else mech          # b = 2K / eps = 2
    return pp.release(x, query=NaiveBayesCounts(2, [2, 2]), mechanism=mech, seed=seed)


def margins_law(model, releases, N):
    """Exact ``p(m | s)`` as ``{margins tuple: probability}`` (joint-table enumeration summed
    by margins), and the ``NBExact`` reference of theta."""
    ex = NBExact(model, releases, N)
    I, levels = model.n_classes, model.n_levels
    dom = np.array(list(itertools.product(range(I), *[range(J) for J in levels])))
    A = np.stack([releases[0].query.statistic(r[None]) for r in dom])   # (cells, M)
    H = compositions(N, dom.shape[0])                                    # same order as NBExact
    law = {}
    for m, w in zip(map(tuple, (H @ A).astype(int)), ex.w):
        law[m] = law.get(m, 0.0) + w
    return law, ex


def run_chains(law, iters, warm=300, seeds=(11, 12, 13, 14)):
    """``(margins (chains, iters, M), results)``: the chain after each iteration."""
    ms, res = [], []
    for sd in seeds:
        ch = law.chains([np.random.default_rng(sd)], "data")[0]
        ch.run(warm, False)
        out = np.empty((iters, law.M))
        for t in range(iters):
            ch.run(1, True)
            out[t] = ch.c
        ms.append(out)
        res.append(ch.result())
    return np.stack(ms), res


def _freq_z(ind, p):
    """(frequency of the indicator ``ind`` (chains, draws) - p) / MCSE."""
    ess = _ess(ind) if ind.std() > 0 else ind.size
    return (ind.mean() - p) / math.sqrt(p * (1 - p) / ess)


def margins_zs(ms, law_exact, cells):
    """z of ``P(sum of margins cells == v)`` for every value with exact probability in
    (0.02, 0.98) of each listed cell set (e.g. ``[0, 1]``: the class-0 count)."""
    zs = {}
    keys = np.array(list(law_exact))
    probs = np.array(list(law_exact.values()))
    for name, idx in cells.items():
        val = keys[:, idx].sum(1)
        got = ms[..., idx].sum(-1)
        for v in np.unique(val):
            p = float(probs[val == v].sum())
            if 0.02 < p < 0.98:
                zs[(name, int(v))] = _freq_z((got == v).astype(float), p)
    return zs


def theta_zs(results, ex, entries):
    zs = []
    for e in entries:
        d = np.stack([r[e[0]][(slice(None),) + tuple(e[1:])] for r in results])
        zs.append(z_mean(d, ex.mean(e)))
        zs += [z_cdf(d, ex.quantile(e, q), q) for q in (0.25, 0.75)]
    return zs


# margins cells: flat (k, i, j); class-0 count = row (feature 1, class 0) = cells 0, 1
CELLS = {"n0": [0, 1], "m100": [0], "m110": [2], "m201": [5]}


def _law(model, rel, **kw):
    law = naive_bayes_margins(model, rel, NaiveBayesLogLinear)
    for k, v in kw.items():
        setattr(law, k, v)
    return law


@pytest.mark.parametrize("fa", [3.0, 0.6], ids=["collapsed", "given-q"])
def test_chain_against_enumeration(fa):
    """(a) the whole chain (pair moves + refresh + theta draws) against the exact p(m | s) and
    p(theta | s); ``fa = 0.6``: rows moved given q (concentration < 1)."""
    model = tiny_model(fa)
    rel = tiny_release()
    law = _law(model, rel)
    assert law.collapsed_rows == (4 if fa >= 1 else 0)
    exact, ex = margins_law(model, [rel], 4)
    ms, res = run_chains(law, 4000)
    zs = margins_zs(ms, exact, CELLS)
    assert len(zs) >= 8
    zt = theta_zs(res, ex, ENTRIES)
    assert max(map(abs, zs.values())) < K_MCSE, zs
    assert max(map(abs, zt)) < K_MCSE, zt


def test_refresh_alone_against_enumeration():
    """(b) the unit-refresh move ALONE (no pair moves) plus the theta draws: the exact law."""
    model = tiny_model()
    rel = tiny_release()
    law = _law(model, rel, n_pairs=0, n_refresh=2, refresh_mean=2.0, n_shift=0)
    exact, ex = margins_law(model, [rel], 4)
    ms, res = run_chains(law, 5000)
    zs = margins_zs(ms, exact, CELLS)
    assert max(map(abs, zs.values())) < K_MCSE, zs
    zt = theta_zs(res, ex, ENTRIES)
    assert max(map(abs, zt)) < K_MCSE, zt
    acc = [r["refresh_accept"] for r in res]
    assert 0.05 < min(acc) and max(acc) < 1.0


def _wrong_release(model):
    """The first noise seed from 3 on whose exact class-0 count law is far (total variation >
    0.15) from the law the WRONG refresh targets (weights times DM(n)), so the wrong variant
    fails at any seed offset."""
    for seed in range(3, 80):
        rel = tiny_release(seed=seed)
        exact, _ = margins_law(model, [rel], 4)
        pn = np.zeros(5)
        for m, w in exact.items():
            pn[m[0] + m[1]] += w
        # the wrong chain's target multiplies p(m | s) by DM(n; N, a) / W ~ prod Gamma(a+n)/n!
        a = model.class_alpha
        dm = np.array([math.exp(math.lgamma(a[0] + k) - math.lgamma(k + 1) + math.lgamma(
            a[1] + 4 - k) - math.lgamma(4 - k + 1)) for k in range(5)])
        pw = pn * dm / (pn * dm).sum()
        if 0.5 * np.abs(pw - pn).sum() > 0.15:
            return rel, exact
    pytest.fail("no noise seed separates the wrong refresh's target")


def test_refresh_with_class_ratio_term_fails():
    """(c) WRONG: the refresh's ratio times the class-count term DM(n') / DM(n)."""
    model = tiny_model()
    rel, exact = _wrong_release(model)
    law = _law(model, rel, n_pairs=0, n_refresh=2, refresh_mean=2.0, n_shift=0)
    ms, _ = run_chains(law, 3000)
    assert max(map(abs, margins_zs(ms, exact, {"n0": [0, 1]}).values())) < K_MCSE
    law.wrong = 1
    ms, _ = run_chains(law, 3000)
    assert max(map(abs, margins_zs(ms, exact, {"n0": [0, 1]}).values())) > 2 * K_MCSE


def _row_law(model, rel, n0):
    """Exact p(m | n, s) of the rows at class counts (n0, 4 - n0) (margins enumeration)."""
    exact, _ = margins_law(model, [rel], 4)
    sub = {m: w for m, w in exact.items() if m[0] + m[1] == n0}
    tot = sum(sub.values())
    return {m: w / tot for m, w in sub.items()}


def test_pair_moves_alone_and_dm_term_dropped_fails():
    """(c) the pair moves alone (no refresh: class counts fixed at the start's) against the
    exact conditional p(m | n, s); WRONG: the Dirichlet-multinomial factor dropped from the
    collapsed conditional (concentrations 1 in the move, 6 in the model), which must fail."""
    model = tiny_model(6.0)
    rel = tiny_release(Laplace(epsilon=0.5))          # b = 8: the prior factor dominates
    law = _law(model, rel, n_refresh=0, n_pairs=4, n_shift=0)
    ms, _ = run_chains(law, 3000)
    n0 = ms[..., 0] + ms[..., 1]
    assert np.all(n0 == n0[:, :1])      # every chain keeps its start's class counts
    ok = []
    for c in range(ms.shape[0]):        # each chain against the law at its own class counts
        exact = _row_law(model, rel, int(n0[c, 0]))
        ok.append(margins_zs(ms[c:c + 1], exact, {"m100": [0], "m201": [5], "m110": [2]}))
    zs = [z for d in ok for z in d.values()]
    assert len(zs) >= 4 and max(map(abs, zs)) < K_MCSE, ok
    law.col_alpha = np.where(law.col_alpha > 0, 1.0, 0.0)       # DM factor dropped
    ms, _ = run_chains(law, 3000)
    bad = []
    for c in range(ms.shape[0]):
        exact = _row_law(model, rel, int(ms[c, 0, 0] + ms[c, 0, 1]))
        bad += list(margins_zs(ms[c:c + 1], exact, {"m100": [0], "m201": [5],
                                                    "m110": [2]}).values())
    assert max(map(abs, bad)) > 2 * K_MCSE, bad


def _margins_post(model, rel, **kw):
    return pp.infer(model, rel, method="damcmc", progress=False, latent="counts", **kw)


def test_agrees_with_records_and_joint_table_small_n():
    """(d) N = 40: margins against record-level damcmc and the joint-table latent (both
    directions); WRONG: the posterior of a 10x noisier release is told apart."""
    model = NaiveBayesLogLinear(n_levels=[2, 3], n_classes=3, feature_alpha=1.5)
    q = NaiveBayesCounts(3, [2, 3])
    x = model.simulate(model.prior_sample(np.random.default_rng(7)), 40,
                       np.random.default_rng(8))
    rel = pp.release(x, query=q, mechanism=Laplace(epsilon=1.0), seed=9)
    entries = [("p", 0), ("p", 2), ("q1", 1, 0), ("q2", 2, 1)]
    pm = _margins_post(model, rel, draws=3000, warmup=500, chains=4, seed=1)
    assert any("class-by-feature margins" in n for n in pm.notes), pm.notes
    pr = pp.infer(model, rel, method="damcmc", draws=2000, warmup=500, chains=4, seed=2,
                  progress=False, latent="records")
    joint = naive_bayes_table(model, rel, NaiveBayesLogLinear)
    pj = _count_latent.run(joint, model, rel, draws=2000, warmup=500, chains=4, seed=3,
                           progress=False)
    assert max(map(abs, _agree(pm, pr, entries))) < K_MCSE
    assert max(map(abs, _agree(pm, pj, entries))) < K_MCSE
    wide = pp.release(x, query=q, mechanism=Laplace(epsilon=0.1), seed=9)
    pw = _margins_post(model, wide, draws=2000, warmup=500, chains=4, seed=2)
    assert max(map(abs, _agree(pm, pw, entries))) > K_MCSE


def test_large_n_agrees_with_joint_table():
    """(e) N = 10^8 (seed 000's model, Laplace eps = 1): margins and the joint table agree."""
    from privpost.models._count_tables import joint_domain
    from privpost.releases.release import Release

    model = NaiveBayesLogLinear(n_levels=[3] * 5, n_classes=5, class_alpha=2.0,
                                feature_alpha=2.0)
    q = NaiveBayesCounts(5, [3] * 5)
    dom = joint_domain((5,) + (3,) * 5)
    lp = model.joint_log_probs(model.prior_sample(np.random.default_rng(0)), dom)
    pi = np.exp(lp - lp.max())
    rng = np.random.default_rng(1)
    c = rng.multinomial(10 ** 8, pi / pi.sum()).astype(float)
    m = Laplace(epsilon=1.0).calibrate(q.sensitivity("l1"))
    rel = Release(q, m, 10 ** 8, m.sample(np.asarray(q.t(dom, check=False)).T @ c, seed=rng))
    pm = _margins_post(model, rel, draws=1500, warmup=300, chains=4, seed=1)
    joint = naive_bayes_table(model, rel, NaiveBayesLogLinear)
    pj = _count_latent.run(joint, model, rel, draws=1500, warmup=300, chains=4, seed=2,
                           progress=False)
    entries = [("p", 0), ("p", 3), ("q1", 0, 2), ("q5", 4, 1)]
    assert max(map(abs, _agree(pm, pj, entries))) < K_MCSE
    # WRONG: the joint table of another data set of the same size is told apart
    c2 = np.random.default_rng(5).multinomial(10 ** 8, pi / pi.sum()).astype(float)
    rel2 = Release(q, m, 10 ** 8, m.sample(np.asarray(q.t(dom, check=False)).T @ c2,
                                           seed=np.random.default_rng(6)))
    p2 = _margins_post(model, rel2, draws=1500, warmup=300, chains=4, seed=1)
    assert max(map(abs, _agree(pm, p2, entries))) > 2 * K_MCSE


@pytest.mark.parametrize("mech", [Gaussian(rho=2.0), DiscreteGaussian(rho=2.0)],
                         ids=["gaussian", "discrete-gaussian"])
def test_l2_mechanisms_and_release_set_exact(mech):
    """Gaussian-family noise, and a ReleaseSet (Laplace + this mechanism): the whole chain's
    theta against enumeration."""
    model = tiny_model()
    rels = [tiny_release(mech, seed=4), tiny_release(Laplace(epsilon=3.0), seed=5)]
    post = _margins_post(model, ReleaseSet(rels), draws=3000, warmup=300, chains=4, seed=2)
    ex = NBExact(model, rels, 4)
    zs = [z_mean(draws_of(post, e), ex.mean(e)) for e in ENTRIES]
    zs += [z_cdf(draws_of(post, e), ex.quantile(e, 0.5), 0.5) for e in ENTRIES]
    assert max(map(abs, zs)) < K_MCSE, zs


def test_defaults_notes_and_auto():
    """auto takes the margins from n = AUTO_MARGINS_RECORDS_PER_CELL * M on (the records
    below); notes state the latent and the public n; the default moves follow the noise
    ratio."""
    from privpost.models._count_tables import AUTO_MARGINS_RECORDS_PER_CELL as AUTO

    model = tiny_model()
    rel = tiny_release()
    law = model.count_latent(rel)
    assert isinstance(law, MarginsLatent) and not law.auto          # n = 4 < 2 M
    post = pp.infer(model, rel, method="damcmc", draws=200, warmup=100, chains=2, seed=0,
                    progress=False)
    assert _count_latent.latent_of(post)[0] == "records"
    x = model.simulate(model.prior_sample(np.random.default_rng(0)), AUTO * 8,
                       np.random.default_rng(1))
    big = tiny_release(x=x)
    assert model.count_latent(big).auto
    assert _count_latent.latent_of(pp.infer(model, big, method="damcmc", draws=100, warmup=50,
                                            chains=2, seed=0, progress=False))[0] == "counts"
    post = pp.infer(model, rel, method="damcmc", draws=200, warmup=100, chains=2, seed=0,
                    progress=False, latent="counts")
    assert _count_latent.latent_of(post)[0] == "counts"
    note = [n for n in post.notes if "class-by-feature margins" in n][0]
    assert "n = 4" in note and "conditions on the public n = 4" in note
    assert any("unit-refresh" in n for n in post.notes)
    # the prior start (theta from the prior, margins from the model) converges to the same
    # posterior as the data start
    ex = NBExact(model, [rel], 4)
    pp_ = pp.infer(model, rel, method="damcmc", draws=2500, warmup=300, chains=4, seed=5,
                   progress=False, latent="counts", start="prior")
    zs = [z_mean(draws_of(pp_, e), ex.mean(e)) for e in ENTRIES]
    assert max(map(abs, zs)) < K_MCSE, zs
    assert default_moves(150.0, 75, 100, 20.0) == (10, 5)
    assert default_moves(15.0, 75, 1000, 20.0) == (75, 50)
    assert default_moves(1.5, 75, 10 ** 4, 20.0) == (75, 16)
    assert default_moves(1e-4, 75, 10 ** 8, 20.0) == (10, 4)
    assert noise_ratio(law.coords, 4, 8) == pytest.approx(2 * 2.0 ** 2 / 0.5)


def test_swamping_noise_at_census_size_stays_bounded():
    """N = 10^9 released with eps = 10^-4 (noise sd ~ 1.4e5 per count): the margins' refresh
    unit count is capped (MAX_REFRESH_MEAN; bounded work per iteration: the run below would
    refresh ~10^9 units a move without it), and the model declares its joint table instead for
    this release (the capped refresh mixes slowly)."""
    from privpost.inference._count_margins import MAX_REFRESH_MEAN, MarginsLatent
    from privpost.releases.release import Release

    model = tiny_model()
    q = NaiveBayesCounts(2, [2, 2])
    m = Laplace(epsilon=1e-4).calibrate(q.sensitivity("l1"))
    N = 10 ** 9
    true = np.array([3e8, 2e8, 1e8, 4e8, 1e8, 5e8, 4.5e8, 0.5e8])
    rel = Release(q, m, N, m.sample(true, seed=np.random.default_rng(0)))
    law = _law(model, rel)
    assert isinstance(law, MarginsLatent)
    assert law.refresh_mean == MAX_REFRESH_MEAN and law.refresh_capped
    assert not isinstance(model.count_latent(rel), MarginsLatent)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        post = _count_latent.run(law, model, rel, draws=100, warmup=50, chains=2, seed=0,
                                 progress=False)
    assert post.n_draws == 100


def test_hostile_arguments_refused():
    model = tiny_model()
    law = _law(model, tiny_release())
    base = dict(names=law.names, shapes=law.shapes, class_alpha=law.class_alpha,
                feature_alpha=law.feature_alpha, levels=law.levels, N=4, coords=law.coords,
                prior_sample=model.prior_sample, start_release=law.start_release, table="")
    for bad in [dict(N=-1), dict(N=2.5), dict(N=True), dict(feature_alpha=np.zeros(8)),
                dict(class_alpha=np.array([1.0, -1.0])), dict(levels=np.array([2, 3])),
                dict(n_pairs=-1), dict(refresh_mean=0.5), dict(refresh_mean=float("nan")),
                dict(refresh_mean=float("inf"))]:
        with pytest.raises(PrivpostError):
            MarginsLatent(**{**base, **bad})
    # one record (the smallest public n): every refresh replaces the whole data set
    rel1 = tiny_release(x=X4[:1])
    post = _margins_post(model, rel1, draws=2000, warmup=200, chains=4, seed=0)
    ex = NBExact(model, [rel1], 1)
    zs = [z_mean(draws_of(post, e), ex.mean(e)) for e in ENTRIES]
    assert max(map(abs, zs)) < K_MCSE, zs


def test_log_space_dirichlet_has_the_dirichlet_law():
    """The compiled Dirichlet draws' fallback for tiny concentrations (every gamma of a gamma
    normalisation underflowing to 0): ``models._numeric.log_space_dirichlet``. With k = 2 its
    first coordinate is Beta(a, b): the fraction below five exact Beta quantiles, binomial z
    from 20,000 independent draws. Wrong variant (the ``U^(1/a)`` factor left out, i.e.
    Dirichlet(a + 1, b + 1)) must fail."""
    from scipy import stats

    from privpost.models._numeric import log_space_dirichlet

    a, b, M = 0.3, 0.7, 20_000
    rng = np.random.default_rng(11)
    out = np.empty(2)
    x = np.empty(M)
    for r in range(M):
        log_space_dirichlet(np.array([a, b]), out, rng)
        x[r] = out[0]
    assert np.allclose(out.sum(), 1.0)
    levels = np.array([0.1, 0.25, 0.5, 0.75, 0.9])
    qs = stats.beta.ppf(levels, a, b)
    z = (np.array([(x < q).mean() for q in qs]) - levels) / np.sqrt(levels * (1 - levels) / M)
    count_checks(len(levels))
    assert np.max(np.abs(z)) < K_MCSE, z
    wrong = stats.beta.cdf(qs, a + 1, b + 1)
    zw = (wrong - levels) / np.sqrt(levels * (1 - levels) / M)
    assert np.max(np.abs(zw)) > 2 * K_MCSE


def test_tiny_concentrations_do_not_crash_any_latent():
    """Concentrations of 1e-3 make every gamma of an empty row underflow to 0 about half the
    time; the compiled draws (margins, records, a histogram's table) fall back to log space
    instead of dividing 0 by 0 (was a ZeroDivisionError traceback; found by review)."""
    import warnings

    from privpost.models import DirichletCategorical
    from privpost.queries import Histogram

    x = np.zeros((64, 3), dtype=np.int64)
    rel = pp.release(x, query=NaiveBayesCounts(2, [2, 2]), mechanism=Laplace(scale=0.3), seed=4)
    model = NaiveBayesLogLinear(n_levels=[2, 2], n_classes=2, class_alpha=1e-3,
                                feature_alpha=1e-3)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for latent in ("counts", "records"):
            post = pp.infer(model, rel, method="damcmc", draws=300, warmup=100, chains=2,
                            seed=1, progress=False, latent=latent)
            p = np.asarray(post.draws["p"])
            assert np.all(np.isfinite(p)) and np.allclose(p.sum(axis=-1), 1.0)
        hrel = pp.release(np.zeros(64, dtype=np.int64), query=Histogram(4),
                          mechanism=Laplace(scale=0.3), seed=4)
        post = pp.infer(DirichletCategorical(alpha=[1e-3] * 4), hrel, method="damcmc",
                        draws=300, warmup=100, chains=2, seed=1, progress=False,
                        latent="counts")
        assert np.all(np.isfinite(np.asarray(post.draws["p"])))


def test_auto_keeps_the_joint_table_where_the_refresh_would_be_capped():
    """Where the noise is large against a unit's effect on a large data set the margins'
    refresh is held at its cap and mixes slowly (review: N = 10^7, Laplace b = 300, 19 ESS per
    CPU-s against the joint table's 668); the model then declares its joint table (same exact
    posterior), and the margins elsewhere."""
    from privpost.inference._count_margins import MarginsLatent
    from privpost.inference._count_table import CountTable

    q = NaiveBayesCounts(2, [2, 3])
    N = 10**7
    s = np.round(np.array([.06, .24, .42, .28, .03, .09, .18, .35, .175, .175]) * N)
    model = NaiveBayesLogLinear(n_levels=[2, 3], n_classes=2)
    for b, n, kind in ((300.0, N, CountTable), (1.0, N, MarginsLatent),
                       (300.0, 900, MarginsLatent)):      # 900 units: under the cap
        rel = pp.Release(query=q, mechanism=Laplace(scale=b).calibrate(q.sensitivity("l1")),
                         observed=s * n / N, n=n)
        law = model.count_latent(rel)
        assert isinstance(law, kind), (b, n, type(law))
        assert isinstance(law, MarginsLatent) or "joint count table" in law.table


# ============================================================================================
# the quantile-shift (non-centred) move of p (privpost.inference._margins_shift)
# ============================================================================================

@pytest.mark.parametrize("n, pi", [(0, 0.3), (1, 0.5), (7, 0.0), (7, 1.0), (100, 0.3),
                                   (100, 1e-9), (100, 1 - 1e-9), (4000, 0.02), (100_000, 0.5),
                                   (100_000, 0.999)])
def test_binomial_window_against_scipy(n, pi):
    """The tabulated binomial (``binom_window``): CDF and survival against SciPy (relative,
    where above the window's omitted mass), the omitted mass below Bernstein's 1e-20, the
    preimage of each count equal to its pmf, ``invert(draw(x)) == x`` for every count; WRONG:
    the u refresh off by one (the preimage of x - 1) never returns x."""
    from scipy import stats

    from privpost.inference._margins_shift import (binom_window, draw_uniform, invert_uniform,
                                                   window_size)

    F, S = np.zeros(window_size(n)), np.zeros(window_size(n))
    lo, hi = binom_window(float(n), pi, F, S)
    xs = np.arange(lo, hi + 1)
    assert hi - lo + 1 <= F.size
    ef, es = stats.binom.cdf(xs, n, pi), stats.binom.sf(xs, n, pi)
    w = hi - lo + 1
    # relative to rounding, absolute to the omitted mass (< 1e-20)
    assert np.allclose(F[:w], ef, rtol=1e-11, atol=1e-20)
    assert np.allclose(S[:w], es, rtol=1e-11, atol=1e-20)
    assert stats.binom.cdf(lo - 1, n, pi) + stats.binom.sf(hi, n, pi) < 1e-20
    rng = np.random.default_rng(0)
    lens = []
    for x in xs:
        a = x - lo
        f0, s0 = (F[a - 1], S[a - 1]) if a else (0.0, 1.0)
        lens.append(max(0.0, min(F[a], 0.5) - f0) + max(0.0, min(s0, 0.5) - S[a]))
        if lens[-1] > 0:
            for _ in range(4):
                v, up = draw_uniform(int(x), lo, hi, F, S, rng, 0)
                assert up in (0, 1) and 0 <= v <= 0.5
                assert invert_uniform(v, up, lo, hi, F, S) == x
                v, up = draw_uniform(int(x), lo, hi, F, S, rng, 1)        # WRONG
                assert up < 0 or invert_uniform(v, up, lo, hi, F, S) != x
    assert np.allclose(lens, stats.binom.pmf(xs, n, pi), rtol=0, atol=1e-14)
    assert draw_uniform(hi + 1, lo, hi, F, S, rng, 0)[1] == -1           # off the window


def _shift_law(model, rel, wrong=0, row_map=1):
    """The margins chain with the quantile shift ALONE (no pair moves, no refresh; the exact
    theta draw of every iteration does not move the margins); ``row_map`` 1: rows by thinning /
    adding, 0: by their own quantile uniforms."""
    law = _law(model, rel, n_pairs=0, n_refresh=0, n_shift=4)
    law.shift_wrong = wrong
    law.shift_row_map = row_map
    return law


SHIFT_CASES = {
    "laplace": lambda: tiny_release(),                                  # b = 2
    "gaussian": lambda: tiny_release(Gaussian(rho=0.5), seed=4),         # sigma = 2
    "noise-dominated": lambda: tiny_release(Laplace(epsilon=0.2), seed=5),   # b = 20
}


@pytest.mark.parametrize("row_map", [1, 0], ids=["rows-thinned", "rows-quantile"])
@pytest.mark.parametrize("case", list(SHIFT_CASES))
def test_shift_alone_against_enumeration(case, row_map):
    """The quantile-shift move alone (with the theta draws, which leave the margins where they
    are) keeps the exact p(m | s) and p(theta | s), Laplace and Gaussian noise, and noise that
    swamps the counts; the rows following the class counts by thinning / adding or by their
    own quantiles."""
    model = tiny_model()
    rel = SHIFT_CASES[case]()
    law = _shift_law(model, rel, row_map=row_map)
    exact, ex = margins_law(model, [rel], 4)
    ms, res = run_chains(law, 4000)
    zs = margins_zs(ms, exact, CELLS)
    assert len(zs) >= 6
    assert max(map(abs, zs.values())) < K_MCSE, zs
    zt = theta_zs(res, ex, ENTRIES)
    assert max(map(abs, zt)) < K_MCSE, zt
    acc = [r["shift_accept"] for r in res]
    assert 0.05 < min(acc) and max(acc) < 0.95, acc


@pytest.mark.parametrize("wrong", [1, 2, 3], ids=["u-interval-off-by-one",
                                             "jacobian-left-out", "thinning-by-level"])
def test_shift_wrong_variants_fail(wrong):
    """WRONG variants of the move alone: the u refresh drawn on the preimage of ``x - 1``, the
    prior ratio without the additive-log-ratio Jacobian (``prod p^(a - 1)``), and the rows
    thinned by removing a uniform non-empty level instead of a uniform unit; each must be told
    apart from the exact law (class count, a row cell, p)."""
    model = tiny_model()
    rel = SHIFT_CASES["noise-dominated"]()
    exact, ex = margins_law(model, [rel], 4)
    # the level-thinning's bias is the smallest (|z| ~ 6 at 3,000 iterations): longer chains
    ms, res = run_chains(_shift_law(model, rel, wrong), 20000 if wrong == 3 else 3000)
    zs = list(margins_zs(ms, exact, CELLS).values())
    zs += [z_mean(np.stack([r["p"][:, 0] for r in res]), ex.mean(("p", 0)))]
    assert max(map(abs, zs)) > 2 * K_MCSE, zs


def test_shift_defaults_and_refusals():
    """The move is on by default where the noise dominates and N <= SHIFT_MAX_N, off
    elsewhere; a hostile n_shift is refused naming the field; the notes state the move."""
    from privpost.inference._margins_shift import SHIFT_MAX_N, SHIFT_MIN_RATIO, default_shifts

    assert default_shifts(SHIFT_MIN_RATIO, 100) == 8 and default_shifts(100.0, 100) == 4
    assert default_shifts(SHIFT_MIN_RATIO / 2, 100) == 0
    assert default_shifts(1e6, SHIFT_MAX_N + 1) == 0
    model = tiny_model()
    rel = tiny_release(Laplace(epsilon=0.2))
    law = _law(model, rel)
    assert law.noise_ratio >= SHIFT_MIN_RATIO and law.n_shift == 4
    base = dict(names=law.names, shapes=law.shapes, class_alpha=law.class_alpha,
                feature_alpha=law.feature_alpha, levels=law.levels, N=4, coords=law.coords,
                prior_sample=model.prior_sample, start_release=law.start_release, table="")
    for bad in (-1, 1001, 2.5, True, "4", float("nan")):
        with pytest.raises(PrivpostError, match="n_shift"):
            MarginsLatent(**base, n_shift=bad)
    with pytest.raises(PrivpostError, match="n_shift"):
        MarginsLatent(**{**base, "N": SHIFT_MAX_N + 1}, n_shift=1)
    assert MarginsLatent(**base, n_shift=0).n_shift == 0
    post = _margins_post(model, rel, draws=200, warmup=100, chains=2, seed=0)
    assert any("quantile-shift" in n for n in post.notes), post.notes


def test_shift_adapts_in_the_warm_up_only():
    """The shift's proposal (scale and Cholesky factor) moves during the warm-up and is frozen
    once draws are kept; its acceptance counts only the kept iterations."""
    model = tiny_model()
    law = _shift_law(model, SHIFT_CASES["noise-dominated"]())
    ch = law.chains([np.random.default_rng(0)], "data")[0]
    f0 = ch.iw_f.copy()
    ch.run(300, False)
    assert ch.iw_f[0] != f0[0] and ch.sh_counts[0] == 0
    f1, L1 = ch.iw_f.copy(), ch.iw_chol.copy()
    ch.run(300, True)
    np.testing.assert_array_equal(ch.iw_f, f1)
    np.testing.assert_array_equal(ch.iw_chol, L1)
    assert ch.sh_counts[0] == 300 * law.n_shift and 0 < ch.sh_counts[1] < ch.sh_counts[0]
