"""HMM samplers (seed 004 §4–5) against exact enumeration on tiny cases.

Label-invariant targets (the prior is symmetric in the states): P(z_a == z_b), the imputed
true counts E[n_c] (damcmc), and E[theta_{z_0}] (the emission distribution of the first
cell's state). Exact values: enumerate the state paths (and the true counts), with A and theta
integrated analytically (Dirichlet-multinomial). Tolerances: |z| < K_MCSE (tests/_tolerance.py)
against MCSE from ArviZ's ESS; every test also checks that a wrong target is rejected
(|z| > K_MCSE).
"""

from __future__ import annotations

import itertools
import warnings

import numpy as np
import pytest
from scipy.special import gammaln

import privpost as pp
from privpost.queries.cell_counts import CellCounts
from privpost.mechanisms import Laplace
from privpost.models.hmm import HiddenMarkovNB
from privpost.releases.release import Release

from _tolerance import K_MCSE


def _log_polya_paths(z, K, alpha):
    """log p(z) with the start row and the transition rows integrated (Dirichlet(alpha))."""
    ntr = np.zeros((K + 1, K))
    for row in np.atleast_2d(z):
        prev = K
        for k in row:
            ntr[prev, k] += 1
            prev = k
    lp = 0.0
    for a in range(K + 1):
        lp += gammaln(K * alpha) - gammaln(K * alpha + ntr[a].sum())
        lp += np.sum(gammaln(alpha + ntr[a]) - gammaln(alpha))
    return lp


def _log_dirmult(S, beta):
    """log of int prod_j theta_j^{S_j} Dirichlet(theta; beta) dtheta."""
    J = S.size
    return (gammaln(J * beta) - J * gammaln(beta) + np.sum(gammaln(beta + S))
            - gammaln(J * beta + S.sum()))


def _enumerate(counts_options, K, alpha, beta, sizes, total=None):
    """Exact posterior expectations of the label-invariant targets, one feature.

    ``counts_options``: per cell, a list of (count vector, log weight) -- the true-count
    hypotheses and their log noise likelihood (+ log multinomial coefficient). ``total``: keep
    only the combinations whose counts sum to it (cell sizes conditioned on a known total).
    Returns ``same01``, ``same12`` (floats), ``theta_z0`` (J,) and ``counts`` (C arrays (J,)).

    Vectorised over the ``M = prod_c len(counts_options[c])`` combinations of hypotheses (one
    array pass per state path ``z``, ``K^C`` of them), the same sum as a loop over
    ``(z, combination)`` pairs."""
    C = len(counts_options)
    cnts = [np.array([np.asarray(o[0], dtype=float) for o in opts]) for opts in counts_options]
    lws = [np.array([float(o[1]) for o in opts]) for opts in counts_options]
    grid = np.stack(np.meshgrid(*[np.arange(len(o)) for o in counts_options], indexing="ij"),
                    axis=-1).reshape(-1, C)                      # (M, C) option indices
    cnt = np.stack([cnts[c][grid[:, c]] for c in range(C)], axis=1)      # (M, C, J)
    lw0 = sum(lws[c][grid[:, c]] for c in range(C))                      # (M,)
    if total is not None:
        keep = cnt.sum(axis=(1, 2)) == total
        cnt, lw0 = cnt[keep], lw0[keep]
    J = cnt.shape[2]

    def log_dirmult(S):                     # _log_dirmult over the rows of S (M, J)
        return (gammaln(J * beta) - J * gammaln(beta) + gammaln(beta + S).sum(axis=1)
                - gammaln(J * beta + S.sum(axis=1)))

    logw, same01, same12, th = [], [], [], []
    for z in itertools.product(range(K), repeat=C):
        z = np.array(z)
        lw = lw0 + _log_polya_paths(z, K, alpha)
        for k in range(K):
            lw = lw + log_dirmult(cnt[:, z == k].sum(axis=1))
        S0 = cnt[:, z == z[0]].sum(axis=1)                               # (M, J)
        logw.append(lw)
        th.append((beta + S0) / (beta * J + S0.sum(axis=1, keepdims=True)))
        same01.append(float(z[0] == z[1]))
        same12.append(float(z[1] == z[2]))
    logw = np.stack(logw)                                                # (K^C, M)
    w = np.exp(logw - logw.max())
    w /= w.sum()
    wz = w.sum(axis=1)                                                   # (K^C,)
    return {"same01": float(wz @ np.array(same01)), "same12": float(wz @ np.array(same12)),
            "theta_z0": np.einsum("zm,zmj->j", w, np.stack(th)),
            "counts": [w.sum(axis=0) @ cnt[:, c] for c in range(C)]}


