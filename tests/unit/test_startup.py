"""The replay's, the profiler's and the dump's modules import without numpy (50-130 ms and
15 MB to import): it is imported where tables are built (the writers, once a profile's
replay is over), not to replay, measure or dump."""

from __future__ import annotations

import ast
import subprocess
import sys

import pytest
from conftest import SAMPLE_TRACES

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


def test_a_dump_imports_no_numpy():
    """`retrace dump` with a call set and -v (every way calls are chosen): apitrace dump
    takes 8 ms, of which numpy's import alone would be many times."""
    command = [sys.executable, "-X", "importtime", "-m", "retrace", "dump", "-v"]
    r = subprocess.run(
        [*command, "--calls", "*/frame,10-20", str(SAMPLE_TRACES[0])],
        capture_output=True,
        text=True,
        check=True,
    )
    assert "glXSwapBuffers(" in r.stdout or "eglSwapBuffers(" in r.stdout
    imported = [line.rsplit("|", 1)[-1].strip() for line in r.stderr.splitlines()]
    assert "numpy" not in imported


# What each replaying command's parent imports before the fork (`contain.supervise`), and
# what its child imports from its first steps (`load_libraries`, then the display opening
# ahead) until the replay.
PARENT_STEPS = {
    "replay": ("import retrace.commands.replay, retrace.replay.run",),
    "profile": ("import retrace.commands.profile, retrace.profile.commands",),
}
CHILD_FIRST = (
    "from retrace.replay import _guard, _vm, contain, sandbox",
    "from retrace.replay.ws.driver_process import open_ahead",
    "from retrace.trace.container import load_libraries",
    "load_libraries()",
)
CHILD_STEPS = {
    "replay": ("import retrace.replay.replayer, retrace.trace.cache",),
    "profile": (
        "import retrace.replay.replayer, retrace.profile.driver, retrace.trace.cache",
        "from retrace.backends.registry import load_backends",
        "load_backends()",
    ),
}


def libraries_loaded_after(steps: tuple[str, ...], first: tuple[str, ...]) -> list[str]:
    """The shared-library modules that `steps` load in a fresh interpreter after `first`."""
    check = "\n".join(
        (  # (no json here: its library is one the steps may load)
            "import sys",
            "def libraries():",
            "    return {n for n, m in list(sys.modules.items())",
            "            if (getattr(m, '__file__', None) or '').endswith('.so')}",
            *first,
            "before = libraries()",
            *steps,
            "print(repr(sorted(libraries() - before)))",
        )
    )
    r = subprocess.run([sys.executable, "-c", check], capture_output=True, text=True, check=True)
    loaded: list[str] = ast.literal_eval(r.stdout)
    return loaded


# The same for a child forked before the command line is parsed (`contain.spare_child`):
# the parent has imported only the table of commands and `contain`; the child imports the
# command's work and its backend, and unpickles its body.
SPARE_PARENT_STEPS = ("import retrace.main, retrace.commands, retrace.replay.contain",)
SPARE_CHILD_STEPS = {
    "replay": ("import pickle, retrace.replay.run", *CHILD_STEPS["replay"]),
    "profile": (
        "import pickle, retrace.profile.commands, retrace.profile.driver, retrace.trace.cache",
        "import retrace.replay.replayer, retrace.backends.opengl",
    ),
}


@pytest.mark.parametrize("spare", [False, True], ids=["forked-at-supervise", "forked-first"])
@pytest.mark.parametrize("command", sorted(PARENT_STEPS))
def test_the_replay_loads_no_library_while_the_display_opens(command, spare):
    """The replaying child opens the display in a thread (`open_ahead`) after
    `load_libraries`; an extension module imported after that waits for the driver to
    load (the dynamic loader's lock) instead of importing alongside it."""
    parent = SPARE_PARENT_STEPS if spare else PARENT_STEPS[command]
    steps = (SPARE_CHILD_STEPS if spare else CHILD_STEPS)[command]
    assert libraries_loaded_after(steps, (*parent, *CHILD_FIRST)) == []
    assert libraries_loaded_after(steps, parent)  # (some, else the test shows nothing)


# What a profile's parent leaves to the child (which imports them while its display opens)
# or to where they are used: before the fork they would be the replay's wait.
NOT_IN_THE_PROFILE_PARENT = (
    "tempfile",  # the store makes its folder itself
    "shutil",  # ... and removes it
    "retrace.trace.callset",  # only for --frames and --calls
    "retrace.replay.program",  # the child's
    "retrace.profile.metadata",  # written after the replay, with -o or --metadata
)


def test_the_profile_parent_imports_what_it_needs_before_the_fork():
    check = (
        f"import sys; {'; '.join(PARENT_STEPS['profile'])}\n"
        "from retrace.profile.options import ProfileOptions\n"
        "from retrace.profile.checks import check_options\n"
        "check_options(ProfileOptions.select('opengl: GPU Duration', 'opengl: CPU Duration'))\n"
        f"print(sorted(m for m in {NOT_IN_THE_PROFILE_PARENT!r} if m in sys.modules))"
    )
    r = subprocess.run([sys.executable, "-c", check], capture_output=True, text=True, check=True)
    assert r.stdout.strip() == "[]"
