"""Samplers for the HMM over (region, time) cells (Foulds et al., seed 004 §4–5, App. E).

``privpost.infer(HiddenMarkovNB(...), cell_counts_release, method=...)`` dispatches here:

* ``"naive"`` -- the paper's *Laplace* method: the noisy counts, projected to ``>= 0``
  (post-processing), are used as if they were the exact counts ``n[r, t, d, :]`` in the
  partially collapsed Gibbs sampler (``A`` integrated out, Eq. 68; ``theta`` drawn, Eq. 69).
  Privacy: the release's ε, whatever the number of iterations (no convergence needed). The
  posterior is *not* ``p(theta | release)``: the noise is ignored (``exact=False``).
* ``"damcmc"`` -- noise-aware and exact for ``p(z, theta | release)``. The default latent
  (``latent="counts"``, or ``"auto"``; DESIGN §10, issue 21) is the table of true counts
  ``n[r, t, d, :]``: given the states they are independent ``Multinomial(N[r, t],
  theta_d[z[r, t]])`` and each noisy count touches one of them, so each Gibbs iteration
  re-imputes every (cell, feature) group by exact one-dimensional pair moves
  (:func:`~privpost.inference._hmm_core.count_sweep` over
  :func:`~privpost.inference._count_moves.pair_move`; ``count_sweeps`` sweeps of random level
  pairs per group, default 1) and, with ``count_shift=True`` (default), non-centred
  residual-shift MH moves: 10 per state and feature that move the state's emissions together
  with the counts of its cells (:func:`~privpost.inference._hmm_core.shift_moves`; without
  them theta moves only by the width of ``theta | counts``, far less than its posterior width
  when the noise is large against ``sqrt(N)``), alternately a random walk with a full
  covariance and a multivariate-t independence proposal, both learnt in the warm-up and fixed
  while draws are kept (:mod:`privpost.inference._hmm_shift`); one thinning move per state,
  feature and level (:func:`~privpost.inference._hmm_core.thin_moves`: ``theta_i`` scaled with
  the block's anchor level absorbing the difference, every cell's counts of the two levels moved
  by binomial thinning; the residual shift cannot move a rare level down when a cell holds
  none of it, thinning can); and one per cell that moves the cell's state
  together with its counts (:func:`~privpost.inference._hmm_core.state_shift_moves`; given
  the counts a cell's state is sticky when the noise is large; the new state is drawn from a
  mixture that favours states with close emissions, ``near_shift`` = 0.8 by default, with the
  proposal ratio in the MH ratio: at K = 10 a true state split between two labels merges back
  through it, EXPERIMENTS.md §7.1.3), then makes the same ``z`` and
  ``theta`` Gibbs moves as ``naive`` on the imputed counts. Target::

      p(z, theta, n | obs) ∝ p(z) p(theta) prod_{c,d} Mult(n[c, d] | N_c, theta_d[z_c])
                             * g(obs | n)

  Its cost per iteration is ``O(cells x levels x log(noise range))``, whatever the cell sizes.
  ``latent="records"`` keeps the record-level sampler: the cells' true reports are latent;
  each iteration sweeps every latent report (``record_sweeps`` times, default 1) with
  record-additive proposals from the current state's emission distribution (Ju et al., seed
  000, Alg. 1: the acceptance ratio is the noise-density ratio on the two changed counts),
  target ``p(z) p(theta) prod_i theta^{z(i)}(x_i) g(obs | counts(x))``, cost ``O(reports)``.
  In both, ``p(z)`` is the Dirichlet-multinomial (collapsed ``A``) path probability and ``g``
  the mechanism's noise density; the raw noisy counts are used (no projection); the
  ``(z, theta)`` marginal is the private posterior (tests/test_hmm.py, test_hmm_counts.py:
  both against enumeration and against each other).

Every method conditions on the published cell sizes ``N[r, t]``, which the CellCounts release
publishes exactly (a public parameter of the query, not covered by the release's guarantee);
the posterior notes say so (:data:`CELL_SIZES_NOTE`; the "NOT covered by the privacy
guarantee" statement itself is the release's, added by :func:`privpost.infer`). When the sizes
are released privately instead (:mod:`privpost.releases.cells`), only ``damcmc`` with the
count latent reads the release: the sizes are latent too (:func:`run_method`, ``size_prior``),
moved each iteration by :func:`~privpost.inference._hmm_sizes.transfer_moves` (the total
conditioned on the published n, ``size_total="fixed"``, default) or
:func:`~privpost.inference._hmm_sizes.size_moves` (``"free"``); the other methods
refuse it (registry: :data:`privpost.inference.registry._NOISY_SIZES_WHY`).
* ``"ops"`` -- one-posterior-sample mechanism run on the *confidential* reports (``records=``
  required, a simulation-study tool like :mod:`privpost.inference.ops`): Gibbs on the tempered
  posterior with every emission distribution truncated to ``theta_j >= a0_d = 1 / (M K_d)``.
* ``"nonprivate"`` -- the same Gibbs sampler on the exact counts of ``records=``.

OPS privacy (derivation)
------------------------
On the truncated set every ``theta^(k,d)_j`` lies in ``[a0_d, 1 - (K_d - 1) a0_d]``, so for a
report ``|log p(x | z, theta) - log p(x' | z, theta)| <= C = sum_d log((1 - (K_d-1) a0_d)/a0_d)
= sum_d log(K_d (M - 1) + 1)`` (extract §3.4; the cell of a report is public, ``z`` is a
parameter). One exact draw of ``(z, theta)`` from ``pi_T ∝ p(z) p(theta) prod p(x|z, theta)^{1/T}``
restricted to the truncated set is ``2C/T``-DP (:mod:`privpost.inference.ops`, Theorem 2);
``T = max(1, 2C/eps)``. Tempering convention: the likelihood only (``temper_prior=False`` in
:mod:`ops` terms) -- the prior cancels in the privacy ratio, and the collapsed path prior
``p(z)`` has no conjugate power form. The Gibbs sampler reaches ``pi_T`` only at convergence,
which cannot be certified (extract pitfall 6); **without** convergence each update of one
``z_{r,t}`` is an exponential mechanism costing ``2C/T`` for that cell's reports (cells in
parallel: a sweep of ``z`` costs ``2C/T``) and each ``theta`` update ``2C/T`` (features in
sequence, states in parallel given the public ``z``), i.e. ``2 * 2C/T`` per iteration and
``I * 2 * 2C/T`` for ``I`` iterations -- the paper's ``eps^Gibbs <= 400 eps`` at ``I = 200``.
:func:`privpost.accounting.private_gibbs_cost` computes both; both are in ``Posterior.notes``
and ``chain_stats``.

Truncated Dirichlet draws (pitfall 13): an exact rejection draw from the untruncated Dirichlet
(:func:`privpost.inference.ops.truncated_dirichlet`'s method, at most ``tries`` batches); when
the box is too improbable for that, pairwise moves from the current value: for a pair ``(i, j)``
with ``s = p_i + p_j`` fixed, ``p_i / s`` has the ``Beta(c_i, c_j)`` conditional truncated to
``[a0/s, 1 - a0/s]``; the sampler updates it by one compiled slice-sampling step
(:func:`truncated_dirichlet_blocks`; :func:`truncated_dirichlet_step` makes the exact
truncated-Beta draw instead, :func:`~privpost.inference.ops.truncated_beta`, in Python).
All of these leave the truncated Dirichlet invariant (the rejection attempt succeeds with a
state-independent probability), so the chain's target is exact; unlike the paper's sequential
truncated Betas, no component's constraint is dropped.

Options (all methods): ``draws`` (default ``None``: run until converged, below; ``ops``: 100),
``warmup`` (default 250 when running until converged; 100 with a fixed ``draws=``, the paper's
200 iterations with the first 100 burn-in), ``chains`` (default 4; ``ops``: 1), ``seed``,
``progress``, ``heldout``
(``(R, T)`` bool mask of cells whose reports are left out of the likelihood, for held-out
evaluation), ``keep_counts`` (damcmc: store the imputed counts, default False), ``diagnose``
(default True: R-hat/ESS check with a warning; False skips it for a fixed ``draws=``, e.g.
inside studies), ``max_draws`` / ``max_seconds`` (budgets of the run until converged, default
5000 kept draws per chain and 60 s), ``relabel`` (``"draws"``, default: every draw's states
relabelled before the diagnostics and in the result, :mod:`privpost.inference._hmm_until`;
``"chains"``: one permutation per chain matching chain 0's mean emissions, the older rule;
``False``: raw labels), ``z_sampler``
(``"collapsed"``: Eq. 68 single-site updates with ``A`` integrated out, the
paper's, default; ``"ffbs"``: draw ``A | z`` then each region's whole path by forward filtering,
backward sampling -- a blocked Gibbs sampler of ``(A, z, theta)`` with the same ``(z, theta)``
marginal, tested against the same enumeration; ``"marginal"``: the single-site moves with
``theta`` integrated out as well (Dirichlet-multinomial), then ``theta | z`` -- a partially
collapsed Gibbs sampler that lets a cell move to an empty state, which the other two cannot at
large cell sizes (chains that merged two true states stay so); not for ``ops``). ``damcmc``: ``latent`` (``"auto"``, default,
= ``"counts"``: the count table; ``"records"``: every report), ``count_sweeps`` (count latent,
default 1), ``count_shift`` (count latent: the non-centred moves -- residual shift,
thinning, state shift -- default True), ``record_sweeps`` (record latent, default 1);
``chain_stats["accept_rate"]`` is the MH acceptance rate of the record sweeps, or the fraction of pair moves with ``k != 0``;
``shift_accept_rate``, ``shift_indep_accept_rate``, ``thin_accept_rate`` and
``state_shift_accept_rate`` those of the non-centred moves; ``near_shift`` (count latent:
weight in [0, 1] of the near-state proposal of the state shifts, default 0.8; 0: the uniform
choice among the other states), ``collapsed_shift`` (count latent, default False: each cell's
state and counts moved with theta integrated out, :mod:`privpost.inference._hmm_split`,
``collapsed_shift_accept_rate``). Naive, damcmc, nonprivate: ``split_merge`` (default 0:
split-merge moves of the states per iteration given the counts, theta integrated out,
:mod:`privpost.inference._hmm_split`; ``split_accept_rate``, ``split_repartition_rate``). ``ops``: ``records`` (required),
``epsilon`` (default: the
release's ε), ``M`` (default 10), ``keep`` (``"last"``: the one released sample, default;
``"all"``: every post-warm-up draw, covered by the worst-case bound only).
The states' latent paths are returned as the sample statistic ``z (chains, draws, R, T)``.

Run until converged (naive, damcmc, nonprivate; issue 13): with ``draws=None`` the chains
(dispersed: each starts from its own uniformly random paths ``z``) run the warm-up and then
rounds of draws (:class:`privpost.inference._until.Plan`, the schedule of ``damcmc.run``) until
every scalar entry of pi, A and theta, relabelled, has split R-hat <= 1.01 and bulk and tail
ESS >= 400, or ``max_draws`` / ``max_seconds`` run out; then a ConvergenceWarning, a ``NOT
CONVERGED`` note, ``converged = False`` (``privpost infer --strict`` exits 3). The progress bar
shows the worst ESS and R-hat. OPS has no such mode: its number of iterations is part of its
worst-case privacy bound and a stopping rule that reads the chain would make it depend on the
confidential data; it keeps the paper's 100 + 100 iterations. Its chain is still checked
(``diagnose=True``; with ``keep="last"`` over the kept iterations before all but the last are
dropped): a ConvergenceWarning and ``NOT CONVERGED`` note that say to choose a longer
``warmup=`` in advance (:data:`OPS_ADVICE`), without changing the run's length.
"""

