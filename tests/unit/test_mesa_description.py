"""Mesa's traces description files (retrace/batch/ci/): both layouts read, checked, planned
for a device, and rewritten by --update-checksums keeping everything but the checksums.

The files here are written in the layouts of Mesa's own `src/**/ci/traces-*.yml` (the
mapping one of today, with `%YAML 1.2`, labels and notes; the list one piglit 2022 reads),
comments included.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from conftest import ROOT

pytest.importorskip("ruamel.yaml")

from retrace.batch.ci.command import _extra_args  # noqa: E402
from retrace.batch.ci.description import plan, read_description  # noqa: E402
from retrace.batch.ci.update import update_checksums  # noqa: E402
from retrace.errors import UsageError  # noqa: E402

DEVICE = "gl-vmware-llvmpipe"

MAPPING = """\
%YAML 1.2
---
traces-db:
  download-url: "https://traces.example/mesa-tracie-public/"

traces:
  0ad/0ad-v2.trace:
    gl-vmware-llvmpipe:
      checksum: 296d9d77d7f412b73f2114670dced22b
    gl-zink-anv-tgl:
      checksum: 11111111111111111111111111111111
  bgfx/01-cubes.rdc:
    gl-vmware-llvmpipe:
      checksum: a453a832e0e07132bb2c92c3fed7df18
  # five minutes on llvmpipe
  ror/ror-default.trace:
    gl-vmware-llvmpipe:
      label: [skip, slow]
  blender/blender-demo-cube_diorama.trace:
    gl-vmware-llvmpipe:
      label: [skip, broken]
      text: GL_INVALID_OPERATION, incompletely rendered image
  unvanquished/unvanquished-lowest.trace:
    gl-vmware-llvmpipe:
      label: [no-perf]
      checksum: "0123456789abcdef0123456789abcdef"
      reviewed-by: someone  # a field of a future layout
  warzone2100/warzone2100-default.trace:
    gl-zink-anv-tgl:
      checksum: 8acdc244844d1e46ca04b73c3ff3f834
  unvanquished/unvanquished-ultra.trace:
    gl-vmware-llvmpipe:
      label: [unsupported]
"""

LIST = """\
traces-db:
  download-url: "https://traces.example/mesa-tracie-public/"

traces:
  - path: glmark2/jellyfish-v2.trace
    expectations:
      - device: gl-vmware-llvmpipe
        checksum: da850394d7f99a895322222cc95170af
  #- path: ror/ror-default.trace
  #  expectations:
      # timeout 5 min
      #- device: gl-vmware-llvmpipe
  - path: nheko/nheko-colors.trace
    expectations:
      - device: gl-vmware-llvmpipe
        checksum: 3a12c08087e16cfae4729f4e9d6c9387
      - device: gl-zink-anv-tgl
        checksum: 22222222222222222222222222222222
