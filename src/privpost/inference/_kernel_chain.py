"""Resumable chains of a Markov kernel given as a step function, run for a fixed length or
until converged (``randomized-response``; ``nonprivate``'s update-kernel chains).

A :class:`KernelChain` holds one chain's state, its own generator and its kept draws; its
:meth:`~KernelChain.run` applies ``step(state, rng) -> state`` ``k`` times. It has the interface
of :func:`privpost.inference._until.run_rounds` (``run(k, keep)``, ``done``, ``n_stored``,
``result()``). Each chain consumes only its own generator, in the same order however its
iterations are split into calls, so a run until converged that stopped at ``S`` draws per chain
equals a fixed run of ``S`` draws with the same seed (chains advanced one after the other).
:func:`privpost.inference._until.sample` runs either mode.
"""

from __future__ import annotations

from typing import Callable

import numpy as np

__all__ = ["KernelChain", "storable_draws"]


def storable_draws(default: int, chains: int, entries: int) -> int:
    """The default draw budget per chain, lowered so that ``chains x draws x entries`` fits the
    storage limit ``privpost.limits`` ``max_draws`` (at least 4: a budget that cannot hold 4
    draws is then refused by :func:`privpost.limits.check_draws`)."""
    from privpost.limits import get_limits

    cap = get_limits().max_draws // max(int(chains) * int(entries), 1)
    return max(4, min(int(default), int(cap)))


class KernelChain:
    """One resumable chain: ``state`` (any object), ``step(state, rng) -> state``, the
    generator ``rng`` and ``record(state) -> {name: array of shape shapes[name]}`` (the kept
    values of a state). Kept draws are stored in blocks, ``name -> (n_stored, *shape)`` once
    concatenated by :meth:`result`."""

    def __init__(self, state, step: Callable, rng, record: Callable, shapes: dict):
        self.state, self.step, self.rng, self.record = state, step, rng, record
        self.shapes = {nm: tuple(sh) for nm, sh in shapes.items()}
        self.done = 0           # iterations run
        self.n_stored = 0       # draws kept
        self._blocks: dict[str, list[np.ndarray]] = {nm: [] for nm in self.shapes}

    def run(self, k: int, keep: bool, progress=None) -> None:
        """``k`` more iterations, their draws kept when ``keep``; ``progress(i)`` after each
        (``i``: the chain's iteration count minus one)."""
        k = int(k)
        if k <= 0:
            return
        if keep:
            out = {nm: np.empty((k,) + sh) for nm, sh in self.shapes.items()}
        state, step, rng = self.state, self.step, self.rng
        for j in range(k):
            state = step(state, rng)
            if keep:
                for nm, v in self.record(state).items():
                    out[nm][j] = v
            self.done += 1
            if progress is not None:
                progress(self.done - 1)
        self.state = state
        if keep:
            for nm in self.shapes:
                self._blocks[nm].append(out[nm])
            self.n_stored += k

    def result(self) -> dict:
        """``{name: (n_stored, *shape) for each kept name, "n_stored": n_stored}``."""
        res = {nm: (np.concatenate(b) if b else np.empty((0,) + self.shapes[nm]))
               for nm, b in self._blocks.items()}
        if any(len(b) > 1 for b in self._blocks.values()):    # keep one block from now on
            self._blocks = {nm: [res[nm]] for nm in res}
        res["n_stored"] = self.n_stored
        return res
