"""Every part of the format grammar, in every format version, dumped as apitrace dumps it.

The traces come from `tracegen` (real programs only yield version 6); the
expected text comes from running Debian's `apitrace dump` on the same file.
"""

from __future__ import annotations

import pytest
from conftest import apitrace_dump, run_retrace
from tracegen import TraceWriter, every_value_kind, threads_and_leftovers


@pytest.mark.parametrize("version", range(7))
def test_every_value_kind_matches_apitrace(tmp_path, version):
    w = TraceWriter(version=version, properties={"process.name": "/usr/bin/app", "a.first": "x\ny"})
    every_value_kind(w)
    threads_and_leftovers(w)
    path = tmp_path / f"v{version}.trace"
    path.write_bytes(w.snappy(chunk_size=97))  # small chunks: values straddle chunk ends
    expected = apitrace_dump(path)
    assert b"glFloats" in expected and b"glCrashes" in expected  # the reference read it all
    got = run_retrace("dump", str(path))
    assert got.returncode == 0, got.stderr
    assert (
        got.stdout.decode("utf-8", "replace").splitlines()
        == expected.decode("utf-8", "replace").splitlines()
    )
    assert got.stdout == expected


@pytest.mark.parametrize(
    "flags", [["-v"], ["--calls", "3-9"], ["--calls", "*/frame"], ["--calls", "60"]]
)
def test_dump_options_match_apitrace(tmp_path, flags):
    w = TraceWriter()
    every_value_kind(w)
    every_value_kind(w)
    path = tmp_path / "t.trace"
    path.write_bytes(w.snappy())
    assert run_retrace("dump", *flags, str(path)).stdout == apitrace_dump(path, *flags)


STYLES = [
    ["--thread-ids"],
    ["--call-nos=no"],
    ["--arg-names=false", "--call-nos=0"],
    ["--multiline=no"],
    ["--thread-ids=yes", "--arg-names=no", "--multiline=no", "--calls", "*/frame"],
    ["--color=auto"],
]


@pytest.mark.parametrize("flags", STYLES, ids=" ".join)
def test_dump_styles_match_apitrace(tmp_path, flags):
    """apitrace dump's formatting options, on every value kind and several threads."""
    w = TraceWriter(properties={"process.name": "/usr/bin/app", "a.first": "x\ny"})
    every_value_kind(w)
    threads_and_leftovers(w)
    path = tmp_path / "t.trace"
    path.write_bytes(w.snappy())
    expected = apitrace_dump(path, *flags)
    assert run_retrace("dump", *flags, str(path)).stdout == expected


def test_dump_blobs_and_several_traces_match_apitrace(tmp_path, monkeypatch):
    """--blobs writes each blob to blob_call<N>.bin and names the file; several traces
    dump one after the other."""
    w = TraceWriter()
    every_value_kind(w)
    path = tmp_path / "t.trace"
    path.write_bytes(w.snappy())
    for side in ("apitrace", "retrace"):
        (tmp_path / side).mkdir()
    monkeypatch.chdir(tmp_path / "apitrace")
    expected = apitrace_dump(path, "--blobs", str(path))
    monkeypatch.chdir(tmp_path / "retrace")
    assert run_retrace("dump", "--blobs", str(path), str(path)).stdout == expected
    blobs = {p.name: p.read_bytes() for p in (tmp_path / "apitrace").iterdir()}
    assert blobs and blobs == {p.name: p.read_bytes() for p in (tmp_path / "retrace").iterdir()}