"""


def write(tmp_path: Path, text: str, name: str = "traces-llvmpipe.yml") -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


def test_mapping_layout_fields_labels_and_unknown_fields(tmp_path):
    d = read_description(write(tmp_path, MAPPING))
    assert d.layout == "mapping"
    assert d.download_url == "https://traces.example/mesa-tracie-public/"
    assert [t.path for t in d.traces][:2] == ["0ad/0ad-v2.trace", "bgfx/01-cubes.rdc"]
    zero_ad = d.traces[0]
    assert zero_ad.line == 7
    assert zero_ad.expectations[DEVICE].checksum == "296d9d77d7f412b73f2114670dced22b"
    blender = d.traces[3].expectations[DEVICE]
    assert blender.labels == ("skip", "broken") and blender.checksum is None
    assert blender.text == "GL_INVALID_OPERATION, incompletely rendered image"
    assert d.unknown == (
        "traces.unvanquished/unvanquished-lowest.trace.gl-vmware-llvmpipe.reviewed-by (line 27)",
    )


def test_list_layout(tmp_path):
    d = read_description(write(tmp_path, LIST))
    assert d.layout == "list" and d.unknown == ()
    assert [(t.path, t.line) for t in d.traces] == [
        ("glmark2/jellyfish-v2.trace", 5),
        ("nheko/nheko-colors.trace", 13),
    ]
    nheko = d.traces[1].expectations
    assert set(nheko) == {DEVICE, "gl-zink-anv-tgl"}
    assert nheko[DEVICE].labels == () and nheko[DEVICE].text is None


def test_plan_for_a_device_says_why_each_trace_is_skipped(tmp_path):
    d = read_description(write(tmp_path, MAPPING))
    planned = plan(d, DEVICE)
    reasons = {p.entry.path: p.skip for p in planned}
    assert reasons == {
        "0ad/0ad-v2.trace": "",
        "bgfx/01-cubes.rdc": "not an apitrace trace (RenderDoc)",
        "ror/ror-default.trace": "label skip",
        "blender/blender-demo-cube_diorama.trace":
            "label skip: GL_INVALID_OPERATION, incompletely rendered image",
        "unvanquished/unvanquished-lowest.trace": "",
        "warzone2100/warzone2100-default.trace": f"not expected on {DEVICE}",
        "unvanquished/unvanquished-ultra.trace": "label unsupported",  # and no checksum
    }  # fmt: skip
    # the tests of the device in piglit's results: those a label skips are not, as in piglit
    assert [p.entry.path for p in planned if p.test] == [
        "0ad/0ad-v2.trace", "bgfx/01-cubes.rdc", "unvanquished/unvanquished-lowest.trace"
    ]  # fmt: skip
    performance = {p.entry.path: p.skip for p in plan(d, DEVICE, performance=True)}
    assert performance["unvanquished/unvanquished-lowest.trace"] == "label no-perf"
    zink = {p.entry.path: p.skip for p in plan(d, "gl-zink-anv-tgl")}
    assert zink["warzone2100/warzone2100-default.trace"] == ""
    assert zink["ror/ror-default.trace"] == "not expected on gl-zink-anv-tgl"


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("traces: [\n", ":2:1: not valid YAML: "),
        ("traces-db: {}\n", ": no 'traces' in it: not a traces description file"),
        ("traces: 3\n", ":1:1: traces must be a list (path/expectations) or a mapping"),
        ("traces:\n  - expectations: []\n", ":2:5: path must be a non-empty string, not None"),
        ("traces:\n  a.trace:\n    dev:\n      checksum: [1]\n",
         ":3:5: checksum must be an MD5 in hex, not 'CommentedSeq'"),
        ("traces:\n  a.trace:\n    dev:\n      label: {a: 1}\n",
         ":3:5: label must be a name or a list of names"),
        ("traces:\n  - path: a.trace\n  - path: a.trace\n",
         ":3:1: a.trace is listed twice (line 2)"),
    ],
)  # fmt: skip
def test_a_malformed_file_is_one_line_naming_the_place(tmp_path, text, message):
    path = write(tmp_path, text)
    with pytest.raises(UsageError) as caught:
        read_description(path)
    assert str(caught.value).startswith(str(path)) and message in str(caught.value)
    assert caught.value.exit_code == 2 and "\n" not in str(caught.value)


def test_the_cli_says_it_in_one_line_exit_2(tmp_path):
    path = write(tmp_path, "traces:\n  a.trace:\n    dev:\n      checksum: [1]\n")
    done = subprocess.run(
        [sys.executable, "-m", "retrace", "batch", str(path), "--device", "dev",
         "--db", str(tmp_path / "r.duckdb")],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert done.returncode == 2 and done.stdout == ""
    assert (
        done.stderr == f"retrace: error: {path}:3:5: checksum must be an MD5 in hex, not "
        "'CommentedSeq'\n"
    )


def test_an_all_digit_checksum_reads_as_its_text(tmp_path):
    # YAML reads an unquoted all-digit MD5 as a number; piglit compares its text
    text = "traces:\n  a.trace:\n    dev:\n      checksum: 12345678901234567890123456789012\n"
    d = read_description(write(tmp_path, text))
    assert d.traces[0].expectations["dev"].checksum == "12345678901234567890123456789012"


@pytest.mark.parametrize("checksum", ["0" * 32, "0123" * 8, "1234e" + "0" * 27])
def test_a_checksum_that_yaml_reads_as_a_number_reads_as_its_text(tmp_path, checksum):
    """000...0 is 0 to YAML, 0123... loses its zero, 1234e000... is a float: the text."""
    text = f"traces:\n  a.trace:\n    dev: {{checksum: {checksum}}}\n  b.trace:\n    dev:\n"
    text += f"      checksum: {checksum}  # a comment\n"
    d = read_description(write(tmp_path, text))
    assert [t.expectations["dev"].checksum for t in d.traces] == [checksum, checksum]


SHAPES = """\
%YAML 1.2
---
# what a file holds before its checksums are measured
traces:
  a/empty.trace:
    gl-vmware-llvmpipe:
  a/blank.trace:
    gl-vmware-llvmpipe:  # to be filled
      checksum: ""
  a/zeros.trace:
    gl-vmware-llvmpipe:
      checksum: 00000000000000000000000000000000
  a/last.trace:
    gl-vmware-llvmpipe:
    other-device:
      checksum: 11111111111111111111111111111111
