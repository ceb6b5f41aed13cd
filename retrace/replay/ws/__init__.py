"""Window systems: the trace's glX*/egl*/wgl*/CGL* calls replayed on headless EGL.

The traced program talked to X11, to a display's EGL, to Windows (WGL) or to
macOS (CGL); none of its handles mean anything here. At compile time each
window-system call is read for what it tells (the pixel format a visual or
config stands for, the version and profile a context asked for, a pbuffer's
size) and becomes an entry that, at replay time, creates or binds the
corresponding headless EGL object. Windows become pbuffers that start at
glretrace's 32x32 and grow with the viewports the program sets on them, since
window sizes are not traced.

- `core` -- what every system shares: `WindowSystem`, the replay-time
  operations (contexts, drawables, the current context and its switch hooks,
  frame ends), and the helpers for attribute lists and pixel formats.
- `glx`, `egl`, `wgl`, `cgl` -- one reader per system: its constants, how its
  attribute lists read, which of its calls become which operation.
- `reader` -- `WsCompiler`, the one table of every reader's calls that the
  compiler asks.
- `headless` -- the EGL display the replay renders on: contexts, pbuffer
  surfaces and the `Drawable` stand-ins for the trace's windows.
- `viewer` -- ``--window``: a GLFW window that shows the finished frames.

Imports go one way: `headless` needs nothing of retrace's replay; `core` builds
on it; the readers on `core`; `reader` on the readers.
"""
