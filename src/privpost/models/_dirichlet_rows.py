"""Independent Dirichlet draws by gamma normalisation (shared by the categorical and naive-Bayes
models and the count tables below them; imports NumPy only)."""

from __future__ import annotations

import numpy as np

__all__ = ["dirichlet_rows"]


def dirichlet_rows(rng: np.random.Generator, alpha: np.ndarray) -> np.ndarray:
    """Independent Dirichlet draws along the last axis of ``alpha`` (gamma normalisation)."""
    if alpha.ndim == 1 and alpha.shape[0] <= 8:
        # numpy's array-shape gamma has a large fixed cost; scalar draws are faster here and
        # consume the stream identically
        gl = [rng.standard_gamma(a) for a in alpha.tolist()]
        tot = sum(gl)
        if tot > 0:
            return np.array([x / tot for x in gl])
        g = np.array(gl)
    else:
        g = rng.standard_gamma(alpha)
    s = g.sum(axis=-1, keepdims=True)
    bad = ~(s > 0)
    if np.any(bad):  # every gamma underflowed (tiny alphas): fall back to log-space draws
        lg = np.log(rng.standard_gamma(alpha + 1.0)) + np.log1p(-rng.random(alpha.shape)) / alpha
        lg -= lg.max(axis=-1, keepdims=True)
        g2 = np.exp(lg)
        g = np.where(bad, g2, g)
        s = g.sum(axis=-1, keepdims=True)
    return g / s
