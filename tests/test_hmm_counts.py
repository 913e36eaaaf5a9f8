"""Count-level damcmc for the HMM (issue 21, COUNTS.md piece 3): the true counts of every
(cell, feature) are imputed by exact pair moves given the states, then the z / theta Gibbs moves.

References:

* the compiled group sweep alone against the exact conditional of one group's counts given
  (z, theta, obs), by enumeration of the compositions (wrong variant: the multinomial
  coefficient left out);
* the whole sampler on a tiny release (2 features, 3 cells, 2 states) against an enumeration of
  the state paths and the true count tables with A and theta integrated analytically
  (Dirichlet-multinomial; :mod:`test_hmm`'s construction), Laplace and Gaussian noise; wrong
  variants: the multinomial coefficients left out, and the noise scale understated;
* count-level against record-level damcmc on a 2 x 3 grid (two-sample |z| from both chains'
  Monte Carlo error), with a wrong record-level run (noise scale misstated) that must differ.

Tolerances: |z| < 4 against MCSE from ArviZ's ESS of each target; wrong variants |z| > 4
(every statistic is bounded: indicators, probabilities and counts in [0, N]).
"""

from __future__ import annotations

import itertools
import sys
import warnings
from pathlib import Path

import numpy as np
import pytest
from scipy.special import gammaln

import privpost as pp
from privpost.queries.cell_counts import CellCounts
from privpost.errors import PrivpostError
from privpost.mechanisms import Gaussian, Laplace
from privpost.models.hmm import HiddenMarkovNB
from privpost.releases.release import Release

sys.path.insert(0, str(Path(__file__).parent))
from test_hmm import _log_dirmult, _log_polya_paths, _mcse_z  # noqa: E402

warnings.filterwarnings("ignore", category=FutureWarning)

from _tolerance import K_MCSE  # noqa: E402  (family-wise; tests/_tolerance.py)


def _compositions(N, J):
    """Every count vector of J non-negative integers summing to N."""
    for cut in itertools.combinations(range(N + J - 1), J - 1):
        b = (-1,) + cut + (N + J - 1,)
        yield np.array([b[i + 1] - b[i] - 1 for i in range(J)], dtype=float)


def _log_noise(o, n, kind, scale):
    z = np.asarray(o, float) - n
    return -np.sum(np.abs(z)) / scale if kind == "l1" else -np.sum(z * z) / (2 * scale ** 2)


# --------------------------------------------------------------------------------------------
# the compiled group sweep alone
# --------------------------------------------------------------------------------------------

