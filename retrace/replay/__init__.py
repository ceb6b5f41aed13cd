"""Replaying traces through a real OpenGL driver (headless contexts through EGL)."""
