"""Inference methods and :func:`infer`, the single entry point that runs them.

Each method lives in its own module and exposes ``run(model, release, **options) -> Posterior``.
The registry maps a method name to ``"module:function"`` so that importing one method never
imports the others (Numba compilation happens only for the method used).
"""

from __future__ import annotations

import importlib
from typing import Any, Callable

from privpost.errors import IncompatibleError, PrivpostError

METHODS: dict[str, str] = {
    "damcmc": "privpost.inference.damcmc:run",
    "gibbs-ss": "privpost.inference.gibbs_ss:run",
    "naive": "privpost.inference.naive:run",
    "nonprivate": "privpost.inference.nonprivate:run",
    "ops": "privpost.inference.ops:run",
    "randomized-response": "privpost.inference.rr:run",
    # CliqueMRF on MarginalTables (seed 003 ch. 3); "naive" dispatches there for an MRF too
    "cgm-em": "privpost.inference.mrf_methods:run_cgm_em",
    "mrf-laplace": "privpost.inference.mrf_methods:run_laplace",
    # a published penalty-MCMC transcript (seed 001): its states are the draws
    "penalty-mcmc": "privpost.inference.penalty:run",
}

# seed 002 (compositional data, DPss release sets): see privpost.inference.compositional
METHODS.update({
    "dpboots": "privpost.inference.compositional:run_dpboots",
    "dpmcmc": "privpost.inference.compositional:run_dpmcmc",
    "dpremcmc": "privpost.inference.compositional:run_dpremcmc",
    "dpabc": "privpost.inference.compositional:run_dpabc",
    "dpapprox": "privpost.inference.compositional_approx:run_dpapprox",
    "boots": "privpost.inference.compositional:run_boots",
})
_SEED002_SET_METHODS = frozenset({"dpboots", "dpmcmc", "dpremcmc", "dpabc", "dpapprox"})


def get_method(name: str) -> Callable[..., Any]:
    """Return the ``run`` function of method ``name`` (raises :class:`IncompatibleError`)."""
    try:
        target = METHODS[name]
    except KeyError:
        raise IncompatibleError(
            f"unknown method {name!r}; available: {', '.join(sorted(METHODS))}") from None
    module, func = target.split(":")
    return getattr(importlib.import_module(module), func)


# Methods that take a privpost.ReleaseSet (several releases of the same records) as well as a
# single Release; every other method rejects a set with reject_release_set.
ACCEPTS_RELEASE_SET = frozenset({"gibbs-ss"}) | _SEED002_SET_METHODS


def reject_release_set(method: str, release) -> None:
    """Raise :class:`IncompatibleError` if ``release`` is a :class:`privpost.ReleaseSet`
    (for the methods that take a single Release)."""
    from privpost.releases.release import ReleaseSet

    if isinstance(release, ReleaseSet):
        kinds = ", ".join(f"[{i}] {getattr(r.query, 'name', type(r.query).__name__)}"
                          for i, r in enumerate(release.releases))
        raise IncompatibleError(
            f"method {method!r} takes a single Release, not a ReleaseSet (this one holds {kinds}); "
            "only gibbs-ss reads a release set (LinearRegression with covariate_moments='noisy': "
            "a RegressionStats and a CovariateMoments release of the same records), and seed "
            "002's methods (dpboots, dpmcmc, dpremcmc, dpabc, dpapprox) read a DPss set. Pass "
            "one of the set's releases, e.g. release_set.releases[0]")


def check_options(method: str, run: Callable[..., Any], options: dict) -> None:
    """Refuse an option ``run`` (a method's entry point) does not take, before it runs:
    :class:`IncompatibleError` naming the option, the closest valid name and every valid one
    (instead of Python's ``TypeError: run() got an unexpected keyword argument``).

    The valid names are the keyword parameters of ``run``'s signature (``model`` and
    ``release`` excepted). A ``run`` with ``**options`` passes them on: to the function named by
    its ``forwards_options_to`` attribute (``"module:function"``, whose names are added), or, if
    it has none, to its own check (``_gibbs_common.reject_unknown``), so nothing is refused here.
    """
    import difflib
    import inspect

    valid: set[str] = set()
    target: Any = run
    while target is not None:
        params = inspect.signature(target).parameters.values()
        valid |= {p.name for p in params if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)}
        if not any(p.kind is p.VAR_KEYWORD for p in params):
            break
        forward = getattr(target, "forwards_options_to", None)
        if forward is None:
            return          # the method checks what reaches its **options itself
        module, func = forward.split(":")
        target = getattr(importlib.import_module(module), func)
    valid -= {"model", "release"}
    unknown = sorted(set(options) - valid, key=str)
    if unknown:
        key = unknown[0]
        close = difflib.get_close_matches(str(key), sorted(valid), n=1)
        hint = f" (did you mean {close[0]!r}?)" if close else ""
        raise IncompatibleError(f"method {method!r} has no option {key!r}{hint}; its options: "
                                f"{', '.join(sorted(valid))}")