from __future__ import annotations

import math
import time

import numpy as np

from privpost._rng import as_generator
from privpost.errors import IncompatibleError, PrivpostError
from privpost.inference._gibbs_common import (Progress, check_sampler_options, make_posterior,
                                              reject_unknown)
from privpost.inference._hmm_shift import ShiftProposal

__all__ = ["run_method", "gibbs_chain", "GibbsChain", "ops_bound_hmm", "truncated_dirichlet_step",
           "truncated_dirichlet_blocks",
           "state_probabilities", "modal_states"]

_METHODS = ("naive", "damcmc", "ops", "nonprivate")
_MAX_LATENT = 2 * 10**8        # latent (report, feature) values damcmc will hold in memory
_SHIFT_REPS = 10               # residual-shift moves of each state's emissions per iteration
COLLAPSED_SHIFT = False        # default of damcmc's collapsed state shifts (count latent)
#: default near-state weight of damcmc's state-shift moves (EXPERIMENTS.md §7.1.3: at K = 10,
#: eps = 1 on the dense grid the four chains' big-state occupancies agree with it, not without)
NEAR_SHIFT = 0.8
_MAX_CELL = 2**52              # largest cell size whose counts float64 holds exactly (+- moves)
_SIZE_MOVES = 2                # size moves (transfers or births/deaths) per cell and iteration

#: the posterior notes of every HMM method: what it conditions on (that the cell sizes are not
#: covered by the release's guarantee is the release's own statement, which ``infer`` adds to
#: the notes of every posterior: :func:`privpost.releases.release.not_covered_notes`)
CELL_SIZES_NOTE = ("conditions on the published cell sizes N[r,t], released without noise "
                   "(public parameters of the CellCounts query)")


def _core():
    from privpost.inference import _hmm_core
    return _hmm_core


def _size_moves(fixed: bool):
    """``size_moves`` (free total) or ``transfer_moves`` (``size_total="fixed"``)."""
    from privpost.inference import _hmm_sizes
    return _hmm_sizes.transfer_moves if fixed else _hmm_sizes.size_moves


# ------------------------------------------------------------------------------------------
# truncated Dirichlet update
# ------------------------------------------------------------------------------------------

def truncated_dirichlet_step(rng, conc, a0, current, tries: int = 1, sweeps: int = 3):
    """One update leaving ``Dirichlet(conc)`` restricted to ``{p : p_j >= a0}`` invariant.

    ``conc (J,)``, ``current (J,)`` in the box. First up to ``256 * tries`` exact rejection
    proposals (compiled); if none is accepted, ``sweeps`` sweeps of exact pairwise truncated-Beta
    Gibbs moves started at ``current`` (see the module docstring). Returns ``(J,)``.
    """
    from privpost.inference.ops import truncated_beta

    conc = np.ascontiguousarray(conc, dtype=np.float64)
    J = conc.size
    out = np.empty(J)
    if tries > 0 and _core().dirichlet_box_reject(conc, float(a0), 256 * int(tries), rng, out):
        return out
    p = np.array(current, dtype=np.float64)
    for _ in range(sweeps):
        order = rng.permutation(J)
        for a in range(J):
            i, j = int(order[a]), int(order[(a + 1) % J])
            if i == j:
                continue
            s = p[i] + p[j]
            lo, hi = a0 / s, 1.0 - a0 / s
            if not hi > lo:
                continue
            u = float(truncated_beta(rng, conc[i], conc[j], lo, hi))
            p[i], p[j] = u * s, (1.0 - u) * s
    return p


