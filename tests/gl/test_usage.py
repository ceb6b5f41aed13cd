"""glretrace's habits on a real replay (tests/unit/test_usage.py has the refusals): its
replay options at the top level, `-o -`, glretrace options that mean nothing here, and no
Python warning on stderr whatever the profile's shape."""

from __future__ import annotations

import re

import pytest
from conftest import TRACES, run_retrace

GEARS = str(TRACES / "glxgears.trace")


def test_glretraces_replay_options_alone_replay():
    """`retrace -b TRACE` is `glretrace -b TRACE`: a replay, not a profile of nothing."""
    done = run_retrace("-b", GEARS)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith(b"Rendered 5 frames in ")


def test_options_that_mean_nothing_here_say_so_in_a_line():
    done = run_retrace("replay", "-b", "--headless", "--driver=sw", "--singlethread", GEARS)
    assert done.returncode == 0 and done.stdout.startswith(b"Rendered 5 frames")
    lines = done.stderr.decode().splitlines()
    assert [line.split(" has no effect: ")[0] for line in lines] == [
        "retrace: warning: --headless",
        "retrace: warning: --driver",
        "retrace: warning: --singlethread",
    ]


def test_output_dash_is_stdout(tmp_path):
    done = run_retrace("--pframes", "opengl: CPU Duration", "--quiet", "-o", "-", GEARS)
    assert done.returncode == 0 and done.stdout.startswith(b"#\tCPU Duration\n")
    assert not (tmp_path / "-").exists()


@pytest.mark.parametrize(
    "shape",
    [
        ["--warmup", "1"],
        ["--repeat", "2"],
        ["--repeat", "2", "--warmup", "1", "--stats"],
        ["--pdrawcalls", "opengl: Pixels Drawn"],  # two passes
    ],
)
def test_no_python_warning_reaches_the_user(shape):
    """numpy's 'invalid value encountered in cast' was printed on these (not --quiet'ed)."""
    done = run_retrace("--pframes", "opengl: GPU Duration, CPU Duration", *shape, GEARS)
    assert done.returncode == 0, done.stderr
    assert not re.search(rb"\w+Warning\b", done.stderr), done.stderr


def test_a_warning_is_printed_once():
    """Pixels Drawn on GLES, selected for two tables: one line, not one per table."""
    both = ["--pframes", "opengl: Pixels Drawn", "--pdrawcalls", "opengl: Pixels Drawn"]
    done = run_retrace(*both, "--quiet", str(TRACES / "es2gears.trace"))
    assert done.returncode == 0, done.stderr
    assert done.stderr.decode().splitlines() == [
        'retrace: warning: opengl metric "Pixels Drawn" is not available here: OpenGL ES has '
        "no GL_SAMPLES_PASSED queries; its cells will read '-'"
    ]
