"""Write the retrace(1) man page from the command line's own help.

    python tools/manpage.py            # rewrites docs/retrace.1
    python tools/manpage.py --check    # exit 1 when docs/retrace.1 is not what it would write

Each command's section is what `retrace COMMAND --help` prints, asked of the click
program in this process (commands that parse their own arguments answer too), unwrapped
and set in troff so that man wraps it to the reader's terminal. Nothing is written by
hand, so the page cannot drift from the help: tests/unit/test_manpage.py fails when a
help text changed and the page was not written again.
"""

from __future__ import annotations

import contextlib
import io
import re
import sys
from pathlib import Path

import click
import click.formatting

ROOT = Path(__file__).resolve().parent.parent
PAGE = ROOT / "docs" / "retrace.1"
# Sections after the commands': what the help of no single command says.
TAIL = r""".SH EXIT STATUS
0 done; 1 the work failed or its input is bad; 2 a usage error; 3 \fB\-\-strict\fR: the
replay departed from the trace; 70 a bug in retrace; 128+N stopped by signal N.
\fBretrace diff\fR and \fBretrace compare\fR follow diff(1): 1 is a regression, 2 anything
that went wrong.
.SH ENVIRONMENT
.TP
\fBRETRACE_CACHE_DIR\fR, \fBRETRACE_CACHE_SIZE\fR
Where the trace cache is, and how large it may grow (\fBretrace cache info\fR).
.TP
\fBRETRACE_DEBUG\fR=1
A bug in retrace ends with its Python traceback instead of one line.
.SH SEE ALSO
glretrace(1), apitrace(1); the documentation in docs/ (a site: mkdocs build).
"""


def help_text(words: list[str]) -> str:
    """What `retrace WORDS --help` prints, its paragraphs and option rows unwrapped."""
    from retrace.commands.cli import cli

    out = io.StringIO()
    wrap, click.formatting.FORCED_WIDTH = click.formatting.FORCED_WIDTH, 100_000
    try:
        with contextlib.redirect_stdout(out), contextlib.suppress(SystemExit):
            cli.main([*words, "--help"], prog_name="retrace", standalone_mode=False)
    finally:
        click.formatting.FORCED_WIDTH = wrap
    return out.getvalue()


def subcommands(words: list[str]) -> list[str]:
    """The names under `Commands:` in the help of `retrace WORDS`."""
    listed = help_text(words).partition("\nCommands:\n")[2]
    return [line.split()[0] for line in listed.splitlines() if line.startswith("  ")]


def escape(text: str) -> str:
    """Text as troff prints it: backslashes and hyphens literal, no line read as a request."""
    text = text.replace("\\", "\\e").replace("-", "\\-")
    return "\\&" + text if text.startswith((".", "'")) else text


def section(words: list[str]) -> list[str]:
    """One command's help as troff: its synopsis, paragraphs (an indented run of lines, an
    example, kept as written), and a tagged paragraph per option or subcommand."""
    lines = help_text(words).splitlines()
    out = [f"\\fB{escape(lines[0].removeprefix('Usage: '))}\\fR"]
    if words:
        out.insert(0, f".SS {escape(' '.join(['retrace', *words]))}")
    listing = False  # in an Options: or Commands: list
    example = False  # in a run of indented lines
    for line, following in zip(lines[1:], [*lines[2:], ""], strict=True):
        indent = len(line) - len(line.lstrip())
        if example and (indent <= 2 or listing):
            out += [".fi", ".RE"]
            example = False
        if not line.strip():
            continue
        if re.fullmatch(r"[A-Z][a-z]*:", line):
            listing = True
        elif listing and indent == 2:
            tag, _, text = line.strip().partition("  ")
            if not text.strip() and following.startswith("   "):
                text = following  # click puts the help of a long tag on the next line
            out += [".TP", f"\\fB{escape(tag)}\\fR", escape(text.strip())]
        elif not listing and indent > 2:
            out += [] if example else [".PP", ".RS 4", ".nf"]
            out.append(escape(line[6:] if line.startswith(" " * 6) else line.strip()))
            example = True
        elif not listing:
            out += [".PP", escape(line.strip())]
    return out + ([".fi", ".RE"] if example else [])


def page() -> str:
    from retrace import __version__

    head = [
        f'.TH RETRACE 1 "" "retrace {__version__}" "User Commands"',
        ".SH NAME",
        "retrace \\- replay apitrace OpenGL traces and profile them",
        ".SH SYNOPSIS",
        "\\fBretrace\\fR [\\fIOPTIONS\\fR] \\fITRACE\\fR",
        ".br",
        "\\fBretrace\\fR \\fICOMMAND\\fR [\\fIOPTIONS\\fR] [\\fIARGS\\fR]...",
        ".SH DESCRIPTION",
    ]
    body = section([])
    body += [".SH COMMANDS"]
    for name in subcommands([]):
        body += section([name])
        for inner in subcommands([name]):
            body += section([name, inner])
    return "\n".join([*head, *body]) + "\n" + TAIL


def main(argv: list[str]) -> int:
    text = page()
    if argv == ["--check"]:
        if PAGE.read_text() == text:
            return 0
        print(
            f"retrace: error: {PAGE.relative_to(ROOT)} is not current: run python tools/manpage.py",
            file=sys.stderr,
        )
        return 1
    PAGE.write_text(text)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
