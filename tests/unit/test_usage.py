"""How retrace answers a command line it cannot run, and its exit codes (docs/compare.md,
"Exit codes"): 2 for usage (what was typed: a misspelt command, an option that
does nothing where it is given, a contradiction, a named file that is missing or a
directory, a malformed RETRACE_* variable), 1 for input or work that failed (a file
that is no trace). None of these needs a GL context: all are refused before a replay.
"""

from __future__ import annotations

import pytest
from conftest import TRACES, run_retrace

GEARS = str(TRACES / "glxgears.trace")
SELECTION = ["--pframes", "opengl: GPU Duration"]


def one_error(done) -> str:
    err = done.stderr.decode()
    assert err.count("\n") == 1 and err.startswith("retrace: error: "), err
    return err.removeprefix("retrace: error: ").rstrip("\n")


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["replayy", "-b", GEARS], "no such command 'replayy'; did you mean 'replay'?"),
        (["dumpp", GEARS], "no such command 'dumpp'; did you mean 'dump'?"),
        (["profil", *SELECTION, GEARS], "no such command 'profil'; did you mean 'profile'?"),
        (["foo"], "no such command 'foo'; nor a file of that name (the commands: batch, "),
        (["batch", "runn", "m.toml"], "no such command 'runn'; did you mean 'run'?"),
        (["batch", "exprot", "a.duckdb"], "no such command 'exprot'; did you mean 'export'?"),
        (
            ["batch", "manifest"],
            "no such command 'manifest'; nor a file of that name (the "
            "commands: export, merge, run, sql)",
        ),
    ],
)
def test_a_misspelt_command_is_named_with_the_closest(args, message):
    done = run_retrace(*args)
    assert done.returncode == 2 and done.stdout == b""
    assert one_error(done).startswith(message)


def test_a_trace_named_like_a_command_is_still_profiled(tmp_path, monkeypatch):
    (tmp_path / "foo").write_bytes(b"not a trace")
    monkeypatch.chdir(tmp_path)
    done = run_retrace(*SELECTION, "foo")
    assert done.returncode == 1 and "no such command" not in one_error(done)
    # and a manifest named like a batch command is still run
    (tmp_path / "runn").write_text("[defaults]\n")
    done = run_retrace("batch", "runn")
    assert done.returncode == 2 and one_error(done) == "runn: no [[trace]] entries"


@pytest.mark.parametrize("args", [[], ["cache"], ["batch"]])
def test_bare_commands_print_their_help(args):
    done = run_retrace(*args)
    assert done.returncode == 0 and done.stderr == b""
    assert done.stdout.startswith(b"Usage: retrace")


@pytest.mark.parametrize(
    ("args", "env", "message"),
    [
        (["replay", "traces"], {}, "is a directory"),
        (["replay", "missing.trace"], {}, "does not exist"),
        ([*SELECTION, "missing.trace"], {}, "does not exist"),
        (["info", GEARS], {"RETRACE_CACHE_SIZE": "banana"}, "RETRACE_CACHE_SIZE='banana'"),
        (["--json", *SELECTION, GEARS], {}, "--json is for --list-metrics"),
        (["--stats", *SELECTION, GEARS], {}, "--stats is over --repeat's runs"),
        (["--stats", "--repeat", "1", *SELECTION, GEARS], {}, "--stats is over --repeat's"),
        (["-v", *SELECTION, GEARS], {}, "-v is for --gen-passes"),
        (["replay", "--sb", "--db", GEARS], {}, "--sb and --db contradict each other"),
        (["replay", "--samples", "-1", GEARS], {}, "-1 is not in the range"),
        (["--min-cpu-time", "-5", "--pcpu", GEARS], {}, "-5 is not in the range"),
        (["replay", "--bogus", GEARS], {}, "No such option"),
        (["cache", "info"], {"RETRACE_CACHE_SIZE": "banana"}, "RETRACE_CACHE_SIZE='banana'"),
        (["profile", "--resume", "/nonexistent"], {}, "does not exist"),
        (["export", "missing.tsv", "--perfetto", "x.pftrace"], {}, "missing.tsv"),
        (["batch", "missing.toml"], {}, "missing.toml"),
        (["summary", "missing.tsv"], {}, "missing.tsv"),
        (["diff", "missing.tsv", "other.tsv"], {}, "missing.tsv"),
    ],
)
def test_usage_errors_exit_2(args, env, message, monkeypatch):
    monkeypatch.chdir(TRACES.parent)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    done = run_retrace(*args)
    assert done.returncode == 2 and done.stdout == b""
    assert message in one_error(done)


