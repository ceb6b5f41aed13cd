"""`retrace trim` against apitrace's two trimmers on traces of real programs, same run.

    python benchmarks/trim.py [TRACE[@FRAMES] ...] [--json OUT.json]
        (default: every *.trace in $RETRACE_CORPUS, else /work/corpus/traces, traces/corpus,
        the long recordings in $RETRACE_LONG_CORPUS, else /work/corpus/long, and the games
        in $RETRACE_GAMES, else /work/corpus/games, if any: traces/corpus/record_long.sh,
        record_games.sh; TRACE@40 or TRACE@10-11 trims those frames alone)

Needs: apitrace (`apitrace trim`, `apitrace gltrim`, glretrace, eglretrace), Xvfb,
Mesa's EGL and llvmpipe, and the corpus `traces/corpus/record.sh` records.

For each trace, three single frames (early: 1, middle, late: the last complete
one; frame 0 where the trace has one), or the frames given, each trimmed by

  retrace       `retrace trim TRACE --frames N -o OUT` (its self-check on)
  apitrace      `apitrace trim --frames=N`
  gltrim        `apitrace gltrim -f N`

A trim is right when the reference replayer (glretrace; eglretrace for EGL
programs), not retrace, draws the trim's last frame with the MD5 it draws the
original's frame N with. A frame the reference draws differently in two
replays of the original is not deterministic and left out of the shares. The
table gives, per case, right or wrong per trimmer, its size as a share of the
original, and retrace's time to trim (self-check included) as a ratio of one
`retrace replay -b` of the original; then per trimmer the share of right trims,
the median size and retrace's median time ratio. The floor is the least a trim
of that frame can be: the data the frame draws with (the uploads kept to the
objects it uses, as retrace's OUT.trace.json counts them) and the frame's own
calls, as their share of retrace's trim (decompressed) times its size. The
summary holds the issue's targets: retrace right wherever a trimmer is; its size
at most 1.1 times gltrim's wherever gltrim is right; its median size at most
1.5 times the floor; its median time at most 3 replays. Run by hand; timing is
not a test.
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from reference import private_display, reference_replayer
from tabulate import tabulate

from retrace.trim.outline import outline

ROOT = Path(__file__).parents[1]
DEFAULT_CORPUS = Path("/work/corpus/traces")
DEFAULT_LONG = Path("/work/corpus/long")
DEFAULT_GAMES = Path("/work/corpus/games")
TRIMMERS = ("retrace", "apitrace trim", "gltrim")


def corpus(given: list[str]) -> list[tuple[Path, str | None]]:
    """The traces, each with the frames asked for (None: early, middle and late)."""
    if given:
        return [(Path(p), f or None) for p, _, f in (g.partition("@") for g in given)]
    folder = Path(os.environ.get("RETRACE_CORPUS", DEFAULT_CORPUS))
    long = Path(os.environ.get("RETRACE_LONG_CORPUS", DEFAULT_LONG))
    games = Path(os.environ.get("RETRACE_GAMES", DEFAULT_GAMES))
    traces = sorted(folder.glob("*.trace")) + sorted((ROOT / "traces/corpus").glob("*.trace"))
    traces += sorted(long.glob("*.trace")) + sorted(games.glob("*.trace"))
    if not traces:
        sys.exit(
            f"benchmarks/trim.py: no traces in {folder}: record them (traces/corpus/record.sh)"
        )
    return [(t, None) for t in traces]


def run(argv: list[str], env: dict[str, str]) -> tuple[float, subprocess.CompletedProcess[bytes]]:
    start = time.perf_counter()
    done = subprocess.run(argv, capture_output=True, env=env, timeout=600)
    return time.perf_counter() - start, done


def md5s(trace: Path, callset: str, env: dict[str, str]) -> list[str]:
    """The reference replayer's MD5s of the snapshots `callset` names."""
    exe = reference_replayer(trace)
    _, done = run([exe, "-s", "-", "--snapshot-format=MD5", "-S", callset, str(trace)], env)
    return done.stdout.decode().split()


def frames_of(trace: Path) -> int:
    done = subprocess.run(
        [sys.executable, "-m", "retrace", "info", str(trace)], capture_output=True, check=True
    )
    return int(json.loads(done.stdout)["FramesCount"])


def trim_commands(trace: Path, frames: str) -> dict[str, list[str]]:
    return {
        "retrace": [sys.executable, "-m", "retrace", "trim", str(trace), "--frames", frames],
        "apitrace trim": ["apitrace", "trim", f"--frames={frames}", str(trace)],
        "gltrim": ["apitrace", "gltrim", "-f", frames, str(trace)],
    }


