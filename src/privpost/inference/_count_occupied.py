"""Pair moves among occupied cells: the count-table latent of a joint table much larger than its
data set (issue 21 item 4; EXPERIMENTS §9.6: the K = 3 MRF grid, ``J = 3^10 = 59,049`` cells
for ``N = 10^3 .. 10^6`` records).

:func:`privpost.inference._count_table.pair_sweep` picked both cells of a pair uniformly, so
with ``N << J`` almost every pair held no unit and its exact move was ``k = 0``, and an iteration
cost ``J`` moves whatever ``N`` is (the engine now also chooses a fraction of its pairs by unit,
``unit_frac``, and sets their number from ``J`` and ``N``: ``default_pairs``; this module came
out of the same problem on the MRF's 59,049-cell table and was written beside it). Here every
move involves an occupied cell, and the number of
moves per iteration is set from ``min(N, J)``, not ``J``.

The move (one group of ``J`` cells, total ``N``; ``c`` the table, ``pi`` the target of the
table given theta, ``pi(c) ∝ Mult(c | N, p) eta(s | A c)``):

1. **pair**: ``{i, j}`` uniform over ``P(c) = {pairs with c_i + c_j > 0}``, of size
   ``M(c) = C(J, 2) - C(J - O(c), 2)`` (``O(c)``: the number of occupied cells). Drawn by
   rejection: ``j`` uniform over the occupied cells, ``i`` uniform over the other ``J - 1``;
   a pair with both cells occupied is reached two ways, so it is kept with probability 1/2
   (otherwise draw again). Each pair of ``P(c)`` then has probability ``1 / M(c)``.
2. **proposal**: ``k`` units moved from ``j`` to ``i`` drawn exactly from the full conditional
   of the line ``{c + k (e_i - e_j)}`` (``_count_table._pair_update_c``, i.e.
   :func:`privpost.inference._count_moves.pair_move`):
   ``f(c') = pi(c') / sum_line pi``, the same normalising sum from ``c`` and from ``c'``.
3. **correction**: accept ``c'`` with probability ``min(1, M(c) / M(c'))``.

Exactness: for ``c' != c`` the pair is the only one whose line holds both, and ``c_i + c_j`` is
the same at ``c`` and ``c'``, so ``{i, j}`` is in ``P(c)`` and in ``P(c')``. The proposal is
``Q(c -> c') = f(c') / M(c)`` and its reverse ``f(c) / M(c')``, so the Metropolis–Hastings
ratio is ``pi(c') f(c) M(c) / (pi(c) f(c') M(c')) = M(c) / M(c')``: detailed balance for
``pi``. ``M = O (2 J - O - 1) / 2`` changes only when a move empties or fills a cell (``O``
changes by 1 or 2), by a factor ``1 + O(1 / O)``, so rejections are rare once more than a few
cells are occupied (measured acceptance 1.000 to three decimals at ``N = 10^3``, ``J = 3^10``).
Leaving the correction out (``correct=False``, the wrong variant of the tests) gives a chain
reversible for ``pi(c) M(c)`` instead: it over-weights tables with many occupied cells.

Every move costs ``O(log range)`` evaluations of the ``2 m`` released coordinates the two cells
touch (``m`` released clique tables), so an iteration of ``n_moves`` moves costs
``O(n_moves m log N)`` plus ``O(J)`` to rebuild the occupied set -- at ``N = 10^3`` about 50x
less than ``J`` uniform pairs.
"""

from __future__ import annotations

import math

import numpy as np
from numba import njit

from privpost.errors import PrivpostError
from privpost.inference._count_table import (MAX_SHIFT_DIM, CountTable, TableChain,
                                             _pair_update_c, residuals, shift_log_ratio,
                                             table_change)
from privpost.inference._kernels import log_eta_change

__all__ = ["occupied_sweep", "n_pairs_for", "OccupiedTable", "HMCStep"]


@njit(cache=True, nogil=True)
def _n_pair_sets(J, O):
    """``M = C(J, 2) - C(J - O, 2)``: pairs of ``J`` cells with at least one of ``O`` occupied
    (float64, exact below ``2^53``)."""
    e = J - O
    return 0.5 * J * (J - 1.0) - 0.5 * e * (e - 1.0)


