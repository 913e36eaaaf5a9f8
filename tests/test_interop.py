"""privpost.releases.interop: releases made by the real OpenDP, PipelineDP and diffprivlib, imported.

Every release here is made by the library itself in the test (no hand-written metadata). The
checks: the imported noise scale is the one the library states (OpenDP's summary table,
PipelineDP's ``<metric>_noise_stddev``, diffprivlib's ``variance()``), the imported privacy
loss equals the library's own statement (OpenDP's privacy map, PipelineDP's accountant,
diffprivlib's ε), wrong bounds and unsupported mechanisms are refused with a PrivpostError, and
the noise-aware posterior of an OpenDP release matches the exact posterior computed by
quadrature from the library's stated noise law (tolerance from Monte Carlo error), where the
noise-ignoring posterior fails the same check. Each library's tests are skipped only if that
library is not installed (``pip install 'privpost[interop]'``; ``make test`` installs it).
"""

from __future__ import annotations

import functools
import math
import os
import subprocess
import sys

import numpy as np
import pytest
from scipy import special, stats

from privpost.errors import PrivpostError

from _tolerance import K_MCSE

SEED = int(os.environ.get("PRIVPOST_TEST_SEED_OFFSET", "0"))


def _ess(x) -> float:
    import arviz as az

    return float(az.ess(np.atleast_2d(np.asarray(x, dtype=float)), method="mean"))


# ============================================================================================
# OpenDP (Polars)
# ============================================================================================

def _opendp_release(loss: tuple, unit="contributions", n=200, seed=0, y=True):
    """(measurement, released frame, summary) of a real OpenDP Polars release; ``loss`` is
    ``("epsilon", 1.0)`` or ``("rho", 0.5)``. Cached: an OpenDP Polars release takes seconds."""
    pytest.importorskip("opendp.prelude")
    pytest.importorskip("polars")
    return _opendp_release_cached(loss, unit, n, seed, y)


@functools.lru_cache(maxsize=8)
def _opendp_release_cached(loss, unit, n, seed, y):
    import opendp.prelude as dp
    import polars as pl

    dp.enable_features("contrib")
    loss = dp.loss_of(**{loss[0]: loss[1]})
    rng = np.random.default_rng(seed)
    frame = {"x": rng.integers(0, 2, n).astype(np.int64)}
    if y:
        frame["y"] = rng.uniform(0, 10, n)
    df = pl.LazyFrame(frame)
    margin = (dp.polars.Margin(max_length=10 * n, invariant="lengths") if unit == "changes"
              else dp.polars.Margin(max_length=10 * n))
    ctx = dp.Context.compositor(data=df, privacy_unit=dp.unit_of(**{unit: 1}),
                                privacy_loss=loss, split_evenly_over=1, margins=[margin])
    exprs = [pl.col("x").fill_null(0).dp.sum((0, 1))]
    if y:
        exprs.append(pl.col("y").fill_null(0.0).dp.sum((0.0, 10.0)))
    query = ctx.query().select(*exprs)
    return query.resolve(), query.release().collect(), query.summarize()


@pytest.mark.parametrize("kind", ["epsilon", "rho", "changes"])
def test_opendp_scale_and_privacy_are_the_library_statements(kind):
    dp = pytest.importorskip("opendp.prelude")
    from privpost.releases.interop import from_opendp

    loss = ("rho", 0.5) if kind == "rho" else ("epsilon", 1.0)
    unit = "changes" if kind == "changes" else "contributions"
    meas, released, summary = _opendp_release(loss, unit)
    rs = from_opendp(meas, released, n=200, bounds={"x": (0, 1), "y": (0, 10)})
    stated = summary.to_dicts()
    for rel, row in zip(rs.releases, stated):
        assert rel.mechanism.scale == row["scale"]                       # the library's scale
        assert rel.observed[0] == released[row["column"]][0]
        assert rel.neighbours == ("replace" if kind == "changes" else "add-remove")
    x, y = rs.releases
    assert x.mechanism.name == ("discrete_gaussian" if kind == "rho" else "discrete_laplace")
    assert y.mechanism.name == ("gaussian" if kind == "rho" else "laplace")
    total = rs.total_privacy()
    lib = meas.map(1)
    ours = total.rho if kind == "rho" else total.epsilon
    assert ours <= lib * (1 + 1e-12) and lib <= ours * (1 + 1e-6)       # OpenDP's map


