"""GL calls the compiler hands to the driver in C (`_vm.c`), on a real driver: what they
pass is what the Python entries they replaced passed."""

from __future__ import annotations

from pathlib import Path

from conftest import TRACES, run_retrace
from PIL import Image as Pil
from tracegen import TraceWriter, glx_context

GL_FRAGMENT_SHADER = 0x8B30
# a fragment shader in pieces, as GTK and Qt pass theirs: one string a line
PIECES = ("void main() {\n", "  gl_FragColor = vec4(1.0, 0.5, 0.0, 1.0);\n", "}\n")


def direct_calls(trace: Path) -> dict[str, list[bool]]:
    """Per function, whether each of its ops is a direct call, after a replay's pass."""
    from retrace.replay.replayer import Replayer

    with Replayer(str(trace)) as replayer:
        replayer.run_pass()
        program = replayer.program
        ops: dict[str, list[bool]] = {}
        for i, name_id in enumerate(program.column("name_ids").tolist()):
            ops.setdefault(program.names[name_id], []).append(program.code.is_direct(i))
    return ops


def test_shader_sources_in_pieces_compile_as_the_program_gave_them(tmp_path):
    w = TraceWriter()
    glx_context(w)
    w.call("glCreateShader", ("type",), {0: w.int(GL_FRAGMENT_SHADER)}, ret=w.int(4))
    w.call(
        "glShaderSource",
        ("shader", "count", "string", "length"),
        {0: w.int(4), 1: w.int(len(PIECES)), 2: w.array(*map(w.string, PIECES)), 3: w.null},
    )
    w.call("glCompileShader", ("shader",), {0: w.int(4)})
    w.call("glCreateProgram", (), {}, ret=w.int(9))
    w.call("glAttachShader", ("program", "shader"), {0: w.int(9), 1: w.int(4)})
    w.call("glLinkProgram", ("program",), {0: w.int(9)})
    w.call("glUseProgram", ("program",), {0: w.int(9)})  # an error unless it linked
    w.call(
        "glRectf", ("x1", "y1", "x2", "y2"), {i: w.float(v) for i, v in enumerate((-1, -1, 1, 1))}
    )
    w.call("glGetError", (), {}, ret=w.int(0))
    w.call("glXSwapBuffers", ("dpy", "drawable"), {1: w.int(7)})
    trace = tmp_path / "pieces.trace"
    trace.write_bytes(w.snappy())
    r = run_retrace("replay", "--strict", "-s", str(tmp_path / "f"), str(trace))
    assert r.returncode == 0, r.stderr
    (png,) = tmp_path.glob("f*.png")
    [(_, colour)] = Pil.open(png).convert("RGB").getcolors()  # the shader's, everywhere
    assert colour == (255, 128, 0)
    assert direct_calls(trace)["glShaderSource"] == [True]


def test_fences_are_waited_for_and_deleted_directly():
    """glClientWaitSync and glDeleteSync (glWaitSync too) take the driver's fence for the
    trace's from the sync table, which glFenceSync's result fills."""
    ops = direct_calls(TRACES / "piglit-sync-api.trace")
    for name in ("glFenceSync", "glClientWaitSync", "glDeleteSync"):
        assert ops[name] and all(ops[name]), (name, ops.get(name))