def case(trace: Path, frames: str, env: dict[str, str], folder: Path) -> dict[str, object]:
    """The trims of `frames` ("40", "10-11"), judged by their last frame."""
    first, _, last = frames.partition("-")
    end_call = outline(str(trace), int(first), int(last or first), None).checks[-1][1]
    expected = md5s(trace, str(end_call), env)
    deterministic = bool(expected) and expected == md5s(trace, str(end_call), env)
    replay_s, _ = run([sys.executable, "-m", "retrace", "replay", "-b", str(trace)], env)
    row: dict[str, object] = {
        "deterministic": deterministic,
        "imaged": bool(expected),
        "replay_s": replay_s,
    }
    size = trace.stat().st_size
    for name, argv in trim_commands(trace, frames).items():
        out = folder / f"{name.replace(' ', '-')}.trace"
        out.unlink(missing_ok=True)
        seconds, done = run([*argv, "-o", str(out)], env)
        got = md5s(out, "*/frame", env)[-1:] if out.exists() else []
        row[name] = {
            "right": bool(expected) and got == expected,
            "size": out.stat().st_size / size if out.exists() else None,
            "seconds": seconds,
            "exit": done.returncode,
        }
        if name == "retrace" and out.exists():
            row["floor"] = floor(out, size)
    return row


def floor(out: Path, size: int) -> float:
    """The data the trim's frames draw with and their own calls, as a share of the original
    (their share of the trim's decompressed bytes, times the trim's size)."""
    facts = json.loads(Path(f"{out}.json").read_text())
    streamed = facts["trim"]["stream_bytes"]
    needed = streamed["setup_data_the_part_uses"] + streamed["part"]
    return needed / max(streamed["setup"] + streamed["part"], 1) * out.stat().st_size / size


def main() -> None:
    argv = sys.argv[1:]
    keep = argv.pop(argv.index("--json") + 1) if "--json" in argv else None
    argv = [a for a in argv if a != "--json"]
    traces = corpus(argv)
    rows, results = [], []
    with private_display() as env, tempfile.TemporaryDirectory() as tmp:
        for trace, given in traces:
            count = frames_of(trace) if given is None else 0
            chosen = [given] if given else sorted({min(1, count - 1), count // 2, count - 1} - {-1})
            for frame in map(str, chosen):
                r = case(trace, frame, env, Path(tmp))
                results.append(r | {"trace": trace.name, "frame": frame})
                if keep:
                    Path(keep).write_text(json.dumps(results, indent=1))
                cells = []
                for name in TRIMMERS:
                    t = r[name]
                    assert isinstance(t, dict)
                    mark = "right" if t["right"] else "WRONG"
                    cells.append(f"{mark} {100 * t['size']:.2f}%" if t["size"] else "no output")
                ratio = r["retrace"]["seconds"] / r["replay_s"]  # type: ignore[index]
                det = "" if r["deterministic"] else " (not deterministic)"
                det = det if r["imaged"] else " (no reference image)"
                cells.append(f"{100 * r['floor']:.2f}%" if "floor" in r else "-")  # type: ignore[operator]
                rows.append([f"{trace.stem} {frame}{det}", *cells, f"{ratio:.2f}"])
                print(*rows[-1], sep="\t", file=sys.stderr)
    headers = ["trace frame", *TRIMMERS, "floor", "retrace time / replay"]
    print(tabulate(rows, headers, tablefmt="github"))
    judged = [r for r in results if r["deterministic"]]
    summary = []
    for name in TRIMMERS:
        right = sum(1 for r in judged if r[name]["right"])  # type: ignore[index]
        sizes = [r[name]["size"] for r in results if r[name]["size"]]  # type: ignore[index]
        summary.append(
            f"{name}: {right}/{len(judged)} right, median size "
            f"{100 * statistics.median(sizes):.1f}%"
            if sizes
            else f"{name}: no output"
        )
    ratios = [r["retrace"]["seconds"] / r["replay_s"] for r in results]  # type: ignore[index]
    summary.append(
        f"retrace time to trim / one replay: median {statistics.median(ratios):.2f}, "
        f"max {max(ratios):.2f} (target: median <= 3)"
    )
    summary += targets(judged, results)
    print("\n" + "\n".join(summary))


def targets(judged: list[dict], results: list[dict]) -> list[str]:
    """The issue's targets on sizes and rightness, as lines."""
    missed = [
        f"{r['trace']} {r['frame']}"
        for r in judged
        if not r["retrace"]["right"] and any(r[n]["right"] for n in TRIMMERS)
    ]
    peers = [
        r["retrace"]["size"] / r["gltrim"]["size"]
        for r in results
        if r["gltrim"]["right"] and r["retrace"]["right"] and r["gltrim"]["size"]
    ]
    floors = [r["retrace"]["size"] / r["floor"] for r in results if r.get("floor")]
    return [
        f"retrace wrong where another trimmer is right: {', '.join(missed) or 'none'}",
        f"retrace / gltrim where gltrim is right: max {max(peers, default=0):.2f} "
        f"over {len(peers)} cases (target <= 1.1)",
        f"retrace / floor: median {statistics.median(floors) if floors else 0:.2f} (target <= 1.5)",
    ]


if __name__ == "__main__":
    main()
