"""Run-until-converged driver and state relabelling of the HMM samplers (issue 13).

**Relabelling.** The HMM's prior is symmetric in the states (Dirichlet(alpha) start and
transition rows, Dirichlet(beta) emissions, the same for every state), so the posterior is
invariant under any permutation of the state labels: ``p(z, pi, A, theta | data) =
p(sigma(z), pi_sigma, A_sigma,sigma, theta_sigma | data)``. Each marginal of ``theta_k`` is then
the same mixture over all states, and a chain that sits in one of the ``K!`` symmetric modes, or
switches between them, gives split R-hat and ESS of ``theta_k`` that say nothing about
convergence (two chains in different labellings of the same mode look "unconverged"). Before
diagnostics, and in the returned draws, every draw is therefore relabelled by a stated rule
(:func:`state_permutations`; Stephens 2000, Celeux 1998, with squared-error loss on the
emissions): the permutation ``sigma_s`` of draw ``s`` minimises ``sum_k ||theta_s[sigma_s(k)] -
m_k||^2`` for reference emissions ``m``; ``m`` starts at the last draw of chain 0 and is then
the mean of the relabelled draws, repeated until no permutation changes (at most
:data:`RELABEL_ITERS` passes). The permutation is applied to ``theta``, ``pi``, both indices of
``A`` and the state paths ``z``, so every label-invariant quantity (``P(z_a == z_b)``, the
emission distribution of a cell's state, held-out likelihoods) is unchanged; the relabelled
draws are post-processing of the chain (no privacy cost) with the same label-invariant
posterior. ``relabel="chains"`` keeps the older rule (one permutation per chain, matching chain
means to chain 0's), ``relabel=False`` none.

**Run until converged** (``draws=None``, the default of naive, damcmc and nonprivate): the
chains (default 4, from dispersed random starts: every chain draws its own initial paths ``z``
uniformly and ``theta`` from its conditional) run a fixed warm-up, then rounds of draws decided
by :class:`privpost.inference._until.Plan` -- the same schedule and thresholds as
``damcmc.run`` (split R-hat <= 1.01, bulk and tail ESS >= 400 for every scalar entry of pi, A
and theta after relabelling) with the HMM's own budgets :data:`MAX_DRAWS` and
:data:`MAX_SECONDS`. The chains advance in round-robin blocks of about :data:`BLOCK_SECONDS`;
the time budget (counted from the start of the warm-up, with the predicted cost of the next
decision -- relabelling and diagnostics, from the last one's cost per draw -- set aside) is
checked between blocks; on expiry
in the warm-up, the warm-up is cut there and every chain makes 4 draws (so that the diagnostics
can say how far from converged the run is), after it the chains stop once each holds 4 draws;
they are truncated to a common length and the note says which happened. A chain's
draws do not depend on the blocks or rounds (each chain has its own stream), so the result
equals a fixed ``draws=`` run of the final length with the same seed.
"""

from __future__ import annotations

import numpy as np

__all__ = ["FIRST_DRAWS", "MAX_DRAWS", "MAX_SECONDS", "WARMUP", "CHAINS", "state_permutations",
           "relabel", "run_rounds"]

FIRST_DRAWS = 250      # draws per chain of the first round
MAX_DRAWS = 5000       # default iteration budget: kept draws per chain
MAX_SECONDS = 60.0     # default time budget (warm-up included), seconds
WARMUP = 250           # default warm-up iterations per chain when running until converged
CHAINS = 4             # default chains (naive, damcmc, nonprivate)
BLOCK_SECONDS = 0.2    # target wall time of one chain's block between checks
RELABEL_ITERS = 20


