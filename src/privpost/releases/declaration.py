"""Typing in a published release: a release document from published numbers, no records.

The most common situation of an analyst is not holding the data: an agency published a noisy
statistic and said how the noise was added ("a count of 412.7, Laplace noise of scale 10, from
n = 1000 records"). :func:`declare` turns that description into a validated
:class:`~privpost.releases.release.Release` -- the same object :func:`privpost.release` makes from
records -- so every inference method runs on it::

    >>> import privpost as pp
    >>> rel = pp.declare(412.7, query=pp.queries.Sum(bounds=(0, 1)),
    ...                  mechanism=pp.mechanisms.Laplace(scale=10), n=1000)
    >>> rel.privacy.epsilon          # sensitivity 1 (a count) / scale 10
    0.1

The mechanism is given either by its noise **scale** (the privacy guarantee is then computed from
the query's sensitivity: Laplace ε = Δ₁/b, Gaussian ρ = Δ₂²/(2σ²), see
:mod:`privpost.mechanisms`) or by its **privacy target** (the scale is then the one the mechanism
would use, which is only right if the publisher calibrated the same way -- prefer the scale when
it is published). The query's sensitivity is computed for ``neighbours``.

CLI: ``privpost declare --query count --value 412.7 --scale 10 --n 1000 -o count.json``.
"""

from __future__ import annotations

import datetime as _dt
from typing import Any

import numpy as np

from privpost.errors import PrivpostError, ReleaseError

__all__ = ["declare"]


def declare(observed, *, query, mechanism, n: int, neighbours: str = "replace",
            metadata: dict[str, Any] | None = None):
    """A :class:`~privpost.releases.release.Release` for statistics published elsewhere.

    Parameters
    ----------
    observed : float or array_like, shape (d,)
        The published noisy value(s), one per released coordinate of ``query`` (``d =
        query.dim``), in the order of ``query.labels``.
    query : privpost.queries.Query
        The statistic that was computed, with its public parameters (bounds, categories, ...).
    mechanism : privpost.mechanisms.Mechanism
        The noise, built from its scale (``Laplace(scale=10)``) or privacy target
        (``Laplace(epsilon=0.1)``); it is calibrated here to the query's sensitivity.
    n : int
        The public number of records.
    neighbours : {"replace", "add-remove"}
        The neighbour relation of the published guarantee.
    metadata : dict, optional
        Free JSON-serialisable information (e.g. the source of the numbers).

    Returns
    -------
    privpost.Release
        Validated like a loaded document; ``metadata["declared"]`` is ``True`` (the values were
        typed in, not computed by privpost).

    Raises
    ------
    ReleaseError
        A value count that does not match the query, non-finite values, non-integers for a
        discrete mechanism, a discrete mechanism on a non-integer query, ...
    """
    from privpost import __version__
    from privpost.mechanisms import Mechanism
    from privpost.queries import Query
    from privpost.releases.release import Release, _check_neighbours

    if not isinstance(query, Query):
        raise PrivpostError(f"query must be a privpost.queries.Query, got {type(query).__name__}")
    if not isinstance(mechanism, Mechanism):
        raise PrivpostError("mechanism must be a privpost.mechanisms.Mechanism, got "
                            f"{type(mechanism).__name__}")
    _check_neighbours(neighbours)
    try:
        values = np.atleast_1d(np.asarray(observed, dtype=float))
    except (TypeError, ValueError):
        raise ReleaseError("observed", f"must be numbers, got {observed!r}") from None
    if mechanism.sensitivity_norm is None:
        raise ReleaseError("mechanism", f"{mechanism.name} is a local mechanism: its reports are "
                           "per record, use privpost.release on the reports instead")
    if mechanism.discrete and not query.integer:
        raise ReleaseError("mechanism", f"{mechanism.name} adds integer noise, but the query "
                           f"{query.name!r} is not integer-valued (for a count use "
                           "Sum(bounds=(0, 1), integer=True))")
    mech = mechanism.calibrate(query.sensitivity(mechanism.sensitivity_norm, neighbours),
                               neighbours=neighbours)
    meta = {"created": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
            "privpost_version": __version__, "declared": True}
    meta.update(metadata or {})
    from privpost.releases.release import unprotected

    if unprotected(query, neighbours, n, meta):   # stated in the document too (inspect --json)
        meta["not_covered"] = list(unprotected(query, neighbours, n, meta))
    return Release(query=query, mechanism=mech, n=n, observed=values, neighbours=neighbours,
                   metadata=meta)
