"""Parse rate of retrace's trace reader against `apitrace dump`, measured in the same run.

    python benchmarks/parse.py [TRACE ...]      (default: every trace in traces/)

For each trace prints calls/s and MB/s (decompressed) for
  - retrace's reader: decompress + scan into flat call records (what replay and
    profiling consume), in process;
  - `retrace dump` and `apitrace dump --color=never` as whole commands writing
    to /dev/null;
and the ratios retrace-read / apitrace-dump and retrace-dump / apitrace-dump.
Each figure is the best of --repeat runs, with the trace cache off (this measures
reading itself). Run by hand; timing is not a test.
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import time
from pathlib import Path

from tabulate import tabulate

from retrace.errors import TraceError
from retrace.trace import cache
from retrace.trace.reader import TraceReader

ROOT = Path(__file__).resolve().parent.parent


def read_once(path: Path) -> tuple[float, int, int]:
    """Seconds to read every call, the number of calls, decompressed bytes."""
    start = time.perf_counter()
    reader = TraceReader(path)
    calls = 0
    try:
        for batch in reader.batches():
            calls += len(batch)
    except TraceError:
        pass  # a cut-off sample still measures what it holds
    return time.perf_counter() - start, calls, reader.stream_bytes


def command_seconds(argv: list[str]) -> float:
    start = time.perf_counter()
    subprocess.run(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False)
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("traces", nargs="*", type=Path)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    cache.switch_off()
    traces = args.traces or sorted((ROOT / "traces").glob("*.trace"))
    apitrace = shutil.which("apitrace")
    if apitrace is None:
        sys.exit("benchmarks/parse.py: apitrace is not installed (apt-get install apitrace)")

    rows = []
    for path in traces:
        read_s, calls, size = min(read_once(path) for _ in range(args.repeat))
        dump_s = min(
            command_seconds([sys.executable, "-m", "retrace", "dump", "--no-cache", str(path)])
            for _ in range(args.repeat)
        )
        ref_s = min(
            command_seconds([apitrace, "dump", "--color=never", str(path)])
            for _ in range(args.repeat)
        )
        rows.append(
            [
                path.name,
                calls,
                f"{size / 1e6:.1f}",
                f"{calls / read_s / 1e6:.2f}",
                f"{size / read_s / 1e6:.0f}",
                f"{calls / dump_s / 1e6:.2f}",
                f"{calls / ref_s / 1e6:.2f}",
                f"{ref_s / read_s:.2f}",
                f"{ref_s / dump_s:.2f}",
            ]
        )
    print(
        tabulate(
            rows,
            headers=[
                "trace",
                "calls",
                "MB",
                "read Mcalls/s",
                "read MB/s",
                "retrace dump Mcalls/s",
                "apitrace dump Mcalls/s",
                "read/apitrace",
                "dump/apitrace",
            ],
        )
    )


if __name__ == "__main__":
    main()
