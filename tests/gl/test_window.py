"""The frame viewer against a real X server (a private Xvfb) and the real driver.

Each test replays nothing but keeps an EGL context current, as a replay does,
shows frames in a `FrameWindow`, and checks two things: what the X server
shows (a screenshot of its root window, taken through Pillow's XCB support),
and that the replay's context is still current and still renders.
"""

from __future__ import annotations

import ctypes
import os
import select
import shutil
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType

import pytest
from conftest import missing_dependency
from PIL import Image as PILImage
from PIL import ImageGrab

from retrace.replay.snapshot import Image
from retrace.replay.ws.headless import Context, ContextRequest, EglDisplay, PixelFormat, Surface
from retrace.replay.ws.viewer import FrameWindow

RED, GREEN, BLUE = (255, 0, 0), (0, 255, 0), (0, 0, 255)
YELLOW, MAGENTA = (255, 255, 0), (255, 0, 255)

EGL_DRAW, EGL_READ = 0x3059, 0x305A
EGL_OPENGL_ES_API, EGL_OPENGL_API = 0x30A0, 0x30A2
GL_COLOR_BUFFER_BIT = 0x4000
GL_RGBA = 0x1908
GL_UNSIGNED_BYTE = 0x1401

REQUESTS = {
    "gl45core": ContextRequest(api="gl", major=4, minor=5, profile="core"),
    "gles30": ContextRequest(api="gles", major=3, minor=0),
}


