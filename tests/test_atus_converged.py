"""The ATUS study's converged-chain settings (EXPERIMENTS.md §8.4): the registry's ``--full`` is
the study driver's STUDY, the DP chains take its damcmc options, and every unit records the
chains' R-hat and ESS (for DPABCp5: those of its p5 chains on D1)."""

from pathlib import Path

import numpy as np

from privpost.experiments import guo2023_atus as atus
from privpost.experiments.reproduce import REPRODUCTIONS, _Ctx

DATA = Path(__file__).parent / "data" / "atus_small"


def test_full_size_is_the_study_and_runs_until_converged():
    full = REPRODUCTIONS["guo2023-atus"].sizes["full"]
    assert full == atus.STUDY
    opts = atus._dp_chain_options(full)
    assert opts["draws"] is None and opts["interweave"] == full["dp_interweave"] >= 1
    assert opts["max_seconds"] == full["dp_max_seconds"]
    # the first study's fixed draws stay reproducible
    assert atus._dp_chain_options(atus.STUDY_UNCONVERGED) == {"draws": 500}
    # the settings check tells a converged folder from an unconverged one
    want = {k: full.get(k) for k in atus._UNIT_KEYS}
    old = {k: atus.STUDY_UNCONVERGED.get(k) for k in atus._UNIT_KEYS}
    assert want != old


def test_units_record_chain_diagnostics(tmp_path, monkeypatch):
    monkeypatch.setenv("PRIVPOST_ATUS_DIR", str(DATA))
    s = {"epsilon": 0.5, "eps_scan": (1.0,), "scan_shares": (0.25,), "runs": 1, "draws": 30,
         "warmup": 30, "dp_warmup": 30, "chains": 2, "boot_draws": 40, "abc_draws": 20,
         "prior_draws": 40, "scan_runs": 1, "dp_draws": 40, "dp_interweave": 1}
    ctx = _Ctx("guo2023-atus", "quick", s, tmp_path, 1, {"progress": False})
    atus.compute_atus(ctx, methods=("DPMCMCp1", "DPABCp5"), scan=False)
    for k in ("DPMCMCp1", "DPABCp5"):
        u = atus._load(tmp_path / "runs" / k / "r0000.json")
        for g in ("F", "M"):
            d = u["chains"][g]
            assert np.isfinite(d["r_hat"]) and d["r_hat"] > 0.9 and d["ess"] > 0
        if k == "DPMCMCp1":
            assert u["chains"]["F"]["draws_per_chain"] == 40
    md = atus.atus_report(ctx, methods=("DPMCMCp1", "DPABCp5")).markdown
    assert "runs with R-hat <= 1.01 and ESS >= 400 in both groups" in md


def test_dpremcmc_units_take_the_chain_options_when_until(tmp_path, monkeypatch):
    """STUDY runs DPreMCMCp4 like DPMCMCp1 (until converged, issue 22 item 3); the unit's
    chains then have the DP chains' length, not the fixed ``draws``."""
    assert atus.STUDY["remcmc_until"] is True
    monkeypatch.setenv("PRIVPOST_ATUS_DIR", str(DATA))
    s = {"epsilon": 0.5, "eps_scan": (1.0,), "scan_shares": (0.25,), "runs": 1, "draws": 30,
         "warmup": 30, "dp_warmup": 30, "chains": 2, "boot_draws": 40, "abc_draws": 20,
         "prior_draws": 40, "scan_runs": 1, "dp_draws": 40, "dp_interweave": 1,
         "remcmc_until": True}
    ctx = _Ctx("guo2023-atus", "quick", s, tmp_path, 1, {"progress": False})
    atus.compute_atus(ctx, methods=("DPreMCMCp4",), scan=False)
    u = atus._load(tmp_path / "runs" / "DPreMCMCp4" / "r0000.json")
    assert u["chains"]["F"]["draws_per_chain"] == 40