def _mcse_z(samples, exact):
    """z-score of the chain mean of ``samples (chains, draws)`` against ``exact``."""
    import arviz as az

    x = np.asarray(samples, dtype=float)
    if np.ptp(x) == 0:
        return 0.0 if x.flat[0] == exact else np.inf
    ess = float(az.ess(np.atleast_2d(x)))
    se = x.std(ddof=1) / np.sqrt(ess)
    return (x.mean() - exact) / se


def _chain_targets(post, K):
    z = post.sample_stats["z"].astype(int)              # (chains, draws, 1, C)
    th = post.draws["theta1"]                           # (chains, draws, K, J)
    same01 = (z[..., 0, 0] == z[..., 0, 1]).astype(float)
    same12 = (z[..., 0, 1] == z[..., 0, 2]).astype(float)
    theta_z0 = np.take_along_axis(th, z[..., 0, 0][..., None, None], axis=2)[..., 0, :]
    return same01, same12, theta_z0


# --------------------------------------------------------------------------------------------
SIZES = np.array([[2, 1, 2]])
K, ALPHA, BETA = 2, 0.7, 1.0


def _release(obs, scale=1.0):
    q = CellCounts([2], SIZES)
    mech = Laplace(scale=scale).calibrate(q.sensitivity("l1"))
    return Release(query=q, mechanism=mech, n=int(SIZES.sum()), observed=np.asarray(obs, float))


def _noisy_options(obs, scale):
    opts = []
    for c, N in enumerate(SIZES.ravel()):
        o = obs[2 * c: 2 * c + 2]
        cell = []
        for m in range(N + 1):
            cnt = np.array([N - m, m], dtype=float)
            lw = gammaln(N + 1) - np.sum(gammaln(cnt + 1)) - np.sum(np.abs(o - cnt)) / scale
            cell.append((cnt, lw))
        opts.append(cell)
    return opts


@pytest.mark.parametrize("latent", ["records", "counts"])
def test_damcmc_matches_enumeration(latent):
    obs = np.array([1.6, 0.2, -0.4, 1.3, 0.3, 2.2])
    rel = _release(obs)
    model = HiddenMarkovNB(K, [2], alpha=ALPHA, beta=BETA)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        post = pp.infer(model, rel, method="damcmc", draws=6000, warmup=300, chains=3, seed=11,
                        keep_counts=True, latent=latent)
    assert post.exact
    same01, same12, theta_z0 = _chain_targets(post, K)
    counts = post.sample_stats["counts"][..., 1]      # level-1 count per cell
    exact = _enumerate(_noisy_options(obs, 1.0), K, ALPHA, BETA, SIZES)
    zs = [_mcse_z(same01, exact["same01"]), _mcse_z(same12, exact["same12"]),
          _mcse_z(theta_z0[..., 1], exact["theta_z0"][1])]
    zs += [_mcse_z(counts[..., c], exact["counts"][c][1]) for c in range(3)]
    assert max(abs(v) for v in zs) < K_MCSE, zs
    # wrong target: the same posterior with the noise scale taken as 0.25 (noise understated)
    wrong = _enumerate(_noisy_options(obs, 0.25), K, ALPHA, BETA, SIZES)
    zw = [_mcse_z(counts[..., c], wrong["counts"][c][1]) for c in range(3)]
    zw.append(_mcse_z(theta_z0[..., 1], wrong["theta_z0"][1]))
    assert max(abs(v) for v in zw) > K_MCSE, zw