def truncated_dirichlet_blocks(rng, conc, off, levels, a0, theta, tries: int = 1,
                               sweeps: int = 3, fallback: str = "slice") -> None:
    """Update every block ``theta[k, block d]`` (state-major) leaving the truncated Dirichlet
    invariant, in place: ``conc (K, W)``, ``theta (K, W)`` (current value, in the box), ``a0``
    D floats. Each block: up to ``256 * tries`` exact rejection proposals; if none is in the
    box, ``sweeps`` sweeps of pairwise moves from the current value.

    ``fallback="slice"`` (default, what the OPS sampler uses): everything compiled
    (:func:`~privpost.inference._hmm_core.truncated_dirichlet_blocks_slice`); each pairwise
    move is a slice-sampling update of the pair's truncated Beta conditional instead of an
    exact draw -- the same invariant distribution, a different kernel (tested against exact
    truncated-Dirichlet draws).

    ``fallback="exact"``: the pairwise moves are exact truncated-Beta draws (SciPy, Python) as
    in :func:`truncated_dirichlet_step`; the rejection attempts of all blocks run in one
    compiled call (:func:`~privpost.inference._hmm_core.dirichlet_box_blocks`), which stops at
    a block whose attempts all failed; that block gets the Python fallback and the compiled
    call resumes at the next block. The random stream is consumed in the same order as one
    :func:`truncated_dirichlet_step` call per block, so the result is bit-identical to that
    loop (tested).
    """
    conc = np.ascontiguousarray(conc, dtype=np.float64)
    a0 = np.asarray(a0, dtype=np.float64)
    off = np.asarray(off, dtype=np.int64)
    levels = np.asarray(levels, dtype=np.int64)
    if fallback == "slice":
        _core().truncated_dirichlet_blocks_slice(conc, off, levels, a0,
                                                 256 * int(tries) if tries > 0 else 0,
                                                 int(sweeps), rng, theta)
        return
    if fallback != "exact":
        raise PrivpostError(f"fallback must be 'slice' or 'exact', got {fallback!r}")
    D = off.size
    nblocks = conc.shape[0] * D
    first = 0
    max_prop = 256 * int(tries) if tries > 0 else 0
    while first < nblocks:
        failed = _core().dirichlet_box_blocks(conc, off, levels, a0, max_prop, rng, theta,
                                              first)
        if failed < 0:
            return
        k, d = divmod(int(failed), D)
        blk = slice(int(off[d]), int(off[d] + levels[d]))
        theta[k, blk] = truncated_dirichlet_step(rng, conc[k, blk], float(a0[d]),
                                                 theta[k, blk], tries=0, sweeps=sweeps)
        first = failed + 1


def ops_bound_hmm(n_levels, M: float) -> tuple[float, list[float]]:
    """``(C, a0_d)``: the per-report log-likelihood range on the truncated set and the
    truncation of each feature, ``a0_d = 1/(M K_d)``, ``C = sum_d log(K_d (M - 1) + 1)``
    (padded up by a relative 1e-12 for the rounding of ``log``)."""
    M = float(M)
    if not (M > 1 and math.isfinite(M)):
        raise PrivpostError(f"M (truncation multiplier, a0 = 1/(M K_d)) must be > 1, got {M!r}")
    a0 = [1.0 / (M * K) for K in n_levels]
    C = sum(math.log(K * (M - 1.0) + 1.0) for K in n_levels)
    return C * (1 + 1e-12), a0


# ------------------------------------------------------------------------------------------
# the Gibbs chain
# ------------------------------------------------------------------------------------------

def gibbs_chain(model, counts, use, shape, *, iterations, warmup, rng, inv_temp=1.0,
                trunc=None, latent=None, keep_counts=False, progress=None,
                z_sampler="collapsed", split_merge=0):
    """One chain of the partially collapsed Gibbs sampler, ``iterations`` long.

    Parameters
    ----------
    model : HiddenMarkovNB
    counts : (R*T, W) float64
        Counts used by the ``z``/``theta`` moves (naive: projected noisy counts; damcmc: the
        initial imputed counts, updated in place; nonprivate/ops: exact counts).
    use : (R*T,) int64, 1 where a cell's emissions enter the likelihood.
    shape : (R, T)
    iterations, warmup : ints; draws kept = iterations - warmup.
    inv_temp : 1/T for OPS (emission log-likelihood and Dirichlet counts scaled).
    trunc : None or list of D truncations ``a0_d`` (OPS).
    latent : None or dict(kind "records", records (N, D) int64, start (R*T+1,), obs (R*T, W),
        inv_scale, l2, sweeps) -- the damcmc record sweeps -- or dict(kind "counts", obs,
        inv_scale, l2, sweeps, shift, sizes (R*T,) float64) -- the count-level latent.
    z_sampler : "collapsed" (Eq. 68 single-site, A integrated out; the paper's), "ffbs"
        (A | z drawn, then every region's path by forward filtering, backward sampling: blocked
        Gibbs on (A, z, theta), same (z, theta) marginal target) or "marginal" (single-site
        with A and theta integrated out, then theta | z: partially collapsed Gibbs).
    split_merge : int >= 0, split-merge moves of the states per iteration
        (:mod:`privpost.inference._hmm_split`: exact MH moves of ``z`` given the counts, A and
        theta integrated out, made after the z moves and before theta is drawn); not with
        ``inv_temp != 1`` or ``trunc`` (OPS).

    Returns
    -------
    dict: ``theta (S, K, W)``, ``pi (S, K)``, ``A (S, K, K)``, ``z (S, R, T)``, optionally
    ``counts (S, R*T, W)``, and ``accept_rate`` (damcmc).
    """
    ch = GibbsChain(model, counts, use, shape, rng=rng, inv_temp=inv_temp, trunc=trunc,
                    latent=latent, keep_counts=keep_counts, z_sampler=z_sampler,
                    split_merge=split_merge)
    ch.run(warmup, keep=False, progress=progress)
    ch.run(iterations - warmup, keep=True, progress=progress)
    return ch.result()


