"""The Dirichlet model's non-centred (interweaving) move, compiled for the DA-MCMC driver.

A Numba port of ``Dirichlet.innovations`` / ``from_innovations`` / ``interweave_to_free`` /
``interweave_from_free`` and of ``log_prior + interweave_log_jacobian`` (independent Gamma
prior), in the signatures of :class:`privpost.inference._damcmc_fast.CompiledInterweave`:

* records ``x`` ``(n, D)`` on the open simplex; innovations ``u`` ``(n, D)`` the encoded
  uniforms of ``models/dirichlet.py`` (``U`` itself when ``U = F_{alpha_j}(G_j) <= 1/2``, else
  ``-(1 - U)``, so neither tail loses resolution), where ``G = S x``, ``S ~ Gamma(sum alpha)``
  fresh (drawn with the same Generator calls as the NumPy move, in log space when
  ``sum alpha < 1``) and ``F_a`` is the Gamma(a, 1) CDF;
* ``x = g(alpha, u)``: ``G_j = F^{-1}_{alpha_j}(U_j)`` (lower or upper tail quantile), rows
  normalised by log-sum-exp and floored at the smallest positive double; lower-tail values
  where ``G`` underflows (``G < 1e-300``) use the exact small-``G`` limit
  ``F_a(G) = G^a / Gamma(a + 1)`` in log space, as the NumPy move does;
* free coordinates ``v = log(alpha)`` ``(D,)``; ``log_target(alpha) = sum_j [v_j log alpha_j -
  w_j alpha_j]`` = the Gamma(v_j, w_j) log prior plus the Jacobian ``sum_j log alpha_j`` of the
  log walk, up to the constant ``sum_j (v_j log w_j - lgamma(v_j))``.

The special functions are SciPy's own (``scipy.special.cython_special`` ``gammainc``,
``gammaincc``, ``gammaincinv``, ``gammainccinv``, ``gammaln``, called through their C entry
points), so the compiled move evaluates the same numbers as the NumPy one: with one move per
iteration both give the same chain for the same seed (tests/test_dirichlet_compiled_move.py).

They are bound *by symbol name*, not by address: at import this module registers each entry
point with LLVM's symbol table (``llvmlite.binding.add_symbol("privpost_scipy_<name>",
address)``) and the jitted code calls ``numba.types.ExternalFunction("privpost_scipy_<name>",
...)``, which compiles to a ``declare`` of that symbol and a plain call. The object code then
holds a relocation to the name instead of the process-specific address baked in as a constant
(what a ctypes function pointer does, which Numba refuses to cache: "dynamic globals"), so
every function here is ``cache=True``: a second process loads them from Numba's on-disk cache
(``__pycache__`` next to this file, or ``NUMBA_CACHE_DIR``) and the linker resolves the names
to that process's addresses, registered by this import before any cached code is loaded
(tests/test_dirichlet_compiled_move.py checks that a second process compiles nothing).
"""

from __future__ import annotations

import math

import numpy as np
from llvmlite import binding as _llvm
from numba import njit, types
from numba.extending import get_cython_function_address

__all__ = ["dirichlet_move"]

_TINY = np.finfo(np.float64).tiny
#: C signatures ``double f(double, double, int)`` / ``double f(double, int)``
_D2 = types.float64(types.float64, types.float64, types.intc)
_D1 = types.float64(types.float64, types.intc)


def _special(name, sig):
    """SciPy's cython_special C function ``name`` as a Numba external function of the symbol
    ``privpost_scipy_<name>``, registered here with this process's address (the trailing int
    of the C signature is Cython's ``__pyx_skip_dispatch``, always 0)."""
    symbol = "privpost_scipy_" + name
    _llvm.add_symbol(symbol, get_cython_function_address("scipy.special.cython_special", name))
    return types.ExternalFunction(symbol, sig)


_gammainc = _special("gammainc", _D2)
_gammaincc = _special("gammaincc", _D2)
_gammaincinv = _special("gammaincinv", _D2)
_gammainccinv = _special("gammainccinv", _D2)
_gammaln = _special("gammaln", _D1)