@pytest.mark.parametrize("z_sampler", ["collapsed", "ffbs", "marginal"])
def test_nonprivate_gibbs_matches_enumeration(z_sampler):
    """Eq. 68-69 Gibbs (or the FFBS variant) on exact counts = the non-private HMM posterior
    (3 levels, 3 cells)."""
    sizes = np.array([[3, 2, 4]])
    recs = np.array([[0, 0, 0], [0, 0, 2], [0, 0, 2], [0, 1, 1], [0, 1, 1],
                     [0, 2, 0], [0, 2, 0], [0, 2, 2], [0, 2, 1]])
    q = CellCounts([3], sizes)
    rel = pp.release(recs, query=q, mechanism=Laplace(epsilon=1.0), seed=1)
    model = HiddenMarkovNB(K, [3], alpha=ALPHA, beta=BETA)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        post = pp.infer(model, rel, method="nonprivate", records=recs, draws=6000, warmup=200,
                        chains=3, seed=5, z_sampler=z_sampler)
    same01, same12, theta_z0 = _chain_targets(post, K)
    from privpost.inference.hmm import modal_states, state_probabilities
    probs = state_probabilities(post)
    assert probs.shape == (1, 3, K) and np.allclose(probs.sum(axis=-1), 1.0)
    assert np.array_equal(modal_states(post), probs.argmax(axis=-1))
    counts = q.cell_matrix(q.statistic(recs))
    opts = [[(counts[c], 0.0)] for c in range(3)]
    exact = _enumerate(opts, K, ALPHA, BETA, sizes)
    zs = [_mcse_z(same01, exact["same01"]), _mcse_z(same12, exact["same12"])]
    zs += [_mcse_z(theta_z0[..., j], exact["theta_z0"][j]) for j in range(3)]
    assert max(abs(v) for v in zs) < K_MCSE, zs
    # wrong target: a much stickier transition prior (alpha = 0.05) changes P(same state)
    wrong = _enumerate(opts, K, 0.05, BETA, sizes)
    zw = [_mcse_z(same01, wrong["same01"]), _mcse_z(same12, wrong["same12"])]
    assert max(abs(v) for v in zw) > K_MCSE, zw


def test_naive_uses_projected_noisy_counts_exactly():
    """naive = the same Gibbs sampler on max(noisy, 0): compare with the enumeration on the
    projected counts as if exact (real-valued counts: Dirichlet-multinomial with Gamma
    functions), and check the raw (unprojected) counts are a wrong target."""
    obs = np.array([1.6, 0.2, -0.4, 1.3, 0.3, 2.2])
    rel = _release(obs)
    model = HiddenMarkovNB(K, [2], alpha=ALPHA, beta=BETA)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        post = pp.infer(model, rel, method="naive", draws=6000, warmup=200, chains=3, seed=2)
    assert not post.exact
    same01, same12, theta_z0 = _chain_targets(post, K)
    proj = np.maximum(obs, 0).reshape(3, 2)
    exact = _enumerate([[(proj[c], 0.0)] for c in range(3)], K, ALPHA, BETA, SIZES)
    zs = [_mcse_z(same01, exact["same01"]), _mcse_z(same12, exact["same12"]),
          _mcse_z(theta_z0[..., 1], exact["theta_z0"][1])]
    assert max(abs(v) for v in zs) < K_MCSE, zs
    noiseaware = _enumerate(_noisy_options(obs, 1.0), K, ALPHA, BETA, SIZES)
    assert abs(_mcse_z(theta_z0[..., 1], noiseaware["theta_z0"][1])) > K_MCSE


@pytest.mark.parametrize("tries", [0, 1])
def test_truncated_dirichlet_step_is_exact(tries):
    """The pairwise truncated-Beta kernel (forced: tries=0) and the rejection-then-pairwise
    mixture (tries=1) keep the truncated Dirichlet: the chain mean matches exact rejection
    draws (ops.truncated_dirichlet); the untruncated mean is rejected."""
    from privpost.inference.hmm import truncated_dirichlet_step
    from privpost.inference.ops import truncated_dirichlet

    rng = np.random.default_rng(4)
    conc, a0 = np.array([0.4, 3.0, 12.0]), 0.08
    ref = truncated_dirichlet(rng, conc, a0, 40000).mean(axis=0)
    p = np.full(3, 1 / 3)
    xs = np.empty((1, 6000, 3))
    for i in range(6000):
        p = truncated_dirichlet_step(rng, conc, a0, p, tries=tries, sweeps=1)
        xs[0, i] = p
    assert np.all(xs >= a0 - 1e-15)
    zs = [_mcse_z(xs[..., j], ref[j]) for j in range(3)]
    assert max(abs(v) for v in zs) < K_MCSE, zs
    untrunc = conc / conc.sum()
    assert max(abs(_mcse_z(xs[..., j], untrunc[j])) for j in range(3)) > K_MCSE


