"""The shader sources of every program a trace links, for the report's per-program table.

The tables name programs as the trace does, so the sources are found in the
trace by the same names: glCreateShader gives a shader its stage,
glShaderSource its text, glAttachShader its program; glCreateShaderProgramv
makes a program of one stage at once. Only these calls' arguments are decoded.
"""

from __future__ import annotations

from retrace.errors import TraceError
from retrace.trace.model import NodeLists
from retrace.trace.reader import TraceReader

STAGES = {
    0x8B31: "vertex",
    0x8B30: "fragment",
    0x8DD9: "geometry",
    0x8E88: "tessellation control",
    0x8E87: "tessellation evaluation",
    0x91B9: "compute",
}
_CREATE = ("glCreateShader", "glCreateShaderObjectARB")
_SOURCE = ("glShaderSource", "glShaderSourceARB")
_ATTACH = ("glAttachShader", "glAttachObjectARB")
_PROGRAMV = ("glCreateShaderProgramv", "glCreateShaderProgramvEXT")
_WANTED = frozenset(_CREATE + _SOURCE + _ATTACH + _PROGRAMV)


def _text(strings: object, lengths: object) -> str:
    """glShaderSource's strings joined, each cut to its length where one is given."""
    if not isinstance(strings, list):
        strings = [strings]
    lengths = lengths if isinstance(lengths, list) else [None] * len(strings)
    parts = []
    for raw, length in zip(strings, lengths, strict=False):
        data = raw if isinstance(raw, bytes) else str(raw or "").encode()
        if isinstance(length, int) and length >= 0:
            data = data[:length]
        parts.append(data.decode("utf-8", errors="replace"))
    return "".join(parts)


def program_sources(path: str) -> dict[int, list[tuple[str, str]]]:
    """Traced program name -> [(stage, source)] of the shaders attached to it (the last
    source each shader was given before it was attached). A damaged trace gives what
    was read before the damage."""
    reader = TraceReader(path)
    sigs = reader.signatures
    stages: dict[int, str] = {}
    sources: dict[int, str] = {}
    programs: dict[int, list[tuple[str, str]]] = {}
    try:
        for batch in reader.batches():
            wanted = {sid for sid, f in sigs.functions.items() if f.name in _WANTED}
            nodes: NodeLists | None = None
            for call in batch.records():
                _no, _, sig, _, _, start, _, first, nargs, ret, _, _ = call
                if sig not in wanted:
                    continue
                nodes = nodes or NodeLists(batch)
                args = [
                    nodes.value(start + s, sigs) if s >= 0 else None
                    for s in batch.arguments(first, nargs)
                ]
                value = nodes.value(start + ret, sigs) if ret >= 0 else None
                name = sigs.functions[sig].name
                first = args[0] if args and isinstance(args[0], int) else -1
                if name in _CREATE and isinstance(value, int):
                    stages[value] = STAGES.get(first, "shader")
                elif name in _SOURCE and len(args) >= 3:
                    sources[first] = _text(args[2], args[3] if len(args) > 3 else None)
                elif name in _ATTACH and len(args) >= 2 and isinstance(args[1], int):
                    shader = args[1]
                    entry = (stages.get(shader, "shader"), sources.get(shader, ""))
                    programs.setdefault(first, []).append(entry)
                elif name in _PROGRAMV and isinstance(value, int) and len(args) >= 3:
                    stage = STAGES.get(first, "shader")
                    programs.setdefault(value, []).append((stage, _text(args[2], None)))
    except TraceError:
        pass  # the report shows what was read; the replay reported the damage
    return programs
