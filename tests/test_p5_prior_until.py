"""Prior p5 (DPABC's D1 DPMCMCp1 posterior, seed 002) runs its chains until converged by default.

``build_prior(..., "p5")`` runs 4 damcmc chains on the D1 release with ``draws=None`` (split
R-hat <= 1.01, bulk/tail ESS >= 400) within ``P5_MAX_SECONDS`` / ``P5_MAX_DRAWS`` and takes
``prior_draws`` draws thinned evenly from the pooled chains; ``p5_options`` overrides (a fixed
``draws=`` runs as before); a budget that runs out still warns.
"""

import warnings

import numpy as np
import pytest

import privpost as pp
from privpost.releases.dpss import dpss_release, parse_dpss
from privpost.diagnostics import check
from privpost.errors import ConvergenceWarning
from privpost.inference import _dpss_fits
from privpost.inference import compositional as comp
from privpost.inference.compositional_priors import (P5_MAX_DRAWS, P5_MAX_SECONDS, build_prior,
                                                     thin_evenly)
from privpost.models import Dirichlet

from _tolerance import K_MCSE

PRIOR_DRAWS = 800


@pytest.fixture(scope="module")
def split_release():
    """n = 200 records, split 0.25 (n1 = 50): the D1 chains are cheap (about 2-4 s)."""
    x = np.random.default_rng(1).dirichlet([2.2, 3.3, 4.4], 200)
    return dpss_release(x, 0.5, 1.0, seed=2, split=0.25)


def _build(rel, monkeypatch, **kw):
    """build_prior p5, returning (spec, the damcmc posterior of the D1 chains, warnings)."""
    seen = {}
    real = comp.dpmcmc_posterior

    def spy(model, s1, **opts):
        seen["opts"] = dict(opts)
        seen["post"] = real(model, s1, **opts)
        return seen["post"]

    monkeypatch.setattr(_dpss_fits, "dpmcmc_posterior", spy)   # where compositional_priors finds it
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        spec = build_prior(Dirichlet(3), parse_dpss(rel), "p5", np.random.default_rng(3), **kw)
    return spec, seen, [w for w in caught if issubclass(w.category, ConvergenceWarning)]


@pytest.fixture(scope="module")
def default_p5(split_release):
    mp = pytest.MonkeyPatch()
    try:
        return _build(split_release, mp, prior_draws=PRIOR_DRAWS, p5_options={"cores": 1})
    finally:
        mp.undo()


