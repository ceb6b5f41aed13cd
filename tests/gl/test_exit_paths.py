"""How a profile ends when its output goes away or an option is out of bounds: the
cases that replay (the rest, with the long trace, are in tests/unit/test_exit_paths.py).
"""

from __future__ import annotations

import pytest
from conftest import run_retrace
from unit.test_exit_paths import GEARS, retrace


def test_a_profile_whose_reader_goes_away_ends_quietly(long_trace):
    proc = retrace("--pcalls", "opengl: CPU Duration", "--quiet", long_trace)
    assert proc.stdout is not None and proc.stdout.readline().startswith(b"#\tcall no")
    proc.stdout.close()
    _, err = proc.communicate(timeout=300)
    assert proc.returncode == 141 and err == b""


@pytest.mark.parametrize(
    ("args", "limit"),
    [
        (("--pframes", "opengl: GPU Duration", "--repeat", "9" * 23, GEARS), "1<=x<=10000"),
        (("--pframes", "opengl: GPU Duration", "--warmup", "10001", GEARS), "0<=x<=10000"),
        (("info", "--top", "10001", GEARS), "0<=x<=10000"),
        (("replay", "--loop", "1000000001", GEARS), "x<=1000000000"),
        (("--pframes", "opengl: GPU Duration, GPU time", GEARS), "selected twice"),
        (
            ("--pcalls", "cpu: Wall Duration; opengl: CPU Duration; cpu: wall duration", GEARS),
            "cpu",
        ),
    ],
)
def test_typos_are_one_line_and_exit_2(args, limit):
    r = run_retrace(*args)
    err = r.stderr.decode()
    assert r.returncode == 2 and r.stdout == b"", err
    assert err.count("\n") == 1 and err.startswith("retrace: error: ") and limit in err, err
