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
* each result is fetched with ``Future.result(timeout=connect_timeout)``, retried on a
  communication error, and the replicate is **resubmitted** if its result cannot be fetched;
* a replicate whose worker died (``KilledWorker``, after the scheduler's own
  ``allowed-failures`` reruns), or that was cancelled/lost, is resubmitted up to
  ``max_resubmits`` times; after that it is given up, the other replicates run to the end
  (each one stored by the caller as it finishes) and the study stops with a clear error;
* given an address while this process already holds a running ``Client`` of that scheduler,
  that client is reused rather than a second one opened; a client this module opens is not
  made the process default (``set_as_default=False``) and is closed with a timeout.

Replicates are deterministic functions of ``(seed, replicate)``, so a resubmitted one returns
exactly what the first attempt would have.
"""

from __future__ import annotations

from typing import Any, Callable

from privpost.errors import PrivpostError

__all__ = ["run_dask", "STALL_TIMEOUT", "CONNECT_TIMEOUT", "MAX_RESUBMITS"]

STALL_TIMEOUT = 1800.0     # s without any replicate finishing before the study gives up
CONNECT_TIMEOUT = 30.0     # s for connecting, fetching one result, closing
MAX_RESUBMITS = 2          # per replicate, after the scheduler's own reruns


class _Resubmit(Exception):
    """Internal: the replicate must be computed again (its result or its worker was lost)."""


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
    """The replicate's result, or :class:`_Resubmit`; a method's own exception is re-raised."""
    from distributed import KilledWorker

    status = fut.status
    if status == "finished":
        for _ in range(3):
            try:
                return fut.result(timeout=connect_timeout)
            except KilledWorker as exc:     # the result was lost with its worker, and the
                raise _Resubmit(f"its worker died ({exc})") from None   # rerun died too
            except (OSError, TimeoutError):        # CommClosedError is an OSError
                continue
        raise _Resubmit("its result could not be fetched from the worker")
    if status == "error":
        try:
            exc = fut.exception(timeout=connect_timeout)
        except (OSError, TimeoutError):
            raise _Resubmit("its error could not be fetched from the worker") from None
        if isinstance(exc, KilledWorker):
            raise _Resubmit(f"its worker died ({exc})")
        raise exc
    raise _Resubmit(f"it was {status}")


def _wait_first(futures, timeout: float) -> list:
    """The finished futures, as soon as there is one; ``TimeoutError`` after ``timeout`` s.

    Polls ``Future.done()`` (local state kept up to date by the client, no communication) with
    a back-off from 10 ms to 0.5 s -- ``distributed.wait`` would need the process's *default*
    client, which a client opened with ``set_as_default=False`` is not."""
    import time

    deadline = time.monotonic() + timeout
    pause = 0.01
    while True:
        done = [f for f in futures if f.done()]
        if done:
            return done
        left = deadline - time.monotonic()
        if left <= 0:
            raise TimeoutError
        time.sleep(min(pause, left))
        pause = min(pause * 2, 0.5)


def run_dask(tasks, scheduler, on_done: Callable[[Any, Any], None], fn: Callable, *,
             stall_timeout: float = STALL_TIMEOUT, connect_timeout: float = CONNECT_TIMEOUT,
             max_resubmits: int = MAX_RESUBMITS) -> None:
    """Run ``fn(task)`` for every task on the cluster; ``on_done(task, result)`` in this process
    as each finishes (in completion order). Raises :class:`PrivpostError` if nothing finishes
    for ``stall_timeout`` seconds, or at the end if a replicate failed ``max_resubmits + 1``
    times for a lost worker/result; a replicate's own exception is re-raised at once."""
    try:
        import distributed  # noqa: F401
    except ImportError:
        raise PrivpostError("scheduler= needs dask.distributed: pip install 'privpost[dask]'") from None
    for name, value in (("scheduler_timeout", stall_timeout), ("connect_timeout", connect_timeout)):
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not value > 0:
            raise PrivpostError(f"{name} must be a number of seconds > 0, got {value!r}")
    client, own = _client_for(scheduler, connect_timeout)
    pending: dict = {}
    resubmits: dict[int, int] = {}
    failed: list = []
    tasks = list(tasks)

    def submit(task):
        pending[client.submit(fn, task, pure=False)] = task

    try:
        for t in tasks:
            submit(t)
        while pending:
            try:
                done = _wait_first(list(pending), stall_timeout)
            except TimeoutError:
                workers = len(client.scheduler_info(timeout=connect_timeout).get("workers", {})) \
                    if client.status == "running" else 0
                raise PrivpostError(
                    f"no replicate finished within {stall_timeout:g} s on the Dask cluster "
                    f"({len(pending)} outstanding, {workers} worker(s) connected); the finished "
                    "replicates are kept (rerun with the same outdir to resume), or raise "
                    "scheduler_timeout") from None
            for fut in done:
                task = pending.pop(fut)
                try:
                    result = _fetch(fut, connect_timeout)
                except _Resubmit as why:
                    key = id(task) if getattr(task, "index", None) is None else task.index
                    resubmits[key] = resubmits.get(key, 0) + 1
                    if resubmits[key] > max_resubmits:
                        failed.append((task, resubmits[key], str(why)))   # the others go on
                    else:
                        submit(task)
                    continue
                finally:
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
