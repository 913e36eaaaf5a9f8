"""Compiled (Numba) versions of the built-in models for the DA-MCMC fast path.

``Model.compiled_model()`` returns a :class:`privpost.inference._damcmc_fast.CompiledModel`
(``docs/internals.md``, "Compiled fast path for DA-MCMC"):

* ``update(theta, records, rng)`` overwrites ``theta`` (float64, the concatenation of the
  parameters in ``param_shapes`` order) with one draw of the model's update kernel;
* ``simulate(theta, out, rng)`` fills the float64 ``(m, record_width)`` array ``out`` with
  i.i.d. records.

Each function draws from the ``Generator`` in the same order as the model's Python ``update`` /
``simulate``, so both paths give the same chain for the same seed (up to rounding) -- the tests
check this. Compiled objects are cached per hyperparameter values in the process, and on disk
(``cache=True``: Numba keys a closure's cache entry on its closed-over values), so a
hyperparameter set compiles once per machine.
"""

from __future__ import annotations

import math

import numpy as np
from numba import njit

from privpost.models import _numeric as nm
from privpost.models._alr import _alr_from_free, _alr_to_free, _dirichlet_alr_log_target

try:  # the protocol's container lives with the DA-MCMC engine
    from privpost.inference._damcmc_fast import CompiledInterweave, CompiledModel
except ImportError:  # pragma: no cover - engine absent: no fast path
    CompiledModel = CompiledInterweave = None

_CACHE: dict = {}


def _cached(key, build):
    """``build() -> (update, simulate, record_width[, interweave])`` where ``interweave`` is
    ``(dim, innov_width, innovations, from_innovations, to_free, from_free, log_target)``."""
    if CompiledModel is None:
        return None
    cm = _CACHE.get(key)
    if cm is None:
        upd, sim, width, *rest = build()
        iw = CompiledInterweave(*rest[0]) if rest and rest[0] is not None else None
        cm = CompiledModel(record_width=width, update=upd, simulate=sim, interweave=iw)
        _CACHE[key] = cm
    return cm


# ---- non-centred protocol helpers: scalar parameter theta[0] moved in its own coordinate -----
@njit(cache=True, nogil=True)
def _first_to_free(theta, v):
    v[0] = theta[0]


@njit(cache=True, nogil=True)
def _first_from_free(theta, v, out):
    for a in range(theta.shape[0]):
        out[a] = theta[a]
    out[0] = v[0]


@njit(cache=True, nogil=True)
def _two_to_free(theta, v):
    v[0] = theta[0]
    v[1] = theta[1]


@njit(cache=True, nogil=True)
def _two_from_free(theta, v, out):
    for a in range(theta.shape[0]):
        out[a] = theta[a]
    out[0] = v[0]
    out[1] = v[1]


def _colsum(records):
    s = 0.0
    for i in range(records.shape[0]):
        s += records[i, 0]
    return s


_colsum = njit(cache=True, nogil=True)(_colsum)


# ------------------------------------------------------------------------------ scalar models
def beta_bernoulli(a: float, b: float):
    def build():
        @njit(cache=True, nogil=True)
        def update(theta, records, rng):
            s = _colsum(records)
            theta[0] = rng.beta(a + s, b + records.shape[0] - s)

        @njit(cache=True, nogil=True)
        def simulate(theta, out, rng):
            th = theta[0]
            for r in range(out.shape[0]):
                out[r, 0] = 1.0 if rng.random() < th else 0.0

        @njit(cache=True, nogil=True)
        def innovations(theta, records, u, rng):
            t = theta[0]
            for i in range(records.shape[0]):
                r = rng.random()
                u[i, 0] = r * t if records[i, 0] == 1.0 else t + r * (1.0 - t)

        @njit(cache=True, nogil=True)
        def from_innovations(theta, u, out):
            t = theta[0]
            for i in range(u.shape[0]):
                out[i, 0] = 1.0 if u[i, 0] < t else 0.0

        @njit(cache=True, nogil=True)
        def log_target(theta):
            t = theta[0]
            if not 0.0 < t < 1.0:
                return -np.inf
            return (a - 1.0) * math.log(t) + (b - 1.0) * math.log1p(-t)

        return update, simulate, 1, (1, 1, innovations, from_innovations, _first_to_free,
                                     _first_from_free, log_target)

    return _cached(("beta-bernoulli", a, b), build)


