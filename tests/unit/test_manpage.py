"""docs/retrace.1 is what tools/manpage.py writes from the command line's help today."""

from __future__ import annotations

import subprocess
import sys

import click
from conftest import ROOT

from retrace.commands.replay import replay

PAGE = (ROOT / "docs" / "retrace.1").read_text()


def test_the_man_page_is_current():
    check = subprocess.run(
        [sys.executable, "tools/manpage.py", "--check"], cwd=ROOT, capture_output=True, text=True
    )
    assert check.returncode == 0, check.stderr  # (run python tools/manpage.py)


def test_every_option_of_replay_is_a_tagged_paragraph_with_its_help():
    for param in replay.params:
        if not isinstance(param, click.Option) or param.hidden:
            continue
        tag = PAGE.index(
            ".TP\n\\fB" + param.opts[0].replace("-", "\\-"), PAGE.index(".SS retrace replay")
        )
        first_word = (param.help or "").split()[0].replace("-", "\\-")
        assert PAGE[tag:].split("\n")[2].startswith(first_word), param.opts
