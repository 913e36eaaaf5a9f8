"""Start-up cost of the CLI, guarded without timing: what each command imports (issue 13 item 4).

Each check runs in a fresh interpreter (a subprocess) and lists ``sys.modules`` afterwards. The
heavy libraries are SciPy (~0.5 s for ``scipy.special`` alone on the 2-core machine), Numba,
ArviZ, pandas and matplotlib; NumPy is also kept out of ``privpost --help``. A module-level import
of any of them added back on these paths makes the matching test fail (the wrong variants below
show that the detector sees such an import). Timings: benchmarks/README.md, "CLI start-up".
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

SRC = str(Path(__file__).resolve().parents[1] / "src")
HEAVY = ("scipy", "numba", "arviz", "pandas", "matplotlib", "llvmlite")


def _modules_after(code: str, timeout: float = 120.0) -> set[str]:
    """The module names in ``sys.modules`` after running ``code`` in a fresh interpreter."""
    script = code + "\nimport json as _j, sys as _s\nprint('@@' + _j.dumps(sorted(_s.modules)))\n"
    env = {**os.environ, "PYTHONPATH": SRC + os.pathsep + os.environ.get("PYTHONPATH", "")}
    res = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                         timeout=timeout, env=env)
    assert res.returncode == 0, res.stderr[-3000:]
    line = [ln for ln in res.stdout.splitlines() if ln.startswith("@@")][-1]
    return set(json.loads(line[2:]))


def _cli(*args: str) -> str:
    """Code running ``privpost ARGS`` in-process (as the console script does)."""
    return ("import sys\nsys.argv = ['privpost', *%r]\nfrom privpost.cli import app\n"
            "try:\n    app()\nexcept SystemExit as e:\n    assert e.code in (0, None), e.code\n"
            % (list(args),))


def _heavy(mods: set[str], roots=HEAVY) -> list[str]:
    return sorted(m for m in mods if m.split(".")[0] in roots)


@pytest.fixture(scope="module")
def regression_release(tmp_path_factory) -> Path:
    """The issue's example at a small size: 200 records, two covariates, regression_stats."""
    import privpost as pp
    from privpost.mechanisms import Laplace
    from privpost.queries import RegressionStats

    rng = np.random.default_rng(3)
    x = rng.normal(size=(200, 2))
    y = 0.5 + x @ np.array([1.0, -0.7]) + rng.normal(size=200)
    rel = pp.release(np.column_stack([x, y]),
                     query=RegressionStats(bounds_x=[(-4, 4), (-3, 5)], bounds_y=(-8, 8)),
                     mechanism=Laplace(epsilon=1.0), seed=3)
    return rel.save(tmp_path_factory.mktemp("startup") / "r.json")


def test_help_imports_neither_numpy_nor_scipy():
    mods = _modules_after(_cli("--help"))
    assert "privpost.cli" in mods
    assert _heavy(mods, HEAVY + ("numpy", "privpost.models")) == []
    assert not {"privpost.releases.release", "privpost.models", "privpost.inference",
                "privpost.experiments.reproduce"} & mods


def test_import_privpost_is_light_and_public_api_intact():
    code = ("import privpost as pp\nassert callable(pp.release) and callable(pp.infer)\n"
            "assert pp.models.LinearRegression.name == 'linear-regression'\n")
    mods = _modules_after("import privpost, privpost.cli")
    assert _heavy(mods, HEAVY + ("numpy",)) == []
    mods = _modules_after(code)
    assert "privpost.models.linear_regression" in mods
    assert "privpost.models.hmm" not in mods            # only the class asked for
    assert _heavy(mods, ("numba", "arviz", "pandas", "matplotlib")) == []


def test_inspect_imports_no_scipy(regression_release):
    mods = _modules_after(_cli("inspect", str(regression_release)))
    assert "privpost.releases.release" in mods
    assert _heavy(mods) == []