# ---- Poisson CDF for the compiled non-centred move of PoissonGamma ----------------------------
# F(k) = P(X <= k | lam) = Q(k + 1, lam) and S(k) = 1 - F(k) = P(k + 1, lam) (regularised
# incomplete gamma). Each is computed directly in the tail where the move uses it (F in the
# lower tail, k + 1 <= lam + 1: continued fraction for Q; S in the upper tail: series for P), so
# neither loses relative precision; innovations and from_innovations use the same functions, so
# the round trip g(lam, u(x)) = x is exact.
@njit(cache=True, nogil=True)
def _gamma_p_series(a, x):
    if x <= 0.0:
        return 0.0
    ap = a
    term = 1.0 / a
    tot = term
    for _ in range(100000):
        ap += 1.0
        term *= x / ap
        tot += term
        if abs(term) < abs(tot) * 1e-17:
            break
    return tot * math.exp(-x + a * math.log(x) - math.lgamma(a))


@njit(cache=True, nogil=True)
def _gamma_q_cf(a, x):
    tiny = 1e-300
    b = x + 1.0 - a
    c = 1.0 / tiny
    d = 1.0 / b
    h = d
    for i in range(1, 100000):
        an = -i * (i - a)
        b += 2.0
        d = an * d + b
        if abs(d) < tiny:
            d = tiny
        c = b + an / c
        if abs(c) < tiny:
            c = tiny
        d = 1.0 / d
        de = d * c
        h *= de
        if abs(de - 1.0) < 1e-16:
            break
    return math.exp(-x + a * math.log(x) - math.lgamma(a)) * h


@njit(cache=True, nogil=True)
def _pois_cdf(k, lam):
    """``F(k) = P(X <= k)``, ``X ~ Poisson(lam)`` (``k >= 0``)."""
    a = k + 1.0
    if lam < a + 1.0:
        return 1.0 - _gamma_p_series(a, lam)
    return _gamma_q_cf(a, lam)


@njit(cache=True, nogil=True)
def _pois_sf(k, lam):
    """``S(k) = P(X > k)`` (``k >= 0``)."""
    a = k + 1.0
    if lam < a + 1.0:
        return _gamma_p_series(a, lam)
    return 1.0 - _gamma_q_cf(a, lam)


@njit(cache=True, nogil=True)
def _norm_ppf(p):
    """Normal quantile (Acklam's rational approximation, relative error ~1e-9): a first guess."""
    a = (-3.969683028665376e+01, 2.209460984245205e+02, -2.759285104469687e+02,
         1.383577518672690e+02, -3.066479806614716e+01, 2.506628277459239e+00)
    b = (-5.447609879822406e+01, 1.615858368580409e+02, -1.556989798598866e+02,
         6.680131188771972e+01, -1.328068155288572e+01)
    c = (-7.784894002430293e-03, -3.223964580411365e-01, -2.400758277161838e+00,
         -2.549732539343734e+00, 4.374664141464968e+00, 2.938163982698783e+00)
    d = (7.784695709041462e-03, 3.224671290700398e-01, 2.445134137142996e+00,
         3.754408661907416e+00)
    if p <= 0.0:
        return -40.0
    if p >= 1.0:
        return 40.0
    if p < 0.02425:
        q = math.sqrt(-2.0 * math.log(p))
        return ((((((c[0] * q + c[1]) * q + c[2]) * q + c[3]) * q + c[4]) * q + c[5])
                / ((((d[0] * q + d[1]) * q + d[2]) * q + d[3]) * q + 1.0))
    if p > 1.0 - 0.02425:
        q = math.sqrt(-2.0 * math.log(1.0 - p))
        return -((((((c[0] * q + c[1]) * q + c[2]) * q + c[3]) * q + c[4]) * q + c[5])
                 / ((((d[0] * q + d[1]) * q + d[2]) * q + d[3]) * q + 1.0))
    q = p - 0.5
    r = q * q
    return ((((((a[0] * r + a[1]) * r + a[2]) * r + a[3]) * r + a[4]) * r + a[5]) * q
            / (((((b[0] * r + b[1]) * r + b[2]) * r + b[3]) * r + b[4]) * r + 1.0))


@njit(cache=True, nogil=True)
def _pois_above(k, lam, lower, ul, wu):
    """Is ``g(lam, u) <= k``? (``F(k) >= u``, resp. ``S(k) <= w`` in the upper tail)."""
    if lower:
        return _pois_cdf(k, lam) >= ul
    return _pois_sf(k, lam) <= wu


@njit(cache=True, nogil=True)
def _pois_from_innovation(lam, u):
    lower = u > 0
    ul = u if lower else 0.5
    wu = 0.5 if lower else -u
    z = _norm_ppf(min(ul, 1.0 - 1e-16)) if lower else -_norm_ppf(wu)
    k = math.floor(lam + math.sqrt(lam) * z + (z * z - 1.0) / 6.0 + 0.5)
    k = min(max(k, 0.0), 1e15) if k == k else 0.0
    while not _pois_above(k, lam, lower, ul, wu):
        k += 1.0
    while k >= 1.0 and _pois_above(k - 1.0, lam, lower, ul, wu):
        k -= 1.0
    return k


