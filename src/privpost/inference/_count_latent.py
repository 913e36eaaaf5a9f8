"""Count-level data augmentation for ``damcmc`` (DESIGN §10; issue 21): impute the true count
table, not the records.

Data augmentation is exact whatever latent it imputes, as long as the latent's law given theta
is exact and the release depends on the records only through it. For discrete records and count
queries the smallest such latent is the **count table** ``c`` (Binomial for a 0/1 sum,
Multinomial for a histogram, per-class Multinomials for naive-Bayes counts, a Multinomial over
the joint table for marginal tables, a Multinomial per cell and feature given the state for HMM
cells). The augmented target is ``p(theta, c | s) ∝ p(theta) p(c | theta) eta(s | A c)`` where
``A`` is the query as a (linear) function of the table; its theta-marginal is the same exact
private posterior as the record-level sampler's, at a cost that depends on the table's size and
the noise, not on ``n``.

Protocol
--------
A model declares the count table of a (model, release) pair with an optional method::

    model.count_latent(release) -> CountLatent | None

returning ``None`` when it has no exact count table for that release (the record-level path is
then used by ``latent="auto"``; ``latent="counts"`` raises). A :class:`CountLatent` states what
the posterior conditions on and makes resumable chains (the interface of
:func:`privpost.inference._until.run_rounds`: ``run(k, keep)``, ``done``, ``n_stored``,
``result()``, e.g. :class:`privpost.inference._kernel_chain.KernelChain` or a compiled chain with
the same four members). :func:`run` is the one driver for every pair: fixed length or run until
converged, notes, convergence flag.
"""

from __future__ import annotations

import time

import numpy as np

from privpost.errors import IncompatibleError, PrivpostError

__all__ = ["CountLatent", "LATENTS", "NOTE_MARK", "RECORD_OPTIONS", "count_law", "latent_of",
           "law_for_options", "record_options_set", "run", "RUN_OPTIONS", "run_with_options"]

#: Values of ``damcmc``'s ``latent`` option.
LATENTS = ("auto", "counts", "records")


#: How the posterior notes of a count-level run begin (:func:`latent_of` reads it).
NOTE_MARK = "exact: DA-MCMC on the count table (latent='counts'; DESIGN §10)"


def latent_of(post) -> tuple[str | None, str | None]:
    """``(latent, table)`` of a Posterior: ``("counts", the table's note)`` for a count-level
    ``damcmc`` run, ``("records", None)`` for a record-level one, ``(None, None)`` for other
    methods (``privpost infer --json`` reports it)."""
    if getattr(post, "method", None) != "damcmc":
        return None, None
    for note in post.notes:
        if note.startswith(NOTE_MARK):
            return "counts", note.split("latent: ", 1)[-1]
    return "records", None


class CountLatent:
    """What a (model, release) pair declares to run ``damcmc`` on its count table.

    Subclasses set:

    ``names`` : list of str
        The Posterior's parameter names (the model's ``param_shapes`` order).
    ``shapes`` : dict name -> tuple
        Shape of one draw of each parameter.
    ``table`` : str
        One line for the posterior notes: the latent table and its law given theta, e.g.
        ``"count table c ~ Binomial(n, theta) (1 cell, n = 300000000)"``.
    ``stat_names`` : list of str (optional)
        Per-draw sample statistics the chains' results hold (``(n_stored,)`` arrays), passed
        to the Posterior's ``sample_stats`` (e.g. ``log_eta``).

    and implement :meth:`chains`.
    """

    names: list
    shapes: dict
    table: str = ""
    stat_names: tuple = ()
    #: ``latent="auto"`` uses this table (``False``: the pair declares it, but the records are
    #: the cheaper latent for this release, e.g. a joint table with more cells than records;
    #: ``latent="counts"`` still uses it)
    auto: bool = True

    def chains(self, rngs, start: str) -> list:
        """One resumable chain per generator in ``rngs`` (``start``: ``"data"`` -- dispersed
        around the release, or ``"prior"``), each consuming only its own generator."""
        raise NotImplementedError

    def extra_notes(self, results: list[dict]) -> list[str]:
        """Further notes from the chains' results (acceptance rates of the moves, ...)."""
        return []


#: Options of the record-level ``damcmc`` sampler and their defaults: with one of them set,
#: ``latent="auto"`` takes the records and ``latent="counts"`` refuses.
RECORD_OPTIONS = {"proposal": None, "init": None, "fast_path": "auto", "interweave": "auto",
                  "sweeps_per_iteration": 1, "thin": 1}


def record_options_set(options: dict) -> list[str]:
    """The names of :data:`RECORD_OPTIONS` that ``options`` sets to a non-default value."""
    out = []
    for nm, default in RECORD_OPTIONS.items():
        if nm not in options:
            continue
        v = options[nm]
        if default is None:
            unset = v is None
        elif isinstance(default, str):
            unset = isinstance(v, str) and v == default
        else:
            unset = isinstance(v, (int, np.integer)) and not isinstance(v, bool) and v == default
        if not unset:
            out.append(nm)
    return out