def test_ops_privacy_statement_and_truncation():
    rng = np.random.default_rng(0)
    sizes = np.array([[5, 4, 6, 3]])
    model = HiddenMarkovNB(2, [3, 2])
    recs, _ = model.simulate_cells(model.prior_sample(rng), sizes, rng)
    q = CellCounts([3, 2], sizes)
    rel = pp.release(recs, query=q, mechanism=Laplace(epsilon=2.0), seed=1)
    post = pp.infer(model, rel, method="ops", records=recs, M=10, seed=3, draws=20, warmup=20)
    C = np.log(3 * 9 + 1) + np.log(2 * 9 + 1)
    assert np.isclose(post.chain_stats["C"][0], C)
    assert np.isclose(post.chain_stats["temperature"][0], 2 * C / 2.0)
    assert np.isclose(post.chain_stats["epsilon_converged"][0], 2.0)
    assert np.isclose(post.chain_stats["epsilon_worst_case"][0], 2 * 40 * 2.0)
    assert post.draws["theta1"].shape == (1, 1, 2, 3)         # one released sample
    assert post.draws["theta1"].min() >= 1 / 30 - 1e-15
    assert post.draws["theta2"].min() >= 1 / 20 - 1e-15
    assert any("worst case" in n for n in post.notes)
    with pytest.raises(pp.errors.IncompatibleError, match="records="):
        pp.infer(model, rel, method="ops")
    assert not any("OPS chains release" in n for n in post.notes)
    # several chains are several samples: the notes state the composed guarantee
    post3 = pp.infer(model, rel, method="ops", records=recs, M=10, seed=3, draws=20, warmup=20,
                     chains=3)
    assert any("3 OPS chains release 3 samples: by composition 6-DP at convergence, 480-DP "
               "worst case" in n for n in post3.notes), post3.notes


def test_hostile_inputs_and_cli(tmp_path):
    from typer.testing import CliRunner

    from privpost.cli import app

    sizes = np.array([[2, 1, 2]])
    recs = np.array([[0, 0, 0], [0, 0, 1], [0, 1, 1], [0, 2, 0], [0, 2, 0]])
    rel = pp.release(recs, query=CellCounts([2], sizes), mechanism=Laplace(epsilon=1.0), seed=1)
    with pytest.raises(pp.errors.IncompatibleError, match="n_levels=2"):
        pp.infer(HiddenMarkovNB(2, [3]), rel, method="naive")
    with pytest.raises(pp.errors.IncompatibleError, match="not available"):
        pp.infer(HiddenMarkovNB(2, [2]), rel, method="gibbs-ss")
    with pytest.raises(pp.errors.PrivpostError, match="heldout"):
        pp.infer(HiddenMarkovNB(2, [2]), rel, method="naive", heldout=np.ones(3))
    huge = Release(query=CellCounts([2], [[10**9]]), mechanism=rel.mechanism, n=10**9,
                   observed=np.zeros(2))
    with pytest.raises(pp.errors.PrivpostError, match="use latent='counts'"):
        pp.infer(HiddenMarkovNB(2, [2]), huge, method="damcmc", latent="records")
    path = tmp_path / "rel.json"
    rel.save(path)
    res = CliRunner().invoke(app, ["infer", str(path), "--model", "hmm:n_states=2,n_levels=2;",
                                   "--method", "damcmc", "--draws", "50", "--warmup", "20",
                                   "--chains", "2", "--seed", "1", "--json", "--no-progress"])
    assert res.exit_code == 0, res.output
    assert "theta1[0, 1]" in res.output or "theta1[0,1]" in res.output


def test_model_protocol_and_spec():
    from privpost.models import model_from_spec

    m = model_from_spec("hmm:n_states=3,n_levels=4;2,alpha=0.5,beta=2")
    assert isinstance(m, HiddenMarkovNB) and m.n_levels == (4, 2)
    assert model_from_spec(m.to_spec()).to_dict() == m.to_dict()
    rng = np.random.default_rng(0)
    p = m.prior_sample(rng)
    assert {k: v.shape for k, v in p.items()} == m.param_shapes
    recs, z = m.simulate_cells(p, np.array([[3, 0], [2, 4]]), rng)
    assert recs.shape == (9, 4) and z.shape == (2, 2)
    ll = m.log_likelihood({**p, "z": z}, recs)
    k = z[recs[:, 0], recs[:, 1]]
    np.testing.assert_allclose(ll, np.log(p["theta1"][k, recs[:, 2]])
                               + np.log(p["theta2"][k, recs[:, 3]]))
    assert np.isfinite(m.log_prior(p))
    with pytest.raises(pp.errors.IncompatibleError, match="simulate_cells"):
        m.simulate(p, 5, rng)
    with pytest.raises(pp.errors.PrivpostError, match="n_levels"):
        HiddenMarkovNB(2, 3)


