"""Numba's on-disk cache kept consistent with the package's sources.

privpost compiles its loops with ``numba.njit(cache=True)``: the machine code is stored next to
each module (``__pycache__/*.nbi`` index, ``*.nbc`` data) and reused by later processes. Numba
invalidates a cached function only when **its own file** changes (the index records that file's
size and modification time). A function that calls a compiled function of *another* module
keeps the callee's old machine code after that other module changes: e.g. the record driver in
``inference/_damcmc_fast.py`` kept an old ``inference/_kernels.sweep_cells`` after only
``_kernels.py`` changed, and sampled the wrong posterior (z = -8.95 / +20.1 in the review's
reproduction) until the cache files were deleted. This happens wherever the sources change in
place -- an editable install after ``git pull``, a checkout or a merge -- not on a fresh
install (every file is new there).

:func:`ensure_fresh` (called once when ``privpost`` is imported) therefore treats the package
as one unit: it keeps a stamp of every ``.py`` file's path, size and modification time in
``privpost/__pycache__/numba-sources.stamp`` and, when the stamp differs, deletes every
``*.nbi``/``*.nbc`` file under the package before any compiled module is loaded, so every
compiled function is rebuilt from the current sources. It costs one ``stat`` per source file
(about 150, ~1 ms). Several processes starting at once after a change may each delete the
files; Numba treats a cache file that disappears as a miss and recompiles, so the worst case is
extra compilation. Where the package directory is not writable (a system install) nothing is
done: the sources cannot change in place there.
"""

from __future__ import annotations

import hashlib
import os

__all__ = ["ensure_fresh", "sources_stamp", "STAMP_NAME"]

STAMP_NAME = "numba-sources.stamp"
_CACHE_SUFFIXES = (".nbi", ".nbc")


def sources_stamp(root: str) -> str:
    """A hex digest of the path (relative to ``root``), size and modification time (ns) of
    every ``.py`` file under ``root``, in sorted order (``__pycache__`` folders skipped)."""
    h = hashlib.sha256()
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = sorted(d for d in dirnames if d != "__pycache__")
        for name in sorted(filenames):
            if name.endswith(".py"):
                path = os.path.join(dirpath, name)
                st = os.stat(path)
                h.update(f"{os.path.relpath(path, root)}\0{st.st_size}\0{st.st_mtime_ns}\n"
                         .encode())
    return h.hexdigest()


def ensure_fresh(root: str) -> bool:
    """Delete Numba's cache files under ``root`` if any ``.py`` file under it changed since the
    last call that saw this tree (module docstring). Returns whether files were deleted.
    Never raises for file-system reasons (an unreadable or read-only tree is left alone)."""
    try:
        stamp_dir = os.path.join(root, "__pycache__")
        stamp_path = os.path.join(stamp_dir, STAMP_NAME)
        stamp = sources_stamp(root)
        try:
            with open(stamp_path, encoding="ascii") as f:
                if f.read().strip() == stamp:
                    return False
        except (OSError, ValueError):
            pass
        if not os.access(root, os.W_OK):
            return False
        removed = False
        for dirpath, dirnames, filenames in os.walk(root):
            if os.path.basename(dirpath) != "__pycache__":
                continue
            for name in filenames:
                if name.endswith(_CACHE_SUFFIXES):
                    try:
                        os.remove(os.path.join(dirpath, name))
                        removed = True
                    except FileNotFoundError:
                        pass        # another process removed it first
        os.makedirs(stamp_dir, exist_ok=True)
        tmp = f"{stamp_path}.{os.getpid()}.tmp"
        with open(tmp, "w", encoding="ascii") as f:
            f.write(stamp)
        os.replace(tmp, stamp_path)
        return removed
    except OSError:
        return False
