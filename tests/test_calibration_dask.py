"""The Dask path of ``calibrate`` cannot hang (issue #15).

One ``LocalCluster`` on 127.0.0.1 (two worker processes, no dashboard) serves the module. Covered:
an existing client, an address while a ``Client`` of that cluster is open in this process (the
situation of the old flaky hang), a worker that dies once mid-study (the replicate is rerun and
the table equals the serial one), a replicate whose worker always dies (a clear error, the
finished replicates kept in ``outdir``), a stalled cluster (the ``scheduler_timeout`` error) and
the root cause itself: a result fetch that fails with a communication error (previously lost by
``as_completed(with_results=True)``, whose iterator then waited forever).
"""

from __future__ import annotations

import os
import re
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import privpost as pp
from privpost.errors import PrivpostError

distributed = pytest.importorskip("distributed")

MODEL = "beta-bernoulli:a=2,b=2"
QUERY = {"type": "sum", "bounds": [0, 1]}
MECH = {"type": "laplace"}
DET = lambda t: t.drop(columns=["seconds"])  # noqa: E731

pytestmark = pytest.mark.timeout(300)     # a hang fails the test (every wait is also bounded)


def _study(epsilon=(0.5, 5.0), replicates=2, **kw):
    kw.setdefault("methods", ["nonprivate", "naive"])
    return pp.calibrate(MODEL, QUERY, MECH, n=[10, 30], epsilon=list(epsilon),
                        replicates=replicates,
                        levels=(0.9,), progress=False, method_options={"draws": 100}, seed=5,
                        figures=False, **kw)


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    import cloudpickle
    import dask

    # the dying methods below live in this test module, which the workers cannot import
    cloudpickle.register_pickle_by_value(sys.modules[__name__])
    os.environ["PRIVPOST_TEST_DIE_DIR"] = str(tmp_path_factory.mktemp("die"))
    # no scheduler-side reruns: a dead worker surfaces at once as KilledWorker, so the test
    # exercises privpost's own resubmission (and stays short)
    # worker-saturation 1.0 with one thread: a worker holds exactly one task, so a dying
    # worker never takes an innocent queued replicate down with it (which made the number of
    # failed replicates timing-dependent)
    with dask.config.set({"distributed.scheduler.allowed-failures": 0,
                          "distributed.scheduler.worker-saturation": 1.0}):
        with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                                      protocol="tcp://", host="127.0.0.1",
                                      dashboard_address=None) as c:
            yield c
    cloudpickle.unregister_pickle_by_value(sys.modules[__name__])


@pytest.fixture(scope="module")
def serial():
    return _study(workers=1)


def test_existing_client_and_address_with_a_client_open(cluster, serial):
    with distributed.Client(cluster) as client:
        by_client = _study(scheduler=client, scheduler_timeout=120)
        assert client.status == "running"              # the user's client is left open
        by_address = _study(scheduler=cluster.scheduler_address, scheduler_timeout=120)
        assert client.status == "running"
    pd.testing.assert_frame_equal(DET(serial.table), DET(by_client.table))
    pd.testing.assert_frame_equal(DET(serial.table), DET(by_address.table))
    # by address, no client open: a client is opened and closed
    alone = _study(scheduler=cluster.scheduler_address, scheduler_timeout=120)
    pd.testing.assert_frame_equal(DET(serial.table), DET(alone.table))


def dies_once(model, release, *, records=None, draws=50, seed=None):
    """Kills its worker process the first time it runs on an n = 30 release (marker file)."""
    marker = Path(os.environ["PRIVPOST_TEST_DIE_DIR"]) / "died-once"
    if release.n == 30 and not marker.exists():
        marker.write_text("x")
        os._exit(1)
    s, n = float(np.sum(records)), len(records)
    return pp.Posterior(draws={"theta": seed.beta(1 + s, 1 + n - s, size=(1, draws))},
                        method="dies_once")


def dies_always(model, release, *, records=None, draws=50, seed=None):
    if release.n == 30:
        os._exit(1)
    s, n = float(np.sum(records)), len(records)
    return pp.Posterior(draws={"theta": seed.beta(1 + s, 1 + n - s, size=(1, draws))},
                        method="dies_always")


def _wait_for_workers(cluster, k=2, timeout=120):
    with distributed.Client(cluster, set_as_default=False) as c:
        c.wait_for_workers(k, timeout=timeout)


def test_a_worker_dying_once_is_rerun_and_the_table_is_unchanged(cluster):
    _wait_for_workers(cluster)
    # the serial reference must not die: run it with the marker already present
    marker = Path(os.environ["PRIVPOST_TEST_DIE_DIR"]) / "died-once"
    marker.write_text("x")
    small = dict(methods={"w": dies_once}, epsilon=(1.0,), replicates=1)
    reference = _study(workers=1, **small)
    marker.unlink()
    res = _study(scheduler=cluster.scheduler_address, scheduler_timeout=120, **small)
    assert marker.exists()                           # a worker really died
    pd.testing.assert_frame_equal(DET(reference.table), DET(res.table))


