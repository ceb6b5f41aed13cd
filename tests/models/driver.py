"""What both extension models share: the entry-point table, GL errors, GPU progress, the work.

`ExtensionModel` turns a model's methods named like GL commands into ctypes
callbacks with the prototypes of the Khronos registry and hands their
addresses out through `resolver()`, which wraps the real driver's proc-address
function. It also stands in for the few core commands an extension changes or
depends on: glGetIntegerv(GL_NUM_EXTENSIONS), glGetStringi and glGetString add
the extension's name on the contexts that expose it; glGetError reports the
model's errors before the driver's; glFlush and glFinish move the model's GPU
forward. Everything else goes to the real driver.

State is per context, keyed by the real context object that is current, as a
driver's: a monitor or query handle of one context means nothing on another.
Each context has:

* an error flag, set by the first error and cleared by glGetError, as GL's;
* a `Timeline`, the model of the GPU: a session that ended is complete only
  once it was submitted (glFlush, glFinish, or a read that flushes) and the
  GPU then made `latency` ticks of progress (a tick is any call into the
  model), or at once on glFinish or a blocking read; sessions complete in the
  order they ended. `advance()` completes everything submitted.
* a `Sweep` over the `Work` done: the time between any two begins or ends is
  one interval, so sessions that overlap each get what ran while they were
  active, as hardware counters would.

`GLWork` measures real work on the current context with GL_SAMPLES_PASSED and
GL_PRIMITIVES_GENERATED queries (exact and deterministic on llvmpipe), so
counter values can be checked against the opengl backend's Pixels Drawn;
`InjectedWork` counts what a test adds, for tests without a GL context.

Exceptions raised inside a callback cannot cross back into C: they are kept in
`failures`, and tests assert that list is empty.
"""

from __future__ import annotations

import ctypes
import traceback
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, ClassVar, Protocol, TypeVar

T = TypeVar("T")
GL_NO_ERROR = 0
GL_INVALID_ENUM = 0x0500
GL_INVALID_VALUE = 0x0501
GL_INVALID_OPERATION = 0x0502
GL_OUT_OF_MEMORY = 0x0505
GL_EXTENSIONS = 0x1F03
GL_NUM_EXTENSIONS = 0x821D
GL_SAMPLES_PASSED = 0x8914
GL_PRIMITIVES_GENERATED = 0x8C87
GL_QUERY_RESULT = 0x8866
RESULT = "result"  # the call log's record of a result handed out: (session name,)
DELETED = "deleted"  # ... and of a monitor or query handle deleted: (its name,)

P = ctypes.POINTER
CORE_PROTOTYPES = {
    "glGetError": ctypes.CFUNCTYPE(ctypes.c_uint),
    "glFlush": ctypes.CFUNCTYPE(None),
    "glFinish": ctypes.CFUNCTYPE(None),
    "glGetIntegerv": ctypes.CFUNCTYPE(None, ctypes.c_uint, P(ctypes.c_int)),
    "glGetString": ctypes.CFUNCTYPE(ctypes.c_void_p, ctypes.c_uint),
    "glGetStringi": ctypes.CFUNCTYPE(ctypes.c_void_p, ctypes.c_uint, ctypes.c_uint),
}


class ModelError(Exception):
    """The model was used in a way no driver allows (no context, extension not exposed)."""


def write_string(text: str, size: int, length: Any, out: int | None) -> None:
    """GL's string output: at most `size` bytes with the NUL; `length` excludes the NUL.

    With no room (size 0 or no buffer), `length` gets the length the whole string needs.
    """
    raw = text.encode()
    if not out or size <= 0:
        if length:
            length[0] = len(raw)
        return
    n = min(len(raw), size - 1)
    ctypes.memmove(out, raw[:n] + b"\0", n + 1)
    if length:
        length[0] = n


# --- the work a session measures ------------------------------------------------------------------


@dataclass
class Amounts:
    samples: int = 0
    primitives: int = 0


