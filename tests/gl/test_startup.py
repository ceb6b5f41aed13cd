"""What a replay imports before it runs: numpy (50 ms and 15 MB to import) only where
tables are built, after the replay, so that `replay -b` starts as soon as glretrace does
and a profile measures as soon."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from conftest import TRACES

TRACE = str(TRACES / "es2tri.trace")


def stderr_lines(*args: str) -> list[str]:
    """The command's stderr under `python -X importtime`: the modules imported by the
    parent and by the child that replays, in order, among the command's own lines."""
    r = subprocess.run(
        [sys.executable, "-X", "importtime", "-m", "retrace", *args],
        capture_output=True,
        text=True,
        timeout=600,
        check=True,
    )
    return r.stderr.splitlines()


def modules_in_order(lines: list[str]) -> list[str]:
    """The modules imported, as often as imported (by the parent, then by the child too)."""
    return [line.rsplit("|", 1)[1].strip() for line in lines if line.startswith("import time:")]


def modules(lines: list[str]) -> set[str]:
    return set(modules_in_order(lines))


def imported(*args: str) -> set[str]:
    """Every module the command imports, in the parent and in the child that replays."""
    return modules(stderr_lines(*args))


def numpy_modules(modules: set[str]) -> set[str]:
    return {m for m in modules if m.split(".")[0] == "numpy"}


@pytest.mark.parametrize(
    "options",
    [["-b"], ["--calls", "0-20,*/draw"], ["--snapshot-format", "md5", "-s", "-", "-S", "*/draw"]],
    ids=["benchmark", "calls", "snapshots"],
)
def test_a_replay_imports_no_numpy(options):
    """Call sets (--calls, the calls to snapshot) are asked of every call in C."""
    modules = imported("replay", *options, TRACE)
    assert "retrace.replay.compiler" in modules  # the replaying child's imports are seen
    assert not numpy_modules(modules)


def test_a_profile_imports_numpy_only_for_tables_that_need_it(tmp_path):
    """The store, the loop's event records and the rows of the call tables are written
    without numpy, and so are TSV tables and their metadata (the trace's counts come from
    the replay); tables in another format import it once the replay is over."""
    trace = str(TRACES / "glxgears-interrupted.trace")  # frames, and calls and draws in them
    selection = ["--pframes", "opengl: GPU Duration", "--pcalls", "opengl: GPU Duration"]
    lines = stderr_lines(*selection, trace)
    assert "retrace.profile.rows" in modules(lines) and not numpy_modules(modules(lines))
    lines = stderr_lines(*selection, "-o", str(tmp_path / "tables.tsv"), trace)
    assert (tmp_path / "tables.tsv.json").exists() and not numpy_modules(modules(lines))
    lines = stderr_lines(*selection, "--format", "csv", "-o", str(tmp_path / "tables.csv"), trace)
    done = next(i for i, line in enumerate(lines) if line.startswith("retrace: pass 1 of 1 done"))
    replay, tables = modules(lines[:done]), modules(lines[done:])
    assert {"retrace.profile.events", "retrace.profile.rows", "retrace.replay.compiler"} <= replay
    assert not numpy_modules(replay)
    assert numpy_modules(tables)


def test_a_profile_defines_no_dataclass():
    """Its records are NamedTuples or plain classes: a dataclass costs about 1 ms to define
    (and its module 1 ms to import), in the parent or the child of every profile."""
    modules = imported("--pframes", "opengl: GPU Duration", TRACE)
    assert "retrace.profile.driver" in modules and "dataclasses" not in modules


def test_the_replay_child_forked_before_parsing_imports_no_click():
    """The replay child forks before the command line imports click, and is handed its work
    pickled (pickle: imported by both), without importing click itself (20 ms)."""
    lines = modules_in_order(stderr_lines("replay", "-b", TRACE))
    assert lines.count("pickle") == 2, "the work went to a child forked before parsing"
    assert lines.count("click.core") == 1  # the parent's
    assert "retrace.replay.compiler" in lines


# the modules of each replaying command's child, imported while its display opens
CHILD_MODULES = {
    "replay": "retrace.replay.run, retrace.replay.replayer, retrace.trace.cache",
    "profile": "retrace.profile.commands, retrace.profile.driver, retrace.backends.opengl",
}


@pytest.mark.parametrize("command", sorted(CHILD_MODULES))
def test_the_replay_looks_up_no_c_function_while_the_display_opens(command):
    """Looking up a C function (ctypes' dlsym) takes the dynamic loader's lock, which the
    display's thread holds while the driver loads: from `open_ahead` to where it waits for
    the display, the replaying child's main thread looks none up (the replayer's mallopt
    waited 14 ms there, until `load_libraries` did it first)."""
    check = "\n".join(
        (
            "import json, sys, threading",
            "from retrace.trace.container import load_libraries",
            "load_libraries()",
            "from retrace.replay.ws import driver_process",
            "main, looked_up, waiting = threading.get_ident(), [], []",
            "def hook(event, args):",
            "    if event == 'ctypes.dlsym' and threading.get_ident() == main and not waiting:",
            "        looked_up.append(str(args[1]))",
            "sys.addaudithook(hook)",
            "take = driver_process.open_display",
            "def taking():",
            "    waiting.append(True)",
            "    return take()",
            "driver_process.open_display = taking",  # (before the replayer imports it)
            "driver_process.open_ahead()",
            f"import {CHILD_MODULES[command]}",
            "from retrace.replay.replayer import Replayer",
            f"Replayer({TRACE!r})",
            "print(json.dumps([looked_up, waiting]))",
        )
    )
    r = subprocess.run([sys.executable, "-c", check], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    looked_up, waiting = json.loads(r.stdout)
    assert waiting  # (the replayer took the display there, else the test shows nothing)
    assert looked_up == []
