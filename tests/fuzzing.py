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

The harness runs `retrace.main.main` in a worker process, one case after
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
import struct
import subprocess
import sys
import traceback
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import brotli
import zstandard
from tracegen import uint, wrap_snappy

from retrace.trace.container import TraceStream
from retrace.trace.reader import TraceReader
from retrace.trace.reader import _uint as read_uint  # apitrace's varint

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


# --- numbers the driver sizes its writes by (benchmarks/fuzz_outputs.py) -----------------
#
# A second mutator for crafted traces: it changes only the numeric arguments of calls that
# make the driver write into memory (an output parameter in the registry) or change how
# much it writes (glPixelStore*) -- widths, heights, row lengths, pnames, bufSize, n --
# and shortens arrays recorded as outputs; everything else stays a valid trace. It reads
# the event grammar itself (apitrace's docs/FORMAT.markdown), as retrace's reader keeps no
# byte offsets of values.


@dataclass(frozen=True)
class Number:
    """One numeric value of an argument: the bytes of its tag and payload."""

    start: int
    end: int
    value: int | float


@dataclass(frozen=True)
class Recorded:
    """An array: where its length is written, and where each element starts (and ends)."""

    length_at: int
    length_end: int
    elements: tuple[int, ...]


@dataclass(frozen=True)
class Target:
    """The numbers and arrays of one event (enter or leave) of a call worth changing."""

    name: str
    issued: bool  # whether a replay issues the call (glGet* are left out)
    numbers: tuple[Number, ...]
    arrays: tuple[Recorded, ...]


class _Events:
    """Walks a version-6 event stream, keeping the signatures defined at first use."""

    def __init__(self, stream: bytes) -> None:
        self.data = stream
        self.functions: dict[int, str] = {}
        self.defined: set[tuple[int, int]] = set()  # (tag, id) of enums, bitmasks, structs
        self.members: dict[int, int] = {}

    def _string(self, pos: int) -> int:
        n, pos = read_uint(self.data, pos)
        return pos + n

    def value(self, pos: int, numbers: list[Number], arrays: list[Recorded]) -> int:
        data, start, tag = self.data, pos, self.data[pos]
        pos += 1
        if tag <= 2:  # null, false, true
            return pos
        if tag in (3, 4):  # sint, uint
            n, pos = read_uint(data, pos)
            numbers.append(Number(start, pos, -n if tag == 3 else n))
            return pos
        if tag in (5, 6):  # float, double
            size = 4 if tag == 5 else 8
            (x,) = struct.unpack("<f" if tag == 5 else "<d", data[pos : pos + size])
            numbers.append(Number(start, pos + size, x))
            return pos + size
        if tag in (7, 8):  # string, blob
            return self._string(pos)
        if tag in (9, 10, 12):  # enum, bitmask, struct: a signature defined at first use
            sig, pos = read_uint(data, pos)
            if (tag, sig) not in self.defined:
                self.defined.add((tag, sig))
                pos = self._signature(tag, sig, pos)
            if tag == 9:
                return self.value(pos, numbers, arrays)
            if tag == 10:
                return read_uint(data, pos)[1]
            for _ in range(self.members[sig]):
                pos = self.value(pos, numbers, arrays)
            return pos
        if tag == 11:  # array
            n, after = read_uint(data, pos)
            elements, at = [], after
            for _ in range(n):
                elements.append(at)
                at = self.value(at, numbers, arrays)
            arrays.append(Recorded(pos, after, (*elements, at)))
            return at
        if tag == 13:  # opaque pointer
            return read_uint(data, pos)[1]
        if tag == 14:  # repr: human, then machine
            return self.value(self.value(pos, [], []), numbers, arrays)
        if tag == 15:  # wide string
            n, pos = read_uint(data, pos)
            for _ in range(n):
                pos = read_uint(data, pos)[1]
            return pos
        raise ValueError(f"value tag {tag} at {start}")

    def _signature(self, tag: int, sig: int, pos: int) -> int:
        data = self.data
        if tag == 12:
            pos = self._string(pos)
            n, pos = read_uint(data, pos)
            self.members[sig] = n
            for _ in range(n):
                pos = self._string(pos)
            return pos
        n, pos = read_uint(data, pos)
        for _ in range(n):
            pos = self._string(pos)
            pos = self.value(pos, [], []) if tag == 9 else read_uint(data, pos)[1]
        return pos

    def calls(self, start: int) -> list[tuple[str, list[Number], list[Recorded]]]:
        """(function, numbers, arrays) of every enter and leave event from `start`."""
        data, pos, names, out = self.data, start, [], []
        while pos < len(data):
            kind = data[pos]
            pos += 1
            if kind == 0:  # enter: thread, signature, arguments
                pos = read_uint(data, pos)[1]
                sig, pos = read_uint(data, pos)
                if sig not in self.functions:
                    name_end = self._string(pos)
                    n, at = read_uint(data, pos)
                    self.functions[sig] = data[at:name_end].decode()
                    pos = name_end
                    n, pos = read_uint(data, pos)
                    for _ in range(n):
                        pos = self._string(pos)
                name = self.functions[sig]
                names.append(name)
            elif kind == 1:  # leave: the call's number, then its outputs and result
                no, pos = read_uint(data, pos)
                name = names[no] if no < len(names) else ""
            else:
                raise ValueError(f"event {kind} at {pos - 1}")
            numbers: list[Number] = []
            arrays: list[Recorded] = []
            while True:
                detail = data[pos]
                pos += 1
                if detail == 0:
                    break
                if detail == 1:  # an argument
                    pos = read_uint(data, pos)[1]
                    pos = self.value(pos, numbers, arrays)
                elif detail == 2:  # the result: not an argument
                    pos = self.value(pos, [], [])
                elif detail in (3, 5):  # thread, flags
                    pos = read_uint(data, pos)[1]
                else:
                    raise ValueError(f"call detail {detail} at {pos - 1} (a backtrace)")
            out.append((name, numbers, arrays))
        return out


