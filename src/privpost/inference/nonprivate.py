"""``method="nonprivate"``: the posterior given the confidential records (simulation studies).

``infer(model, release, method="nonprivate", records=x)`` draws from ``p(theta | x)``, the
reference every private method is compared with. It reads the confidential records, so it is
**not** private and must never be run on real confidential data that is meant to stay private.
The release (optional, may be ``None``) is only used to check the record count and, with
``clamp=True``, to apply the query's clamping to the records first.

Draws: for the conjugate exponential families of :mod:`privpost.inference.expfam` an exact
vectorised conjugate draw from the statistic; for every other model, the model's own
``update`` kernel iterated per chain: i.i.d. draws for conjugate models (``model.conjugate``;
fixed ``draws``, default 1000); for non-conjugate models (Dirichlet, LinearRegression
``prior="independent"``, CliqueMRF, ...) a Markov chain with ``warmup`` (1000) discarded
iterations that by default (``draws=None``) **runs until converged**: rounds of draws
(:class:`privpost.inference._until.Plan`, the rule of ``damcmc.run(draws=None)``: first round
:data:`FIRST_DRAWS` = 1000 draws per chain) until every scalar parameter entry has split R-hat
<= 1.01 and bulk and tail ESS >= 400, or a budget runs out: ``max_draws`` kept draws per chain
(default :data:`MAX_DRAWS` = 20,000, lowered to fit the storage limit ``privpost.limits``
``max_draws``) and ``max_seconds`` of wall time for the warm-up and draws
(default :data:`MAX_SECONDS` = 300 s; ``None`` with ``max_draws`` given: no time budget). Each
chain has its own random stream (:class:`privpost.inference._kernel_chain.KernelChain`), so a
fixed ``draws=S`` equals a run until converged that stopped at ``S`` draws per chain (same
seed). Either way the chain is checked by :func:`privpost.diagnostics.flag`: a
ConvergenceWarning, a ``NOT CONVERGED`` note and ``converged=False`` when it misses the
thresholds (a budget spent, or a fixed ``draws=`` too short).

Options: ``records`` (required), ``draws`` (1000 for conjugate models, else ``None``: until
converged), ``max_draws`` / ``max_seconds`` (non-conjugate models' budgets), ``chains`` (4),
``warmup`` (0 for conjugate models, else 1000), ``seed``, ``progress``, ``clamp`` (False): with a
``Sum``/``Mean`` release
the records are clamped to the query bounds, with ``RegressionStats`` each column is clamped to
its bounds -- the posterior that noise-aware exact methods approach as ``epsilon -> inf``
(seed 000 S-5). ``clamp`` is refused for other queries (a ``TruncatedSum`` drops records, which
is not a transformation of the records the model describes).
"""

from __future__ import annotations

import time

import numpy as np

from privpost._rng import as_generator
from privpost.errors import DataError, IncompatibleError
from privpost.inference import expfam
from privpost.inference._gibbs_common import (Progress, check_sampler_options, make_posterior,
                                              reject_unknown)

__all__ = ["run", "FIRST_DRAWS", "MAX_DRAWS", "MAX_SECONDS"]

FIRST_DRAWS = 1000     # run until converged (non-conjugate models): draws per chain, first round
MAX_DRAWS = 20_000     # default draw budget: kept draws per chain
MAX_SECONDS = 300.0    # default time budget of the warm-up and draws, seconds


def _clamp(records, release):
    q = release.query
    name = getattr(q, "name", "")
    if name in ("sum", "mean"):
        lo, hi = q.bounds
        return np.clip(records, lo, hi), f"records clamped to the query bounds [{lo:g}, {hi:g}]"
    if name == "regression_stats":
        lo = np.array([b[0] for b in q.bounds_x] + [q.bounds_y[0]])
        hi = np.array([b[1] for b in q.bounds_x] + [q.bounds_y[1]])
        return np.clip(records, lo, hi), "records clamped column-wise to the query bounds"
    raise IncompatibleError(f"clamp=True is defined for Sum, Mean and RegressionStats releases, "
                            f"not {name!r}")


def _entries(model) -> int:
    """Scalar entries of one draw of all the model's parameters."""
    return sum(int(np.prod(sh)) for sh in model.param_shapes.values())


