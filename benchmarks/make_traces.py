"""Make the large traces the benchmark figures in the issue notes were taken on.

    python benchmarks/make_traces.py [OUT_DIR]      (default: /tmp/retrace-bench)
    python benchmarks/make_traces.py OUT_DIR --calls 1e8 [--calls 1e7 ...]

- `million.trace`: one million cheap GL state calls in frames of 10,000 (written
  with the tests' trace writer): a call-bound trace, where per-call overhead is
  everything.
- `glxgears_12s.trace`: glxgears traced for 12 seconds with Debian's apitrace
  under a private Xvfb (about 260,000 calls, 12,000 frames): a real program
  whose time goes to rendering. Needs `apitrace`, `glxgears` and `Xvfb`; the
  program is killed at the end, so the trace ends mid-call, as real crash
  traces do.
- `calls-N.trace` (`--calls N`, only these then): `million.trace`'s frames, N calls,
  written as they are made, so that a trace of 10^8 calls (1.5 GB of events, several
  hundred MB of snappy) costs no more memory than one of 10^6: for peak RSS and time per
  call in the trace's length (`python benchmarks/corpus.py OUT_DIR/calls-*.trace`).
- `uploads-100.trace`, `uploads-400.trace`: frames that each upload a 256 KiB
  texture and write 256 KiB through a mapped buffer (the tests' generator): the
  same frames, four times as many, for peak RSS in the trace's length
  (`python benchmarks/corpus.py OUT_DIR/uploads-*.trace`).

Then: `python benchmarks/replay.py OUT_DIR/*.trace` and the other scripts.
"""

from __future__ import annotations

import argparse
import shutil
import struct
import subprocess
import sys
from pathlib import Path

import cramjam

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))

from gl.test_memory import uploads_trace  # noqa: E402 - the tests' generators of these traces
from gl.test_profile import big_trace  # noqa: E402
from reference import private_display  # noqa: E402
from tracegen import TraceWriter, glx_context, uint  # noqa: E402

from retrace.trace.writer import CHUNK_SIZE  # noqa: E402

FRAME = 10_000  # calls between swaps, as big_trace has them


def streamed_trace(path: Path, calls: int) -> None:
    """big_trace's calls, `calls` of them, written a snappy block at a time: the tests'
    writer makes the first frame (and the signatures it defines); every later event is
    the template of its function with the call's number."""
    w = TraceWriter()
    glx_context(w)
    first = w.enum((("GL_BLEND", 0x0BE2),), 0x0BE2)  # with the enum's signature
    again = w.enum((("GL_BLEND", 0x0BE2),), 0x0BE2)  # its id only
    made = min(calls, FRAME)
    for i in range(made):
        w.call("glEnable" if i % 2 else "glDisable", ("cap",), {0: again if i else first})
    if made == FRAME:
        w.call("glXSwapBuffers", ("dpy", "drawable"), {1: w.int(7)})
    templates = {}
    for name, arg_names, args in (
        ("glDisable", ("cap",), {0: again}),
        ("glEnable", ("cap",), {0: again}),
        ("glXSwapBuffers", ("dpy", "drawable"), {1: w.int(7)}),
    ):
        start = len(w._out)
        w.enter(name, arg_names, args)  # signatures defined: only their ids
        templates[name] = bytes(w._out[start:])
        del w._out[start:]
        w.calls -= 1
    no = w.calls
    out = bytearray(w.stream)
    enable, disable = templates["glEnable"], templates["glDisable"]
    swap = templates["glXSwapBuffers"]
    with path.open("wb") as f:
        f.write(b"at")

        def flush(final: bool = False) -> None:
            while len(out) >= CHUNK_SIZE or (final and out):
                block = bytes(cramjam.snappy.compress_raw(bytes(out[:CHUNK_SIZE])))
                f.write(struct.pack("<I", len(block)) + block)
                del out[:CHUNK_SIZE]

        while made < calls:
            end = min(made + FRAME, calls)
            for i in range(made, end):
                out += (enable if i % 2 else disable) + b"\x01" + uint(no) + b"\x00"
                no += 1
            made = end
            if made % FRAME == 0:
                out += swap + b"\x01" + uint(no) + b"\x00"
                no += 1
            flush()
        flush(final=True)


def record_glxgears(out: Path, seconds: int = 12) -> None:
    if not all(shutil.which(tool) for tool in ("apitrace", "glxgears", "Xvfb")):
        print("skipping glxgears: needs apitrace, glxgears and Xvfb", file=sys.stderr)
        return
    with private_display() as env:
        subprocess.run(
            ["timeout", "-s", "INT", str(seconds), "apitrace", "trace", "--api", "gl"]
            + ["-o", str(out), "glxgears"],
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            check=False,
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", nargs="?", type=Path, default=Path("/tmp/retrace-bench"))
    parser.add_argument(
        "--calls", action="append", type=float, help="make calls-N.trace only (1e8: 10^8)"
    )
    args = parser.parse_args()
    out: Path = args.out
    out.mkdir(parents=True, exist_ok=True)
    if args.calls:
        for calls in map(int, args.calls):
            short = f"{calls:.0e}".replace("+0", "").replace("+", "")
            path = out / f"calls-{short if float(short) == calls else calls}.trace"
            streamed_trace(path, calls)
            print(f"{path} {path.stat().st_size / 1e6:.1f} MB")
        return
    big_trace(out / "million.trace", 1_000_000)
    for frames in (100, 400):
        uploads_trace(out / f"uploads-{frames}.trace", frames)
    record_glxgears(out / "glxgears_12s.trace")
    for path in sorted(out.glob("*.trace")):
        print(f"{path} {path.stat().st_size / 1e6:.1f} MB")


if __name__ == "__main__":
    main()
