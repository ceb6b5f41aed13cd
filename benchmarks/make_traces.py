"""Make the large traces the benchmark figures in the issue notes were taken on.

    python benchmarks/make_traces.py [OUT_DIR]      (default: /tmp/retrace-bench)

- `million.trace`: one million cheap GL state calls in frames of 10,000 (written
  with the tests' trace writer): a call-bound trace, where per-call overhead is
  everything.
- `glxgears_12s.trace`: glxgears traced for 12 seconds with Debian's apitrace
  under a private Xvfb (about 260,000 calls, 12,000 frames): a real program
  whose time goes to rendering. Needs `apitrace`, `glxgears` and `Xvfb`; the
  program is killed at the end, so the trace ends mid-call, as real crash
  traces do.
- `uploads-100.trace`, `uploads-400.trace`: frames that each upload a 256 KiB
  texture and write 256 KiB through a mapped buffer (the tests' generator): the
  same frames, four times as many, for peak RSS in the trace's length
  (`python benchmarks/corpus.py OUT_DIR/uploads-*.trace`).

Then: `python benchmarks/replay.py OUT_DIR/*.trace` and the other scripts.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))

from gl.test_memory import uploads_trace  # noqa: E402 - the tests' generators of these traces
from gl.test_profile import big_trace  # noqa: E402
from reference import private_display  # noqa: E402


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
    out = Path(sys.argv[1] if len(sys.argv) > 1 else "/tmp/retrace-bench")
    out.mkdir(parents=True, exist_ok=True)
    big_trace(out / "million.trace", 1_000_000)
    for frames in (100, 400):
        uploads_trace(out / f"uploads-{frames}.trace", frames)
    record_glxgears(out / "glxgears_12s.trace")
    for path in sorted(out.glob("*.trace")):
        print(f"{path} {path.stat().st_size / 1e6:.1f} MB")


if __name__ == "__main__":
    main()
