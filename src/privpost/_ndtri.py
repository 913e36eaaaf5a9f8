"""Vectorised inverse standard-normal CDF without SciPy (start-up time).

:func:`ndtri` is Wichura's Algorithm AS 241 (PPND16; Applied Statistics 37(3):477-484, 1988),
the rational approximations that Python's ``statistics.NormalDist.inv_cdf`` also uses, accurate
to about 1e-16 relative. The rank-normalised diagnostics (:mod:`privpost.diagnostics`) need
Φ⁻¹ for every summary; importing ``scipy.special`` for it costs about half a second per CLI call.
tests/test_startup_imports.py compares it with ``scipy.special.ndtri``.
"""

from __future__ import annotations

import numpy as np

__all__ = ["ndtri"]

# coefficients, highest degree first (np.polyval); AS 241 names in the comments
_A = (2.5090809287301226727e+3, 3.3430575583588128105e+4, 6.7265770927008700853e+4,
      4.5921953931549871457e+4, 1.3731693765509461125e+4, 1.9715909503065514427e+3,
      1.3314166789178437745e+2, 3.3871328727963666080e+0)                  # a7..a0
_B = (5.2264952788528545610e+3, 2.8729085735721942674e+4, 3.9307895800092710610e+4,
      2.1213794301586595867e+4, 5.3941960214247511077e+3, 6.8718700749205790830e+2,
      4.2313330701600911252e+1, 1.0)                                        # b7..b1, 1
_C = (7.74545014278341407640e-4, 2.27238449892691845833e-2, 2.41780725177450611770e-1,
      1.27045825245236838258e+0, 3.64784832476320460504e+0, 5.76949722146069140550e+0,
      4.63033784615654529590e+0, 1.42343711074968357734e+0)                 # c7..c0
_D = (1.05075007164441684324e-9, 5.47593808499534494600e-4, 1.51986665636164571966e-2,
      1.48103976427480074590e-1, 6.89767334985100004550e-1, 1.67638483018380384940e+0,
      2.05319162663775882187e+0, 1.0)                                       # d7..d1, 1
_E = (2.01033439929228813265e-7, 2.71155556874348757815e-5, 1.24266094738807843860e-3,
      2.65321895265761230930e-2, 2.96560571828504891230e-1, 1.78482653991729133580e+0,
      5.46378491116411436990e+0, 6.65790464350110377720e+0)                 # e7..e0
_F = (2.04426310338993978564e-15, 1.42151175831644588870e-7, 1.84631831751005468180e-5,
      7.86869131145613259100e-4, 1.48753612908506148525e-2, 1.36929880922735805310e-1,
      5.99832206555887937690e-1, 1.0)                                       # f7..f1, 1


def ndtri(p) -> np.ndarray:
    """Φ⁻¹(p), elementwise, for an array ``p`` of any shape (same shape out, float64).

    ``p`` = 0 gives -inf, 1 gives +inf, outside [0, 1] or NaN gives NaN (as ``scipy.special``).
    """
    p = np.asarray(p, dtype=np.float64)
    q = p - 0.5
    out = np.full(p.shape, np.nan)
    central = np.abs(q) <= 0.425
    if central.any():
        qc = q[central]
        r = 0.180625 - qc * qc
        out[central] = qc * np.polyval(_A, r) / np.polyval(_B, r)
    tail = ~central & (p > 0.0) & (p < 1.0)
    if tail.any():
        qt = q[tail]
        r = np.sqrt(-np.log(np.where(qt <= 0.0, p[tail], 1.0 - p[tail])))
        near = r <= 5.0
        x = np.where(near, np.polyval(_C, r - 1.6) / np.polyval(_D, r - 1.6),
                     np.polyval(_E, r - 5.0) / np.polyval(_F, r - 5.0))
        out[tail] = np.where(qt < 0.0, -x, x)
    out[p == 0.0] = -np.inf
    out[p == 1.0] = np.inf
    return out
