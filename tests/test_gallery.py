"""The docs gallery (docs/gallery/*.md) runs: python blocks are executed and every
``$ privpost ...`` line of the console blocks is run, in a fresh directory per page
(the machinery is tests/_docblocks.py, shared with tests/test_tutorial_pages.py)."""

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))
from _docblocks import DOCS, run_page

GALLERY = DOCS / "gallery"
PAGES = sorted(p.name for p in GALLERY.glob("*.md") if p.name != "README.md")


def test_gallery_index_links_every_page():
    index = (GALLERY / "README.md").read_text()
    assert PAGES and all(f"({name})" in index for name in PAGES)
    readme = (GALLERY.parents[1] / "README.md").read_text()
    assert "docs/gallery" in readme


@pytest.mark.parametrize("page", PAGES)
def test_gallery_page_runs(page, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    run = run_page(f"gallery/{page}")
    assert len(run.outputs) >= 2