def test_opendp_refuses_wrong_or_missing_bounds_and_other_aggregates():
    dp = pytest.importorskip("opendp.prelude")
    pl = pytest.importorskip("polars")
    from privpost.releases.interop import from_opendp

    meas, released, _ = _opendp_release(("epsilon", 1.0))
    with pytest.raises(PrivpostError, match="bounds"):          # Δ 5 instead of OpenDP's 10
        from_opendp(meas, released, n=200, bounds={"x": (0, 1), "y": (0, 5)})
    with pytest.raises(PrivpostError, match=r"bounds\['y'\]: missing"):
        from_opendp(meas, released, n=200, bounds={"x": (0, 1)})
    with pytest.raises(PrivpostError, match="columns"):
        from_opendp(meas, released, n=200, bounds={"x": (0, 1), "y": (0, 10)}, columns=["z"])
    one = from_opendp(meas, released, n=200, bounds={"x": (0, 1), "y": (0, 10)}, columns=["x"])
    assert one.query.columns == ("x",) and one.mechanism.name == "discrete_laplace"
    with pytest.raises(PrivpostError, match="bounds"):   # checked on all columns even so
        from_opendp(meas, released, n=200, bounds={"x": (0, 1), "y": (0, 5)}, columns=["x"])
    with pytest.raises(PrivpostError, match="n:"):
        from_opendp(meas, released, n=0, bounds={"x": (0, 1), "y": (0, 10)})
    with pytest.raises(PrivpostError, match="d_in"):
        from_opendp(meas, released, n=200, bounds={"x": (0, 1), "y": (0, 10)}, d_in=2)
    with pytest.raises(PrivpostError, match="measurement"):
        from_opendp("not a measurement", released, n=200, bounds={})
    # a noisy frame length (n itself private) and a mean are refused
    df = pl.LazyFrame({"x": np.arange(50, dtype=np.int64) % 2})
    ctx = dp.Context.compositor(data=df, privacy_unit=dp.unit_of(contributions=1),
                                privacy_loss=dp.loss_of(epsilon=1.0), split_evenly_over=1,
                                margins=[dp.polars.Margin(max_length=100)])
    q = ctx.query().select(pl.len().dp.noise())
    with pytest.raises(PrivpostError, match="aggregate 'Frame Length'"):
        from_opendp(q.resolve(), q.release().collect(), n=50)


