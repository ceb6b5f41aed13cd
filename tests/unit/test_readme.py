"""The README's first two commands must stay true."""

from __future__ import annotations

import re

from conftest import ROOT

BLOCKS = re.findall(r"```sh\n(.*?)```", (ROOT / "README.md").read_text(), re.S)


def test_second_command_is_the_ci_script():
    assert BLOCKS[1].strip().startswith("bash .ci/run")
    assert "python -m pytest" in (ROOT / ".ci" / "run").read_text()