def test_heldout_loglik_by_hand():
    """The reproduction's held-out likelihood equals a direct sum over the held-out state."""
    from privpost.experiments.foulds_hmm import heldout_loglik
    from privpost.posterior import Posterior

    rng = np.random.default_rng(3)
    m = HiddenMarkovNB(2, [3])
    p = m.prior_sample(rng)
    z = np.array([[0, 1, 1]])
    post = Posterior(draws={k: v[None, None] for k, v in p.items()},
                     sample_stats={"z": z[None, None].astype(float)})
    counts = np.array([[1., 0, 2], [0, 3, 1], [2, 2, 0]])
    held = np.array([[False, True, False]])
    got = heldout_loglik(post, m, counts, held)
    w = p["A"][0, :] * p["A"][:, 1]
    w = w / w.sum()
    want = np.log(np.sum(w * np.prod(p["theta1"] ** counts[1], axis=1)))
    assert np.isclose(got, want)
    # wrong variant: ignoring the right neighbour's transition changes the value
    w2 = p["A"][0, :]
    assert not np.isclose(got, np.log(np.sum(w2 * np.prod(p["theta1"] ** counts[1], axis=1))))


def test_tiny_reproduction_end_to_end(monkeypatch, tmp_path):
    import dataclasses
    import importlib

    R = importlib.import_module("privpost.experiments.reproduce")

    rep = R.REPRODUCTIONS["foulds2016-hmm"]
    tiny = {"regimes": ("dense", "sparse"), "regions": 2, "times": {"dense": 5, "sparse": 6},
            "epsilon": (1.0,), "splits": 1, "states": 2, "true_states": 2,
            "calibration": {"replicates": 1, "states": 2, "levels": (2,), "regions": 1,
                            "times": 3, "cell_size": 3, "epsilon": 1.0, "draws": 20,
                            "warmup": 10}}
    monkeypatch.setitem(R.REPRODUCTIONS, "foulds2016-hmm",
                        dataclasses.replace(rep, sizes={"quick": tiny, "full": tiny}))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        out = R.reproduce("foulds2016-hmm", outdir=tmp_path, progress=False)
    text = out.report_path.read_text()
    assert "The paper's claims" in text and "OPS / Laplace" in text
    assert "| dense | HMM K=2 | damcmc | 1 |" in text
    assert "90% coverage" in text and "| damcmc |" in text


def test_truncated_dirichlet_blocks_bit_identical_to_per_block_loop():
    """The batched OPS emission update (one compiled call for the rejection attempts of all
    K x D blocks, Python fallback only for failing blocks) is bit-identical to one
    truncated_dirichlet_step per block in state-major order -- the speed-up keeps the same
    chain, not merely the same target. Some blocks are made improbable (large counts on a
    level and a0 far above its share) so the pairwise fallback is exercised between compiled
    blocks. Wrong variant: feature-major order consumes the stream differently and differs."""
    from privpost.inference.hmm import truncated_dirichlet_blocks, truncated_dirichlet_step

    levels = np.array([3, 5, 2], dtype=np.int64)
    off = np.array([0, 3, 8], dtype=np.int64)
    K, W = 4, 10
    a0 = [0.05, 0.03, 0.1]
    base = np.random.default_rng(1)
    conc = 1.0 + base.gamma(1.0, 3.0, size=(K, W))
    conc[1, 0:3] = [900.0, 1.0, 1.0]          # box {p >= 0.05} has tiny probability
    conc[3, 3:8] = [1.0, 2000.0, 1.0, 1.0, 1.0]
    theta0 = np.empty((K, W))
    for d in range(3):
        theta0[:, off[d]:off[d] + levels[d]] = 1.0 / levels[d]

    def loop(seed, order):
        rng = np.random.default_rng(seed)
        th = theta0.copy()
        for k, d in order:
            blk = slice(int(off[d]), int(off[d] + levels[d]))
            th[k, blk] = truncated_dirichlet_step(rng, conc[k, blk], a0[d], th[k, blk])
        return th

    state_major = [(k, d) for k in range(K) for d in range(3)]
    for seed in range(5):
        rng = np.random.default_rng(seed)
        th = theta0.copy()
        truncated_dirichlet_blocks(rng, conc, off, levels, a0, th, fallback="exact")
        assert np.array_equal(th, loop(seed, state_major))
        assert np.all(th[:, 0:3] >= 0.05 - 1e-15) and np.all(th[:, 3:8] >= 0.03 - 1e-15)
        # the stream is left in the same state too (the chain continues identically)
        ref_rng = np.random.default_rng(seed)
        th2 = theta0.copy()
        for k, d in state_major:
            blk = slice(int(off[d]), int(off[d] + levels[d]))
            th2[k, blk] = truncated_dirichlet_step(ref_rng, conc[k, blk], a0[d], th2[k, blk])
        loop_rng_state = ref_rng.random()
        assert rng.random() == loop_rng_state
    feature_major = [(k, d) for d in range(3) for k in range(K)]
    assert not np.array_equal(th, loop(4, feature_major))