@pytest.mark.parametrize("l2", [False, True])
def test_count_sweep_keeps_the_exact_group_conditional(l2):
    """One cell, one feature of 4 levels, N = 5, fixed state and theta: iterating
    ``count_sweep`` samples p(n | theta, obs) ∝ Mult(n; N, theta) eta(obs - n); the chain means
    of the four counts match the enumeration over all 56 compositions; without the multinomial
    coefficient (a wrong conditional) they do not."""
    from privpost.inference._hmm_core import count_sweep

    J, N = 4, 5
    theta = np.array([[0.1, 0.2, 0.3, 0.4]])
    obs = np.array([[3.7, -0.8, 1.2, 0.4]])
    scale = 1.3
    kind = "l2" if l2 else "l1"
    w = 1.0 / (2 * scale * scale) if l2 else 1.0 / scale
    comps = list(_compositions(N, J))
    lw = np.array([gammaln(N + 1) - gammaln(n + 1).sum() + n @ np.log(theta[0])
                   + _log_noise(obs[0], n, kind, scale) for n in comps])
    lw_wrong = np.array([n @ np.log(theta[0]) + _log_noise(obs[0], n, kind, scale)
                         for n in comps])
    means = []
    for v in (lw, lw_wrong):
        p = np.exp(v - v.max())
        means.append((p[:, None] * np.array(comps)).sum(0) / p.sum())
    rng = np.random.default_rng(3)
    counts = np.array([[float(N), 0.0, 0.0, 0.0]])
    z = np.zeros((1, 1), dtype=np.int64)
    off, levels = np.array([0]), np.array([J])
    use = np.ones(1, dtype=np.int64)
    S = 20000
    xs = np.empty((2, S // 2, J))
    for s in range(S):
        count_sweep(z, np.log(theta), off, levels, counts, obs, w, l2, use, 1, rng)
        xs[s % 2, s // 2] = counts[0]
        assert counts.sum() == N and counts.min() >= 0
    zs = [_mcse_z(xs[..., j], means[0][j]) for j in range(J)]
    assert max(abs(v) for v in zs) < K_MCSE, zs
    zw = [_mcse_z(xs[..., j], means[1][j]) for j in range(J)]
    assert max(abs(v) for v in zw) > K_MCSE, zw


# --------------------------------------------------------------------------------------------
# the whole sampler against enumeration
# --------------------------------------------------------------------------------------------

SIZES = np.array([[2, 1, 2]])
LEVELS = (3, 2)
K, ALPHA, BETA = 2, 0.7, 1.0


def _cell_options(obs, sizes, levels, kind, scale, coef=True):
    """Per cell, every (count table, log weight): the product over features of the count
    vectors with log multinomial coefficient (unless ``coef=False``) + log noise density."""
    W = sum(levels)
    off = np.concatenate([[0], np.cumsum(levels)[:-1]])
    opts = []
    for c, N in enumerate(np.asarray(sizes).ravel()):
        o = obs[c * W:(c + 1) * W]
        per = []
        for d, J in enumerate(levels):
            per.append([(n, (gammaln(N + 1) - gammaln(n + 1).sum() if coef else 0.0)
                         + _log_noise(o[off[d]:off[d] + J], n, kind, scale))
                        for n in _compositions(int(N), J)])
        opts.append([(np.concatenate([p[0] for p in prod]), sum(p[1] for p in prod))
                     for prod in itertools.product(*per)])
    return opts


def _enumerate(opts, levels):
    """Exact posterior expectations of P(z0 == z1), P(z1 == z2), E[theta_1[z0]] (W,) and the
    true counts E[n_c] (W,) per cell, A and theta integrated out (one chain of 3 cells)."""
    off = np.concatenate([[0], np.cumsum(levels)[:-1]])
    C = len(opts)
    logw, items = [], []
    for z in itertools.product(range(K), repeat=C):
        lpz = _log_polya_paths(np.array(z), K, ALPHA)
        for choice in itertools.product(*[range(len(o)) for o in opts]):
            cnt = [opts[c][i][0] for c, i in enumerate(choice)]
            lw = lpz + sum(opts[c][i][1] for c, i in enumerate(choice))
            S = {k: sum((cnt[c] for c in range(C) if z[c] == k), np.zeros_like(cnt[0]))
                 for k in range(K)}
            for k in range(K):
                for d, J in enumerate(levels):
                    lw += _log_dirmult(S[k][off[d]:off[d] + J], BETA)
            S0 = S[z[0]]
            th = np.concatenate([(BETA + S0[off[d]:off[d] + J])
                                 / (J * BETA + S0[off[d]:off[d] + J].sum())
                                 for d, J in enumerate(levels)])
            logw.append(lw)
            items.append((z, np.array(cnt), th))
    w = np.exp(np.array(logw) - max(logw))
    w /= w.sum()
    return {"same01": sum(wi * (z[0] == z[1]) for wi, (z, _, _) in zip(w, items)),
            "same12": sum(wi * (z[1] == z[2]) for wi, (z, _, _) in zip(w, items)),
            "theta_z0": sum(wi * th for wi, (_, _, th) in zip(w, items)),
            "counts": sum(wi * cnt for wi, (_, cnt, _) in zip(w, items))}


def _targets(post, levels):
    """Label-invariant draws: same01, same12 (chains, draws); theta of z0's state
    (chains, draws, W); the imputed counts (chains, draws, C, W)."""
    z = post.sample_stats["z"].astype(int)[..., 0, :]         # (chains, draws, C)
    th = np.concatenate([post.draws[f"theta{d + 1}"] for d in range(len(levels))], axis=-1)
    theta_z0 = np.take_along_axis(th, z[..., 0][..., None, None], axis=2)[..., 0, :]
    return ((z[..., 0] == z[..., 1]).astype(float), (z[..., 1] == z[..., 2]).astype(float),
            theta_z0, post.sample_stats["counts"])


def _zscores(t, ref):
    same01, same12, theta_z0, counts = t
    zs = [_mcse_z(same01, ref["same01"]), _mcse_z(same12, ref["same12"])]
    zs += [_mcse_z(theta_z0[..., w], ref["theta_z0"][w]) for w in range(theta_z0.shape[-1])]
    C, W = counts.shape[-2:]
    zs += [_mcse_z(counts[..., c, w], ref["counts"][c, w]) for c in range(C) for w in range(W)]
    return np.array(zs)


@pytest.mark.parametrize("kind,z_sampler,shift", [("l1", "collapsed", True),
                                                   ("l2", "collapsed", True),
                                                   ("l1", "marginal", True),
                                                   ("l2", "collapsed", False)])
def test_count_level_damcmc_matches_enumeration(kind, z_sampler, shift):
    obs = {"l1": np.array([1.6, 0.2, -0.4, 1.3, 0.3, 0.9, -0.2, 0.1, 0.6, 0.5,
                           0.3, 1.2, 0.8, 0.1, 2.2]),
           "l2": np.array([1.2, 0.5, 0.1, 1.6, 0.2, -0.3, 0.4, 1.1, 0.8, 0.1,
                           -0.1, 0.2, 2.1, 1.7, 0.4])}[kind]
    q = CellCounts(LEVELS, SIZES)
    scale = 0.8
    mech = (Laplace(scale=scale) if kind == "l1" else Gaussian(scale=scale)).calibrate(
        q.sensitivity(kind))
    rel = Release(query=q, mechanism=mech, n=int(SIZES.sum()), observed=obs)
    model = HiddenMarkovNB(K, LEVELS, alpha=ALPHA, beta=BETA)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        post = pp.infer(model, rel, method="damcmc", draws=5000, warmup=200, chains=3, seed=11,
                        keep_counts=True, z_sampler=z_sampler, count_shift=shift)
    if shift:
        rate = post.chain_stats["shift_accept_rate"]
        assert np.all((rate > 0.05) & (rate < 0.95)), rate     # the move does move
    assert post.exact
    assert any("latent='counts'" in n for n in post.notes)
    t = _targets(post, LEVELS)
    counts = t[3]
    assert np.all(counts[..., :3].sum(-1) == SIZES.ravel())        # feature 1 sums to N_c
    assert np.all(counts[..., 3:].sum(-1) == SIZES.ravel())        # feature 2 too
    exact = _enumerate(_cell_options(obs, SIZES, LEVELS, kind, scale), LEVELS)
    zs = _zscores(t, exact)
    assert np.max(np.abs(zs)) < K_MCSE, zs
    # wrong conditional: the multinomial coefficients left out of the count tables' law
    wrong = _enumerate(_cell_options(obs, SIZES, LEVELS, kind, scale, coef=False), LEVELS)
    assert np.max(np.abs(_zscores(t, wrong))) > K_MCSE
    # wrong noise: the scale understated 4-fold
    wrong = _enumerate(_cell_options(obs, SIZES, LEVELS, kind, scale / 4), LEVELS)
    assert np.max(np.abs(_zscores(t, wrong))) > K_MCSE


# --------------------------------------------------------------------------------------------
# count level against record level
# --------------------------------------------------------------------------------------------

def _two_sample_z(a, b):
    """(mean(a) - mean(b)) / sqrt(MCSE_a^2 + MCSE_b^2), MCSE from ArviZ's ESS; a, b
    (chains, draws)."""
    import arviz as az

    def mean_se(x):
        x = np.asarray(x, float)
        if np.ptp(x) == 0:
            return x.mean(), 0.0
        return x.mean(), x.std(ddof=1) / np.sqrt(float(az.ess(x)))
    (ma, sa), (mb, sb) = mean_se(a), mean_se(b)
    if sa == sb == 0:
        return 0.0 if ma == mb else np.inf
    return (ma - mb) / np.hypot(sa, sb)


def _grid_targets(post):
    """Label-invariant summaries of a 2 x 3 grid fit: P(same state) of neighbouring cells
    (R, T-1), the imputed counts (C, W) and the first feature's emission of cell (0, 0)'s state."""
    z = post.sample_stats["z"].astype(int)                       # (chains, draws, R, T)
    same = (z[..., :, 1:] == z[..., :, :-1]).astype(float)
    th = post.draws["theta1"]
    th00 = np.take_along_axis(th, z[..., 0, 0][..., None, None], axis=2)[..., 0, :]
    return same, post.sample_stats["counts"], th00


def test_count_level_agrees_with_record_level():
    rng = np.random.default_rng(5)
    sizes = np.array([[3, 2, 4], [1, 3, 2]])
    model = HiddenMarkovNB(2, (3, 2), alpha=0.8, beta=1.0)
    params = model.prior_sample(rng)
    recs, _ = model.simulate_cells(params, sizes, rng)
    q = CellCounts(model.n_levels, sizes)
    rel = pp.release(recs, query=q, mechanism=Laplace(scale=0.7).calibrate(q.sensitivity("l1")),
                     seed=2)
    wrong_rel = Release(query=q, mechanism=Laplace(scale=4.0).calibrate(q.sensitivity("l1")),
                        n=rel.n, observed=rel.observed)
    kw = dict(method="damcmc", draws=4000, warmup=300, chains=3, keep_counts=True)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        pc = pp.infer(model, rel, latent="counts", seed=1, **kw)
        pr = pp.infer(model, rel, latent="records", seed=2, **kw)
        pw = pp.infer(model, wrong_rel, latent="records", seed=3, **kw)
    assert any("latent='records'" in n for n in pr.notes)
    tc, tr, tw = _grid_targets(pc), _grid_targets(pr), _grid_targets(pw)

    def zs(a, b):
        same_a, cnt_a, th_a = a
        same_b, cnt_b, th_b = b
        out = [_two_sample_z(same_a[..., r, t], same_b[..., r, t])
               for r in range(2) for t in range(2)]
        out += [_two_sample_z(cnt_a[..., c, w], cnt_b[..., c, w])
                for c in range(6) for w in range(5)]
        out += [_two_sample_z(th_a[..., j], th_b[..., j]) for j in range(3)]
        return np.array(out)
    z_ok = zs(tc, tr)
    assert np.max(np.abs(z_ok)) < K_MCSE, z_ok      # 46 comparisons: counted in K_MCSE
    assert np.max(np.abs(zs(tc, tw))) > 2 * K_MCSE


# --------------------------------------------------------------------------------------------
# options, notes, scale
# --------------------------------------------------------------------------------------------

def _tiny_release(n_cell=None, mech=None):
    sizes = np.array([[2, 1, 2]]) if n_cell is None else np.array([[n_cell, n_cell]])
    q = CellCounts([2], sizes)
    mech = (mech or Laplace(scale=1.0)).calibrate(q.sensitivity(mech.sensitivity_norm
                                                                if mech else "l1"))
    obs = (np.linspace(0.2, 1.9, q.dim) if n_cell is None
           else np.array([0.3, 0.7, 0.6, 0.4]) * n_cell + np.array([1.2, -0.8, -2.1, 0.3]))
    return Release(query=q, mechanism=mech, n=int(sizes.sum()), observed=obs)


def test_options_are_checked():
    rel, m = _tiny_release(), HiddenMarkovNB(2, [2])
    for bad in ("bogus", 3, None):
        with pytest.raises(PrivpostError, match="latent"):
            pp.infer(m, rel, method="damcmc", draws=5, warmup=5, latent=bad)
    with pytest.raises(PrivpostError, match="damcmc options"):
        pp.infer(m, rel, method="naive", draws=5, warmup=5, latent="records")
    with pytest.raises(PrivpostError, match="count_sweeps"):
        pp.infer(m, rel, method="damcmc", draws=5, warmup=5, record_sweeps=2)
    with pytest.raises(PrivpostError, match="record_sweeps"):
        pp.infer(m, rel, method="damcmc", draws=5, warmup=5, latent="records", count_sweeps=2)
    for bad in (0, -1, 1.5, True, 10**6, "2"):
        with pytest.raises(PrivpostError, match="count_sweeps"):
            pp.infer(m, rel, method="damcmc", draws=5, warmup=5, count_sweeps=bad)
    with pytest.raises(PrivpostError, match="count_shift"):
        pp.infer(m, rel, method="damcmc", draws=5, warmup=5, count_shift="yes")
    with pytest.raises(PrivpostError, match="count_shift"):
        pp.infer(m, rel, method="damcmc", draws=5, warmup=5, latent="records",
                 count_shift=False)
    with pytest.raises(PrivpostError, match="marginal"):
        pp.infer(m, rel, method="ops", records=np.array([[0, 0, 0], [0, 0, 1], [0, 1, 1],
                                                         [0, 2, 0], [0, 2, 0]]),
                 draws=5, warmup=5, z_sampler="marginal")


def test_every_hmm_method_states_the_public_cell_sizes():
    recs = np.array([[0, 0, 0], [0, 0, 1], [0, 1, 1], [0, 2, 0], [0, 2, 0]])
    q = CellCounts([2], np.array([[2, 1, 2]]))
    rel = pp.release(recs, query=q, mechanism=Laplace(epsilon=1.0), seed=1)
    m = HiddenMarkovNB(2, [2])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for method, kw in (("naive", {}), ("damcmc", {}), ("damcmc", {"latent": "records"}),
                           ("nonprivate", {"records": recs}), ("ops", {"records": recs})):
            post = pp.infer(m, rel, method=method, draws=10, warmup=5, seed=0, **kw)
            assert any("conditions on the published cell sizes N[r,t], released without noise"
                       in n for n in post.notes), (method, post.notes)


def test_census_scale_cells_run_count_level_only():
    """Cells of 4e8 reports: the record path refuses (it would hold 8e8 latent values), the
    count path runs, its counts stay integers summing to N and near the noisy counts
    (Laplace noise of scale 2 against N = 4e8: the posterior of the counts is within a few
    scales of the observation)."""
    rel, m = _tiny_release(n_cell=4 * 10**8), HiddenMarkovNB(2, [2])
    with pytest.raises(PrivpostError, match="latent='counts'"):
        pp.infer(m, rel, method="damcmc", draws=5, warmup=5, latent="records")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        post = pp.infer(m, rel, method="damcmc", draws=50, warmup=50, chains=2, seed=4,
                        keep_counts=True)
    c = post.sample_stats["counts"]
    assert np.all(c == np.round(c)) and np.all(c.sum(-1) == 4 * 10**8)
    obs = rel.query.cell_matrix(rel.observed)
    assert np.max(np.abs(c - obs)) < 60          # scale 2: P(|noise| > 60) ~ e^-30


def test_cli_json_states_the_latent(tmp_path):
    from typer.testing import CliRunner

    from privpost.cli import app

    rel = _tiny_release()
    path = tmp_path / "rel.json"
    rel.save(path)
    res = CliRunner().invoke(app, ["infer", str(path), "--model", "hmm:n_states=2,n_levels=2;",
                                   "--method", "damcmc", "--draws", "30", "--warmup", "10",
                                   "--chains", "2", "--seed", "1", "--json", "--no-progress"])
    assert res.exit_code == 0, res.output
    assert "latent='counts'" in res.output and "published cell sizes" in res.output