class Work(Protocol):
    """A source of counts; an interval is what it counted between start and stop."""

    def start(self) -> object: ...

    def stop(self, interval: object) -> None: ...

    def read(self, interval: object) -> Amounts: ...


class InjectedWork:
    """Counts a test adds (`samples += n`): intervals see the difference."""

    def __init__(self) -> None:
        self.samples = 0
        self.primitives = 0

    def start(self) -> object:
        return [Amounts(self.samples, self.primitives), None]

    def stop(self, interval: Any) -> None:
        begin = interval[0]
        interval[1] = Amounts(self.samples - begin.samples, self.primitives - begin.primitives)

    def read(self, interval: Any) -> Amounts:
        return interval[1]


class GLWork:
    """Real samples passed and primitives generated on the current context."""

    def __init__(self, real: Callable[[str], int]) -> None:
        u, p = ctypes.c_uint, ctypes.POINTER

        def fn(name: str, restype: Any, *argtypes: Any) -> Any:
            return ctypes.CFUNCTYPE(restype, *argtypes)(real(name))

        self.gen = fn("glGenQueries", None, ctypes.c_int, p(u))
        self.delete = fn("glDeleteQueries", None, ctypes.c_int, p(u))
        self.begin = fn("glBeginQuery", None, u, u)
        self.end = fn("glEndQuery", None, u)
        self.result = fn("glGetQueryObjectui64v", None, u, u, p(ctypes.c_uint64))

    def start(self) -> object:
        ids = (ctypes.c_uint * 2)()
        self.gen(2, ids)
        self.begin(GL_SAMPLES_PASSED, ids[0])
        self.begin(GL_PRIMITIVES_GENERATED, ids[1])
        return [ids, None]

    def stop(self, interval: Any) -> None:
        self.end(GL_SAMPLES_PASSED)
        self.end(GL_PRIMITIVES_GENERATED)

    def read(self, interval: Any) -> Amounts:
        if interval[1] is None:
            ids, value = interval[0], ctypes.c_uint64()
            counts = []
            for query in ids:
                self.result(query, GL_QUERY_RESULT, ctypes.byref(value))
                counts.append(value.value)
            self.delete(2, ids)
            interval[1] = Amounts(*counts)
        return interval[1]


# --- sessions, the GPU, a context -----------------------------------------------------------------


@dataclass(eq=False)
class Session:
    """One begin..end of a monitor or query handle."""

    begin_tick: int
    intervals: list[object] = field(default_factory=list)
    serial: int = 0  # the context's count of ended sessions, once this one ended
    end_tick: int = 0

    @property
    def ended(self) -> bool:
        return self.serial > 0


@dataclass
class Measured:
    """What counters are computed from: deterministic for the work bracketed."""

    samples: int
    primitives: int
    serial: int
    intervals: int
    begin_tick: int
    end_tick: int


class Timeline:
    """The GPU of one context: sessions complete after submission and some progress."""

    def __init__(self, latency: int) -> None:
        self.latency = latency
        self.tick = 0
        self.last_ended = 0
        self.completed = 0  # every session up to this serial is complete
        self.submitted = 0
        self._flushes: deque[tuple[int, int]] = deque()  # (serial submitted, tick)

    def step(self) -> None:
        self.tick += 1
        while self._flushes and self.tick - self._flushes[0][1] >= self.latency:
            self.completed = max(self.completed, self._flushes.popleft()[0])

    def end(self) -> int:
        self.last_ended += 1
        return self.last_ended

    def flush(self) -> None:
        if self.last_ended > self.submitted:
            self.submitted = self.last_ended
            self._flushes.append((self.submitted, self.tick))

    def wait(self, serial: int) -> None:
        """Submit everything, and wait until `serial` (and all before it) is complete."""
        self.flush()
        self.completed = max(self.completed, serial)

    def finish(self) -> None:
        self.wait(self.last_ended)

    def advance(self) -> None:
        self.completed = max(self.completed, self.submitted)
        self._flushes.clear()

    def complete(self, session: Session) -> bool:
        return session.ended and session.serial <= self.completed


