"""What a trim can leave out before its part: uploads no frame of it can see.

Uploads carry most of a trace's bytes (a game's textures, a program's vertices
streamed anew every frame). Before the part, with its draws dropped, an
upload is seen by nothing when, before the part starts,

- later uploads cover what it wrote, with nothing reading the object in
  between: a glTexImage* of the same face and level or a glBufferData
  replaces it whole; a glTexSubImage* whose box (x, y, z offsets and extent)
  holds its box, or a glBufferSubData or memcpy record (placed by the mapping
  it lands in) over the same bytes replaces it where it lies inside;
- or its object is deleted, again with nothing reading it in between;
- or its object lives on but the part never uses it: no draw, copy or read of
  the part has it bound (on any texture unit or buffer target, or held by the
  vertex array or framebuffer bound), and no other call of the part names it.

Such uploads are dropped, but a full specification (glTexImage*,
glBufferData, glBufferStorage) still needed for its object's size and format
is kept with null data. Objects are followed by name, bindings per context
(texture units, buffer targets, vertex arrays, framebuffers) as the calls make
them, before and through the part; which parameters name textures, buffers and
containers comes from the GL registry. What can read data without a draw
(copies, mipmap generation, reads into memory) keeps what it may read, and a
map keeps the store it maps (the buffer's last full specification, with null
data if nothing reads them: a map of no store fails in glretrace); an
upload from a pixel-unpack buffer reads that buffer's bytes only if the upload
itself is kept. Objects named inside display lists are taken as used (a
list's calls are not followed). All contexts are taken to share one
namespace: where they do not, more is kept, or the self-check finds the
mistake and the uploads missing are added back (`widen.py`). Settings set again
before anything reads them are `state.py`'s.
"""

from __future__ import annotations

import re
from array import array
from collections import defaultdict
from collections.abc import Callable, Iterator
from itertools import islice
from typing import NamedTuple

from retrace.gl.registry import Registry, load_registry
from retrace.replay.ws.core import is_window_system_call
from retrace.trace.flags import CallFlag
from retrace.trace.model import FunctionSig
from retrace.trim.keep import MAKE_CURRENT_CALL, Call
from retrace.trim.outline import Part

RESOURCES = ("texture", "buffer")
CONTAINERS = ("vertex array", "framebuffer")

GL_TEXTURE0 = 0x84C0
GL_ARRAY_BUFFER, GL_ELEMENT_ARRAY_BUFFER, GL_PIXEL_UNPACK_BUFFER = 0x8892, 0x8893, 0x88EC
GL_TEXTURE_CUBE_MAP = 0x8513
_CUBE_FACES = range(0x8515, 0x851B)
_DRAW_FRAMEBUFFERS = (0x8D40, 0x8CA9)  # GL_FRAMEBUFFER, GL_DRAW_FRAMEBUFFER


_KEPT, _USED, _DROPPED, _BLANK = range(4)


class Cuts:
    """What a trim does with each call before its part, a byte per call (a dict entry per
    upload grows with a long trace): keep it (`_KEPT`; `_USED`: an upload to an object the
    part uses, the data it needs), leave it out (`_DROPPED`), or keep it with null data
    in argument n (`_BLANK` + n)."""

    def __init__(self, calls: int) -> None:
        self._marks = bytearray(calls)

    def drop(self, position: int, blank: int | None = None) -> None:
        """Leave a call out or, with `blank`, keep it with null data in that argument."""
        self._marks[position] = _DROPPED if blank is None else _BLANK + blank

    def keep(self, position: int) -> None:
        self._marks[position] = _KEPT

    def use(self, position: int) -> None:
        """An upload kept to an object the part uses."""
        if self._marks[position] == _KEPT:
            self._marks[position] = _USED

    def cut(self, position: int) -> bool:
        """Whether a call is left out or kept with null data."""
        return position < len(self._marks) and self._marks[position] >= _DROPPED

    def used(self, position: int) -> bool:
        return position < len(self._marks) and self._marks[position] == _USED

    def blank(self, position: int) -> int | None:
        """The argument a kept call has null data in, if any."""
        mark = self._marks[position] if position < len(self._marks) else _KEPT
        return mark - _BLANK if mark >= _BLANK else None

    def dropped(self) -> Iterator[int]:
        """The positions of the calls left out, in order."""
        position = self._marks.find(_DROPPED)
        while position >= 0:
            yield position
            position = self._marks.find(_DROPPED, position + 1)


