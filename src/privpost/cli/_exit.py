"""Leave the command-line process without the interpreter's teardown, when that is safe.

After ``privpost infer`` has printed its table, the interpreter's own finalisation -- tearing
down every module and collecting Numba's and LLVM's objects -- costs about 0.25 s of CPU on the
2-core test machine (benchmarks/README.md, "CLI start-up"), more than a tenth of a second run.
:func:`finish` skips it with :func:`os._exit` after doing what an ordinary exit does that can
matter to the user: the ``atexit`` handlers run (multiprocessing, Rich, user registrations),
``sys.stdout``/``sys.stderr`` are flushed, and the exit status is the one ``sys.exit`` would
give. It is used only by the console entry point :func:`privpost.cli.main`, only after a
command has marked the process as safe (:func:`allow`: the command left no file open -- it
wrote none, or closed what it wrote, e.g. ``Posterior.to_netcdf`` -- so no half-flushed file
object can be lost), and only when no other non-daemon thread is alive (those
the normal exit would wait for). Otherwise the normal exit runs.
"""

from __future__ import annotations

import atexit
import os
import sys
import threading

_STATE = {"allowed": False}


def allow() -> None:
    """Mark this process as safe to leave quickly (called by a command that left no file open)."""
    _STATE["allowed"] = True


def _status(code) -> int:
    """The exit status ``sys.exit(code)`` gives (printing a non-integer message to stderr)."""
    if code is None:
        return 0
    if isinstance(code, bool):
        return int(code)
    if isinstance(code, int):
        return code & 0xFF
    print(code, file=sys.stderr)
    return 1


def finish(code) -> None:
    """Exit with ``code`` as ``sys.exit`` would; quickly if allowed (see the module docstring).

    Never returns: raises ``SystemExit`` (the normal exit) or ends the process.
    """
    others = [t for t in threading.enumerate()
              if t is not threading.main_thread() and not t.daemon and t.is_alive()]
    if not _STATE["allowed"] or others:
        raise SystemExit(code)
    status = _status(code)
    atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        try:
            if stream is not None:
                stream.flush()
        except (OSError, ValueError):    # a closed or broken pipe: nothing more to deliver
            pass
    os._exit(status)