def test_opendp_posterior_matches_exact_quadrature_and_ignoring_noise_fails():
    """An OpenDP integer sum of n Bernoulli(θ) records with Integer Laplace noise, imported and
    run through damcmc: the posterior of θ (Beta(1, 1) prior) must match the exact posterior,
    computed here by quadrature from the library's *stated* law and scale (pmf of OpenDP's
    integer Laplace: (1 − e^{−1/t})/(1 + e^{−1/t}) e^{−|z|/t}), not from privpost's code. The
    noise-ignoring Beta(1 + s, 1 + n − s) posterior must fail the same check (its sd)."""
    dp = pytest.importorskip("opendp.prelude")
    import privpost as pp
    from privpost.releases.interop import from_opendp

    n = 150
    meas, released, summary = _opendp_release(("epsilon", 0.2), n=n, seed=SEED, y=False)
    t = summary.to_dicts()[0]["scale"]
    assert t == 5.0                                    # Δ = 1, ε = 0.2
    rel = from_opendp(meas, released, n=n, bounds={"x": (0, 1)})
    s = int(released["x"][0])
    # exact posterior on a grid (the likelihood sums over the true count k = 0..n)
    theta = np.linspace(1e-6, 1 - 1e-6, 4001)
    k = np.arange(n + 1)
    log_noise = (math.log1p(-math.exp(-1 / t)) - math.log1p(math.exp(-1 / t))
                 - np.abs(s - k) / t)
    log_binom = stats.binom.logpmf(k[None, :], n, theta[:, None])
    logpost = special.logsumexp(log_binom + log_noise[None, :], axis=1)
    w = np.exp(logpost - logpost.max())
    w /= w.sum()
    mean = float(np.sum(w * theta))
    sd = float(np.sqrt(np.sum(w * (theta - mean) ** 2)))
    cdf = np.cumsum(w)
    q05, q95 = (float(np.interp(q, cdf, theta)) for q in (0.05, 0.95))

    post = pp.infer(pp.models.BetaBernoulli(a=1, b=1), rel, method="damcmc", draws=1500,
                    warmup=500, chains=2, seed=SEED + 11, progress=False)
    draws = np.asarray(post.draws["theta"]).reshape(2, -1)
    ess = _ess(draws)
    z_mean = (draws.mean() - mean) / (draws.std() / math.sqrt(ess))
    y = (draws - draws.mean()) ** 2
    se_sd = y.std() / math.sqrt(_ess(y)) / (2 * sd)
    z_sd = (draws.std() - sd) / se_sd
    z_q = [(np.mean(draws <= xi) - q) / math.sqrt(q * (1 - q) / _ess((draws <= xi) * 1.0))
           for q, xi in ((0.05, q05), (0.95, q95))]
    assert max(abs(z_mean), abs(z_sd), *map(abs, z_q)) < K_MCSE, (z_mean, z_sd, z_q)
    # wrong variant: the posterior that ignores the noise is far too narrow
    naive_sd = stats.beta(1 + s, 1 + n - s).std()
    assert abs((draws.std() - naive_sd) / se_sd) > 2 * K_MCSE
    # and the truth of the simulation lies in the exact posterior's central 99.9999 %
    truth = float(np.mean(np.random.default_rng(SEED).integers(0, 2, n)))   # the data's mean
    lo, hi = (float(np.interp(q, cdf, theta)) for q in (5e-7, 1 - 5e-7))
    assert lo < truth < hi


# ============================================================================================
# PipelineDP
# ============================================================================================

def _pipelinedp_count(kind_name: str, metrics=("COUNT",), parts=(0, 1, 2), stddev=True,
                      public=True):
    pdp = pytest.importorskip("pipeline_dp")
    rng = np.random.default_rng(1)
    rows = [(i, int(rng.integers(0, len(parts))), float(rng.uniform(0, 5))) for i in range(300)]
    acc = pdp.NaiveBudgetAccountant(total_epsilon=1.0, total_delta=1e-6)
    engine = pdp.DPEngine(acc, pdp.LocalBackend())
    params = pdp.AggregateParams(metrics=[getattr(pdp.Metrics, m) for m in metrics],
                                 noise_kind=getattr(pdp.NoiseKind, kind_name),
                                 max_partitions_contributed=1, max_contributions_per_partition=1,
                                 min_value=0.0, max_value=5.0, output_noise_stddev=stddev)
    ext = pdp.DataExtractors(privacy_id_extractor=lambda r: r[0],
                             partition_extractor=lambda r: r[1], value_extractor=lambda r: r[2])
    result = engine.aggregate(rows, params, ext,
                              public_partitions=list(parts) if public else None)
    acc.compute_budgets()
    return list(result), params, acc, rows