class GibbsChain:
    """A resumable chain of the partially collapsed Gibbs sampler (:func:`gibbs_chain`'s
    arguments): :meth:`run` ``n`` more iterations, keeping their draws or not; :meth:`result`
    returns the kept draws so far. The random stream is consumed in the same order whatever
    the split into :meth:`run` calls, so a chain run in rounds (run until converged) equals one
    :func:`gibbs_chain` call of the final length with the same ``rng``."""

    def __init__(self, model, counts, use, shape, *, rng, inv_temp=1.0, trunc=None, latent=None,
                 keep_counts=False, z_sampler="collapsed", split_merge=0):
        core = _core()
        self.model, self.counts, self.use, self.shape = model, counts, use, shape
        self.rng, self.inv_temp, self.trunc, self.latent = rng, inv_temp, trunc, latent
        self.keep_counts, self.z_sampler = keep_counts, z_sampler
        if split_merge and (trunc is not None or inv_temp != 1.0):
            raise PrivpostError("split_merge: the split-merge moves integrate theta out, which "
                                "OPS's tempered, truncated emissions do not allow")
        self.split_merge = int(split_merge)
        self.split_stats = np.zeros(3)   # split-merge moves proposed, accepted, re-partitions
        R, T = shape
        K, W = model.n_states, model.width
        self.z = rng.integers(0, K, size=(R, T)).astype(np.int64)
        self.ntr, self.nout = core.transition_counts(self.z, K)
        self.theta = np.empty((K, W))
        self.L = np.empty((R * T, K))
        self.n_acc = self.n_prop = 0
        # the residual-shift move's proposal (full-covariance random walk and independence
        # proposal per state and feature) and the thinning moves' anchors and steps, learnt in
        # the warm-up, fixed while draws are kept
        self.shift = ShiftProposal(model.n_states, model.levels_arr)
        # proposed, accepted: residual-shift moves of theta, then of z, then the independence
        # proposals among the theta moves, then the thinning moves
        self.shift_stats = np.zeros(10)   # [8:10]: the collapsed state shifts
        self.size_stats = np.zeros(2)   # size moves proposed, accepted (noisy sizes)
        self.noisy_sizes = latent is not None and latent.get("size_obs") is not None
        self.done = 0                   # iterations run
        self.n_stored = 0               # draws kept
        self.blocks: list[dict] = []
        if trunc is not None:       # start inside the truncated set: the uniform point
            off, levels = model.offsets, model.levels_arr
            for d in range(len(levels)):
                self.theta[:, off[d]:off[d] + levels[d]] = 1.0 / levels[d]
        self._draw_theta()

    def _draw_theta(self):
        core, m = _core(), self.model
        S = core.state_sums(self.z, self.counts, self.use, m.n_states)
        conc = m.beta + self.inv_temp * S
        if self.trunc is None:
            core.dirichlet_blocks(conc, m.offsets, m.levels_arr, self.rng, self.theta)
            return
        truncated_dirichlet_blocks(self.rng, conc, m.offsets, m.levels_arr, self.trunc,
                                   self.theta)

    def _split_merge(self):
        """The moves of ``z`` (and the counts) with theta integrated out, made after the z
        moves and before theta is drawn (they do not read theta): the collapsed state shifts
        (count latent, ``latent["collapsed_shift"]``) and ``split_merge`` split-merge moves given
        the counts; transition counts kept up to date."""
        m = self.model
        lat = self.latent
        if lat is not None and lat.get("kind") == "counts" and lat.get("collapsed_shift"):
            from privpost.inference._hmm_split import collapsed_shift_moves

            collapsed_shift_moves(self.z, self.ntr, self.nout, self.counts, lat["obs"],
                                  m.offsets, m.levels_arr, lat["sizes"], lat["inv_scale"],
                                  lat["l2"], self.use, m.beta, m.alpha, lat["near"],
                                  self.shift_stats[8:10], self.rng)
        if not self.split_merge:
            return
        from privpost.inference._hmm_split import split_merge_moves

        split_merge_moves(self.z, m.n_states, self.counts, m.offsets, m.levels_arr, m.beta,
                          m.alpha, self.use, self.split_merge, self.split_stats, self.rng)
        self.ntr, self.nout = _core().transition_counts(self.z, m.n_states)

    def run(self, n: int, keep: bool, progress=None) -> None:
        """``n`` more iterations; their draws are appended when ``keep``. ``progress(i)`` is
        called after each with the chain's iteration count minus one."""
        core, m, rng = _core(), self.model, self.rng
        K, (R, T) = m.n_states, self.shape
        n = int(n)
        if n <= 0:
            return
        blk = None
        if keep:
            blk = {"theta": np.empty((n, K, m.width)), "pi": np.empty((n, K)),
                   "A": np.empty((n, K, K)), "z": np.empty((n, R, T), dtype=np.int64)}
            if self.keep_counts:
                blk["counts"] = np.empty((n,) + self.counts.shape)
            if self.noisy_sizes:
                blk["N"] = np.empty((n, R, T))
        latent, counts, theta, z = self.latent, self.counts, self.theta, self.z
        for s in range(n):
            with np.errstate(divide="ignore"):
                logtheta = np.log(theta)
            if latent is not None and latent.get("kind") == "counts":
                moved, moves = core.count_sweep(
                    z, logtheta, m.offsets, m.levels_arr, counts, latent["obs"],
                    latent["inv_scale"], latent["l2"], self.use, latent["sweeps"], rng)
                self.n_acc += moved
                self.n_prop += moves
                if latent.get("size_obs") is not None:     # noisy sizes: N[r, t] latent too
                    acc, prop = _size_moves(latent["size_fixed"])(
                        z, theta, m.offsets, m.levels_arr, counts, latent["sizes"],
                        latent["obs"], latent["size_obs"], latent["inv_scale"], latent["l2"],
                        latent["size_inv_scale"], latent["size_l2"], latent["size_prior"],
                        latent["size_par"], latent["size_kmax"], _SIZE_MOVES, self.use, rng)
                    self.size_stats[0] += prop
                    self.size_stats[1] += acc
                if latent["shift"]:
                    sp = self.shift
                    if keep:
                        sp.freeze()
                    core.shift_moves(z, theta, counts, latent["obs"], m.offsets, m.levels_arr,
                                     latent["sizes"], latent["inv_scale"], latent["l2"],
                                     self.use, m.beta, sp.logstep, not keep, self.shift_stats,
                                     rng, _SHIFT_REPS, sp.chol, sp.mean, sp.indep)
                    core.thin_moves(z, theta, counts, latent["obs"], m.offsets, m.levels_arr,
                                    latent["sizes"], latent["inv_scale"], latent["l2"], self.use,
                                    m.beta, sp.thin_logstep, sp.anchor, not keep,
                                    self.shift_stats, rng)
                    if not keep:
                        sp.learn(theta, m.offsets)
                    core.state_shift_moves(z, self.ntr, self.nout, theta, counts,
                                           latent["obs"], m.offsets, m.levels_arr,
                                           latent["sizes"], latent["inv_scale"], latent["l2"],
                                           self.use, m.alpha, self.shift_stats, rng,
                                           latent.get("near", 0.0))
                    with np.errstate(divide="ignore"):
                        logtheta = np.log(theta)
            elif latent is not None:
                for _ in range(latent["sweeps"]):
                    self.n_acc += core.record_sweep(
                        latent["records"], latent["start"], z, theta, m.offsets, m.levels_arr,
                        counts, latent["obs"], latent["inv_scale"], latent["l2"], self.use, rng)
                    self.n_prop += latent["records"].size
            if self.z_sampler == "marginal":
                S = core.state_sums(z, counts, self.use, K)
                core.z_sweep_marginal(z, self.ntr, self.nout, counts, S, m.offsets,
                                      m.levels_arr, m.beta, m.alpha, self.use, rng)
                self._split_merge()
                self._draw_theta()
                self._keep(blk, s, keep)
                if progress is not None:
                    progress(self.done)
                self.done += 1
                continue
            core.emission_loglik(counts, logtheta, self.use, self.inv_temp, self.L)
            if self.z_sampler == "ffbs":
                core.ffbs(z, core.draw_transitions(self.ntr, m.alpha, rng), self.L, rng)
                self.ntr, self.nout = core.transition_counts(z, K)
            else:
                core.z_sweep(z, self.ntr, self.nout, self.L, m.alpha, rng)
            self._split_merge()
            self._draw_theta()
            self._keep(blk, s, keep)
            if progress is not None:
                progress(self.done)
            self.done += 1
        if keep:
            self.blocks.append(blk)
            self.n_stored += n

    def _keep(self, blk, s, keep) -> None:
        """Store draw ``s`` of the block (``A`` drawn given the paths) when ``keep``."""
        if not keep:
            return
        m, K = self.model, self.model.n_states
        A = _core().draw_transitions(self.ntr, m.alpha, self.rng)
        blk["theta"][s] = self.theta
        blk["pi"][s] = A[K]
        blk["A"][s] = A[:K]
        blk["z"][s] = self.z
        if self.keep_counts:
            blk["counts"][s] = self.counts
        if self.noisy_sizes:
            blk["N"][s] = self.latent["sizes"].reshape(self.shape)

    def result(self) -> dict:
        """The kept draws (:func:`gibbs_chain`'s return value); ``n_stored`` their number."""
        m, (R, T) = self.model, self.shape
        K = m.n_states
        empty = {"theta": (K, m.width), "pi": (K,), "A": (K, K), "z": (R, T)}
        if self.keep_counts:
            empty["counts"] = self.counts.shape
        if self.noisy_sizes:
            empty["N"] = (R, T)
        out = {}
        for key, shp in empty.items():
            if len(self.blocks) == 1:
                out[key] = self.blocks[0][key]
            elif self.blocks:
                out[key] = np.concatenate([b[key] for b in self.blocks])
            else:
                out[key] = np.empty((0,) + shp, dtype=np.int64 if key == "z" else np.float64)
        if self.latent is not None:     # records: MH acceptance; counts: moves with k != 0
            out["accept_rate"] = self.n_acc / max(self.n_prop, 1)
            if self.latent.get("shift"):
                out["shift_accept_rate"] = self.shift_stats[1] / max(self.shift_stats[0], 1.0)
                out["state_shift_accept_rate"] = (self.shift_stats[3]
                                                  / max(self.shift_stats[2], 1.0))
                out["shift_indep_accept_rate"] = (self.shift_stats[5]
                                                  / max(self.shift_stats[4], 1.0))
                out["thin_accept_rate"] = self.shift_stats[7] / max(self.shift_stats[6], 1.0)
                if self.latent.get("collapsed_shift"):
                    out["collapsed_shift_accept_rate"] = (self.shift_stats[9]
                                                          / max(self.shift_stats[8], 1.0))
            if self.noisy_sizes:
                out["size_accept_rate"] = self.size_stats[1] / max(self.size_stats[0], 1.0)
        if self.split_merge:
            out["split_accept_rate"] = self.split_stats[1] / max(self.split_stats[0], 1.0)
            out["split_repartition_rate"] = self.split_stats[2] / max(self.split_stats[0], 1.0)
        out["n_stored"] = self.n_stored
        return out


# ------------------------------------------------------------------------------------------
# state summaries (post-processing of a Posterior from these samplers)
# ------------------------------------------------------------------------------------------

def state_probabilities(post) -> np.ndarray:
    """Posterior probability of each state in each cell, ``(R, T, K)``, from the sampled
    paths ``post.sample_stats["z"] (chains, draws, R, T)`` (chains aligned by the sampler)."""
    z = np.asarray(post.sample_stats["z"]).astype(np.int64)
    K = int(post.draws["pi"].shape[-1])
    z = z.reshape(-1, *z.shape[2:])
    return np.stack([(z == k).mean(axis=0) for k in range(K)], axis=-1)


