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
from models.nvidia import ModelBuildError, build, environment
from models.nvidia_probe import (
    EGL_BAD_ALLOC,
    EGL_SUCCESS,
    GL_BACK,
    GL_INVALID_OPERATION,
    GL_NO_ERROR,
    GL_NONE,
)

ALL_TRACES = SAMPLE_TRACES + sorted((TRACES / "corpus").glob("*.trace"))
# One core changes the process policy (no overlap of loading and reading), not what a trace
# binds, so there one trace per way of binding contexts stands for all: GLX and EGL, desktop
# GL and ES, one context, contexts on several threads, framebuffer objects, a real program.
ONE_CORE_TRACES = [
    TRACES / name
    for name in (
        "glxgears.trace",
        "es2gears.trace",
        "egl-two-threads.trace",
        "piglit-glx-multithread.trace",
        "glmark2-desktop-fbo.trace",
        "corpus/mpv-gpu.trace",
    )
]
SNAPSHOTS = ("--snapshot-format=md5", "-s", "-", "-S", "frame,draw")
ONE_CORE = ("taskset", "-c", "0")


@pytest.fixture(scope="session")
def nvidia(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    """The environment that puts the model in place of Mesa's EGL vendor library."""
    try:
        return environment(build(tmp_path_factory.mktemp("nvidia-model")))
    except ModelBuildError as e:
        pytest.fail(str(e))


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


def test_a_forked_child_of_the_initialising_process_cannot_create_contexts(nvidia):
    assert probe("fork_create", nvidia) == {
        "process": [True, EGL_SUCCESS],
        "thread": [True, EGL_SUCCESS],
        "child": [False, EGL_BAD_ALLOC],
    }
    assert probe("fork_create")["child"] == [True, EGL_SUCCESS]  # Mesa does not mind


def test_a_desktop_context_first_made_current_surfaceless_draws_into_nothing(nvidia):
    assert probe("surfaceless_first", nvidia) == {"buffers": [GL_NONE, GL_NONE], "red": 0}
    on_mesa = probe("surfaceless_first")  # Mesa sets the pbuffer's buffers at each binding
    assert on_mesa["buffers"][0] == GL_BACK and on_mesa["red"] == 255


def test_a_context_keeps_the_draw_buffer_it_set_on_its_next_surface(nvidia):
    assert probe("surface_first", nvidia) == {
        "first": [GL_BACK, GL_BACK],
        "fbo kept": True,
        "rebound": [GL_NONE, GL_BACK],
        "error": GL_NO_ERROR,
    }
    assert probe("surface_first")["rebound"][0] != GL_NONE  # Mesa: the new pbuffer's own


def test_a_pbuffer_has_no_front_buffer(nvidia):
    expected = {"error": GL_INVALID_OPERATION, "after": GL_BACK, "then": GL_NO_ERROR}
    assert probe("front_of_pbuffer", nvidia) == expected
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


_on_mesa: dict[Path, list[str]] = {}


def frames_on_mesa(trace: Path) -> list[str]:
    """The trace's frame and draw MD5s under Mesa alone (once per trace)."""
    if trace not in _on_mesa:
        done = retrace("replay", *SNAPSHOTS, trace)
        assert done.returncode == 0, done.stderr
        _on_mesa[trace] = done.stdout.split()
    return _on_mesa[trace]


def check_same_frames(trace: Path, env: dict[str, str], prefix: tuple[str, ...] = ()) -> None:
    done = retrace("replay", *SNAPSHOTS, trace, env=env, prefix=prefix)
    assert done.returncode == 0, done.stderr
    expected = frames_on_mesa(trace)
    differing = sum(a != b for a, b in zip(done.stdout.split(), expected, strict=False))
    assert done.stdout.split() == expected, f"{differing} of {len(expected)} snapshots differ"


@pytest.mark.parametrize("trace", ALL_TRACES, ids=lambda t: t.name)
def test_replays_the_frames_mesa_gives(trace, nvidia):
    check_same_frames(trace, nvidia)


@pytest.mark.parametrize("trace", ONE_CORE_TRACES, ids=lambda t: t.name)
def test_replays_the_frames_mesa_gives_on_one_core(trace, nvidia):
    check_same_frames(trace, nvidia, ONE_CORE)


@pytest.mark.parametrize("trace", ALL_TRACES, ids=lambda t: t.name)
def test_profiles(trace, nvidia):
    done = retrace("--pframes", "opengl: GPU Duration", trace, env=nvidia)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("#\tGPU Duration\nframe\t")


@pytest.mark.parametrize("trace", ONE_CORE_TRACES, ids=lambda t: t.name)
def test_lists_metrics(trace, nvidia):
    done = retrace("--list-metrics", trace, env=nvidia)
    assert done.returncode == 0, done.stderr
    assert "GPU Duration" in done.stdout
