"""Numba's on-disk cache kept consistent with the sources (privpost/_numba_cache.py; review4 D2:
a cached caller kept a changed callee's old machine code from another file)."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

from privpost._numba_cache import STAMP_NAME, ensure_fresh, sources_stamp


def _tree(tmp_path):
    pkg = tmp_path / "pkg"
    (pkg / "sub" / "__pycache__").mkdir(parents=True)
    (pkg / "__pycache__").mkdir()
    (pkg / "a.py").write_text("x = 1\n")
    (pkg / "sub" / "b.py").write_text("y = 2\n")
    return pkg


def _touch_cache(pkg):
    files = [pkg / "__pycache__" / "a.f-1.py312.nbi", pkg / "sub" / "__pycache__" / "b.g-3.nbc"]
    for f in files:
        f.write_bytes(b"cache")
    return files


def test_cache_files_go_when_a_source_changes_and_stay_otherwise(tmp_path):
    pkg = _tree(tmp_path)
    files = _touch_cache(pkg)
    keep = pkg / "__pycache__" / "a.cpython-312.pyc"      # not Numba's: never touched
    keep.write_bytes(b"pyc")
    assert ensure_fresh(str(pkg)) is True                 # no stamp yet: cleared
    assert not any(f.exists() for f in files) and keep.exists()
    assert (pkg / "__pycache__" / STAMP_NAME).read_text() == sources_stamp(str(pkg))
    files = _touch_cache(pkg)
    assert ensure_fresh(str(pkg)) is False                # same sources: kept
    assert all(f.exists() for f in files)
    st = os.stat(pkg / "sub" / "b.py")                    # a callee's file changes in place
    os.utime(pkg / "sub" / "b.py", ns=(st.st_atime_ns, st.st_mtime_ns + 10**9))
    assert ensure_fresh(str(pkg)) is True
    assert not any(f.exists() for f in files)
    (pkg / "c.py").write_text("z = 3\n")                  # a new module counts too
    files = _touch_cache(pkg)
    assert ensure_fresh(str(pkg)) is True and not any(f.exists() for f in files)


def test_a_read_only_or_missing_tree_is_left_alone(tmp_path):
    assert ensure_fresh(str(tmp_path / "absent")) is False
    pkg = _tree(tmp_path)
    files = _touch_cache(pkg)
    os.chmod(pkg, 0o555)
    try:
        if os.access(pkg, os.W_OK):                       # root ignores the mode bits
            return
        assert ensure_fresh(str(pkg)) is False and all(f.exists() for f in files)
    finally:
        os.chmod(pkg, 0o755)


def test_a_cached_caller_picks_up_a_changed_callee(tmp_path):
    """End to end with Numba: ``g`` (file mod_b) calls ``f`` (file mod_a); after editing only
    mod_a, Numba's own cache returns the stale ``g`` (the hazard, checked so the test can
    fail); with :func:`ensure_fresh` first, the current one."""
    pkg = tmp_path / "tree"
    pkg.mkdir()
    (pkg / "mod_a.py").write_text("from numba import njit\n@njit(cache=True)\n"
                                  "def f(x):\n    return x + 1.0\n")
    (pkg / "mod_b.py").write_text("from numba import njit\nfrom mod_a import f\n"
                                  "@njit(cache=True)\ndef g(x):\n    return f(x)\n")
    code = textwrap.dedent("""
        import sys
        sys.path.insert(0, sys.argv[1])
        if sys.argv[2] == "fresh":
            from privpost._numba_cache import ensure_fresh
            ensure_fresh(sys.argv[1])
        import mod_b
        print(mod_b.g(1.0))
    """)

    def g(mode):
        out = subprocess.run([sys.executable, "-c", code, str(pkg), mode], capture_output=True,
                             text=True, timeout=300, cwd=tmp_path)
        assert out.returncode == 0, out.stderr
        return float(out.stdout.split()[-1])

    assert g("plain") == 2.0
    src = pkg / "mod_a.py"
    st = os.stat(src)
    src.write_text(src.read_text().replace("x + 1.0", "x + 100.0"))
    os.utime(src, ns=(st.st_atime_ns, st.st_mtime_ns + 10**9))
    assert g("plain") == 2.0            # Numba alone: the stale callee (the hazard)
    assert g("fresh") == 101.0          # the package's rule: rebuilt from the current sources
    assert g("plain") == 101.0          # and cached again
