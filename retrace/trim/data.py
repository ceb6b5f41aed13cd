"""What a trim can leave out before its part: uploads and settings no frame of it can see.

Uploads carry most of a trace's bytes (a game's textures, a program's vertices
streamed anew every frame). Before the part, with its draws dropped, an
upload is seen by nothing when, before the part starts,

- a later upload replaces the same whole image (glTexImage* of the same face
  and level, glBufferData) or the same bytes of a buffer (glBufferSubData, or
  a memcpy record of a write into mapped memory, placed by the mapping it
  lands in), with nothing reading the object in between;
- or its object is deleted, again with nothing reading it in between;
- or its object lives on but the part never uses it: the part names no such
  object, none is bound when the part starts, and no vertex array, framebuffer
  or texture the part uses holds it.

Such uploads are dropped, except that the last full specification of an
unused object keeps its call with null data, so the object keeps its size and
format. Objects are followed by name, bindings per context (texture units,
buffer targets, vertex arrays, framebuffers) as the calls make them; which
parameters name textures, buffers and containers comes from the GL registry.
What can read data without a draw (copies, mipmap generation, uploads from a
pixel-unpack buffer) keeps what it may read. All contexts are taken to share
one namespace: where they do not, more is kept, or the self-check finds the
mistake and the trim keeps every upload (`keep.LEVELS`).

Settings only draws read (uniforms, texture and sampler parameters, enables,
blend, depth, stencil, viewport, scissor and clear state) are left out where
the same setting is made again before the part with no draw kept in between;
display lists, glPush/PopAttrib and transform feedback end that.
"""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Callable
from typing import NamedTuple

from retrace.gl.registry import Registry, load_registry
from retrace.trace.flags import CallFlag
from retrace.trace.model import CallBatch, FunctionSig, NodeLists, Signatures
from retrace.trace.reader import TraceReader
from retrace.trim.keep import MAKE_CURRENT_CALL
from retrace.trim.outline import Part

RESOURCES = ("texture", "buffer")
CONTAINERS = ("vertex array", "framebuffer")

_FULL = re.compile(r"gl(Compressed)?TexImage[123]D(ARB|EXT|OES)?$|glBufferData(ARB)?$")
_PART = re.compile(r"gl(Compressed)?TexSubImage[123]D(ARB|EXT|OES)?$|glBufferSubData(ARB)?$")
_NAMED_FULL = re.compile(r"glNamedBufferData(EXT)?$")
_NAMED_PART = re.compile(r"glNamedBufferSubData(EXT)?$|gl(Compressed)?TextureSubImage[123]D(EXT)?$")
_READS = re.compile(r"Copy|Generate|TexBuffer|TextureBuffer|TextureView")  # without a draw
_POINTERS = re.compile(r"gl\w*(Pointer|AttribFormat|AttribBinding)\w*$")

GL_TEXTURE0 = 0x84C0
GL_ARRAY_BUFFER, GL_ELEMENT_ARRAY_BUFFER, GL_PIXEL_UNPACK_BUFFER = 0x8892, 0x8893, 0x88EC
GL_TEXTURE_CUBE_MAP = 0x8513
_CUBE_FACES = range(0x8515, 0x851B)
_DRAW_FRAMEBUFFERS = (0x8D40, 0x8CA9)  # GL_FRAMEBUFFER, GL_DRAW_FRAMEBUFFER


class Cut(NamedTuple):
    """What to do with one upload: drop it, or keep it with null data in argument `blank`."""

    blank: int | None


(OTHER, BIND_TEXTURE, ACTIVE_TEXTURE, BIND_BUFFER, BIND_INDEXED, BIND_VAO, BIND_FBO) = range(7)
(FULL, PART, NAMED_FULL, NAMED_PART, DELETE, CURRENT, DRAW) = range(7, 14)
(SETTING, USE_PROGRAM, BARRIER, NEW_LIST, END_LIST, MAP, MEMCPY) = range(14, 21)
_MAP = re.compile(r"glMap(Named)?Buffer(Range)?(ARB|EXT|OES)?$")

