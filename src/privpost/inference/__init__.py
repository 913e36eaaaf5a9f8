"""Inference methods and :func:`infer`, the single entry point that runs them.

Each method lives in its own module and exposes ``run(model, release, **options) -> Posterior``.
The registry maps a method name to ``"module:function"`` so that importing one method never
imports the others (Numba compilation happens only for the method used).
"""

from __future__ import annotations

import importlib
from typing import Any, Callable

from privpost.errors import IncompatibleError, PrivpostError
from privpost.inference import registry as _registry

#: method name -> its own ``run`` function (``"module:function"``), for callers that run one
#: method directly (:func:`get_method`: calibration studies). Derived from the registry
#: (:mod:`privpost.inference.registry`); :func:`infer` dispatches from the registry's routes.
METHODS: dict[str, str] = {m.name: m.entry for m in _registry.REGISTRY}


def get_method(name: str) -> Callable[..., Any]:
    """Return the ``run`` function of method ``name`` (raises :class:`IncompatibleError`)."""
    try:
        target = METHODS[name]
    except (KeyError, TypeError):
        raise IncompatibleError(
            f"unknown method {name!r}; available: {', '.join(sorted(METHODS))}") from None
    module, func = target.split(":")
    return getattr(importlib.import_module(module), func)


def reject_release_set(method: str, release) -> None:
    """Raise :class:`IncompatibleError` if ``release`` is a :class:`privpost.ReleaseSet`
    (for the methods that take a single Release; the readers of sets come from the registry)."""
    from privpost.releases.release import ReleaseSet

    if isinstance(release, ReleaseSet):
        raise IncompatibleError(_registry._set_refusal(method, release))


def check_options(method: str, run: Callable[..., Any] | None = None,
                  options: dict | None = None, *, model=None, release=None) -> None:
    """The registry's option check (:func:`privpost.inference.registry.check_options`) for
    ``method``: an unknown option is an :class:`IncompatibleError` naming it, the closest valid
    name and every valid one; an ill-typed or out-of-range value a :class:`PrivpostError`
    naming the option (never Python's ``TypeError``). The route is the one for ``(model,
    release)`` when given, else the one whose entry point is ``run``, else the method's
    general (last) route."""
    spec = _registry.method_spec(method)
    if model is not None or release is not None:
        route = _registry.route_for(spec, model, release)
    else:
        route = next((r for r in spec.routes if run is not None
                      and _registry.entry_point(r) is run), spec.routes[-1])
    _registry.check_options(spec, route, dict(options or {}))


def infer(model, release, method: str = "damcmc", **options):
    """Posterior of ``model``'s parameters given a private ``release``.

    Parameters
    ----------
    model : privpost.models.Model
        Prior and record model of the confidential data.
    release : privpost.Release, privpost.ReleaseSet, a penalty-MCMC transcript or None
        The private release (query, mechanism, noisy values). The methods that read the
        confidential records (``nonprivate``, ``ops``, ``boots``: simulation studies and the
        data holder's side) take them as the ``records=`` option. Which method reads which
        kind of release and model is declared in :mod:`privpost.inference.registry`
        (``privpost methods`` lists it); any other pair raises :class:`IncompatibleError`.
    method : str
        One of :data:`METHODS` (generated from the registry):

{METHODS}
    **options
        Passed to the method (``draws``, ``warmup``, ``chains``, ``seed``, ...). Checked first,
        by the registry: an unknown option, a value of the wrong type or out of range is a
        :class:`PrivpostError` naming the option and listing the valid ones.

    Returns
    -------
    privpost.Posterior
    """
    check = options.pop("predictive_check", True)
    if not isinstance(check, bool):
        raise PrivpostError(f"predictive_check must be True or False, got {check!r}")
    post = _infer(model, release, method, options)
    return _model_notes(model, release, _release_notes(release, post), check)


if infer.__doc__:     # (python -OO strips docstrings)
    infer.__doc__ = infer.__doc__.replace("{METHODS}", _registry.doc_lines())

#: replicates of the automatic predictive check of a regression posterior (issue 23)
CHECK_REPLICATES = 200


