"""`retrace batch traces-*.yml` against piglit's own replayer (Debian's piglit, with apitrace's
eglretrace), on the same description file and traces: the same checksums wherever the two
replayers draw the same image, so the same pass/fail; and piglit's summary tools read the
results retrace writes.

piglit runs as Mesa's jobs run it (`piglit run replay` with PIGLIT_REPLAY_DESCRIPTION_FILE,
PIGLIT_REPLAY_DEVICE_NAME and PIGLIT_REPLAY_EXTRA_ARGS), under Debian's python3 and with
DISPLAY set: Debian's eglretrace is built on waffle, which wants an X display even with
--headless. This piglit reads only the older list layout, so it gets the sample file
rewritten in it.

The traces: every trace of traces/traces-llvmpipe.yml with a frame (the sample traces and
the corpus cuts), and the real programs of the corpus that traces/corpus/record.sh records
($RETRACE_CORPUS, else /work/corpus/traces, where there; 16 traces, all equal when
measured). Where piglit's image differs from retrace's, glretrace is known to be wrong and
its image shows it (tests/reference/test_replay.py has the same frames):
- es2tri (one frame): eglretrace draws before its window has its final size and keeps a
  black image with a 32x32 grey corner; retrace draws the triangle on grey.
- piglit-glx-multithread: eglretrace's image is garbage around a grey corner; retrace's has
  the two green squares the test draws.
- egl-image: eglretrace draws frame 0's copy of the shared texture every frame (red and
  blue checks); retrace shares the image, whose last content is orange and purple.
- es2tri.zstd*: Debian's apitrace 11.1 cannot read zstd containers (it asserts in its
  brotli reader), so piglit reports a crash.
- readback-pixels: eglretrace overflows its heap on glReadPixels under GL_PACK_ROW_LENGTH
  4096 (glibc: "malloc(): invalid size", or a hang), a crash in piglit's results.
"""

from __future__ import annotations

import bz2
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import TRACES, missing_dependency, reference_tool

pytest.importorskip("ruamel.yaml")
pytest.importorskip("duckdb")

DEVICE = "gl-vmware-llvmpipe"
PIGLIT = Path("/usr/bin/piglit")
DEBIAN_PYTHON = "/usr/bin/python3"
DEBIAN_MODULES = {
    "PIL": "python3-pil", "requests": "python3-requests", "yaml": "python3-yaml",
    "packaging": "python3-packaging",
}  # fmt: skip
GLRETRACE_WRONG = {  # trace -> what piglit may report
    "es2tri.trace": {"fail"},
    "es2tri.gzip.trace": {"fail"},
    "es2tri.brotli.trace": {"fail"},
    "piglit-glx-multithread.trace": {"fail"},
    "egl-image.trace": {"fail"},
    "es2tri.zstd.trace": {"crash"},
    "es2tri.zstd-32k-frames.trace": {"crash"},
    "es2tri.zstd-noseektable.trace": {"crash"},
    # eglretrace overruns its heap: glibc aborts, or a corrupt malloc lock hangs it
    "readback-pixels.trace": {"crash", "timeout"},
}
CORPUS = Path(os.environ.get("RETRACE_CORPUS", "/work/corpus/traces"))


def piglit() -> Path:
    """Debian's piglit, and the Python packages its replayer needs that it does not pull."""
    reference_tool("piglit")  # skips, or fails under RETRACE_REQUIRE_REFERENCE
    for module, package in DEBIAN_MODULES.items():
        probe = subprocess.run([DEBIAN_PYTHON, "-c", f"import {module}"], capture_output=True)
        if probe.returncode != 0:
            missing_dependency(f"{DEBIAN_PYTHON}'s {module}", f"apt-get install {package}")
    return PIGLIT


def sample_checksums() -> dict[str, str]:
    """The sample file's traces with a checksum for the device, in its order."""
    text = (TRACES / "traces-llvmpipe.yml").read_text()
    found = re.findall(rf'^  (\S+):\n    {DEVICE}:\n      checksum: "(\w+)"', text, re.M)
    return dict(found)


def list_layout(checksums: dict[str, str]) -> str:
    lines = ["traces:"]
    for path, checksum in checksums.items():
        lines += [f"  - path: {path}", "    expectations:", f"      - device: {DEVICE}",
                  f'        checksum: "{checksum}"']  # fmt: skip
    return "\n".join(lines) + "\n"