def modal_states(post) -> np.ndarray:
    """The most frequent state of each cell over the kept draws, ``(R, T)`` int (the paper's
    visualisation: the modal assignment over iterations 101-200)."""
    return np.argmax(state_probabilities(post), axis=-1)


# ------------------------------------------------------------------------------------------
# method entry point
# ------------------------------------------------------------------------------------------

def _heldout_mask(heldout, shape):
    if heldout is None:
        return np.ones(shape[0] * shape[1], dtype=np.int64)
    h = np.asarray(heldout)
    if h.dtype != bool or h.shape != tuple(shape):
        raise PrivpostError(f"heldout must be a boolean array of shape (regions, times) = "
                            f"{tuple(shape)}, got {h.dtype} {h.shape}")
    return (~h).ravel().astype(np.int64)


def _count_init(counts_noisy, sizes, model, rng):
    """Initial true counts ``(R*T, W)`` float64: per cell and feature, a multinomial draw of the
    cell size with probabilities ∝ max(noisy count, 0) + 0.1 (any start is valid)."""
    C = sizes.size
    counts = np.zeros((C, model.width))
    for c, N in enumerate(sizes.ravel().tolist()):
        if N == 0:
            continue
        for d in range(model.n_features):
            o, J = int(model.offsets[d]), int(model.n_levels[d])
            p = np.maximum(counts_noisy[c, o:o + J], 0.0) + 0.1
            counts[c, o:o + J] = rng.multinomial(N, p / p.sum())
    return counts


def _latent_init(counts_noisy, sizes, model, rng):
    """Initial latent reports of ``latent="records"``: the counts of :func:`_count_init` (same
    random stream), each cell's reports sorted by level. Returns ``(records (n, D), start
    (R*T+1,), counts (R*T, W))``."""
    counts = _count_init(counts_noisy, sizes, model, rng)
    start = np.concatenate([[0], np.cumsum(sizes.ravel())]).astype(np.int64)
    recs = np.empty((int(start[-1]), model.n_features), dtype=np.int64)
    for c in range(sizes.size):
        for d in range(model.n_features):
            o, J = int(model.offsets[d]), int(model.n_levels[d])
            recs[start[c]:start[c + 1], d] = np.repeat(np.arange(J),
                                                       counts[c, o:o + J].astype(np.int64))
    return recs, start, counts


def _noise(release):
    mech = release.mechanism
    name = getattr(mech, "name", "")
    scale = float(mech.scale)
    if name in ("laplace", "discrete_laplace"):
        return 1.0 / scale, False
    if name in ("gaussian", "discrete_gaussian"):
        return 1.0 / (2.0 * scale * scale), True
    raise IncompatibleError(f"the HMM samplers need additive noise (laplace, gaussian or their "
                            f"discrete versions) on the counts, not {name!r}")


def _diagnose(post, method, mode="draws", table=None, advice=None):
    """Warn loudly when split R-hat > 1.01 or bulk/tail ESS < 400 for pi, A or theta, as every
    sampler does (:func:`privpost.diagnostics.flag`: a ConvergenceWarning, a note in
    ``post.notes``, ``post.converged``, so that ``privpost infer --strict`` exits 3)."""
    from privpost.diagnostics import flag

    if post.n_draws < 4:
        return
    kw = {} if advice is None else {"advice": advice}
    if flag(post, stacklevel=5, table=table, **kw) and mode != "draws":
        post.notes.append(f"{method} (hmm): label switching (the states' labels are arbitrary) "
                          "shows in R-hat and ESS unless relabel='draws'")


