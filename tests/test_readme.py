"""The README's first two commands must stay true."""

from __future__ import annotations

import re
import shlex

from conftest import ROOT, run_retrace

BLOCKS = re.findall(r"```sh\n(.*?)```", (ROOT / "README.md").read_text(), re.S)


def test_first_command_installs_and_profiles_a_sample_trace():
    install, _, run = BLOCKS[0].strip().partition(" && ")
    assert install == "pip install -e ."
    argv = shlex.split(run)
    assert argv[0] == "retrace" and (ROOT / argv[-1]).is_file()
    result = run_retrace(*argv[1:-1], str(ROOT / argv[-1]))
    assert result.returncode == 0, result.stderr
    lines = result.stdout.decode().splitlines()
    assert lines[0] == "#\tGPU Duration" and lines[1].startswith("frame\t")


def test_second_command_is_the_ci_script():
    assert BLOCKS[1].strip().startswith("bash .ci/run")
    assert "python -m pytest" in (ROOT / ".ci" / "run").read_text()