@njit(cache=True, nogil=True)
def _innovations(theta, records, u, rng):
    """``u`` ``(n, D)`` <- encoded uniforms of the records given ``alpha = theta`` (D,)."""
    n, D = records.shape
    a0 = 0.0
    for j in range(D):
        a0 += theta[j]
    log_s = np.empty(n)
    if a0 >= 1.0:
        for i in range(n):
            log_s[i] = math.log(rng.standard_gamma(a0))
    else:   # log S = log G_{a0 + 1} + log(V) / a0 (same call order as the NumPy move)
        for i in range(n):
            log_s[i] = math.log(rng.standard_gamma(a0 + 1.0))
        for i in range(n):
            log_s[i] += math.log1p(-rng.random()) / a0
    for i in range(n):
        for j in range(D):
            a = theta[j]
            lg = log_s[i] + math.log(records[i, j])
            g = math.exp(lg)
            lo = _gammainc(a, g, 0)
            enc = lo if lo <= 0.5 else -_gammaincc(a, g, 0)
            if g < 1e-300:
                enc = math.exp(a * lg - _gammaln(a + 1.0, 0))
            if enc == 0.0:
                enc = _TINY
            u[i, j] = enc


@njit(cache=True, nogil=True)
def _from_innovations(theta, u, out):
    """``out`` ``(n, D)`` <- records ``g(alpha = theta, u)``."""
    n, D = u.shape
    lgs = np.empty(D)
    for i in range(n):
        mx = -np.inf
        for j in range(D):
            a = theta[j]
            e = u[i, j]
            if e > 0:
                g = _gammaincinv(a, e, 0)
                if g >= 1e-300:
                    lg = math.log(g)
                else:
                    lg = (math.log(e) + _gammaln(a + 1.0, 0)) / a
            else:
                g = _gammainccinv(a, -e, 0)
                lg = math.log(g) if g > 0 else -np.inf
            lgs[j] = lg
            if lg > mx:
                mx = lg
        s = 0.0
        for j in range(D):
            lgs[j] = math.exp(lgs[j] - mx)
            s += lgs[j]
        for j in range(D):
            out[i, j] = max(lgs[j] / s, _TINY)


@njit(cache=True, nogil=True)
def _to_free(theta, v):
    for j in range(v.shape[0]):
        v[j] = math.log(theta[j]) if theta[j] > 0 else -np.inf


@njit(cache=True, nogil=True)
def _from_free(theta, v, out):
    for a in range(theta.shape[0]):
        out[a] = theta[a]
    for j in range(v.shape[0]):
        out[j] = np.exp(v[j])      # overflow -> inf, outside the support (log_target -inf)


def dirichlet_move(D: int, shape: np.ndarray, rate: np.ndarray):
    """The :class:`CompiledInterweave` fields ``(dim, innov_width, innovations,
    from_innovations, to_free, from_free, log_target)`` for ``Dirichlet(D)`` with independent
    ``Gamma(shape_j, rate_j)`` priors (``shape``, ``rate`` ``(D,)`` float64)."""
    v = np.ascontiguousarray(shape, dtype=np.float64)
    w = np.ascontiguousarray(rate, dtype=np.float64)

    @njit(cache=True, nogil=True)
    def log_target(theta):
        out = 0.0
        for j in range(D):
            a = theta[j]
            if not (0.0 < a < np.inf):
                return -np.inf
            out += v[j] * math.log(a) - w[j] * a
        return out

    return (D, D, _innovations, _from_innovations, _to_free, _from_free, log_target)


# ---- the compiled contribution of CensoredLogMean (CensoredLogMean.compiled_t) -------------
_CONTRIB_CACHE: dict = {}


def censored_log_mean_contrib(parts: int, threshold: float, n: int):
    """Numba ``contrib(records (m, parts), out (m, parts))`` with ``out[r, j] =
    log(min(max(x_rj, threshold), 1)) / n`` (``CensoredLogMean.t``), cached per parameters."""
    key = (int(parts), float(threshold), int(n))
    if key not in _CONTRIB_CACHE:
        lo, inv_n = float(threshold), 1.0 / float(n)
        log_lo = math.log(lo)

        @njit(cache=True, nogil=True)
        def contrib(rec, out):
            for r in range(rec.shape[0]):
                for j in range(rec.shape[1]):
                    x = rec[r, j]
                    if x <= lo:
                        out[r, j] = log_lo * inv_n
                    elif x >= 1.0:
                        out[r, j] = 0.0
                    else:
                        out[r, j] = math.log(x) * inv_n
        _CONTRIB_CACHE[key] = contrib
    return _CONTRIB_CACHE[key]
