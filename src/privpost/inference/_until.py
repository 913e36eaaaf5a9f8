"""Run-until-converged schedule of the MCMC samplers (issue 13; ``damcmc.run(draws=None)``).

After the warm-up the chains run in rounds. A round ends when every chain holds the round's
number of draws; then :meth:`Plan.decide` computes the diagnostics of all chains together
(:mod:`privpost.diagnostics`) and either stops -- every scalar parameter entry has split R-hat
<= 1.01 and bulk and tail ESS >= 400 (Vehtari et al. 2021), or a budget ran out -- or asks for
more draws. The next round's length is aimed at the ESS threshold from the ESS reached so far
(ESS grows about linearly in the draws): ``1.25 * 400 / worst ESS`` times the current length,
between 1.5x and 4x, capped by ``max_draws``.

The budgets are stated to the user in a note: ``max_draws`` (retained draws per chain, an
iteration budget of ``warmup + max_draws * thin`` iterations) and ``max_seconds`` (wall time of
the sampling, checked between blocks of about 0.1 s; on expiry the chains stop where they are
and are truncated to a common length). Draws are never discarded between rounds, so the result
is the same chain as one run of the final length (a fixed ``draws=`` of that length, the same
seed and the same driver -- compiled or generic -- give the same draws).
"""

from __future__ import annotations

import math
import time

import numpy as np

from privpost import diagnostics

__all__ = ["Plan", "FIRST_DRAWS", "MAX_DRAWS", "MAX_SECONDS"]

FIRST_DRAWS = 1000      # draws per chain of the first round
MAX_DRAWS = 50_000      # default iteration budget: retained draws per chain
MAX_SECONDS = 600.0     # default time budget of the sampling, seconds


class Plan:
    """Decides, after each round, whether to stop and how many draws to add per chain."""

    def __init__(self, first: int, max_draws: int, max_seconds: float | None):
        self.first = min(first, max_draws)
        self.max_draws = max_draws
        self.max_seconds = max_seconds
        self.t0 = time.perf_counter()
        self.reason = None
        self.rounds = 0
        self.worst = (math.nan, math.nan)
        self.table = None       # the last round's diagnostics table (reused by the final check)

    def out_of_time(self) -> bool:
        return self.max_seconds is not None and time.perf_counter() - self.t0 > self.max_seconds

    def decide(self, results: list[dict], names: list[str]) -> int:
        """Extra draws per chain for the next round (0: stop; ``self.reason`` says why).

        ``results``: the chains' ``result()`` dicts (``draws`` name -> (n_stored, ...))."""
        self.rounds += 1
        length = min(r["n_stored"] for r in results)
        if length < 4:
            self.reason = "interrupted before 4 draws"
            return 0
        draws = {nm: np.stack([r["draws"][nm][:length] for r in results]) for nm in names}
        table = diagnostics.summarise(draws, cheap=True)
        self.table = table
        self.worst = diagnostics.worst(table)
        if not diagnostics.check(draws, table=table):
            self.reason = "converged"
            return 0
        if self.out_of_time():
            self.reason = f"time budget of {self.max_seconds:g} s spent"
            return 0
        if length >= self.max_draws:
            self.reason = f"draw budget of {self.max_draws} per chain spent"
            return 0
        ess = self.worst[0]
        factor = 1.25 * diagnostics.ESS_MIN / ess if ess > 0 else 4.0
        factor = min(max(factor, 1.5), 4.0)
        new = min(self.max_draws, int(math.ceil(length * factor)))
        return new - length

    def note(self, length: int) -> str:
        ess, rh = self.worst
        budget = (f"budgets: {self.max_draws} draws per chain"
                  + (f", {self.max_seconds:g} s" if self.max_seconds is not None else ""))
        return (f"run until converged: stopped after {self.rounds} round(s) at {length} draws "
                f"per chain ({self.reason or 'stopped'}; worst bulk/tail ESS {ess:.0f}, worst "
                f"R-hat {rh:.4f}; {budget})")