@pytest.mark.parametrize("command", [["info"], ["dump"], ["replay"], SELECTION])
def test_a_file_that_is_no_trace_exits_1(tmp_path, command):
    junk = tmp_path / "junk.trace"
    junk.write_bytes(b"\x00" * 64)
    done = run_retrace(*command, str(junk))
    assert done.returncode == 1 and "junk.trace" in one_error(done)


def batch(tmp_path, manifest: str):
    path = tmp_path / "m.toml"
    path.write_text(f'[defaults]\npframes = "opengl: GPU Duration"\n{manifest}')
    done = run_retrace("batch", str(path), "--db", str(tmp_path / "r.duckdb"))
    assert not (tmp_path / "r.duckdb").exists()  # refused before anything ran
    return done, str(path)


GEARS_ENTRY = f'[[trace]]\npath = "{GEARS}"\n'


@pytest.mark.parametrize(
    ("manifest", "where", "message"),
    [
        ('repeat = "three"\n' + GEARS_ENTRY, "[defaults]", "repeat must be a whole number"),
        (GEARS_ENTRY + 'repeat = "three"\n', "[[trace]] #1", "repeat must be a whole number"),
        (GEARS_ENTRY + 'pcalls = "opengl: CPU Durration"\n', "[[trace]] #1",
         'pcalls: backend "opengl" has no metric "CPU Durration" (did you mean: CPU Duration'),
        (GEARS_ENTRY + 'pcalls = "opengll: CPU Duration"\n', "[[trace]] #1",
         'pcalls: no backend "opengll"'),
        (GEARS_ENTRY + GEARS_ENTRY.replace("[[trace]]", '[[trace]]\nname = "again"')
         + 'frames = "50-60"\n', "[[trace]] #2", "frames 50-60: the trace has 5 frames (0-4)"),
        ('calls = "5000-"\n' + GEARS_ENTRY, "[defaults]",
         "calls 5000-: the trace has 1459 calls (0-1458)"),
    ],
)  # fmt: skip
def test_a_manifest_is_checked_against_its_traces_before_any_job(
    tmp_path, manifest, where, message
):
    done, path = batch(tmp_path, manifest)
    assert done.returncode == 2
    assert one_error(done).startswith(f"{path}: {where}: {message}")


def test_early_checks_come_before_the_replay(tmp_path):
    """Mistakes a whole replay used to find: refused at once, and told where."""
    for args, message in [
        (["--frames", "50-60"], "--frames 50-60: the trace has 5 frames (0-4)"),
        (["--calls", ""], "--calls is empty"),
        (["--calls", "5000-6000"], "--calls 5000-6000: the trace has 1459 calls (0-1458)"),
        (["-o", str(tmp_path / "nodir" / "out.tsv")], "out.tsv: no such folder"),
    ]:
        done = run_retrace(*SELECTION, *args, GEARS)
        assert done.returncode == 2 and message in one_error(done)


@pytest.mark.parametrize(
    ("args", "command"),
    [
        (["replay", "-b", GEARS], "replay"),
        (["profile", *SELECTION, GEARS], "profile"),
        ([*SELECTION, GEARS], "profile"),  # glretrace's forms
        (["-b", GEARS], "profile"),  # (a replay, but which only click's options tell)
        (["--list-metrics", GEARS], "profile"),
        (["dump", GEARS], None),
        (["batch", "run", "m.toml"], None),
        (["replay", "--help"], None),
        (["--version"], None),
        (["replay", "--no-cache", "-b", GEARS], None),  # state the child inherits
        (["replay", "--sandbox=best-effort", GEARS], None),
        ([], None),
    ],
)
def test_the_words_that_fork_the_replay_child_before_parsing(args, command):
    """`retrace.commands.replays`: read before click is imported (`contain.spare_child`)."""
    from retrace.commands import replays

    assert replays(args) == command
