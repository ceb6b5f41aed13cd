"""Settings a trim can leave out: state set before the part and set again before anything reads it.

With the draws before the part gone, most of the calls left there only set
state: bindings (texture units, buffer targets, vertex arrays, programs),
vertex attribute pointers, matrices, fixed-function and fragment settings,
uniforms, texture parameters. A program sets them anew for every draw, so in a
long trace they are most of the setup. They are followed backwards from the
part (which is taken to read every setting): a call is left out when all it
sets is set again later before any kept call reads it. What a call sets and
reads is keyed by context, and by texture unit, vertex array or matrix stack
depth where those decide; a glPushMatrix and its glPopMatrix go together,
when nothing kept lies between them; a call on a bound target (an upload, a
mapping, an attachment) reads that binding and the pixel store; a call not
described here reads everything: nothing set before it is left out. What a
display list holds is not followed, but a list compiled (GL_COMPILE) sets that
list: its glNewList..glEndList is left out whole when the list is compiled
again before anything kept may call it (Chromium B.S.U. compiles its ship
twice).

Program and shader objects are followed the same way, but what the part does
not use is not read at its start: the calls that make programs and shaders
(glCreateShader, glShaderSource, glAttachShader, glLinkProgram, ...) and the
uniforms of programs neither in use when the part starts, nor named by it, nor
drawn with by a draw kept before it, are left out.
"""

from __future__ import annotations

import re
from array import array
from collections.abc import Callable, Iterator
from typing import NamedTuple

from retrace.gl.registry import load_registry
from retrace.replay.ws.core import is_window_system_call
from retrace.trace.flags import CallFlag
from retrace.trim.keep import MAKE_CURRENT_CALL, Call

GL_TEXTURE0 = 0x84C0
GL_ARRAY_BUFFER, GL_ELEMENT_ARRAY_BUFFER = 0x8892, 0x8893
GL_MODELVIEW, GL_TEXTURE = 0x1700, 0x1702
GL_TEXTURE_COORD_ARRAY = 0x8078

Key = tuple[object, ...]
Arg = Callable[[int], object]


class Effect(NamedTuple):
    """What one call sets and reads. `stack`: a glPushMatrix (`push`) or glPopMatrix of that
    matrix stack, left out only with its pair, when nothing between them is kept."""

    sets: tuple[Key, ...]
    reads: tuple[Key, ...]
    stack: Key | None = None
    push: bool = False
    draw: object = None  # a draw (kept offscreen): it reads everything of this program alone
    scope: object = None  # a glPush/PopClientAttrib's: the context whose client arrays it saves