@pytest.fixture(scope="module")
def x_server() -> Iterator[str]:
    """A private Xvfb; -displayfd makes it pick a free display number itself, race-free."""
    xvfb = shutil.which("Xvfb")
    if xvfb is None:
        missing_dependency("Xvfb", "Debian package xvfb")
    read_end, write_end = os.pipe()
    proc = subprocess.Popen(
        [xvfb, "-displayfd", str(write_end), "-screen", "0", "1024x768x24", "-nolisten", "tcp"],
        pass_fds=(write_end,),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    os.close(write_end)
    try:
        # Xvfb writes its display number once it accepts connections.
        ready, _, _ = select.select([read_end], [], [], 30)
        number = os.read(read_end, 64).decode().strip() if ready else ""
        if not number:
            pytest.fail(f"Xvfb did not start (exit status {proc.poll()})")
        yield f":{number}"
    finally:
        os.close(read_end)
        proc.terminate()
        proc.wait(timeout=10)


@pytest.fixture
def display(x_server: str, glfw: ModuleType, monkeypatch: pytest.MonkeyPatch) -> str:
    monkeypatch.setenv("DISPLAY", x_server)
    monkeypatch.delenv("WAYLAND_DISPLAY", raising=False)
    return x_server


class EGL:
    """The EGL queries that tell what is current on this thread."""

    def __init__(self) -> None:
        lib = ctypes.CDLL("libEGL.so.1")
        self.lib = lib
        for name, restype, argtypes in (
            ("eglGetCurrentDisplay", ctypes.c_void_p, []),
            ("eglGetCurrentContext", ctypes.c_void_p, []),
            ("eglGetCurrentSurface", ctypes.c_void_p, [ctypes.c_int32]),
            ("eglQueryAPI", ctypes.c_uint32, []),
        ):
            getattr(lib, name).restype = restype
            getattr(lib, name).argtypes = argtypes

    def binding(self) -> tuple[int | None, ...]:
        lib = self.lib
        return (
            lib.eglQueryAPI(),
            lib.eglGetCurrentDisplay(),
            lib.eglGetCurrentSurface(EGL_DRAW),
            lib.eglGetCurrentSurface(EGL_READ),
            lib.eglGetCurrentContext(),
        )


@dataclass
class Replay:
    """A replay's stand-in: an EGL context current on a 64x48 pbuffer."""

    display: EglDisplay
    context: Context
    surface: Surface
    egl: EGL

    def expected_binding(self) -> tuple[int | None, ...]:
        api = EGL_OPENGL_API if self.context.api == "gl" else EGL_OPENGL_ES_API
        surface = self.surface.handle
        return (api, self.display.handle, surface, surface, self.context.handle)

    def assert_current_and_renders(self) -> None:
        """The replay's context is bound as before, and clearing it to green works."""
        assert self.egl.binding() == self.expected_binding()
        assert self.display.current == (self.context, self.surface)
        proc = self.display.get_proc_address
        float4 = [ctypes.c_float] * 4
        ctypes.CFUNCTYPE(None, *float4)(proc("glClearColor"))(0.0, 1.0, 0.0, 1.0)
        ctypes.CFUNCTYPE(None, ctypes.c_uint)(proc("glClear"))(GL_COLOR_BUFFER_BIT)
        read_pixels = ctypes.CFUNCTYPE(
            None, *[ctypes.c_int] * 4, ctypes.c_uint, ctypes.c_uint, ctypes.c_void_p
        )(proc("glReadPixels"))
        width, height = self.surface.width, self.surface.height
        pixels = (ctypes.c_ubyte * (width * height * 4))()
        read_pixels(0, 0, width, height, GL_RGBA, GL_UNSIGNED_BYTE, pixels)
        raw = bytes(pixels)
        assert {raw[i : i + 3] for i in range(0, len(raw), 4)} == {bytes(GREEN)}


@pytest.fixture(params=sorted(REQUESTS))
def replay(request: pytest.FixtureRequest) -> Iterator[Replay]:
    with EglDisplay.open() as egl_display:
        context = egl_display.create_context(REQUESTS[request.param], PixelFormat())
        surface = egl_display.create_surface(context.config, 64, 48)
        assert surface is not None
        egl_display.make_current(context, surface)
        yield Replay(egl_display, context, surface, EGL())


def halves(
    width: int, height: int, first: tuple[int, ...], second: tuple[int, ...], vertical: bool = False
) -> Image:
    """`first` on the left (or top) half, `second` on the right (or bottom) one."""
    channels = len(first)
    rows = []
    for y in range(height):
        if vertical:
            rows.append(bytes(first if y < height // 2 else second) * width)
        else:
            half = width // 2
            rows.append(bytes(first) * half + bytes(second) * (width - half))
    return Image(width, height, channels, b"".join(rows))


def screenshot(glfw: ModuleType, window: FrameWindow, display: str, path: Path) -> PILImage.Image:
    """The window's area of the X screen, as the X server shows it; also saved to `path`."""
    # A round trip on GLFW's connection: once it answers, the X server has done the
    # swap's drawing requests, which went out on the same connection before it.
    x, y = glfw.get_window_pos(window._window)
    width, height = glfw.get_window_size(window._window)
    shot = ImageGrab.grab(xdisplay=display).convert("RGB").crop((x, y, x + width, y + height))
    shot.save(path)
    return shot


def colours(shot: PILImage.Image, box: tuple[int, int, int, int]) -> set[tuple[int, ...] | float]:
    """The distinct colours in `box` of `shot`."""
    area = shot.crop(box)
    found = area.getcolors(area.width * area.height)
    assert found is not None  # None only past the limit: more colours than pixels
    return {colour for _count, colour in found}


def test_show_draws_the_frame_and_keeps_the_replay_context(
    display: str, glfw: ModuleType, replay: Replay, tmp_path: Path
) -> None:
    with FrameWindow("retrace test") as window:
        replay.assert_current_and_renders()  # opening the window left the context alone
        assert window.show(halves(64, 48, RED, BLUE))
        shot = screenshot(glfw, window, display, tmp_path / "window.png")
        assert shot.size == (64, 48)
        assert colours(shot, (0, 0, 32, 48)) == {RED}
        assert colours(shot, (32, 0, 64, 48)) == {BLUE}
        replay.assert_current_and_renders()
    replay.assert_current_and_renders()  # and so did closing it


def test_window_follows_the_frame_size_rows_top_to_bottom(
    display: str, glfw: ModuleType, replay: Replay, tmp_path: Path
) -> None:
    with FrameWindow() as window:
        assert window.show(halves(64, 48, RED, BLUE))
        rgba = halves(40, 30, (*YELLOW, 255), (*MAGENTA, 0), vertical=True)
        for _ in range(2):  # the same size again draws without resizing
            assert window.show(rgba)
            shot = screenshot(glfw, window, display, tmp_path / "resized.png")
            assert shot.size == (40, 30)
            assert colours(shot, (0, 0, 40, 15)) == {YELLOW}
            assert colours(shot, (0, 15, 40, 30)) == {MAGENTA}
        replay.assert_current_and_renders()


def test_a_window_resized_by_the_user_fits_the_frame_keeping_its_aspect(
    display: str, glfw: ModuleType, replay: Replay, tmp_path: Path
) -> None:
    black = (0, 0, 0)
    frame = halves(64, 48, RED, BLUE)
    with FrameWindow() as window:
        assert window.show(frame)
        glfw.set_window_size(window._window, 128, 48)  # as a user or window manager would
        assert window.show(frame)
        shot = screenshot(glfw, window, display, tmp_path / "wide.png")
        assert shot.size == (128, 48)
        for x, colour in zip(range(0, 128, 32), (black, RED, BLUE, black), strict=True):
            assert colours(shot, (x, 0, x + 32, 48)) == {colour}  # centred, not stretched
        glfw.set_window_size(window._window, 128, 96)
        assert window.show(frame)  # scaled up twice, filtered: look away from the seam
        shot = screenshot(glfw, window, display, tmp_path / "scaled.png")
        assert colours(shot, (0, 0, 60, 96)) == {RED}
        assert colours(shot, (68, 0, 128, 96)) == {BLUE}
        replay.assert_current_and_renders()


def test_show_returns_false_once_the_user_closed_the_window(
    display: str, glfw: ModuleType, replay: Replay
) -> None:
    window = FrameWindow()
    assert window.show(halves(64, 48, RED, BLUE))
    # What GLFW does when the window manager asks the window to close.
    glfw.set_window_should_close(window._window, True)
    assert not window.show(halves(64, 48, RED, BLUE))
    window.close()
    window.close()
    assert not window.show(halves(64, 48, RED, BLUE))
    replay.assert_current_and_renders()


def test_two_windows_glfw_ends_with_the_last(
    display: str, glfw: ModuleType, replay: Replay, tmp_path: Path
) -> None:
    first, second = FrameWindow("first"), FrameWindow("second")
    first.close()
    assert second.show(halves(64, 48, BLUE, RED))
    shot = screenshot(glfw, second, display, tmp_path / "second.png")
    assert colours(shot, (0, 0, 32, 48)) == {BLUE}
    second.close()
    replay.assert_current_and_renders()
