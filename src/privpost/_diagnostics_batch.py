"""The diagnostics of :mod:`privpost.diagnostics` for many scalar parameters at once.

:func:`privpost.diagnostics.summarise` computes split R-hat, bulk/tail ESS and the MCSEs of
every scalar entry of a posterior; a K = 10 hidden Markov model has 450 entries. The per-scalar
functions of :mod:`privpost.diagnostics` (the reference definitions, checked against ArviZ) cost
a few ms an entry at 4 x 2000 draws, about 40 % of it in three stable sorts for the average
ranks and 22 % in the inverse normal CDF of every draw (benchmarks/README.md). Here the same
arithmetic runs over a stack of entries:

* arrays are ``(P, chains, draws)``: P scalar entries, each a (chains, draws) array;
* rank normalisation sorts each entry once with an unstable sort (the average ranks do not
  depend on the order of ties) and looks Φ⁻¹ up in a table of the 2S − 1 possible average ranks
  1, 1.5, ..., S (S draws in all) evaluated by the same :func:`privpost._ndtri.ndtri` on the
  same inputs; with an even number of draws the median, the quantiles and the order of the
  folded draws are read off the sorted draws;
* the bulk-ESS and bulk-R-hat share one z-scaled array (the per-scalar code builds it twice);
* Geyer's initial monotone sequence is computed in closed form: with pair sums
  P_0 = 1 + ρ_1, P_j = ρ_2j + ρ_2j+1, the loop of ``diagnostics._ess`` stops at the first pair
  J whose predecessor's sum is not positive (or at the draw-count bound), and its monotone pass
  replaces each pair sum by the running minimum, so
  τ = −1 + 2 Σ_{j ≤ J−2} min(P_0..P_j) + ρ̂_{2J−2}, the last even term kept when its pair was
  kept or it is positive (exactly the branches of the loop). Results agree with the per-scalar
  functions to rounding (tests/test_diagnostics_batch.py checks 1e-12 relative on many shapes:
  ties, constant, NaN, ±inf and overflowing entries, one chain, 3-13 draws, odd draw counts).

Entries holding NaN get NaN everywhere (as the per-scalar functions); entries with ±inf draws fall
back to the per-scalar ESS (they never occur in a real posterior, and the closed form assumes
finite autocovariances).
"""

from __future__ import annotations

import math

import numpy as np

__all__ = ["diagnose_many"]

# elements of one working array: bounds the memory of a chunk of entries (~8 MB per array)
_CHUNK_ELEMENTS = 1 << 20


def _split(x: np.ndarray) -> np.ndarray:
    """(P, chains, draws) -> (P, 2 chains, draws // 2): first and last halves of each chain."""
    n = x.shape[2]
    half = n // 2
    return np.concatenate([x[:, :, :half], x[:, :, n - half:]], axis=1)


def _z_table(size: int) -> np.ndarray:
    """Φ⁻¹((r − 3/8) / (S + 1/4)) for the average ranks r = 1, 1.5, ..., S (index 2r − 2)."""
    from privpost._ndtri import ndtri

    c = 3.0 / 8.0
    avg = 0.5 * (np.arange(2 * size - 1, dtype=np.float64) + 2.0)
    return ndtri((avg - c) / (size - 2 * c + 1))


def _z_scale(x: np.ndarray, table: np.ndarray):
    """Rank normalisation of each entry of ``x`` (P, chains, draws) over all its draws.

    Returns ``(z, s, order)``: z like ``x``; ``s`` (P, S) each entry's draws sorted; ``order``
    (P, S) their flat indices into ``x`` (``x.ravel()[order] == s``)."""
    p = x.shape[0]
    flat = x.reshape(p, -1)
    order = np.argsort(flat, axis=1)
    order += (np.arange(p) * flat.shape[1])[:, None]   # flat indices: take/put, no broadcasting
    s = np.take(flat, order)
    return _z_sorted(s, order, table).reshape(x.shape), s, order