def state_permutations(theta: np.ndarray) -> np.ndarray:
    """Relabelling permutations of every draw (module docstring).

    ``theta (C, S, K, W)`` emission draws. Returns ``perm (C, S, K)`` int: new state ``k`` of
    draw ``(c, s)`` is old state ``perm[c, s, k]``. Deterministic in ``theta``."""
    from scipy.optimize import linear_sum_assignment

    C, S, K, W = theta.shape
    flat = theta.reshape(C * S, K, W)
    perm = np.tile(np.arange(K), (C * S, 1))
    if K == 1 or C * S == 0:
        return perm.reshape(C, S, K)
    sq = np.einsum("nkw,nkw->nk", flat, flat)                       # ||theta_s[j]||^2
    ref = theta[0, -1].copy()
    rows = np.arange(C * S)[:, None]
    for _ in range(RELABEL_ITERS):
        # cost[n, k, j] = ||m_k - theta_n[j]||^2
        cost = (np.einsum("kw,kw->k", ref, ref)[None, :, None] + sq[:, None, :]
                - 2.0 * np.einsum("kw,njw->nkj", ref, flat))
        new = cost.argmin(axis=2)                  # row minima: optimal when a permutation
        ok = (np.sort(new, axis=1) == np.arange(K)).all(axis=1)
        for n in np.flatnonzero(~ok):
            new[n] = linear_sum_assignment(cost[n])[1]
        changed = not np.array_equal(new, perm)
        perm = new
        ref = flat[rows, perm].mean(axis=0)
        if not changed:
            break
    return perm.reshape(C, S, K)


def relabel(results: list[dict], mode, copy: bool) -> list[dict]:
    """Apply the relabelling ``mode`` (``"draws"``: :func:`state_permutations`; ``"chains"``:
    one permutation per chain matching its mean emissions to chain 0's; ``False``: none) to
    the chains' result dicts (``theta (S, K, W)``, ``pi (S, K)``, ``A (S, K, K)``,
    ``z (S, R, T)``), truncated to their common length. ``copy``: leave the inputs' arrays
    alone (copies of the truncated arrays; otherwise views where nothing is permuted)."""
    from scipy.optimize import linear_sum_assignment

    length = min(r["n_stored"] for r in results)
    out = []
    for r in results:
        d = dict(r)
        for key in ("theta", "pi", "A", "z", "counts", "N"):
            if key in d:
                d[key] = d[key][:length].copy() if copy else d[key][:length]
        d["n_stored"] = length
        out.append(d)
    K = out[0]["theta"].shape[1]
    if not mode or K == 1 or length == 0:
        return out
    if mode == "chains":
        ref = out[0]["theta"].mean(axis=0)
        perms = [np.tile(np.arange(K), (length, 1))]
        for d in out[1:]:
            cost = np.abs(ref[:, None, :] - d["theta"].mean(axis=0)[None]).sum(axis=2)
            perms.append(np.tile(linear_sum_assignment(cost)[1], (length, 1)))
        perm = np.stack(perms)
    else:
        perm = state_permutations(np.stack([d["theta"] for d in out]))
    s_idx = np.arange(length)[:, None]
    for d, p in zip(out, perm):
        if np.array_equal(p, np.broadcast_to(np.arange(K), p.shape)):
            continue
        inv = np.argsort(p, axis=1)                               # old state -> new state
        d["theta"] = d["theta"][s_idx, p]
        d["pi"] = d["pi"][s_idx, p]
        d["A"] = d["A"][s_idx[:, :, None], p[:, :, None], p[:, None, :]]
        d["z"] = inv[s_idx, d["z"].reshape(length, -1)].reshape(d["z"].shape)
    return out


def run_rounds(chains, warmup: int, plan, bar, names, to_draws, mode) -> list[dict]:
    """Run the :class:`~privpost.inference.hmm.GibbsChain` objects ``chains`` until ``plan``
    (:class:`privpost.inference._until.Plan`) stops: ``warmup`` iterations each, then rounds of
    kept draws, in blocks of about :data:`BLOCK_SECONDS` (the generic driver
    :func:`privpost.inference._until.run_rounds`, with the relabelling :func:`relabel` by
    ``mode`` as its ``prepare``). ``bar``: a :class:`~privpost.inference._progress.ProgressBar`
    (total updated each round, worst ESS / R-hat in its description). ``to_draws(results) ->
    dict`` maps the relabelled results to the Posterior's draws (``names``, ``(chains, S,
    ...)``). Returns the chains' results relabelled by ``mode`` and truncated to a common
    length."""
    from privpost.inference import _until

    return _until.run_rounds(chains, warmup, plan, bar, names, to_draws,
                             lambda results: relabel(results, mode, copy=True),
                             block_seconds=BLOCK_SECONDS)