def _gamma_log_target(shape: float, rate: float):
    """Compiled ``log_target(theta)`` of a rate ``theta[0]`` moved in its own coordinate under a
    Gamma(shape, rate) prior (PoissonGamma, ExponentialGamma), up to a constant."""
    @njit(cache=True, nogil=True)
    def log_target(theta):
        lam = theta[0]
        if not lam > 0:
            return -np.inf
        return (shape - 1.0) * math.log(lam) - rate * lam

    return log_target


def poisson_gamma(shape: float, rate: float):
    def build():
        @njit(cache=True, nogil=True)
        def update(theta, records, rng):
            theta[0] = rng.gamma(shape + _colsum(records), 1.0 / (rate + records.shape[0]))

        @njit(cache=True, nogil=True)
        def simulate(theta, out, rng):
            lam = theta[0]
            for r in range(out.shape[0]):
                out[r, 0] = float(rng.poisson(lam))

        # PoissonGamma.innovations: encoded u ~ U(F(x - 1), F(x)) (a value -w < 0 stands for
        # u = 1 - w in the upper tail); same Generator calls (one U(0, 1] per record)
        @njit(cache=True, nogil=True)
        def innovations(theta, records, u, rng):
            lam = theta[0]
            m = records.shape[0]
            v = np.empty(m)
            for i in range(m):
                v[i] = 1.0 - rng.random()
            for i in range(m):
                x = records[i, 0]
                F_lo = _pois_cdf(x - 1.0, lam) if x >= 1 else 0.0
                if F_lo < 0.5:
                    F_hi = _pois_cdf(x, lam)
                    w = min(F_lo + v[i] * (F_hi - F_lo), F_hi)
                    u[i, 0] = w if w > F_lo else F_hi
                else:
                    S_lo = _pois_sf(x - 1.0, lam) if x >= 1 else 1.0
                    S_hi = _pois_sf(x, lam)
                    w = max(S_lo - v[i] * (S_lo - S_hi), S_hi)
                    u[i, 0] = -(w if w < S_lo else S_hi)

        @njit(cache=True, nogil=True)
        def from_innovations(theta, u, out):
            lam = theta[0]
            for i in range(u.shape[0]):
                out[i, 0] = _pois_from_innovation(lam, u[i, 0])

        return update, simulate, 1, (1, 1, innovations, from_innovations, _first_to_free,
                                     _first_from_free, _gamma_log_target(shape, rate))

    return _cached(("poisson-gamma", shape, rate), build)


def exponential_gamma(shape: float, rate: float):
    def build():
        @njit(cache=True, nogil=True)
        def update(theta, records, rng):
            theta[0] = rng.gamma(shape + records.shape[0], 1.0 / (rate + _colsum(records)))

        @njit(cache=True, nogil=True)
        def simulate(theta, out, rng):
            inv = 1.0 / theta[0]
            for r in range(out.shape[0]):
                out[r, 0] = rng.standard_exponential() * inv

        @njit(cache=True, nogil=True)
        def innovations(theta, records, u, rng):
            lam = theta[0]
            for i in range(records.shape[0]):
                u[i, 0] = lam * records[i, 0]

        @njit(cache=True, nogil=True)
        def from_innovations(theta, u, out):
            lam = theta[0]
            for i in range(u.shape[0]):
                out[i, 0] = u[i, 0] / lam

        return update, simulate, 1, (1, 1, innovations, from_innovations, _first_to_free,
                                     _first_from_free, _gamma_log_target(shape, rate))

    return _cached(("exponential-gamma", shape, rate), build)


def normal_known_variance(mu0: float, tau0: float, sigma: float):
    prec0 = 1.0 / tau0 ** 2
    inv_s2 = 1.0 / sigma ** 2

    def build():
        @njit(cache=True, nogil=True)
        def update(theta, records, rng):
            n = records.shape[0]
            prec = prec0 + n * inv_s2
            mean = (mu0 * prec0 + _colsum(records) * inv_s2) / prec
            theta[0] = mean + rng.standard_normal() / math.sqrt(prec)

        @njit(cache=True, nogil=True)
        def simulate(theta, out, rng):
            mu = theta[0]
            for r in range(out.shape[0]):
                out[r, 0] = mu + sigma * rng.standard_normal()

        @njit(cache=True, nogil=True)
        def innovations(theta, records, u, rng):
            mu = theta[0]
            for i in range(records.shape[0]):
                u[i, 0] = (records[i, 0] - mu) / sigma

        @njit(cache=True, nogil=True)
        def from_innovations(theta, u, out):
            mu = theta[0]
            for i in range(u.shape[0]):
                out[i, 0] = mu + sigma * u[i, 0]

        @njit(cache=True, nogil=True)
        def log_target(theta):
            z = (theta[0] - mu0) / tau0
            return -0.5 * z * z

        return update, simulate, 1, (1, 1, innovations, from_innovations, _first_to_free,
                                     _first_from_free, log_target)

    return _cached(("normal-known-variance", mu0, tau0, sigma), build)


