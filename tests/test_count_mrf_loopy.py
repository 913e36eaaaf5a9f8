"""Count-level ``damcmc`` for a CliqueMRF on a loopy, Erdős–Rényi-like structure (EXPERIMENTS
§9.7; issue 21 item 4): more nodes and cliques than the 3-node chain of
``test_damcmc_counts_tables``, two cycles, every exact computation of the model on its
junction-tree path (the path of §9's 10-node grid, whose joint space is too large to
enumerate), the theta update's HMC step adapted during the warm-up, and the chains' start.

Reference: the exact private posterior by importance sampling from the prior with the exact
likelihood summed over every histogram of the N records (``tests/_mrf_exact.py``), |z| from the
chain's ESS-based Monte Carlo error and the reference's delta-method error, < ``K_MCSE``. Wrong
variants that must fail: the prior (the chain must have moved), and the posterior of the same
release under a noise scale half the true one.
"""

from __future__ import annotations

import math
from dataclasses import replace
import warnings
from types import SimpleNamespace

import numpy as np
import pytest

import privpost as pp
from privpost.mechanisms import Laplace
from privpost.models import CliqueMRF
from privpost.queries.marginal_tables import MarginalTables

from _tolerance import K_MCSE

warnings.filterwarnings("ignore", category=FutureWarning)  # arviz refactor notice

#: 5 binary nodes, 6 edges, two cycles (0-1-2 and 1-2-4-3): a small ER-like graph.
LOOPY = [[0, 1], [0, 2], [1, 2], [1, 3], [2, 4], [3, 4]]


def _jt_model(**kw):
    """The CliqueMRF on LOOPY with its enumeration shortcut switched off: marginals, the
    log-partition and the identified basis come from the junction tree (clamping)."""
    model = CliqueMRF([2] * 5, LOOPY, **kw)
    model._design = None
    model._dom = None
    return model


def _probs(D, th):
    lp = th @ D.T
    lp -= lp.max(-1, keepdims=True)
    p = np.exp(lp)
    return p / p.sum(-1, keepdims=True)


@pytest.mark.slow
@pytest.mark.statistical
def test_loopy_mrf_counts_match_enumeration_on_the_junction_tree_path():
    """5 binary nodes on LOOPY, N = 3, Laplace b = 2 (noise-dominated): the posterior means of
    the 32 joint probabilities against the exact ones (all 5,984 histograms of 3 records).
    Measured: max |z| 2.8 against the exact posterior, 21 against the prior, 13 against the
    half-scale posterior; 29 s of CPU (18 s damcmc, 10 s the reference)."""
    import arviz as az

    from _mrf_exact import design, is_posterior

    model = _jt_model(prior_sd=1.5, n_leapfrog=4)
    q = MarginalTables([2] * 5, LOOPY)
    x = np.array([[0, 0, 0, 1, 1], [1, 1, 0, 0, 1], [1, 1, 1, 1, 1]])
    rel = pp.release(x, query=q, mechanism=Laplace(epsilon=6.0), seed=7)
    assert math.isclose(rel.mechanism.scale, 2.0, rel_tol=1e-12)      # 2 |C| / eps = 12 / 6
    _, D = design(model)
    m, se, _ = is_posterior(model, rel, lambda th: _probs(D, th), draws=60_000, seed=0,
                            batch=2000)
    half = SimpleNamespace(query=rel.query, observed=rel.observed, n=rel.n,
                           mechanism=Laplace(scale=0.5))
    m_half, se_half, _ = is_posterior(model, half, lambda th: _probs(D, th), draws=60_000,
                                      seed=1, batch=2000)

    post = pp.infer(model, rel, method="damcmc", latent="counts", draws=2500, warmup=500,
                    chains=4, seed=3, progress=False)
    notes = " ".join(post.notes)
    assert "latent='counts'" in notes and "step adapted in the warm-up" in notes, post.notes
    th = np.concatenate([post.draws[nm].reshape(post.draws[nm].shape[:2] + (-1,))
                         for nm in model.names], axis=-1)
    vals = _probs(D, th)
    z, z_half, z_prior = [], [], []
    p_prior = _probs(D, np.zeros((1, model.dim)))[0]
    for j in range(D.shape[0]):
        d = vals[..., j]
        se_mc = d.std() / math.sqrt(float(az.ess(np.atleast_2d(d), method="mean")))
        z.append((d.mean() - m[j]) / math.hypot(se_mc, se[j]))
        z_half.append((d.mean() - m_half[j]) / math.hypot(se_mc, se_half[j]))
        z_prior.append((d.mean() - p_prior[j]) / se_mc)
    assert max(map(abs, z)) < K_MCSE, z
    assert max(map(abs, z_prior)) > 2 * K_MCSE, z_prior
    assert max(map(abs, z_half)) > 2 * K_MCSE, z_half