def _z_sorted(s: np.ndarray, order: np.ndarray, table: np.ndarray) -> np.ndarray:
    """Φ⁻¹ of the average ranks of sorted rows ``s`` (P, S), put back at flat ``order``."""
    p, size = s.shape
    new = s[:, 1:] != s[:, :-1]                  # a new value starts at position i + 1
    idx = np.arange(size)
    start = np.where(np.concatenate([np.ones((p, 1), bool), new], axis=1), idx, 0)
    np.maximum.accumulate(start, axis=1, out=start)
    end = np.where(np.concatenate([new, np.ones((p, 1), bool)], axis=1), idx + 1, size)
    end = np.minimum.accumulate(end[:, ::-1], axis=1)[:, ::-1]
    # average rank of a run of ties at sorted positions start..end-1: (start + end + 1) / 2
    z = np.empty(s.shape)
    z.ravel()[order] = table[start + end - 1]
    return z


def _rhat_plain(z: np.ndarray) -> np.ndarray:
    n = z.shape[2]
    between = n * np.var(z.mean(axis=2), axis=1, ddof=1)
    within = np.mean(np.var(z, axis=2, ddof=1), axis=1)
    with np.errstate(invalid="ignore", divide="ignore"):   # constant draws: NaN
        return np.sqrt((between / within + n - 1) / n)


def _fast_len(target: int) -> int:
    """The smallest ``2^i 3^j 5^k >= target`` (``scipy.fft.next_fast_len`` without importing
    SciPy, which the diagnostics of a plain run must not: tests/test_startup_imports.py)."""
    target = max(int(target), 1)
    best = 1
    while best < target:
        best *= 2
    p5 = 1
    while p5 < best:
        p35 = p5
        while p35 < best:
            q = p35
            while q < target:
                q *= 2
            best = min(best, q)
            p35 *= 3
        p5 *= 5
    return best


def _autocov(a: np.ndarray) -> np.ndarray:
    """Autocovariance of every row at lags 0..n-1 (biased, divided by n), by FFT.

    Zero-padded to ``m >= 2n - 1`` (no circular wrap-around at lags < n), the smallest such
    length with factors 2, 3 and 5 only (:func:`_fast_len`) rather than the next power of two:
    10,000 instead of 16,384 for 5,000 draws, about 4x less time in the transforms for the same
    autocovariances up to rounding (benchmarks/README.md, "Table 1's record path")."""
    n = a.shape[1]
    m = _fast_len(2 * n - 1)
    c = a - a.mean(axis=1, keepdims=True)
    f = np.fft.rfft(c, n=m, axis=1)
    f *= np.conjugate(f)
    return np.fft.irfft(f, n=m, axis=1)[:, :n] / n


def _ess_one(a: np.ndarray) -> float:
    """Multi-chain ESS of a (chains, draws) array (Geyer's initial monotone sequence): the
    reference definition (:mod:`privpost.diagnostics` uses it for one entry; :func:`_ess` below
    is the same for many entries at once and falls back to it for non-finite draws)."""
    if np.isnan(a).any():
        return math.nan
    if np.max(a) - np.min(a) < np.finfo(float).resolution:
        return float(a.size)
    n_chain, n_draw = a.shape
    acov = _autocov(a)
    chain_mean = a.mean(axis=1)
    mean_var = np.mean(acov[:, 0]) * n_draw / (n_draw - 1.0)
    var_plus = mean_var * (n_draw - 1.0) / n_draw
    if n_chain > 1:
        var_plus += np.var(chain_mean, ddof=1)
    acov_mean = acov.mean(axis=0)
    rho = np.zeros(n_draw)
    rho_even = 1.0
    rho[0] = rho_even
    rho_odd = 1.0 - (mean_var - acov_mean[1]) / var_plus
    rho[1] = rho_odd
    t = 1
    while t < n_draw - 3 and rho_even + rho_odd > 0.0:
        rho_even = 1.0 - (mean_var - acov_mean[t + 1]) / var_plus
        rho_odd = 1.0 - (mean_var - acov_mean[t + 2]) / var_plus
        if rho_even + rho_odd >= 0:
            rho[t + 1] = rho_even
            rho[t + 2] = rho_odd
        t += 2
    max_t = t - 2
    if rho_even > 0:
        rho[max_t + 1] = rho_even
    t = 1
    while t <= max_t - 2:
        if rho[t + 1] + rho[t + 2] > rho[t - 1] + rho[t]:
            rho[t + 1] = (rho[t - 1] + rho[t]) / 2.0
            rho[t + 2] = rho[t + 1]
        t += 2
    size = n_chain * n_draw
    tau = -1.0 + 2.0 * np.sum(rho[:max_t + 1]) + np.sum(rho[max_t + 1:max_t + 2])
    tau = max(tau, 1.0 / math.log10(size))
    if np.isnan(rho).any():
        return math.nan
    return float(size / tau)