_PIXEL_STORE = re.compile(r"glPixelStore[if]$")


def output_targets(seed: Seed) -> tuple[Target, ...]:
    """The events of a seed's calls that write through an output or set pixel-store state."""
    from retrace.gl.registry import load_registry
    from retrace.replay.effects import has_side_effects

    commands = load_registry("gl").commands
    targets = []
    for name, numbers, arrays in _Events(seed.stream).calls(seed.events[0]):
        command = commands.get(name)
        writes = command is not None and any(p.output for p in command.params)
        if (writes or _PIXEL_STORE.match(name)) and (numbers or arrays):
            issued = has_side_effects(name, command)
            targets.append(Target(name, issued, tuple(numbers), tuple(arrays)))
    return tuple(targets)


# numbers that size what the driver writes: pack state, pnames of many values, formats,
# types and targets of the biggest pixels, and edges
_INTERESTING = (
    *(0x0D02, 0x0D03, 0x0D04, 0x0D05, 0x806B, 0x806C, 0x912B, 0x912C, 0x912D, 0x912E),
    *(0x86A3, 0x0BA6, 0x0BA2, 0x8DF8, 0x87FF, 0x0B12),  # glGet*: arrays of values
    *(0x1908, 0x8D99, 0x1406, 0x8DAD, 0x1A00, 0x1901, 0x84F9),  # RGBA, floats, bitmaps
    *(0x806F, 0x8C1A, 0x8513, 0x8515, 0x9009, 0x0DE0, 0x8C18),  # texture targets
    *(0, 1, -1, 2, 3, 7, 8, 13, 255, 4096, 65535, 65536, 1 << 20, (1 << 31) - 1, -(1 << 31)),
)


def _number(old: int | float, rng: random.Random) -> bytes:
    """A new tagged number in place of `old`: an interesting one, a neighbour, a multiple."""
    if isinstance(old, float):
        x = rng.choice((0.0, 1.0, -1.0, 3.0, 4096.0, 1e9, old * 2, old + 1))
        return b"\x05" + struct.pack("<f", x)
    v = rng.choice(
        (
            rng.choice(_INTERESTING),
            old + rng.choice((-1, 1)),
            old * rng.choice((2, 16, 1000)),
            rng.randrange(1 << 32),
        )
    )
    return b"\x03" + uint(-v) if v < 0 else b"\x04" + uint(v)


def mutate_outputs(seed: Seed, targets: tuple[Target, ...], rng: random.Random) -> bytes:
    """1-3 changes to numbers or recorded arrays of the targets (mostly of calls a replay
    issues), wrapped in a valid container."""
    issued = [t for t in targets if t.issued] or list(targets)
    edits: dict[int, tuple[int, bytes]] = {}  # start -> (end, replacement)
    for _ in range(rng.randint(1, 3)):
        target = rng.choice(issued if rng.random() < 0.85 else targets)
        arrays = [a for a in target.arrays if len(a.elements) > 1]
        if arrays and (not target.numbers or rng.random() < 0.3):
            array = rng.choice(arrays)  # shortened: fewer values than the call wrote
            keep = rng.randrange(len(array.elements) - 1)
            edits[array.length_at] = (array.length_end, uint(keep))
            edits[array.elements[keep]] = (array.elements[-1], b"")
        elif target.numbers:
            number = rng.choice(target.numbers)
            edits[number.start] = (number.end, _number(number.value, rng))
    out, last = bytearray(seed.stream), len(seed.stream)
    for start in sorted(edits, reverse=True):  # from the end: offsets before stay valid
        end, replacement = edits[start]
        if end <= last:  # (an edit inside one made already is dropped)
            out[start:end] = replacement
            last = start
    return wrap_snappy(bytes(out), 1 << 20)


def numbered_output_case(
    seeds: list[tuple[Seed, tuple[Target, ...]]], seed: int, number: int
) -> tuple[str, bytes]:
    """Case `number` of a run seeded with `seed`: (the seed trace's name, the file)."""
    rng = random.Random(f"outputs-{seed}-{number}")
    trace, targets = rng.choice(seeds)
    return trace.name, mutate_outputs(trace, targets, rng)


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


def replay_outcome(harness: Harness, path: Path) -> tuple[str, str]:
    """retrace's outcome, telling its own out-of-bounds writes and driver crashes apart."""
    outcome, detail = harness.run([*COMMANDS["replay"], str(path)])
    if outcome == "clean error" and "retrace's own error" in detail:
        return "out-of-bounds write", detail
    if outcome == "clean error" and "driver crashed" in detail:
        return "driver crash", detail
    return outcome, detail


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
    """Run `retrace.main.main` for each argv read from stdin; answer one JSON line each."""
    from retrace.main import main

    answers = os.fdopen(os.dup(1), "w")
    for line in sys.stdin:
        sys.argv = ["retrace", *json.loads(line)]
        sys.stdout = open(os.devnull, "w")  # noqa: SIM115 (closed below)
        sys.stderr = err = io.StringIO()
        try:
            main()
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