@njit(cache=True, nogil=True)
def _set_occupied(x, occ, pos, n_occ):
    """Add cell ``x`` to the occupied set (``occ[:n_occ]`` its cells, ``pos[x]`` its place or
    -1); returns the new size."""
    occ[n_occ] = x
    pos[x] = n_occ
    return n_occ + 1


@njit(cache=True, nogil=True)
def _unset_occupied(x, occ, pos, n_occ):
    """Remove cell ``x`` from the occupied set; returns the new size."""
    q = pos[x]
    last = occ[n_occ - 1]
    occ[q] = last
    pos[last] = q
    pos[x] = -1
    return n_occ - 1


@njit(cache=True, nogil=True)
def occupied_sweep(c, log_p, n_moves, cell_ptr, cell_coord, cell_coef, s, w, l2, r, occ, pos,
                   b_idx, b_r, b_v, b_w, b_l2, correct, rng):
    """``n_moves`` pair moves among occupied cells (module docstring) on the table ``c`` of ONE
    Multinomial group holding every cell (updated in place; no move when ``N = 0``). Returns
    ``[moves accepted, corrections rejected]`` as a (2,) float64 array.

    ``c`` (J,) float64 integer counts; ``log_p`` (J,) log cell probabilities;
    ``cell_ptr`` (J+1,), ``cell_coord`` (nnz,) int64, ``cell_coef`` (nnz,): column ``j`` of
    ``A``; ``s, w, l2`` (d,): release, kernel weights, kernel families; ``r`` (d,) work (the
    residuals, recomputed here); ``occ, pos`` (J,) int64 work (the occupied set); ``b_*`` work
    buffers of length >= the largest number of coordinates two cells touch; ``correct``: apply
    the ``M(c) / M(c')`` correction (``False`` only in the tests' wrong variant)."""
    J = c.shape[0]
    out = np.zeros(2)
    no_alpha = np.zeros(J)          # not collapsed: the moves are conditional on theta
    residuals(c, cell_ptr, cell_coord, cell_coef, s, r)
    n_occ = 0
    for x in range(J):
        pos[x] = -1
        if c[x] > 0.0:
            n_occ = _set_occupied(x, occ, pos, n_occ)
    if n_occ == 0 or J < 2:
        return out
    for _ in range(n_moves):
        while True:                      # {i, j} uniform over the pairs with a unit
            j = occ[rng.integers(0, n_occ)]
            i = rng.integers(0, J - 1)
            if i >= j:
                i += 1
            if c[i] == 0.0 or rng.random() < 0.5:
                break
        ci, cj = c[i], c[j]
        # the exact conditional draw, applied to c and r (b_idx, b_v keep the coordinates)
        k = _pair_update_c(i, j, c, log_p, no_alpha, cell_ptr, cell_coord, cell_coef, w, l2, r,
                           b_idx, b_r, b_v, b_w, b_l2, rng)
        if k == 0.0:
            continue
        ni, nj = c[i], c[j]
        d_occ = (1 if ni > 0.0 else 0) - (1 if ci > 0.0 else 0) \
            + (1 if nj > 0.0 else 0) - (1 if cj > 0.0 else 0)
        if correct and d_occ != 0:
            ratio = _n_pair_sets(J, n_occ) / _n_pair_sets(J, n_occ + d_occ)
            if ratio < 1.0 and not rng.random() < ratio:
                c[i] = ci                   # rejected: undo the move (rare: recompute r)
                c[j] = cj
                residuals(c, cell_ptr, cell_coord, cell_coef, s, r)
                out[1] += 1.0
                continue
        if ci == 0.0:
            n_occ = _set_occupied(i, occ, pos, n_occ)
        elif ni == 0.0:
            n_occ = _unset_occupied(i, occ, pos, n_occ)
        if nj == 0.0:
            n_occ = _unset_occupied(j, occ, pos, n_occ)
        elif cj == 0.0:
            n_occ = _set_occupied(j, occ, pos, n_occ)
        out[0] += 1.0
    return out


