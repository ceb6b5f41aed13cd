"""A CI job's last frame: the image piglit's replayer checks, and piglit's checksum of it.

piglit takes the last frame-ending call of the trace (the last call `apitrace
dump --calls=frame` lists), snapshots the image there with the replayer's
``--snapshot=N`` (before a swap: the frame just drawn), and checksums the PNG
as the MD5 of Pillow's ``Image.open(png).tobytes()``: the pixels as the file
holds them, RGB for a desktop-GL window, RGBA for GLES and framebuffer
objects, rows top to bottom. apitrace writes the PNG of a window in RGB even
for a GLES context (whose pixels it reads as RGBA), so the image is kept in
RGB here too. retrace's own replay takes the snapshot (`retrace replay
--snapshot N`, in a child process with the job's environment and timeout),
and the checksum is taken from the file as piglit takes it, so the two agree
wherever the pixels do.

A failing image is kept beside the results as piglit keeps it,
``<trace>-<call>-<checksum>.png``, with ``<trace>-<call>-diff.png`` beside it
when an image of the expected checksum is in that folder (kept by an earlier
run with `--keep-image`, or put there as ``<checksum>.png``, as Mesa's
reference image store names them).
"""

from __future__ import annotations

import hashlib
import os
from dataclasses import dataclass
from pathlib import Path

from retrace.trace.reader import TraceReader


@dataclass
class LastFrame:
    """The last frame of a CI job: its call, piglit's checksum, and its images if kept."""

    call_no: int
    checksum: str
    image: str | None = None
    difference: str | None = None


def judge(
    snapshot: Path, call_no: int, name: str, folder: Path, expected: str, keep: bool
) -> LastFrame:
    """Checksum the replay's `snapshot` of call `call_no`; keep it in `folder` as
    ``<name>-<call>-<checksum>.png`` if it differs from `expected` (or if `keep`), with a
    difference image where an image of the expected checksum is there."""
    rgb = snapshot.with_name("rgb.png")
    _as_rgb(snapshot, rgb)
    frame = LastFrame(call_no, image_checksum(rgb))
    passed = frame.checksum == expected
    if passed and not keep:
        return frame
    folder.mkdir(parents=True, exist_ok=True)
    kept = folder / f"{name}-{call_no:010d}-{frame.checksum}.png"
    os.replace(rgb, kept)
    frame.image = str(kept)
    if not passed and expected:
        reference = _expected_image(folder, expected, kept)
        diff = folder / f"{name}-{call_no:010d}-diff.png"
        if reference is not None and difference_image(kept, reference, diff):
            frame.difference = str(diff)
    return frame


def _as_rgb(png: Path, out: Path) -> None:
    from PIL import Image

    with Image.open(png) as image:
        (image if image.mode == "RGB" else image.convert("RGB")).save(out)


def _expected_image(folder: Path, checksum: str, other: Path) -> Path | None:
    """An image whose checksum is the expected one, if one is at hand."""
    return next((c for c in sorted(folder.glob(f"*{checksum}.png")) if c != other), None)


def last_frame_call(trace: str) -> int | None:
    """The number of the trace's last frame-ending call; None if it has none."""
    last = None
    for batch in TraceReader(trace).batches():
        if batch.frame_ends:
            last = batch.call(batch.frame_ends[-1])[0]
    return last


def image_checksum(png: str | Path) -> str:
    """piglit's checksum of an image file: the MD5 of its decoded pixels, lower-case hex."""
    from PIL import Image

    with Image.open(png) as image:
        return hashlib.md5(image.tobytes()).hexdigest()


def difference_image(actual: Path, expected: Path, out: Path) -> bool:
    """Write where two images differ (the absolute difference, brightened) to `out`; False if
    they cannot be compared (other sizes or modes)."""
    from PIL import Image, ImageChops

    with Image.open(actual) as a, Image.open(expected) as b:
        if a.size != b.size:
            return False
        a_rgb, b_rgb = a.convert("RGB"), b.convert("RGB")
    diff = ImageChops.difference(a_rgb, b_rgb)
    diff = diff.point(lambda v: 0 if v == 0 else min(255, 64 + 4 * v))
    diff.save(out)
    return True
