"""The Posterior's ArviZ 1.x export (``to_datatree`` / ``to_arviz``) and its netCDF file.

``Posterior.to_netcdf`` writes ``Posterior.groups()`` through h5netcdf alone (privpost._netcdf),
without xarray; these tests hold that file to what xarray itself reads back and writes, and the
DataTree to ArviZ's own conventions (``arviz_base.from_dict``).
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import privpost as pp
from privpost.errors import PrivpostError
from privpost.posterior import Posterior
from privpost.predictive import PredictiveCheck

xr = pytest.importorskip("xarray")

SRC = str(Path(__file__).resolve().parents[1] / "src")


def _posterior(with_predictive: bool = True) -> Posterior:
    """Every kind of group and dtype a Posterior writes: scalar, vector and matrix parameters;
    float, integer and boolean per-draw statistics; per-chain statistics; text coordinates."""
    rng = np.random.default_rng(0)
    post = Posterior(
        draws={"theta": rng.normal(size=(2, 30)), "beta": rng.normal(size=(2, 30, 3, 2))},
        sample_stats={"accept_rate": rng.random((2, 30)), "moved": rng.random((2, 30)) < 0.5,
                      "steps": rng.integers(0, 9, (2, 30))},
        chain_stats={"record_accept": rng.random((2, 7)), "min_accept": rng.random(2)},
        method="damcmc", model={"name": "m", "a": 1.5}, release={"n": 3},
        notes=["a note with ü and \"quotes\""], exact=False, converged=True)
    if with_predictive:
        post._predictive = PredictiveCheck(rng.normal(size=(2, 10, 3)), np.array([1.0, 2, 3]),
                                           ["sum(x)", "count", "ä"])
    return post


def test_netcdf_file_reads_back_identical_to_the_datatree(tmp_path):
    post = _posterior()
    tree = post.to_datatree()
    assert set(tree.children) == {"posterior", "sample_stats", "chain_stats",
                                  "posterior_predictive", "observed_data"}
    path = post.to_netcdf(tmp_path / "p.nc")
    with xr.open_datatree(path, engine="h5netcdf") as back:
        xr.testing.assert_identical(back, tree)          # values, dims, coords, attrs, names
        for group in tree.children:                      # and dtypes (bool, int64, text)
            for name, var in tree[group].dataset.variables.items():
                assert back[group].dataset[name].dtype == var.dtype, (group, name)
    # the same as xarray's own writer reads back
    tree.to_netcdf(tmp_path / "x.nc", engine="h5netcdf")
    with xr.open_datatree(tmp_path / "x.nc", engine="h5netcdf") as theirs, \
            xr.open_datatree(path, engine="h5netcdf") as ours:
        xr.testing.assert_identical(ours, theirs)
    # wrong variant: the comparison sees a changed attribute and a changed dtype
    post.notes.append("another")
    with xr.open_datatree(path, engine="h5netcdf") as back, pytest.raises(AssertionError):
        xr.testing.assert_identical(back, post.to_datatree())
    post.notes.pop()
    post.sample_stats["moved"] = post.sample_stats["moved"].astype(np.int8)
    post.to_netcdf(path)
    with xr.open_datatree(path, engine="h5netcdf") as back:
        assert back["sample_stats"]["moved"].dtype != tree["sample_stats"]["moved"].dtype


def test_datatree_follows_arviz_conventions_and_to_arviz_is_the_same():
    azb = pytest.importorskip("arviz_base")
    post = _posterior(with_predictive=False)
    tree = post.to_datatree()
    ref = azb.from_dict({"posterior": post.draws, "sample_stats": post.sample_stats})
    for group in ("posterior", "sample_stats"):
        xr.testing.assert_identical(tree[group].dataset.drop_attrs(),
                                    ref[group].dataset.drop_attrs())
    assert tree["posterior"].attrs["privpost_method"] == "damcmc"
    assert tree["posterior"].attrs["privpost_exact"] == 0
    xr.testing.assert_identical(post.to_arviz(), tree)
    # what code written for InferenceData does still works
    idata = post.to_arviz()
    assert "accept_rate" in idata.sample_stats
    assert idata.posterior["beta"].dims == ("chain", "draw", "beta_dim_0", "beta_dim_1")


def test_arviz_reads_the_file_and_from_netcdf_round_trips(tmp_path):
    az = pytest.importorskip("arviz")
    post = _posterior()
    path = post.to_netcdf(tmp_path / "p.nc")
    tree = az.from_netcdf(path)
    assert {"posterior", "posterior_predictive", "observed_data"} <= set(tree.children)
    table = az.summary(tree, var_names=["theta"], round_to="none")
    assert float(table.loc["theta", "mean"]) == pytest.approx(post.mean("theta"), rel=1e-12)
    back = Posterior.from_netcdf(path)
    for attr in ("method", "model", "release", "notes", "exact", "converged"):
        assert getattr(back, attr) == getattr(post, attr), attr
    for got, want in ((back.draws, post.draws), (back.sample_stats, post.sample_stats),
                      (back.chain_stats, post.chain_stats)):
        assert list(got) == list(want)
        for k in want:
            assert got[k].dtype == want[k].dtype and np.array_equal(got[k], want[k]), k


def test_unwritable_dtype_or_path_is_refused(tmp_path):
    post = Posterior(draws={"theta": np.zeros((1, 4))},
                     sample_stats={"label": np.array([[object()] * 4])})
    with pytest.raises(PrivpostError, match="sample_stats/label"):
        post.to_netcdf(tmp_path / "p.nc")
    assert not (tmp_path / "p.nc").exists()
    good = Posterior(draws={"theta": np.zeros((1, 4))})
    for bad in (tmp_path / "no-such-folder" / "p.nc", tmp_path):
        with pytest.raises(PrivpostError, match="cannot create the netCDF file"):
            good.to_netcdf(bad)


def test_cli_infer_writes_a_complete_file_and_imports_no_xarray_or_plotting(tmp_path):
    """``privpost infer ... -o p.nc`` through the console entry point (which leaves with
    ``os._exit`` once the file is closed) writes a file that reads back whole, and imports
    neither xarray, pandas, ArviZ nor matplotlib. Wrong variant: writing through
    ``to_datatree().to_netcdf`` imports xarray and pandas, and the check sees it."""
    rel = pp.declare(157.2, query=pp.queries.Sum(bounds=(0, 1)),
                     mechanism=pp.mechanisms.Laplace(scale=1.0), n=500)
    rel_path = rel.save(tmp_path / "r.json")
    out = tmp_path / "p.nc"

    def run(prelude: str) -> set[str]:
        code = (prelude + "import atexit, json, sys\n"
                "atexit.register(lambda: print('@@' + json.dumps(sorted(sys.modules))))\n"
                "sys.argv = ['privpost', 'infer', %r, '--model', 'beta-bernoulli:a=1,b=1', "
                "'--draws', '200', '--warmup', '100', '--seed', '1', '--no-progress', "
                "'-o', %r]\nfrom privpost.cli import main\nmain()\n" % (str(rel_path), str(out)))
        env = {**os.environ, "PYTHONPATH": SRC}
        res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                             timeout=300, env=env)
        assert res.returncode == 0, res.stderr[-3000:]
        line = [ln for ln in res.stdout.splitlines() if ln.startswith("@@")][-1]
        return set(__import__("json").loads(line[2:]))

    mods = run("")
    heavy = sorted(m for m in mods if m.split(".")[0] in
                   ("xarray", "pandas", "arviz", "arviz_base", "arviz_stats", "arviz_plots",
                    "matplotlib"))
    assert heavy == [] and "h5netcdf" in mods
    back = Posterior.from_netcdf(out)
    assert back.method == "damcmc" and back.draws["theta"].shape == (4, 200)
    assert back.converged is not None and back.release["n"] == 500
    out.unlink()
    wrong = run("from privpost.posterior import Posterior\n"
                "Posterior.to_netcdf = lambda self, p: self.to_datatree().to_netcdf(p)\n")
    assert {"xarray", "pandas"} <= wrong


def test_reads_a_file_written_with_arviz_0x():
    """tests/data/posterior_arviz0.nc was written by privpost 2cc9145 (Python 3.11, ArviZ
    0.23.4: ``to_arviz().to_netcdf``) from draws of ``default_rng(24)``, drawn in this order."""
    rng = np.random.default_rng(24)
    theta, b = rng.normal(size=(2, 6)), rng.normal(size=(2, 6, 2))
    acc, r = rng.random((2, 6)), rng.random((2, 3))
    post = Posterior.from_netcdf(Path(__file__).parent / "data" / "posterior_arviz0.nc")
    assert np.array_equal(post.draws["theta"], theta) and np.array_equal(post.draws["b"], b)
    assert np.array_equal(post.sample_stats["accept_rate"], acc)
    assert np.array_equal(post.chain_stats["r"], r)
    assert post.method == "damcmc" and post.model == {"name": "m"} and post.converged is False
    assert post.notes == ["written by privpost 2cc9145 with ArviZ 0.23.4"]