def run_method(method, model, release, *, draws: int | None = None, warmup: int | None = None,
               chains: int | None = None, seed=None, progress: bool = False, heldout=None,
               keep_counts: bool = False, record_sweeps: int | None = None,
               latent: str = "auto", count_sweeps: int | None = None, count_shift: bool = True,
               records=None, epsilon=None,
               M: float = 10.0, keep: str = "last", diagnose: bool = True,
               z_sampler: str = "collapsed", max_draws: int | None = None,
               max_seconds: float | None = None, relabel="draws", split_merge: int | None = None,
               near_shift: float | None = None, collapsed_shift: bool | None = None,
               size_prior: str = "flat", size_rate: float | None = None,
               size_total: str = "fixed", **options):
    """Run ``method`` (naive / damcmc / ops / nonprivate) for a :class:`HiddenMarkovNB` on a
    :class:`~privpost.queries.cell_counts.CellCounts` release (module docstring).

    ``draws=None`` (default; not ``ops``): run until converged
    (:mod:`privpost.inference._hmm_until`): ``chains`` (default 4) chains, ``warmup`` (default
    250) warm-up iterations, then rounds of draws until every scalar entry of pi, A and theta
    (relabelled) has split R-hat <= 1.01 and bulk and tail ESS >= 400, or a budget runs out:
    ``max_draws`` kept draws per chain (default 5000) and ``max_seconds`` of wall time (default
    60; ``None`` with ``max_draws`` given: no time budget). A fixed ``draws=`` runs exactly
    that many (default warm-up 100, the paper's; default chains 4; ``ops``: 100 draws, 1 chain).
    ``relabel``: ``"draws"`` (default; per-draw relabelling of the symmetric states before
    diagnostics and in the result), ``"chains"`` (one permutation per chain) or ``False``.

    ``release`` may also be a cell-counts release whose cell sizes are released privately (a
    :class:`~privpost.releases.ReleaseSet` ``[counts with sizes withheld, CellSizes]``,
    :mod:`privpost.releases.cells`): only ``damcmc`` with the count latent reads it (the other
    methods condition on exact sizes or ignore the noise and refuse it). The sizes ``N[r, t]``
    are then latent too, with prior ``size_prior``: ``"flat"`` (default) or ``"poisson"`` with
    mean ``size_rate``. ``size_total="fixed"`` (default) conditions on the published total as
    well (``sum N = n``, which every release document carries): the sizes start summing to
    ``n`` and each iteration makes :data:`_SIZE_MOVES` exact transfers per cell
    (:func:`~privpost.inference._hmm_sizes.transfer_moves`); the flat prior is then flat over
    the size tables summing to ``n``, a Poisson prior multinomial (``size_rate`` cancels), and
    ``heldout`` is refused. ``size_total="free"``: :data:`_SIZE_MOVES` birth/death moves per
    cell (:func:`~privpost.inference._hmm_sizes.size_moves`), the flat prior on ``0..n`` per
    cell, the sum not tied to ``n``. Steps ``1..ceil(t_N)`` for the size noise's scale
    ``t_N``. Target: ``p(z, theta, N, n | noisy counts, noisy sizes[, sum N = n])``; the
    sampled sizes are returned as the sample statistic ``N (chains, draws, R, T)`` and
    ``chain_stats["size_accept_rate"]``."""
    from privpost.accounting import private_gibbs_cost

    if method not in _METHODS:
        raise IncompatibleError(f"method {method!r} is not available for the HMM; use one of "
                                f"{', '.join(_METHODS)}")
    reject_unknown(method, options)
    from privpost.inference._count_latent import LATENTS

    if not isinstance(latent, str) or latent not in LATENTS:
        raise PrivpostError(f"latent must be one of {', '.join(map(repr, LATENTS))}, "
                            f"got {latent!r}")
    if method != "damcmc" and (latent != "auto" or record_sweeps is not None
                               or count_sweeps is not None or count_shift is not True):
        raise PrivpostError(f"latent, record_sweeps, count_sweeps and count_shift are damcmc "
                            f"options; method {method!r} imputes nothing")
    use_counts = latent in ("auto", "counts")
    if use_counts and record_sweeps is not None:
        raise PrivpostError("record_sweeps applies to latent='records' (sweeps over every latent "
                            "report); the count-level latent (the default) takes count_sweeps")
    if not use_counts and (count_sweeps is not None or count_shift is not True):
        raise PrivpostError("count_sweeps and count_shift apply to the count-level latent "
                            "(latent='counts', the default); latent='records' takes "
                            "record_sweeps")
    from privpost.inference import _hmm_until

    auto = draws is None and method != "ops"
    if relabel not in ("draws", "chains", False, None):
        raise PrivpostError(f"relabel must be 'draws', 'chains' or False, got {relabel!r}")
    plan = None
    if auto:
        plan = _until_plan(max_draws, max_seconds)
        draws = plan.first
    else:
        from privpost.inference import _until

        _until.refuse_budgets(max_draws, max_seconds,
                              also=" (or method 'ops', which has no such run)")
    if draws is None:
        draws = 100
    if warmup is None:
        warmup = _hmm_until.WARMUP if auto else 100
    if chains is None:
        chains = 1 if method == "ops" else _hmm_until.CHAINS
    draws, warmup, chains = check_sampler_options(draws, warmup, chains)
    if z_sampler not in ("collapsed", "ffbs", "marginal"):
        raise PrivpostError(f"z_sampler must be 'collapsed' (Eq. 68, the paper's), 'ffbs' or "
                            f"'marginal', got {z_sampler!r}")
    split_merge = _split_merge_moves(split_merge, method, model)
    if near_shift is not None and near_shift is not False and count_shift is False:
        raise PrivpostError("near_shift shapes the proposal of the state-shift moves, which "
                            "count_shift=False turns off")
    near_shift = _near_shift(near_shift, method, latent)
    if collapsed_shift is None:
        collapsed_shift = COLLAPSED_SHIFT and method == "damcmc" and latent != "records"
    elif not isinstance(collapsed_shift, bool):
        raise PrivpostError(f"collapsed_shift must be True or False, got {collapsed_shift!r}")
    elif collapsed_shift and (method != "damcmc" or latent == "records"):
        raise PrivpostError("collapsed_shift applies to damcmc's count latent (it moves each "
                            "cell's state with its counts); other methods and "
                            "latent='records' impute no counts")
    if z_sampler == "marginal" and method == "ops":
        raise PrivpostError("z_sampler='marginal' integrates theta out of the z moves; OPS's "
                            "tempered, truncated emissions have no closed-form marginal: use "
                            "'collapsed' or 'ffbs'")
    if release is None:
        raise IncompatibleError(f"{method} for the HMM needs the cell_counts release (its public "
                                "cell sizes define the grid)")
    from privpost.releases.cells import cells_parts

    full_release = release
    release, sizes_rel = cells_parts(release)
    model.check_query(release.query)
    q = release.query
    size_par = _size_prior(size_prior, size_rate, sizes_rel, method, use_counts, release)
    if size_total not in ("free", "fixed"):
        raise PrivpostError(f"size_total must be 'free' or 'fixed', got {size_total!r}")
    if size_total != "fixed" and sizes_rel is None:
        raise PrivpostError("size_total applies to a release whose cell sizes are released "
                            "with noise (damcmc); this release publishes them exactly")
    if size_total == "fixed" and sizes_rel is not None and heldout is not None:
        raise PrivpostError("size_total='fixed' ties every cell's size to the published total "
                            "n, held-out cells included: it does not combine with heldout")
    if sizes_rel is None and not q.sizes_public:
        raise IncompatibleError("this cell-counts release withholds the cell sizes and carries "
                                "no private release of them: the HMM samplers need the sizes "
                                "(exact, or released with noise: the release set of "
                                "privpost.releases.cells.release_cells / privpost release-cells "
                                "--epsilon-sizes)")
    R, T = q.n_regions, q.n_times
    use = _heldout_mask(heldout, (R, T))
    t_start = time.perf_counter()
    rng = as_generator(seed)
    obs = q.cell_matrix(release.observed)
    notes: list[str] = []
    latent_tpl = None
    inv_temp, trunc, exact = 1.0, None, False
    if method in ("ops", "nonprivate"):
        if records is None:
            raise IncompatibleError(f"{method} needs the confidential reports (records=): it is "
                                    "a simulation-study baseline, not inference from a release")
        counts0 = q.cell_matrix(q.statistic(records))
    if method == "naive":
        counts0 = np.maximum(obs, 0.0)
        notes.append("naive (Foulds et al.'s Laplace method): noisy counts projected to >= 0 and "
                     "used as exact counts in the partially collapsed Gibbs sampler; the noise "
                     "is ignored, so this is not p(z, theta | release)")
        notes.append(f"privacy: the release's {release.privacy} for any number of iterations")
    elif method == "nonprivate":
        notes.append("nonprivate: exact counts of the confidential reports (no privacy)")
        exact = True
    elif method == "damcmc" and use_counts and sizes_rel is not None:
        inv_scale, l2 = _noise(release)
        count_sweeps = _sweeps("count_sweeps", count_sweeps)
        if not isinstance(count_shift, bool):
            raise PrivpostError(f"count_shift must be True or False, got {count_shift!r}")
        size_inv, size_l2 = _noise(sizes_rel)
        obs_size = np.ascontiguousarray(sizes_rel.observed, dtype=np.float64)
        t_N = float(sizes_rel.mechanism.scale)
        kmax = max(1, int(math.ceil(t_N)))
        start_sizes = np.clip(np.rint(obs_size), 0, release.n)     # any start in the support
        if size_par[0] == 0:
            start_sizes = np.minimum(start_sizes, size_par[1])
        if size_total == "fixed":
            start_sizes = _sum_to(start_sizes, release.n)
        latent_tpl = dict(kind="counts", obs=np.ascontiguousarray(obs), inv_scale=inv_scale,
                          l2=l2, sweeps=count_sweeps, shift=count_shift,
                          sizes=np.ascontiguousarray(start_sizes), size_obs=obs_size,
                          size_inv_scale=size_inv, size_l2=size_l2, size_prior=size_par[0],
                          size_par=size_par[1], size_kmax=kmax,
                          size_fixed=size_total == "fixed")
        exact = True
        if size_total == "fixed":
            prior_text = ("flat over the sizes that sum to n" if size_par[0] == 0 else
                          f"Poisson({size_par[1]:g}) per cell given the sum n (multinomial: "
                          "size_rate cancels)")
        else:
            prior_text = (f"flat on 0..n = 0..{release.n} (a cell holds at most the n "
                          "reports)" if size_par[0] == 0 else f"Poisson({size_par[1]:g})")
        notes.append("damcmc (hmm), latent='counts' with private cell sizes: the cell sizes "
                     f"N[r, t] ({R} x {T}) are latent, prior {prior_text}, imputed with the true "
                     "counts n[r, t, d, :] ~ Multinomial(N[r, t], theta_d[z[r, t]]) by exact "
                     + ("transfers between cells that keep sum N = n" if size_total == "fixed"
                        else "birth/death moves")
                     + f" ({_SIZE_MOVES} per cell and iteration, steps 1..{kmax})"
                     f" and pair moves ({count_sweeps} sweep{'s' if count_sweeps > 1 else ''} "
                     "per group and iteration)"
                     + (", non-centred MH moves (residual shifts, thinning, state shifts; "
                        "proposals learnt in the warm-up only)" if count_shift else "")
                     + ", then the z and theta Gibbs moves on them")
        notes.append(noisy_sizes_note(release, sizes_rel, size_total == "fixed"))
        notes.append(f"privacy of the release: {full_release.total_privacy()} by sequential "
                     f"composition of the counts' {release.privacy} and the cell sizes' "
                     f"{sizes_rel.privacy} (a report enters both)")
    elif method == "damcmc" and use_counts:
        inv_scale, l2 = _noise(release)
        if int(q.cell_sizes.max()) > _MAX_CELL:
            raise PrivpostError(f"cell_sizes: a cell holds {int(q.cell_sizes.max())} reports; "
                                f"the count-level damcmc stores counts exactly up to "
                                f"{_MAX_CELL:.0e} per cell")
        count_sweeps = _sweeps("count_sweeps", count_sweeps)
        if not isinstance(count_shift, bool):
            raise PrivpostError(f"count_shift must be True or False, got {count_shift!r}")
        latent_tpl = dict(kind="counts", obs=np.ascontiguousarray(obs), inv_scale=inv_scale,
                          l2=l2, sweeps=count_sweeps, shift=count_shift,
                          sizes=np.ascontiguousarray(q.cell_sizes.ravel(), dtype=np.float64),
                          near=near_shift, collapsed_shift=collapsed_shift)
        exact = True
        notes.append("damcmc (hmm), latent='counts' (DESIGN §10): the true counts n[r, t, d, :] "
                     "of every (cell, feature) are imputed given the states, n[r, t, d, :] ~ "
                     f"Multinomial(N[r, t], theta_d[z[r, t]]) ({R} x {T} cells x "
                     f"{model.n_features} features, {q.n_total} reports), by exact pair moves "
                     f"({count_sweeps} sweep{'s' if count_sweeps > 1 else ''} of random level "
                     "pairs per group and iteration), "
                     + ("non-centred MH moves (residual shifts of each state's emissions "
                        "with the counts of its cells, thinning moves of each level with them, "
                        f"each cell's state with its counts (new state drawn near the current "
                        f"one's emissions with weight {near_shift:g}); proposals learnt in the "
                        "warm-up only), " if count_shift else "")
                     + ("collapsed state shifts (theta integrated out), "
                        if collapsed_shift else "")
                     + (f"{split_merge} split-merge moves of the states per iteration, "
                        if split_merge else "")
                     + "then the z and theta Gibbs moves on them; exact for p(z, theta | "
                     "release), cost independent of the cell sizes")
    elif method == "damcmc":
        inv_scale, l2 = _noise(release)
        cells_total = int(q.cell_sizes.sum()) * model.n_features
        if cells_total > _MAX_LATENT:
            raise PrivpostError(f"damcmc with latent='records' imputes every report: "
                                f"{q.n_total} reports x {model.n_features} features = "
                                f"{cells_total} latent values is more than {_MAX_LATENT:.0e}; "
                                "use latent='counts' (the default), whose cost does not depend "
                                "on the number of reports")
        record_sweeps = _sweeps("record_sweeps", record_sweeps)
        latent_tpl = dict(kind="records", obs=np.ascontiguousarray(obs), inv_scale=inv_scale,
                          l2=l2, sweeps=record_sweeps)
        exact = True
        notes.append("damcmc (hmm), latent='records': latent reports imputed by record-additive "
                     "MH (proposals from the current state's emissions), exact for "
                     "p(z, theta | release)")
    elif method == "ops":
        if keep not in ("last", "all"):
            raise PrivpostError(f"keep must be 'last' or 'all', got {keep!r}")
        if epsilon is None:
            priv = release.privacy
            if priv.kind != "pure" or priv.neighbours != "replace":
                raise PrivpostError("OPS needs epsilon= (the release's guarantee is not pure "
                                    "ε-DP under replace-one neighbours)")
            epsilon = priv.epsilon
        epsilon = float(epsilon)
        if not (epsilon > 0 and math.isfinite(epsilon)):
            raise PrivpostError(f"epsilon must be a finite number > 0, got {epsilon!r}")
        C, trunc = ops_bound_hmm(model.n_levels, M)
        Temp = max(1.0, 2.0 * C / epsilon)
        inv_temp = 1.0 / Temp
        eps_update = 2.0 * C / Temp
        cost = private_gibbs_cost(eps_update, updates_per_iteration=2,
                                  iterations=warmup + draws)
        notes.append(f"ops (hmm): Gibbs on the tempered (T = {Temp:.6g}, likelihood only) "
                     f"posterior with emissions truncated at a0_d = 1/({M:g} K_d); per-report "
                     f"log-likelihood range C = {C:.6g}")
        notes.append(f"privacy at convergence: one sample is {eps_update:.6g}-DP (replace-one); "
                     f"worst case without convergence (every update an exponential mechanism, "
                     f"2 per iteration x {warmup + draws} iterations): {cost.epsilon:.6g}-DP")
        if keep == "all":
            notes.append("keep='all': every post-warm-up draw is returned; only the worst-case "
                         "guarantee covers them")
        if chains > 1:
            # each chain is a separate run on the same records: basic composition over chains
            notes.append(f"{chains} OPS chains release {chains} samples: by composition "
                         f"{chains * eps_update:.6g}-DP at convergence, "
                         f"{chains * cost.epsilon:.6g}-DP worst case (use chains=1 for one "
                         f"sample's guarantee)")
        ops_info = {"temperature": Temp, "C": C, "epsilon_converged": eps_update,
                    "epsilon_worst_case": cost.epsilon}

    if sizes_rel is None:
        notes.append(CELL_SIZES_NOTE)
    chain_objs = []
    for ch in range(chains):
        crng = np.random.default_rng(rng.integers(2**63))
        counts = counts0.copy() if latent_tpl is None else None
        latent = None
        if latent_tpl is not None and latent_tpl["kind"] == "counts":
            # each chain its own sizes (updated in place when they are latent)
            sizes_c = np.array(latent_tpl["sizes"], dtype=np.float64)
            counts = _count_init(obs, sizes_c.astype(np.int64).reshape(R, T), model, crng)
            latent = dict(latent_tpl, sizes=sizes_c)
        elif latent_tpl is not None:
            recs, start, counts = _latent_init(obs, q.cell_sizes, model, crng)
            latent = dict(latent_tpl, records=recs, start=start)
        chain_objs.append(GibbsChain(
            model, np.ascontiguousarray(counts), use, (R, T), rng=crng, inv_temp=inv_temp,
            trunc=trunc, latent=latent, keep_counts=keep_counts, z_sampler=z_sampler,
            split_merge=split_merge))
    mode = relabel or False
    if method == "ops" and keep == "last" or (chains == 1 and mode == "chains"):
        mode = False
    if plan is not None:
        from privpost.inference._progress import ProgressBar

        bar = ProgressBar(chains * (warmup + draws), progress, f"hmm {method}",
                          f"{chains} chain{'s' if chains > 1 else ''}", close_at_total=False)
        plan.t0 = t_start
        names = ["pi", "A"] + [f"theta{d + 1}" for d in range(model.n_features)]
        results = _hmm_until.run_rounds(chain_objs, warmup, plan, bar, names,
                                        lambda res: _draws_of(res, model), mode)
        notes.append(plan.note(results[0]["n_stored"]))
    else:
        iterations = warmup + draws
        prog = Progress(chains * iterations, progress, f"hmm {method}")
        for ch, c in enumerate(chain_objs):
            upd = (lambda it, ch=ch: prog.update(ch * iterations + it))
            c.run(warmup, keep=False, progress=upd)
            c.run(draws, keep=True, progress=upd)
        results = _hmm_until.relabel([c.result() for c in chain_objs], mode, copy=False)
    if mode == "draws":
        notes.append("states relabelled draw by draw (the prior is symmetric in the states, so "
                     "labels are arbitrary): each draw's state permutation minimises the squared "
                     "distance of its emissions to the mean relabelled emissions (Stephens 2000),"
                     " applied to theta, pi, A and z before the diagnostics")
    elif mode == "chains":
        notes.append("chains aligned to chain 0 by a state permutation (label switching)")
    ops_trace = None
    if method == "ops" and keep == "last":
        if diagnose:   # the chain's kept trajectory, relabelled, for the check below
            ops_trace = _draws_of(_hmm_until.relabel(results, "draws", copy=True), model)
        for r in results:
            for key in ("theta", "pi", "A", "z", "counts"):
                if key in r:
                    r[key] = r[key][-1:]
    draws_out = _draws_of(results, model)
    stats = {"z": np.stack([r["z"] for r in results]).astype(np.float64)}
    chain_stats = {}
    if keep_counts:
        stats["counts"] = np.stack([r["counts"] for r in results])
    if sizes_rel is not None:
        stats["N"] = np.stack([r["N"] for r in results])
    if method == "damcmc":    # latent='records': MH acceptance; 'counts': pair moves with k != 0
        chain_stats["accept_rate"] = np.array([r["accept_rate"] for r in results])
        for key in ("shift_accept_rate", "state_shift_accept_rate", "shift_indep_accept_rate",
                    "thin_accept_rate", "collapsed_shift_accept_rate", "size_accept_rate"):
            if key in results[0]:
                chain_stats[key] = np.array([r[key] for r in results])
    for key in ("split_accept_rate", "split_repartition_rate"):     # any method with split_merge
        if key in results[0]:
            chain_stats[key] = np.array([r[key] for r in results])
    if method == "ops":
        chain_stats.update({k: np.array([v] * chains) for k, v in ops_info.items()})
    post = make_posterior(draws_out, stats, method, model, full_release, notes, exact=exact,
                          chain_stats=chain_stats)
    if ops_trace is not None:
        _diagnose_ops_last(post, ops_trace, model, release, warmup, draws)
    elif (diagnose or plan is not None) and not (method == "ops" and keep == "last"):
        _diagnose(post, method, mode, plan.table if plan is not None else None,
                  advice=OPS_ADVICE if method == "ops" else None)
    return post


