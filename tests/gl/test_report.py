"""`retrace report`: the HTML page of real profiles, opened in real headless Chromium
(Debian's package): it must load without errors, show every plot, and need no network.
Set RETRACE_SCREENSHOTS=DIR to keep the screenshots for a person to look at."""

from __future__ import annotations

import os
import re
import shutil
from pathlib import Path

import pytest
from browser import open_page
from conftest import TRACES, reference_tool, run_retrace

pytest.importorskip("matplotlib")

TRACE = TRACES / "glmark2-desktop-fbo.trace"
SELECTION = [
    "--pframes", "opengl: CPU Duration, GPU Duration",
    "--pcalls", "opengl: CPU Duration",
    "--pdrawcalls", "opengl: GPU Duration, CPU Duration",
]  # fmt: skip


@pytest.fixture(scope="module")
def browser() -> str:
    return reference_tool("chromium")


@pytest.fixture(scope="module")
def runs(tmp_path_factory) -> list[Path]:
    folder = tmp_path_factory.mktemp("report")
    out = []
    for i in (1, 2):
        path = folder / f"run{i}.tsv"
        run_retrace(*SELECTION, "--quiet", "-o", str(path), str(TRACE), check=True)
        out.append(path)
    return out


def keep(name: str, png: bytes) -> None:
    where = os.environ.get("RETRACE_SCREENSHOTS")
    if where:
        Path(where).mkdir(parents=True, exist_ok=True)
        (Path(where) / name).write_bytes(png)


def self_contained(page: str) -> None:
    """Nothing to fetch: every image inline, no script, style sheet or link elsewhere."""
    assert not re.search(r'(src|href)="(?!data:|#)', page)
    assert "<script" not in page and "@import" not in page


def test_report_of_one_profile(runs, browser, tmp_path):
    page = tmp_path / "one.html"
    done = run_retrace("report", str(runs[0]), "-o", str(page))
    assert done.returncode == 0 and done.stderr == b"", done.stderr
    text = page.read_text()
    self_contained(text)
    headings = ["Frame times", "Top draw calls by GPU Duration", "Shader programs by GPU",
                "Calls: functions by CPU Duration", "Heat map: calls by CPU Duration"]  # fmt: skip
    for heading in headings:
        assert heading in text
    assert "llvmpipe" in text and "<details><summary>" in text  # shader sources a click away
    assert "gl_FragColor" in text  # glmark2's fragment shaders, from the trace
    loaded = open_page(browser, page)
    keep("report-one.png", loaded.screenshot)
    assert loaded.errors == []
    assert loaded.title == "retrace report: glmark2-desktop-fbo.trace"
    # two plots per frame metric (over the trace, histogram) and the heat map
    assert len(loaded.images) == 5
    assert all(i["complete"] and i["width"] > 300 and i["height"] > 150 for i in loaded.images)
    assert len(loaded.screenshot) > 50_000
    again = run_retrace("report", str(runs[0]), "-o", str(page))  # the page is there now
    assert (
        again.returncode == 0 and again.stderr == f"retrace: warning: overwrote {page}\n".encode()
    )


def test_report_of_two_sides(runs, browser, tmp_path):
    page = tmp_path / "two.html"
    done = run_retrace("report", str(runs[0]), "--", str(runs[1]), "-o", str(page),
                       "--threshold", "0.5")  # fmt: skip
    assert done.returncode == 0, done.stderr
    text = page.read_text()
    self_contained(text)
    assert "<h2>Verdict</h2>" in text and "retrace diff" not in text.split("<h2>Verdict")[0]
    assert re.search(r'class="verdict (same|improvement|regression|changed)"', text)
    assert "base" in text and "new" in text
    loaded = open_page(browser, page)
    keep("report-two.png", loaded.screenshot)
    assert loaded.errors == [] and len(loaded.images) == 5
    assert all(i["complete"] and i["width"] > 300 for i in loaded.images)


def test_the_browser_check_sees_broken_pages(browser, tmp_path):
    """The checks above can fail: a missing image and a script error are seen."""
    page = tmp_path / "broken.html"
    page.write_text(
        "<!DOCTYPE html><html><head><title>x</title></head><body><img src='missing.png'>"
        "<script>undefined_function()</script></body></html>"
    )
    loaded = open_page(browser, page)
    assert loaded.images[0]["width"] == 0
    assert any("undefined_function" in e or "Uncaught" in e for e in loaded.errors)


def test_report_errors_are_one_line(tmp_path):
    done = run_retrace("report", str(tmp_path / "none.tsv"), "-o", str(tmp_path / "r.html"))
    assert done.returncode == 2 and len(done.stderr.splitlines()) == 1
    assert done.stderr.startswith(b"retrace: error: ") and b"no such file" in done.stderr
    assert shutil.which("chromium") is None or not (tmp_path / "r.html").exists()


def test_busy_and_idle_flag_the_frames_cpu_bound_in_the_replayer(browser, tmp_path):
    """A frame whose GPU idled more than half of its span is named CPU-bound, with what to
    do about it; a GPU-bound profile gets no such note."""
    from tracegen import TraceWriter, same_work_more_waiting

    w = TraceWriter()
    same_work_more_waiting(w, (0, 0, 4000, 4000))
    waiting = tmp_path / "waiting.trace"
    waiting.write_bytes(w.snappy())
    selection = ["--pframes", "opengl: GPU Duration, GPU Busy, GPU Idle", "--quiet"]
    pages = {}
    for name, trace in (("waiting", waiting), ("fbo", TRACE)):
        out, page = tmp_path / f"{name}.tsv", tmp_path / f"{name}.html"
        run_retrace(*selection, "-o", str(out), str(trace), check=True)
        done = run_retrace("report", str(out), "-o", str(page))
        assert done.returncode == 0, done.stderr
        pages[name] = page
    text = pages["waiting"].read_text()
    self_contained(text)
    assert "<h2>GPU busy and idle</h2>" in text and "Top" not in text
    note = re.search(
        r'<p class="note">profile: \d+ of 5 frames CPU-bound[^(]*\(frames ([^)]*)', text
    )
    assert note, text
    assert {"2", "3"} <= set(note[1].split(", "))  # 16,000 calls a frame: the GPU mostly waits
    assert "Compare their GPU Busy, or profile them with <code>--loop</code>" in text
    loaded = open_page(browser, pages["waiting"])
    keep("report-busy.png", loaded.screenshot)
    assert loaded.errors == []
    alts = [i["alt"] for i in loaded.images]
    assert "GPU busy and idle per frame" in alts and "GPU Busy per frame" in alts
    assert all(i["complete"] and i["width"] > 300 for i in loaded.images)
    fbo = pages["fbo"].read_text()
    assert "<h2>GPU busy and idle</h2>" in fbo and "CPU-bound in the replayer" not in fbo
