"""The proposal of the HMM count latent's residual-shift move, learnt in the warm-up.

:func:`privpost.inference._hmm_core.shift_moves` moves each state's emissions ``theta_d[k]``
together with the counts of its cells, in additive log-ratio coordinates ``v (K_d - 1,)``, by a
random walk ``v + step * L xi`` and (alternately) an independence proposal ``t_4(mean, (1.2
L)(1.2 L)^T)``. This module holds ``L``, ``mean`` and ``step`` per (state, feature) block and
learns them in the warm-up only:

* the sample mean and covariance of ``v`` over windows of warm-up iterations (lengths 25, 25,
  50, 100, 200, ... : each window's estimate replaces the previous one when it is complete, so
  the early transient is forgotten, as in Stan's windowed adaptation), ``L`` its Cholesky
  factor after shrinking towards the diagonal (``(n S + 5 diag S) / (n + 5)``, a small ridge);
  with the first complete window of at least 50 iterations the independence proposal is
  switched on for the block;
* when the warm-up ends (the first :meth:`ShiftProposal.freeze`), the window in progress is
  used if it holds at least 30 iterations;
* ``step`` by stochastic approximation towards random-walk acceptance 0.3 (inside
  ``shift_moves``), reset to ``2.38 / sqrt(K_d - 1)`` whenever ``L`` changes;
* for the thinning moves (:func:`~privpost.inference._hmm_core.thin_moves`) the anchor level
  of each block (the most probable level of the last window's mean; the last level before the
  first window) and, per level, the log sd of the log scale factor (stochastic approximation
  towards acceptance 0.3 inside ``thin_moves``).

While draws are kept nothing changes, so the kept chain is one fixed MH kernel of the exact
target (adaptation in the warm-up only); the learnt shape depends on the chain's own past only,
so a run in rounds equals one run of its final length. A full ``L`` matters: the log-ratio
coordinates all share the reference level's noise, so when that level is rare they are strongly
correlated and a per-coordinate scale cannot follow them (EXPERIMENTS.md §7.1).

Shapes: ``K`` states, ``D`` features, ``M = max_d K_d - 1``; ``chol (K, D, M, M)``, ``mean
(K, D, M)``, ``indep (K, D)`` int64, ``logstep (K, D)``, ``anchor (K, D)`` int64 (level index
within the block), ``thin_logstep (K, W)``.
"""

from __future__ import annotations

import numpy as np

__all__ = ["ShiftProposal", "WINDOWS"]

WINDOWS = (25, 25, 50, 100, 200, 400, 800, 1600)   # then 1600 each
MIN_FINAL = 30                # iterations of the window in progress used at the end of warm-up
MIN_INDEP = 50                # iterations of a window before the independence proposal is used


class ShiftProposal:
    """Per-block proposal of the residual-shift move (module docstring). ``levels (D,)``."""

    def __init__(self, K: int, levels):
        levels = np.asarray(levels, dtype=np.int64)
        self.K, self.levels = K, levels
        self.D = levels.size
        self.M = M = int(levels.max()) - 1 if levels.size else 0
        self.chol = np.zeros((K, self.D, M, M))
        for i in range(M):
            self.chol[:, :, i, i] = 1.0
        self.mean = np.zeros((K, self.D, M))
        self.indep = np.zeros((K, self.D), dtype=np.int64)
        self.logstep = np.full((K, self.D), -3.0)
        # thinning moves (:func:`~privpost.inference._hmm_core.thin_moves`): per level the log
        # sd of log s, and per block the anchor level (the most probable in the last window;
        # the last level until then)
        self.thin_logstep = np.full((K, int(levels.sum())), np.log(0.3))
        self.anchor = np.tile(levels - 1, (K, 1)).astype(np.int64)
        self.frozen = False
        self._win = 0                 # index into WINDOWS
        self._reset()

    def _reset(self):
        K, D, M = self.K, self.D, self.M
        self._n = 0
        self._mu = np.zeros((K, D, M))
        self._m2 = np.zeros((K, D, M, M))

    def _window(self) -> int:
        return WINDOWS[min(self._win, len(WINDOWS) - 1)]

    def coords(self, theta, offsets) -> np.ndarray | None:
        """``v (K, D, M)``: additive log-ratio coordinates of every block of ``theta (K, W)``
        (zero-padded past ``K_d - 1``); None when a probability is 0 (no update)."""
        if not np.all(theta > 0.0):
            return None
        lt = np.log(theta)
        v = np.zeros((self.K, self.D, self.M))
        for d, (o, J) in enumerate(zip(offsets, self.levels)):
            v[:, d, :J - 1] = lt[:, o:o + J - 1] - lt[:, o + J - 1:o + J]
        return v

    def learn(self, theta, offsets) -> None:
        """Warm-up only: add the current emissions to the window; install a complete window."""
        if self.frozen:
            return
        v = self.coords(theta, offsets)
        if v is None:
            return
        self._n += 1
        delta = v - self._mu
        self._mu += delta / self._n
        self._m2 += delta[..., :, None] * (v - self._mu)[..., None, :]
        if self._n >= self._window():
            self._install()
            self._win += 1
            self._reset()

    def freeze(self) -> None:
        """End of the warm-up: use the window in progress if long enough; adapt no more."""
        if self.frozen:
            return
        if self._n >= MIN_FINAL:
            self._install()
        self.frozen = True

    def _install(self) -> None:
        n = self._n
        if n < 3:
            return
        S = self._m2 / (n - 1)
        for d, J in enumerate(self.levels):
            m = int(J) - 1
            for k in range(self.K):
                s = S[k, d, :m, :m]
                dg = np.diag(np.diag(s))
                reg = (n * s + 5.0 * dg) / (n + 5.0) + 1e-10 * np.eye(m)
                try:
                    L = np.linalg.cholesky(reg)
                except np.linalg.LinAlgError:
                    continue
                if not np.all(np.isfinite(L)):
                    continue
                self.chol[k, d, :m, :m] = L
                mu = np.append(self._mu[k, d, :m], 0.0)
                self.anchor[k, d] = int(np.argmax(mu))      # most probable level on average
                self.mean[k, d, :m] = self._mu[k, d, :m]
                self.logstep[k, d] = np.log(2.38 / np.sqrt(m))
                if n >= MIN_INDEP:
                    self.indep[k, d] = 1
