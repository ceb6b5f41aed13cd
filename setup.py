"""Build hook for the C extensions and the README as a package index shows it; everything
else is declared in pyproject.toml."""

import re
from pathlib import Path

from setuptools import Extension, setup

FLAGS = ["-O2", "-std=c99"]
RECORDS = ["retrace/trace/records.h"]  # the scanner's output, which the replay compiler reads


def long_description() -> str:
    """README.md for the package index (PyPI). Its links to the checkout's files are
    relative, which works in the repository and on the docs site, but on an index they lead
    nowhere, and the project has no published address to make them absolute: there each
    becomes its text with the file named, a file the sdist holds (MANIFEST.in)."""
    readme = (Path(__file__).resolve().parent / "README.md").read_text()
    return re.sub(r"\[([^]]+)\]\((?![a-z]+:)([^)#]+)(#[^)]*)?\)", r"\1 (`\2`)", readme)


if __name__ == "__main__":  # (as setuptools runs it; tests import it for long_description)
    setup(
        long_description=long_description(),
        long_description_content_type="text/markdown",
        ext_modules=[
            Extension(
                "retrace.trace._scanner",
                sources=["retrace/trace/_scanner.c"],
                depends=RECORDS,
                extra_compile_args=FLAGS,
            ),
            Extension(
                "retrace.trace._dump",
                sources=["retrace/trace/_dump.c"],
                depends=RECORDS,
                extra_compile_args=FLAGS,
            ),
            Extension(
                "retrace.replay._vm",
                sources=["retrace/replay/_vm.c"],
                depends=RECORDS,
                extra_compile_args=FLAGS,
            ),
            Extension(
                "retrace.replay._guard",
                sources=["retrace/replay/_guard.c"],
                extra_compile_args=FLAGS,
            ),
            Extension(
                "retrace.writer._tsv",
                sources=["writer/_tsv.c"],
                extra_compile_args=FLAGS,
            ),
        ],
    )
