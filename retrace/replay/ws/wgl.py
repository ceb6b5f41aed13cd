"""WGL: the window-system calls of traces captured on Windows.

On Windows the drawable is the device context (HDC) a program renders to. A
pixel format is chosen (by a PIXELFORMATDESCRIPTOR or a WGL_ARB_pixel_format
attribute list, either giving a format index), set once on a DC, and every
context created for that DC takes it. wglMakeCurrent binds a DC and a
context, wglSwapBuffers ends a frame on a DC. So DCs are the `WindowSystem`
drawables here: windows that grow with the viewport (their size is not
traced), and pbuffers, whose DC (wglGetPbufferDCARB) is the pbuffer's own
fixed-size drawable.

Calls that apitrace records but that need no replay (queries, swap
intervals, fonts, render-to-texture) compile to nothing.
"""

from __future__ import annotations

from typing import Any

from retrace.replay.values import integer
from retrace.replay.ws.core import (
    LEGACY_CONTEXT,
    Entry,
    Handler,
    WindowSystem,
    attrib_pairs,
    channel_bits,
    glretrace_format,
)
from retrace.replay.ws.glx import glx_context_request
from retrace.replay.ws.headless import PixelFormat

# PIXELFORMATDESCRIPTOR (wingdi.h), recorded as a struct whose members keep the C order.
PFD_DOUBLEBUFFER = 0x1
PFD_FLAGS, PFD_COLOR_BITS, PFD_RED_BITS, PFD_GREEN_BITS, PFD_BLUE_BITS = 2, 4, 5, 7, 9
PFD_ALPHA_BITS, PFD_DEPTH_BITS, PFD_STENCIL_BITS = 11, 18, 19

# WGL_ARB_pixel_format attributes (wglext.h); all of them take a value.
WGL_DOUBLE_BUFFER_ARB = 0x2011
WGL_COLOR_BITS_ARB = 0x2014
WGL_SAMPLE_BUFFERS_ARB, WGL_SAMPLES_ARB = 0x2041, 0x2042
WGL_FORMAT = {
    0x2015: "red",  # WGL_RED_BITS_ARB
    0x2017: "green",  # WGL_GREEN_BITS_ARB
    0x2019: "blue",  # WGL_BLUE_BITS_ARB
    0x201B: "alpha",  # WGL_ALPHA_BITS_ARB
    0x2022: "depth",  # WGL_DEPTH_BITS_ARB
    0x2023: "stencil",  # WGL_STENCIL_BITS_ARB
}


def failed(ret: Any) -> bool:
    """A recorded BOOL or handle result that says the call failed (None: not recorded)."""
    return ret is not None and not ret


def pfd_format(ppfd: Any) -> PixelFormat:
    """Pixel format of a PIXELFORMATDESCRIPTOR as apitrace records it: a pointer to one struct."""
    pfd = ppfd[0] if isinstance(ppfd, list) and ppfd else ppfd
    if not isinstance(pfd, tuple) or len(pfd) <= PFD_STENCIL_BITS:
        return glretrace_format({"alpha": 0, "depth": 0, "stencil": 0, "double_buffer": 1})

    def member(index: int) -> int:
        return integer(pfd[index])

    channel = channel_bits(member(PFD_COLOR_BITS))
    return glretrace_format(
        {
            "red": max(channel, member(PFD_RED_BITS)),
            "green": max(channel, member(PFD_GREEN_BITS)),
            "blue": max(channel, member(PFD_BLUE_BITS)),
            "alpha": member(PFD_ALPHA_BITS),
            "depth": member(PFD_DEPTH_BITS),
            "stencil": member(PFD_STENCIL_BITS),
            "double_buffer": member(PFD_FLAGS) & PFD_DOUBLEBUFFER,
        }
    )


