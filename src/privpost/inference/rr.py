"""Exact posterior from randomized-response reports (method ``"randomized-response"``).

A randomized-response release holds one report ``r_i`` per record: the true category ``c_i`` with
probability ``q_keep = e^ε / (e^ε + k - 1)``, any other category with probability
``q_other = 1 / (e^ε + k - 1)`` (:class:`privpost.mechanisms.RandomizedResponse`). With the
Dirichlet--categorical model ``c_i ~ Categorical(p)``, ``p ~ Dirichlet(alpha)`` the likelihood is
a product over records, ``prod_i sum_c p_c q(r_i | c)``, and this data-augmentation Gibbs sampler
targets the exact posterior:

1. latent true categories: for each reported level ``r`` (``m_r`` reports), the true categories
   of those records are ``Multinomial(m_r, w_r)`` with ``w_r(c) ∝ p_c q(r | c)`` (the records
   are exchangeable given their report, so only the counts matter: cost ``O(k^2)`` per
   iteration, whatever ``n``);
2. ``p | c ~ Dirichlet(alpha + counts(c))``.

Both steps are exact conditional draws, so the chain is invariant for ``p(p, c | r)``.

**Run length.** ``draws=None`` (the default) runs until converged: after ``warmup`` (500)
iterations the ``chains`` (4) chains run in rounds (:class:`privpost.inference._until.Plan`,
the rule of ``damcmc.run(draws=None)``: first round :data:`FIRST_DRAWS` = 1000 draws per chain,
later rounds sized from the ESS reached) until every entry of ``p`` has split R-hat <= 1.01 and
bulk and tail ESS >= 400, or a budget runs out: ``max_draws`` kept draws per chain (default
:data:`MAX_DRAWS` = 50,000, lowered when ``chains x draws x k`` would exceed the storage
limit ``privpost.limits`` ``max_draws``) and ``max_seconds`` of wall time for the warm-up and
draws (default :data:`MAX_SECONDS` = 120 s; ``None`` with ``max_draws`` given: no time
budget). The sampler is cheap (``O(k^2)`` per iteration; measured at load ~4, ``n = 300``,
``k = 3``: ``eps = 1`` stops at ~3,800 draws per chain in 0.5 s, ``eps = 0.25`` at ~20,000 in
2.4 s; ``k = 10``, ``n = 2000``, ``eps = 1`` at 24,000 in 6.6 s). Each chain has its own random
stream (:class:`privpost.inference._kernel_chain.KernelChain`), so a fixed ``draws=S`` run equals a run
until converged that stopped at ``S`` draws per chain with the same seed. Either way the chains
are checked (:func:`privpost.diagnostics.flag`): a run that misses the thresholds -- a budget
spent, or a fixed ``draws=`` too short -- warns (ConvergenceWarning), adds a ``NOT CONVERGED``
note and sets ``converged=False`` (``privpost infer --strict`` exits 3).
Other options: ``seed``, ``progress``.
"""

from __future__ import annotations

import math
import time

import numpy as np

from privpost.errors import IncompatibleError

__all__ = ["run", "report_counts", "transition_matrix", "FIRST_DRAWS", "MAX_DRAWS", "MAX_SECONDS"]

FIRST_DRAWS = 1000     # run until converged: draws per chain of the first round
MAX_DRAWS = 50_000     # default draw budget: kept draws per chain
MAX_SECONDS = 120.0    # default time budget of the warm-up and draws, seconds


def transition_matrix(mechanism) -> np.ndarray:
    """``Q[c, r] = P(report r | true c)``, shape ``(k, k)``."""
    k = int(mechanism.categories)
    keep, other = math.exp(mechanism.log_keep), math.exp(mechanism.log_other)
    return np.full((k, k), other) + np.eye(k) * (keep - other)


def report_counts(release) -> np.ndarray:
    """Number of reports of each level, shape ``(k,)``."""
    k = int(release.mechanism.categories)
    return np.bincount(np.asarray(release.observed, dtype=np.int64), minlength=k).astype(float)


