"""Tests that need a real GL context: Mesa's llvmpipe through EGL, or its X server for windows."""