def test_start_is_in_the_prior_range_on_a_loopy_structure():
    """The chains' start (``mrf_table``'s ``fit``) on a dense loopy structure (7 ternary nodes,
    15 edges with many triangles, N = 10^3, eps = 0.5) whose noisy pairwise tables are outside
    the marginal polytope: the identified part of the start's log-potentials stays within twice
    the prior's typical norm (``|B' theta| < 2 sigma sqrt(r)``). Wrong variant, the former start:
    the ridge MLE fitted to the noisy tables themselves, whose identified log-potentials grow like
    ``N x disagreement / ridge`` (here > ``5 sigma sqrt(r)``) -- §9's ER cell started there at
    ``|B' theta| ~ 350`` and stayed (HMC acceptance 0.3 %, R-hat 1.84).

    The noise alone puts the tables outside the polytope at some seeds only (the former start's
    norm was 0.4-15 typical norms over eight seeds), so the tables of the triangle (0, 1, 3) are
    made to contradict each other at every seed: x0 and x1, x1 and x3 agree more often, x0 and
    x3 less (+200 on the diagonal cells, -100 off it, against ~111 units a cell and Laplace
    scale 60). Over eight seeds: the start 0.64-1.19 typical norms, the former start 24.7-30.1."""
    from privpost.inference.mrf_methods import fit_mle

    # a fixed structure (drawn once with each pair kept at probability 0.6): the seeds move the
    # true model, the records and the noise, never the graph
    edges = [[0, 1], [0, 3], [0, 5], [0, 6], [1, 3], [1, 4], [1, 5], [2, 3], [2, 4], [2, 6],
             [3, 4], [3, 5], [3, 6], [4, 5], [4, 6]]
    rng = np.random.default_rng(1)
    model = CliqueMRF([3] * 7, edges, prior_sd=3.0)
    q = MarginalTables([3] * 7, edges)
    true = np.concatenate([np.log(rng.dirichlet(np.ones(9))) for _ in edges])
    x = model.simulate(model.unflatten(true), 1000, rng)
    rel = pp.release(x, query=q, mechanism=Laplace(epsilon=0.5), seed=12)
    agree = np.where(np.eye(3, dtype=bool), 200.0, -100.0).ravel()
    delta = np.zeros(q.dim)
    for e, sign in (([0, 1], 1.0), ([1, 3], 1.0), ([0, 3], -1.0)):
        o = model.offsets[edges.index(e)]
        delta[o:o + 9] = sign * agree
    rel = replace(rel, observed=rel.observed + delta)
    law = model.count_latent(rel)
    B = model.identified_basis()[0]
    typical = model.prior_sd * math.sqrt(B.shape[1])
    for k in range(3):
        th = model.flatten(law.fit(np.random.default_rng(k)))
        assert np.linalg.norm(B.T @ th) < 2 * typical, (k, np.linalg.norm(B.T @ th), typical)
    # the former start: the same smoothed tables, fitted as they are
    y = model.release_tables(q, rel.observed)
    y = np.maximum(y, 0.0) + float(rel.mechanism.scale)
    for o, size in zip(model.offsets, model.sizes):
        y[o:o + size] *= 1000 / y[o:o + size].sum()
    th_old = fit_mle(model, y, 1000.0, 1.0 / (2.0 * model.prior_sd ** 2))
    assert np.linalg.norm(B.T @ th_old) > 5 * typical, np.linalg.norm(B.T @ th_old)