# Settings that only draws and clears read: a later call with the same key replaces one
# (keys: what the value belongs to, per context for global state, see `_setting`)
_GLOBAL_SETTINGS = {
    name: group
    for group, names in (
        ("blend func", "glBlendFunc glBlendFuncSeparate"),
        ("blend equation", "glBlendEquation glBlendEquationSeparate"),
        ("blend color", "glBlendColor"),
        ("depth func", "glDepthFunc"),
        ("depth mask", "glDepthMask"),
        ("color mask", "glColorMask"),
        ("viewport", "glViewport"),
        ("scissor", "glScissor"),
        ("clear color", "glClearColor"),
        ("clear depth", "glClearDepth glClearDepthf"),
        ("clear stencil", "glClearStencil"),
        ("cull face", "glCullFace"),
        ("front face", "glFrontFace"),
        ("polygon offset", "glPolygonOffset"),
        ("line width", "glLineWidth"),
        ("depth range", "glDepthRange glDepthRangef"),
        ("stencil mask", "glStencilMask"),
        ("stencil func", "glStencilFunc"),
        ("stencil op", "glStencilOp"),
    )
    for name in names.split()
}
_UNIFORM = re.compile(
    r"gl(Program)?Uniform(Matrix)?[1-4](x[2-4])?(fv|iv|uiv|dv|f|i|ui|d|i64v|ui64v)(ARB|EXT)?$"
)
_TEX_PARAMETER = re.compile(r"glTexParameter(I?[if]v?|Iu?iv)(EXT)?$")
_NAMED_PARAMETER = re.compile(r"gl(Texture|Sampler)Parameter(I?[if]v?|Iu?iv)(EXT)?$")
_BARRIERS = re.compile(
    r"glP(ush|op)(Client)?Attrib|glCallLists?$|glExecuteCommands|gl(Begin|End)TransformFeedback"
)


class _Plan(NamedTuple):
    name: str
    args: tuple[str, ...]
    kind: int
    refs: tuple[tuple[int, str], ...]  # (argument, object class) of names it passes
    data: int | None  # the argument holding an upload's data


def _plan(sig: FunctionSig, gl: Registry) -> _Plan:
    name, arg_names = sig.name, sig.arg_names
    command = gl.command(name)
    classes = {p.name: p.object_class for p in command.params} if command else {}
    refs = tuple(
        (i, c) for i, a in enumerate(arg_names) if (c := classes.get(a)) in RESOURCES + CONTAINERS
    )
    data = next((i for i, a in enumerate(arg_names) if a in ("data", "pixels")), None)
    kind = OTHER
    if MAKE_CURRENT_CALL.match(name):
        kind = CURRENT
    elif re.match(r"glBindTexture(EXT)?$", name):
        kind = BIND_TEXTURE
    elif re.match(r"glActiveTexture(ARB)?$", name):
        kind = ACTIVE_TEXTURE
    elif re.match(r"glBindBuffer(ARB|EXT|NV)?$", name):
        kind = BIND_BUFFER
    elif re.match(r"glBindBuffer(Base|Range)(EXT|NV)?$", name):
        kind = BIND_INDEXED
    elif re.match(r"glBindVertexArray(APPLE|OES)?$", name):
        kind = BIND_VAO
    elif re.match(r"glBindFramebuffer(EXT|OES)?$", name):
        kind = BIND_FBO
    elif re.match(r"glDelete(Textures|Buffers)(ARB|EXT)?$", name):
        kind = DELETE
    elif _MAP.match(name):
        kind = MAP
    elif name == "memcpy":
        kind = MEMCPY
    elif _is_setting(name):
        kind = SETTING
    elif re.match(r"glUseProgram(ObjectARB)?$", name):
        kind = USE_PROGRAM
    elif _BARRIERS.match(name):
        kind = BARRIER
    elif name == "glNewList":
        kind = NEW_LIST
    elif name == "glEndList":
        kind = END_LIST
    elif _FULL.match(name):
        kind = FULL
    elif _PART.match(name):
        kind = PART
    elif _NAMED_FULL.match(name):
        kind = NAMED_FULL
    elif _NAMED_PART.match(name):
        kind = NAMED_PART
    elif sig.flags & CallFlag.RENDER or name.startswith(("glDispatchCompute", "glBegin")):
        kind = DRAW
    return _Plan(name, arg_names, kind, refs, data)


