"""Traces missing from the traces folder, fetched from the description's download URL.

A trace's URL is the file's ``download-url`` with the trace's path appended,
as piglit builds it (optionally behind a caching proxy's URL). The standard
library's urllib fetches http(s) and ``file://`` alike (piglit's requests
cannot read ``file://``). A trace that cannot be fetched is one reason line
for that trace; the others still run. The file is written whole or not at all
(`retrace.writer.atomic`), so an interrupted download leaves no partial trace
for the next run to replay.
"""

from __future__ import annotations

import shutil
import urllib.request
from pathlib import Path

from retrace.writer.atomic import replaced

_TIMEOUT = 60.0  # seconds without data before a download is given up


def fetch(url: str, trace: str, destination: Path, proxy: str | None = None) -> str:
    """Download `trace` from `url` (+ its path) to `destination`; "" when done, else why not."""
    source = url + trace
    if proxy:
        source = proxy + source
    try:
        with urllib.request.urlopen(source, timeout=_TIMEOUT) as response:
            destination.parent.mkdir(parents=True, exist_ok=True)
            with replaced(str(destination), "wb") as out:
                shutil.copyfileobj(response, out, 1 << 20)
    except (OSError, ValueError) as exc:  # URLError is an OSError
        why = getattr(exc, "reason", None) or getattr(exc, "strerror", None) or exc
        return f"cannot download {source}: {why}"
    return ""