def normal_inverse_gamma(mu0: float, kappa0: float, alpha0: float, beta0: float):
    def build():
        @njit(cache=True, nogil=True)
        def update(theta, records, rng):
            n = records.shape[0]
            if n == 0:
                mun, kn, an, bn = mu0, kappa0, alpha0, beta0
            else:
                xbar = _colsum(records) / n
                ss = 0.0
                for i in range(n):
                    d = records[i, 0] - xbar
                    ss += d * d
                kn = kappa0 + n
                mun = (kappa0 * mu0 + n * xbar) / kn
                bn = beta0 + 0.5 * ss + 0.5 * kappa0 * n * (xbar - mu0) ** 2 / kn
                an = alpha0 + 0.5 * n
            s2 = bn / rng.standard_gamma(an)
            theta[0] = mun + math.sqrt(s2 / kn) * rng.standard_normal()
            theta[1] = s2

        @njit(cache=True, nogil=True)
        def simulate(theta, out, rng):
            mu = theta[0]
            sd = math.sqrt(theta[1])
            for r in range(out.shape[0]):
                out[r, 0] = mu + sd * rng.standard_normal()

        @njit(cache=True, nogil=True)
        def innovations(theta, records, u, rng):
            mu = theta[0]
            sd = math.sqrt(theta[1])
            for i in range(records.shape[0]):
                u[i, 0] = (records[i, 0] - mu) / sd

        @njit(cache=True, nogil=True)
        def from_innovations(theta, u, out):
            mu = theta[0]
            sd = math.sqrt(theta[1])
            for i in range(u.shape[0]):
                out[i, 0] = mu + sd * u[i, 0]

        @njit(cache=True, nogil=True)
        def log_target(theta):
            s2 = theta[1]
            if not s2 > 0:
                return -np.inf
            d = theta[0] - mu0
            return (-0.5 * kappa0 * d * d / s2 - 0.5 * math.log(s2)
                    - (alpha0 + 1.0) * math.log(s2) - beta0 / s2)

        return update, simulate, 1, (2, 1, innovations, from_innovations, _two_to_free,
                                     _two_from_free, log_target)

    return _cached(("normal-inverse-gamma", mu0, kappa0, alpha0, beta0), build)


# ------------------------------------------------------------------------------ categorical
def dirichlet_categorical(alpha: np.ndarray):
    alpha = np.ascontiguousarray(alpha, dtype=np.float64)
    k = alpha.shape[0]

    def build():
        @njit(cache=True, nogil=True)
        def update(theta, records, rng):
            c = alpha.copy()
            for i in range(records.shape[0]):
                c[int(records[i, 0])] += 1.0
            s = 0.0
            for j in range(k):
                g = rng.standard_gamma(c[j])
                theta[j] = g
                s += g
            for j in range(k):
                theta[j] /= s

        @njit(cache=True, nogil=True)
        def simulate(theta, out, rng):
            cum = np.cumsum(theta[:k])
            tot = cum[k - 1]
            for r in range(out.shape[0]):
                u = rng.random() * tot
                j = 0
                while j < k - 1 and cum[j] <= u:
                    j += 1
                out[r, 0] = float(j)

        @njit(cache=True, nogil=True)
        def innovations(theta, records, u, rng):
            c = np.cumsum(theta[:k])
            for i in range(records.shape[0]):
                x = int(records[i, 0])
                hi = c[x]
                lo = c[x - 1] if x > 0 else 0.0
                w = min(lo + (1.0 - rng.random()) * (hi - lo), hi)
                u[i, 0] = w if w > lo else hi

        @njit(cache=True, nogil=True)
        def from_innovations(theta, u, out):
            c = np.cumsum(theta[:k])
            for i in range(u.shape[0]):
                w = u[i, 0]
                j = np.searchsorted(c, w)     # side="left": min{j : c_j >= w}
                out[i, 0] = float(min(j, k - 1))

        @njit(cache=True, nogil=True)
        def to_free(theta, v):
            _alr_to_free(theta, v, k)

        @njit(cache=True, nogil=True)
        def from_free(theta, v, out):
            _alr_from_free(v, out, k)

        @njit(cache=True, nogil=True)
        def log_target(theta):
            # Dirichlet(alpha) density times the Jacobian prod_j p_j: sum_j alpha_j log p_j
            return _dirichlet_alr_log_target(theta, alpha, k)

        return update, simulate, 1, (k - 1, 1, innovations, from_innovations, to_free,
                                     from_free, log_target)

    return _cached(("dirichlet-categorical", alpha.tobytes()), build)