class Sweep:
    """Cuts the work into intervals at every begin and end; each active session collects them."""

    def __init__(self, work: Work) -> None:
        self.work = work
        self.active: list[Session] = []
        self.interval: object | None = None

    def _cut(self) -> None:
        if self.interval is not None:
            self.work.stop(self.interval)
            for session in self.active:
                session.intervals.append(self.interval)
            self.interval = None

    def begin(self, session: Session) -> None:
        self._cut()
        self.active.append(session)
        self.interval = self.work.start()

    def end(self, session: Session) -> None:
        self._cut()
        self.active.remove(session)
        if self.active:
            self.interval = self.work.start()

    def measure(self, session: Session) -> Measured:
        samples = primitives = 0
        for interval in session.intervals:
            amounts = self.work.read(interval)
            samples += amounts.samples
            primitives += amounts.primitives
        return Measured(
            samples,
            primitives,
            session.serial,
            len(session.intervals),
            session.begin_tick,
            session.end_tick,
        )


class ContextState:
    """What one context holds; the extension models add their objects."""

    def __init__(self, work: Work, latency: int) -> None:
        self.error = GL_NO_ERROR
        self.timeline = Timeline(latency)
        self.sweep = Sweep(work)

    def begin(self, session: Session) -> None:
        self.sweep.begin(session)

    def end(self, session: Session) -> None:
        session.serial = self.timeline.end()
        session.end_tick = self.timeline.tick
        self.sweep.end(session)


# --- the entry points ---------------------------------------------------------------------------


