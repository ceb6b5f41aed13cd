"""What a replay pass tracks while it runs: contexts, drawables, object names,
uniform locations, mapped memory (`mapped.py`).

Everything here is keyed by the values *recorded in the trace* (context and
drawable handles, object names, addresses) and maps them to what the driver
gave this pass. A new pass starts from `reset()`, so compiled entries, which
hold references to this object and to its dictionaries, stay valid.
"""

from __future__ import annotations

import bisect
from collections import Counter
from typing import TypeAlias

from retrace.replay import _vm
from retrace.replay.mapped import MappedMemory
from retrace.replay.ws.headless import Context, ContextRequest, Drawable, EglDisplay, PixelFormat

# A drawable's key: the handle the trace used for it, or (kind, handle) where a window
# system's drawables have several handle namespaces (WGL pbuffers, CGL).
DrawableKey: TypeAlias = int | tuple[str, int]

# Object classes whose names live in one context rather than in the share group.
CONTAINER_CLASSES = frozenset(
    {"vertex array", "framebuffer", "transform feedback", "program pipeline"}
)


def class_key(object_class: str) -> str:
    """Shaders and programs share one namespace in GL (and GLhandleARB uses it too)."""
    return "program" if object_class in ("shader", "handle") else object_class


class TracedContext:
    """A context the traced program created; the real one is made at first use."""

    __slots__ = (
        "request",
        "fmt",
        "share",
        "real",
        "containers",
        "program",
        "pipeline",
        "active_programs",
        "frame_fence",
    )

    def __init__(
        self, request: ContextRequest, fmt: PixelFormat, share: TracedContext | None = None
    ) -> None:
        self.request = request
        self.fmt = fmt
        self.share = share
        self.real: Context | None = None
        self.containers: dict[str, dict[int, int]] = {}
        self.program = 0  # the traced name of the program in use, for uniform locations
        self.pipeline = 0  # the traced program pipeline bound, used when no program is
        self.active_programs: dict[int, int] = {}  # pipeline -> glUniform*'s
        # the fence of its last frame and the real context it belongs to (swap throttling)
        self.frame_fence: tuple[Context, int] | None = None


class AppQueries:
    """The traced program's own queries in a pass whose profiler queries use their target.

    Two queries of one target cannot be active at once, and the replay never reads
    the program's results back, so while the profiler measures a target (Pixels
    Drawn: the occlusion targets) the program's queries of it are left out and
    the profiler measures true values. Conditional rendering on a query left out
    cannot be reproduced: those draws run unconditionally, and that is a
    departure from the trace.
    """

    __slots__ = (
        "reserved",
        "left_out",
        "left_out_ids",
        "unconditional",
        "unconditional_renders",
        "mismatches",
        "first_mismatch",
    )
    reserved: frozenset[int]  # targets the profiler's queries use this pass
    unconditional: bool  # inside a conditional render on a query left out
    unconditional_renders: int
    # --query-handling check: results that differ from the trace's, and the first
    # (call number, the replay's result, the trace's)
    mismatches: int
    first_mismatch: tuple[int, int, int] | None

    def __init__(self) -> None:
        self.left_out: Counter[int] = Counter()  # target -> queries left out
        self.left_out_ids: set[int] = set()  # their traced names
        self.clear()

    def clear(self) -> None:
        self.reserved = frozenset()
        self.left_out.clear()
        self.left_out_ids.clear()
        self.unconditional = False
        self.unconditional_renders = 0
        self.mismatches = 0
        self.first_mismatch = None