def naive_bayes(n_classes: int, levels: tuple, class_alpha: np.ndarray, alpha_flat: np.ndarray):
    I = int(n_classes)
    J = np.asarray(levels, dtype=np.int64)
    K = J.shape[0]
    Jmax = int(J.max())
    off = np.zeros(K, dtype=np.int64)  # offset of table k in theta after p (I entries)
    for kk in range(1, K):
        off[kk] = off[kk - 1] + I * J[kk - 1]
    class_alpha = np.ascontiguousarray(class_alpha, dtype=np.float64)
    alpha_flat = np.ascontiguousarray(alpha_flat, dtype=np.float64)
    ncell = alpha_flat.shape[0]

    def build():
        @njit(cache=True, nogil=True)
        def update(theta, records, rng):
            cells = alpha_flat.copy()
            cls = class_alpha.copy()
            for i in range(records.shape[0]):
                y = int(records[i, 0])
                cls[y] += 1.0
                for kk in range(K):
                    cells[off[kk] + y * J[kk] + int(records[i, kk + 1])] += 1.0
            # Python order: feature tables first (one vector gamma draw), then the class vector
            for c in range(ncell):
                theta[I + c] = rng.standard_gamma(cells[c])
            for kk in range(K):
                for y in range(I):
                    st = I + off[kk] + y * J[kk]
                    s = 0.0
                    for j in range(J[kk]):
                        s += theta[st + j]
                    if not s > 0.0:     # every gamma underflowed (tiny concentrations)
                        nm.log_space_dirichlet(cells[st - I:st - I + J[kk]],
                                               theta[st:st + J[kk]], rng)
                        s = 1.0
                    for j in range(J[kk]):
                        theta[st + j] /= s
            s = 0.0
            for y in range(I):
                g = rng.standard_gamma(cls[y])
                theta[y] = g
                s += g
            if not s > 0.0:
                nm.log_space_dirichlet(cls, theta[:I], rng)
                s = 1.0
            for y in range(I):
                theta[y] /= s

        @njit(cache=True, nogil=True)
        def simulate(theta, out, rng):
            cp = np.cumsum(theta[:I])
            cq = np.ones((K, I, Jmax))
            for kk in range(K):
                for y in range(I):
                    st = I + off[kk] + y * J[kk]
                    acc = 0.0
                    for j in range(J[kk]):
                        acc += theta[st + j]
                        cq[kk, y, j] = acc
                    for j in range(J[kk]):
                        cq[kk, y, j] /= acc
            # Python order: all class uniforms, then the (n, K) feature uniforms row by row.
            # Inverse CDF by counting: the cumulative sums are nondecreasing, so the number of
            # y < I - 1 with cp[y] <= u is the first index whose cumulative sum exceeds u (capped
            # at I - 1), what a linear search returns; counting has no data-dependent branch
            # (a search mispredicts about once per draw, most of the cost of these draws).
            m = out.shape[0]
            for r in range(m):
                u = rng.random() * cp[I - 1]
                y = 0
                for c in range(I - 1):
                    y += cp[c] <= u
                out[r, 0] = float(y)
            for r in range(m):
                y = int(out[r, 0])
                for kk in range(K):
                    u = rng.random()
                    j = 0
                    for c in range(J[kk] - 1):
                        j += cq[kk, y, c] <= u
                    out[r, kk + 1] = float(j)

        from privpost.models._compiled_nb_move import naive_bayes_move

        return update, simulate, K + 1, naive_bayes_move(I, J, class_alpha)

    return _cached(("naive-bayes", I, tuple(levels), class_alpha.tobytes(), alpha_flat.tobytes()),
                   build)


