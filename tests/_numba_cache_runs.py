"""Shared by the Numba disk-cache tests: run a script in two fresh processes of this checkout."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path


def run_twice(script: str, cwd) -> list[str]:
    """Run ``script`` (Python source) in two fresh interpreters, one after the other, with
    ``NUMBA_DEBUG_CACHE=1`` and this checkout's ``privpost`` first on an absolute
    ``PYTHONPATH`` (whatever the working directory); each must exit 0 within 900 s. Returns
    the two processes' stdout + stderr: the second shows what the first left in the cache."""
    import privpost

    src = str(Path(privpost.__file__).resolve().parents[1])
    env = dict(os.environ, NUMBA_DEBUG_CACHE="1",
               PYTHONPATH=os.pathsep.join([src, os.environ.get("PYTHONPATH", "")]))
    outs = []
    for _ in range(2):
        res = subprocess.run([sys.executable, "-c", script], env=env, cwd=cwd,
                             capture_output=True, text=True, timeout=900)
        assert res.returncode == 0, res.stderr[-2000:]
        outs.append(res.stdout + res.stderr)
    return outs
