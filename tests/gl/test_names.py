"""Names and locations the replay remaps where another argument says what they are.

Each synthetic trace gives objects other names than the driver will, then uses
them where a wrong name is a GL error, then calls glGetError, which the trace
says returned GL_NO_ERROR: a replay that does not remap them departs from the
trace, and `--strict` fails it (exit 3).
"""

from __future__ import annotations

from pathlib import Path

from conftest import run_retrace
from tracegen import TraceWriter, glx_context

GL_TEXTURE_2D, GL_RGBA8, GL_BUFFER, GL_TEXTURE = 0x0DE1, 0x8058, 0x82E0, 0x1702
GL_FRAGMENT_SHADER, GL_FRAGMENT_SHADER_BIT = 0x8B30, 0x2


def strict_replay(w: TraceWriter, path: Path):
    w.call("glGetError", (), {}, ret=w.int(0))
    w.call("glXSwapBuffers", ("dpy", "drawable"), {1: w.int(7)})
    path.write_bytes(w.snappy())
    return run_retrace("replay", "-b", "--strict", str(path))


def test_object_labels_name_the_replays_objects(tmp_path):
    w = TraceWriter()
    glx_context(w)
    w.call("glGenBuffers", ("n", "buffers"), {0: w.int(1), 1: w.array(w.int(7))})
    w.call("glBindBuffer", ("target", "buffer"), {0: w.int(0x8892), 1: w.int(7)})
    w.call("glGenTextures", ("n", "textures"), {0: w.int(1), 1: w.array(w.int(9))})
    w.call("glBindTexture", ("target", "texture"), {0: w.int(GL_TEXTURE_2D), 1: w.int(9)})
    for identifier, name in ((GL_BUFFER, 7), (GL_TEXTURE, 9)):
        w.call(
            "glObjectLabel",
            ("identifier", "name", "length", "label"),
            {0: w.int(identifier), 1: w.int(name), 2: w.int(-1), 3: w.string("mine")},
        )
    r = strict_replay(w, tmp_path / "labels.trace")
    assert r.returncode == 0, r.stderr


def test_copy_image_sub_data_names_the_replays_textures(tmp_path):
    w = TraceWriter()
    glx_context(w)
    w.call("glGenTextures", ("n", "textures"), {0: w.int(2), 1: w.array(w.int(5), w.int(9))})
    for texture in (5, 9):
        w.call("glBindTexture", ("target", "texture"), {0: w.int(GL_TEXTURE_2D), 1: w.int(texture)})
        w.call(
            "glTexStorage2D",
            ("target", "levels", "internalformat", "width", "height"),
            {0: w.int(GL_TEXTURE_2D), 1: w.int(1), 2: w.int(GL_RGBA8), 3: w.int(4), 4: w.int(4)},
        )
    names = ("srcName", "srcTarget", "srcLevel", "srcX", "srcY", "srcZ", "dstName", "dstTarget")
    names += ("dstLevel", "dstX", "dstY", "dstZ", "srcWidth", "srcHeight", "srcDepth")
    values = (5, GL_TEXTURE_2D, 0, 0, 0, 0, 9, GL_TEXTURE_2D, 0, 0, 0, 0, 4, 4, 1)
    w.call("glCopyImageSubData", names, {i: w.int(v) for i, v in enumerate(values)})
    r = strict_replay(w, tmp_path / "copy.trace")
    assert r.returncode == 0, r.stderr


def test_uniforms_of_a_program_pipeline_find_their_locations(tmp_path):
    """With no program in use, glUniform* sets the bound pipeline's active program."""
    w = TraceWriter()
    glx_context(w)
    w.call("glGenProgramPipelines", ("n", "pipelines"), {0: w.int(1), 1: w.array(w.int(3))})
    source = "#version 450\nuniform vec4 c;\nout vec4 o;\nvoid main() { o = c; }\n"
    w.call(
        "glCreateShaderProgramv",
        ("type", "count", "strings"),
        {0: w.int(GL_FRAGMENT_SHADER), 1: w.int(1), 2: w.array(w.string(source))},
        ret=w.int(11),
    )
    w.call(
        "glUseProgramStages",
        ("pipeline", "stages", "program"),
        {0: w.int(3), 1: w.int(GL_FRAGMENT_SHADER_BIT), 2: w.int(11)},
    )
    w.call("glActiveShaderProgram", ("pipeline", "program"), {0: w.int(3), 1: w.int(11)})
    w.call("glBindProgramPipeline", ("pipeline",), {0: w.int(3)})
    w.call(
        "glGetUniformLocation", ("program", "name"), {0: w.int(11), 1: w.string("c")}, ret=w.int(7)
    )
    w.call(
        "glUniform4f",
        ("location", "v0", "v1", "v2", "v3"),
        {0: w.int(7), **{i: w.float(0.5) for i in range(1, 5)}},
    )
    r = strict_replay(w, tmp_path / "pipeline.trace")
    assert r.returncode == 0, r.stderr
