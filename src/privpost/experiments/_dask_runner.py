"""Calibration replicates on a Dask cluster, with every wait bounded (issue #15).

Why not ``distributed.as_completed(..., with_results=True)``: its per-future tracking coroutine
(``as_completed._track_future``) catches only ``CancelledError`` when it fetches a result. A
communication failure while gathering (``CommClosedError`` from ``ConnectionPool.gather``, seen
under load with a second ``Client`` open in the same process) kills that coroutine, the future
never reaches the queue, and the iterator waits forever -- the hang of
``test_local_pool_dask_and_serial_give_the_same_table``. Here instead:

* the runner waits for the first finished future with a deadline (:func:`_wait_first`): if no
  replicate finishes within ``stall_timeout`` seconds the study
  stops with a :class:`~privpost.errors.PrivpostError` (finished replicates are kept: the caller
  has already stored them);
* **a lost cluster** (issue #23): while it waits, the runner asks the scheduler for its number
  of workers about once a second (:class:`_ClusterWatch`); when no worker has been connected --
  or the scheduler has not answered -- for ``lost_timeout`` seconds (default
  :data:`LOST_TIMEOUT` = 60 s, or the environment variable :data:`LOST_TIMEOUT_ENV`), the study
  stops with a :class:`~privpost.errors.PrivpostError` saying so, at most
  ``lost_timeout + 5 * FETCH_WAIT + 2`` seconds (``lost_timeout`` + 27 s) after the last worker
  left: a fetch in progress takes at most three attempts of ``FETCH_WAIT`` s, a question to the
  scheduler at most ``FETCH_WAIT`` s (the first and the last one count), the watch asks every
  second (measured in ``tests/test_dask_lost_cluster.py``: ``lost_timeout`` + 1-3 s). The
  finished replicates are kept, so the study resumes from them;
* each result is fetched with ``Future.result`` in attempts of at most ``FETCH_WAIT`` seconds
  (three, within ``connect_timeout``), retried on a communication error; a result lost with its
  worker (the future went back to ``pending``: the scheduler recomputes it) is waited for again,
  and the replicate is **resubmitted** if its result cannot be fetched;
* a replicate whose worker died (``KilledWorker``, after the scheduler's own
  ``allowed-failures`` reruns), or that was cancelled/lost, is resubmitted up to
  ``max_resubmits`` times; after that it is given up, the other replicates run to the end
  (each one stored by the caller as it finishes) and the study stops with a clear error;
* given an address while this process already holds a running ``Client`` of that scheduler,
  that client is reused rather than a second one opened; a client this module opens is not
  made the process default (``set_as_default=False``) and is closed with a timeout.

Replicates are deterministic functions of ``(seed, replicate)``, so a resubmitted one returns
exactly what the first attempt would have.

A fetch that times out leaves ``distributed``'s internal per-key waiters (``Client._gather``'s
``wait``) orphaned; when the cluster is then lost they end with ``distributed.client.AllExit``,
which asyncio would print as "Task exception was never retrieved" with a traceback.
:func:`_quiet_allexit` installs a logging filter that drops exactly those records (that
exception is ``distributed``'s internal control flow, never a user-facing error); everything else
asyncio logs is kept.
"""

from __future__ import annotations

import logging
import math
import os
import time
from typing import Any, Callable

from privpost.errors import PrivpostError

__all__ = ["run_dask", "lost_timeout_default", "STALL_TIMEOUT", "CONNECT_TIMEOUT",
           "MAX_RESUBMITS", "LOST_TIMEOUT", "LOST_TIMEOUT_ENV"]

STALL_TIMEOUT = 1800.0     # s without any replicate finishing before the study gives up
CONNECT_TIMEOUT = 30.0     # s for connecting, fetching one result, closing
MAX_RESUBMITS = 2          # per replicate, after the scheduler's own reruns
LOST_TIMEOUT = 60.0        # s with no worker connected before the cluster is declared lost
LOST_TIMEOUT_ENV = "PRIVPOST_DASK_LOST_TIMEOUT"
FETCH_WAIT = 5.0           # s, at most, for one attempt at fetching a result / asking the scheduler
_WATCH_EVERY = 1.0         # s between two questions to the scheduler while waiting


class _Resubmit(Exception):
    """Internal: the replicate must be computed again (its result or its worker was lost)."""


class _Requeue(Exception):
    """Internal: the finished replicate's result was lost with its worker and the scheduler is
    recomputing it (the future is ``pending`` again): wait for the same future again."""


