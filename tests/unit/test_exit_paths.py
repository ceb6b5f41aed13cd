"""How retrace ends when its output goes away, an option is out of bounds or it has a bug.

A reader that stops reading (`| head`) ends the run quietly with 141, the
status of a Unix tool killed by SIGPIPE; a stdout closed from the start and a
count that can only be a typo are one `retrace: error:` line, and a bug in retrace
one `retrace: internal error:` line (its traceback with RETRACE_DEBUG=1).
"""

from __future__ import annotations

import os
import subprocess
import sys

from conftest import TRACES

GEARS = str(TRACES / "glxgears.trace")


def retrace(*args: str) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [sys.executable, "-m", "retrace", *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE
    )


def test_a_reader_that_goes_away_ends_the_run_quietly(long_trace):
    proc = retrace("dump", long_trace)
    assert proc.stdout is not None and proc.stdout.readline()
    proc.stdout.close()
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 141 and err == b""


def test_closed_stdout_is_one_line():
    r = subprocess.run(
        [sys.executable, "-m", "retrace", "dump", GEARS],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        timeout=120,
        preexec_fn=lambda: __import__("os").close(1),
    )
    assert r.returncode == 1 and r.stderr == b"retrace: error: standard output is closed\n"


def test_a_bug_in_retrace_is_one_line_unless_debugging(monkeypatch, capsys):
    import pytest

    from retrace.exits import DEBUG, INTERNAL_ERROR, run_reporting

    def buggy() -> None:
        print("measured so far")
        raise KeyError("frame")

    monkeypatch.delenv(DEBUG, raising=False)
    with pytest.raises(SystemExit) as ended:
        run_reporting(buggy)
    out, err = capsys.readouterr()
    assert ended.value.code == INTERNAL_ERROR and out == "measured so far\n"
    assert err.splitlines() == [
        "retrace: internal error: KeyError: 'frame' (a bug in retrace, please report it; "
        "RETRACE_DEBUG=1 shows where)"
    ]
    monkeypatch.setenv(DEBUG, "1")
    with pytest.raises(KeyError):
        run_reporting(buggy)


def test_ctrl_c_while_the_modules_import_is_one_line(tmp_path):
    """Ctrl-C before the command line has loaded (here a click that is sent SIGINT as it
    imports, in place of the real signal's moment) ends with retrace's own line and 130,
    never a traceback, and does not go on."""
    (tmp_path / "click").mkdir()
    (tmp_path / "click" / "__init__.py").write_text(
        "import os, signal, time\nos.kill(os.getpid(), signal.SIGINT)\ntime.sleep(60)\n"
    )
    for args in (["--version"], ["replay", "-b", GEARS]):
        r = subprocess.run(
            [sys.executable, "-m", "retrace", *args],
            capture_output=True,
            env={**os.environ, "PYTHONPATH": str(tmp_path)},
            timeout=120,
        )
        assert (r.returncode, r.stderr) == (130, b"retrace: interrupted\n"), args
