"""Keeps the unit tests honest: no GL driver can be found while they run."""

from __future__ import annotations

import pytest


@pytest.fixture(autouse=True)
def no_gl_driver(monkeypatch: pytest.MonkeyPatch) -> None:
    """An EGL vendor list naming no driver (libglvnd reads it), for retrace processes the
    tests start: a unit test that reaches for GL fails here, not on a machine without it."""
    monkeypatch.setenv("__EGL_VENDOR_LIBRARY_FILENAMES", "/nonexistent/egl-vendor.json")
