"""Which GL calls a replay issues (and so profiles), by glretrace's rule.

glretrace issues, and times, every GL call except those of functions that
apitrace's API description marks as free of side effects. retrace derives the
same classification from the function's name and its registry prototype
rather than from a hand list:

- queries (glGet*, glIs*, glAre*) change no GL state and are left out, except
  pack functions, which write into a bound pixel-pack buffer, and functions
  returning a location, index or handle that the program passes back to GL;
- glGetQueryBufferObject* writes a query's result into a buffer: replayed;
  glGetQueryObject* reads the program's own query results, which the replay
  needs only with --query-handling run or check, or when a query buffer is
  bound (`compiler.Compiler._query_result` decides);
- glGetSynciv is replayed: where the program saw its fence signalled, the
  replay waits for the fence there, as far along as the program was;
- glDebugMessageCallback* registers a function of the traced process, and
  glStringMarkerGREMEDY only annotates the trace: both left out.

The trace parser's NO_SIDE_EFFECTS flag (`flags.py`) is another, older table,
which apitrace uses only to print calls; it calls glObjectLabel and
glDebugMessageControl free of side effects, which glretrace replays.
"""

from __future__ import annotations

import re

from retrace.gl.registry import Command

# glGetTexImage and the like: a query that writes into a bound pixel-pack buffer
IMAGE_READBACKS = frozenset(
    {
        "glGetTexImage",
        "glGetnTexImage",
        "glGetnTexImageARB",
        "glGetTextureImage",
        "glGetTextureSubImage",
        "glGetCompressedTexImage",
        "glGetCompressedTexImageARB",
        "glGetnCompressedTexImage",
        "glGetnCompressedTexImageARB",
        "glGetCompressedTextureImage",
        "glGetCompressedTextureSubImage",
    }
)
_QUERY = re.compile(r"gl(?:Get|Is|Are)n?[A-Z]")
_PASSED_BACK = re.compile(r"Location|Index|Handle")  # values the program gives GL again
_REPLAYED_QUERIES = re.compile(r"glGetSynciv$|glGetQueryBufferObject")
QUERY_RESULTS = re.compile(r"glGetQueryObject(ui|i|ui64|i64)v(ARB|EXT)?$")
_NOT_REPLAYED = re.compile(r"glDebugMessageCallback|glStringMarkerGREMEDY$")


def has_side_effects(name: str, command: Command | None) -> bool:
    """Whether a replay issues calls of this GL function (glretrace's rule, see above)."""
    if _NOT_REPLAYED.match(name):
        return False
    if not _QUERY.match(name):
        return True
    if name in IMAGE_READBACKS or _REPLAYED_QUERIES.match(name):
        return True
    returns = command is not None and command.return_ctype not in ("void", "GLvoid")
    return returns and _PASSED_BACK.search(name) is not None
