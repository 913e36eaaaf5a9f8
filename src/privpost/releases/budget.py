"""Splitting a privacy budget across several releases of the same records.

Sequential composition on one data set adds pure ε (and zCDP ρ) exactly
(:func:`privpost.accounting.compose`), so a total budget ``B`` split in proportion to weights
``w_j`` gives release ``j`` the share ``B w_j / sum(w)``; the shares are rounded *down* where
floating point would make their composed total exceed ``B``, so the stated total never
overstates the privacy. Example (two counts and a mean, the mean getting half)::

    >>> from privpost.releases.budget import split_budget
    >>> split_budget(1.0, [1, 1, 2])
    [0.25, 0.25, 0.5]

CLI: ``privpost budget --epsilon 1 --weights 1,1,2`` prints the shares and their composed total;
give each share to one ``privpost release ... --epsilon SHARE`` and ``privpost bundle`` the
releases (the set states the same total).
"""

from __future__ import annotations

import math
from fractions import Fraction
from typing import Sequence

from privpost.errors import PrivpostError

__all__ = ["split_budget", "total_of"]


def split_budget(total: float, weights: Sequence[float], *, kind: str = "pure") -> list[float]:
    """Per-release shares of ``total`` (ε for ``kind="pure"``, ρ for ``kind="zcdp"``).

    Parameters
    ----------
    total : float
        The budget, finite and > 0.
    weights : sequence of float, length K
        Positive relative weights, one per release.
    kind : {"pure", "zcdp"}

    Returns
    -------
    list of float, length K
        Shares whose exact sum is ``<= total`` (proportional up to rounding down).
    """
    if kind not in ("pure", "zcdp"):
        raise PrivpostError(f"kind must be 'pure' (epsilon) or 'zcdp' (rho), got {kind!r}")
    what = "--epsilon" if kind == "pure" else "--rho"
    try:
        total = float(total)
    except (TypeError, ValueError):
        raise PrivpostError(f"{what} must be a number, got {total!r}") from None
    if not (math.isfinite(total) and total > 0):
        raise PrivpostError(f"{what} must be a finite number > 0, got {total}")
    try:
        w = [float(v) for v in weights]
    except (TypeError, ValueError):
        raise PrivpostError(f"--weights must be numbers, e.g. --weights 1,1,2; got {weights!r}"
                            ) from None
    if not w or not all(math.isfinite(v) and v > 0 for v in w):
        raise PrivpostError(f"--weights must be positive numbers, e.g. --weights 1,1,2; got {w}")
    s = sum(w)
    shares = [total * v / s for v in w]
    # never overstate: the exact (rational) sum of the float shares must not exceed the total,
    # so the composed total (an exact sum rounded up, privpost.accounting) is <= total as well
    while sum(map(Fraction, shares)) > Fraction(total):
        j = max(range(len(shares)), key=shares.__getitem__)
        shares[j] = math.nextafter(shares[j], 0.0)
    return shares


def total_of(shares: Sequence[float], *, kind: str = "pure", neighbours: str = "replace"):
    """The composed guarantee of releases with these shares (:class:`Privacy`)."""
    from privpost.accounting import Privacy, compose

    make = Privacy.pure if kind == "pure" else Privacy.zcdp
    return compose([make(v, neighbours) for v in shares])