def _int(value: object) -> int:
    return value if isinstance(value, int) else 0


def _span(offset: object, size: object) -> tuple[int, int] | None:
    if isinstance(offset, int) and isinstance(size, int):
        return offset, offset + size
    return None


def _names(value: object) -> list[int]:
    """The object names a value passes: one, or an array of them."""
    if isinstance(value, list):
        return [v for v in value if isinstance(v, int) and v]
    return [value] if isinstance(value, int) and value else []


def _is_setting(name: str) -> bool:
    if name in _GLOBAL_SETTINGS or name in ("glEnable", "glDisable"):
        return True
    return any(p.match(name) for p in (_UNIFORM, _TEX_PARAMETER, _NAMED_PARAMETER))


class _Object:
    """One texture or buffer between its first upload and its deletion."""

    __slots__ = ("pending", "last_full", "holds")

    def __init__(self) -> None:
        self.pending: dict[int, list[int]] = defaultdict(list)  # image -> uploads unseen
        self.last_full: dict[int, int] = {}  # image -> its last full specification
        self.holds: set[tuple[str, int]] = set()  # (class, name) it holds (a container)


def unseen_uploads(path: str, part: Part) -> dict[int, Cut]:
    """The uploads before `part` that no frame of it can see, by position (see above)."""
    return _Analysis(part).run(path)


