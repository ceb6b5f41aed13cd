"""The `pipeline` backend's query targets are the registry's."""

from __future__ import annotations

import os
import xml.etree.ElementTree as ET

import glad

from retrace.backends.pipeline import METRICS, TARGETS

# The metrics, in the extension's order of query targets.
ALL = [
    "Vertices Submitted",
    "Primitives Submitted",
    "Vertex Shader Invocations",
    "Tess Control Shader Patches",
    "Tess Evaluation Shader Invocations",
    "Geometry Shader Invocations",
    "Geometry Shader Primitives Emitted",
    "Fragment Shader Invocations",
    "Compute Shader Invocations",
    "Clipping Input Primitives",
    "Clipping Output Primitives",
]


def test_query_targets_are_the_registrys():
    registry = ET.parse(os.path.join(os.path.dirname(glad.__file__), "files", "gl.xml"))
    values = {e.get("name"): e.get("value") for e in registry.iter("enum") if e.get("value")}
    required = next(
        x for x in registry.iter("extension") if x.get("name") == "GL_ARB_pipeline_statistics_query"
    )
    names = [e.get("name") for e in required.iter("enum")]
    # the extension's enums in its order, which is the backend's metric order
    assert [int(values[n], 16) for n in names] == [TARGETS[m] for m in METRICS]
    assert names[5] == "GL_GEOMETRY_SHADER_INVOCATIONS"  # the one target without _ARB
    assert [m.name for m in METRICS] == ALL