def _release_notes(release, post):
    """``post`` with what ``release`` publishes exactly that its guarantee does not cover
    (:func:`privpost.releases.release.not_covered_notes`: the record count ``n`` of add/remove
    releases, a domain read from the data, HMM cell sizes, ...; for a release set each
    release's, prefixed by its index) appended to its notes, each once: a statement the method
    already made in the same words is not repeated. Nothing for a release without statements
    (most replace-one releases), ``None`` or a transcript."""
    from privpost.releases.release import not_covered_notes

    notes = getattr(post, "notes", None)
    if isinstance(notes, list):
        for note in not_covered_notes(release):
            if note not in notes:
                notes.append(note)
    return post


def _model_notes(model, release, post, check=True):
    """``post`` with the model's statement of what it assumes (``model.covariate_note()``,
    LinearRegression's covariate law: issue 23; unless the method made its own, starting with
    ``"covariate model: "``, because it does not use that law as stated) appended to its
    notes and, when ``check``, a
    posterior predictive check of the released statistic (:data:`CHECK_REPLICATES`
    replicates, fixed seed; :mod:`privpost.predictive`): joint p < 0.01 gives a
    :class:`~privpost.errors.ModelFitWarning` and a note starting ``"MODEL MISFIT"`` (as does a
    normal covariate law with less than half its mass inside the release's bounds,
    ``model.covariate_mismatch``; not when the method says it does not use the law). Other
    models: ``post`` unchanged."""
    import warnings

    import numpy as np

    from privpost.errors import ModelFitWarning
    from privpost.predictive import predictive
    from privpost.releases.release import Release

    note_of = getattr(model, "covariate_note", None)
    notes = getattr(post, "notes", None)
    if not callable(note_of) or not isinstance(notes, list):
        return post
    from privpost.models.linear_regression import COVARIATE_NOTE, COVARIATE_UNUSED

    # a method that does not use the law as the model states it has said what applies
    # (gibbs-ss with released covariate moments, naive's plug-in): one covariate note only
    if not any(n.startswith(COVARIATE_NOTE) for n in notes):
        notes.append(note_of())
    unused = any(n.startswith(COVARIATE_UNUSED) for n in notes)
    mismatch_of = getattr(model, "covariate_mismatch", None)
    mismatch = (mismatch_of(getattr(release, "query", None))
                if callable(mismatch_of) and not unused else None)
    if mismatch:
        mismatch = "MODEL MISFIT: " + mismatch
    if mismatch and mismatch not in notes:
        notes.append(mismatch)
        warnings.warn(mismatch, ModelFitWarning, stacklevel=3)
    if not check or not isinstance(release, Release) or not getattr(post, "n_draws", 0) \
            or release.mechanism.sensitivity_norm is None:
        return post
    try:
        pc = predictive(post, release, model=model, draws=CHECK_REPLICATES, seed=20231126)
    except IncompatibleError:    # e.g. a posterior without draws of every parameter
        return post
    p = pc.joint_p_value()
    msg = (f"posterior predictive check of the released statistic: joint p = {p:.3g} "
           f"({pc.flat.shape[0]} replicates)")
    if p < 0.01:
        worst = np.argsort(pc.p_values())[:3]
        msg = "MODEL MISFIT: " + msg + (
            " < 0.01: the model does not reproduce the release (worst coordinates: "
            + ", ".join(f"{pc.labels[i]} p = {pc.p_values()[i]:.3g}" for i in worst)
            + "); check the covariate model (covariates=...), bounds and priors")
        warnings.warn(msg, ModelFitWarning, stacklevel=3)
    notes.append(msg)
    return post


def _infer(model, release, method, options):
    """Dispatch from the registry: the method's route for this (model, release) pair, the
    options checked against it, the resource limits, then the route's entry point."""
    from privpost.limits import check_inference, check_observed

    spec = _registry.method_spec(method)
    route = _registry.route_for(spec, model, release)
    _registry.check_options(spec, route, options)   # before any method runs: no TypeError
    check_observed(release)     # Gaussian noise far beyond float64's precision: refused
    run = _registry.entry_point(route)
    if route.takes_method:
        return run(method, model, release, **options)
    if route.limits:
        check_inference(model, release, method, options)   # resource limits, before allocation
    return run(model, release, **options)
