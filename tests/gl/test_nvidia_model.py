"""The model of NVIDIA's EGL driver (tests/models/nvidia_egl.c), and retrace under it.

The first tests show that the model does what NVIDIA's driver was measured to do
(../shared/gpu/README.md), each with a small EGL program of its own (nvidia_probe.py)
run under the model and under Mesa alone: what the model departs from is what Mesa does.
The others replay every sample and corpus trace under the model, where retrace must give
the frames Mesa alone gives (the MD5 of every frame, and after every draw: the piglit
traces end no frame), on this machine's cores and on one, and profile them.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import SAMPLE_TRACES, TRACES
from models import nvidia_probe
from models.nvidia_probe import (
    EGL_BAD_ALLOC,
    EGL_SUCCESS,
    GL_BACK,
    GL_INVALID_OPERATION,
    GL_NO_ERROR,
    GL_NONE,
)

ALL_TRACES = SAMPLE_TRACES + sorted((TRACES / "corpus").glob("*.trace"))
# One core changes retrace's process policy (nothing loads ahead, nothing reads ahead), not
# what a trace binds, so there one trace per way of binding contexts stands for all (the whole
# set would add 40 s): GLX and EGL, desktop GL and ES, one context, contexts on two and three
# threads, shared ones, framebuffer objects, readbacks of the window.
ONE_CORE_TRACES = [
    TRACES / name
    for name in (
        "glxgears.trace",
        "es2gears.trace",
        "egl-two-threads.trace",
        "piglit-glx-multithread.trace",
        "glmark2-desktop-fbo.trace",
        "readback-pixels.trace",
        "corpus/mpv-gpu.trace",
        "corpus/qt6-qml.trace",
    )
]
SNAPSHOTS = ("--snapshot-format=MD5", "-s", "-", "-S", "frame,draw")
ONE_CORE = ("taskset", "-c", "0")


def probe(case: str, env: dict[str, str] | None = None) -> dict:
    done = subprocess.run(
        [sys.executable, nvidia_probe.__file__, case],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


# --- the model does what NVIDIA does -----------------------------------------------------------


def test_a_forked_child_of_the_initialising_process_cannot_create_contexts(nvidia_model):
    assert probe("fork_create", nvidia_model) == {
        "process": [True, EGL_SUCCESS],
        "thread": [True, EGL_SUCCESS],
        "child": [False, EGL_BAD_ALLOC],
    }
    assert probe("fork_create")["child"] == [True, EGL_SUCCESS]  # Mesa does not mind


def test_a_desktop_context_first_made_current_surfaceless_draws_into_nothing(nvidia_model):
    assert probe("surfaceless_first", nvidia_model) == {"buffers": [GL_NONE, GL_NONE], "red": 0}
    on_mesa = probe("surfaceless_first")  # Mesa sets the pbuffer's buffers at each binding
    assert on_mesa["buffers"][0] == GL_BACK and on_mesa["red"] == 255


def test_a_context_keeps_the_draw_buffer_it_set_on_its_next_surface(nvidia_model):
    assert probe("surface_first", nvidia_model) == {
        "first": [GL_BACK, GL_BACK],
        "fbo kept": True,
        "rebound": [GL_NONE, GL_BACK],
        "after eglReleaseThread": [GL_BACK, GL_NONE],
        "error": GL_NO_ERROR,
    }
    assert probe("surface_first")["rebound"][0] != GL_NONE  # Mesa: the new pbuffer's own


def test_a_pbuffer_has_no_front_buffer(nvidia_model):
    expected = {"error": GL_INVALID_OPERATION, "after": GL_BACK, "then": GL_NO_ERROR}
    assert probe("front_of_pbuffer", nvidia_model) == expected
    assert probe("front_of_pbuffer")["error"] == GL_NO_ERROR


# --- retrace under the model --------------------------------------------------------------------


def retrace(*args: str | Path, env: dict[str, str] | None = None, prefix: tuple[str, ...] = ()):
    return subprocess.run(
        [*prefix, sys.executable, "-m", "retrace", *map(str, args)],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )


_on_mesa: dict[Path, subprocess.CompletedProcess[str]] = {}


def on_mesa(trace: Path) -> subprocess.CompletedProcess[str]:
    """The trace's replay under Mesa alone, with its frame and draw MD5s (once per trace)."""
    if trace not in _on_mesa:
        done = retrace("replay", *SNAPSHOTS, trace)
        assert done.returncode == 0, done.stderr
        _on_mesa[trace] = done
    return _on_mesa[trace]


