"""`python -m retrace.debian`: the check of the Debian packages a replay needs that the
README's first command (tools/setup.sh) and CI run before installing anything."""

from __future__ import annotations

import subprocess
import sys

from conftest import ROOT

from retrace.debian import REPLAY, install_line, missing


def check(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "retrace.debian", *args],
        capture_output=True,
        text=True,
        cwd=ROOT,
    )


def test_the_replay_packages_are_installed_here():
    # The tests replay on this machine, so the check must find what the replay uses.
    assert missing(REPLAY) == []
    result = check()
    assert (result.returncode, result.stdout, result.stderr) == (0, "", "")


def test_a_missing_package_prints_the_line_that_installs_it_and_fails():
    result = check("libegl1", "retrace-no-such-package")
    assert result.returncode == 1 and result.stdout == ""
    assert result.stderr == (
        "retrace: error: a replay needs Debian packages; as root run: "
        f"{install_line(['retrace-no-such-package'])}\n"
    )
