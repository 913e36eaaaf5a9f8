"""The scripts in examples/ run (short versions) and say something sensible."""

import importlib.util
from pathlib import Path

import numpy as np

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"


def _load(name):
    spec = importlib.util.spec_from_file_location(name, EXAMPLES / f"{name}.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_survey_proportion_example():
    out = _load("survey_proportion").main(quick=True)
    naive, exact = out["naive"], out["damcmc"]
    assert exact[2] - exact[1] > naive[2] - naive[1]   # noise-aware interval is wider


def test_regression_example():
    out = _load("regression_clamped_stats").main(quick=True)
    assert out["mean"].shape == (3,) and np.all(out["lo"] < out["hi"])


def test_compare_methods_example():
    table = _load("compare_methods").main(quick=True)
    exact_mean, lo, hi = table["exact (quadrature)"]
    # smoke check of the example's story; the exactness tests with MCSE tolerances are in
    # test_damcmc.py and test_gibbs_ss.py
    assert abs(table["damcmc"][0] - exact_mean) < 0.02
    naive = table["naive"]
    assert naive[2] - naive[1] < 0.5 * (hi - lo)