def test_state_calibration_by_hand():
    """Modal-state accuracy, confidence and P(true state) on a hand example with a 3-cycle
    alignment (fitted i <-> true perm[i]); wrong variant: using perm itself (instead of its
    inverse) to map true states to fitted ones gives a different P(true state)."""
    from privpost.experiments.foulds_hmm import state_calibration

    zs = np.array([[[0, 1, 2]], [[0, 1, 1]], [[0, 2, 1]], [[1, 1, 1]]])     # (S=4, R=1, T=3)
    perm = np.array([2, 0, 1])                   # fitted 0 = true 2, fitted 1 = true 0, ...
    z_true = np.array([[2, 0, 1]])
    acc, conf, ptrue = state_calibration(zs, perm, z_true, 3)
    # cell 0: fitted probs (3/4, 1/4, 0), modal fitted 0 = true 2 (correct), P(true=2)=P(f0)=3/4
    # cell 1: (0, 3/4, 1/4), modal fitted 1 = true 0 (correct), P(true 0) = P(f1) = 3/4
    # cell 2: (0, 3/4, 1/4), modal fitted 1 = true 0 (wrong: truth 1), P(true 1) = P(f2) = 1/4
    assert np.isclose(acc, 2 / 3)
    assert np.isclose(conf, 3 / 4)
    assert np.isclose(ptrue, (3 / 4 + 3 / 4 + 1 / 4) / 3)
    fitted_probs = [[0.75, 0.25, 0.0], [0.0, 0.75, 0.25], [0.0, 0.75, 0.25]]
    wrong = np.mean([fitted_probs[c][perm[t]] for c, t in enumerate([2, 0, 1])])
    assert not np.isclose(ptrue, wrong)


def test_heldout_md_aggregates_complete_splits_only():
    """The summary table is the mean and sd across splits of the per-split rows (computed
    here independently), and a split missing a regime (a run stopped early) is dropped."""
    import pandas as pd

    from privpost.experiments.foulds_hmm import heldout_md

    s = {"regimes": ("dense", "sparse"), "states": 2, "epsilon": (1.0,), "true_states": 2}
    rng = np.random.default_rng(0)
    rows = []
    for split in range(3):
        for regime in (("dense", "sparse") if split < 2 else ("dense",)):
            for model in ("naive Bayes", "HMM K=2"):
                for method, eps in (("non-private", np.inf), ("laplace", 1.0),
                                    ("ops M=10", 1.0), ("ops M=100", 1.0), ("damcmc", 1.0)):
                    rows.append(dict(regime=regime, model=model, split=split, epsilon=eps,
                                     method=method, ll=-6 + rng.normal(), states=2.0,
                                     seconds=1.0 + rng.random()))
    table = pd.DataFrame(rows)
    lines, claims, ratio, dam_ratio, agg = heldout_md(table, s)
    assert "mean over 2 splits" in lines[0]
    sel = table[(table.split < 2) & (table.regime == "dense") & (table.model == "HMM K=2")
                & (table.method == "laplace")].ll
    got = agg[(agg.regime == "dense") & (agg.model == "HMM K=2") & (agg.method == "laplace")]
    assert np.isclose(float(got.ll.iloc[0]), sel.mean())
    assert np.isclose(float(got.ll_sd.iloc[0]), sel.std(ddof=1))
    # wrong variant: keeping the incomplete split 2 changes the dense mean
    all3 = table[(table.regime == "dense") & (table.model == "HMM K=2")
                 & (table.method == "laplace")].ll
    assert not np.isclose(float(got.ll.iloc[0]), all3.mean())
    assert len(claims) == 6 and np.isfinite(ratio) and np.isfinite(dam_ratio)
    # the claims use per-split paired differences of complete splits: dense HMM, Laplace - best OPS
    d = table[(table.split < 2) & (table.regime == "dense") & (table.model == "HMM K=2")]
    w = d.pivot_table(index="split", columns="method", values="ll")
    gap = w["laplace"] - w[["ops M=10", "ops M=100"]].max(axis=1)
    assert f"{gap.mean():+.3f} ± {gap.std(ddof=1):.3f}" in claims[3][2]