(OTHER, BIND_TEXTURE, ACTIVE_TEXTURE, BIND_BUFFER, BIND_INDEXED, BIND_VAO, BIND_FBO) = range(7)
(FULL, PART, NAMED_FULL, NAMED_PART, DELETE, CURRENT, DRAW) = range(7, 14)
(BARRIER, NEW_LIST, END_LIST, MAP, MEMCPY) = range(14, 19)

# What each function is to the analysis: the first pattern that matches its name
# (re.match); a function none matches is a DRAW if apitrace flags it as rendering.
_KINDS = tuple(
    (re.compile(pattern), kind)
    for pattern, kind in (
        (MAKE_CURRENT_CALL.pattern, CURRENT),
        (r"glBindTexture(EXT)?$", BIND_TEXTURE),
        (r"glActiveTexture(ARB)?$", ACTIVE_TEXTURE),
        (r"glBindBuffer(ARB|EXT|NV)?$", BIND_BUFFER),
        (r"glBindBuffer(Base|Range)(EXT|NV)?$", BIND_INDEXED),
        (r"glBindVertexArray(APPLE|OES)?$", BIND_VAO),
        (r"glBindFramebuffer(EXT|OES)?$", BIND_FBO),
        (r"glDelete(Textures|Buffers)(ARB|EXT)?$", DELETE),
        (r"glMap(Named)?Buffer(Range)?(ARB|EXT|OES)?$", MAP),
        (r"memcpy$", MEMCPY),
        (r"glCallLists?$|glExecuteCommands|gl(Begin|End)TransformFeedback", BARRIER),
        (r"glNewList$", NEW_LIST),
        (r"glEndList$", END_LIST),
        (r"gl(Compressed)?TexImage[123]D(ARB|EXT|OES)?$", FULL),
        (r"glBuffer(Data|Storage)(ARB|EXT)?$", FULL),
        (r"gl(Compressed)?TexSubImage[123]D(ARB|EXT|OES)?$|glBufferSubData(ARB)?$", PART),
        (r"glNamedBuffer(Data|Storage)(EXT)?$", NAMED_FULL),
        (r"glNamedBufferSubData(EXT)?$|gl(Compressed)?TextureSubImage[123]D(EXT)?$", NAMED_PART),
        (r"glDispatchCompute|glBegin", DRAW),
    )
)
# what reads objects without a draw, or writes part of them from what they hold
_READS = re.compile(
    r"Copy|Generate|TexBuffer|TextureBuffer|TextureView|Readn?Pixels|Blit|Getn?Tex(ture)?(Sub)?Image|"
    r"Getn?Compressed|Get(Named)?BufferSubData|Clear(Tex|NamedBuffer|Buffer)"
)
_POINTERS = re.compile(r"gl\w*(Pointer|AttribFormat|AttribBinding)\w*$|glInterleavedArrays$")
_NEW_NAMES = re.compile(r"gl(Gen|Create)")  # names given out, not used
# an upload's box: per dimension, the arguments of its offset and its extent
_DIMENSIONS = (
    ("offset", "size"),
    ("xoffset", "width"),
    ("yoffset", "height"),
    ("zoffset", "depth"),
)

Box = tuple[tuple[int, int], ...]
_RECENT = 64  # how many of an image's latest uploads a small one may cover


