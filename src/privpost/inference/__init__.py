"""Inference methods and :func:`infer`, the single entry point that runs them.

Each method lives in its own module and exposes ``run(model, release, **options) -> Posterior``.
The registry maps a method name to ``"module:function"`` so that importing one method never
imports the others (Numba compilation happens only for the method used).
"""

from __future__ import annotations

import importlib
from typing import Any, Callable

from privpost.errors import IncompatibleError

METHODS: dict[str, str] = {
    "damcmc": "privpost.inference.damcmc:run",
    "gibbs-ss": "privpost.inference.gibbs_ss:run",
    "naive": "privpost.inference.naive:run",
    "nonprivate": "privpost.inference.nonprivate:run",
    "ops": "privpost.inference.ops:run",
}


def get_method(name: str) -> Callable[..., Any]:
    """Return the ``run`` function of method ``name`` (raises :class:`IncompatibleError`)."""
    try:
        target = METHODS[name]
    except KeyError:
        raise IncompatibleError(
            f"unknown method {name!r}; available: {', '.join(sorted(METHODS))}") from None
    module, func = target.split(":")
    return getattr(importlib.import_module(module), func)


def infer(model, release, method: str = "damcmc", **options):
    """Posterior of ``model``'s parameters given a private ``release``.

    Parameters
    ----------
    model : privpost.models.Model
        Prior and record model of the confidential data.
    release : privpost.Release
        The private release (query, mechanism, noisy values). ``method="nonprivate"`` takes the
        confidential records instead (``records=`` option) and exists for simulation studies.
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
    return get_method(method)(model, release, **options)