def test_naive_infer_imports_no_scipy_numba_arviz(regression_release):
    mods = _modules_after(_cli("infer", str(regression_release), "--model",
                               "linear-regression:p=2,sigma2=1", "--method", "naive",
                               "--seed", "1", "--no-progress"))
    assert "privpost.inference.naive" in mods
    assert _heavy(mods) == []
    assert "privpost.models.linear_regression" in mods
    others = sorted(m for m in mods if m.startswith("privpost.models.")
                    and m.split(".")[2] not in ("base", "spec", "linear_regression",
                                                "covariate_law"))   # the regression's laws
    assert others == []                                   # the other model modules stay unloaded


def test_wrong_variant_a_module_level_import_is_detected(regression_release, tmp_path):
    """The detector is not vacuous: the same check fails once a module on the path imports
    SciPy at module level (simulated with a sitecustomize that hooks privpost.mechanisms)."""
    hook = tmp_path / "sitecustomize.py"
    hook.write_text(
        "import importlib.abc, sys\n"
        "class _F(importlib.abc.MetaPathFinder):\n"
        "    def find_spec(self, name, path, target=None):\n"
        "        if name == 'privpost.mechanisms' and 'scipy.special' not in sys.modules:\n"
        "            import scipy.special  # what a re-added module-level import does\n"
        "        return None\n"
        "sys.meta_path.insert(0, _F())\n")
    old = os.environ.get("PYTHONPATH")
    os.environ["PYTHONPATH"] = str(tmp_path)
    try:
        mods = _modules_after(_cli("inspect", str(regression_release)))
    finally:
        if old is None:
            del os.environ["PYTHONPATH"]
        else:
            os.environ["PYTHONPATH"] = old
    assert "scipy.special" in _heavy(mods)
    assert "numpy" in _heavy(_modules_after("import privpost.cli, numpy"), ("numpy",))


def test_shadowed_names_stay_functions_whatever_is_imported_first():
    code = ("import privpost.experiments.reproduce, privpost.releases.release, sys\n"
            "import privpost as pp\n"
            "assert callable(pp.release) and not isinstance(pp.release, type(sys))\n"
            "assert callable(pp.experiments.reproduce)\n"
            "assert not isinstance(pp.experiments.reproduce, type(sys))\n"
            "assert hasattr(sys.modules['privpost.experiments.reproduce'], 'REPRODUCTIONS')\n"
            "assert 'ju2022-loglinear' in pp.experiments.REPRODUCTIONS\n")
    _modules_after(code)


def test_lazy_model_tables_match_the_registrations():
    """Every registered built-in model is in privpost.models' lazy tables (a new model module
    without an entry fails here), and a spec lookup imports only that model's module."""
    import importlib
    import pkgutil

    import privpost.models as M
    from privpost.models import base

    registry = M.MODELS                      # loads every built-in through the table
    for info in pkgutil.iter_modules(M.__path__):
        importlib.import_module(f"privpost.models.{info.name}")   # now every module
    for key, cls in base.MODELS.items():
        if cls.__module__.startswith("privpost.models."):
            assert base.BUILTIN_MODULES.get(key) == cls.__module__, (
                f"built-in model {key!r} ({cls.__module__}) is missing from "
                "privpost.models' BUILTIN_MODULES table")
            assert M._CLASSES.get(cls.__name__) == cls.__module__.rsplit(".", 1)[1], cls
    assert registry is base.MODELS
    for name in M.__all__:
        assert getattr(M, name) is not None
    mods = _modules_after("from privpost.models import model_from_spec\n"
                          "m = model_from_spec('poisson-gamma:shape=1,rate=1')\n")
    assert "privpost.models.poisson" in mods and "privpost.models.linear_regression" not in mods


