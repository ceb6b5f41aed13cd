"""Shared fixtures: the sample traces, the CLI, apitrace as the reference to compare with,
and the fixtures tests in several folders use (glfw, long_trace, runs).

Tests live in folders that say what they need: `unit/` no GL at all, `gl/` a real GL
context (Mesa llvmpipe through EGL), `reference/` the apitrace tools as well. The folder
gives each test its marker (`gl`, `reference`), so `pytest -m "not reference"` is the
quick loop and `pytest tests/unit` runs where there is no GL. A test file whose tests
need different things is split across folders under one name, and a module imports its
helpers only from a folder that needs less (reference from gl, gl from unit). `unit` and
`gl` are packages, so that their modules can share a name; `reference/` is none, as
benchmarks/ import a `reference` module of their own with tests/ on the path.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import NoReturn

import pytest
from hypothesis import HealthCheck, settings
from tracegen import TraceWriter, glx_context

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
TRACES = ROOT / "traces"
SAMPLE_TRACES = sorted(TRACES.glob("*.trace"))


# a bug in retrace ends with its traceback, which the tests look for, not with one line
os.environ["RETRACE_DEBUG"] = "1"

# Every command that replays forks its replay child before it parses its command line,
# whatever the load (`contain.spare_child` would not on a machine as busy as a test run's)
os.environ["RETRACE_SPARE_CHILD"] = "1"

# A warning a user would see (Python hides deprecations, imports and resources from them)
# fails the retrace a test runs: it becomes an exception, a traceback under RETRACE_DEBUG.
os.environ["PYTHONWARNINGS"] = ",".join(
    ["error"]
    + [
        f"ignore::{hidden}"
        for hidden in ("DeprecationWarning", "PendingDeprecationWarning", "ImportWarning",
                       "ResourceWarning")
    ]
)  # fmt: skip

# No property test fails for its time: Hypothesis' defaults fail an example that takes over
# 200 ms and examples slow to generate, which a loaded 2-core CI machine makes now and then.
settings.register_profile("retrace", deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.load_profile("retrace")

# No test reads or fills the user's trace cache: the session has its own (retrace.trace.cache).
TRACE_CACHE = tempfile.mkdtemp(prefix="retrace-test-cache-")
os.environ["RETRACE_CACHE_DIR"] = TRACE_CACHE


def pytest_unconfigure() -> None:
    shutil.rmtree(TRACE_CACHE, ignore_errors=True)


FOLDERS = ("unit", "gl", "reference")  # by what their tests need; the last two are markers


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Mark every test with the folder it is in (gl, reference); refuse a test outside them."""
    for item in items:
        folder = item.path.relative_to(HERE).parts[0]
        if folder not in FOLDERS:
            raise pytest.UsageError(
                f"{item.path.relative_to(ROOT)}: tests go in tests/unit (no GL), tests/gl "
                "(a GL context) or tests/reference (the apitrace tools)"
            )
        if folder != "unit":
            item.add_marker(folder)


def reference_tool(name: str) -> str:
    """Path of a reference tool (apitrace); skip where absent unless CI requires it."""
    path = shutil.which(name)
    if path is None:
        if os.environ.get("RETRACE_REQUIRE_REFERENCE"):
            pytest.fail(f"{name} is required by RETRACE_REQUIRE_REFERENCE but not installed")
        pytest.skip(f"{name} not installed (the reference tests need Debian's apitrace)")
    return path


def run_retrace(*args: str, check: bool = False) -> subprocess.CompletedProcess[bytes]:
    """Run the real CLI as a user would."""
    return subprocess.run(
        [sys.executable, "-m", "retrace", *args], capture_output=True, check=check, timeout=600
    )


def is_egl(trace: Path) -> bool:
    """Whether a trace was captured through EGL (eglretrace replays it, glretrace others)."""
    return b"eglMakeCurrent" in run_retrace("dump", str(trace)).stdout


def apitrace_dump(path: Path | str, *args: str) -> bytes:
    exe = reference_tool("apitrace")
    return subprocess.run(
        [exe, "dump", "--color=never", *args, str(path)],
        capture_output=True,
        check=True,
        timeout=600,
    ).stdout


def missing_dependency(what: str, install: str) -> NoReturn:
    """Skip for a missing test dependency, or fail under RETRACE_REQUIRE_REFERENCE."""
    if os.environ.get("RETRACE_REQUIRE_REFERENCE"):
        pytest.fail(
            f"{what} is required by RETRACE_REQUIRE_REFERENCE but not installed ({install})"
        )
    pytest.skip(f"{what} is not installed; the window tests need it ({install})")


@pytest.fixture(scope="module")
def glfw() -> ModuleType:
    try:
        import glfw
    except ImportError:
        missing_dependency("the Python package glfw", "pip install glfw")
    return glfw