# Settings keyed by the function's family (its name less type suffixes) and the arguments
# that select what is set; the rest are the value. Families scoped to the active texture
# unit, and those that transform what they set by the modelview matrix, are marked.
_SETTINGS = {
    family: scope
    for scope, families in (
        ("", "glColor glSecondaryColor glNormal glFogCoord glMaterial glLightModel glFog"),
        ("", "glPointParameter glPointSize glLineWidth glLineStipple glPolygonMode glShadeModel"),
        ("", "glPolygonOffset glAlphaFunc glHint glPixelStore glBlendFunc glBlendFuncSeparate"),
        ("", "glBlendEquation glBlendEquationSeparate glBlendColor glDepthFunc glDepthMask"),
        ("", "glDepthRange glColorMask glViewport glScissor glClearColor glClearDepth"),
        ("", "glClearStencil glCullFace glFrontFace glStencilMask glStencilFunc glStencilOp"),
        ("", "glStencilFuncSeparate glStencilOpSeparate glStencilMaskSeparate glLogicOp"),
        ("", "glSampleCoverage glColorMaterial glVertexAttrib glTexCoord glMultiTexCoord"),
        ("", "glEdgeFlag glIndex"),
        ("unit", "glTexEnv glEnable glDisable"),
        ("modelview", "glLight glClipPlane"),
        ("unit modelview", "glTexGen"),
    )
    for family in families.split()
}
_SELECTORS = frozenset(
    ("face", "pname", "light", "coord", "plane", "target", "cap", "index", "buf")
)
_SUFFIX = re.compile(r"(ARB|EXT|OES|NV)$")
_TYPE = re.compile(r"(?<=[a-z])[1-4]?(b|s|i|f|d|ub|us|ui|x)?v?$")
_UNIFORM = re.compile(r"gl(Program)?Uniform(Matrix)?[1-4]")
_TEX_PARAMETER = re.compile(r"gl(Tex|Texture|Sampler)Parameter")
_CLIENT_POINTER = re.compile(
    r"gl(Vertex|Normal|Color|SecondaryColor|FogCoord|TexCoord|Index)Pointer"
)
_MATRIX = re.compile(r"gl(Rotate|Translate|Scale|MultMatrix|MultTransposeMatrix|Ortho|Frustum)")
_LOAD = re.compile(r"glLoad(Identity|Matrix|TransposeMatrix)")
# calls that neither read nor set the state followed here
_INERT = re.compile(
    r"gl(Gen|Create|Delete|ObjectLabel|ObjectPtrLabel|FenceSync|ClientWaitSync|WaitSync"
    r"|(Push|Pop)DebugGroup|Debug)"
)
# what a program or shader object is made of: their calls set it, and read it
_OBJECTS = {"program": "program object", "shader": "shader"}
GL_PIXEL_PACK_BUFFER, GL_PIXEL_UNPACK_BUFFER = 0x88EB, 0x88EC
GL_TEXTURE_CUBE_MAP = 0x8513
_CUBE_FACES = range(0x8515, 0x851B)
GL_CLIENT_VERTEX_ARRAY_BIT = 0x2
GL_COMPILE = 0x1300
# what glPopClientAttrib(GL_CLIENT_VERTEX_ARRAY_BIT) restores (with the array buffer bound)
_CLIENT_ARRAYS = frozenset(
    ("client pointer", "client state", "client unit", "attribute", "attribute on", "elements")
    + ("vertex array", "glVertexAttribDivisor")
)
# glInterleavedArrays: the arrays it points (and enables or disables), by their pointer call
_INTERLEAVED = {
    "glVertexPointer": 0x8074,
    "glNormalPointer": 0x8075,
    "glColorPointer": 0x8076,
    "glIndexPointer": 0x8077,
    "glTexCoordPointer": GL_TEXTURE_COORD_ARRAY,
    "glEdgeFlagPointer": 0x8079,
}


def family(name: str) -> str:
    """glColor4ubv -> glColor, glPointParameterfARB -> glPointParameter."""
    return _TYPE.sub("", _SUFFIX.sub("", name))


Rule = Callable[[object, Arg, str, tuple[str, ...]], "Effect | None"]