def test_ndtri_matches_scipy_and_a_wrong_coefficient_fails(monkeypatch):
    from scipy import special

    import privpost._ndtri as nd

    rng = np.random.default_rng(0)
    p = np.concatenate([rng.random(20000), 10.0 ** -rng.uniform(0, 300, 2000),
                        1.0 - 10.0 ** -rng.uniform(0, 15, 2000), [0.0, 1.0, -1.0, 2.0, np.nan,
                                                                   0.5, 0.075, 0.925]])
    ref = special.ndtri(p)
    ours = nd.ndtri(p)
    assert np.array_equal(np.isnan(ours), np.isnan(ref))
    fin = np.isfinite(ref)
    assert np.array_equal(ours[~fin & ~np.isnan(ref)], ref[~fin & ~np.isnan(ref)])
    rel = np.abs(ours[fin] - ref[fin]) / np.maximum(np.abs(ref[fin]), 1e-300)
    assert rel.max() < 1e-14
    # wrong variant: one coefficient off in its 8th digit is seen
    bad = list(nd._C)
    bad[3] *= 1.0 + 1e-8
    monkeypatch.setattr(nd, "_C", tuple(bad))
    wrong = nd.ndtri(p)
    rel = np.abs(wrong[fin] - ref[fin]) / np.maximum(np.abs(ref[fin]), 1e-300)
    assert rel.max() > 1e-11



def test_damcmc_infer_initialises_numba_without_scipy_linalg(regression_release):
    """``privpost infer --method damcmc`` loads Numba's target (whose BLAS check imports
    ``scipy.linalg.cython_blas``) but not the rest of ``scipy.linalg`` (privpost.cli._blas_preload),
    nor SciPy's other subpackages, ArviZ or pandas. Wrong variant: without the preload, the same
    command imports ``scipy.linalg`` (so the check is not vacuous)."""
    args = ("infer", str(regression_release), "--model", "linear-regression:p=2,sigma2=1",
            "--draws", "20", "--warmup", "20", "--seed", "1", "--no-progress",
            "--option", "cores=1")
    mods = _modules_after(_cli(*args))
    assert "numba.np.arraymath" in mods and "privpost.inference.damcmc" in mods
    assert "scipy.linalg.cython_blas" in mods
    # (scipy._external: SciPy >= 1.18 vendors `packaging` there, imported by scipy itself)
    assert sorted(m for m in mods if m.startswith("scipy.") and m.split(".")[1] not in
                  ("_lib", "__config__", "_cyutility", "_distributor_init", "version",
                   "_external")) == ["scipy.linalg.cython_blas"]
    assert _heavy(mods, ("arviz", "pandas", "matplotlib", "xarray")) == []
    off = _modules_after("import privpost.cli._blas_preload as b\n"
                         "b.preload_cython_blas = lambda: False\n" + _cli(*args))
    assert "scipy.linalg" in off and "scipy.linalg._decomp" in off


def test_preloaded_cython_blas_still_serves_numba_linalg_and_scipy():
    """After the preload, a Numba function using BLAS compiles and gives NumPy's answer,
    and a later ``import scipy.linalg`` works with the same extension module."""
    code = (
        "import sys\nimport numpy as np\n"
        "from privpost.cli._blas_preload import preload_cython_blas\n"
        "assert preload_cython_blas() is True\n"
        "assert 'scipy.linalg' not in sys.modules\n"
        "assert preload_cython_blas() is False   # once only\n"
        "import numba\n"
        "@numba.njit\n"
        "def f(a, b):\n"
        "    return np.dot(a, b)     # BLAS gemv, through cython_blas' function pointers\n"
        "a = np.array([[4.0, 1.0], [1.0, 3.0]]); b = np.array([1.0, 2.0])\n"
        "assert np.allclose(f(a, b), a @ b)\n"
        "import scipy.linalg\n"
        "from scipy.linalg import cython_blas\n"
        "assert cython_blas is sys.modules['scipy.linalg.cython_blas']\n"
        "assert np.allclose(scipy.linalg.cholesky(a, lower=True), np.linalg.cholesky(a))\n")
    mods = _modules_after(code, timeout=300)
    assert "scipy.linalg._decomp" in mods      # the normal scipy.linalg, imported at the end
