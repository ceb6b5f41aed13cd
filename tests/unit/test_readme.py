"""The README stays short, its first two commands true, and every page it links to exists."""

from __future__ import annotations

import re

from conftest import ROOT

README = (ROOT / "README.md").read_text()
BLOCKS = re.findall(r"```sh\n(.*?)```", README, re.S)


def test_first_command_sets_up_then_runs_what_it_installed():
    # (tests/gl/test_readme.py runs its second half)
    setup, _, run = BLOCKS[0].strip().partition(" && ")
    assert setup == "bash tools/setup.sh" and (ROOT / "tools" / "setup.sh").is_file()
    assert run.startswith(".venv/bin/retrace ")


def test_second_command_is_the_ci_script():
    assert BLOCKS[1].strip().startswith("bash .ci/run")
    assert "python -m pytest" in (ROOT / ".ci" / "run").read_text()


def test_the_readme_is_short():
    # What a package index shows, and a newcomer reads first: the rest is in docs/.
    assert len(README.encode()) <= 10_000


def test_every_file_the_readme_links_to_exists():
    targets = re.findall(r"\]\(([^)#]+)(?:#[^)]*)?\)", README)
    local = [t for t in targets if "://" not in t]
    assert "docs/getting-started.md" in local
    assert [t for t in local if not (ROOT / t).exists()] == []


def test_on_a_package_index_the_links_name_files_the_sdist_holds():
    """PyPI shows setup.py's long description, the README whose relative links would lead
    nowhere there: each names its file instead, and MANIFEST.in puts that file in the sdist."""
    import runpy

    described = runpy.run_path(str(ROOT / "setup.py"), run_name="setup")["long_description"]()
    assert [t for t in re.findall(r"\]\(([^)]+)\)", described) if "://" not in t] == []
    named = {t for t in re.findall(r"\]\(([^)#]+)", README) if "://" not in t}
    assert "docs/profiling.md" in named and all(f"(`{path}`)" in described for path in named)
    manifest = (ROOT / "MANIFEST.in").read_text().splitlines()
    included = {
        path for line in manifest if line.startswith("include ") for path in line.split()[1:]
    }
    pages = "recursive-include docs *.md" in manifest
    assert [p for p in named if p not in included and not (pages and p.startswith("docs/"))] == []
