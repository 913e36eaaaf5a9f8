"""A Dask study whose workers ALL die (issue #23, finding 8).

Before: the client printed asyncio's "Task exception was never retrieved ... AllExit" traceback
and then waited silently for ``scheduler_timeout`` (1,800 s by default). Now: the study stops
with a :class:`PrivpostError` saying the cluster was lost, ``lost_cluster_timeout`` seconds
(configurable, default 60, env ``PRIVPOST_DASK_LOST_TIMEOUT``) after the last worker left, with no
asyncio traceback, and the finished replicates stay in ``outdir``: a rerun with new workers
resumes and gives the table of a serial run.

The cluster: a ``LocalCluster`` scheduler (no workers of its own) and two ``dask worker
--no-nanny`` processes, so a SIGKILL kills a worker for good (a nanny would restart it). The
workers are killed right before the runner fetches the first finished replicate: the fetch then
finds the result lost with its worker -- the exact path that left ``distributed``'s orphaned
``AllExit`` waiters behind. Every wait in this module has a timeout.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time

import numpy as np
import pandas as pd
import pytest

import privpost as pp
from privpost.errors import PrivpostError

distributed = pytest.importorskip("distributed")

pytestmark = pytest.mark.timeout(400)

LOST = 4.0           # lost_cluster_timeout used here (s)
BOUND = LOST + 27.0  # the documented worst case (lost + 5 * FETCH_WAIT + 2)
DET = lambda t: t.drop(columns=["seconds"])  # noqa: E731


def slowish(model, release, *, records=None, draws=50, seed=None):
    """Beta posterior of a Bernoulli sum; 0.3 s per replicate so the study is still running
    when the workers are killed."""
    time.sleep(0.3)
    s, n = float(np.sum(records)), len(records)
    return pp.Posterior(draws={"theta": seed.beta(1 + s, 1 + n - s, size=(1, draws))},
                        method="slowish")


def _study(**kw):
    return pp.calibrate("beta-bernoulli:a=2,b=2", {"type": "sum", "bounds": [0, 1]},
                        {"type": "laplace"}, methods={"s": slowish}, n=[10], epsilon=[1.0],
                        replicates=8, levels=(0.9,), progress=False, seed=3, figures=False,
                        **kw)


def _start_workers(address, k=2):
    # the workers import this module (the method) as the client does: same sys.path
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in sys.path if p)}
    procs = [subprocess.Popen([sys.executable, "-m", "distributed.cli.dask_worker", address,
                               "--no-nanny", "--nthreads", "1", "--no-dashboard"],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env)
             for _ in range(k)]
    with distributed.Client(address, set_as_default=False, timeout=60) as c:
        c.wait_for_workers(k, timeout=120)
    return procs


def _kill(procs, wait=True):
    for p in procs:
        p.kill()
    for p in procs if wait else ():
        p.wait(timeout=30)


@pytest.fixture()
def scheduler():
    with distributed.LocalCluster(n_workers=0, processes=True, protocol="tcp://",
                                  host="127.0.0.1", dashboard_address=None) as c:
        yield c.scheduler_address


def test_every_worker_dying_is_a_clear_error_in_bounded_time_and_resumable(
        scheduler, tmp_path, monkeypatch, capfd):
    from privpost.experiments import _dask_runner as dr

    serial = _study(workers=1)
    procs = _start_workers(scheduler)
    killed = {}
    fetch = dr._fetch

    def kill_then_fetch(fut, connect_timeout):
        if not killed:                       # the first finished replicate: kill everyone
            _kill(procs, wait=False)         # (no wait: the fetch must meet the lost result)
            killed["at"] = time.monotonic()
        return fetch(fut, connect_timeout)

    monkeypatch.setattr(dr, "_fetch", kill_then_fetch)
    with pytest.raises(PrivpostError, match=r"lost the Dask cluster: (no worker is connected "
                       r"to the scheduler|the scheduler does not answer) for 4 s") as err:
        _study(scheduler=scheduler, outdir=tmp_path, lost_cluster_timeout=LOST)
    assert killed, err.value
    took = time.monotonic() - killed["at"]
    for p in procs:
        p.wait(timeout=30)
    assert "outdir to resume" in str(err.value)
    monkeypatch.setattr(dr, "_fetch", fetch)
    import gc
    gc.collect()                 # orphaned distributed waiters are logged when collected
    time.sleep(0.5)
    out, errs = capfd.readouterr()
    assert "Task exception was never retrieved" not in errs + out
    assert "AllExit" not in errs + out
    with capfd.disabled():
        print(f"\nlost cluster reported {took:.1f} s after the kill (lost_cluster_timeout "
              f"{LOST:g})")
    assert LOST <= took <= BOUND, took
    kept = list((tmp_path / "replicates").rglob("*.parquet")) if (tmp_path / "replicates").exists() \
        else []
    assert len(kept) < 8
    # resumable: new workers, same outdir -> the serial table, the kept replicates reused
    procs = _start_workers(scheduler)
    try:
        res = _study(scheduler=scheduler, outdir=tmp_path, lost_cluster_timeout=LOST)
    finally:
        _kill(procs)
    assert res.reused == len(kept) and res.computed == 8 - len(kept)
    pd.testing.assert_frame_equal(DET(serial.table), DET(res.table))


def test_the_lost_cluster_timeout_is_configurable_and_checked(scheduler, monkeypatch):
    """No worker at all: the error comes after the configured time, not after 1,800 s; the
    environment variable sets the default; bad values name the field."""
    from privpost.experiments import _dask_runner as dr

    monkeypatch.setenv(dr.LOST_TIMEOUT_ENV, "2")
    t0 = time.monotonic()
    with pytest.raises(PrivpostError, match="lost the Dask cluster: no worker is connected to "
                       "the scheduler for 2 s"):
        _study(scheduler=scheduler)
    assert time.monotonic() - t0 < 2 + 27
    monkeypatch.setenv(dr.LOST_TIMEOUT_ENV, "soon")
    with pytest.raises(PrivpostError, match="PRIVPOST_DASK_LOST_TIMEOUT must be a number"):
        _study(scheduler=scheduler)
    monkeypatch.delenv(dr.LOST_TIMEOUT_ENV)
    assert dr.lost_timeout_default() == 60.0
    for bad in (0, -1, float("nan"), float("inf"), True, "5"):
        with pytest.raises(PrivpostError, match="lost_cluster_timeout must be"):
            _study(scheduler=scheduler, lost_cluster_timeout=bad)


def test_the_allexit_filter_drops_only_distributed_allexit():
    import logging

    from distributed.client import AllExit

    from privpost.experiments._dask_runner import _AllExitFilter

    f = _AllExitFilter()

    def rec(exc):
        return logging.LogRecord("asyncio", logging.ERROR, __file__, 1,
                                 "Task exception was never retrieved", None,
                                 (type(exc), exc, None) if exc is not None else None)

    assert not f.filter(rec(AllExit()))
    assert f.filter(rec(RuntimeError("real")))       # wrong variant: other errors are kept
    assert f.filter(rec(None))