def wgl_attrib_format(int_attribs: Any, float_attribs: Any) -> PixelFormat:
    """Pixel format of wglChoosePixelFormatARB's integer and float attribute lists.

    Both lists take the same attributes; the float one is rarely more than {0}.
    Samples count only with WGL_SAMPLE_BUFFERS_ARB set, as in the extension.
    """
    pairs = {name: integer(value) for name, value in attrib_pairs(float_attribs).items()}
    pairs.update(attrib_pairs(int_attribs))
    channel = channel_bits(pairs.get(WGL_COLOR_BITS_ARB, 0))
    wanted = {"red": channel, "green": channel, "blue": channel}
    wanted.update({"alpha": 0, "depth": 0, "stencil": 0, "double_buffer": 0})
    for name, value in pairs.items():
        if name in WGL_FORMAT:
            wanted[WGL_FORMAT[name]] = max(value, wanted.get(WGL_FORMAT[name], 0))
    wanted["double_buffer"] = pairs.get(WGL_DOUBLE_BUFFER_ARB, 0)
    if pairs.get(WGL_SAMPLE_BUFFERS_ARB, 0) > 0:
        wanted["samples"] = pairs.get(WGL_SAMPLES_ARB, 0)
    return glretrace_format(wanted)


class WglReader:
    """Reads WGL calls at compile time: pixel formats by index and by DC, pbuffers' DCs."""

    # handlers whose entries depend on the call's arguments and result alone and that
    # change nothing: the swaps (`WsCompiler.pure`)
    PURE = frozenset({"wglSwapBuffers", "wglSwapLayerBuffers", "wglSwapMultipleBuffers"})

    def __init__(self, ws: WindowSystem) -> None:
        self.ws = ws
        self.formats: dict[int, PixelFormat] = {}  # format index -> what it was chosen for
        self.dc_formats: dict[int, PixelFormat] = {}  # HDC -> its format
        self.pbuffer_formats: dict[int, int] = {}  # HPBUFFERARB -> format index

    def handlers(self) -> dict[str, Handler]:
        return {
            "wglChoosePixelFormat": self._choose_pixel_format,
            "wglChoosePixelFormatARB": self._choose_pixel_format_arb,
            "wglChoosePixelFormatEXT": self._choose_pixel_format_arb,
            "wglSetPixelFormat": self._set_pixel_format,
            "wglCreateContext": self._create_context,
            "wglCreateLayerContext": self._create_context,
            "wglCreateContextAttribsARB": self._create_context_attribs,
            "wglShareLists": self._share_lists,
            "wglMakeCurrent": self._make_current,
            "wglMakeContextCurrentARB": self._make_context_current,
            "wglMakeContextCurrentEXT": self._make_context_current,
            "wglSwapBuffers": self._swap,
            "wglSwapLayerBuffers": self._swap,
            "wglSwapMultipleBuffers": self._swap_multiple,
            "wglDeleteContext": self._delete_context,
            "wglCreatePbufferARB": self._create_pbuffer,
            "wglCreatePbufferEXT": self._create_pbuffer,
            "wglGetPbufferDCARB": self._get_pbuffer_dc,
            "wglGetPbufferDCEXT": self._get_pbuffer_dc,
        }

    def _dc_format(self, hdc: Any) -> PixelFormat:
        return self.dc_formats.get(integer(hdc), PixelFormat())

    # --- pixel formats: compile-time bookkeeping only ---------------------------------------

    def _choose_pixel_format(self, args, ret, thread) -> None:
        """wglChoosePixelFormat(hdc, ppfd) = index. The DC takes it unless SetPixelFormat says
        otherwise: programs whose SetPixelFormat went untraced still get the format they chose."""
        if not ret:
            return
        fmt = pfd_format(args[1])
        self.formats[integer(ret)] = fmt
        self.dc_formats.setdefault(integer(args[0]), fmt)

    def _choose_pixel_format_arb(self, args, ret, thread) -> None:
        """wglChoosePixelFormatARB(hdc, piAttribIList, pfAttribFList, nMaxFormats, piFormats,
        nNumFormats): every index it returned in piFormats stands for the attribute lists."""
        if failed(ret):
            return
        fmt = wgl_attrib_format(args[1], args[2])
        indices = [integer(i) for i in args[4]] if isinstance(args[4], list) else []
        for index in indices:
            self.formats[index] = fmt
        if indices:
            self.dc_formats.setdefault(integer(args[0]), fmt)

    def _set_pixel_format(self, args, ret, thread) -> None:
        """wglSetPixelFormat(hdc, iPixelFormat, ppfd): the DC's format for good. An index the
        trace never chose (found by enumerating formats) is read from ppfd when given."""
        if failed(ret):
            return
        index = integer(args[1])
        fmt = self.formats.get(index)
        if fmt is None:
            fmt = pfd_format(args[2]) if args[2] is not None else PixelFormat()
        self.dc_formats[integer(args[0])] = fmt

    # --- contexts -----------------------------------------------------------------------------

    def _create_context(self, args, ret, thread) -> Entry | None:
        """wglCreateContext(hdc): a compatibility context in the DC's format."""
        if not ret:
            return None
        return (self.ws.create_context, (integer(ret), LEGACY_CONTEXT, self._dc_format(args[0]), 0))

    def _create_context_attribs(self, args, ret, thread) -> Entry | None:
        """wglCreateContextAttribsARB(hDC, hShareContext, attribList): WGL_CONTEXT_* values
        are GLX_CONTEXT_*'s, so the list reads as GLX's."""
        if not ret:
            return None
        request = glx_context_request(args[2])
        share = integer(args[1])
        return (self.ws.create_context, (integer(ret), request, self._dc_format(args[0]), share))

    def _share_lists(self, args, ret, thread) -> Entry | None:
        """wglShareLists(hglrc1, hglrc2): hglrc2 joins hglrc1's objects (see share_lists)."""
        if failed(ret):
            return None
        return (self.ws.share_lists, (integer(args[0]), integer(args[1])))

    def _delete_context(self, args, ret, thread) -> Entry:
        return (self.ws.destroy_context, (integer(args[0]),))

    # --- binding and frames ---------------------------------------------------------------

    def _make_current(self, args, ret, thread) -> Entry:
        """wglMakeCurrent(hdc, hglrc). A failed call leaves nothing current, per WGL."""
        if failed(ret):
            return (self.ws.make_current, (thread, 0, 0))
        return (self.ws.make_current, (thread, integer(args[0]), integer(args[1])))

    def _make_context_current(self, args, ret, thread) -> Entry:
        """wglMakeContextCurrentARB(hDrawDC, hReadDC, hglrc): the replay draws and reads on
        hDrawDC (its surfaces are bound for both)."""
        if failed(ret):
            return (self.ws.make_current, (thread, 0, 0))
        return (self.ws.make_current, (thread, integer(args[0]), integer(args[2])))

    def _swap(self, args, ret, thread) -> Entry | None:
        """wglSwapBuffers(hdc) and wglSwapLayerBuffers(hdc, fuPlanes); a failed swap showed
        no frame."""
        if failed(ret):
            return None
        return (self.ws.swap, (integer(args[0]),))

    def _swap_multiple(self, args, ret, thread) -> Entry | None:
        """wglSwapMultipleBuffers(n, ps): one frame end, on the first WGLSWAP's DC."""
        swaps = args[1] if isinstance(args[1], list) else []
        first = swaps[0] if swaps else None
        hdc = first[0] if isinstance(first, tuple) and first else 0
        return (self.ws.swap, (integer(hdc),))

    # --- pbuffers ---------------------------------------------------------------------------

    def _create_pbuffer(self, args, ret, thread) -> Entry | None:
        """wglCreatePbufferARB(hDC, iPixelFormat, iWidth, iHeight, piAttribList): a drawable
        of that fixed size, keyed apart from DCs (their handles are another namespace)."""
        if not ret:
            return None
        self.pbuffer_formats[integer(ret)] = integer(args[1])
        size = (integer(args[2]), integer(args[3]))
        return (self.ws.create_drawable, (("pbuffer", integer(ret)), *size, True))

    def _get_pbuffer_dc(self, args, ret, thread) -> Entry | None:
        """wglGetPbufferDCARB(hPbuffer) = hdc: the DC renders to the pbuffer, in its format."""
        if not ret:
            return None
        pbuffer = integer(args[0])
        index = self.pbuffer_formats.get(pbuffer)
        if index is not None and index in self.formats:
            self.dc_formats[integer(ret)] = self.formats[index]
        return (self.ws.alias_drawable, (integer(ret), ("pbuffer", pbuffer)))