@pytest.mark.slow          # three worker restarts: ~10 s unloaded, 30 s under load
def test_a_worker_always_dying_is_a_clear_error_and_finished_replicates_are_kept(cluster,
                                                                                 tmp_path):
    _wait_for_workers(cluster)
    with pytest.raises(PrivpostError, match=r"failed on the Dask cluster|no replicate "
                       r"finished within 120 s|lost the Dask cluster") as err:
        _study(methods={"w": dies_always}, scheduler=cluster.scheduler_address,
               scheduler_timeout=120, outdir=tmp_path, epsilon=(1.0,), replicates=2)
    kept = sorted(p.relative_to(tmp_path / "replicates").as_posix()
                  for p in (tmp_path / "replicates").rglob("*.parquet"))
    if "no replicate finished" in str(err.value) or "lost the Dask cluster" in str(err.value):
        # seen once in eight loaded runs: the nannies had not restarted any worker 120 s
        # after the deaths; the runner stopped with the stall error instead of hanging (now,
        # with no worker connected for 60 s, the lost-cluster error comes first; issue #23)
        assert len(kept) <= 2, kept
        return
    assert re.search(r"2 replicate\(s\) failed on the Dask cluster \(the first 3 times: its "
                     r"worker died.*the 2 other replicates finished", str(err.value)), err.value
    # the two n = 10 replicates finished and are kept; no n = 30 one can exist
    assert len(kept) == 2, kept


def test_a_stalled_cluster_times_out(cluster):
    """Nothing finishes: a study on a cluster whose workers are all busy must stop with the
    timeout error instead of waiting forever."""
    import time

    _wait_for_workers(cluster)
    with distributed.Client(cluster, set_as_default=False) as c:
        blockers = [c.submit(time.sleep, 30, pure=False) for _ in range(2)]
        with pytest.raises(PrivpostError, match="no replicate finished within 2 s"):
            _study(scheduler=c, scheduler_timeout=2)
        c.cancel(blockers, force=True)


def test_a_failed_result_fetch_is_retried_then_resubmitted(monkeypatch):
    """The root cause of the old hang, without a cluster: ``Future.result`` raising a
    communication error (``CommClosedError`` is an ``OSError``). ``as_completed`` lost such a
    future; the runner retries the fetch, then resubmits the replicate."""
    from privpost.experiments import _dask_runner as dr

    class Fut:
        def __init__(self, task, fail):
            self.task, self.fail, self.status = task, fail, "finished"

        def result(self, timeout=None):
            assert timeout is not None                  # every wait is bounded
            if self.fail > 0:
                self.fail -= 1
                raise OSError("CommClosedError: in <TCP (closed) ConnectionPool.gather>")
            return self.task * 10

        def release(self):
            pass

        def done(self):
            return True

    class Client:
        status = "running"

        def __init__(self):
            self.calls = []

        def submit(self, fn, task, pure=False):
            self.calls.append(task)
            # the first submission of task 1 loses its result for good (4 failed fetches)
            return Fut(task, 4 if (task == 1 and self.calls.count(1) == 1) else 1)

        def cancel(self, futs, force=False):
            pass

    client = Client()
    monkeypatch.setattr(dr, "_client_for", lambda s, t: (client, False))
    monkeypatch.setattr(dr, "_wait_first", lambda futs, timeout, watch=None: futs[:1])
    got = {}
    dr.run_dask([0, 1, 2], "tcp://x", lambda t, r: got.__setitem__(t, r), fn=None,
                stall_timeout=5, connect_timeout=1)
    assert got == {0: 0, 1: 10, 2: 20}
    assert client.calls.count(1) == 2                   # task 1 was resubmitted once
    # wrong variant: with no retries at all, a single comm error would have lost task 0
    with pytest.raises(PrivpostError, match=r"1 replicate\(s\) failed .*first 1 times"):
        client.calls.clear()
        dr.run_dask([1], "tcp://x", lambda t, r: None, fn=None, stall_timeout=5,
                    connect_timeout=1, max_resubmits=0)


def test_bad_scheduler_arguments_are_clear_errors():
    from privpost.experiments._dask_runner import run_dask

    with pytest.raises(PrivpostError, match="scheduler: must be"):
        run_dask([], 42, lambda t, r: None, fn=None)
    with pytest.raises(PrivpostError, match="scheduler_timeout"):
        run_dask([], "tcp://127.0.0.1:1", lambda t, r: None, fn=None, stall_timeout=0)
    with pytest.raises(PrivpostError, match="cannot connect"):
        run_dask([1], "tcp://127.0.0.1:9", lambda t, r: None, fn=None, connect_timeout=2)