def _rr_step(m, Q, alpha):
    """The Gibbs sweep ``p -> p'`` (module docstring) as ``step(p, rng)``, ``p`` shape ``(k,)``."""
    k = Q.shape[0]
    levels = [r for r in range(k) if m[r] > 0]

    def step(p, rng):
        w = p[:, None] * Q                    # (true c, report r) ∝ P(c) P(r | c)
        w /= w.sum(axis=0, keepdims=True)
        counts = np.zeros(k)
        for r in levels:
            counts += rng.multinomial(int(m[r]), w[:, r])
        return rng.dirichlet(alpha + counts)

    return step


def run(model, release, *, draws: int | None = None, warmup: int = 500, chains: int = 4,
        seed=None, progress: bool = False, max_draws: int | None = None,
        max_seconds: float | None = None, **options):
    """Exact posterior of a Dirichlet--categorical model from randomized-response reports.

    ``draws=None`` (default): run until converged within the budgets ``max_draws`` (kept draws
    per chain, default 50,000) and ``max_seconds`` (default 120 s); a fixed ``draws=`` runs
    exactly that many (``max_draws`` / ``max_seconds`` are then refused). Returns a Posterior
    with ``p`` ``(chains, draws, k)``, ``exact=True``."""
    from privpost._rng import spawn
    from privpost.diagnostics import flag
    from privpost.inference import _until
    from privpost.inference._gibbs_common import check_sampler_options, make_posterior, \
        reject_unknown
    from privpost.inference._kernel_chain import KernelChain, storable_draws
    from privpost.inference import reject_release_set
    from privpost.limits import check_draws

    reject_unknown("randomized-response", options)
    _, warmup, chains = check_sampler_options(1 if draws is None else draws, warmup, chains)
    if draws is not None:
        _until.refuse_budgets(max_draws, max_seconds)
    reject_release_set("randomized-response", release)
    mech = getattr(release, "mechanism", None)
    if getattr(mech, "name", None) != "randomized_response":
        raise IncompatibleError("method 'randomized-response' reads randomized-response releases; "
                                "this release uses " + str(getattr(mech, "name", mech)) +
                                " noise (use damcmc)")
    if getattr(model, "name", None) != "dirichlet-categorical":
        raise IncompatibleError("method 'randomized-response' needs the dirichlet-categorical "
                                f"model (categories of the records), not {model.name!r}")
    model.check_query(release.query)
    k = int(mech.categories)
    plan = None
    if draws is None:        # the default budget fits the storage limit (large k)
        plan = _until.plan_for(max_draws, max_seconds, first=FIRST_DRAWS,
                               default_draws=storable_draws(MAX_DRAWS, chains, k),
                               default_seconds=MAX_SECONDS)
        draws = plan.first
        check_draws("max_draws", chains, plan.max_draws, k)
    draws = check_sampler_options(draws, warmup, chains)[0]
    Q = transition_matrix(mech)
    m = report_counts(release)
    alpha = np.asarray(model.alpha, dtype=float)
    step = _rr_step(m, Q, alpha)
    objs = []
    for rng in spawn(seed, chains):           # one stream per chain; the start from it
        objs.append(KernelChain(rng.dirichlet(alpha), step, rng, lambda p: {"p": p},
                                {"p": (k,)}))
    if plan is not None:
        plan.t0 = time.perf_counter()
    out = _until.stack(_until.sample(objs, warmup, draws, plan, progress,
                                     "randomized-response", ["p"]), ["p"])
    notes = ["exact: data augmentation over the true categories of the randomized-response "
             f"reports (keep probability {Q[0, 0]:.4g}, {mech.epsilon:g}-DP per record)"]
    if plan is not None:
        notes.append(plan.note(out["p"].shape[1]))
    post = make_posterior(out, {}, "randomized-response", model, release, notes, exact=True)
    # warning + note + converged when R-hat > 1.01 or ESS < 400 (fixed draws= included)
    flag(post, stacklevel=4, table=plan.table if plan is not None else None)
    return post
