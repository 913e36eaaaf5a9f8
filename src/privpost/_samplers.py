"""Exact samplers for integer-valued noise (Canonne, Kamath & Steinke 2020, Algorithms 1-3).

Everything here works on Python integers and :class:`fractions.Fraction` only: no floating-point
arithmetic touches the random draw, so the output distribution is *exactly* the discrete Laplace
or discrete Gaussian distribution with the given rational parameter (no Mironov-2012 style
floating-point leakage). A float parameter is converted with ``Fraction(x)``, which is exact
(every finite float is a dyadic rational), so the sampler is exact for the float the mechanism
stores and its ``logpdf`` evaluates.

The only source of randomness is a *uniform integer* source with one method,
``randbelow(n) -> int`` uniform on ``{0, ..., n-1}``:

* :class:`SecureSource` draws from :class:`secrets.SystemRandom` (the operating system's
  CSPRNG) -- used for real releases (``seed=None``);
* :class:`NumpySource` draws from a :class:`numpy.random.Generator` -- reproducible, for
  simulation studies and tests (``seed=int`` or a ``Generator``).

The two paths run the same algorithms and differ only in the source of uniform integers.

Reference: C. L. Canonne, G. Kamath, T. Steinke, "The Discrete Gaussian for Differential
Privacy", NeurIPS 2020 (arXiv:2004.00010), Section 5.
"""

from __future__ import annotations

import math
import secrets
from fractions import Fraction

import numpy as np

__all__ = [
    "SecureSource",
    "NumpySource",
    "source_for",
    "bernoulli",
    "bernoulli_exp",
    "discrete_laplace",
    "discrete_gaussian",
    "sample_discrete_laplace",
    "sample_discrete_gaussian",
]