def _split_merge_moves(value, method, model) -> int:
    """``split_merge``: split-merge moves of the states per iteration
    (:mod:`privpost.inference._hmm_split`); ``None``: the default, 0 (EXPERIMENTS.md §7.1.3: on
    the dense grid at eps = 1 they re-partition the cells in <= 0.1 % of the moves, as the
    imputed counts have conformed to the current states); an integer in [0, 10000]; refused for
    ops."""
    if value is None:
        return 0
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) \
            or not 0 <= value <= 10000:
        raise PrivpostError(f"split_merge must be an integer in [0, 10000] (moves per "
                            f"iteration), got {value!r}")
    if value and method == "ops":
        raise PrivpostError("split_merge: the split-merge moves integrate theta out, which "
                            "OPS's tempered, truncated emissions do not allow; use "
                            "split_merge=0 with method 'ops'")
    return int(value)


def _near_shift(value, method, latent) -> float:
    """``near_shift``: weight in [0, 1] of the near-state proposal of the state-shift moves
    (:func:`~privpost.inference._hmm_core.state_shift_moves`; damcmc, count latent); ``None``:
    the default, :data:`NEAR_SHIFT` for damcmc, else 0."""
    if value is None:
        return NEAR_SHIFT if method == "damcmc" else 0.0
    if isinstance(value, bool) or not isinstance(value, (int, float, np.integer, np.floating)) \
            or not 0.0 <= float(value) <= 1.0:
        raise PrivpostError(f"near_shift must be a number in [0, 1] (the weight of the "
                            f"near-state proposal of the state-shift moves), got {value!r}")
    if value and (method != "damcmc" or latent == "records"):
        raise PrivpostError("near_shift applies to the state-shift moves of damcmc's count "
                            "latent; other methods and latent='records' make none")
    return float(value)


