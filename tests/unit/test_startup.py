"""The replay's and the profiler's modules import without numpy (50 ms and 15 MB to
import): it is imported where tables are built (dump, the writers, once a profile's
replay is over), not to replay or measure."""

from __future__ import annotations

import json
import subprocess
import sys

REPLAY_MODULES = (
    "retrace.commands.replay",
    "retrace.commands.profile",
    "retrace.replay.run",
    "retrace.replay.contain",
    "retrace.replay.replayer",
    "retrace.profile.commands",
    "retrace.profile.driver",
    "retrace.backends.opengl",
)


def test_replay_modules_import_no_numpy():
    check = (
        f"import sys, {', '.join(REPLAY_MODULES)}\n"
        "print(sorted(m for m in sys.modules if m.split('.')[0] == 'numpy'))"
    )
    r = subprocess.run([sys.executable, "-c", check], capture_output=True, text=True, check=True)
    assert r.stdout.strip() == "[]"


# The replay's modules, imported from the command line's to the replaying child's first steps
REPLAY_STEPS = (
    "import retrace.commands.replay, retrace.commands.profile, retrace.replay.run, "
    "retrace.profile.commands",
    "from retrace.replay import _guard, _vm, contain, sandbox",
    "import retrace.replay.replayer, retrace.profile.driver, retrace.replay.ws.headless",
    "from retrace.trace.container import load_libraries",
    "load_libraries()",
    "from retrace.backends.registry import load_backends",
    "load_backends()",
)


def libraries_loaded_after(steps: tuple[str, ...], first: tuple[str, ...]) -> list[str]:
    """The shared-library modules that `steps` load in a fresh interpreter after `first`."""
    check = "\n".join(
        (
            "import sys",
            "def libraries():",
            "    return {n for n, m in list(sys.modules.items())",
            "            if (getattr(m, '__file__', None) or '').endswith('.so')}",
            *first,
            "before = libraries()",
            *steps,
            "import json; print(json.dumps(sorted(libraries() - before)))",
        )
    )
    r = subprocess.run([sys.executable, "-c", check], capture_output=True, text=True, check=True)
    loaded: list[str] = json.loads(r.stdout)
    return loaded


def test_the_replay_loads_no_library_while_the_display_opens():
    """The replaying child opens the display in a thread (`open_ahead`) after
    `load_libraries`; an extension module imported after that waits for the driver to
    load (the dynamic loader's lock) instead of importing alongside it."""
    parent = REPLAY_STEPS[:2]  # up to the fork (`contain.supervise`), then the child's
    first = (*parent, "from retrace.replay.ws.driver_process import open_ahead", *REPLAY_STEPS[3:5])
    assert libraries_loaded_after(REPLAY_STEPS, first) == []


def test_the_program_loads_every_library_the_replaying_child_would_wait_for():
    """`retrace.main` loads its LIBRARIES before the command line, and the replaying child
    inherits them: nothing the command line, the fork and the child import up to the
    replay is a library left out of that list (in the child it would wait for the driver's
    loading, on its thread, instead of importing alongside it)."""
    first = ("import retrace.main", "retrace.main.import_libraries()")
    assert libraries_loaded_after(REPLAY_STEPS, first) == []


def test_the_commands_that_replay_are_told_apart_before_parsing(tmp_path):
    """The libraries load early for `replay`, `profile` and glretrace's forms of them, not
    for the other commands, help or the version."""
    from retrace.commands import COMMANDS
    from retrace.main import REPLAYING, replays

    assert set(REPLAYING) <= set(COMMANDS)
    trace = tmp_path / "t.trace"
    trace.write_bytes(b"")
    for args in (
        ["replay", "-b", "T"],
        ["profile", "T"],
        ["trim", "T"],
        ["-b", "T"],
        ["--pcalls=x", "T"],
    ):
        assert replays(args), args
    assert replays([str(trace)])
    for args in ([], ["dump", "T"], ["info", "T"], ["batch", "x.yml"], ["--help"],
                 ["replay", "--help"], ["--version"], ["nosuchfile"]):  # fmt: skip
        assert not replays(args), args
