"""Which GL calls the replay issues and times: glretrace's side-effect rule, from the registry."""

from __future__ import annotations

import pytest

from retrace.gl.registry import load_registry
from retrace.replay.effects import has_side_effects

REPLAYED = [
    "glObjectLabel",  # the parser's flag table calls these free of side effects
    "glDebugMessageControl",
    "glDebugMessageControlKHR",
    "glDebugMessageInsert",
    "glPushDebugGroup",
    "glGetUniformLocation",  # results the program passes back to GL
    "glGetAttribLocation",
    "glGetUniformBlockIndex",
    "glGetTextureHandleARB",
    "glGetTexImage",  # packs into a bound pixel-pack buffer
    "glGetSynciv",  # waits where the program saw its fence signalled
    "glReadPixels",
    "glDrawArrays",
]
LEFT_OUT = [
    "glIsQueryEXT",  # missing from the parser's flag table
    "glIsQuery",
    "glGetIntegerv",
    "glGetError",
    "glGetString",
    "glGetnUniformfvKHR",
    "glGetQueryObjectuiv",  # the program's own query results (--query-handling=skip)
    "glGetProgramiv",
    "glAreTexturesResident",
    "glStringMarkerGREMEDY",  # only annotates the trace
    "glDebugMessageCallback",  # a function of the traced process
]


@pytest.mark.parametrize("name", REPLAYED + LEFT_OUT)
def test_side_effect_rule(name):
    command = load_registry("gl").command(name)
    assert command is not None
    assert has_side_effects(name, command) == (name in REPLAYED)