# ------------------------------------------------------------------------------ thinning
def test_thin_evenly_spreads_over_every_chain():
    C, n = 4, 1000
    chains = (np.arange(C)[:, None] * n + np.arange(n)[None, :]).astype(float)[..., None]
    out = thin_evenly(chains, 2000).ravel().astype(int)
    assert out.shape == (2000,) and len(set(out)) == 2000
    chain, pos = out // n, out % n
    assert np.bincount(chain).tolist() == [500] * 4
    for c in range(C):                      # evenly spaced along each chain, start to end
        p = pos[chain == c]
        assert np.all(np.diff(p) == 2) and p[0] == 0 and p[-1] == n - 2
    # the wrong variant (the first 2000 pooled draws) misses chains 2 and 3
    assert np.bincount(np.arange(2000) // n, minlength=C).tolist() != [500] * 4
    # fewer draws in the chains than asked: all of them; an uneven size: still unique rows
    assert thin_evenly(chains, 5000).shape == (4000, 1)
    odd = thin_evenly(chains, 7).ravel().astype(int)
    assert len(set(odd)) == 7 and set(odd // n) == {0, 1, 2, 3}


# ------------------------------------------------------------------- default: until converged
def test_default_p5_chains_run_until_converged(default_p5):
    spec, seen, caught = default_p5
    opts, post = seen["opts"], seen["post"]
    assert opts["draws"] is None and opts["chains"] == 4 and opts["warmup"] == 500
    assert opts["max_seconds"] == P5_MAX_SECONDS and opts["max_draws"] == P5_MAX_DRAWS
    a = post.draws["alpha"]                                     # (4, n, 3)
    assert check({"alpha": a}) == []                            # R-hat <= 1.01, ESS >= 400
    assert spec.diagnostics["converged"] is True and post.converged
    assert spec.diagnostics["r_hat"] <= 1.01 and spec.diagnostics["ess"] >= 400
    assert not caught
    assert not any(n.startswith("NOT CONVERGED") for n in spec.notes)
    note = spec.notes[-1]
    assert (f"{PRIOR_DRAWS} DPMCMCp1 draws" in note and "thinned evenly" in note
            and "until converged" in note)
    # the wrong variant: the first 100 draws per chain of the same chains miss the thresholds
    # -- the check that passed above can fail
    assert check({"alpha": a[:, :100]})


def test_p5_sample_is_thinned_from_the_chains(default_p5):
    spec, seen, _ = default_p5
    a = seen["post"].draws["alpha"]
    C, n, D = a.shape
    s = spec.draws
    assert s.shape == (PRIOR_DRAWS, D) and C * n > PRIOR_DRAWS
    pooled = a.reshape(-1, D)
    idx = (np.arange(PRIOR_DRAWS) * (C * n)) // PRIOR_DRAWS
    np.testing.assert_array_equal(s, pooled[idx])              # exactly the stated rows
    # its mean and sd agree with the chains' within Monte Carlo error (MCSE from the chains' ESS)
    from privpost.diagnostics import ess_bulk

    ess = np.array([ess_bulk(a[..., j]) for j in range(D)])
    m, sd = pooled.mean(0), pooled.std(0)

    def z_mean(sample):
        return np.abs(sample.mean(0) - m) / (sd * np.sqrt(2.0 / ess))

    assert np.all(z_mean(s) < K_MCSE), z_mean(s)
    assert np.all(np.abs(s.std(0) / sd - 1) < K_MCSE / np.sqrt(ess))
    # wrong variants: draws from the model's own prior p1, or alpha shifted by one sd, fail
    rng = np.random.default_rng(0)
    p1 = np.array([Dirichlet(3).prior_sample(rng)["alpha"] for _ in range(PRIOR_DRAWS)])
    assert np.any(z_mean(p1) >= K_MCSE)
    assert np.any(z_mean(s + sd) >= K_MCSE)


def test_dpabc_with_default_p5_does_not_warn(split_release):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        post = pp.infer(Dirichlet(3), split_release, method="dpabc", prior="p5", draws=100,
                        seed=1, prior_draws=PRIOR_DRAWS, p5_options={"cores": 1})
    assert not [w for w in caught if issubclass(w.category, ConvergenceWarning)]
    assert post.converged is True
    assert post.chain_stats["prior_r_hat"][0] <= 1.01
    assert post.chain_stats["prior_ess"][0] >= 400
    assert any("thinned evenly" in n and "until converged" in n for n in post.notes)


# ------------------------------------------------------------------------- budgets, overrides
def test_a_tiny_budget_still_warns(split_release, monkeypatch):
    spec, seen, caught = _build(split_release, monkeypatch, prior_draws=PRIOR_DRAWS,
                                p5_options={"max_draws": 30, "cores": 1})
    assert seen["opts"]["draws"] is None and seen["opts"]["max_draws"] == 30
    assert seen["post"].draws["alpha"].shape[:2] == (4, 30)
    assert caught and spec.diagnostics["converged"] is False
    assert spec.draws.shape == (120, 3)                         # fewer than asked: all of them
    bad = [n for n in spec.notes if n.startswith("NOT CONVERGED")]
    assert bad and "prior p5: damcmc on D1" in bad[0]
    assert "raise p5_options max_seconds / max_draws" in bad[0]
    # and through dpabc: the warning, converged=False (privpost infer --strict exits 3)
    with warnings.catch_warnings(record=True) as c2:
        warnings.simplefilter("always")
        post = pp.infer(Dirichlet(3), split_release, method="dpabc", prior="p5", draws=50,
                        seed=1, prior_draws=PRIOR_DRAWS, p5_options={"max_draws": 30, "cores": 1})
    assert [w for w in c2 if issubclass(w.category, ConvergenceWarning)]
    assert post.converged is False


def test_fixed_draws_p5_options_run_as_before(split_release, monkeypatch):
    spec, seen, caught = _build(split_release, monkeypatch, prior_draws=200,
                                p5_options={"draws": 20, "cores": 1})
    # the earlier fixed-run options: warm-up min(500, max(50, prior_draws // 4)), no budget
    assert seen["opts"] == {"draws": 20, "warmup": 50, "chains": 4, "progress": False,
                            "cores": 1, "seed": seen["opts"]["seed"]}
    s1 = parse_dpss(split_release).stat1

    def direct(warmup):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", ConvergenceWarning)
            return comp.dpmcmc_posterior(Dirichlet(3), s1, seed=np.random.default_rng(3),
                                         draws=20, warmup=warmup, chains=4, progress=False,
                                         cores=1).draws["alpha"]

    np.testing.assert_array_equal(spec.draws, direct(50).reshape(-1, 3))  # all 80 chain draws
    other = direct(500)
    assert not np.array_equal(spec.draws, other.reshape(-1, 3))        # wrong warm-up differs
    assert caught and spec.diagnostics["converged"] is False            # 20 draws: warns
    bad = [n for n in spec.notes if n.startswith("NOT CONVERGED")]
    assert bad and "p5_options={'draws': None} runs them until converged" in bad[0]
    assert "(fixed draws)" in spec.notes[-1]


def test_cli_p5_options_budget_and_strict(split_release, tmp_path):
    """``privpost infer --method dpabc --option prior=p5 --option p5_options=...`` (the --draws
    help's pointer): a tiny budget exits 3 under --strict; the same run without --strict is 0."""
    from typer.testing import CliRunner

    from privpost.cli import app

    path = split_release.save(tmp_path / "split.json")
    args = ["infer", str(path), "--model", "dirichlet:parts=3", "--method", "dpabc",
            "--draws", "50", "--seed", "3", "--option", "prior=p5", "--option",
            f"prior_draws={PRIOR_DRAWS}", "--option", 'p5_options={"max_draws": 30, "cores": 1}']
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        strict = CliRunner().invoke(app, args + ["--strict"])
        plain = CliRunner().invoke(app, args)
    assert strict.exit_code == 3, strict.output
    assert plain.exit_code == 0, plain.output
