"""The README's first command profiles a sample trace for real."""

from __future__ import annotations

import shlex

from conftest import ROOT, run_retrace
from unit.test_readme import BLOCKS


def test_first_command_profiles_a_sample_trace():
    # Its first half, tools/setup.sh, installed the retrace these tests run.
    argv = shlex.split(BLOCKS[0].strip().partition(" && ")[2])
    assert argv[0] == ".venv/bin/retrace" and (ROOT / argv[-1]).is_file()
    result = run_retrace(*argv[1:-1], str(ROOT / argv[-1]))
    assert result.returncode == 0, result.stderr
    lines = result.stdout.decode().splitlines()
    assert lines[0] == "#\tGPU Duration" and lines[1].startswith("frame\t")
