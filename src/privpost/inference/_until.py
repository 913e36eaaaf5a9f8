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

:func:`run_rounds` is the driver of the samplers whose chains are resumable objects in this
process (the HMM samplers, :mod:`privpost.inference._hmm_until`; DPapprox,
:mod:`privpost.inference.compositional_approx`; randomized-response and nonprivate,
:mod:`privpost.inference._kernel_chain`): each chain has ``run(k, keep)`` (``k`` more
iterations, their draws kept or not), ``done`` (iterations run), ``n_stored`` (draws kept) and
``result()`` (a dict of the kept draws, ``n_stored`` included). The chains advance in
round-robin blocks of about ``block_seconds`` each; the time budget is checked between blocks.
A sampler passes ``prepare(results) -> results`` (the chains' results made ready for the
diagnostics: the HMM's state relabelling, or :func:`common_length`). :func:`sample` runs such
chains either for a fixed length or until converged. :func:`plan_for` checks the budgets a user
passed and builds the :class:`Plan`; :func:`refuse_budgets` refuses them with a fixed ``draws=``.
"""

from __future__ import annotations

import math
import time

import numpy as np

from privpost import diagnostics
from privpost.errors import PrivpostError

__all__ = ["Plan", "FIRST_DRAWS", "MAX_DRAWS", "MAX_SECONDS", "plan_for", "run_rounds",
           "common_length", "refuse_budgets", "sample", "stack"]

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


def plan_for(max_draws, max_seconds, *, first: int, default_draws: int,
             default_seconds: float) -> Plan:
    """The :class:`Plan` of a run until converged from a user's budgets, checked:
    ``max_draws`` (kept draws per chain, integer >= 4; default ``default_draws``) and
    ``max_seconds`` (number > 0; default ``default_seconds`` when neither budget is given,
    ``None`` with ``max_draws`` given: no time budget); rounds start at ``first`` draws."""
    if max_draws is None:
        budget = default_draws
        if max_seconds is None:
            max_seconds = default_seconds
    else:
        if isinstance(max_draws, bool) or not isinstance(max_draws, (int, np.integer)) \
                or max_draws < 4:
            raise PrivpostError(f"max_draws must be an integer >= 4 (kept draws per chain), "
                                f"got {max_draws!r}")
        budget = int(max_draws)
    if max_seconds is not None and (isinstance(max_seconds, bool)
                                    or not isinstance(max_seconds, (int, float))
                                    or not (max_seconds > 0 and math.isfinite(max_seconds))):
        raise PrivpostError(f"max_seconds must be a number > 0 (seconds) or None, got "
                            f"{max_seconds!r}")
    return Plan(first, budget, max_seconds)


def refuse_budgets(max_draws, max_seconds, also: str = "") -> None:
    """Refuse ``max_draws`` / ``max_seconds`` where no run until converged happens (a fixed
    ``draws=``, or a sampler without that run, named in ``also``)."""
    if max_draws is not None or max_seconds is not None:
        raise PrivpostError("max_draws / max_seconds are the budgets of the run until converged "
                            f"(draws=None); with a fixed draws={also} leave them out")


def sample(chains, warmup: int, draws: int, plan, progress: bool, label: str, names,
           block_seconds: float = 0.2) -> list[dict]:
    """Run the resumable chain objects ``chains`` (module docstring): with ``plan`` None,
    ``warmup`` iterations (not kept) then ``draws`` kept ones each, one chain after the other;
    otherwise until converged under ``plan`` (:func:`run_rounds`, its convergence check on the
    kept values ``names``; ``plan.reason`` / ``plan.note`` say how it stopped). A chain's draws
    do not depend on the mode, only on its own stream. Returns the chains' ``result()`` dicts,
    of one common length."""
    from privpost.inference._gibbs_common import Progress
    from privpost.inference._progress import ProgressBar

    n = len(chains)
    if plan is None:
        bar = Progress(n * (warmup + draws), progress, label)
        for c, ch in enumerate(chains):
            upd = (lambda i, off=c * (warmup + draws): bar.update(off + i))
            ch.run(warmup, False, upd)
            ch.run(draws, True, upd)
        return [ch.result() for ch in chains]
    bar = ProgressBar(n * (warmup + plan.first), progress, label,
                      f"{n} chain{'s' if n > 1 else ''}", close_at_total=False)
    return run_rounds(chains, warmup, plan, bar, names, lambda res: stack(res, names),
                      common_length, block_seconds=block_seconds)


def stack(results: list[dict], names) -> dict:
    """The draws ``name -> (chains, S, ...)`` of the chains' results (common length ``S``)."""
    return {nm: np.stack([r[nm] for r in results]) for nm in names}


def common_length(results: list[dict]) -> list[dict]:
    """The chains' result dicts truncated to their common length: every array whose first
    axis is the chain's ``n_stored`` is cut to ``min(n_stored)`` (views, no copies)."""
    length = min(r["n_stored"] for r in results)
    out = []
    for r in results:
        n = r["n_stored"]
        d = {k: (v[:length] if isinstance(v, np.ndarray) and v.ndim and v.shape[0] == n else v)
             for k, v in r.items()}
        d["n_stored"] = length
        out.append(d)
    return out


def run_rounds(chains, warmup: int, plan: Plan, bar, names, to_draws, prepare,
               block_seconds: float = 0.2) -> list[dict]:
    """Run the resumable chain objects ``chains`` (module docstring) until ``plan`` stops:
    ``warmup`` iterations each (not kept), then rounds of kept draws.

    The time budget (counted from ``plan.t0``; the predicted cost of the next decision --
    ``prepare`` and the diagnostics, from the last one's cost per draw -- set aside) is checked
    between blocks. On expiry in the warm-up, the warm-up is cut there and every chain makes 4
    draws (``run(4, keep=True)``, so that the diagnostics can say how far from converged the run
    is); after it the chains stop once each holds 4 draws. ``bar``: a
    :class:`~privpost.inference._progress.ProgressBar` (total updated each round, worst ESS /
    R-hat in its description). ``prepare(results) -> results``: the chains' ``result()`` dicts
    made ready for the diagnostics, truncated to a common length (``n_stored``);
    ``to_draws(results) -> dict`` maps them to the Posterior's draws (``names``,
    ``(chains, S, ...)``). Returns the prepared results of the last round; ``plan.reason``
    says why it stopped."""
    n = len(chains)
    # "reserve": the predicted seconds of the next decision (prepare + diagnostics, which
    # grow with the draws: the last decision's seconds per draw times the draws), kept out of
    # the time budget so that the run ends near max_seconds, not one decision after it
    state = {"block": 1, "stop": False, "per_draw": 0.0}

    def out_of_time() -> bool:
        if plan.max_seconds is None:
            return False
        reserve = state["per_draw"] * min(c.n_stored for c in chains)
        return time.perf_counter() - plan.t0 + reserve > plan.max_seconds

    def done_total():
        return sum(c.done for c in chains)

    def advance(target: int, keep: bool) -> None:
        while not state["stop"] and any(c.done < target for c in chains):
            for c in chains:
                k = min(state["block"], target - c.done)
                if k <= 0:
                    continue
                t0 = time.perf_counter()
                c.run(k, keep)
                dt = time.perf_counter() - t0
                if k == state["block"]:         # aim each block at block_seconds
                    state["block"] = int(min(max(1, k * block_seconds / max(dt, 1e-6)),
                                             4 * k))
                bar.update(done_total() - 1)
                if (plan.out_of_time() or out_of_time()) and \
                        (not keep or min(ch.n_stored for ch in chains) >= 4):
                    state["stop"] = True
                    return

    advance(warmup, keep=False)
    warm_cut = None
    if state["stop"]:            # the time budget ran out in the warm-up: 4 draws per chain
        warm_cut = [c.done for c in chains]
        for c in chains:
            c.run(4, keep=True)
    target = plan.first
    while True:
        if warm_cut is None:
            advance(warmup + target, keep=True)
        t0 = time.perf_counter()
        res = prepare([c.result() for c in chains])
        draws = to_draws(res)
        length = res[0]["n_stored"]
        fake = [{"n_stored": length, "draws": {nm: draws[nm][i] for nm in names}}
                for i in range(n)]
        extra = plan.decide(fake, names)
        state["per_draw"] = (time.perf_counter() - t0) / max(length, 1)
        if extra <= 0 or state["stop"]:
            if state["stop"] and plan.reason is None:
                plan.reason = f"time budget of {plan.max_seconds:g} s spent"
            if warm_cut is not None and plan.reason.startswith("time budget"):
                plan.reason += (f" during the warm-up: it was cut at {min(warm_cut)}-"
                                f"{max(warm_cut)} of {warmup} iterations per chain, then 4 "
                                "draws per chain were made")
            bar.close()
            return res
        target = length + extra
        ess, rh = plan.worst
        bar.retotal(n * (warmup + target),
                    f"{n} chains | worst ESS {ess:.0f} (>= 400), R-hat {rh:.3f} (<= 1.01)")
