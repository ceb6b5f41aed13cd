"""Which calls before a trim's part its first guess keeps.

The frames of the part need the state and objects the calls before them made,
not the images those calls drew. So every call before the
part is kept (but for uploads the part cannot see: `data.py`) except what can
only draw or read pixels: draws, clears and blits
(apitrace's RENDER calls, glBegin/glEnd blocks but for the current color,
normal, texture coordinates, ... their calls set, which stay after glEnd and
are set alike outside one), compute dispatches,
glReadPixels, glFinish/glFlush, queries that change nothing (the replay's own
rule, `replay/effects.py`, and the window system's: glXGetProcAddress,
eglGetConfigAttrib, ...) and the frame ends but the last one (so the part
starts on a fresh frame, as in the original). Display lists being compiled are
kept whole: their calls are the list's content.

Where the part draws with what an offscreen draw before it drew (`data.Unseen`),
the guess keeps the draws that can leave something behind for later frames too
(`offscreen`: into a framebuffer object, with transform feedback active,
compute). Whether a frame needed more is for the self-check to find
(`verify.py`), and what it needed for `widen.py`.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import NamedTuple

from retrace.gl.registry import Registry, load_registry
from retrace.replay.effects import has_side_effects
from retrace.replay.ws.core import is_window_system_call
from retrace.trace.flags import CallFlag
from retrace.trace.model import CallBatch, FunctionSig, NodeLists, Signatures

KEEP, DROP, DRAW, BEGIN, END, FRAME_END, EMIT = range(7)
NEW_LIST, END_LIST, BIND_FRAMEBUFFER, MAKE_CURRENT, XFB_BEGIN, XFB_END, PRODUCER = range(7, 14)

MAKE_CURRENT_CALL = re.compile(r"(glX|egl|wgl)Make(Context)?Current(ARB)?$|CGLSetCurrentContext$")
_BIND_FRAMEBUFFER = re.compile(r"glBindFramebuffer(EXT|OES)?$")
_DRAW_TARGETS = (0x8D40, 0x8CA9)  # GL_FRAMEBUFFER, GL_DRAW_FRAMEBUFFER
# what makes a vertex of a glBegin/glEnd block (outside one, nothing)
_EMITS = re.compile(r"gl(Vertex[234]|EvalCoord|EvalPoint|ArrayElement)")
_PRODUCERS = re.compile(r"glDispatchCompute|glReadn?Pixels")  # write buffers or images
# window-system queries: they change nothing, and no replayer acts on them
_QUERIES = re.compile(
    r"(glX|egl|wgl)(GetProcAddress|Get\w*ConfigAttrib|Query\w*String|GetClientString|GetError"
    r"|GetCurrent\w*)(ARB|EXT|KHR)?$"
)


def kind_of(sig: FunctionSig, gl: Registry) -> int:
    """What a function is to the filter; decided once per signature."""
    name = sig.name
    if MAKE_CURRENT_CALL.match(name):
        return MAKE_CURRENT
    if sig.flags & CallFlag.END_FRAME:
        return FRAME_END
    if _QUERIES.match(name):
        return DROP
    if is_window_system_call(name) or not name.startswith("gl"):
        return KEEP  # contexts, surfaces, memcpy into mapped buffers
    if name == "glBegin":
        return BEGIN
    if name == "glEnd":
        return END
    if _EMITS.match(name):
        return EMIT
    if name == "glNewList":
        return NEW_LIST
    if name == "glEndList":
        return END_LIST
    if _BIND_FRAMEBUFFER.match(name):
        return BIND_FRAMEBUFFER
    if name.startswith("glBeginTransformFeedback"):
        return XFB_BEGIN
    if name.startswith("glEndTransformFeedback"):
        return XFB_END
    if _PRODUCERS.match(name):
        return PRODUCER
    if sig.flags & CallFlag.RENDER:
        return DRAW
    if name in ("glFinish", "glFlush"):
        return DROP
    if not has_side_effects(name, gl.command(name)):
        return DROP
    return KEEP


class Call(NamedTuple):
    """One call as the trim's followers see it: its record in `batch`, and its position
    in delivery order."""

    batch: CallBatch
    values: NodeLists
    record: tuple[int, ...]
    position: int
    sigs: Signatures

    def arguments(self) -> Callable[[int], object]:
        """Its arguments by index, decoded when asked (None where absent; -1: the return
        value)."""
        node_start = self.record[5]
        slot_start, nargs, ret = self.record[7:10]
        slots = self.batch.arguments(slot_start, nargs)
        values, sigs = self.values, self.sigs

        def arg(n: int) -> object:
            node = ret if n < 0 else slots[n] if n < len(slots) else -1
            return values.value(node_start + node, sigs) if node >= 0 else None

        return arg


class SetupFilter:
    """Decides, call by call in delivery order, what a trim's guess keeps before its part
    (`offscreen`: the draws that leave something for later frames too)."""

    def __init__(self, offscreen: bool, start: int, frame_ends: list[int]) -> None:
        self.offscreen = offscreen
        before = [p for p in frame_ends if p < start]
        self._last_end = before[-1] if before else -1  # the frame end kept
        self._kinds: dict[int, int] = {}
        self._gl = load_registry()
        self._context: dict[int, object] = {}  # per thread: the context current
        self._framebuffer: dict[object, int] = {}  # per context: the draw framebuffer bound
        self._feedback: dict[object, bool] = {}  # per context: transform feedback active
        self._listing: set[int] = set()  # threads compiling a display list
        self._block: dict[int, bool] = {}  # per thread in glBegin/glEnd: whether it is kept

    def keep(self, call: Call) -> bool:
        """Whether a call before the part is kept."""
        _, _, sid, thread, _, _, _, _, nargs, _, _, _ = call.record
        kind = self._kinds.get(sid)
        if kind is None:
            kind = self._kinds[sid] = kind_of(call.sigs.functions[sid], self._gl)
        block = self._block.get(thread)
        if block is False and kind != END:  # in a glBegin/glEnd block left out
            return kind == KEEP  # the current color, normal, texture coordinates it sets
        if kind == KEEP:
            return True
        context = self._context.get(thread)
        if kind >= NEW_LIST and kind != PRODUCER:  # state the filter follows: always kept
            arg = call.arguments()
            if kind == MAKE_CURRENT:
                self._context[thread] = arg(nargs - 1)
            elif kind == BIND_FRAMEBUFFER:
                if arg(0) in _DRAW_TARGETS:
                    framebuffer = arg(1)
                    self._framebuffer[context] = framebuffer if isinstance(framebuffer, int) else 0
            elif kind in (XFB_BEGIN, XFB_END):
                self._feedback[context] = kind == XFB_BEGIN
            elif kind == NEW_LIST:
                self._listing.add(thread)
            else:
                self._listing.discard(thread)
            return True
        if thread in self._listing:
            return True  # a display list's content
        if kind == BEGIN:
            block = self._block[thread] = self._offscreen(context)
            return block
        if kind == END:
            self._block.pop(thread, None)
            return bool(block)
        if block is not None:
            return block
        if kind == FRAME_END:
            return call.position == self._last_end
        if kind == PRODUCER:
            return self.offscreen
        if kind == DRAW:
            return self._offscreen(context)
        return False  # DROP

    def _offscreen(self, context: object) -> bool:
        """Whether a draw now may leave something for later frames other than its image."""
        if not self.offscreen:
            return False
        return bool(self._framebuffer.get(context) or self._feedback.get(context))