class ReplayState:
    """Per-pass state shared by every compiled entry."""

    def __init__(self, display: EglDisplay) -> None:
        self.display = display
        self.contexts: dict[int, TracedContext] = {}
        self.drawables: dict[DrawableKey, Drawable] = {}
        self.names: dict[str, dict[int, int]] = {}
        self.locations: dict[int, dict[int, int]] = {}  # traced program -> traced -> real
        self._location_keys: dict[int, list[int]] = {}
        # glUniform*'s locations: the table of `uniform_program()`, kept current here, looked
        # up in C by direct calls (`location` for those it lacks)
        self.uniform_locations = _vm.Locations(
            lambda traced: self.location(self.uniform_program(), traced)
        )
        self.mapped = MappedMemory()
        self.app_queries = AppQueries()
        self.images: dict[int, int] = {}  # traced EGLImage -> the replay's (from GL objects)
        self.current: TracedContext | None = None
        self.current_drawable: Drawable | None = None
        self.thread_current: dict[int, tuple[TracedContext | None, Drawable | None]] = {}
        self.thread = 0
        # a direct glUseProgram's remapping: `use_program` and the name, in C; it keeps the
        # log of program changes `log_programs` asks for
        self.program_in_use = _vm.ProgramInUse(
            self.name_table("program"), self.uniform_locations, self.locations, self.use_program
        )

    def reset(self) -> None:
        """Forget everything the last pass created (its contexts are destroyed)."""
        if self.display.current is not None:
            self.display.make_current(None, None)
        for context in self.contexts.values():
            if context.real is not None:
                self.display.destroy_context(context.real)
                context.real = None
            context.containers.clear()
            context.program = context.pipeline = 0
            context.active_programs.clear()
        for image in self.images.values():
            self.display.destroy_image(image)
        self.images.clear()
        for drawable in self.drawables.values():
            if drawable.surface is not None:
                self.display.destroy_surface(drawable.surface)
                drawable.surface = None
        self.contexts.clear()
        self.drawables.clear()
        for table in self.names.values():
            table.clear()
        self.locations.clear()
        self._location_keys.clear()
        self.uniform_locations.set(None)
        self.mapped.clear()
        self.app_queries.clear()
        self.bind(None, None)
        self.thread_current.clear()
        self.thread = 0

    # --- object names ---------------------------------------------------------------------

    def name_table(self, object_class: str) -> dict[int, int]:
        """The share-group table of a class (stable across passes: reset clears it in place)."""
        return self.names.setdefault(class_key(object_class), {})

    def container_table(self, object_class: str) -> dict[int, int]:
        """The current context's table of a container class."""
        if self.current is None:
            return self.name_table(object_class)
        return self.current.containers.setdefault(object_class, {})

    def bind(self, context: TracedContext | None, drawable: Drawable | None) -> None:
        """From now on `context` and `drawable` are current (the display's already)."""
        self.current, self.current_drawable = context, drawable
        self.program_in_use.current = context

    # --- uniform locations ----------------------------------------------------------------

    def log_programs(self, code: _vm.Code | None, changes: list[tuple[int, int]] | None) -> None:
        """Append (the op running in `code`, the traced program now in use) to `changes` at
        every change of the program in use from now on (None, None: no more)."""
        self.program_in_use.log(code, changes)

    def use_program(self, traced: int) -> None:
        if self.current is not None:
            self.current.program = traced
            self.program_changed()

    def program_changed(self) -> None:
        """The program in use may have changed (glUseProgram, a context switch)."""
        self._uniforms_changed()
        current = self.current
        self.program_in_use.changed(current.program if current is not None else 0)

    def _uniforms_changed(self) -> None:
        """The program glUniform* sets may have changed, or its table been made."""
        self.uniform_locations.set(self.locations.get(self.uniform_program()))

    def bind_pipeline(self, traced: int) -> None:
        if self.current is not None:
            self.current.pipeline = traced
            self._uniforms_changed()

    def set_active_program(self, pipeline: int, program: int) -> None:
        """glActiveShaderProgram: where glUniform* goes while the pipeline is bound."""
        if self.current is not None:
            self.current.active_programs[pipeline] = program
            self._uniforms_changed()

    def uniform_program(self) -> int:
        """The traced program glUniform* sets: the one in use, else the active program of
        the bound pipeline."""
        context = self.current
        if context is None:
            return 0
        return context.program or context.active_programs.get(context.pipeline, 0)

    def record_location(self, program: int, traced: int, real: int) -> None:
        if traced < 0:
            return
        table = self.locations.get(program)
        if table is None:
            table = self.locations[program] = {}
            self._uniforms_changed()
        if traced not in table:
            bisect.insort(self._location_keys.setdefault(program, []), traced)
        table[traced] = real

    def location(self, program: int, traced: int) -> int:
        """The real location of a traced one; an array element maps from its array's base."""
        table = self.locations.get(program)
        if table is None or traced < 0:
            return traced
        real = table.get(traced)
        if real is not None:
            return real
        keys = self._location_keys[program]
        i = bisect.bisect_right(keys, traced) - 1
        if i < 0:
            return traced
        base = keys[i]
        return table[base] + (traced - base)