def _seconds(value, name: str) -> float:
    """``value`` as a finite number of seconds > 0, or a :class:`PrivpostError` naming ``name``."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or \
            not (value > 0 and math.isfinite(value)):
        raise PrivpostError(f"{name} must be a finite number of seconds > 0, got {value!r}")
    return float(value)


def lost_timeout_default() -> float:
    """The lost-cluster timeout in seconds: the environment variable :data:`LOST_TIMEOUT_ENV`
    when it is set (a number > 0), else :data:`LOST_TIMEOUT`."""
    raw = os.environ.get(LOST_TIMEOUT_ENV)
    if raw is None or not raw.strip():
        return LOST_TIMEOUT
    try:
        value = float(raw)
    except ValueError:
        raise PrivpostError(f"{LOST_TIMEOUT_ENV} must be a number of seconds > 0, got "
                            f"{raw[:40]!r}") from None
    return _seconds(value, LOST_TIMEOUT_ENV)


class _AllExitFilter(logging.Filter):
    """Drops asyncio's "Task exception was never retrieved" records whose exception is
    ``distributed.client.AllExit`` (see the module docstring); keeps every other record."""

    def filter(self, record: logging.LogRecord) -> bool:
        exc = record.exc_info[1] if record.exc_info else None
        return not (exc is not None and type(exc).__name__ == "AllExit"
                    and type(exc).__module__ == "distributed.client")


_ALLEXIT_FILTER = _AllExitFilter()


def _quiet_allexit() -> None:
    """Install :class:`_AllExitFilter` on the ``asyncio`` logger (once per process; it must
    stay: the orphaned waiters are collected, and logged, after the study returns)."""
    log = logging.getLogger("asyncio")
    if _ALLEXIT_FILTER not in log.filters:
        log.addFilter(_ALLEXIT_FILTER)


class _ClusterWatch:
    """Raises :class:`PrivpostError` once no worker has been connected to the scheduler (or the
    scheduler has not answered) for ``lost_timeout`` seconds. Call it as often as you like: it
    asks the scheduler at most once every ``_WATCH_EVERY`` seconds, each question bounded by
    ``FETCH_WAIT`` seconds."""

    def __init__(self, client, lost_timeout: float, pending: dict):
        self.client, self.lost_timeout, self.pending = client, lost_timeout, pending
        self.asked = -math.inf
        self.since: float | None = None      # monotonic time of the first worker-less answer
        self.why = ""

    def workers(self) -> int | None:
        """Workers connected to the scheduler, or ``None`` if it cannot be asked."""
        if self.client.status not in ("running", "connecting"):
            return None
        try:
            info = self.client.sync(self.client.scheduler.identity, n_workers=0,
                                    callback_timeout=FETCH_WAIT)
            return int(info["n_workers"])
        except Exception:  # noqa: BLE001 - any failure to answer is "cannot be asked"
            return None

    def __call__(self) -> None:
        now = time.monotonic()
        if now - self.asked < _WATCH_EVERY:
            return
        self.asked = now
        n = self.workers()
        if n:
            self.since = None
            return
        now = time.monotonic()
        if self.since is None:
            self.since = now
            self.why = "no worker is connected to the scheduler" if n == 0 else \
                "the scheduler does not answer"
        if now - self.since >= self.lost_timeout:
            raise PrivpostError(
                f"lost the Dask cluster: {self.why} for {self.lost_timeout:g} s "
                f"({len(self.pending)} replicate(s) outstanding); the finished replicates are "
                "kept (start workers and rerun with the same outdir to resume), or raise "
                f"lost_cluster_timeout / {LOST_TIMEOUT_ENV}")


def _client_for(scheduler, connect_timeout: float):
    """``(client, owned)`` for a ``Client`` or a scheduler address."""
    from distributed import Client

    if isinstance(scheduler, Client):
        if scheduler.status not in ("running", "connecting", "newly-created"):
            raise PrivpostError(f"scheduler: the Dask client is {scheduler.status!r}, not running")
        return scheduler, False
    if not isinstance(scheduler, str) or not scheduler.strip():
        raise PrivpostError("scheduler: must be a Dask scheduler address (e.g. "
                            f"'tcp://127.0.0.1:8786') or a distributed.Client, got {scheduler!r}")
    try:
        current = Client.current(allow_global=True)
    except ValueError:
        current = None
    if current is not None and current.status == "running" and \
            getattr(current.scheduler, "address", None) == scheduler:
        return current, False
    try:
        client = Client(scheduler, timeout=connect_timeout, set_as_default=False)
    except (OSError, TimeoutError) as exc:
        raise PrivpostError(f"scheduler: cannot connect to the Dask scheduler at {scheduler} "
                            f"within {connect_timeout:g} s ({exc})") from None
    return client, True


def _fetch(fut, connect_timeout: float):
    """The replicate's result, :class:`_Requeue` or :class:`_Resubmit`; a method's own exception
    is re-raised. At most three attempts of at most ``FETCH_WAIT`` s each, within
    ``connect_timeout`` s."""
    from distributed import KilledWorker

    deadline = time.monotonic() + connect_timeout
    for _ in range(3):
        status = fut.status
        if status in ("pending", "lost"):   # finished, then its result was lost with its
            raise _Requeue                   # worker: the scheduler is computing it again
        if status == "error":
            try:
                exc = fut.exception(timeout=min(FETCH_WAIT, connect_timeout))
            except (OSError, TimeoutError):
                raise _Resubmit("its error could not be fetched from the worker") from None
            if isinstance(exc, KilledWorker):
                raise _Resubmit(f"its worker died ({exc})")
            raise exc
        if status != "finished":
            raise _Resubmit(f"it was {status}")
        left = deadline - time.monotonic()
        if left <= 0:
            break
        try:
            return fut.result(timeout=min(FETCH_WAIT, left))
        except KilledWorker as exc:     # the result was lost with its worker, and the
            raise _Resubmit(f"its worker died ({exc})") from None   # rerun died too
        except (OSError, TimeoutError):        # CommClosedError is an OSError
            continue
    if fut.status in ("pending", "lost"):
        raise _Requeue
    raise _Resubmit("its result could not be fetched from the worker")


def _wait_first(futures, timeout: float, watch: Callable[[], None] | None = None) -> list:
    """The finished futures, as soon as there is one; ``TimeoutError`` after ``timeout`` s.

    Polls ``Future.done()`` (local state kept up to date by the client, no communication) with
    a back-off from 10 ms to 0.5 s -- ``distributed.wait`` would need the process's *default*
    client, which a client opened with ``set_as_default=False`` is not. ``watch()`` (if given)
    is called at every poll and may raise (:class:`_ClusterWatch`)."""
    deadline = time.monotonic() + timeout
    pause = 0.01
    while True:
        done = [f for f in futures if f.done()]
        if done:
            return done
        if watch is not None:
            watch()
        left = deadline - time.monotonic()
        if left <= 0:
            raise TimeoutError
        time.sleep(min(pause, left))
        pause = min(pause * 2, 0.5)


def run_dask(tasks, scheduler, on_done: Callable[[Any, Any], None], fn: Callable, *,
             stall_timeout: float = STALL_TIMEOUT, connect_timeout: float = CONNECT_TIMEOUT,
             max_resubmits: int = MAX_RESUBMITS, lost_timeout: float | None = None) -> None:
    """Run ``fn(task)`` for every task on the cluster; ``on_done(task, result)`` in this process
    as each finishes (in completion order). Raises :class:`PrivpostError` if nothing finishes
    for ``stall_timeout`` seconds, if no worker is connected (or the scheduler does not answer)
    for ``lost_timeout`` seconds (``None``: :func:`lost_timeout_default`, 60 s unless
    :data:`LOST_TIMEOUT_ENV` says otherwise), or at the end if a replicate failed
    ``max_resubmits + 1`` times for a lost worker/result; a replicate's own exception is
    re-raised at once."""
    try:
        import distributed  # noqa: F401
    except ImportError:
        raise PrivpostError("scheduler= needs dask.distributed: pip install 'privpost[dask]'") from None
    stall_timeout = _seconds(stall_timeout, "scheduler_timeout")
    connect_timeout = _seconds(connect_timeout, "connect_timeout")
    lost_timeout = lost_timeout_default() if lost_timeout is None else \
        _seconds(lost_timeout, "lost_cluster_timeout")
    _quiet_allexit()
    client, own = _client_for(scheduler, connect_timeout)
    pending: dict = {}
    resubmits: dict[int, int] = {}
    failed: list = []
    tasks = list(tasks)

    def submit(task):
        pending[client.submit(fn, task, pure=False)] = task

    watch = _ClusterWatch(client, lost_timeout, pending)
    try:
        for t in tasks:
            submit(t)
        while pending:
            try:
                done = _wait_first(list(pending), stall_timeout, watch)
            except TimeoutError:
                workers = watch.workers() or 0
                raise PrivpostError(
                    f"no replicate finished within {stall_timeout:g} s on the Dask cluster "
                    f"({len(pending)} outstanding, {workers} worker(s) connected); the finished "
                    "replicates are kept (rerun with the same outdir to resume), or raise "
                    "scheduler_timeout") from None
            for fut in done:
                task = pending.pop(fut)
                try:
                    result = _fetch(fut, connect_timeout)
                except _Requeue:
                    pending[fut] = task      # not released: the scheduler recomputes it
                    continue
                except _Resubmit as why:
                    key = id(task) if getattr(task, "index", None) is None else task.index
                    resubmits[key] = resubmits.get(key, 0) + 1
                    if resubmits[key] > max_resubmits:
                        failed.append((task, resubmits[key], str(why)))   # the others go on
                    else:
                        submit(task)
                    fut.release()
                    continue
                except BaseException:          # the method's own exception
                    fut.release()
                    raise
                fut.release()
                on_done(task, result)
        if failed:
            task, times, why = failed[0]
            raise PrivpostError(
                f"{len(failed)} replicate(s) failed on the Dask cluster (the first "
                f"{times} times: {why}); the {len(tasks) - len(failed)} other replicates "
                "finished and are kept (rerun with the same outdir to resume)")
    except BaseException:
        try:
            client.cancel(list(pending), force=True)
        except Exception:  # noqa: BLE001 - the cluster may be gone; the original error matters
            pass
        raise
    finally:
        if own:
            try:
                client.close(timeout=connect_timeout)
            except Exception:  # noqa: BLE001
                pass
