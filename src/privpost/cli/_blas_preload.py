"""Let Numba's BLAS check load one SciPy extension instead of all of ``scipy.linalg`` (CLI only).

The first time a process compiles or loads any Numba function (from the on-disk cache too),
Numba initialises its CPU target and imports ``numba.np.arraymath``, which checks at import time
that a BLAS is available by importing ``scipy.linalg.cython_blas``. Importing that submodule
the normal way first runs the package ``scipy/linalg/__init__.py``, which imports all of
``scipy.linalg`` (decompositions, matrix functions, SciPy's array-API layer): about 0.17 s of
CPU on the 2-core test machine, out of a ~1.9 s second ``privpost infer`` (benchmarks/README.md,
"CLI start-up"), for a module that Numba only imports. privpost's compiled code does not use
``np.linalg`` (hand-written Cholesky and solves in :mod:`privpost.models._numeric`).

:func:`preload_cython_blas` loads the extension module ``scipy/linalg/cython_blas*.so`` under
its own name without running the package ``__init__``. Numba's check then finds it in
``sys.modules``; if Numba later compiles a function that does use BLAS/LAPACK it reads the
function pointers from ``__pyx_capi__`` of the module in ``sys.modules``, so those work as
before (tested), and a later ``import scipy.linalg`` runs normally and reuses the loaded
module. One difference remains, which is why only the command-line process (``privpost
infer``) calls this and the library never does: the attribute ``scipy.linalg.cython_blas`` is
not set on the package (``from scipy.linalg import cython_blas`` and
``importlib.import_module`` still work).
"""

from __future__ import annotations

import importlib.machinery
import importlib.util
import os
import sys

_NAME = "scipy.linalg.cython_blas"


def preload_cython_blas() -> bool:
    """Load ``scipy.linalg.cython_blas`` without importing ``scipy.linalg``.

    Returns
    -------
    bool
        ``True`` if it was loaded here; ``False`` when there is nothing to gain or it cannot be
        done (SciPy missing, the extension file not found, ``scipy.linalg`` or the module
        already imported, or loading it failed -- then nothing is left behind and Numba imports
        it the usual way).
    """
    if _NAME in sys.modules or "scipy.linalg" in sys.modules:
        return False
    try:
        top = importlib.util.find_spec("scipy")     # locates the package without importing it
    except (ImportError, ValueError):
        return False
    if top is None or not top.submodule_search_locations:
        return False
    path = next((os.path.join(base, "linalg", "cython_blas" + suffix)
                 for base in top.submodule_search_locations
                 for suffix in importlib.machinery.EXTENSION_SUFFIXES
                 if os.path.isfile(os.path.join(base, "linalg", "cython_blas" + suffix))), None)
    if path is None:
        return False
    try:
        import scipy  # noqa: F401 - the top-level package, as any import of a submodule does

        spec = importlib.util.spec_from_file_location(_NAME, path)
        module = importlib.util.module_from_spec(spec)
        sys.modules[_NAME] = module
        spec.loader.exec_module(module)
    except Exception:  # noqa: BLE001 - any failure: leave it to the normal import
        sys.modules.pop(_NAME, None)
        return False
    return True