class _Plan(NamedTuple):
    name: str
    args: tuple[str, ...]
    kind: int
    refs: tuple[tuple[int, str], ...]  # (argument, object class) of names it passes
    data: int | None  # the argument holding an upload's data
    box: tuple[tuple[int | None, int], ...]  # an upload's (offset, extent) arguments
    level: int | None  # the argument of a texture upload's level
    reads: bool  # it reads objects without a draw (`_READS`)
    pointer: bool  # it points a vertex attribute into the array buffer bound


def kind_of(sig: FunctionSig) -> int:
    kind = next((k for pattern, k in _KINDS if pattern.match(sig.name)), OTHER)
    if kind == OTHER and sig.flags & CallFlag.RENDER:
        return DRAW
    return kind


def _plan(sig: FunctionSig, gl: Registry) -> _Plan:
    arg_names = sig.arg_names
    command = gl.command(sig.name)
    classes = {p.name: p.object_class for p in command.params} if command else {}
    refs = tuple(
        (i, c) for i, a in enumerate(arg_names) if (c := classes.get(a)) in RESOURCES + CONTAINERS
    )
    where = {a: i for i, a in enumerate(arg_names)}
    data = next((i for i, a in enumerate(arg_names) if a in ("data", "pixels")), None)
    box = tuple((where.get(o), where[e]) for o, e in _DIMENSIONS if e in where)
    reads, pointer = bool(_READS.search(sig.name)), bool(_POINTERS.match(sig.name))
    kind, level = kind_of(sig), where.get("level")
    return _Plan(sig.name, arg_names, kind, refs, data, box, level, reads, pointer)


def _int(value: object) -> int:
    return value if isinstance(value, int) else 0


def _names(value: object) -> list[int]:
    """The object names a value passes: one, or an array of them."""
    if isinstance(value, list):
        return [v for v in value if isinstance(v, int) and v]
    return [value] if isinstance(value, int) and value else []


def _box(plan: _Plan, arg: Callable[[int], object]) -> Box | None:
    """Where an upload writes: per dimension [start, end) (None: not known)."""
    box = []
    for offset, extent in plan.box:
        lo = 0 if offset is None else arg(offset)
        size = arg(extent)
        if not isinstance(lo, int) or not isinstance(size, int):
            return None
        box.append((lo, lo + size))
    return tuple(box) if box else None


def _volume(box: Box) -> int:
    volume = 1
    for lo, hi in box:
        volume *= max(hi - lo, 0)
    return volume


def _within(inner: Box, outer: Box) -> bool:
    return len(inner) == len(outer) and all(
        a <= c and d <= b for (c, d), (a, b) in zip(inner, outer, strict=True)
    )


class _Full(NamedTuple):
    """An image's last full specification: where it is, what it wrote, its data argument
    (None: none to leave out)."""

    position: int
    box: Box | None
    data: int | None


class _Object:
    """One texture or buffer between its first upload and its deletion: where each of its
    uploads not yet seen writes, kept only while it is unseen (a box per upload of a
    long trace would grow with it)."""

    __slots__ = ("pending", "last_full", "holds")

    def __init__(self) -> None:
        # image -> its uploads unseen, in order: position -> where it writes (None: not known)
        self.pending: dict[int, dict[int, Box | None]] = defaultdict(dict)
        self.last_full: dict[int, _Full] = {}  # image -> its last full specification
        self.holds: set[tuple[str, int]] = set()  # (class, name) it holds (a container)

    def blank(self, image: int, position: int) -> int | None:
        """How an upload of `image` that nothing sees is cut: its data argument if it is the
        image's last full specification (kept, for the image's size and format), else
        None (left out)."""
        last = self.last_full.get(image)
        return last.data if last is not None and last.position == position else None


class Unseen(NamedTuple):
    """The analysis' answer, by position before the part."""

    cuts: Cuts  # uploads no frame of the part can see; those kept that the part uses
    # the part reads what a draw before it drew (offscreen), before it draws there itself:
    # a trim without the draws before the part cannot be right
    reads_earlier_draws: bool
    uploads: dict[tuple[str, int], array[int]]  # per texture and buffer: its uploads


