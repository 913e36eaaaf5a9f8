"""``diagnostics.summarise`` (batched over entries, privpost._diagnostics_batch) against the
per-entry reference functions of privpost.diagnostics (themselves checked against ArviZ in
tests/test_diagnostics.py)."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

from privpost import diagnostics as dg

KINDS = ("iid", "ar", "anti", "ties", "binary", "const", "nan", "inf", "fold-const", "huge")
# short chains (many entries of 8-13 draws) reach every branch of Geyer's truncation: the
# sequence running to the last lag, a last pair kept with a negative even term, rho_1 <= -1
SHAPES = ((4, 400, 3), (1, 60, 2), (2, 4, 3), (2, 5, 2), (3, 6, 2), (1, 7, 2), (4, 3, 2),
          (2, 9), (4, 101, 2, 2), (1, 4, 1), (1, 12, 30), (2, 13, 30), (3, 8, 30))


def _draws(rng, shape, kind):
    x = rng.standard_normal(shape)
    if kind in ("ar", "anti"):            # long positive / alternating autocorrelation
        rho = 0.95 if kind == "ar" else -0.9
        for t in range(1, shape[1]):
            x[:, t] += rho * x[:, t - 1]
    elif kind == "ties":
        x = rng.poisson(1.0, size=shape).astype(float)
    elif kind == "binary":
        x = (x > 1.5).astype(float)
    elif kind == "huge":                 # squares overflow: NaN autocovariances
        x *= 1e200
    flat = x.reshape(shape[0], shape[1], -1)
    if kind == "const":
        flat[..., 0] = 3.0
    elif kind == "nan":
        flat[0, 0, 0] = np.nan
    elif kind == "inf":
        flat[0, -1, -1] = np.inf
    elif kind == "fold-const":           # |x - median| constant: tail R-hat NaN, bulk finite
        flat[..., 0] = np.where(rng.random(flat.shape[:2]) < 0.5, -1.0, 1.0)
    return x


def _reference(draws, cheap):
    out = {}
    for label, a in dg._entries(draws):
        out[label] = ({"ess_bulk": dg.ess_bulk(a), "ess_tail": dg.ess_tail(a), "r_hat": dg.rhat(a)}
                      if cheap else dg.diagnose(a))
    return out


def _max_rel_diff(ref, new):
    assert list(ref) == list(new)
    worst = 0.0
    for label in ref:
        assert list(ref[label]) == list(new[label]), label
        for key, a in ref[label].items():
            b = new[label][key]
            assert isinstance(b, float)
            if a != a or b != b:
                assert a != a and b != b, (label, key, a, b)     # NaN exactly where it was
            elif a != b:
                worst = max(worst, abs(a - b) / max(abs(a), 1e-300))
    return worst


@pytest.mark.parametrize("cheap", [True, False])
def test_batched_summary_equals_per_entry_functions(cheap):
    rng = np.random.default_rng(0)
    for shape in SHAPES:
        for kind in KINDS:
            x = _draws(rng, shape, kind)
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", RuntimeWarning)
                draws = {"a": x, "b": 2.0 * x[..., :1] - 1.0}     # two parameters
                ref = _reference(draws, cheap)
                new = dg.summarise(draws, cheap=cheap)
            assert _max_rel_diff(ref, new) < 1e-12, (shape, kind)


def test_batched_summary_is_sensitive_to_the_data():
    """Wrong variant: the comparison above detects a one-draw difference (the middle draw that an
    odd number of draws drops), and a different rank normalisation of ties."""
    rng = np.random.default_rng(1)
    x = _draws(rng, (4, 301, 3), "ar")
    ref = _reference({"a": x}, cheap=False)
    shifted = dg.summarise({"a": x[:, 1:]}, cheap=False)
    assert _max_rel_diff(ref, shifted) > 1e-6
    ties = _draws(rng, (4, 200, 2), "ties")
    ref = _reference({"a": ties}, cheap=True)
    jitter = dg.summarise({"a": ties + 1e-9 * rng.standard_normal(ties.shape)}, cheap=True)
    assert _max_rel_diff(ref, jitter) > 1e-6     # ordinal ranks are not average ranks


def test_hmm_sized_posterior_in_chunks(monkeypatch):
    """Many entries split over several chunks (as a K = 10 HMM's 450 entries at 4 x 2000 draws
    are): the chunking changes nothing."""
    import privpost._diagnostics_batch as batch

    rng = np.random.default_rng(2)
    draws = {"pi": _draws(rng, (2, 80, 5), "ar"), "A": _draws(rng, (2, 80, 5, 5), "iid")}
    whole = dg.summarise(draws)
    monkeypatch.setattr(batch, "_CHUNK_ELEMENTS", 2 * 80 * 3)       # 3 entries a chunk
    assert _max_rel_diff(whole, dg.summarise(draws)) == 0.0
    assert _max_rel_diff(_reference(draws, cheap=False), whole) < 1e-12


def test_fft_length_is_scipys_next_fast_len_and_pads_enough():
    """The autocovariances' FFT length (_fast_len) is SciPy's next 5-smooth length, and it
    pads enough: ESS with it equals ESS with the old power-of-two padding to rounding."""
    from scipy.fft import next_fast_len

    from privpost._diagnostics_batch import _autocov, _fast_len

    assert all(_fast_len(t) == next_fast_len(t, real=True) for t in range(1, 5000))
    rng = np.random.default_rng(4)
    a = np.cumsum(rng.standard_normal((3, 2500)), axis=1)       # strongly autocorrelated
    c = a - a.mean(axis=1, keepdims=True)
    f = np.fft.rfft(c, n=8192, axis=1)
    ref = np.fft.irfft(f * np.conjugate(f), n=8192, axis=1)[:, :2500] / 2500
    np.testing.assert_allclose(_autocov(a), ref, rtol=1e-9, atol=1e-9 * ref[:, :1].max())
    # too short a padding (m = n) wraps around: the wrong variant differs
    f = np.fft.rfft(c, n=2500, axis=1)
    wrapped = np.fft.irfft(f * np.conjugate(f), n=2500, axis=1) / 2500
    assert np.max(np.abs(wrapped - ref)) > 1e-3 * ref[:, :1].max()