@pytest.mark.parametrize("tries", [0, 1])
def test_compiled_slice_fallback_keeps_truncated_dirichlet(tries):
    """The compiled OPS emission update (rejection, then slice-sampling pairwise moves; forced
    with tries=0) leaves the truncated Dirichlet invariant: the chain mean of every component
    matches exact rejection draws (ops.truncated_dirichlet) within K_MCSE MCSE, in a box that the
    rejection step rarely hits; the untruncated mean is rejected (wrong target)."""
    from privpost.inference.hmm import truncated_dirichlet_blocks
    from privpost.inference.ops import truncated_dirichlet

    rng = np.random.default_rng(7)
    conc = np.array([[0.4, 3.0, 12.0, 1.0, 30.0]])           # blocks: levels 3 and 2
    off, levels = np.array([0, 3]), np.array([3, 2])
    a0 = [0.08, 0.1]
    refs = [truncated_dirichlet(rng, conc[0, :3], a0[0], 40000).mean(axis=0),
            truncated_dirichlet(rng, conc[0, 3:], a0[1], 40000).mean(axis=0)]
    ref = np.concatenate(refs)
    th = np.array([[1 / 3, 1 / 3, 1 / 3, 0.5, 0.5]])
    n = 6000
    xs = np.empty((1, n, 5))
    for i in range(n):
        truncated_dirichlet_blocks(rng, conc, off, levels, a0, th, tries=tries, sweeps=1)
        xs[0, i] = th[0]
    assert np.all(xs[..., :3] >= a0[0] - 1e-15) and np.all(xs[..., 3:] >= a0[1] - 1e-15)
    assert np.allclose(xs[..., :3].sum(-1), 1) and np.allclose(xs[..., 3:].sum(-1), 1)
    zs = [_mcse_z(xs[..., j], ref[j]) for j in range(5)]
    assert max(abs(v) for v in zs) < K_MCSE, zs
    untrunc = np.concatenate([conc[0, :3] / conc[0, :3].sum(), conc[0, 3:] / conc[0, 3:].sum()])
    assert max(abs(_mcse_z(xs[..., j], untrunc[j])) for j in range(5)) > K_MCSE


def test_calibration_summary_from_per_replicate_rows():
    """Coverage mean and its se (sd across replicates / sqrt(n)) per method, computed here
    independently; wrong variant: the binomial se that ignores the within-replicate dependence
    differs."""
    import pandas as pd

    from privpost.experiments.foulds_hmm import calibration_summary

    cov = {"laplace": [0.2, 0.4, 0.1, 0.3], "damcmc": [0.9, 0.8, 1.0, 0.85]}
    rows = [dict(method=m, replicate=i, coverage=v, accuracy=0.5, confidence=0.6, ptrue=0.55)
            for m, vals in cov.items() for i, v in enumerate(vals)]
    out = {r[0]: r for r in calibration_summary(pd.DataFrame(rows))}
    for m, vals in cov.items():
        v = np.array(vals)
        assert np.isclose(out[m][1], v.mean())
        assert np.isclose(out[m][2], v.std(ddof=1) / 2.0)
        assert out[m][3:] == [0.5, 0.6, 0.55]
    assert not np.isclose(out["damcmc"][2], np.sqrt(0.9 * 0.1 / (4 * 12)))