#: 10 records of the 3-node chain: N = 10 > J = 8 units, 1.25 per cell (the compiled quantile
#: shift is the default there, up to min(16 J, 10^4) units).
X10 = np.array([[0, 0, 0], [0, 0, 1], [1, 1, 1], [1, 1, 1], [0, 0, 0], [0, 1, 1], [1, 1, 0],
                [0, 0, 0], [1, 0, 0], [1, 1, 1]])


def _quantile_only(shift, x=None, epsilon=4.0):
    """3-node binary chain, N = 4, Laplace b = 1 (the shared tiny case of ``_mrf_exact``), or the
    records ``x`` and ``epsilon`` given: a chain made of quantile-shift moves alone (no pair
    moves, no theta update), so that the move's own invariance is what is checked; posterior
    means of the 8 joint probabilities."""
    from privpost.inference import _count_latent

    model = CliqueMRF([2, 2, 2], [[0, 1], [1, 2]], prior_sd=1.5)
    q = MarginalTables([2, 2, 2], [[0, 1], [1, 2]])
    if x is None:
        x = np.array([[0, 0, 0], [0, 0, 1], [1, 1, 1], [1, 1, 1]])
    rel = pp.release(x, query=q, mechanism=Laplace(epsilon=epsilon), seed=5)
    law = model.count_latent(rel)
    assert law.shift == "quantile"          # N <= 16 J: the default
    law.shift = shift
    law.n_pairs = 0
    law.hmc_step = None
    law.update = lambda params, c, rng: params
    law.n_shift = 4
    post = _count_latent.run(law, model, rel, draws=3000, warmup=1000, chains=4, seed=4,
                             progress=False)
    return model, rel, post


@pytest.mark.statistical
@pytest.mark.parametrize("case", ["N=4", "N=10>J"])
def test_quantile_shift_alone_keeps_the_exact_posterior(case):
    """The quantile-shift move alone against the enumerated private posterior (|z| < K_MCSE);
    wrong variant: the same move with the residual shift's multinomial ratio in its acceptance
    (the table's information about theta counted twice) must be rejected (> 2 K_MCSE; > K_MCSE
    for ``N=10>J``, the rule of tests/_tolerance.py).
    ``N=10>J``: more units than cells (10 records of the 3-node chain, Laplace b = 2; all 19,448
    histograms of 10 records), a regime where the compiled quantile shift is the default (up to
    min(16 J, 10^4) units) and which the N = 4 case does not reach."""
    import arviz as az

    from _mrf_exact import design, is_posterior

    kw = {} if case == "N=4" else {"x": X10, "epsilon": 2.0}
    model, rel, post = _quantile_only("quantile", **kw)
    _, D = design(model)
    m, se, _ = is_posterior(model, rel, lambda th: _probs(D, th),
                            draws=40_000 if case == "N=4" else 20_000, seed=0, batch=1000)

    def zs(post):
        th = np.concatenate([post.draws[nm].reshape(post.draws[nm].shape[:2] + (-1,))
                             for nm in model.names], axis=-1)
        vals = _probs(D, th)
        out = []
        for j in range(D.shape[0]):
            d = vals[..., j]
            se_mc = d.std() / math.sqrt(float(az.ess(np.atleast_2d(d), method="mean")))
            out.append((d.mean() - m[j]) / math.hypot(se_mc, se[j]))
        return out

    z = zs(post)
    assert max(map(abs, z)) < K_MCSE, z
    _, _, wrong = _quantile_only("quantile-wrong", **kw)
    z_wrong = zs(wrong)
    # N=10>J measured: max |z| 0.83 and 0.69, wrong variant 10.6 and 19.7 (offsets 0, 1); 2, 3 pass
    assert max(map(abs, z_wrong)) > (2 * K_MCSE if case == "N=4" else K_MCSE), z_wrong
