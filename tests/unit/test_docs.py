"""The documentation site (mkdocs.yml, docs/) builds with every link and anchor resolved,
holds what it includes from elsewhere, and its pages load in real headless Chromium
without an error. Set RETRACE_SCREENSHOTS=DIR to keep the screenshots."""

from __future__ import annotations

import html
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from browser import open_page
from conftest import ROOT, missing_dependency, reference_tool


@pytest.fixture(scope="module")
def site(tmp_path_factory) -> Path:
    try:
        import mkdocs  # noqa: F401
    except ImportError:
        missing_dependency("mkdocs", "pip install -e '.[docs]'")
    out = tmp_path_factory.mktemp("site")
    build = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(out)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        env={**os.environ, "NO_MKDOCS_2_WARNING": "1"},
    )
    assert build.returncode == 0, build.stderr
    return out


def text(page: Path) -> str:
    """A page's text as a reader sees it (code highlighting splits it into elements)."""
    return html.unescape(re.sub(r"<[^>]+>", "", page.read_text()))


def test_the_site_holds_what_it_includes(site):
    # the README's status table, and its first two commands
    assert "trace reading (snappy, gzip, brotli, zstd" in text(site / "index.html")
    started = text(site / "getting-started" / "index.html")
    assert "bash tools/setup.sh && .venv/bin/retrace" in started and "bash .ci/run" in started
    api = text(site / "api" / "index.html")
    # mkdocstrings: signatures and docstrings from the code
    assert "retrace.api.open_trace(path, cache=True)" in api and "without the trace cache" in api
    assert "retrace.profile.options.ProfileOptions" in api
    assert "Performance history" in text(site / "changelog" / "index.html")


@pytest.mark.parametrize("page", ["index.html", "profiling/index.html", "api/index.html"])
def test_pages_load_in_a_browser(site, page):
    loaded = open_page(reference_tool("chromium"), site / page)
    where = os.environ.get("RETRACE_SCREENSHOTS")
    if where:
        Path(where).mkdir(parents=True, exist_ok=True)
        (Path(where) / f"docs-{page.replace('/', '-')}.png").write_bytes(loaded.screenshot)
    assert loaded.errors == []
    assert loaded.title.endswith("retrace")
