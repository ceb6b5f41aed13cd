"""Reading profile tables back (`retrace diff`, `summary`): read_tables against the Python
row reader it keeps as its reference, on the same text, same run.

    python benchmarks/tables.py [--rows N] [--metrics M] [--repeat K]

Writes a glretrace-layout profile to a temporary file (a frames table, then a calls
table of N rows with M metrics, a `frame_end` row every 1,000 calls, a `-` in one cell
of seven), reads it as `retrace diff` does with each reader and prints the best CPU
time of each and their ratio. Needs nothing beyond the tests'
dependencies. Run by hand; timing is not a test.
"""

from __future__ import annotations

import argparse
import random
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))

from test_tsv_reader import reference  # noqa: E402 - the tests' line-by-line reader

from retrace.writer.tsv_reader import read_tables  # noqa: E402

NAMES = ["glDrawArrays", "glDrawElements", "glUniform4fv", "glBindTexture", "glClear"]


def profile_text(rows: int, metrics: int) -> str:
    rng = random.Random(1)
    header = "\t".join(f"Metric {m}" for m in range(metrics))
    lines = [f"#\t{header}"]
    lines += ["frame\t" + "\t".join(str(rng.randint(1, 10**6)) for _ in range(metrics))] * (
        rows // 1000
    )
    lines += ["", f"#\tcall no\tprogram\tname\t{header}"]
    for i in range(rows):
        cells = ("-" if (i + m) % 7 == 0 else str(rng.randint(1, 10**6)) for m in range(metrics))
        lines.append(f"call\t{i}\t{i % 5}\t{NAMES[i % len(NAMES)]}\t" + "\t".join(cells))
        if i % 1000 == 999:
            lines.append("frame_end")
    return "\n".join(lines) + "\n\n"


def best(read, path: Path, repeat: int) -> float:
    times = []
    for _ in range(repeat):
        start = time.process_time()
        with path.open(encoding="utf-8", errors="replace") as stream:
            read(stream)
        times.append(time.process_time() - start)
    return min(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--metrics", type=int, default=2)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "profile.tsv"
        path.write_text(profile_text(args.rows, args.metrics))
        fast = best(read_tables, path, args.repeat)
        slow = best(reference, path, args.repeat)
    print(
        f"{args.rows:,} rows x {args.metrics} metrics: read_tables {fast:.3f} s, "
        f"Python row reader {slow:.3f} s (CPU, best of {args.repeat}): {slow / fast:.1f}x"
    )


if __name__ == "__main__":
    main()