def run_piglit(description: Path, db: Path, out: Path, display: str) -> dict[str, dict]:
    env = {
        **os.environ,
        "PATH": f"/usr/bin:{os.environ.get('PATH', '')}",
        "DISPLAY": display,
        "PIGLIT_REPLAY_DESCRIPTION_FILE": str(description),
        "PIGLIT_REPLAY_DEVICE_NAME": DEVICE,
        "PIGLIT_REPLAY_EXTRA_ARGS": f"--db-path {db}",
    }
    done = subprocess.run(
        [DEBIAN_PYTHON, str(piglit()), "run", "replay", "-j1", "--timeout", "60", str(out)],
        capture_output=True, text=True, env=env, timeout=1800,
    )  # fmt: skip
    assert (out / "results.json.bz2").exists(), done.stdout[-2000:] + done.stderr[-2000:]
    return load(out)


def run_retrace(description: Path, db: Path, out: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "retrace", "batch", str(description), "--device", DEVICE,
         "--db-path", str(db), "-o", str(out), "--db", str(out.with_suffix(".duckdb")),
         "--jobs", "2"],
        capture_output=True, text=True, timeout=1800,
    )  # fmt: skip


def load(out: Path) -> dict[str, dict]:
    tests = json.loads(bz2.decompress((out / "results.json.bz2").read_bytes()))["tests"]
    # keyed by the test's name: a replayer that timed out or raised reports no image
    return {name.split("@", 2)[2].replace("@", "/"): t for name, t in tests.items()}


def piglit_checksum(test: dict) -> str | None:
    """The checksum piglit computed: in the name of the image it kept on failure."""
    match = re.search(
        r"-([0-9a-f]{32})\.png$", (test["images"] or [{}])[0].get("image_render") or ""
    )
    return match.group(1) if match else None


def test_same_results_as_piglits_replayer_on_the_sample(tmp_path, x_display):
    """The sample file, with its real llvmpipe checksums: retrace passes every trace; piglit
    passes the same ones but where glretrace's image is known to be wrong."""
    checksums = sample_checksums()
    assert len(checksums) == 24
    description = tmp_path / "traces-llvmpipe.yml"
    description.write_text(list_layout(checksums))
    theirs = run_piglit(description, TRACES, tmp_path / "piglit", x_display)
    done = run_retrace(description, TRACES, tmp_path / "retrace")
    assert done.returncode == 0, done.stderr
    ours = load(tmp_path / "retrace")
    assert set(ours) == set(theirs) == set(checksums)
    for path in checksums:
        assert ours[path]["result"] == "pass", path
        assert theirs[path]["result"] in GLRETRACE_WRONG.get(path, {"pass"}), path
    # piglit's summary tools read retrace's results as they read piglit's
    summary = subprocess.run(
        [DEBIAN_PYTHON, str(PIGLIT), "summary", "console", str(tmp_path / "retrace")],
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert summary.returncode == 0, summary.stderr
    for path in checksums:
        assert f"trace/{DEVICE}/{path}: pass" in summary.stdout.splitlines()
    assert re.search(r"^\s+pass:\s+24$", summary.stdout, re.M)


def test_same_checksums_as_piglit_on_real_programs(tmp_path, x_display):
    """The corpus of real programs with no checksum expected: both fail every trace and keep
    its image, and the checksums they computed are equal."""
    traces = sorted(p.name for p in CORPUS.glob("*.trace")) if CORPUS.is_dir() else []
    traces = [t for t in traces if not t.startswith("piglit-")]  # no frame-ending call
    if not traces:
        pytest.skip(f"no corpus in {CORPUS} (traces/corpus/record.sh records it)")
    description = tmp_path / "corpus.yml"
    description.write_text(list_layout(dict.fromkeys(traces, "unknown")))
    theirs = run_piglit(description, CORPUS, tmp_path / "piglit", x_display)
    done = run_retrace(description, CORPUS, tmp_path / "retrace")
    assert done.returncode == 1, done.stderr  # every trace fails: no checksum is right
    ours = load(tmp_path / "retrace")
    equal = {
        t for t in traces
        if piglit_checksum(theirs[t]) == ours[t]["images"][0]["checksum_render"] is not None
    }  # fmt: skip
    assert equal == set(traces), sorted(set(traces) - equal)
    shutil.rmtree(tmp_path / "piglit")  # its images: megabytes per trace
