"""Random-number plumbing shared by every module."""

from __future__ import annotations

import numpy as np

SeedLike = "None | int | np.random.Generator | np.random.SeedSequence"


def as_generator(seed=None) -> np.random.Generator:
    """Return a :class:`numpy.random.Generator` for ``seed``.

    ``None`` gives a generator seeded from the operating system's entropy; an ``int`` or a
    :class:`~numpy.random.SeedSequence` gives a reproducible one; a ``Generator`` is returned as is.
    """
    if isinstance(seed, np.random.Generator):
        return seed
    if isinstance(seed, (np.random.SeedSequence, type(None))) or isinstance(seed, (int, np.integer)):
        if isinstance(seed, (int, np.integer)) and seed < 0:
            raise ValueError(f"seed must be a non-negative integer, got {seed}")
        return np.random.default_rng(seed)
    raise TypeError(f"seed must be None, an int or a numpy Generator, not {type(seed).__name__}")


def spawn(seed, k: int) -> list[np.random.Generator]:
    """``k`` independent generators derived reproducibly from ``seed`` (one per chain or replicate)."""
    if isinstance(seed, np.random.Generator):
        return list(seed.spawn(k))
    ss = seed if isinstance(seed, np.random.SeedSequence) else np.random.SeedSequence(seed)
    return [np.random.default_rng(s) for s in ss.spawn(k)]
