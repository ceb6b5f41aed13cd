"""Wall time of a corpus batch, locally and on a local Ray cluster, against a loop of the
peer; then a corpus diff of two drivers.

    python benchmarks/batch.py [--rounds 1] [--diff-runs 4] [TRACE ...]

Default traces: ten real-program traces of /work/corpus/traces (not in the
repository). Each round runs, one after another so that drift hits each alike:

- a shell-style loop of the peer's ``--pframes`` over the traces, one after
  another (what a batch replaces), the peer at its best: ``eglretrace --headless``
  on waffle's surfaceless EGL, no X server (``reference.PEER``);
- ``retrace batch`` locally (one job at a time);
- ``retrace batch --ray`` on a Ray cluster this script starts here: two nodes
  of one CPU and one unit of a custom resource each, so two jobs run at once
  (on a real cluster each node would have a GPU of its own).

Then, with ``--diff-runs N`` (0 to skip), N profile runs per trace under
llvmpipe and under softpipe (``GALLIUM_DRIVER``) into one database, and
`retrace diff DB:llvmpipe DB:softpipe`. Needs apitrace and the farm extra. Run by
hand; nothing here is a test.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from reference import PEER, need_peer, peer_environment
from tabulate import tabulate

CORPUS = Path("/work/corpus/traces")
TRACES = [CORPUS / f"{name}.trace" for name in (
    "love", "qt6-qml", "gtk4-widget-factory", "neverball", "wz2100", "mpv-gpu",
    "xss-hypertorus", "kitty", "glmark2-terrain", "glmark2-ideas")]  # fmt: skip
SELECTION = "opengl: GPU Duration, CPU Duration"


def manifest(folder: Path, traces: list[Path], runs: int) -> Path:
    path = folder / f"corpus-{runs}.toml"
    entries = "".join(f'\n[[trace]]\npath = "{t}"\n' for t in traces)
    path.write_text(
        f'[defaults]\npframes = "{SELECTION}"\nruns = {runs}\ntimeout = 1800\nretries = 0\n'
        f"resources = {{ replay = 1 }}\n{entries}"
    )
    return path


def timed(command: list[str], env: dict[str, str] | None = None, ok: int = 0) -> float:
    """Wall seconds of `command`; an exit status above `ok` ends the benchmark."""
    started = time.monotonic()
    done = subprocess.run(command, env=env, capture_output=True, text=True, check=False)
    if done.returncode > ok:
        sys.exit(f"batch benchmark: {' '.join(command[:4])}... failed: {done.stderr.strip()}")
    return time.monotonic() - started


def batch(*args: object) -> list[str]:
    return [sys.executable, "-m", "retrace", "batch", *map(str, args)]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("traces", nargs="*", type=Path, default=TRACES)
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument("--diff-runs", type=int, default=4)
    args = parser.parse_args()
    need_peer("benchmarks/batch.py")
    # Ray on loopback only, and no usage report sent out
    os.environ.update(RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER="0", RAY_USAGE_STATS_ENABLED="0")
    from ray.cluster_utils import Cluster

    folder = Path(tempfile.mkdtemp(prefix="retrace-batch-bench-"))
    one = manifest(folder, args.traces, 1)
    node: dict[str, Any] = {
        "num_cpus": 1,
        "resources": {"replay": 1},
        "object_store_memory": 100 << 20,
    }
    cluster = Cluster(initialize_head=True, head_node_args={**node, "include_dashboard": False})
    cluster.add_node(**node)
    cluster.wait_for_nodes()
    walls: dict[str, list[float]] = {"peer loop": [], "local batch": [], "Ray batch": []}
    env = peer_environment()
    try:
        for i in range(args.rounds):
            loop = 0.0
            for trace in args.traces:
                loop += timed([*PEER, "--pframes", SELECTION, str(trace)], env)
            walls["peer loop"].append(loop)
            db = folder / f"local-{i}.duckdb"
            walls["local batch"].append(timed(batch(one, "--db", db), env))
            db = folder / f"ray-{i}.duckdb"
            walls["Ray batch"].append(timed(batch(one, "--db", db, "--ray", cluster.address), env))
    finally:
        cluster.shutdown()
    reference = statistics.median(walls["peer loop"])
    rows = [
        [mode, f"{statistics.median(w):.1f}", f"{statistics.median(w) / reference:.2f}"]
        for mode, w in walls.items()
    ]
    print(f"{len(args.traces)} traces, 1 run each, {args.rounds} round(s), medians:")
    print(tabulate(rows, ["mode", "wall s", "ratio to the peer's loop"], disable_numparse=True))
    if args.diff_runs:
        many = manifest(folder, args.traces, args.diff_runs)
        db = folder / "drivers.duckdb"
        for driver in ("llvmpipe", "softpipe"):
            # exit 1, a job failed, is a finding: softpipe offers only OpenGL 3.3, for one
            wall = timed(batch(many, "--db", db, "--build", driver,
                               "--env", f"GALLIUM_DRIVER={driver}"), ok=1)  # fmt: skip
            print(f"\n{driver}: {args.diff_runs} runs of {len(args.traces)} traces in {wall:.0f} s")
        diff = [sys.executable, "-m", "retrace", "diff", f"{db}:llvmpipe", f"{db}:softpipe"]
        print(subprocess.run(diff, capture_output=True, text=True, check=False).stdout)
    print(f"(databases kept in {folder})")


if __name__ == "__main__":
    main()