class ExtensionModel:
    """Base of the two models: callbacks, per-context state, the core commands it changes."""

    extension: ClassVar[str] = ""
    PROTOTYPES: ClassVar[dict[str, Any]] = {}
    INTEGERS: ClassVar[dict[int, int]] = {}  # implementation-dependent glGetIntegerv values

    def __init__(
        self,
        latency: int = 2,
        work: Callable[[], Work] | None = None,
        context_state: type = ContextState,
    ) -> None:
        """`work` makes each context's source of counts (default: `GLWork` on the real driver)."""
        self.latency = latency
        self._work = work
        self._state_type = context_state
        self.current: Callable[[], object | None] = lambda: None
        self.exposed: Callable[[object], bool] = lambda context: True
        self.calls: list[tuple[str, tuple[int | None, ...]]] = []
        self.failures: list[str] = []
        self._states: dict[object, Any] = {}
        self._real: Callable[[str], int] = lambda name: 0
        self._callbacks: dict[str, Any] = {}
        self._strings: dict[object, Any] = {}
        for name, prototype in {**CORE_PROTOTYPES, **self.PROTOTYPES}.items():
            self._callbacks[name] = prototype(self._entry(name, getattr(self, name), prototype))

    def resolver(self, real: Callable[[str], int]) -> Callable[[str], int]:
        """A proc-address function: the model's entry points, the real driver's for the rest."""
        self._real = real

        def resolve(name: str) -> int:
            callback = self._callbacks.get(name)
            if callback is None:
                return real(name)
            return ctypes.cast(callback, ctypes.c_void_p).value or 0

        return resolve

    def _entry(self, name: str, method: Callable[..., Any], prototype: Any) -> Callable[..., Any]:
        returns = prototype._restype_ is not None

        def entry(*args: Any) -> Any:
            self.calls.append((name, tuple(a if isinstance(a, int) else None for a in args)))
            try:
                context = self.current()
                if context is not None:
                    self._context(context).timeline.step()
                return method(*args)
            except Exception:
                self.failures.append(f"{name}{args}: {traceback.format_exc()}")
                return 0 if returns else None

        return entry

    def _context(self, context: object) -> Any:
        state = self._states.get(context)
        if state is None:
            work = self._work() if self._work is not None else GLWork(self._real)
            state = self._states[context] = self._state_type(work, self.latency)
        return state

    def state(self) -> Any:
        """The current context's state; only where the context exposes the extension."""
        context = self.current()
        if context is None:
            raise ModelError(f"{self.extension} called with no current context")
        if not self.exposed(context):
            raise ModelError(f"{self.extension} called on a context that does not expose it")
        return self._context(context)

    def error(self, code: int) -> None:
        state = self.state()
        if state.error == GL_NO_ERROR:
            state.error = code

    def named(self, found: T | None) -> T | None:
        """An object looked up by the name a call passed: GL_INVALID_VALUE when there is none."""
        if found is None:
            self.error(GL_INVALID_VALUE)
        return found

    def advance(self) -> None:
        """GPU progress on the current context: everything submitted completes."""
        self.state().timeline.advance()

    def delivered(self, session: int) -> None:
        """Log that a session's result was handed out (tests follow sessions in flight)."""
        self.calls.append((RESULT, (session,)))

    def deleted(self, name: int) -> None:
        """Log that a monitor or query handle was deleted, with its result if unread."""
        self.calls.append((DELETED, (name,)))

    def calls_of(self, name: str) -> list[tuple[int | None, ...]]:
        """The integer arguments of every call of `name` the model saw, in order."""
        return [values for called, values in self.calls if called == name]

    def _real_function(self, name: str, prototype: Any) -> Any:
        address = self._real(name)
        return prototype(address) if address else None

    def _exposed_here(self) -> bool:
        context = self.current()
        return context is not None and self.exposed(context)

    # --- the core commands the extension touches ---------------------------------------------

    def glGetError(self) -> int:
        context = self.current()
        if context is not None and context in self._states:
            state = self._states[context]
            if state.error != GL_NO_ERROR:
                code, state.error = state.error, GL_NO_ERROR
                return code
        real = self._real_function("glGetError", CORE_PROTOTYPES["glGetError"])
        return real() if real is not None else GL_NO_ERROR

    def glFlush(self) -> None:
        if self._exposed_here():
            self.state().timeline.flush()
        real = self._real_function("glFlush", CORE_PROTOTYPES["glFlush"])
        if real is not None:
            real()

    def glFinish(self) -> None:
        if self._exposed_here():
            self.state().timeline.finish()
        real = self._real_function("glFinish", CORE_PROTOTYPES["glFinish"])
        if real is not None:
            real()

    def glGetIntegerv(self, pname: int, data: Any) -> None:
        real = self._real_function("glGetIntegerv", CORE_PROTOTYPES["glGetIntegerv"])
        if pname in self.INTEGERS and self._exposed_here():
            data[0] = self.INTEGERS[pname]
            return
        if real is not None:
            real(pname, data)
        if pname == GL_NUM_EXTENSIONS and self._exposed_here():
            data[0] += 1

    def glGetString(self, name: int) -> int | None:
        real = self._real_function("glGetString", CORE_PROTOTYPES["glGetString"])
        value = real(name) if real is not None else None
        if name != GL_EXTENSIONS or not self._exposed_here():
            return value
        text = (ctypes.string_at(value) + b" " if value else b"") + self.extension.encode()
        return self._keep(text)

    def glGetStringi(self, name: int, index: int) -> int | None:
        if name == GL_EXTENSIONS and self._exposed_here():
            count = ctypes.c_int(0)
            real_integer = self._real_function("glGetIntegerv", CORE_PROTOTYPES["glGetIntegerv"])
            if real_integer is not None:
                real_integer(GL_NUM_EXTENSIONS, ctypes.byref(count))
            if index == count.value:
                return self._keep(self.extension.encode())
        real = self._real_function("glGetStringi", CORE_PROTOTYPES["glGetStringi"])
        return real(name, index) if real is not None else None

    def _keep(self, text: bytes) -> int:
        """A string the caller may hold on to: kept alive as long as the model."""
        buffer = self._strings.setdefault(text, ctypes.create_string_buffer(text))
        return ctypes.addressof(buffer)