def n_pairs_for(J: int, N: int) -> int:
    """Default moves per iteration: ``min(J, N)`` (at least 2) -- about one move per occupied
    cell or per unit, whichever is fewer; ``J`` uniform pairs would cost ``J / N`` times more
    at ``N < J`` for the same number of moves that shift a unit."""
    return int(max(2, min(int(J), int(N))))


class HMCStep:
    """The step size of a chain's HMC theta update, adapted during the warm-up and frozen after.

    While adapting, ``log eps`` follows the Robbins--Monro recursion ``log eps += (a - target)
    g_t`` (``a`` the step's acceptance probability, gain ``g_t = min(1, 5 t^-0.6)``, the
    schedule of :class:`privpost.inference.damcmc._IWState`), clipped to ``[-12, 2]``. The kept
    draws come after the warm-up, from the frozen kernel, which leaves ``p(theta | c)``
    invariant for any fixed ``eps`` -- adaptation changes how fast the chain mixes, not what
    it targets. Measured on §9's ER structure (N = 10^3, eps = 1): the model's fixed step 0.35
    accepted 29 % of its proposals (0.3 % from the former start far in the tail).

    ``eps``: the current step; ``target``: the acceptance aimed at (default 0.75)."""

    def __init__(self, eps: float, target: float = 0.75):
        if not (eps > 0 and math.isfinite(eps)):
            raise PrivpostError(f"HMC step size must be a positive finite number, got {eps!r}")
        self.log_eps = math.log(float(eps))
        self.target = float(target)
        self.t = 0
        self.info = {}
        self.accept_sum = 0.0       # post-warm-up acceptance probabilities (for the notes)
        self.kept = 0

    @property
    def eps(self) -> float:
        return math.exp(self.log_eps)

    def record(self, adapting: bool) -> None:
        """Take the acceptance probability the last update left in ``info``: adapt (warm-up)
        or count it (kept iterations)."""
        a = float(self.info.get("accept_prob", 0.0))
        if adapting:
            self.t += 1
            self.log_eps += (a - self.target) * min(1.0, 5.0 * self.t ** -0.6)
            self.log_eps = min(max(self.log_eps, -12.0), 2.0)
        else:
            self.accept_sum += a
            self.kept += 1


#: With the compiled quantile shift (``loglinear`` tables), it is the default up to this many
#: units per cell (and ``MAX_QUANTILE_UNITS`` units); above, the residual shift where it can move
#: (``RESIDUAL_MAX_CELLS``). Measured on ``bench_counts``' mrf4 (J = 16): benchmarks/README.md,
#: "CliqueMRF theta kernel compiled". Raising the unit cap to ``16 J`` (which would bring the
#: quantile shift to §9's 3^10 table at N = 10^5) was measured and not adopted: worst-theta ESS
#: per CPU-s 0.3-1.2x the former default's on 4 grid cells (unconverged chains, EXPERIMENTS
#: §9.10, which also records the quantile chains' wider coverage at eps = 0.1).
QUANTILE_UNITS_PER_CELL = 16
MAX_QUANTILE_UNITS = 10**4
#: The residual shift runs by default only on tables of at most this many cells (the parent
#: :class:`~privpost.inference._count_table.CountTable`'s rule, ``MAX_SHIFT_DIM`` free cells).
#: On larger joint tables most cells hold ``N p_j = O(1)`` units, and rounding ``N p`` there
#: moves whole units at a multinomial cost of ``O(1)`` each, or below zero: measured on §9's
#: chain3 (N = 10^5, 10^6) and ER (N = 10^6) tables, a proposal of ``|dv| = 10^-3`` already
#: costs ``-1.4`` to ``-16`` in median log ratio and has a negative cell in 37-62 % of draws, so
#: the adapted step is ``~10^-4`` per coordinate against a conditional sd of ``v`` of ``~2
#: 10^-2`` in the warm-up (EXPERIMENTS §9.10): idle work (17-27 % of the CPU), left out.
RESIDUAL_MAX_CELLS = MAX_SHIFT_DIM + 1
#: Compiled quantile-shift moves per iteration by default: ``QUANTILE_WORK / (N + J)`` (each
#: move costs ``O(N + J m)``), between 2 and 40. On mrf4 at ``n = 10^2`` (2 theta steps):
#: worst ESS per draw 0.61-0.68 with 40 moves, 0.46 with 20, 0.29 with 10, 0.11 with 2.
QUANTILE_WORK = 4000


