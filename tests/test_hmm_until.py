"""The HMM samplers' run-until-converged default (issue 13) and the state relabelling.

* The default run (no ``draws=``) of damcmc and naive on seed 004's tiny enumerable case reaches
  the thresholds and matches the exact label-invariant posterior expectations (|z| < K_MCSE against
  MCSE; the wrong targets of tests/test_hmm.py are rejected, |z| > K_MCSE).
* The stopping logic without timing: a draw budget stops and warns; a run in rounds equals a
  fixed-``draws`` run of the final length (same seed); an expired time budget (``out_of_time``
  forced, no clock) stops after 4 draws per chain, truncates to a common length and warns.
* Relabelling: synthetic draws from two well-separated states with labels swapped at random
  are unconverged by R-hat before and converged after; the permutation is applied consistently
  to theta, pi, A and z (label-invariant quantities unchanged); a wrong relabelling (theta
  permuted, z not) changes P(z == state of theta) and is detected.
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from test_hmm import (ALPHA, BETA, SIZES, K, _chain_targets, _enumerate, _mcse_z, _noisy_options,
                      _release)

import privpost as pp
from privpost import diagnostics
from privpost.errors import ConvergenceWarning, PrivpostError
from privpost.inference import _hmm_until, _until
from privpost.models.hmm import HiddenMarkovNB

from _tolerance import K_MCSE

OBS = np.array([1.6, 0.2, -0.4, 1.3, 0.3, 2.2])


def _run(method, **kw):
    model = HiddenMarkovNB(K, [2], alpha=ALPHA, beta=BETA)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        post = pp.infer(model, _release(OBS), method=method, **kw)
    return post, [w for w in caught if issubclass(w.category, ConvergenceWarning)]


# ------------------------------------------------------------ the default on an exact case
def test_default_damcmc_converges_and_matches_enumeration():
    post, warned = _run("damcmc", seed=3, keep_counts=True)
    assert post.n_chains == _hmm_until.CHAINS and post.converged and not warned, post.notes
    assert any("run until converged" in n and "(converged;" in n for n in post.notes)
    assert any("relabelled draw by draw" in n for n in post.notes)
    assert not diagnostics.check(post.draws)
    same01, same12, theta_z0 = _chain_targets(post, K)
    counts = post.sample_stats["counts"][..., 1]
    exact = _enumerate(_noisy_options(OBS, 1.0), K, ALPHA, BETA, SIZES)
    zs = [_mcse_z(same01, exact["same01"]), _mcse_z(same12, exact["same12"]),
          _mcse_z(theta_z0[..., 1], exact["theta_z0"][1])]
    zs += [_mcse_z(counts[..., c], exact["counts"][c][1]) for c in range(3)]
    assert max(abs(v) for v in zs) < K_MCSE, zs
    wrong = _enumerate(_noisy_options(OBS, 0.25), K, ALPHA, BETA, SIZES)
    zw = [_mcse_z(counts[..., c], wrong["counts"][c][1]) for c in range(3)]
    assert max(abs(v) for v in zw) > K_MCSE, zw


def test_default_naive_converges_and_matches_enumeration():
    post, warned = _run("naive", seed=4)
    assert post.converged and not warned, post.notes
    same01, same12, theta_z0 = _chain_targets(post, K)
    proj = np.maximum(OBS, 0).reshape(3, 2)
    exact = _enumerate([[(proj[c], 0.0)] for c in range(3)], K, ALPHA, BETA, SIZES)
    zs = [_mcse_z(same01, exact["same01"]), _mcse_z(same12, exact["same12"]),
          _mcse_z(theta_z0[..., 1], exact["theta_z0"][1])]
    assert max(abs(v) for v in zs) < K_MCSE, zs
    # wrong variant: the noise-aware target. The default run stops at ~250 draws, where the
    # largest expected |z| is only 4-7 (seed offset 2: 2.9 on theta_z0 alone), so the check
    # that tells the two targets apart runs 10 times longer (largest |z| 13-23 over seeds 4-9,
    # above K_MCSE + 4.6)
    noiseaware = _enumerate(_noisy_options(OBS, 1.0), K, ALPHA, BETA, SIZES)
    longer, _ = _run("naive", seed=4, draws=2500)
    s01, s12, tz0 = _chain_targets(longer, K)
    zw = [_mcse_z(s01, noiseaware["same01"]), _mcse_z(s12, noiseaware["same12"]),
          _mcse_z(tz0[..., 1], noiseaware["theta_z0"][1])]
    assert max(abs(v) for v in zw) > K_MCSE, zw


# --------------------------------------------------------------- stopping logic, no clock
def test_draw_budget_stops_and_warns():
    post, warned = _run("damcmc", seed=1, max_draws=30, max_seconds=None, chains=2, warmup=10)
    assert post.n_draws == 30 and post.converged is False and warned
    assert any("draw budget of 30 per chain spent" in n for n in post.notes), post.notes
    assert any("NOT CONVERGED" in n for n in post.notes)


def test_rounds_equal_fixed_run_of_final_length(monkeypatch):
    monkeypatch.setattr(_hmm_until, "FIRST_DRAWS", 20)        # several rounds
    auto, _ = _run("naive", seed=7, chains=3, warmup=50, max_draws=2000, max_seconds=None)
    rounds = next(n for n in auto.notes if "run until converged" in n)
    assert "round(s)" in rounds and not rounds.startswith("run until converged: stopped after 1 ")
    fixed, _ = _run("naive", seed=7, chains=3, warmup=50, draws=auto.n_draws)
    for name in auto.draws:
        assert np.array_equal(auto.draws[name], fixed.draws[name]), name
    assert np.array_equal(auto.sample_stats["z"], fixed.sample_stats["z"])


@pytest.mark.parametrize("warmup", [0, 5])
def test_expired_time_budget_stops_at_four_draws(monkeypatch, warmup):
    """The clock is replaced: the budget is spent from the start. Without warm-up the chains
    stop once each holds 4 draws; with one, the warm-up is cut and each chain makes 4 draws."""
    monkeypatch.setattr(_until.Plan, "out_of_time", lambda self: True)
    post, warned = _run("damcmc", seed=2, chains=3, warmup=warmup, max_seconds=1.0)
    assert 4 <= post.n_draws < _hmm_until.FIRST_DRAWS
    assert post.draws["pi"].shape[:2] == (3, post.n_draws)
    assert post.converged is False and warned
    note = next(n for n in post.notes if "run until converged" in n)
    assert "time budget of 1 s spent" in note, post.notes
    assert ("during the warm-up: it was cut at" in note) is (warmup > 0), note
    if warmup:
        assert post.n_draws == 4


def test_progress_bar_and_options():
    post, _ = _run("naive", seed=1, chains=2, warmup=5, max_draws=8, progress=True)
    assert post.n_draws == 8
    ops, _ = _run("ops", seed=1, records=_tiny_records())
    assert ops.n_chains == 1 and ops.n_draws == 1                      # unchanged: one sample
    assert any("2 per iteration x 200 iterations" in n for n in ops.notes), ops.notes
    for bad in (dict(draws=10, max_draws=100), dict(max_draws=0), dict(max_seconds=-1),
                dict(max_seconds=float("nan")), dict(relabel="sometimes")):
        with pytest.raises(PrivpostError):
            _run("naive", **bad)


def _tiny_records():
    from privpost.queries.cell_counts import CellCounts

    q = CellCounts([2], SIZES)
    rng = np.random.default_rng(0)
    recs, _ = HiddenMarkovNB(K, [2]).simulate_cells(HiddenMarkovNB(K, [2]).prior_sample(rng),
                                                    q.cell_sizes, rng)
    return recs


# ------------------------------------------------------------------------------ relabelling
def _switched(rng, C=4, S=600, swap=True):
    """Draws of two well-separated states (emission means 0.2 / 0.8 on the first level) in
    the two labellings (``swap``: chains 1 and 3 in the other one, chain 0 switches at draw
    400), as a symmetric posterior sampled by sticky chains. Returns the results list of
    :func:`_hmm_until.relabel`."""
    out = []
    for c in range(C):
        a = np.clip(0.2 + 0.03 * rng.standard_normal(S), 0.01, 0.99)
        b = np.clip(0.8 + 0.03 * rng.standard_normal(S), 0.01, 0.99)
        theta = np.stack([np.stack([a, 1 - a], -1), np.stack([b, 1 - b], -1)], axis=1)
        pi = np.stack([np.full(S, 0.3), np.full(S, 0.7)], -1) + 0.01 * rng.standard_normal((S, 2))
        A = np.tile(np.array([[0.9, 0.1], [0.4, 0.6]]), (S, 1, 1))
        z = np.tile(np.array([[0, 1, 1, 0, 1]]), (S, 1, 1))
        if swap:
            sw = np.full(S, c % 2 == 1) | ((c == 0) & (np.arange(S) >= 400))
            theta[sw] = theta[sw][:, ::-1]
            pi[sw] = pi[sw][:, ::-1]
            A[sw] = A[sw][:, ::-1, ::-1]
            z[sw] = 1 - z[sw]
        out.append({"theta": theta, "pi": pi, "A": A, "z": z, "n_stored": S})
    return out


def test_relabel_removes_label_switching_consistently():
    rng = np.random.default_rng(5)
    res = _switched(rng)
    raw = {"theta": np.stack([r["theta"] for r in res])}
    assert diagnostics.worst(diagnostics.summarise(raw, cheap=True))[1] > 1.1  # switching shows
    fixed = _hmm_until.relabel(res, "draws", copy=True)
    th = np.stack([r["theta"] for r in fixed])
    assert not diagnostics.check({"theta": th, "pi": np.stack([r["pi"] for r in fixed])})
    # state 0 is the low-mean one everywhere (the reference is chain 0's last draw)
    lo = 0 if res[0]["theta"][-1, 0, 0] < 0.5 else 1
    assert np.all((th[:, :, lo, 0] < 0.5))
    for r, f in zip(res, fixed):
        # same permutation on every piece: the state of cell 0's emission is unchanged, and the
        # transition probability between the cells' states is unchanged
        e_old = r["theta"][np.arange(600), r["z"][:, 0, 0]]
        e_new = f["theta"][np.arange(600), f["z"][:, 0, 0]]
        assert np.array_equal(e_old, e_new)
        a_old = r["A"][np.arange(600), r["z"][:, 0, 0], r["z"][:, 0, 1]]
        a_new = f["A"][np.arange(600), f["z"][:, 0, 0], f["z"][:, 0, 1]]
        assert np.array_equal(a_old, a_new)
        assert np.array_equal(r["pi"][np.arange(600), r["z"][:, 0, 0]],
                              f["pi"][np.arange(600), f["z"][:, 0, 0]])
    # wrong variant: theta relabelled but z left alone changes the cell's emission
    bad = [dict(f, z=r["z"]) for r, f in zip(res, fixed)]
    assert any(not np.array_equal(r["theta"][np.arange(600), r["z"][:, 0, 0]],
                                  b["theta"][np.arange(600), b["z"][:, 0, 0]])
               for r, b in zip(res, bad))
    # no switching: nothing to do
    clean = _switched(np.random.default_rng(6), swap=False)
    same = _hmm_until.relabel(clean, "draws", copy=True)
    assert all(np.array_equal(c["theta"], s["theta"]) for c, s in zip(clean, same))


def test_state_permutations_uses_assignment_when_row_minima_collide():
    # draw 1: both states nearer reference state 0 by row minimum; the assignment still gives a
    # permutation (the cheaper total)
    theta = np.array([[[[0.1, 0.9], [0.9, 0.1]], [[0.45, 0.55], [0.35, 0.65]]]])
    perm = _hmm_until.state_permutations(theta)
    assert perm.shape == (1, 2, 2)
    assert all(sorted(p) == [0, 1] for p in perm[0])