def check_same_frames(trace: Path, done: subprocess.CompletedProcess[str]) -> None:
    """`done`, a replay of `trace` that printed its frame and draw MD5s, exited 0 with the
    snapshots and the warnings (none) of Mesa's."""
    expected = on_mesa(trace)
    assert done.returncode == 0, done.stderr
    md5s, want = done.stdout.split(), expected.stdout.split()
    differing = sum(a != b for a, b in zip(md5s, want, strict=False))
    assert md5s == want, f"{differing} of {len(want)} snapshots differ; {done.stderr}"
    assert done.stderr == expected.stderr


@pytest.mark.parametrize("trace", ALL_TRACES, ids=lambda t: t.name)
def test_replays_the_frames_mesa_gives(trace, nvidia_model):
    check_same_frames(trace, retrace("replay", *SNAPSHOTS, trace, env=nvidia_model))


@pytest.mark.parametrize("trace", ONE_CORE_TRACES, ids=lambda t: t.name)
def test_replays_the_frames_mesa_gives_on_one_core(trace, nvidia_model):
    one_core = retrace("replay", *SNAPSHOTS, trace, env=nvidia_model, prefix=ONE_CORE)
    check_same_frames(trace, one_core)


@pytest.mark.parametrize("trace", ALL_TRACES, ids=lambda t: t.name)
def test_profiles(trace, nvidia_model):
    done = retrace("--pframes", "opengl: GPU Duration", trace, env=nvidia_model)
    assert done.returncode == 0, done.stderr
    assert "warning" not in done.stderr  # (none on Mesa alone)
    assert done.stdout.startswith("#\tGPU Duration\nframe\t")


@pytest.mark.parametrize("trace", ONE_CORE_TRACES, ids=lambda t: t.name)
def test_lists_metrics(trace, nvidia_model):
    done = retrace("--list-metrics", trace, env=nvidia_model)
    assert done.returncode == 0, done.stderr
    assert "GPU Duration" in done.stdout


# --- the other ways retrace replays, on a trace where both behaviours show --------------------

GEARS = TRACES / "glxgears.trace"  # desktop GL through GLX
API_MD5S = """import sys, retrace
print(*retrace.open(sys.argv[1]).replay(snapshots="frame,draw").md5s.values(), sep="\\n")"""


def test_a_sandboxed_replay_gives_the_frames_mesa_gives(nvidia_model):
    sandboxed = retrace("replay", "--sandbox", "best-effort", *SNAPSHOTS, GEARS, env=nvidia_model)
    check_same_frames(GEARS, sandboxed)


def test_the_python_api_replays_the_frames_mesa_gives(nvidia_model):
    done = subprocess.run(
        [sys.executable, "-c", API_MD5S, str(GEARS)],
        env=nvidia_model,
        capture_output=True,
        text=True,
        timeout=300,
    )
    check_same_frames(GEARS, done)


def test_trims_as_on_mesa(nvidia_model, tmp_path):
    """The trim and its check replay under the model, and keep what they keep on Mesa."""
    trims = []
    for env in (None, nvidia_model):
        out = tmp_path / f"{len(trims)}.trace"
        done = retrace("trim", "--frames", "2-3", GEARS, "-o", out, env=env)
        assert done.returncode == 0, done.stderr
        trims.append(out.read_bytes())
    assert trims[0] == trims[1]


def test_compares_from_warm_workers(nvidia_model):
    """`compare` forks its runs from a worker per side that started once."""
    pixels = (
        "--pframes",
        "opengl: Pixels Drawn",
        "--warmup",
        "0",
        "--min-runs",
        "4",
        "--max-runs",
        "4",
    )
    done = retrace("compare", GEARS, "--base", "A=1", "--new", "A=2", *pixels, env=nvidia_model)
    assert done.returncode == 0, done.stderr
