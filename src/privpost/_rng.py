"""Random-number plumbing shared by every module."""

from __future__ import annotations

import numpy as np

from privpost.errors import PrivpostError

SeedLike = "None | int | np.random.Generator | np.random.SeedSequence"


def _check_seed(seed) -> None:
    """Refuse anything but ``None``, a non-negative int, a ``SeedSequence`` or a ``Generator``."""
    if seed is None or isinstance(seed, (np.random.Generator, np.random.SeedSequence)):
        return
    if isinstance(seed, (bool, np.bool_)) or not isinstance(seed, (int, np.integer)):
        raise PrivpostError(f"seed: must be None, a non-negative int or a numpy Generator, "
                            f"not {type(seed).__name__}")
    if seed < 0:
        raise PrivpostError(f"seed: must be a non-negative integer, got {seed}")


def as_generator(seed=None) -> np.random.Generator:
    """Return a :class:`numpy.random.Generator` for ``seed``.

    ``None`` gives a generator seeded from the operating system's entropy; an ``int`` or a
    :class:`~numpy.random.SeedSequence` gives a reproducible one; a ``Generator`` is returned as is.
    Anything else (a negative int, a float, a bool, a string) raises :class:`PrivpostError`
    naming ``seed``.
    """
    _check_seed(seed)
    if isinstance(seed, np.random.Generator):
        return seed
    return np.random.default_rng(seed)


def spawn(seed, k: int) -> list[np.random.Generator]:
    """``k`` independent generators derived reproducibly from ``seed`` (one per chain or replicate)."""
    _check_seed(seed)
    if isinstance(seed, np.random.Generator):
        return list(seed.spawn(k))
    ss = seed if isinstance(seed, np.random.SeedSequence) else np.random.SeedSequence(seed)
    return [np.random.default_rng(s) for s in ss.spawn(k)]