def _pair_bound(n_draw: int) -> int:
    """The pair index at which ``diagnostics._ess``'s loop stops for lack of draws."""
    j = 1
    while 2 * j - 1 < n_draw - 3:
        j += 1
    return j


def _ess(x: np.ndarray) -> np.ndarray:
    """Multi-chain ESS of each entry of ``x`` (P, chains, draws), as ``diagnostics._ess``."""
    p, n_chain, n_draw = x.shape
    out = np.empty(p)
    finite = np.isfinite(x).all(axis=(1, 2))
    for i in np.nonzero(~finite)[0]:              # NaN or inf draws: the reference code
        out[i] = _ess_one(x[i])
    with np.errstate(invalid="ignore"):           # inf - inf in the entries done above
        span = x.max(axis=(1, 2)) - x.min(axis=(1, 2))
    const = finite & (span < np.finfo(float).resolution)
    out[const] = float(n_chain * n_draw)
    todo = np.nonzero(finite & ~const)[0]
    if todo.size == 0:
        return out
    a = x[todo]
    acov = _autocov(a.reshape(-1, n_draw)).reshape(a.shape)     # every chain of every entry
    mean_var = np.mean(acov[:, :, 0], axis=1) * n_draw / (n_draw - 1.0)
    var_plus = mean_var * (n_draw - 1.0) / n_draw
    if n_chain > 1:
        var_plus = var_plus + np.var(a.mean(axis=2), axis=1, ddof=1)
    acov_mean = acov.mean(axis=1)
    rho = 1.0 - (mean_var[:, None] - acov_mean) / var_plus[:, None]       # rho[:, 0] unused
    bound = _pair_bound(n_draw)
    pairs = np.empty((todo.size, bound))
    pairs[:, 0] = 1.0 + rho[:, 1]
    pairs[:, 1:] = rho[:, 2:2 * bound:2] + rho[:, 3:2 * bound:2]
    stop = np.concatenate([~(pairs[:, :bound - 1] > 0.0), np.ones((todo.size, 1), bool)],
                          axis=1)
    last = np.argmax(stop, axis=1) + 1          # J: the first pair the loop does not compute
    rows = np.arange(todo.size)
    summed = np.cumsum(np.minimum.accumulate(pairs, axis=1), axis=1)
    pair_sum = np.where(last >= 2, summed[rows, np.maximum(last - 2, 0)], 0.0)
    even = rho[rows, 2 * last - 2]
    kept = (pairs[rows, last - 1] >= 0.0) | (even > 0.0)
    even = np.where(last == 1, 1.0, np.where(kept, even, 0.0))
    size = n_chain * n_draw
    tau = np.maximum(-1.0 + 2.0 * pair_sum + even, 1.0 / math.log10(size))
    ess = size / tau
    ess[np.isnan(rho[:, 1])] = np.nan
    out[todo] = ess
    return out