def law_for_options(model, release, options: dict) -> CountLatent | None:
    """:func:`count_law` for ``damcmc``'s keyword ``options`` (``latent`` and the record-level
    options among them)."""
    return count_law(model, release, options.get("latent", "auto"),
                     record_options_set(options))


#: ``damcmc`` options that the count-table run takes (the others -- ``latent``, ``cores`` and
#: record-level options left at their defaults -- do not apply to it).
RUN_OPTIONS = ("draws", "warmup", "chains", "seed", "progress", "max_draws", "max_seconds",
               "start")


def run_with_options(law: CountLatent, model, release, options: dict):
    """:func:`run` on ``law`` with ``damcmc``'s keyword ``options`` (already checked against
    ``damcmc.run``'s signature), so that a caller that built ``law`` does not build it again."""
    return run(law, model, release, **{k: options[k] for k in RUN_OPTIONS if k in options})


def _privacy_note(release) -> str | None:
    """The release's guarantee (a ReleaseSet's composed total) for the notes, or None."""
    try:
        total = getattr(release, "total_privacy", None)
        priv = total() if callable(total) else release.privacy
    except Exception:  # noqa: BLE001 - informative note only
        return None
    what = "the release set's composed guarantee" if callable(total) else "the release's guarantee"
    return f"privacy: {priv} ({what})"


def count_law(model, release, latent: str = "auto",
              record_options=()) -> CountLatent | None:
    """The count table ``model`` declares for ``release``, or ``None`` for the record path.

    ``latent``: ``"auto"`` (the table when declared, else records), ``"counts"`` (the table;
    :class:`IncompatibleError` when the pair declares none), ``"records"`` (``None``).
    ``record_options``: names of options of the record-level sampler the user set (a user
    ``proposal``, ``init``, ``fast_path``, ``interweave``, ``sweeps_per_iteration``, ``thin``):
    ``"auto"`` then takes the records, ``"counts"`` refuses them."""
    if not isinstance(latent, str) or latent not in LATENTS:
        raise PrivpostError(f"latent must be one of {', '.join(map(repr, LATENTS))}, "
                            f"got {latent!r}")
    if latent == "records":
        return None
    if record_options:
        if latent == "counts":
            raise PrivpostError(
                f"latent='counts' does not take {', '.join(record_options)} (options of the "
                "record-level sampler); leave them out or use latent='records'")
        return None
    getter = getattr(model, "count_latent", None)
    law = getter(release) if callable(getter) else None
    if law is not None and latent == "auto" and not getattr(law, "auto", True):
        return None     # declared, but the records are the cheaper latent (law.auto says why)
    if law is None and latent == "counts":
        check = getattr(model, "check_query", None)
        if callable(check):     # the model's own refusal names the field (e.g. levels differ)
            for rel in getattr(release, "releases", None) or [release]:
                check(getattr(rel, "query", None))
        raise IncompatibleError(
            f"latent='counts': model {type(model).__name__} declares no exact count table for "
            f"this release (query {type(getattr(release, 'query', None)).__name__}); use "
            "latent='records' (or 'auto')")
    return law


def run(law: CountLatent, model, release, *, draws=None, warmup: int = 1000, chains: int = 4,
        seed=None, progress: bool = True, max_draws=None, max_seconds=None, start="data"):
    """``damcmc`` on the count table ``law`` (fixed ``draws`` or run until converged).

    Returns a :class:`privpost.Posterior` with the draws of ``law.names``
    (``(chains, draws, *shape)``), ``exact=True``, notes naming the latent and what the
    posterior conditions on."""
    from privpost._rng import spawn
    from privpost.diagnostics import flag
    from privpost.inference import _until
    from privpost.inference._gibbs_common import check_sampler_options, make_posterior

    _, warmup, chains = check_sampler_options(1 if draws is None else draws, warmup, chains)
    if start not in ("data", "prior"):
        raise PrivpostError(f"start must be 'data' or 'prior', got {start!r}")
    plan = None
    if draws is None:
        plan = _until.plan_for(max_draws, max_seconds, first=_until.FIRST_DRAWS,
                               default_draws=_until.MAX_DRAWS,
                               default_seconds=_until.MAX_SECONDS)
        draws = plan.first
    else:
        _until.refuse_budgets(max_draws, max_seconds)
    draws = check_sampler_options(draws, warmup, chains)[0]
    objs = law.chains(spawn(seed, chains), start)
    if plan is not None:
        plan.t0 = time.perf_counter()
    t0 = time.perf_counter()
    results = _until.sample(objs, warmup, draws, plan, progress, "damcmc (count table)",
                            law.names)
    elapsed = time.perf_counter() - t0
    out = _until.stack(results, law.names)
    stats = _until.stack(results, law.stat_names)
    length = results[0]["n_stored"]
    notes = [f"{NOTE_MARK} targets the exact private posterior given the release; latent: "
             f"{law.table}",
             f"{chains} chain{'s' if chains > 1 else ''} in {elapsed:.1f} s"]
    priv = _privacy_note(release)
    if priv:
        notes.append(priv)
    notes += law.extra_notes(results)
    if plan is not None:
        notes.append(plan.note(length))
    post = make_posterior(out, stats, "damcmc", model, release, notes, exact=True)
    flag(post, stacklevel=4, table=plan.table if plan is not None else None)
    return post