class Liveness:
    """Fed the setup's kept calls in order (`add`); `dead()` names those left out.

    A long trace's setup is millions of calls, but few distinct effects (a program sets
    the same things again every frame): each effect is kept once, and per position only
    the index of its call's effect, in a flat array (a Python object per call took a
    gigabyte and more on long traces)."""

    def __init__(self) -> None:
        # per position: the effect of its call, by index in `_distinct` (0: not followed);
        # two bytes each, four once a trace has more than 65,535 distinct effects
        self._effects = array("H")
        self._index: dict[Effect | None, int] = {}  # None: reads everything
        self._distinct: list[Effect | None] = [None]  # (index 0: no call)
        self._rules: dict[int, Rule | None] = {}
        self._context: dict[int, object] = {}  # per thread
        self._listing: set[int] = set()
        self._compiling: dict[int, int] = {}  # per thread: the glNewList(GL_COMPILE) open
        self._list_ends: dict[int, int] = {}  # a glNewList(GL_COMPILE): its glEndList
        self._unit: dict[object, int] = {}
        self._client_unit: dict[object, int] = {}
        self._vao: dict[object, int] = {}
        self._program: dict[object, int] = {}
        self._mode: dict[object, int] = {}
        self._depth: dict[Key, int] = {}
        self._texture: dict[Key, int] = {}  # (context, unit, target) -> texture bound
        self._pixel_store: dict[object, set[Key]] = {}  # per context: the keys set
        self._client_masks: dict[object, list[int]] = {}  # per context: the masks pushed
        self._extent: dict[object, tuple[int, int]] = {}  # per context: the viewports' reach
        self._gl = load_registry()
        self._refs: dict[int, tuple[tuple[int, str], ...]] = {}  # programs, shaders named
        self._used: set[Key] = set()  # the programs and shaders the part names
        self._bindings: dict[str, Rule] = {
            "glBindTexture": self._bind_texture,
            "glActiveTexture": self._active_texture,
            "glClientActiveTexture": self._client_active_texture,
            "glBindBuffer": self._bind_buffer,
            "glBindBufferBase": self._bind_indexed,
            "glBindBufferRange": self._bind_indexed,
            "glBindVertexArray": self._bind_vertex_array,
            "glUseProgram": self._use_program,
            "glUseProgramObject": self._use_program,
            "glCreateProgram": self._create,
            "glCreateShader": self._create,
            "glVertexAttribPointer": self._attrib_pointer,
            "glVertexAttribIPointer": self._attrib_pointer,
            "glVertexAttribLPointer": self._attrib_pointer,
            "glEnableVertexAttribArray": self._attrib_array,
            "glDisableVertexAttribArray": self._attrib_array,
            "glViewport": self._viewport,
            "glPushClientAttrib": self._client_attrib,
            "glPopClientAttrib": self._client_attrib,
            "glInterleavedArrays": self._interleaved,
            "glEnableClientState": self._client_state,
            "glDisableClientState": self._client_state,
            "glVertexAttribDivisor": self._vertex_array_setting,
            "glMatrixMode": self._matrix_mode,
            "glPushMatrix": self._stack,
            "glPopMatrix": self._stack,
            "glNewList": _list,
            "glEndList": _list,
        }

    def add(self, call: Call) -> None:
        """One kept call before the part, in order."""
        sid, thread = call.record[2], call.record[3]
        sig = call.sigs.functions[sid]
        if sid in self._rules:
            rule = self._rules[sid]
        else:
            rule = self._rules[sid] = self._rule(sig.name, sig.arg_names)
        if rule is _inert:
            return
        if rule is _list:  # what a list holds is not followed, and it may read anything
            self._listing.symmetric_difference_update({thread})
            started = self._compiling.pop(thread, None)
            if thread in self._listing and call.arguments()(1) == GL_COMPILE:  # glNewList
                self._compiling[thread] = call.position
                name = call.arguments()(0)
                self._append(Effect((("list", self._context.get(thread), name),), ()), call)
                return
            if started is not None:  # its glEndList: goes with its glNewList
                self._list_ends[started] = call.position
                return
        elif thread in self._listing:
            return  # a list's content: kept as it is
        effect = None
        if rule is not None and rule is not _list:
            arg = call.arguments()
            if rule is _current:
                self._context[thread] = arg(len(sig.arg_names) - 1)
                return
            effect = rule(self._context.get(thread), arg, sig.name, sig.arg_names)
        elif rule is None and (sig.flags & CallFlag.RENDER or sig.name.startswith("glDispatch")):
            effect = Effect((), (), draw=self._program.get(self._context.get(thread), 0))
        self._append(effect, call)

    def _append(self, effect: Effect | None, call: Call) -> None:
        """A call's effect, at its position."""
        index = self._index.get(effect)
        if index is None:
            index = self._index[effect] = len(self._distinct)
            self._distinct.append(effect)
            if index > 0xFFFF and self._effects.typecode == "H":
                self._effects = array("I", self._effects)
        effects = self._effects
        effects.frombytes(bytes((call.position - len(effects)) * effects.itemsize))
        effects.append(index)

    def part(self, call: Call) -> None:
        """A call of the part: the programs and shaders it names are used, as are those in
        use when it starts."""
        if not self._used:
            self._used.update(("program object", p) for p in self._program.values())
            self._used.add(("program object", None))  # (marks the start seen)
        sid = call.record[2]
        refs = self._refs.get(sid)
        if refs is None:
            command = self._gl.command(call.sigs.functions[sid].name)
            params = command.params if command else ()
            classes = [
                (i, _OBJECTS[p.object_class])
                for i, p in enumerate(params)
                if p.object_class in _OBJECTS
            ]
            refs = self._refs[sid] = tuple(classes)
        if refs:
            arg = call.arguments()
            self._used.update((what, arg(i)) for i, what in refs)

    def _unused(self, key: Key) -> bool:
        """Whether the part never uses what `key` belongs to (a program or shader object,
        a program's uniform)."""
        what = key[0]
        if what == "uniform":
            return ("program object", key[1]) not in self._used
        return what in ("program object", "shader") and key not in self._used

    def dead(self) -> Iterator[int]:
        """The calls whose settings are all set again before anything kept reads them, or
        belong to programs and shaders the part never uses."""
        overwritten: set[Key] = set()
        revived: set[Key] = set()  # unused objects' keys read by calls kept
        drawn_with: set[object] = set()  # the programs of draws kept
        everything = False  # a call reading everything is kept
        # glPopClientAttrib..glPushClientAttrib, from the pop back: (its context, the client
        # array keys overwritten after the pop, those read since, whether a draw was kept)
        scopes: list[tuple[object, set[Key], set[Key], list[bool]]] = []

        def gone(key: Key) -> bool:
            if key in overwritten:
                return True
            if scopes and _client_array(key, scopes[-1][0]):  # undone by the pop
                _, _, read, drew = scopes[-1]
                return not drew[0] and key not in read
            if everything or key in revived or not self._unused(key):
                return False
            return key[0] == "shader" or key[1] not in drawn_with

        def keep(effect: Effect) -> None:
            overwritten.update(effect.sets)
            overwritten.difference_update(effect.reads)
            revived.update(effect.reads)
            if scopes:
                scopes[-1][2].update(effect.reads)

        kept = 0  # calls kept so far, from the part backwards
        pops: dict[Key, list[tuple[int, int]]] = {}  # per stack: (position, kept then)
        distinct, effects = self._distinct, self._effects
        for position in range(len(effects) - 1, -1, -1):
            index = effects[position]
            if not index:
                continue
            effect = distinct[index]
            if effect is None or effect.draw is not None:
                overwritten.clear()
                everything = everything or effect is None
                if effect is not None:
                    drawn_with.add(effect.draw)
                for scope in scopes:
                    scope[3][0] = True
                kept += 1
                continue
            if effect.stack is not None:
                pending = pops.setdefault(effect.stack, [])
                if not effect.push:  # kept unless its push is left out (see above)
                    pending.append((position, kept))
                    if effect.scope is not None:
                        after = {k for k in overwritten if _client_array(k, effect.scope)}
                        scopes.append((effect.scope, after, set(), [False]))
                    keep(effect)
                    continue
                if effect.scope is not None and scopes:  # what was set before it lives on
                    ctx, after, _, _ = scopes.pop()
                    overwritten.difference_update(
                        {k for k in overwritten if _client_array(k, ctx)} - after
                    )
                    overwritten.update(after)
                if pending:
                    pop, then = pending.pop()
                    if then == kept:  # nothing kept between the two
                        yield position
                        yield pop
                        continue
                    kept += 1  # (the pop)
            elif effect.sets and all(gone(key) for key in effect.sets):
                yield position
                yield from range(position + 1, self._list_ends.get(position, position) + 1)
                continue
            kept += 1
            keep(effect)

    def _rule(self, name: str, args: tuple[str, ...]) -> Rule | None:
        """How to find a function's effect; None: it reads everything."""
        if MAKE_CURRENT_CALL.match(name):
            return _current
        if is_window_system_call(name) or not name.startswith("gl"):
            return _inert
        base = _SUFFIX.sub("", name)
        if base in self._bindings:
            return self._bindings[base]
        if _UNIFORM.match(name):
            return self._uniform
        if args[:1] in (("program",), ("shader",)):
            return self._object_call
        if _INERT.match(name):
            return _inert
        if _TEX_PARAMETER.match(name):
            return self._parameter
        if _CLIENT_POINTER.match(name):
            return self._client_pointer
        if _MATRIX.match(name) or _LOAD.match(name):
            return self._matrix
        if family(name) in _SETTINGS:
            return self._setting
        if args[:1] == ("target",) and not name.startswith("glBindTransformFeedback"):
            return self._of_target
        return None

    # -- bindings
    def _bind_texture(self, ctx: object, arg: Arg, name: str, args: tuple[str, ...]) -> Effect:
        unit = self._unit.get(ctx, 0)
        self._texture[ctx, unit, arg(0)] = _int(arg(1))
        return Effect((("texture", ctx, unit, arg(0)),), (("unit", ctx),))

    def _active_texture(self, ctx: object, arg: Arg, name: str, args: tuple[str, ...]) -> Effect:
        self._unit[ctx] = _int(arg(0)) - GL_TEXTURE0
        return Effect((("unit", ctx),), ())

    def _client_active_texture(
        self, ctx: object, arg: Arg, name: str, args: tuple[str, ...]
    ) -> Effect:
        self._client_unit[ctx] = _int(arg(0)) - GL_TEXTURE0
        return Effect((("client unit", ctx),), ())

    def _bind_buffer(self, ctx: object, arg: Arg, name: str, args: tuple[str, ...]) -> Effect:
        if arg(0) == GL_ELEMENT_ARRAY_BUFFER:  # the vertex array's
            return Effect((("elements", ctx, self._vao.get(ctx, 0)),), (("vertex array", ctx),))
        return Effect((("buffer", ctx, arg(0)),), ())

    def _bind_indexed(self, ctx: object, arg: Arg, name: str, args: tuple[str, ...]) -> Effect:
        return Effect((("buffer", ctx, arg(0)), ("indexed", ctx, arg(0), arg(1))), ())

    def _bind_vertex_array(self, ctx: object, arg: Arg, name: str, args: tuple[str, ...]) -> Effect:
        self._vao[ctx] = _int(arg(0))
        return Effect((("vertex array", ctx),), ())

    def _use_program(self, ctx: object, arg: Arg, name: str, args: tuple[str, ...]) -> Effect:
        self._program[ctx] = _int(arg(0))
        return Effect((("program", ctx),), (("program object", arg(0)),))

    # -- program and shader objects: kept only for the programs the part uses
    def _create(self, ctx: object, arg: Arg, name: str, args: tuple[str, ...]) -> Effect:
        """glCreateProgram, glCreateShader: the object (the return value) begins."""
        what = "program object" if "Program" in name else "shader"
        return Effect(((what, arg(-1)),), ())

    def _object_call(self, ctx: object, arg: Arg, name: str, args: tuple[str, ...]) -> Effect:
        """A call on a program or shader (glShaderSource, glAttachShader, glLinkProgram,
        glGetUniformLocation, ...): it changes the object, from what it was and from
        the shaders it names."""
        key = (_OBJECTS[args[0]], arg(0))
        reads = (key, *(("shader", arg(i)) for i, a in enumerate(args) if a == "shader"))
        return Effect((key,), reads)

    # -- vertex arrays
    def _attrib_pointer(self, ctx: object, arg: Arg, name: str, args: tuple[str, ...]) -> Effect:
        vao = self._vao.get(ctx, 0)
        reads = (("buffer", ctx, GL_ARRAY_BUFFER), ("vertex array", ctx))
        return Effect((("attribute", ctx, vao, arg(0)),), reads)

    def _attrib_array(self, ctx: object, arg: Arg, name: str, args: tuple[str, ...]) -> Effect:
        vao = self._vao.get(ctx, 0)
        return Effect((("attribute on", ctx, vao, arg(0)),), (("vertex array", ctx),))

    def _client_pointer(self, ctx: object, arg: Arg, name: str, args: tuple[str, ...]) -> Effect:
        vao, unit = self._vao.get(ctx, 0), self._client_unit.get(ctx, 0)
        reads = (("buffer", ctx, GL_ARRAY_BUFFER), ("vertex array", ctx), ("client unit", ctx))
        return Effect((("client pointer", ctx, vao, _SUFFIX.sub("", name), unit),), reads)

    def _viewport(self, ctx: object, arg: Arg, name: str, args: tuple[str, ...]) -> Effect:
        """A setting, but one that reaches past every viewport before it is kept (see
        above)."""
        x, y, width, height = (_int(arg(i)) for i in range(4))
        reach = self._extent.get(ctx, (0, 0))
        if x + width <= reach[0] and y + height <= reach[1]:
            return Effect((("glViewport", ctx),), ())
        self._extent[ctx] = (max(x + width, reach[0]), max(y + height, reach[1]))
        return Effect((), ())

    def _client_attrib(
        self, ctx: object, arg: Arg, name: str, args: tuple[str, ...]
    ) -> Effect | None:
        """glPushClientAttrib, glPopClientAttrib: of the client arrays alone, a pair (see
        above); of more, a call that reads everything."""
        masks = self._client_masks.setdefault(ctx, [])
        push = name.startswith("glPush")
        if push:
            masks.append(_int(arg(0)))
        mask = masks[-1] if masks else 0
        if not push and masks:
            masks.pop()
        if mask != GL_CLIENT_VERTEX_ARRAY_BIT:
            return None
        return Effect((), (), ("client attrib", ctx), push, scope=ctx)

    def _interleaved(self, ctx: object, arg: Arg, name: str, args: tuple[str, ...]) -> Effect:
        """glInterleavedArrays: points and enables or disables the six client arrays."""
        vao, unit = self._vao.get(ctx, 0), self._client_unit.get(ctx, 0)
        sets: tuple[Key, ...] = ()
        for pointer, cap in _INTERLEAVED.items():
            on = unit if cap == GL_TEXTURE_COORD_ARRAY else -1
            sets += (("client pointer", ctx, vao, pointer, unit),)
            sets += (("client state", ctx, vao, cap, on),)
        reads = (("buffer", ctx, GL_ARRAY_BUFFER), ("vertex array", ctx), ("client unit", ctx))
        return Effect(sets, reads)

    def _client_state(self, ctx: object, arg: Arg, name: str, args: tuple[str, ...]) -> Effect:
        vao = self._vao.get(ctx, 0)
        unit = self._client_unit.get(ctx, 0) if arg(0) == GL_TEXTURE_COORD_ARRAY else -1
        reads = (("vertex array", ctx), ("client unit", ctx))
        return Effect((("client state", ctx, vao, arg(0), unit),), reads)

    # -- matrices
    def _current_matrix(self, ctx: object) -> tuple[Key, Key, tuple[Key, ...]]:
        """The key of the matrix that matrix calls change now, its stack's, and what
        chooses it (the matrix mode, and for texture matrices the active unit)."""
        mode = self._mode.get(ctx, GL_MODELVIEW)
        stack = ("stack", ctx, mode, self._unit.get(ctx, 0) if mode == GL_TEXTURE else 0)
        chosen_by: tuple[Key, ...] = (("matrix mode", ctx),)
        if mode == GL_TEXTURE:
            chosen_by += (("unit", ctx),)
        return (*stack, self._depth.get(stack, 0)), stack, chosen_by

    def _matrix_mode(self, ctx: object, arg: Arg, name: str, args: tuple[str, ...]) -> Effect:
        self._mode[ctx] = _int(arg(0))
        return Effect((("matrix mode", ctx),), ())

    def _matrix(self, ctx: object, arg: Arg, name: str, args: tuple[str, ...]) -> Effect:
        matrix, _, reads = self._current_matrix(ctx)
        if not _LOAD.match(name):  # a product with the matrix
            reads += (matrix,)
        return Effect((matrix,), reads)

    def _stack(self, ctx: object, arg: Arg, name: str, args: tuple[str, ...]) -> Effect:
        """glPushMatrix copies the matrix one deeper; glPopMatrix ends that copy."""
        matrix, stack, reads = self._current_matrix(ctx)
        depth = self._depth.get(stack, 0)
        if name == "glPushMatrix":
            self._depth[stack] = depth + 1
            return Effect(((*stack, depth + 1),), (*reads, matrix), stack, push=True)
        self._depth[stack] = max(depth - 1, 0)
        return Effect((matrix,), reads, stack)

    def _of_target(self, ctx: object, arg: Arg, name: str, args: tuple[str, ...]) -> Effect:
        """A call on what is bound to a target (uploads, mapping, mipmaps, attachments):
        it reads that binding, and an upload the pixel buffers and pixel store too."""
        target = arg(0)
        unit = self._unit.get(ctx, 0)
        binding = GL_TEXTURE_CUBE_MAP if target in _CUBE_FACES else target
        buffer: Key = ("buffer", ctx, target)
        if target == GL_ELEMENT_ARRAY_BUFFER:
            buffer = ("elements", ctx, self._vao.get(ctx, 0))
        reads: tuple[Key, ...] = (
            ("texture", ctx, unit, binding),
            ("unit", ctx),
            buffer,
            ("vertex array", ctx),
            ("buffer", ctx, GL_PIXEL_UNPACK_BUFFER),
            ("buffer", ctx, GL_PIXEL_PACK_BUFFER),
            *self._pixel_store.get(ctx, ()),
        )
        return Effect((), reads)

    def _vertex_array_setting(
        self, ctx: object, arg: Arg, name: str, args: tuple[str, ...]
    ) -> Effect:
        """glVertexAttribDivisor: per attribute of the vertex array bound."""
        key = (_SUFFIX.sub("", name), ctx, self._vao.get(ctx, 0), arg(0))
        return Effect((key,), (("vertex array", ctx),))

    # -- settings
    def _setting(self, ctx: object, arg: Arg, name: str, args: tuple[str, ...]) -> Effect:
        scope = _SETTINGS[family(name)]
        key: Key = (family(name).replace("glDisable", "glEnable"), ctx)
        key += tuple(arg(i) for i, a in enumerate(args) if a in _SELECTORS)
        reads: tuple[Key, ...] = ()
        if "unit" in scope:
            key += (self._unit.get(ctx, 0),)
            reads += (("unit", ctx),)
        if key[0] == "glPixelStore":  # read by uploads
            self._pixel_store.setdefault(ctx, set()).add(key)
        if "modelview" in scope:
            stack = ("stack", ctx, GL_MODELVIEW, 0)
            reads += ((*stack, self._depth.get(stack, 0)),)
        return Effect((key,), reads)

    def _uniform(self, ctx: object, arg: Arg, name: str, args: tuple[str, ...]) -> Effect:
        where = {a: i for i, a in enumerate(args)}
        reads: tuple[Key, ...] = ()
        if "program" in where:
            program = arg(where["program"])
        else:
            program, reads = self._program.get(ctx, 0), (("program", ctx),)
        count = arg(where["count"]) if "count" in where else 1
        return Effect((("uniform", program, arg(where.get("location", 0)), count),), reads)

    def _parameter(self, ctx: object, arg: Arg, name: str, args: tuple[str, ...]) -> Effect:
        if args[0] != "target":  # glTextureParameter, glSamplerParameter: of a named object
            return Effect((("parameter", name[2:9], arg(0), arg(1)),), ())
        unit = self._unit.get(ctx, 0)
        texture = self._texture.get((ctx, unit, arg(0)), 0)
        owner = (texture, arg(0)) if texture else (ctx, unit, arg(0))  # (a default texture's)
        reads = (("texture", ctx, unit, arg(0)), ("unit", ctx))
        return Effect((("parameter", *owner, arg(1)),), reads)


def _client_array(key: Key, ctx: object) -> bool:
    """Whether glPopClientAttrib(GL_CLIENT_VERTEX_ARRAY_BIT) in `ctx` restores `key`."""
    return key[1] == ctx and (
        key[0] in _CLIENT_ARRAYS or (key[0] == "buffer" and key[2] == GL_ARRAY_BUFFER)
    )


def _int(value: object) -> int:
    return value if isinstance(value, int) else 0


def _inert(ctx: object, arg: Arg, name: str, args: tuple[str, ...]) -> None:
    """Neither reads nor sets what is followed here."""
    return None


def _current(ctx: object, arg: Arg, name: str, args: tuple[str, ...]) -> None:
    """Makes a context current on its thread."""
    return None


def _list(ctx: object, arg: Arg, name: str, args: tuple[str, ...]) -> None:
    """glNewList, glEndList."""
    return None
