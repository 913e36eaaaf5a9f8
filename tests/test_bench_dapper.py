"""benchmarks/bench_dapper.py: exits 0 with a message when R/dapper is absent (CI has no R); when
R and dapper are installed, bench_dapper.R accepts privpost's release and refuses a statistic
that differs from privpost's RegressionStats (wrong variant: two released entries swapped)."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

BENCH = Path(__file__).resolve().parents[1] / "benchmarks"


def _load():
    sys.path.insert(0, str(BENCH))
    spec = importlib.util.spec_from_file_location("bench_dapper", BENCH / "bench_dapper.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_without_rscript_exits_zero_and_reports_no_ratio(monkeypatch, capsys):
    mod = _load()
    monkeypatch.setattr(mod.shutil, "which", lambda name: None)
    assert mod.main([]) == 0
    out = capsys.readouterr().out
    assert "not run: Rscript is not on PATH" in out
    assert "privpost default / dapper" not in out


def _run_r(mod, inp: Path, tmp: Path):
    return subprocess.run(["Rscript", str(mod.R_SCRIPT), str(inp), str(tmp / "o.csv"), "3", "1",
                           "1", "1", str(tmp / "d.csv")],
                          capture_output=True, text=True, timeout=300)


def test_r_script_checks_the_statistic(tmp_path):
    mod = _load()
    missing = mod.r_available()
    if missing is not None:
        pytest.skip(missing)
    model, rel = mod.make_problem(100)
    inp = tmp_path / "release.csv"
    mod.export(model, rel, inp)
    ok = _run_r(mod, inp, tmp_path)
    assert ok.returncode == 0, ok.stderr[-2000:]
    draws = np.loadtxt(tmp_path / "d.csv", delimiter=",", skiprows=1)
    assert draws.shape == (2, 4)            # 3 iterations - 1 warm-up, chain + 3 coefficients
    # wrong variant: privpost's statistic with XtY[1] and XtY[2] swapped must be refused
    lines = inp.read_text().splitlines()
    idx = [i for i, ln in enumerate(lines) if ln.startswith("probe_stat,")]
    lines[idx[1]], lines[idx[2]] = lines[idx[2]], lines[idx[1]]
    inp.write_text("\n".join(lines) + "\n")
    bad = _run_r(mod, inp, tmp_path)
    assert bad.returncode != 0
    assert "statistic differs from privpost's RegressionStats" in bad.stderr
