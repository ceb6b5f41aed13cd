"""Damaged real traces, and a harness that runs retrace on them and sorts the outcomes.

The mutator works on the structure of apitrace's format rather than on raw
file bytes: it decompresses a real trace, knows where each call's enter event
starts (from retrace's own reader), and damages whole events (dropped,
duplicated, moved, swapped: a swap lands inside glBegin/glEnd or before any
context), the bytes of values inside events (type tags, lengths, numbers), or
splices a value from one call into another (an array where a number was).
The damaged stream is wrapped again in a valid container, so the damage
reaches the parser and the replay instead of stopping at a checksum. Two more
kinds damage the container itself and cut the file short.

The harness runs `retrace.cli.main` in a worker process, one case after
another (a new interpreter per case would cost ten times the case), and
watches it from outside: a case that does not answer within the timeout is a
hang, a worker that dies is a crash, attributed with gdb to the GL driver or
to retrace. `tests/test_fuzz.py` runs a small seeded set; `benchmarks/fuzz.py`
a large one, beside apitrace.
"""

from __future__ import annotations

import gzip
import io
import json
import os
import random
import re
import select
import shutil
import subprocess
import sys
import traceback
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import brotli
import zstandard
from tracegen import wrap_snappy

from retrace.trace.container import TraceStream
from retrace.trace.reader import TraceReader

# how retrace is asked to read a trace, per command
COMMANDS: dict[str, list[str]] = {
    "dump": ["dump"],
    "info": ["info"],
    "replay": ["replay", "-b"],
    "profile": ["--pframes", "opengl: GPU Duration", "--pcalls", "opengl: CPU Duration", "--quiet"],
}
# a crash counts as the driver's when the faulting frame is in one of these
_DRIVER_LIBRARIES = re.compile(r"/dri/|libgallium|libLLVM|_mesa\.so|libglapi|libGL|libEGL")
OUTCOMES = ("ok", "clean error", "traceback", "hang", "crash", "driver crash")
FAILURES = ("traceback", "hang", "crash")


@dataclass(frozen=True)
class Seed:
    """A real trace, decompressed, with the stream offset of every enter event."""

    name: str
    raw: bytes  # the file as recorded
    stream: bytes
    events: tuple[int, ...]  # enter offsets in stream order, then len(stream)

    @classmethod
    def load(cls, path: Path) -> Seed:
        stream = b"".join(TraceStream(path))
        offsets = sorted(
            offset for batch in TraceReader(path).batches() for offset in batch.column("offset")
        )
        return cls(path.name, path.read_bytes(), stream, (*map(int, offsets), len(stream)))

    def span(self, rng: random.Random) -> tuple[int, int]:
        """[start, end) of a random event: an enter and what follows it up to the next."""
        i = rng.randrange(len(self.events) - 1)
        return self.events[i], self.events[i + 1]


def _events(seed: Seed, rng: random.Random) -> bytearray:
    """Drop, duplicate, move or swap whole events."""
    out = bytearray(seed.stream)
    for _ in range(rng.randint(1, 3)):
        start, end = seed.span(rng)
        event = bytes(out[start:end])
        how = rng.choice(("drop", "duplicate", "move", "swap"))
        if how in ("drop", "move", "swap"):
            del out[start:end]
        if how == "drop":
            continue
        at, other_end = seed.span(rng)
        at = min(at, len(out))
        if how == "swap":
            other = bytes(out[at : min(other_end, len(out))])
            out[at : at + len(other)] = event
            out[start:start] = other
        else:
            out[at:at] = event
    return out


def _bytes(seed: Seed, rng: random.Random) -> bytearray:
    """A few edits inside events: a value's type tag, a length, a digit of a number."""
    out = bytearray(seed.stream)
    for _ in range(rng.randint(1, 6)):
        start, end = seed.span(rng)
        at = rng.randrange(start, end)
        how = rng.choice(("tag", "random", "step", "insert", "delete"))
        if how == "tag":
            out[at] = rng.randrange(0x10)  # apitrace's value types are 0x00-0x0f
        elif how == "random":
            out[at] = rng.randrange(256)
        elif how == "step":
            out[at] = (out[at] + rng.choice((-1, 1))) % 256
        elif how == "insert":
            out[at:at] = bytes([rng.randrange(256)])
        else:
            del out[at]
    return out


def _splice(seed: Seed, rng: random.Random) -> bytearray:
    """Bytes of one call written over another's: values of the wrong kind, in place."""
    out = bytearray(seed.stream)
    start, end = seed.span(rng)
    source, source_end = seed.span(rng)
    length = rng.randint(1, min(24, source_end - source))
    piece = seed.stream[source : source + length]
    at = rng.randrange(start, end)
    out[at : at + (length if rng.random() < 0.5 else 0)] = piece
    return out


def _wrap(stream: bytes, rng: random.Random) -> bytes:
    """A valid container around a stream, snappy with any chunk size most of the time."""
    kind = rng.choices(("snappy", "gzip", "zstd", "brotli"), (7, 1, 1, 1))[0]
    if kind == "gzip":
        return gzip.compress(stream, compresslevel=1)
    if kind == "zstd":
        return zstandard.ZstdCompressor(level=1).compress(stream)
    if kind == "brotli":
        return brotli.compress(stream, quality=1)
    return wrap_snappy(stream, rng.choice((64, 4096, 1 << 16, 1 << 20)))


def _container(seed: Seed, rng: random.Random) -> bytes:
    """Damage to the container: bytes of chunk lengths or compressed data."""
    out = bytearray(_wrap(seed.stream, rng))
    for _ in range(rng.randint(1, 4)):
        at = rng.randrange(len(out))
        out[at] = rng.randrange(256)
    return bytes(out)