def run(model, release=None, *, records=None, draws: int | None = None, chains: int = 4,
        warmup: int | None = None, seed=None, progress: bool = False, clamp: bool = False,
        max_draws: int | None = None, max_seconds: float | None = None, **options):
    """Posterior given the confidential ``records`` (see the module docstring): draws
    ``name -> (chains, draws, *param_shape)``. ``draws=None``: 1000 for conjugate models,
    until converged (budgets ``max_draws`` / ``max_seconds``) for the others."""
    from privpost.errors import PrivpostError
    from privpost.inference import _until

    reject_unknown("nonprivate", options)
    if records is None:
        raise IncompatibleError("method='nonprivate' needs the confidential records: "
                                "infer(model, release, method='nonprivate', records=x)")
    conj = bool(getattr(model, "conjugate", False))
    if warmup is None:
        warmup = 0 if conj else 1000
    plan = None
    if draws is not None:
        _until.refuse_budgets(max_draws, max_seconds)
    if conj:                 # independent draws: a fixed number
        if max_draws is not None or max_seconds is not None:
            raise PrivpostError(f"max_draws / max_seconds: the {model.name!r} model's draws are "
                                "independent (a fixed number, draws=; default 1000)")
        draws = 1000 if draws is None else draws
    elif draws is None:      # the default budget fits the storage limit
        from privpost.inference._kernel_chain import storable_draws

        chains = check_sampler_options(1, 0, chains)[2]
        plan = _until.plan_for(max_draws, max_seconds, first=FIRST_DRAWS,
                               default_draws=storable_draws(MAX_DRAWS, chains,
                                                            _entries(model)),
                               default_seconds=MAX_SECONDS)
        draws = plan.first
    draws, warmup, chains = check_sampler_options(draws, warmup, chains)
    validate = getattr(model, "validate_records", None)
    x = validate(records) if validate is not None else np.asarray(records)
    notes = ["nonprivate: posterior given the confidential records (not private; for "
             "simulation studies)"]
    if release is not None and int(release.n) != x.shape[0]:
        raise DataError(f"records has {x.shape[0]} rows but the release says n = {release.n}")
    if clamp:
        if release is None:
            raise IncompatibleError("clamp=True needs the release (its query has the bounds)")
        x, msg = _clamp(x, release)
        notes.append(msg)
    rng = as_generator(seed)
    fam = expfam.family_for(model)
    if fam is not None:
        from privpost.inference.naive import conjugate_draws

        if fam.kind == "categorical":
            s = np.bincount(x.astype(np.int64), minlength=len(fam.prior(model)["alpha"]))
            s = s.astype(np.float64)
        else:
            s = np.array([float(np.sum(x))])
        out = conjugate_draws(model, {"s": s}, x.shape[0], draws, chains, rng)
        return make_posterior(out, {}, "nonprivate", model, release, notes, exact=False)
    if not conj:             # a Markov chain per chain, each with its own stream
        from privpost._rng import spawn
        from privpost.inference._kernel_chain import KernelChain
        from privpost.limits import check_draws

        if plan is not None:
            check_draws("max_draws", chains, plan.max_draws, _entries(model))
        names = list(model.param_shapes)

        def step(params, g):
            return model.update(params, x, g)

        objs = [KernelChain(model.prior_sample(g), step, g,
                            lambda params: {nm: params[nm] for nm in names},
                            model.param_shapes) for g in spawn(seed, chains)]
        if plan is not None:
            plan.t0 = time.perf_counter()
        out = _until.stack(_until.sample(objs, warmup, draws, plan, progress, "nonprivate",
                                         names), names)
        notes.append(f"draws from the model's update kernel (MCMC, {warmup} warm-up iterations)")
        if plan is not None:
            notes.append(plan.note(next(iter(out.values())).shape[1]))
    else:
        out = {nm: np.empty((chains, draws) + tuple(sh)) for nm, sh in model.param_shapes.items()}
        bar = Progress(chains * (warmup + draws), progress, "nonprivate")
        k = 0
        for c in range(chains):
            params = model.prior_sample(rng)
            for it in range(warmup + draws):
                params = model.update(params, x, rng)
                j = it - warmup
                if j >= 0:
                    for nm in out:
                        out[nm][c, j] = params[nm]
                bar.update(k)
                k += 1
    post = make_posterior(out, {}, "nonprivate", model, release, notes, exact=False)
    if not conj:     # a Markov chain: checked like every MCMC method's draws
        from privpost.diagnostics import flag
        # warning + note + converged when R-hat > 1.01 or ESS < 400 (fixed draws= included)
        flag(post, stacklevel=4, table=plan.table if plan is not None else None)
    return post