def noisy_sizes_note(counts_rel, sizes_rel, fixed: bool = False) -> str:
    """What damcmc's posterior conditions on when the cell sizes are released with noise
    (``fixed``: ``size_total="fixed"``, the published total too)."""
    mech = sizes_rel.mechanism
    head = ("conditions on the noisy counts and the noisy cell sizes N[r,t] (released with "
            f"{mech.name} noise of scale {float(mech.scale):.6g}; the exact sizes are not "
            "published)")
    if fixed:
        return (head + f" and on the published total n = {counts_rel.n} = sum of the sizes "
                "(size_total='fixed'): exact for p(z, theta, N | noisy counts, noisy sizes, n)")
    return (head + ": exact for p(z, theta, N | noisy counts, noisy sizes). Not conditioned "
            f"on: the published total n = {counts_rel.n} = sum of the sizes (the latent sizes "
            "are only bounded by it under the flat prior, not constrained to sum to it; "
            "size_total='fixed' conditions on it)")


def _sum_to(sizes, n: int):
    """``sizes (C,)`` non-negative integers adjusted to sum to ``n`` (a start of the chain with
    ``size_total="fixed"``; any start in the support is valid): the shortfall added to the
    cells in turn, an excess removed from the largest cells first."""
    out = np.array(sizes, dtype=np.float64)
    diff = int(n - out.sum())
    C = out.size
    i = 0
    while diff > 0:
        step = max(1, diff // C)
        out[i % C] += step
        diff -= step
        i += 1
    while diff < 0:
        j = int(np.argmax(out))
        step = min(int(out[j]), -diff, max(1, -diff // C))
        out[j] -= step
        diff += step
    return out


def _size_prior(size_prior, size_rate, sizes_rel, method, use_counts, release):
    """``(prior_kind, prior_par)`` of :func:`privpost.inference._hmm_sizes.size_moves` from
    the options (flat on ``0..n``: ``(0, n)``; Poisson: ``(1, size_rate)``), or ``None`` when
    the sizes are public (the options must then be left at their defaults)."""
    if size_prior not in ("flat", "poisson"):
        raise PrivpostError(f"size_prior must be 'flat' or 'poisson', got {size_prior!r}")
    if size_rate is not None:
        if isinstance(size_rate, bool) or not isinstance(size_rate, (int, float, np.integer,
                                                                     np.floating)) \
                or not (math.isfinite(float(size_rate)) and 0 < float(size_rate) <= 1e12):
            raise PrivpostError(f"size_rate must be a number in (0, 1e12], got {size_rate!r}")
        if size_prior != "poisson":
            raise PrivpostError("size_rate is the mean of size_prior='poisson'; give "
                                "size_prior='poisson' too (the default prior is flat)")
    if sizes_rel is None:
        if size_prior != "flat" or size_rate is not None:
            raise PrivpostError("size_prior and size_rate apply to a release whose cell sizes "
                                "are released with noise (damcmc); this release publishes "
                                "them exactly")
        return None
    if method != "damcmc" or not use_counts:
        raise IncompatibleError(
            f"method {method!r}" + (" with latent='records'" if method == "damcmc" else "")
            + " cannot read cell counts whose cell sizes are released with noise (it needs "
            "the exact sizes: the record latent fixes the number of reports per cell); use "
            "method='damcmc' with the count latent (the default), which imputes the sizes")
    if size_prior == "poisson":
        if size_rate is None:
            raise PrivpostError("size_prior='poisson' needs size_rate (the Poisson mean of a "
                                "cell size)")
        return (1, float(size_rate))
    return (0, float(release.n))


def _sweeps(name, value) -> int:
    """``record_sweeps`` / ``count_sweeps``: default 1, an integer in [1, 1000]."""
    if value is None:
        return 1
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or not 1 <= value <= 1000:
        raise PrivpostError(f"{name} must be an integer in [1, 1000], got {value!r}")
    return int(value)


#: what an unconverged OPS chain's warning says to do: its length is part of the privacy bound
OPS_ADVICE = ("OPS runs a fixed number of iterations (the worst-case privacy bound counts them, "
              "and a stopping rule reading the chain would depend on the confidential data), so "
              "it does not run longer by itself: choose a larger warmup= (and draws=) before "
              "seeing the data, e.g. from a simulation on synthetic data of the same size; the "
              "worst-case epsilon in the notes grows with the iterations")


def _diagnose_ops_last(post, trace, model, release, warmup, draws):
    """OPS with ``keep="last"`` releases the chains' final states only, which no diagnostic can
    judge: check the chains' ``draws`` kept iterations (``trace``, relabelled) instead, and
    report on ``post`` (:func:`privpost.diagnostics.flag` with :data:`OPS_ADVICE`: a
    ConvergenceWarning, a ``NOT CONVERGED`` note, ``post.converged``). The run length is not
    changed. The check reads the chain run on the confidential records: like the sample it is
    for the simulation study, not for release."""
    if draws < 4:
        return
    from privpost.diagnostics import flag

    whole = make_posterior(trace, {}, "ops", model, release, [], exact=False)
    flag(whole, stacklevel=5, advice=OPS_ADVICE + f"; the check is over the {draws} iterations "
         f"after the {warmup} warm-up ones, the released sample is the last (not for release: "
         "it reads the chain on the confidential records)")
    post.converged = whole.converged
    post.notes.extend(whole.notes)


def _draws_of(results, model) -> dict:
    """The Posterior's draws ``pi (C, S, K)``, ``A (C, S, K, K)``, ``theta<d> (C, S, K, K_d)``
    from the chains' result dicts (common length)."""
    out = {"pi": np.stack([r["pi"] for r in results]),
           "A": np.stack([r["A"] for r in results])}
    out.update(model.split_theta(np.stack([r["theta"] for r in results])))
    return out


def _until_plan(max_draws, max_seconds):
    """The :class:`~privpost.inference._until.Plan` of a run until converged, budgets checked
    (defaults :data:`~privpost.inference._hmm_until.MAX_DRAWS` draws per chain and
    :data:`~privpost.inference._hmm_until.MAX_SECONDS` s; ``max_seconds=None`` with
    ``max_draws`` given: no time budget; :func:`privpost.inference._until.plan_for`)."""
    from privpost.inference import _hmm_until, _until

    return _until.plan_for(max_draws, max_seconds, first=_hmm_until.FIRST_DRAWS,
                           default_draws=_hmm_until.MAX_DRAWS,
                           default_seconds=_hmm_until.MAX_SECONDS)
