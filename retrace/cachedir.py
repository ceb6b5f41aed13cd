"""retrace's folder in the user's cache, shared by the registry cache and the trace cache."""

from __future__ import annotations

import os


def user_cache_dir() -> str:
    """$XDG_CACHE_HOME/retrace, else ~/.cache/retrace (the XDG specification says to ignore
    a relative $XDG_CACHE_HOME)."""
    xdg = os.environ.get("XDG_CACHE_HOME", "")
    base = xdg if os.path.isabs(xdg) else os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "retrace")