# ------------------------------------------------------------------------------ regression
def linear_regression(model):
    p = model.p
    k = p + 1
    P0 = np.ascontiguousarray(model._P0)
    h0 = np.ascontiguousarray(model._h0)
    c0 = float(model._c0)
    a0, b0 = float(model.a0), float(model.b0)
    known = model.sigma2 is not None
    sigma2 = float(model.sigma2) if known else 1.0
    inv_s2 = 1.0 / sigma2
    conj = model.prior == "conjugate"
    niw = model.hyperprior == "niw"
    ntri = p * (p - 1) // 2
    if niw:
        mu0 = np.ascontiguousarray(model.mu0)
        kappa0, nu0 = float(model.kappa0), float(model.nu0)
        Psi0 = np.ascontiguousarray(model.Psi0)
        mvec = np.zeros(p)
        LS = np.eye(p)
    else:
        mu0 = np.zeros(p)
        kappa0, nu0 = 1.0, float(p + 2)
        Psi0 = np.eye(p)
        mvec = np.ascontiguousarray(model.m)
        LS = np.ascontiguousarray(model._LS)
    s_pos = k                      # index of sigma2 in theta (when unknown)
    dim = k if known else k + 1    # moved entries of the non-centred move: beta (, sigma2)
    beta0 = np.ascontiguousarray(model.beta0, dtype=np.float64).reshape(k)
    m_pos = k if known else k + 1  # index of m (NIW)
    S_pos = m_pos + p
    # per-column covariate law (privpost.models.covariate_law); all-normal keeps the joint draw
    law = model._cov
    mixed = not law.all_normal
    c_code, c_lo, c_w, c_cum, c_nidx, c_mn, c_Ln = law.compiled_tables()
    n_norm = c_nidx.size
    # learned Bernoulli / categorical probabilities: parameters after beta (, sigma2)
    # (CovariateLaw.compiled_learned; NIW excludes non-normal columns, so no m, S before them)
    l_col, l_pos, l_nlev, l_bern, l_conc = law.compiled_learned(m_pos)
    n_learn = l_col.size

    def build():
        @njit(cache=True, nogil=True)
        def update(theta, records, rng):
            n = records.shape[0]
            z = np.empty(k)
            for a in range(k):
                z[a] = rng.standard_normal()
            if known:
                beta = nm.reg_update_known(records, p, P0, h0, inv_s2, z)
            else:
                g = rng.standard_gamma(a0 + 0.5 * n)
                if conj:
                    beta, s2 = nm.reg_update_nig(records, p, P0, h0, c0, a0, b0, g, z)
                else:
                    beta, s2 = nm.reg_update_indep(records, p, P0, h0, a0, b0, theta[s_pos], g, z)
                theta[s_pos] = s2
            for a in range(k):
                theta[a] = beta[a]
            if niw and n > 0:
                chi2 = np.empty(p)
                for a in range(p):
                    chi2[a] = rng.chisquare(nu0 + n - a)
                normals = np.empty(ntri)
                for a in range(ntri):
                    normals[a] = rng.standard_normal()
                zm = np.empty(p)
                for a in range(p):
                    zm[a] = rng.standard_normal()
                m, S = nm.niw_update(records, p, mu0, kappa0, Psi0, chi2, normals, zm)
                for a in range(p):
                    theta[m_pos + a] = m[a]
                    for b in range(p):
                        theta[S_pos + a * p + b] = S[a, b]
            # learned covariate probabilities: Dirichlet(conc + level counts) through Gammas
            # drawn level by level (CovariateLaw.update draws the same numbers)
            for i in range(n_learn):
                K_i = l_nlev[i]
                cnt = np.zeros(K_i)
                j = l_col[i]
                for r in range(n):
                    lev = records[r, j] - c_lo[j]
                    li = int(lev)
                    if li == lev and 0 <= li < K_i:
                        cnt[li] += 1.0
                g = np.empty(K_i)
                tot = 0.0
                for a in range(K_i):
                    g[a] = rng.standard_gamma(l_conc[i, a] + cnt[a])
                    tot += g[a]
                if l_bern[i] == 1:
                    theta[l_pos[i]] = g[1] / tot
                else:
                    for a in range(K_i):
                        theta[l_pos[i] + a] = g[a] / tot

        @njit(cache=True, nogil=True)
        def simulate(theta, out, rng):
            if niw:
                m = theta[m_pos:m_pos + p].copy()
                L = nm.chol_lower(theta[S_pos:S_pos + p * p].copy().reshape(p, p))
            else:
                m = mvec
                L = LS
            sd = math.sqrt(sigma2 if known else theta[s_pos])
            if mixed:
                cum = c_cum.copy()
                for i in range(n_learn):      # learned columns: cumulative probs from theta
                    j = l_col[i]
                    if l_bern[i] == 1:
                        cum[j, 0] = 1.0 - theta[l_pos[i]]
                        cum[j, 1] = 1.0
                    else:
                        acc = 0.0
                        for a in range(l_nlev[i]):
                            acc += theta[l_pos[i] + a]
                            cum[j, a] = acc
                        for a in range(l_nlev[i]):
                            cum[j, a] /= acc
                zn = np.empty(n_norm)
                for r in range(out.shape[0]):
                    for a in range(n_norm):
                        zn[a] = rng.standard_normal()
                    for a in range(n_norm):
                        s = c_mn[a]
                        for b in range(a + 1):
                            s += c_Ln[a, b] * zn[b]
                        out[r, c_nidx[a]] = s
                    y = theta[0]
                    for a in range(p):
                        if c_code[a] == 1:
                            out[r, a] = c_lo[a] + c_w[a] * rng.random()
                        elif c_code[a] == 2:
                            u = rng.random()
                            j = 0
                            while j < cum.shape[1] - 1 and cum[a, j] <= u:
                                j += 1
                            out[r, a] = c_lo[a] + j
                        y += out[r, a] * theta[a + 1]
                    out[r, p] = y + sd * rng.standard_normal()
                return
            z = np.empty(k)
            for r in range(out.shape[0]):
                for c in range(k):
                    z[c] = rng.standard_normal()
                y = theta[0]
                for a in range(p):
                    s = m[a]
                    for b in range(a + 1):
                        s += L[a, b] * z[b]
                    out[r, a] = s
                    y += s * theta[a + 1]
                out[r, p] = y + sd * z[p]

        # non-centred protocol (LinearRegression.innovations): u = [x_1..x_p, e] with
        # e = (y - beta_0 - x beta_{1:p}) / sigma; the move changes beta (and sigma2)
        @njit(cache=True, nogil=True)
        def innovations(theta, records, u, rng):
            sd = math.sqrt(sigma2 if known else theta[s_pos])
            for i in range(records.shape[0]):
                y = records[i, p] - theta[0]
                for a in range(p):
                    u[i, a] = records[i, a]
                    y -= records[i, a] * theta[a + 1]
                u[i, p] = y / sd

        @njit(cache=True, nogil=True)
        def from_innovations(theta, u, out):
            sd = math.sqrt(sigma2 if known else theta[s_pos])
            for i in range(u.shape[0]):
                y = theta[0]
                for a in range(p):
                    out[i, a] = u[i, a]
                    y += u[i, a] * theta[a + 1]
                out[i, p] = y + sd * u[i, p]

        @njit(cache=True, nogil=True)
        def to_free(theta, v):
            for a in range(dim):
                v[a] = theta[a]

        @njit(cache=True, nogil=True)
        def from_free(theta, v, out):
            for a in range(theta.shape[0]):
                out[a] = theta[a]
            for a in range(dim):
                out[a] = v[a]

        @njit(cache=True, nogil=True)
        def log_target(theta):
            # log_prior in (beta, sigma2) up to terms of the fixed m, S
            q = 0.0
            for a in range(k):
                da = theta[a] - beta0[a]
                for b in range(k):
                    q += da * P0[a, b] * (theta[b] - beta0[b])
            if known:
                return -0.5 * q
            s2 = theta[s_pos]
            if not s2 > 0:
                return -np.inf
            lp = -(a0 + 1.0) * math.log(s2) - b0 / s2
            if conj:
                return lp - 0.5 * q / s2 - 0.5 * k * math.log(s2)
            return lp - 0.5 * q

        if niw:
            # the Python move of the NIW variant also moves m and S (innovations [z, e] with
            # x = m + L z); the (beta, sigma2) move above is a different kernel: the NIW move
            # has its own module
            from privpost.models._compiled_niw_move import niw_regression_move

            return update, simulate, k, niw_regression_move(
                p, known, sigma2, conj, a0, b0, P0, beta0, mu0, kappa0, nu0, Psi0)
        return update, simulate, k, (dim, k, innovations, from_innovations, to_free, from_free,
                                     log_target)

    key = ("linear-regression", p, known, sigma2, conj, niw, a0, b0, c0, P0.tobytes(),
           h0.tobytes(), mvec.tobytes(), LS.tobytes(), mu0.tobytes(), kappa0, nu0, Psi0.tobytes(),
           beta0.tobytes())
    if mixed:   # the covariate law only enters the simulator
        key += ("covariates", c_code.tobytes(), c_lo.tobytes(), c_w.tobytes(), c_cum.tobytes(),
                c_cum.shape, c_nidx.tobytes(), c_mn.tobytes(), c_Ln.tobytes(), l_col.tobytes(),
                l_pos.tobytes(), l_nlev.tobytes(), l_bern.tobytes(), l_conc.tobytes(),
                l_conc.shape)
    return _cached(key, build)