@pytest.fixture(scope="module")
def long_trace(tmp_path_factory) -> str:
    """A trace whose dump and calls table are far bigger than a pipe holds (64 KiB)."""
    w = TraceWriter()
    glx_context(w)
    for i in range(10_000):
        w.call("glClearColor", ("r", "g", "b", "a"), {k: w.float(i / 10_000) for k in range(4)})
    path = tmp_path_factory.mktemp("long") / "long.trace"
    path.write_bytes(w.snappy())
    return str(path)


@pytest.fixture
def tiny_tmpfs(tmp_path: Path) -> Iterator[Path]:
    """A 1 MiB file system, for what a full disk does; mounted by this process (`tiny.pid`
    says which), so that a later run can unmount one whose run was killed before its
    teardown (`pytest_sessionstart`)."""
    mount_point = tmp_path / "tiny"
    mount_point.mkdir()
    (tmp_path / "tiny.pid").write_text(str(os.getpid()))
    try:
        subprocess.run(
            ["mount", "-t", "tmpfs", "-o", "size=1M", "tmpfs", str(mount_point)],
            check=True,
            capture_output=True,
            timeout=30,
        )
    except (OSError, subprocess.SubprocessError):
        pytest.skip("cannot mount a tmpfs here (needs root)")
    yield mount_point
    subprocess.run(["umount", "-l", str(mount_point)], check=False, timeout=30)


def pytest_sessionstart(session: pytest.Session) -> None:
    """Lazily unmount the `tiny_tmpfs` file systems of runs killed before their teardown
    (their `tiny.pid` process gone, or none): pytest could not remove those runs' folders
    (pytest-of-USER/...), and would fail every later run at its exit, cleaning them up.
    Those of runs still going stay."""
    if not os.path.exists("/proc/self/mounts"):  # (not Linux: no tmpfs was mounted)
        return
    with open("/proc/self/mounts") as mounts:
        points = [Path(line.split()[1]) for line in mounts if line.split()[2:3] == ["tmpfs"]]
    for point in points:
        if point.name != "tiny" or not any(p.name.startswith("pytest-of-") for p in point.parents):
            continue
        try:
            os.kill(int((point.parent / "tiny.pid").read_text()), 0)
            continue  # (its run still goes on)
        except (OSError, ValueError):
            pass
        subprocess.run(["umount", "-l", str(point)], check=False, timeout=30)


@pytest.fixture(scope="session")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """The profiles `retrace diff` and `compare` are tested on (compare_runs.py), made once."""
    from compare_runs import profile_runs

    return profile_runs(tmp_path_factory)


@pytest.fixture(scope="session")
def nvidia_model(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    """The environment that puts the model of NVIDIA's EGL driver in place of Mesa's EGL
    vendor library (tests/models/nvidia.py), built once."""
    from models.nvidia import ModelBuildError, build, environment

    try:
        return environment(build(tmp_path_factory.mktemp("nvidia-model")))
    except ModelBuildError as e:
        pytest.fail(str(e))


@pytest.fixture(scope="session")
def apitrace() -> str:
    return reference_tool("apitrace")


@pytest.fixture(scope="session")
def x_display():
    """A private Xvfb for glretrace (retrace itself needs none)."""
    xvfb = shutil.which("Xvfb")
    if xvfb is None:
        reference_tool("Xvfb")  # skips, or fails under RETRACE_REQUIRE_REFERENCE
    for number in range(91, 120):
        if not Path(f"/tmp/.X{number}-lock").exists():
            break
    proc = subprocess.Popen(
        [xvfb, f":{number}", "-screen", "0", "1024x768x24", "-nolisten", "tcp"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    deadline = time.monotonic() + 60  # (at once when idle; a loaded machine takes longer)
    while not Path(f"/tmp/.X11-unix/X{number}").exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    yield f":{number}"
    proc.terminate()
    proc.wait(timeout=10)


def recorded_calls(path) -> Iterator[tuple[int, str, list, object]]:
    """(call no, name, args, return value) of every call, decoded as the replay compiler does."""
    from retrace.trace.model import NodeLists
    from retrace.trace.reader import TraceReader

    reader = TraceReader(path)
    sigs = reader.signatures
    for batch in reader.batches():
        nodes = NodeLists(batch)
        for call in batch.records():
            no, _, sig, _, _, start, _, first, nargs, ret, _, _ = call
            args = [
                nodes.value(start + s, sigs) if s >= 0 else None
                for s in batch.arguments(first, nargs)
            ]
            value = nodes.value(start + ret, sigs) if ret >= 0 else None
            yield no, sigs.functions[sig].name, args, value