def default_shift(J: int, N: int, compiled: bool) -> str | None:
    """The non-centred move by default: ``"quantile"`` when ``N <= J`` (Python move) or, for a
    compiled (log-linear) table, ``N <= min(QUANTILE_UNITS_PER_CELL J, MAX_QUANTILE_UNITS)``
    when that is larger; above, ``"residual"`` on tables of at most ``RESIDUAL_MAX_CELLS`` cells
    and ``None`` (no non-centred move: the residual shift cannot move there) on larger ones."""
    lim = J
    if compiled and N > J:
        lim = max(J, min(QUANTILE_UNITS_PER_CELL * J, MAX_QUANTILE_UNITS))
    if N <= lim:
        return "quantile"
    return "residual" if J <= RESIDUAL_MAX_CELLS else None


class OccupiedTable(CountTable):
    """A :class:`~privpost.inference._count_table.CountTable` of ONE Multinomial group (a joint
    table) whose pair moves run among occupied cells (:func:`occupied_sweep`), ``n_pairs``
    per iteration (default :func:`n_pairs_for`).

    Two differences from the parent, both for joint tables much larger than ``N``:

    * the residual-shift move is kept whenever theta's free coordinates (``free[0]``, e.g. the
      MRF's identified subspace) number at most ``MAX_SHIFT_DIM`` -- its proposal lives there,
      not on the table's ``J - 1`` free cells, which the parent's rule counts;
    * the group's last cell, which takes up the rest in the shift move, is ``anchor`` (a fixed,
      public cell: the mapping must not depend on the chain's state), e.g. the cell the
      release puts most units in, so that it is rarely pushed below zero.

    * ``fit(rng) -> params | None`` (optional): theta of a chain's data-driven start (e.g. the
      MRF's naive estimate from the release re-noised with fresh noise, so that chains start
      dispersed), the table then drawn from the model at it, ``c ~ Mult(N, p(theta))``. The
      parent's start -- the least-squares table under the release, projected on the integer
      tables -- spreads a joint table of ``J >> N`` cells so thinly that its released margins
      miss the release by many noise scales (measured on §9's chain1, N = 10^4, eps = 1: mean
      absolute error 367 against a Laplace scale of 18; 24 from the model's draw at the naive
      estimate). A start does not change the target.

    * ``hmc_step`` (optional float): the theta update is an HMC step whose size each chain
      adapts during the warm-up (:class:`HMCStep`, starting from ``hmc_step``); ``update`` is
      then called as ``update(params, c, rng, step=HMCStep)`` and reads ``step.eps`` and
      writes ``step.info["accept_prob"]`` (the mean over its steps when an update makes
      ``hmc_steps`` of them, a number stated in the notes).

    * ``loglinear`` (optional tuple ``(B, idx, sigma, flatten, unflatten)``): theta is a flat
      ``(d,)`` vector of log-potentials (``params`` <-> flat by ``flatten(params)`` /
      ``unflatten(theta)``), the log cell probabilities are
      ``sum_a theta[idx[x, a]] - A(theta)``, the prior ``N(0, sigma^2 I)``, and the free
      coordinates ``B' theta`` -- the CliqueMRF's table. The quantile-shift moves then run
      compiled (:func:`privpost.inference._quantile_shift.quantile_shift_moves`, the same
      move draw for draw).

    Parameters: those of :class:`CountTable` with ``groups`` and ``totals`` replaced by ``N``
    (the public total) and ``anchor`` (int), and ``fit``, ``hmc_step``, ``shift``
    (``"quantile"``, ``"residual"``; default :func:`default_shift`, which may choose none),
    ``loglinear``.
    """

    def __init__(self, *, N, anchor: int, n_pairs=None, n_shift=None, fit=None,
                 hmc_step=None, hmc_steps: int = 1, shift=None, loglinear=None, **kw):
        J = kw["coords"].A.shape[1]
        anchor = int(anchor)
        if not 0 <= anchor < J:
            raise PrivpostError(f"count table: anchor must be a cell 0..{J - 1}, got {anchor}")
        N = int(N)
        if N < 0:
            raise PrivpostError(f"count table: the total N must be >= 0, got {N}")
        order = np.concatenate([np.delete(np.arange(J, dtype=np.int64), anchor), [anchor]])
        self._n_shift_given = n_shift is not None
        n_shift = 2 if n_shift is None else n_shift
        super().__init__(groups=[order], totals=[N], n_shift=n_shift,
                         n_pairs=n_pairs_for(J, N) if n_pairs is None else n_pairs, **kw)
        self._n_shift_base = 0
        if self.free is not None and n_shift:
            dim = np.asarray(self.free[0](self.prior_sample(np.random.default_rng(0)))).size
            if dim <= MAX_SHIFT_DIM:
                self._n_shift_base = int(n_shift)
        self.fit = fit
        self.hmc_step = None if hmc_step is None else float(hmc_step)
        self.hmc_steps = int(hmc_steps)
        self.loglinear = loglinear
        self.set_shift(default_shift(J, N, loglinear is not None) if shift is None else shift)

    def set_shift(self, shift: str | None) -> None:
        """Choose the non-centred move (``"quantile"``, ``"residual"``, ``None`` for none;
        ``"quantile-wrong"`` is the tests' wrong variant) and its number per iteration: the
        ``n_shift`` given, else 2, else for the compiled quantile shift ``QUANTILE_WORK / (N +
        J)`` between 2 and 40. Call before :meth:`chains`; every choice keeps the target."""
        if shift is None:
            self.shift, self.n_shift = None, 0
            return
        if shift not in ("quantile", "residual", "quantile-wrong"):
            raise PrivpostError(f"count table: shift must be 'quantile' or 'residual', "
                                f"got {shift!r}")
        self.shift = shift
        self.n_shift = self._n_shift_base
        N, J = int(self.totals[0]), self.J
        if self.loglinear is not None and shift == "quantile" and self.n_shift and \
                not self._n_shift_given:
            self.n_shift = int(min(40, max(2, QUANTILE_WORK // (N + J))))

    def start(self, rng, start: str):
        """``(params, c)`` of one chain (the parent's, with ``fit`` for ``start="data"``)."""
        if start == "prior" or self.fit is None:
            return super().start(rng, start)
        params = self.fit(rng)
        if params is None:          # no fit for this release: the parent's start
            return super().start(rng, start)
        return params, self.sample_table(params, rng)

    def chains(self, rngs, start: str) -> list:
        return [OccupiedTableChain(self, rng, start) for rng in rngs]

    def extra_notes(self, results: list[dict]) -> list[str]:
        acc = [r.get("pair_accept", math.nan) for r in results]
        moves = (f"count table: {self.n_pairs} pair moves among occupied cells (exact "
                 f"conditional, selection-corrected; acceptance {min(acc):.3f}-{max(acc):.3f})")
        hmc = [r.get("hmc_accept", math.nan) for r in results]
        if self.hmc_step is not None:
            eps = [r.get("hmc_eps", math.nan) for r in results]
            k = self.hmc_steps
            moves += (f"; theta by HMC ({k} step{'s' if k > 1 else ''} per update) with the "
                      f"step adapted in the warm-up "
                      f"({min(eps):.3g}-{max(eps):.3g}), acceptance after warm-up "
                      f"{min(hmc):.2f}-{max(hmc):.2f}")
        if self.n_shift:
            sh = [r["shift_accept"] for r in results]
            kind = "residual-shift" if self.shift == "residual" else "quantile-shift"
            return [f"{moves}, the theta update and {self.n_shift} {kind} (non-centred) "
                    f"moves per iteration; shift acceptance after warm-up "
                    f"{min(sh):.2f}-{max(sh):.2f}"]
        why = ""
        if self.shift is None and self._n_shift_base:
            why = (f" (no non-centred move: above the quantile shift's cap the residual shift "
                   f"cannot move on a table of more than {RESIDUAL_MAX_CELLS} cells, "
                   f"EXPERIMENTS §9.10)")
        return [f"{moves} and the theta update per iteration{why}"]


class OccupiedTableChain(TableChain):
    """A :class:`~privpost.inference._count_table.TableChain` whose pair moves are
    :func:`occupied_sweep`'s."""

    def __init__(self, law: OccupiedTable, rng, start: str):
        super().__init__(law, rng, start)
        self.occ = np.zeros(law.J, dtype=np.int64)
        self.pos = np.zeros(law.J, dtype=np.int64)
        self.moves = np.zeros(2)
        self.step = None if law.hmc_step is None else HMCStep(law.hmc_step)
        self.ll = None
        if law.loglinear is not None and self.iw is not None:
            dim = self.iw.dim
            self.ll = {"iw_f": np.array([self.iw.log_s, self.iw.target]),
                       "iw_i": np.zeros(4, dtype=np.int64), "mean": np.zeros(dim),
                       "m2": np.zeros((dim, dim)), "chol": np.eye(dim)}

    def _iterate(self, adapting: bool) -> None:
        law, co = self.law, self.law.coords
        self.moves += occupied_sweep(self.c, self.lp, law.n_pairs, law.cell_ptr, law.cell_coord,
                                     law.cell_coef, co.s, co.w, co.l2, self.r, self.occ,
                                     self.pos, self.b_idx, self.b_r, self.b_v, self.b_w,
                                     self.b_l2, True, self.rng)
        if self.step is None:
            self.params = law.update(self.params, self.c, self.rng)
        else:
            self.params = law.update(self.params, self.c, self.rng, step=self.step)
            self.step.record(adapting)
        self.lp = np.ascontiguousarray(law.log_probs(self.params), dtype=np.float64)
        if self.iw is not None:
            if law.shift == "residual":
                self._shift(adapting)
            elif law.shift == "quantile" and self.ll is not None:
                self._quantile_shift_compiled(adapting)
            else:
                self._quantile_shift(adapting)

    def _quantile_shift_compiled(self, adapting: bool) -> None:
        """:meth:`_quantile_shift` for a log-linear table, compiled
        (:func:`privpost.inference._quantile_shift.quantile_shift_moves`)."""
        from privpost.inference._quantile_shift import quantile_shift_moves

        law, co, st = self.law, self.law.coords, self.ll
        B, idx, sigma, flatten, unflatten = law.loglinear
        theta = np.array(flatten(self.params), dtype=np.float64)
        i2, i3 = int(st["iw_i"][2]), int(st["iw_i"][3])
        moved = quantile_shift_moves(theta, self.c, self.lp, B, idx, float(sigma), law.n_shift,
                                     adapting, law.cell_ptr, law.cell_coord, law.cell_coef,
                                     co.s, co.w, co.l2, self.r, self.r_new, st["iw_f"],
                                     st["iw_i"], st["mean"], st["m2"], st["chol"], self.rng)
        if moved:
            self.params = unflatten(theta)
        self.shift_prop += int(st["iw_i"][2]) - i2
        self.shift_acc += int(st["iw_i"][3]) - i3

    def _quantile_shift(self, adapting: bool) -> None:
        """``n_shift`` quantile-shift (non-centred) moves: the count-level analogue of the record
        sampler's interweaving, for tables with fewer units than cells (where the residual shift
        is idle: ``round(N p_j) = 0`` on almost every cell).

        The units are records ``x_i = F_theta^{-1}(u_i)`` of i.i.d. uniforms ``u_i`` through the
        inverse CDF of ``p_theta`` over the cells in their fixed (public) order, so the target
        written in ``(theta, u)`` is ``p(theta) eta(s | A c(theta, u))`` on ``[0, 1]^N`` -- the
        multinomial law is the law of the uniforms and does not depend on theta. One move:

        1. ``u | theta, c``: each of the ``c_j`` units of cell ``j`` uniform on ``[F(j - 1),
           F(j))`` (exact: the units' uniforms given their cells);
        2. ``v' = v + s L z`` on the free coordinates (the residual shift's adapted proposal,
           :class:`privpost.inference.damcmc._IWState`), ``theta' = from_free(theta, v')``;
        3. ``c' = hist(F_theta'^{-1}(u))`` and accept with probability ``min(1, p(theta')
           |d theta'/d v'| eta(s | A c') / (p(theta) |d theta/d v| eta(s | A c)))`` -- no
           multinomial term (``shift="quantile-wrong"``, the tests' wrong variant, puts the
           residual shift's ``Mult(c' | theta') / Mult(c | theta)`` in and counts the table's
           information about theta twice).

        Step 2-3 is a Metropolis step with a symmetric proposal on ``theta`` given ``u`` for the
        ``(theta, u)`` target, and step 1 an exact Gibbs draw, so ``(theta, c)`` keeps its law.
        Cost per move: ``O(J + N log J)``."""
        law, iw, rng = self.law, self.iw, self.rng
        to_free, from_free, log_jac = law.free
        co = law.coords
        N = int(law.totals[0])
        params = self.params
        v = np.asarray(to_free(params), dtype=np.float64)
        lpr = float(law.log_prior(params)) + float(log_jac(params))
        residuals(self.c, law.cell_ptr, law.cell_coord, law.cell_coef, co.s, self.r)
        for _ in range(law.n_shift):
            F = np.cumsum(np.exp(self.lp - self.lp.max()))
            F /= F[-1]
            lo = np.concatenate([[0.0], F[:-1]])
            occ = np.flatnonzero(self.c > 0)
            cells = np.repeat(occ, self.c[occ].astype(np.int64))
            u = lo[cells] + (F[cells] - lo[cells]) * rng.random(N)
            z = rng.standard_normal(iw.dim)
            log_u = math.log1p(-rng.random())
            vp = v + math.exp(iw.log_s) * (iw.chol @ z)
            prop = from_free(params, vp)
            lprp = float(law.log_prior(prop)) + float(log_jac(prop))
            alpha = 0.0
            if lprp > -math.inf:
                lp_new = np.ascontiguousarray(law.log_probs(prop), dtype=np.float64)
                Fn = np.cumsum(np.exp(lp_new - lp_new.max()))
                Fn /= Fn[-1]
                new = np.minimum(np.searchsorted(Fn, u, side="right"), law.J - 1)
                c_new = np.bincount(new, minlength=law.J).astype(np.float64)
                # noise part from the residuals and the change A (c_new - c) (cancellation-free,
                # _kernels); r_new holds the change
                table_change(self.c, c_new, law.cell_ptr, law.cell_coord, law.cell_coef,
                             self.r_new)
                la = log_eta_change(self.r, self.r_new, co.w, co.l2) + lprp - lpr
                if law.shift == "quantile-wrong":
                    la = shift_log_ratio(self.c, c_new, self.lp, lp_new, law.cell_ptr,
                                         law.cell_coord, law.cell_coef, co.s, co.w, co.l2,
                                         self.r, self.r_new) + lprp - lpr
                if la != la:
                    la = -math.inf
                alpha = 1.0 if la >= 0 else math.exp(la)
                if log_u < la:
                    params, v, lpr = prop, vp, lprp
                    self.c, self.lp = c_new, lp_new
                    residuals(self.c, law.cell_ptr, law.cell_coord, law.cell_coef, co.s,
                              self.r)
                    if not adapting:
                        self.shift_acc += 1
            if adapting:
                iw.adapt(v, alpha)
            else:
                self.shift_prop += 1
        self.params = params

    def result(self) -> dict:
        res = super().result()
        tried = self.moves.sum()
        res["pair_accept"] = self.moves[0] / tried if tried else math.nan
        if self.step is not None:
            res["hmc_eps"] = self.step.eps
            res["hmc_accept"] = (self.step.accept_sum / self.step.kept) if self.step.kept \
                else math.nan
        return res