def infer(model, release, method: str = "damcmc", **options):
    """Posterior of ``model``'s parameters given a private ``release``.

    Parameters
    ----------
    model : privpost.models.Model
        Prior and record model of the confidential data.
    release : privpost.Release or privpost.ReleaseSet
        The private release (query, mechanism, noisy values). ``method="nonprivate"`` takes the
        confidential records instead (``records=`` option) and exists for simulation studies.
        A ReleaseSet is accepted only by ``"gibbs-ss"`` (:data:`ACCEPTS_RELEASE_SET`): a
        RegressionStats and a CovariateMoments release for ``covariate_moments="noisy"``; the
        other methods raise :class:`IncompatibleError`.
    method : str
        One of :data:`METHODS`: ``"damcmc"`` (exact data augmentation MCMC), ``"gibbs-ss"``
        (sufficient-statistic Gibbs, CLT approximation), ``"naive"`` (plug-in, ignores the noise),
        ``"nonprivate"``, ``"ops"``.
    **options
        Passed to the method (``draws``, ``warmup``, ``chains``, ``seed``, ...).

    Returns
    -------
    privpost.Posterior
    """
    check = options.pop("predictive_check", True)
    if not isinstance(check, bool):
        raise PrivpostError(f"predictive_check must be True or False, got {check!r}")
    return _model_notes(model, release, _infer(model, release, method, options), check)


#: replicates of the automatic predictive check of a regression posterior (issue 23)
CHECK_REPLICATES = 200


def _model_notes(model, release, post, check=True):
    """``post`` with the model's statement of what it assumes (``model.covariate_note()``,
    LinearRegression's covariate law: issue 23) appended to its notes and, when ``check``, a
    posterior predictive check of the released statistic (:data:`CHECK_REPLICATES`
    replicates, fixed seed; :mod:`privpost.predictive`): joint p < 0.01 gives a
    :class:`~privpost.errors.ModelFitWarning` and a note starting ``"MODEL MISFIT"`` (as does a
    normal covariate law with less than half its mass inside the release's bounds,
    ``model.covariate_mismatch``). Other models: ``post`` unchanged."""
    import warnings

    import numpy as np

    from privpost.errors import ModelFitWarning
    from privpost.predictive import predictive
    from privpost.releases.release import Release

    note_of = getattr(model, "covariate_note", None)
    notes = getattr(post, "notes", None)
    if not callable(note_of) or not isinstance(notes, list):
        return post
    note = note_of()
    if note not in notes:
        notes.append(note)
    mismatch_of = getattr(model, "covariate_mismatch", None)
    mismatch = mismatch_of(getattr(release, "query", None)) if callable(mismatch_of) else None
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
    from privpost.limits import check_inference

    if (type(release).__name__ == "PenaltyRelease") != (method == "penalty-mcmc"):
        if method == "penalty-mcmc":
            get_method(method)(model, release)          # its own error: not a transcript
        raise IncompatibleError(f"a penalty-MCMC transcript is read by method 'penalty-mcmc' "
                                f"only (its draws are the chain's states), not {method!r}")
    if getattr(model, "name", None) == "hmm":   # HMM over cells (seed 004 §4-5): own samplers
        from privpost.inference.hmm import run_method

        reject_release_set(method, release)
        check_options(method, run_method, options)
        return run_method(method, model, release, **options)
    run = get_method(method)
    check_options(method, run, options)     # an unknown option: one clear error, no TypeError
    if method in ("damcmc", "gibbs-ss") and getattr(
            getattr(release, "mechanism", None), "name", None) == "randomized_response":
        raise IncompatibleError(f"method {method!r} cannot read randomized-response reports; "
                                "use method='randomized-response' (exact, with the "
                                "dirichlet-categorical model)")
    if method == "damcmc":
        from privpost.inference._count_latent import law_for_options, run_with_options
        from privpost.releases.release import ReleaseSet

        law = law_for_options(model, release, options)
        if law is not None:                                         # the count table (§10)
            check_inference(model, release, method, options, records=False)
            return run_with_options(law, model, release, options)   # the law built once
        if isinstance(release, ReleaseSet):  # a release set of the same records: stacked
            from privpost.inference.joint import joint_problem

            model, release = joint_problem(model, release)
            return run(model, release, **options)
    if method not in ACCEPTS_RELEASE_SET:
        reject_release_set(method, release)
    check_inference(model, release, method, options)   # resource limits, before allocation
    return run(model, release, **options)
