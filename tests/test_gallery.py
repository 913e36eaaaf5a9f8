"""The docs gallery (docs/gallery/*.md) runs: python blocks are executed and every
``$ privpost ...`` line of the console blocks is run, in a fresh directory per page."""

import re
import shlex
from pathlib import Path

import pytest
from typer.testing import CliRunner

from privpost.cli import app

GALLERY = Path(__file__).resolve().parents[1] / "docs" / "gallery"
PAGES = sorted(p.name for p in GALLERY.glob("*.md") if p.name != "README.md")
BLOCK = re.compile(r"^```(\w+)\n(.*?)^```", re.S | re.M)


def blocks(text):
    return [(m.group(1), m.group(2)) for m in BLOCK.finditer(text)]


def test_gallery_index_links_every_page():
    index = (GALLERY / "README.md").read_text()
    assert PAGES and all(f"({name})" in index for name in PAGES)
    readme = (GALLERY.parents[1] / "README.md").read_text()
    assert "docs/gallery" in readme


@pytest.mark.parametrize("page", PAGES)
def test_gallery_page_runs(page, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    runner = CliRunner()
    ran = 0
    for lang, body in blocks((GALLERY / page).read_text()):
        if lang == "python":
            exec(compile(body, f"{page}:python", "exec"), {"__name__": "gallery"})
            ran += 1
        elif lang == "console":
            for line in body.splitlines():
                if not line.startswith("$ "):
                    continue
                args = shlex.split(line[2:])
                assert args[0] == "privpost", line
                res = runner.invoke(app, args[1:])
                assert res.exit_code == 0, f"{line}\n{res.output}"
                assert "Traceback" not in res.output
                ran += 1
    assert ran >= 2