@pytest.mark.parametrize("kind", ["LAPLACE", "GAUSSIAN"])
def test_pipelinedp_count_histogram_scale_and_epsilon(kind):
    from privpost.releases.interop import from_pipelinedp

    result, params, acc, rows = _pipelinedp_count(kind)
    rel = from_pipelinedp(result, params, partitions=[0, 1, 2], n=300, accountant=acc)
    sd = dict(result)[0].count_noise_stddev
    assert rel.query.name == "histogram" and rel.query.levels == ("0", "1", "2")
    assert list(rel.observed) == [dict(result)[p].count for p in (0, 1, 2)]
    assert rel.neighbours == "add-remove"
    if kind == "LAPLACE":                                  # Laplace sd = √2 b
        assert rel.mechanism.scale == pytest.approx(sd / math.sqrt(2), rel=1e-15)
        assert rel.privacy.epsilon == pytest.approx(1.0, rel=1e-12)   # the accountant's ε
    else:
        assert rel.mechanism.scale == sd
        assert rel.privacy.delta == 1e-6
        assert 0.99 < rel.privacy.epsilon <= 1.0 * (1 + 1e-12)


def test_pipelinedp_sum_and_refusals():
    from privpost.releases.interop import from_pipelinedp

    result, params, acc, rows = _pipelinedp_count("LAPLACE", metrics=("SUM",), parts=(0,))
    rel = from_pipelinedp(result, params, partitions=[0], n=300, metric="sum", accountant=acc)
    assert rel.query.bounds == (0.0, 5.0)
    assert rel.mechanism.sensitivity == 5.0 and rel.privacy.epsilon == pytest.approx(1.0)
    # no stated stddev, private partition selection, contribution limits above one
    result, params, acc, _ = _pipelinedp_count("LAPLACE", stddev=False)
    with pytest.raises(PrivpostError, match="noise_stddev"):
        from_pipelinedp(result, params, partitions=[0, 1, 2], n=300)
    result, params, acc, _ = _pipelinedp_count("LAPLACE")
    with pytest.raises(PrivpostError, match="partitions"):
        from_pipelinedp(result, params, partitions=[0, 1], n=300)
    params.max_partitions_contributed = 2
    with pytest.raises(PrivpostError, match="max_partitions_contributed"):
        from_pipelinedp(result, params, partitions=[0, 1, 2], n=300)
    result, params, acc, _ = _pipelinedp_count("GAUSSIAN")
    with pytest.raises(PrivpostError, match="accountant"):
        from_pipelinedp(result, params, partitions=[0, 1, 2], n=300)


# ============================================================================================
# diffprivlib
# ============================================================================================

def test_diffprivlib_mechanisms_scale_and_privacy():
    dm = pytest.importorskip("diffprivlib.mechanisms")
    from privpost.releases.interop import from_diffprivlib
    from privpost.queries import Sum

    count = Sum(bounds=(0, 1))
    icount = Sum(bounds=(0, 1), integer=True)
    m = dm.Laplace(epsilon=0.7, sensitivity=1.0)
    rel = from_diffprivlib(m, m.randomise(40.0), query=count, n=100)
    assert 2 * rel.mechanism.scale ** 2 == pytest.approx(m.variance(0), rel=1e-14)
    assert rel.privacy.epsilon == pytest.approx(0.7, rel=1e-12)
    m = dm.Laplace(epsilon=0.7, delta=0.01, sensitivity=1.0)     # its b = Δ/(ε − log(1 − δ))
    rel = from_diffprivlib(m, m.randomise(40.0), query=count, n=100)
    assert 2 * rel.mechanism.scale ** 2 == pytest.approx(m.variance(0), rel=1e-14)
    for cls in (dm.Gaussian, dm.GaussianAnalytic):
        m = cls(epsilon=0.5, delta=1e-5, sensitivity=1.0)
        rel = from_diffprivlib(m, m.randomise(40.0), query=count, n=100)
        assert rel.mechanism.scale ** 2 == pytest.approx(m.variance(0), rel=1e-14)
        assert rel.privacy.delta == 1e-5 and rel.privacy.epsilon <= 0.5 * (1 + 1e-9)
        if cls is dm.GaussianAnalytic:                  # the same (analytic) calibration
            assert rel.privacy.epsilon == pytest.approx(0.5, rel=1e-6)
    m = dm.Geometric(epsilon=0.5, sensitivity=1)
    rel = from_diffprivlib(m, m.randomise(40), query=icount, n=100)
    assert rel.mechanism.name == "discrete_laplace" and rel.privacy.epsilon == 0.5
    m = dm.GaussianDiscrete(epsilon=0.5, delta=1e-5, sensitivity=1)
    rel = from_diffprivlib(m, m.randomise(40), query=icount, n=100)
    assert rel.mechanism.name == "discrete_gaussian" and rel.mechanism.scale == m._scale