class _WordSource:
    """Uniform integers by rejection sampling on buffered 64-bit words (exactly uniform)."""

    _MAX_BLOCK = 1 << 14

    def __init__(self) -> None:
        self._words: list[int] = []
        self._block = 64

    def _fill(self, m: int) -> list[int]:  # pragma: no cover - abstract
        raise NotImplementedError

    def _word(self) -> int:
        if not self._words:
            self._words = self._fill(self._block)
            self._words.reverse()
            self._block = min(2 * self._block, self._MAX_BLOCK)
        return self._words.pop()

    def randbelow(self, n: int) -> int:
        """Uniform integer on ``{0, ..., n-1}`` (``n >= 1``)."""
        if n <= 1:
            if n == 1:
                return 0
            raise ValueError("randbelow needs n >= 1")
        k = (n - 1).bit_length()
        if k <= 64:
            shift = 64 - k
            while True:
                x = self._word() >> shift
                if x < n:
                    return x
        words = -(-k // 64)
        excess = 64 * words - k
        while True:
            x = 0
            for _ in range(words):
                x = (x << 64) | self._word()
            x >>= excess
            if x < n:
                return x


class SecureSource(_WordSource):
    """Uniform integers from the operating system's CSPRNG (:class:`secrets.SystemRandom`)."""

    def __init__(self) -> None:
        super().__init__()
        self._rng = secrets.SystemRandom()

    def _fill(self, m: int) -> list[int]:
        return np.frombuffer(self._rng.randbytes(8 * m), dtype="<u8").tolist()


class NumpySource(_WordSource):
    """Uniform integers from a :class:`numpy.random.Generator` (reproducible).

    Words are drawn in blocks with ``Generator.integers``; the generator is advanced by whole
    blocks, so a given seed always gives the same draws.
    """

    def __init__(self, rng: np.random.Generator) -> None:
        super().__init__()
        self._rng = rng

    def _fill(self, m: int) -> list[int]:
        return self._rng.integers(0, 1 << 64, size=m, dtype=np.uint64).tolist()


def source_for(seed):
    """The uniform-integer source for ``seed``: secure for ``None``, else a seeded NumPy one."""
    if seed is None:
        return SecureSource()
    from privpost._rng import as_generator

    return NumpySource(as_generator(seed))


def bernoulli(p: Fraction, src) -> bool:
    """Exact Bernoulli(``p``) draw for rational ``p`` in [0, 1]."""
    if p <= 0:
        return False
    if p >= 1:
        return True
    return src.randbelow(p.denominator) < p.numerator


def bernoulli_exp(gamma: Fraction, src) -> bool:
    """Exact Bernoulli(exp(-``gamma``)) draw for rational ``gamma >= 0`` (CKS 2020 Algorithm 1).

    For ``gamma`` in [0, 1]: draw A_k ~ Bernoulli(gamma / k) for k = 1, 2, ... until the first
    A_k = 0; return 1 iff that k is odd (P = sum_k (-1)^(k-1) ... = exp(-gamma)).
    For ``gamma > 1``: exp(-gamma) = exp(-1)^floor(gamma) * exp(-(gamma - floor(gamma))).
    """
    gamma = Fraction(gamma)
    if gamma < 0:
        raise ValueError("bernoulli_exp needs gamma >= 0")
    return _bexp(gamma.numerator, gamma.denominator, src)


def _bexp(num: int, den: int, src) -> bool:
    # Bernoulli(exp(-num/den)) on integers only; num >= 0, den >= 1.
    if num <= den:
        k = 1
        # A_k ~ Bernoulli(num / (den k)) <=> randbelow(den k) < num
        while src.randbelow(den * k) < num:
            k += 1
        return k % 2 == 1
    whole = num // den
    for _ in range(whole):
        if not _bexp1(src):
            return False
    return _bexp(num - whole * den, den, src)


def _bexp1(src) -> bool:
    # Bernoulli(exp(-1)): A_k ~ Bernoulli(1/k) until the first failure.
    k = 1
    while src.randbelow(k) == 0:
        k += 1
    return k % 2 == 1


def _dlap(t: int, s: int, src) -> int:
    # Discrete Laplace with scale t/s (t, s positive integers), CKS 2020 Algorithm 2.
    while True:
        u = src.randbelow(t)
        if not _bexp(u, t, src):
            continue
        v = 0
        while _bexp1(src):
            v += 1
        y = (u + t * v) // s
        negative = src.randbelow(2) == 1
        if negative and y == 0:
            continue
        return -y if negative else y


def discrete_laplace(scale: Fraction, src) -> int:
    """One exact draw from the discrete Laplace distribution, pmf ∝ exp(-|z| / scale) on Z.

    CKS 2020 Algorithm 2 with ``scale = t / s`` (t, s positive integers): U uniform on
    {0..t-1} accepted with probability exp(-U/t), V ~ Geometric(1 - exp(-1)), X = U + t V is then
    Geometric(1 - exp(-1/t)); Y = floor(X / s) is Geometric(1 - exp(-s/t)); a random sign with
    the (-, 0) case rejected gives the two-sided geometric.
    """
    scale = Fraction(scale)
    if scale <= 0:
        raise ValueError("discrete Laplace scale must be > 0")
    return _dlap(scale.numerator, scale.denominator, src)


def discrete_gaussian(sigma2: Fraction, src) -> int:
    """One exact draw from the discrete Gaussian, pmf ∝ exp(-z^2 / (2 sigma2)) on Z.

    CKS 2020 Algorithm 3: with t = floor(sigma) + 1, propose Y ~ discrete Laplace(t) and accept
    with probability exp(-(|Y| - sigma2/t)^2 / (2 sigma2)).  With sigma2 = p/q the exponent is
    the integer ratio (|Y| q t - p)^2 / (2 p q t^2).
    """
    sigma2 = Fraction(sigma2)
    if sigma2 <= 0:
        raise ValueError("discrete Gaussian sigma^2 must be > 0")
    p, q = sigma2.numerator, sigma2.denominator
    t = math.isqrt(p // q) + 1  # floor(sigma) + 1, exactly
    den = 2 * p * q * t * t
    qt = q * t
    while True:
        y = _dlap(t, 1, src)
        d = abs(y) * qt - p
        if _bexp(d * d, den, src):
            return y


def sample_discrete_laplace(scale: float, size: int, seed=None) -> np.ndarray:
    """``size`` exact discrete Laplace draws (``int64``), pmf ∝ exp(-|z| / scale).

    ``seed=None`` uses the OS CSPRNG; an int or Generator gives reproducible draws.
    """
    src = source_for(seed)
    s = Fraction(float(scale))
    return np.array([discrete_laplace(s, src) for _ in range(int(size))], dtype=np.int64)


def sample_discrete_gaussian(sigma: float, size: int, seed=None) -> np.ndarray:
    """``size`` exact discrete Gaussian draws (``int64``), pmf ∝ exp(-z^2 / (2 sigma^2)).

    ``sigma`` is the float the mechanism stores; sigma^2 is taken as ``Fraction(sigma)**2``
    exactly. ``seed=None`` uses the OS CSPRNG; an int or Generator gives reproducible draws.
    """
    src = source_for(seed)
    s2 = Fraction(float(sigma)) ** 2
    return np.array([discrete_gaussian(s2, src) for _ in range(int(size))], dtype=np.int64)