# ------------------------------------------------------------------------------ compositional
_TINY = np.finfo(np.float64).tiny
_U_MAX = 700.0


@njit(cache=True, nogil=True)
def _dir_logf(x, n, a0_rest, Tj, vj, wj):
    if not -_U_MAX < x < _U_MAX:
        return -np.inf
    aj = math.exp(x)
    val = n * (math.lgamma(a0_rest + aj) - math.lgamma(aj)) + (aj - 1.0) * Tj + vj * x - wj * aj
    if val != val:
        return -np.inf
    return val


def dirichlet(model):
    """Univariate slice sampler (independent Gamma prior only; ``None`` otherwise) and the
    compiled non-centred move (:mod:`privpost.models._compiled_dirichlet_move`)."""
    if model.prior_corr is not None or model.slice_method != "univariate":
        return None
    D = int(model.parts)
    v = np.ascontiguousarray(model.prior_shape, dtype=np.float64)
    w = np.ascontiguousarray(model.prior_rate, dtype=np.float64)
    width = float(model.slice_width)
    msteps = int(model.max_steps_out)
    steps = int(model.slice_steps)

    def build():
        @njit(cache=True, nogil=True)
        def update(theta, records, rng):
            n = records.shape[0]
            T = np.zeros(D)
            for i in range(n):
                for j in range(D):
                    T[j] += math.log(records[i, j])
            u = np.empty(D)
            a = np.empty(D)
            for j in range(D):
                u[j] = math.log(theta[j])
                a[j] = math.exp(u[j])
            buf = np.empty(64)
            for b in range(64):
                buf[b] = rng.random()
            pos = 0
            for _ in range(steps):
                for j in range(D):
                    tot = 0.0
                    for l in range(D):
                        tot += a[l]
                    rest = tot - a[j]
                    x0 = u[j]
                    f0 = _dir_logf(x0, n, rest, T[j], v[j], w[j])
                    draws = np.empty(3)
                    for c in range(3):  # slice level, interval position, split of step budget
                        if pos == 64:
                            for b in range(64):
                                buf[b] = rng.random()
                            pos = 0
                        draws[c] = buf[pos]
                        pos += 1
                    logy = f0 + math.log(1.0 - draws[0])
                    L = x0 - width * draws[1]
                    R = L + width
                    J = int(msteps * draws[2])
                    K = msteps - 1 - J if msteps > 0 else 0
                    while J > 0 and _dir_logf(L, n, rest, T[j], v[j], w[j]) > logy:
                        L -= width
                        J -= 1
                    while K > 0 and _dir_logf(R, n, rest, T[j], v[j], w[j]) > logy:
                        R += width
                        K -= 1
                    while True:
                        if pos == 64:
                            for b in range(64):
                                buf[b] = rng.random()
                            pos = 0
                        x1 = L + buf[pos] * (R - L)
                        pos += 1
                        if _dir_logf(x1, n, rest, T[j], v[j], w[j]) > logy:
                            break
                        if x1 < x0:
                            L = x1
                        else:
                            R = x1
                        if R - L < 1e-14:
                            x1 = x0
                            break
                    u[j] = x1
                    a[j] = math.exp(x1)
            for j in range(D):
                theta[j] = math.exp(u[j])

        @njit(cache=True, nogil=True)
        def simulate(theta, out, rng):
            m = out.shape[0]
            amin = theta[0]
            for j in range(D):
                if theta[j] < amin:
                    amin = theta[j]
            if amin >= 1.0:
                for j in range(D):
                    for r in range(m):
                        out[r, j] = rng.standard_gamma(theta[j])
                for r in range(m):
                    s = 0.0
                    for j in range(D):
                        s += out[r, j]
                    for j in range(D):
                        out[r, j] = max(out[r, j] / s, _TINY)
                return
            for j in range(D):
                aj = theta[j]
                if aj >= 1.0:
                    for r in range(m):
                        out[r, j] = math.log(rng.standard_gamma(aj))
                else:
                    for r in range(m):
                        out[r, j] = math.log(rng.standard_gamma(aj + 1.0))
                    for r in range(m):
                        out[r, j] += math.log1p(-rng.random()) / aj
            for r in range(m):
                mx = out[r, 0]
                for j in range(1, D):
                    if out[r, j] > mx:
                        mx = out[r, j]
                s = 0.0
                for j in range(D):
                    out[r, j] = math.exp(out[r, j] - mx)
                    s += out[r, j]
                for j in range(D):
                    out[r, j] = max(out[r, j] / s, _TINY)

        from privpost.models._compiled_dirichlet_move import dirichlet_move
        return update, simulate, D, dirichlet_move(D, v, w)   # + the compiled non-centred move

    return _cached(("dirichlet", D, v.tobytes(), w.tobytes(), width, msteps, steps), build)