def test_diffprivlib_noise_law_matches_its_sampler():
    """The imported law is the one diffprivlib samples: 4000 draws of its Laplace (δ > 0) and
    Geometric mechanisms against privpost's CDF (Kolmogorov-Smirnov, and a chi-square on the
    integer pmf); a wrong scale (the δ ignored) fails the same test."""
    dm = pytest.importorskip("diffprivlib.mechanisms")
    from privpost.releases.interop import from_diffprivlib
    from privpost.queries import Sum

    m = dm.Laplace(epsilon=0.3, delta=0.2, sensitivity=1.0, random_state=SEED + 5)
    z = np.array([m.randomise(0.0) for _ in range(4000)])
    rel = from_diffprivlib(m, 0.0, query=Sum(bounds=(0, 1)), n=10)
    b = rel.mechanism.scale
    assert stats.kstest(z, stats.laplace(scale=b).cdf).pvalue > 1e-4
    assert stats.kstest(z, stats.laplace(scale=1 / 0.3).cdf).pvalue < 1e-4   # δ ignored
    g = dm.Geometric(epsilon=0.8, sensitivity=1, random_state=SEED + 6)
    k = np.array([g.randomise(0) for _ in range(4000)])
    rel = from_diffprivlib(g, 0, query=Sum(bounds=(0, 1), integer=True), n=10)
    support = np.arange(-8, 9)
    pmf = np.exp(rel.mechanism.logpdf(support[:, None], np.zeros((support.size, 1))))
    observed = np.array([np.sum(k == j) for j in support])
    expected = 4000 * pmf
    inside = np.sum((observed - expected) ** 2 / expected)
    assert stats.chi2(support.size - 1).sf(inside) > 1e-4


def test_diffprivlib_refusals():
    dm = pytest.importorskip("diffprivlib.mechanisms")
    from privpost.releases.interop import from_diffprivlib
    from privpost.queries import Sum

    m = dm.LaplaceTruncated(epsilon=1.0, sensitivity=1.0, lower=0, upper=100)
    with pytest.raises(PrivpostError, match="LaplaceTruncated"):
        from_diffprivlib(m, 3.0, query=Sum(bounds=(0, 1)), n=10)
    m = dm.Laplace(epsilon=1.0, sensitivity=1.0)
    with pytest.raises(PrivpostError, match="sensitivity"):   # a sum of [0, 5] has Δ = 5
        from_diffprivlib(m, 3.0, query=Sum(bounds=(0, 5)), n=10)
    with pytest.raises(PrivpostError, match="query"):
        from_diffprivlib(m, 3.0, query="count", n=10)
    m = dm.Geometric(epsilon=1.0, sensitivity=1)
    with pytest.raises(PrivpostError, match="integer"):
        from_diffprivlib(m, 3, query=Sum(bounds=(0, 1)), n=10)


def test_import_privpost_loads_none_of_the_libraries():
    code = ("import sys, privpost; privpost.interop; privpost.census; "
            "bad = [m for m in ('opendp', 'polars', 'pipeline_dp', 'diffprivlib', 'pydp') "
            "if m in sys.modules]; print(bad)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[]"