def _cut(seed: Seed, rng: random.Random) -> bytes:
    """The recorded file cut short (a program killed while traced), or its stream."""
    if rng.random() < 0.5:
        return seed.raw[: rng.randrange(len(seed.raw))]
    start, end = seed.span(rng)
    return _wrap(seed.stream[: rng.randrange(start, end + 1)], rng)


_STREAM_DAMAGE: dict[str, Callable[[Seed, random.Random], bytearray]] = {
    "events": _events,
    "bytes": _bytes,
    "splice": _splice,
}
KINDS = (*_STREAM_DAMAGE, "container", "cut")


def mutate(seed: Seed, rng: random.Random) -> tuple[str, bytes]:
    """One damaged trace file from a seed: (the kind of damage, the file's bytes)."""
    kind = rng.choice(KINDS)
    if kind == "container":
        return kind, _container(seed, rng)
    if kind == "cut":
        return kind, _cut(seed, rng)
    return kind, _wrap(bytes(_STREAM_DAMAGE[kind](seed, rng)), rng)


def numbered_case(seeds: list[Seed], seed: int, number: int) -> tuple[str, bytes]:
    """Case `number` of a run seeded with `seed` (benchmarks/fuzz.py): the same whatever
    ran before it, so a failing case can be made again from its number."""
    rng = random.Random(f"{seed}-{number}")
    return mutate(rng.choice(seeds), rng)


# --- running retrace ---------------------------------------------------------------------


def classify(code: int, stderr: str) -> str:
    """ok: exit 0 and no traceback; clean error: non-zero, ending in the one `retrace:` line
    that is not a warning."""
    if "Traceback" in stderr:
        return "traceback"
    lines = stderr.splitlines()
    if code == 0:
        return "ok"
    errors = [
        line
        for line in lines
        if line.startswith("retrace: ") and not line.startswith("retrace: warning: ")
    ]
    return "clean error" if errors == lines[-1:] else "traceback"


def crash_site(argv: list[str]) -> str:
    """Rerun a crashed case alone under gdb: 'driver crash' when the faulting instruction
    is in the GL driver, a library of it or llvmpipe's JIT code (the only executable
    memory no file backs), else 'crash' (retrace's own, or one gdb cannot place)."""
    gdb = shutil.which("gdb")
    if gdb is None:
        return "crash"
    commands = ["run", "bt 1", "p/x $pc", "info proc mappings"]
    done = subprocess.run(
        [gdb, "-q", "-batch", *(a for c in commands for a in ("-ex", c)), "--args"]
        + [sys.executable, "-m", "retrace", *argv],
        capture_output=True,
        text=True,
        timeout=300,
    )
    out = done.stdout.splitlines()
    frame = next((line for line in out if line.startswith("#0 ")), "")
    pc = next((int(line.split()[-1], 16) for line in out if line.startswith("$1 = 0x")), None)
    if _DRIVER_LIBRARIES.search(frame) or (pc is not None and _in_jit_code(pc, out)):
        return "driver crash"
    return "crash"


def _in_jit_code(pc: int, mappings: list[str]) -> bool:
    """Whether gdb's `info proc mappings` puts `pc` in executable memory no file backs."""
    rows = (line.split() for line in mappings)
    anonymous = (f for f in rows if len(f) == 5 and f[0].startswith("0x") and "x" in f[4])
    return any(int(f[0], 16) <= pc < int(f[1], 16) for f in anonymous)


class Harness:
    """Runs retrace cases in a worker process; restarts it after a hang or a crash."""

    def __init__(self, timeout: float = 60) -> None:
        self.timeout = timeout
        self._proc: subprocess.Popen[str] | None = None

    def run(self, argv: list[str]) -> tuple[str, str]:
        """(outcome, stderr or what happened) of `retrace ARGV`."""
        if self._proc is None:
            self._proc = subprocess.Popen(
                [sys.executable, __file__, "--worker"],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.DEVNULL,  # the driver's own chatter
                text=True,
            )
        proc = self._proc
        assert proc.stdin is not None and proc.stdout is not None
        proc.stdin.write(json.dumps(argv) + "\n")
        proc.stdin.flush()
        if not select.select([proc.stdout], [], [], self.timeout)[0]:
            self.close()
            return "hang", f"no answer in {self.timeout} s"
        line = proc.stdout.readline()
        if not line:
            code = proc.wait()
            self.close()  # (its pipes too)
            return crash_site(argv), f"worker died with status {code}"
        result = json.loads(line)
        return classify(result["code"], result["stderr"]), result["stderr"]

    def close(self) -> None:
        if self._proc is not None:
            with self._proc:  # waits, and closes the pipes
                self._proc.kill()
            self._proc = None

    def __enter__(self) -> Harness:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _worker() -> None:
    """Run `retrace.cli.main` for each argv read from stdin; answer one JSON line each."""
    from retrace import cli

    answers = os.fdopen(os.dup(1), "w")
    for line in sys.stdin:
        sys.argv = ["retrace", *json.loads(line)]
        sys.stdout = open(os.devnull, "w")  # noqa: SIM115 (closed below)
        sys.stderr = err = io.StringIO()
        try:
            cli.main()
            code = 0
        except SystemExit as e:
            code = e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
        except BaseException:  # what would reach the user as a traceback
            traceback.print_exc(file=err)
            code = 1
        finally:
            sys.stdout.close()
        answers.write(json.dumps({"code": code, "stderr": err.getvalue()[-4000:]}) + "\n")
        answers.flush()


if __name__ == "__main__" and sys.argv[1:] == ["--worker"]:
    _worker()