"""


def test_update_checksums_fills_every_shape_of_an_entry(tmp_path):
    """A device's key with nothing under it (Mesa's way to add a trace), an empty checksum,
    one YAML reads as a number: each gets its checksum, the rest stays as it was."""
    path = write(tmp_path, SHAPES)
    new = {"a/empty.trace": "a" * 32, "a/blank.trace": "b" * 32, "a/zeros.trace": "0" * 31 + "1",
           "a/last.trace": "d" * 32}  # fmt: skip
    assert update_checksums(path, DEVICE, new) == list(new)
    assert path.read_text() == SHAPES.replace(
        "    gl-vmware-llvmpipe:\n  a/blank",
        f'    gl-vmware-llvmpipe:\n      checksum: "{"a" * 32}"\n  a/blank',
    ).replace('checksum: ""', f'checksum: "{"b" * 32}"').replace(
        "0" * 32, f'"{"0" * 31}1"'
    ).replace(
        "    gl-vmware-llvmpipe:\n    other",
        f'    gl-vmware-llvmpipe:\n      checksum: "{"d" * 32}"\n    other',
    )
    assert {t.path: t.expectations[DEVICE].checksum for t in read_description(path).traces} == new


def changed_lines(before: str, after: str) -> list[tuple[str, str]]:
    a, b = before.splitlines(), after.splitlines()
    assert len(a) == len(b)
    return [(x, y) for x, y in zip(a, b, strict=True) if x != y]


def test_update_checksums_keeps_comments_order_quotes_and_labels(tmp_path, capsys):
    path = write(tmp_path, MAPPING)
    new = {
        "0ad/0ad-v2.trace": "f" * 32,
        "unvanquished/unvanquished-lowest.trace": "e" * 32,
        "warzone2100/warzone2100-default.trace": "d" * 32,  # no entry for the device: none made
        "bgfx/01-cubes.rdc": "a453a832e0e07132bb2c92c3fed7df18",  # unchanged
    }
    changed = update_checksums(path, DEVICE, new)
    assert changed == ["0ad/0ad-v2.trace", "unvanquished/unvanquished-lowest.trace"]
    assert changed_lines(MAPPING, path.read_text()) == [
        ("      checksum: 296d9d77d7f412b73f2114670dced22b", "      checksum: " + "f" * 32),
        ('      checksum: "0123456789abcdef0123456789abcdef"', f'      checksum: "{"e" * 32}"'),
    ]
    assert "unvanquished/unvanquished-lowest.trace: checksum updated under label [no-perf]" in (
        capsys.readouterr().err
    )


def test_update_checksums_in_the_list_layout(tmp_path):
    path = write(tmp_path, LIST)
    assert update_checksums(path, DEVICE, {"nheko/nheko-colors.trace": "c" * 32}) == [
        "nheko/nheko-colors.trace"
    ]
    assert changed_lines(LIST, path.read_text()) == [
        ("        checksum: 3a12c08087e16cfae4729f4e9d6c9387", "        checksum: " + "c" * 32)
    ]
    assert update_checksums(path, DEVICE, {"nheko/nheko-colors.trace": "c" * 32}) == []


def test_update_checksums_round_trips_the_sample_file(tmp_path):
    sample = (ROOT / "traces" / "traces-llvmpipe.yml").read_text()
    path = write(tmp_path, sample)
    first = read_description(path).traces[0]
    old = first.expectations[DEVICE].checksum
    update_checksums(path, DEVICE, {first.path: "0" * 31 + "1"})
    lines = changed_lines(sample, path.read_text())
    assert lines == [(f'      checksum: "{old}"', f'      checksum: "{"0" * 31}1"')]


def test_piglit_extra_args(capsys):
    options = _extra_args("--db-path /db -k --jwt-file /secret -c http://proxy/ --force-download")
    assert options == {
        "db_path": "/db", "keep_image": True, "proxy": "http://proxy/", "force_download": True
    }  # fmt: skip
    assert capsys.readouterr().err == (
        "retrace: warning: PIGLIT_REPLAY_EXTRA_ARGS: ignored: --jwt-file /secret\n"
    )
    assert _extra_args("--db-path=/x") == {"db_path": "/x"}


def test_unknown_fields_are_one_warning_and_a_device_no_trace_lists_is_refused(tmp_path):
    """No trace of the file is for the device: a mistake (a misspelt name), refused before
    anything runs, naming the file's devices; the unknown field is named once."""
    pytest.importorskip("duckdb")
    path = write(tmp_path, MAPPING)
    done = subprocess.run(
        [sys.executable, "-m", "retrace", "batch", str(path), "--device", "gl-nothing",
         "--db", str(tmp_path / "r.duckdb"), "-o", str(tmp_path / "out")],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert done.returncode == 2 and done.stdout == ""
    assert done.stderr.splitlines() == [
        f"retrace: warning: {path}: fields retrace does not know, kept and ignored: "
        "traces.unvanquished/unvanquished-lowest.trace.gl-vmware-llvmpipe.reviewed-by (line 27)",
        f"retrace: error: {path}: no trace lists the device 'gl-nothing'; the file's devices: "
        "gl-vmware-llvmpipe, gl-zink-anv-tgl",
    ]
    assert not (tmp_path / "out").exists() and not (tmp_path / "r.duckdb").exists()