class _Analysis:
    def __init__(self, part: Part) -> None:
        self.part = part
        self.gl = load_registry()
        self.plans: dict[int, _Plan] = {}
        self.objects: dict[tuple[str, int], _Object] = {}
        self.cuts: dict[int, Cut] = {}
        self.context: dict[int, object] = {}  # per thread
        self.unit: dict[object, int] = {}  # per context: the active texture unit
        # per context: (what, target, index) -> name bound
        self.bound: dict[object, dict[tuple[str, int, int], int]] = defaultdict(dict)
        self.used: set[tuple[str, int]] = set()  # named in the part
        self.blank: dict[int, int | None] = {}  # full specifications: their data argument
        self.spans: dict[int, tuple[int, int]] = {}  # buffer uploads: the bytes they write
        self.settings: dict[tuple[object, ...], int] = {}  # setting -> the call that made it
        self.program: dict[object, int] = {}  # per context: the program in use
        self.listing: set[int] = set()  # threads compiling a display list
        self.feedback: dict[object, bool] = {}  # per context: transform feedback active
        # mapped memory: (start, end, buffer, offset in it), the latest first
        self.mappings: list[tuple[int, int, int, int]] = []
        self.sizes: dict[int, int] = {}  # buffer -> size given by its last glBufferData

    def run(self, path: str) -> dict[int, Cut]:
        reader = TraceReader(path)
        sigs = reader.signatures
        position = 0
        for batch in reader.batches():
            values: NodeLists | None = None
            for i in range(len(batch)):
                if position > self.part.end:
                    break
                sid = batch.call(i)[2]
                plan = self.plans.get(sid)
                if plan is None:
                    sig = sigs.functions[sid]
                    plan = self.plans[sid] = _plan(sig, self.gl)
                if plan.kind != OTHER or plan.refs:
                    if values is None:
                        values = NodeLists(batch)
                    self._call(batch, values, i, position, plan, sigs)
                position += 1
            if position > self.part.end:
                break
        self._unused()
        return self.cuts

    def _call(
        self,
        batch: CallBatch,
        values: NodeLists,
        index: int,
        position: int,
        plan: _Plan,
        sigs: Signatures,
    ) -> None:
        _, _, _, thread, _, node_start, _, slot_start, nargs, ret, _, _ = batch.call(index)
        slots = batch.arguments(slot_start, nargs)

        def arg(n: int) -> object:
            if n >= len(slots) or slots[n] < 0:
                return None
            return values.value(node_start + slots[n], sigs)

        kind = plan.kind
        if kind == CURRENT:
            self.context[thread] = arg(nargs - 1)
            return
        ctx = self.context.get(thread)
        names = [(c, n) for a, c in plan.refs for n in _names(arg(a))]
        if position >= self.part.start:
            self.used.update(names)
            return
        if kind in (NEW_LIST, END_LIST):
            self.listing.symmetric_difference_update({thread})
            return
        if thread in self.listing:  # a display list's content: kept, never run here
            return
        if kind == SETTING:
            self._setting(plan, arg, ctx, position)
            return
        if kind == USE_PROGRAM:
            self.program[ctx] = _int(arg(0))
            return
        if kind == MAP:
            address = values.value(node_start + ret, sigs) if ret >= 0 else None
            self._map(plan, arg, _int(address), ctx)
            return
        if kind == MEMCPY:  # a write into mapped memory: an upload to that buffer's bytes
            destination, size = _int(arg(0)), _int(arg(2))
            for base, end, buffer, offset in self.mappings:
                if base <= destination < end:
                    lo = offset + destination - base
                    self._add("buffer", buffer, 0, position, False, plan, (lo, lo + size))
                    break
            return
        if kind == BARRIER:
            if "TransformFeedback" in plan.name:  # draws while it is active are kept
                self.feedback[ctx] = plan.name.startswith("glBegin")
            self.settings.clear()
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
        elif kind == DELETE:
            for c, n in names:
                self._end(c, n)
        elif kind in (FULL, PART):
            level = _int(arg(1))
            span = None if kind == FULL else _span(arg(1), arg(2))
            self._upload(bound, ctx, kind == FULL, _int(target), level, position, plan, span)
        elif kind in (NAMED_FULL, NAMED_PART):
            span = None if kind == NAMED_FULL else _span(arg(1), arg(2))
            if kind == NAMED_FULL:
                self.sizes[_int(arg(0))] = _int(arg(1))
            for c, n in names:
                self._add(c, n, 0, position, kind == NAMED_FULL, plan, span)
        elif kind == DRAW:
            offscreen = bound.get(("framebuffer", 0, -1)) or self.feedback.get(ctx)
            if offscreen or plan.name.startswith("glDispatch"):
                self.settings.clear()  # it is kept at a level that cuts: it reads them
                for (what, _, _), n in list(bound.items()):  # what it may read
                    self._seen(what, n)
        else:
            self._other(bound, ctx, plan, names)

    def _map(self, plan: _Plan, arg: Callable[[int], object], address: int, ctx: object) -> None:
        """A buffer mapped at `address`: the writes into it that memcpy records make."""
        named = "Named" in plan.name
        buffer = _int(arg(0)) if named else self.bound[ctx].get(("buffer", _int(arg(0)), -1), 0)
        if "Range" in plan.name:
            offset, length = _int(arg(1)), _int(arg(2))
        else:
            offset, length = 0, self.sizes.get(buffer, 0)
        if not address or not buffer or not length:
            return
        end = address + length
        self.mappings = [m for m in self.mappings if m[1] <= address or end <= m[0]]
        self.mappings.insert(0, (address, end, buffer, offset))

    def _setting(
        self, plan: _Plan, arg: Callable[[int], object], ctx: object, position: int
    ) -> None:
        """A setting replaces the one with the same key before it (nothing read it)."""
        name = plan.name
        key: tuple[object, ...]
        if name in ("glEnable", "glDisable"):
            key = ("enable", ctx, arg(0))
        elif name in _GLOBAL_SETTINGS:
            key = (_GLOBAL_SETTINGS[name], ctx)
        elif _TEX_PARAMETER.match(name):
            target = _int(arg(0))
            texture = self.bound[ctx].get(("texture", target, self.unit.get(ctx, 0)), 0)
            key = ("texture parameter", texture, arg(1))
        elif _NAMED_PARAMETER.match(name):
            key = (name[2:9], arg(0), arg(1))
        else:  # a uniform: of the program in use or named, at a location, so many values
            where = dict(zip(plan.args, range(len(plan.args)), strict=True))
            program = arg(where["program"]) if "program" in where else self.program.get(ctx)
            count = arg(where["count"]) if "count" in where else 1
            key = ("uniform", program, arg(where.get("location", 0)), count)
        before = self.settings.get(key)
        if before is not None:
            self.cuts[before] = Cut(None)
        self.settings[key] = position

    def _upload(
        self,
        bound: dict[tuple[str, int, int], int],
        ctx: object,
        full: bool,
        target: int,
        level: int,
        position: int,
        plan: _Plan,
        span: tuple[int, int] | None,
    ) -> None:
        unpack = bound.get(("buffer", GL_PIXEL_UNPACK_BUFFER, -1), 0)
        if unpack:  # the data comes from a buffer: it is read
            self._seen("buffer", unpack)
        if "Buffer" in plan.name:  # glBuffer(Sub)Data(target, ...)
            buffer = bound.get(("buffer", target, -1), 0)
            if full:
                self.sizes[buffer] = level  # (glBufferData's second argument: its size)
            self._add("buffer", buffer, 0, position, full, plan, span)
            return
        binding = GL_TEXTURE_CUBE_MAP if target in _CUBE_FACES else target
        name = bound.get(("texture", binding, self.unit.get(ctx, 0)), 0)
        self._add("texture", name, (target << 8) | (level & 0xFF), position, full, plan, None)

    def _add(
        self,
        c: str,
        name: int,
        image: int,
        position: int,
        full: bool,
        plan: _Plan,
        span: tuple[int, int] | None,
    ) -> None:
        """An upload to an image of an object: all of it (`full`), or the bytes `span` of a
        buffer (None: somewhere in it)."""
        if c not in RESOURCES or not name:
            return
        obj = self.objects.setdefault((c, name), _Object())
        pending = obj.pending[image]
        if full:
            self.cuts.update((p, Cut(None)) for p in pending)
            pending.clear()
            obj.last_full[image] = position
            self.blank[position] = plan.data
        elif span is not None:  # earlier writes within the same bytes are overwritten
            lo, hi = span
            covered = {p for p in pending if (s := self.spans.get(p)) and lo <= s[0] and s[1] <= hi}
            self.cuts.update((p, Cut(None)) for p in covered)
            pending[:] = [p for p in pending if p not in covered]
            self.spans[position] = span
        pending.append(position)

    def _seen(self, c: str, name: int) -> None:
        """Something read the object: its uploads so far are needed."""
        obj = self.objects.get((c, name))
        if obj is not None:
            obj.pending.clear()
            for held in obj.holds:
                self._seen(*held)

    def _end(self, c: str, name: int) -> None:
        obj = self.objects.pop((c, name), None)
        if obj is not None:
            for uploads in obj.pending.values():
                self.cuts.update((p, Cut(None)) for p in uploads)

    def _hold(
        self, bound: dict[tuple[str, int, int], int], c: str, held: list[tuple[str, int]]
    ) -> None:
        name = bound.get((c, 0, -1), 0)
        if name:
            self.objects.setdefault((c, name), _Object()).holds.update(held)

    def _other(
        self,
        bound: dict[tuple[str, int, int], int],
        ctx: object,
        plan: _Plan,
        names: list[tuple[str, int]],
    ) -> None:
        containers = [(c, n) for c, n in names if c in CONTAINERS]
        resources = [(c, n) for c, n in names if c in RESOURCES]
        for c, n in containers:  # glFramebufferTexture2D-style DSA, glVertexArrayVertexBuffer
            self.objects.setdefault((c, n), _Object()).holds.update(resources)
        if not containers and resources:  # attachments to the framebuffer bound
            self._hold(bound, "framebuffer", resources)
        if _POINTERS.match(plan.name):
            array_buffer = bound.get(("buffer", GL_ARRAY_BUFFER, -1), 0)
            self._hold(bound, "vertex array", [("buffer", array_buffer)])
        if _READS.search(plan.name):
            for c, n in resources:
                self._seen(c, n)
            for (what, _, _), n in list(bound.items()):
                self._seen(what, n)

    def _unused(self) -> None:
        """At the part's start: what the part names, what is bound, and what those hold are
        used; the unseen uploads of every other object are cut (its last specification of
        each image blanked)."""
        used = set(self.used)
        for bound in self.bound.values():
            used.update((c, n) for (c, _, _), n in bound.items() if n)
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
                last = obj.last_full.get(image)
                for p in uploads:
                    self.cuts[p] = Cut(self.blank.get(p) if p == last else None)