_SHADERS = re.compile(
    r"gl(ShaderSource|ShaderBinary|ProgramBinary|ProgramString|CreateShaderProgram)"
)


def byte_kind(sig: FunctionSig) -> str:
    """What a call's bytes are, for the trim's account of where they went."""
    kind = kind_of(sig)
    if kind in (FULL, PART, NAMED_FULL, NAMED_PART):
        return "texture uploads" if "Tex" in sig.name else "buffer data"
    if kind == MEMCPY:
        return "buffer data"
    if kind in (BIND_TEXTURE, ACTIVE_TEXTURE, BIND_BUFFER, BIND_INDEXED, BIND_VAO, BIND_FBO):
        return "bindings"
    if _POINTERS.match(sig.name):
        return "bindings"
    if _SHADERS.match(sig.name):
        return "shaders"
    if is_window_system_call(sig.name) or not sig.name.startswith("gl"):
        return "window system and other"
    return "other GL calls"


class Uploads:
    """Follows the calls up to `part`'s end (`step`), then names the uploads before it that
    no frame of it can see (`finish`); `offscreen`: the trim keeps the offscreen draws
    before the part (`keep.SetupFilter`), which read what is bound."""

    def __init__(self, part: Part, offscreen: bool) -> None:
        self.part = part
        self.offscreen = offscreen
        self.gl = load_registry()
        self.plans: dict[int, _Plan] = {}
        self.objects: dict[tuple[str, int], _Object] = {}
        self.cuts = Cuts(part.start)
        self.context: dict[int, object] = {}  # per thread
        self.unit: dict[object, int] = {}  # per context: the active texture unit
        # per context: (what, target, index) -> name bound
        self.bound: dict[object, dict[tuple[str, int, int], int]] = defaultdict(dict)
        self.used: set[tuple[str, int]] = set()  # what the part uses
        # uploads from a pixel-unpack buffer: the buffer's uploads they read
        self.readers: dict[int, array[int]] = {}
        self.listing: set[int] = set()  # threads compiling a display list
        self.feedback: dict[object, bool] = {}  # per context: transform feedback active
        # mapped memory: (start, end, buffer, offset in it), the latest first
        self.mappings: list[tuple[int, int, int, int]] = []
        self.sizes: dict[int, int] = {}  # buffer -> size given by its last full specification
        self.pins: dict[int, int | None] = {}  # stores maps need: position -> data argument
        self.uploads: dict[tuple[str, int], array[int]] = {}  # object -> its uploads
        # what draws wrote into before the part (less, in the part, what it drew into since)
        self.drawn: set[tuple[str, int]] = set()
        self.reads_earlier_draws = False  # a call of the part reads one of them

    def step(self, call: Call) -> None:
        """Follow one call, in delivery order, up to the part's end."""
        _, _, sid, thread, _, node_start, _, _, nargs, ret, _, _ = call.record
        plan = self.plans.get(sid)
        if plan is None:
            plan = self.plans[sid] = _plan(call.sigs.functions[sid], self.gl)
        if plan.kind == OTHER and not (plan.refs or plan.reads or plan.pointer):
            return
        arg = call.arguments()
        position = call.position
        kind = plan.kind
        if kind == CURRENT:
            self.context[thread] = arg(nargs - 1)
            return
        ctx = self.context.get(thread)
        names = [(c, n) for a, c in plan.refs for n in _names(arg(a))]
        inside = position >= self.part.start
        if kind in (NEW_LIST, END_LIST):
            self.listing.symmetric_difference_update({thread})
            return
        if thread in self.listing:  # a display list's content: kept, never run here
            self.used.update(names)
            return
        bound = self.bound[ctx]
        target = arg(0)
        if kind == ACTIVE_TEXTURE:
            self.unit[ctx] = _int(target) - GL_TEXTURE0
        elif kind == BIND_TEXTURE:
            bound["texture", _int(target), self.unit.get(ctx, 0)] = _int(arg(1))
        elif kind == BIND_BUFFER:
            bound["buffer", _int(target), -1] = _int(arg(1))
            if _int(target) == GL_ELEMENT_ARRAY_BUFFER:
                self._hold(bound, "vertex array", [("buffer", _int(arg(1)))])
        elif kind == BIND_INDEXED:
            bound["buffer", _int(target), _int(arg(1))] = _int(arg(2))
            bound["buffer", _int(target), -1] = _int(arg(2))
        elif kind == BIND_VAO:
            bound["vertex array", 0, -1] = _int(target)
        elif kind == BIND_FBO:
            if _int(target) in _DRAW_FRAMEBUFFERS:
                bound["framebuffer", 0, -1] = _int(arg(1))
        elif kind == MAP:
            address = call.values.value(node_start + ret, call.sigs) if ret >= 0 else None
            buffer = ("buffer", self._map(plan, arg, _int(address), ctx))
            if inside:
                self.used.add(buffer)
            else:
                self._pin(buffer)
        elif inside:
            self._in_part(kind, plan, arg, bound, ctx, names)
        elif kind == MEMCPY:  # a write into mapped memory: an upload to that buffer's bytes
            destination = self._mapped(_int(arg(0)))
            if destination is not None:
                lo = destination[1]
                self._add(
                    ("buffer", destination[0]), 0, position, False, ((lo, lo + _int(arg(2))),)
                )
        elif kind == BARRIER:
            if "TransformFeedback" in plan.name:  # draws while it is active are kept
                self.feedback[ctx] = plan.name.startswith("glBegin")
        elif kind == DELETE:
            for key in names:
                self._end(key)
        elif kind in (FULL, PART, NAMED_FULL, NAMED_PART):
            self._upload(bound, ctx, plan, arg, names, position)
        elif kind == DRAW:
            framebuffer = bound.get(("framebuffer", 0, -1), 0)
            self.drawn.update(self._attachments(framebuffer))
            offscreen = framebuffer or self.feedback.get(ctx)
            if self.offscreen and (offscreen or plan.name.startswith("glDispatch")):
                for key in self._bound(bound):  # what it may read
                    self._seen(key)
        elif kind == OTHER:
            self._other(bound, plan, names)

    def finish(self) -> Unseen:
        """What the part cannot see, once every call up to its end was followed."""
        used = self._unused()
        for key in used:
            for p in self.uploads.get(key, ()):
                self.cuts.use(p)
        return Unseen(self.cuts, self.reads_earlier_draws, self.uploads)

    def _in_part(
        self,
        kind: int,
        plan: _Plan,
        arg: Callable[[int], object],
        bound: dict[tuple[str, int, int], int],
        ctx: object,
        names: list[tuple[str, int]],
    ) -> None:
        """A call of the part: what it draws with, reads, or names is used."""
        if kind == DRAW or (kind == BARRIER and "Call" in plan.name) or plan.reads:
            reads = self._bound(bound)
            if not self.drawn.isdisjoint(reads):  # drawn before the part, not yet in it
                self.reads_earlier_draws = True
            if kind == DRAW:
                self.drawn.difference_update(
                    self._attachments(bound.get(("framebuffer", 0, -1), 0))
                )
            self.used.update(reads)
            self.used.update(names)
        elif kind in (FULL, PART):
            self.used.add(self._destination(bound, ctx, plan, arg)[0])
        elif kind == MEMCPY:
            destination = self._mapped(_int(arg(0)))
            if destination is not None:
                self.used.add(("buffer", destination[0]))
        elif kind in (NAMED_FULL, NAMED_PART, OTHER) and not _NEW_NAMES.match(plan.name):
            self._other(bound, plan, names)
            self.used.update(key for key in names if key[0] in RESOURCES)

    def _attachments(self, framebuffer: int) -> set[tuple[str, int]]:
        obj = self.objects.get(("framebuffer", framebuffer)) if framebuffer else None
        return obj.holds if obj is not None else set()

    def _bound(self, bound: dict[tuple[str, int, int], int]) -> list[tuple[str, int]]:
        """What a draw may read: every object bound, and the vertex array (0 too)."""
        keys = [(what, n) for (what, _, _), n in bound.items() if n]
        return [*keys, ("vertex array", bound.get(("vertex array", 0, -1), 0))]

    def _mapped(self, address: int) -> tuple[int, int] | None:
        """The buffer and offset in it that mapped memory at `address` is."""
        for base, end, buffer, offset in self.mappings:
            if base <= address < end:
                return buffer, offset + address - base
        return None

    def _map(self, plan: _Plan, arg: Callable[[int], object], address: int, ctx: object) -> int:
        """A buffer mapped at `address`: the writes into it that memcpy records make; its
        name."""
        named = "Named" in plan.name
        buffer = _int(arg(0)) if named else self.bound[ctx].get(("buffer", _int(arg(0)), -1), 0)
        if "Range" in plan.name:
            offset, length = _int(arg(1)), _int(arg(2))
        else:
            offset, length = 0, self.sizes.get(buffer, 0)
        if not address or not buffer or not length:
            return buffer
        end = address + length
        self.mappings = [m for m in self.mappings if m[1] <= address or end <= m[0]]
        self.mappings.insert(0, (address, end, buffer, offset))
        return buffer

    def _pin(self, key: tuple[str, int]) -> None:
        """A buffer mapped: the store it maps, its last full specification, is needed (its
        data only as any upload's are: what the map reads is the program's)."""
        obj = self.objects.get(key)
        last = obj.last_full.get(0) if obj is not None else None
        if last is not None:
            self.pins[last.position] = last.data

    def _drop(self, position: int, blank: int | None = None) -> None:
        """Leave an upload out (`Cuts.drop`), but a store a map needs: kept, with null data
        where it has data to leave out."""
        if blank is None and position in self.pins:
            blank = self.pins[position]
            if blank is None:
                return
        self.cuts.drop(position, blank)

    def _destination(
        self,
        bound: dict[tuple[str, int, int], int],
        ctx: object,
        plan: _Plan,
        arg: Callable[[int], object],
    ) -> tuple[tuple[str, int], int]:
        """The object an upload to a bound target writes, and the image (face and level)."""
        target = _int(arg(0))
        if "Buffer" in plan.name:  # glBuffer(Sub)Data(target, ...)
            return ("buffer", bound.get(("buffer", target, -1), 0)), 0
        binding = GL_TEXTURE_CUBE_MAP if target in _CUBE_FACES else target
        name = bound.get(("texture", binding, self.unit.get(ctx, 0)), 0)
        level = _int(arg(plan.level)) if plan.level is not None else 0
        return ("texture", name), (target << 8) | (level & 0xFF)

    def _upload(
        self,
        bound: dict[tuple[str, int, int], int],
        ctx: object,
        plan: _Plan,
        arg: Callable[[int], object],
        names: list[tuple[str, int]],
        position: int,
    ) -> None:
        kind = plan.kind
        full = kind in (FULL, NAMED_FULL)
        box = _box(plan, arg)
        if kind in (FULL, PART):
            key, image = self._destination(bound, ctx, plan, arg)
        elif names:
            key = names[0]
            image = _int(arg(plan.level)) if plan.level is not None else 0
        else:
            return
        unpack = bound.get(("buffer", GL_PIXEL_UNPACK_BUFFER, -1), 0) if key[0] == "texture" else 0
        if unpack:  # its data come from that buffer's uploads so far: needed if it is kept
            source = self.objects.get(("buffer", unpack))
            self.readers[position] = array(
                "q", [p for ps in source.pending.values() for p in ps] if source else []
            )
        if full and key[0] == "buffer" and box is not None:
            self.sizes[key[1]] = box[0][1]
        self._add(key, image, position, full, box, None if unpack else plan.data)

    def _add(
        self,
        key: tuple[str, int],
        image: int,
        position: int,
        full: bool,
        box: Box | None,
        data: int | None = None,
    ) -> None:
        """An upload to an image of an object: all of it (`full`), or `box` of it (None: not
        known where). Earlier uploads within its box are replaced; of a full specification
        (`data`: its data argument) only the data."""
        if key[0] not in RESOURCES or not key[1]:
            return
        obj = self.objects.setdefault(key, _Object())
        self.uploads.setdefault(key, array("q")).append(position)
        pending = obj.pending[image]
        if full:
            self.drawn.discard(key)
            before = obj.last_full.get(image)
            if before is not None and self.cuts.cut(before.position):  # blanked: not needed
                self._drop(before.position)
            for p in pending:
                self._drop(p)
            pending.clear()
            obj.last_full[image] = _Full(position, box, data)
        elif box is not None:
            last = obj.last_full.get(image)
            extent = last.box if last is not None else None
            # a small box is looked for among the latest uploads alone (a font atlas takes
            # thousands of glyphs, none over another: all of them would be quadratic)
            small = extent is not None and 4 * _volume(box) < _volume(extent)
            candidates = islice(reversed(pending), _RECENT) if small else pending
            covered = {p for p in candidates if (b := pending[p]) and _within(b, box)}
            if last is not None and last.position in covered and last.data is None:
                covered.discard(last.position)  # its storage is needed, and no data to leave out
            for p in covered:
                self._drop(p, obj.blank(image, p))
                del pending[p]
        pending[position] = box

    def _seen(self, key: tuple[str, int]) -> None:
        """Something read the object: its uploads so far are needed."""
        obj = self.objects.get(key)
        if obj is not None:
            obj.pending.clear()
            for held in obj.holds:
                self._seen(held)

    def _end(self, key: tuple[str, int]) -> None:
        obj = self.objects.pop(key, None)
        if obj is not None:
            for uploads in obj.pending.values():
                for p in uploads:
                    self._drop(p)

    def _hold(
        self, bound: dict[tuple[str, int, int], int], c: str, held: list[tuple[str, int]]
    ) -> None:
        """The container bound (a vertex array: 0 too) holds `held`."""
        name = bound.get((c, 0, -1), 0)
        if name or c == "vertex array":
            self.objects.setdefault((c, name), _Object()).holds.update(held)

    def _other(
        self, bound: dict[tuple[str, int, int], int], plan: _Plan, names: list[tuple[str, int]]
    ) -> None:
        containers = [(c, n) for c, n in names if c in CONTAINERS]
        resources = [(c, n) for c, n in names if c in RESOURCES]
        for key in containers:  # glFramebufferTexture2D-style DSA, glVertexArrayVertexBuffer
            self.objects.setdefault(key, _Object()).holds.update(resources)
        if not containers and resources:  # attachments to the framebuffer bound
            self._hold(bound, "framebuffer", resources)
        if plan.pointer:
            array_buffer = bound.get(("buffer", GL_ARRAY_BUFFER, -1), 0)
            self._hold(bound, "vertex array", [("buffer", array_buffer)])
        if plan.reads:
            for key in resources + self._bound(bound):
                self._seen(key)

    def _unused(self) -> set[tuple[str, int]]:
        """After the part: what it used, and what those hold, are used; the unseen uploads
        of every other object are cut (its last specification of each image blanked), and
        the uploads into pixel-unpack buffers that kept uploads read are kept."""
        used = set(self.used)
        todo = list(used)
        while todo:
            obj = self.objects.get(todo.pop())
            for held in obj.holds if obj is not None else ():
                if held not in used:
                    used.add(held)
                    todo.append(held)
        for key, obj in self.objects.items():
            if key in used or key[0] not in RESOURCES:
                continue
            for image, uploads in obj.pending.items():
                for p in uploads:
                    self._drop(p, obj.blank(image, p))
        for reader, sources in self.readers.items():
            if not self.cuts.cut(reader):
                for p in sources:
                    self.cuts.keep(p)
        return used