def _diagnose_chunk(x: np.ndarray, cheap: bool, tables: dict) -> dict[str, np.ndarray]:
    """Diagnostics of entries ``x`` (P, chains, draws), all free of NaN, draws >= 4."""
    p = x.shape[0]
    xs = _split(x)
    size = xs.shape[1] * xs.shape[2]
    if size not in tables:
        tables[size] = _z_table(size)
    zb, s, order = _z_scale(xs, tables[size])
    flat = x.reshape(p, -1)
    if x.shape[2] % 2 == 0:
        # the split chains hold every draw: the median and quantiles of the sorted draws are
        # those of the draws (same order statistics, same arithmetic; faster to select), and
        # the folded draws |s - median| of the sorted draws fall then rise, two runs that a
        # stable (merge) sort orders in linear time; ranks do not depend on the tie order
        med = np.median(s, axis=1)
        q = np.quantile(s, [0.05, 0.95], axis=1)
        fs = np.abs(s - med[:, None])
        perm = np.argsort(fs, axis=1, kind="stable")
        perm += (np.arange(p) * size)[:, None]
        zt = _z_sorted(np.take(fs, perm), np.take(order, perm), tables[size]).reshape(xs.shape)
    else:                                        # the middle draws are not in the split chains
        med = np.median(flat, axis=1)
        q = np.quantile(flat, [0.05, 0.95], axis=1)
        zt = _z_scale(_split(np.abs(x - med[:, None, None])), tables[size])[0]
    bulk, tail = _rhat_plain(zb), _rhat_plain(zt)
    both = _ess(_split(np.concatenate([x <= q[0][:, None, None], x <= q[1][:, None, None]])
                       .astype(float)))
    e05, e95 = both[:p], both[p:]
    out = {"ess_bulk": _ess(zb), "ess_tail": np.where(e95 < e05, e95, e05),
           "r_hat": np.where(tail > bulk, tail, bulk)}     # Python's min / max, NaN included
    if not cheap:
        with np.errstate(invalid="ignore", divide="ignore", over="ignore"):
            out["mcse_mean"] = np.sqrt(np.var(flat, axis=1, ddof=1) / _ess(xs))
            c2 = (x - flat.mean(axis=1)[:, None, None]) ** 2
            c2_flat = c2.reshape(p, -1)
            evar = c2_flat.mean(axis=1)
            varvar = ((c2_flat ** 2).mean(axis=1) - evar ** 2) / _ess(_split(c2))
            out["mcse_sd"] = np.sqrt(varvar / evar / 4)
    return out


def diagnose_many(x: np.ndarray, cheap: bool = False) -> dict[str, np.ndarray]:
    """Diagnostics of every entry of ``x``, shape (P, chains, draws), float64.

    Returns ``{"ess_bulk", "ess_tail", "r_hat"}`` (and ``"mcse_mean"``, ``"mcse_sd"`` unless
    ``cheap``), each an array of shape (P,), equal to rounding to :func:`diagnostics.diagnose` of
    each ``x[i]``. Entries with NaN draws, and all entries when draws < 4, give NaN.
    """
    p, n_chain, n_draw = x.shape
    keys = ["ess_bulk", "ess_tail", "r_hat"] + ([] if cheap else ["mcse_mean", "mcse_sd"])
    out = {k: np.full(p, np.nan) for k in keys}
    if n_draw < 4 or p == 0:
        return out
    valid = np.nonzero(~np.isnan(x).any(axis=(1, 2)))[0]
    step = max(1, _CHUNK_ELEMENTS // (n_chain * n_draw))
    tables: dict = {}
    for lo in range(0, valid.size, step):
        sel = valid[lo:lo + step]
        part = _diagnose_chunk(np.ascontiguousarray(x[sel]), cheap, tables)
        for k in keys:
            out[k][sel] = part[k]
    return out
