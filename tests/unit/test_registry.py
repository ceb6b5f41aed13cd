"""The GL registry model: facts read from the Khronos XML that glad2 ships, and its cache."""

from __future__ import annotations

import ctypes
from collections.abc import Iterator
from pathlib import Path

import pytest

from retrace.gl import registry as reg
from retrace.gl.registry import Command, Param, Registry, ctypes_type, load_registry


@pytest.fixture(scope="module")
def gl() -> Registry:
    # Parsed directly so that these tests never touch the user's real cache directory.
    return reg.parse_registry(reg.registry_path("gl"), "gl")


@pytest.fixture
def cache_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A private XDG_CACHE_HOME and a cold functools cache, before and after the test."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    reg._load_registry.cache_clear()
    yield tmp_path
    reg._load_registry.cache_clear()


def command(registry: Registry, name: str) -> Command:
    cmd = registry.command(name)
    assert cmd is not None, name
    return cmd


def param(cmd: Command, name: str) -> Param:
    return next(p for p in cmd.params if p.name == name)


# --- commands ---------------------------------------------------------------------------------


def test_gen_textures_output_names(gl: Registry) -> None:
    textures = param(command(gl, "glGenTextures"), "textures")
    assert textures.output and not textures.const
    assert textures.length == "n"
    assert textures.object_class == "texture"
    assert (textures.ctype, textures.base, textures.pointer_depth) == ("GLuint *", "GLuint", 1)


def test_bind_texture_name_class(gl: Registry) -> None:
    texture = param(command(gl, "glBindTexture"), "texture")
    assert texture.object_class == "texture"
    assert texture.pointer_depth == 0 and not texture.output and not texture.const
    assert param(command(gl, "glBindTexture"), "target").group == "TextureTarget"


def test_uniform_array_input(gl: Registry) -> None:
    value = param(command(gl, "glUniform4fv"), "value")
    assert value.const and not value.output
    assert value.length == "count*4"
    assert value.ctype == "const GLfloat *"


def test_get_integerv_output(gl: Registry) -> None:
    data = param(command(gl, "glGetIntegerv"), "data")
    assert data.output and not data.const
    assert data.length == "COMPSIZE(pname)"


def test_return_classes(gl: Registry) -> None:
    create = command(gl, "glCreateProgram")
    assert (create.return_ctype, create.return_class) == ("GLuint", "program")
    fence = command(gl, "glFenceSync")
    assert (fence.return_ctype, fence.return_class) == ("GLsync", "sync")
    assert command(gl, "glBindTexture").return_class is None


def test_pointer_returns(gl: Registry) -> None:
    assert command(gl, "glMapBufferRange").return_ctype == "void *"
    assert ctypes_type(command(gl, "glMapBufferRange").return_ctype) is ctypes.c_void_p
    assert command(gl, "glGetString").return_ctype == "const GLubyte *"
    assert ctypes_type(command(gl, "glClear").return_ctype) is None


def test_shader_source_strings(gl: Registry) -> None:
    string = param(command(gl, "glShaderSource"), "string")
    assert string.ctype == "const GLchar *const*"
    assert (string.base, string.pointer_depth) == ("GLchar", 2)
    assert string.const and not string.output
    # The ARB variant writes the same input as "const GLcharARB **".
    arb = param(command(gl, "glShaderSourceARB"), "string")
    assert arb.ctype == "const GLcharARB **"
    assert arb.const and not arb.output


def test_double_pointer_output(gl: Registry) -> None:
    params = param(command(gl, "glGetPointerv"), "params")
    assert (params.ctype, params.pointer_depth) == ("void **", 2)
    assert params.output


def test_draw_elements_indices(gl: Registry) -> None:
    indices = param(command(gl, "glDrawElements"), "indices")
    assert indices.ctype == "const void *"
    assert (indices.base, indices.pointer_depth, indices.const) == ("void", 1, True)


def test_opaque_struct_pointers_are_neither_input_nor_output(gl: Registry) -> None:
    context = param(command(gl, "glCreateSyncFromCLeventARB"), "context")
    assert context.base == "struct _cl_context"
    assert not context.const and not context.output
    assert ctypes_type(context) is ctypes.c_void_p


def test_alias(gl: Registry) -> None:
    assert command(gl, "glBindBufferARB").alias == "glBindBuffer"
    assert command(gl, "glBindBuffer").alias is None


def test_apis(gl: Registry) -> None:
    begin = command(gl, "glBegin").apis
    assert "gl" in begin
    assert "gles2" not in begin
    assert "glcore" not in begin  # removed from the core profile in GL 3.2
    assert {"gl", "glcore", "gles2"} <= command(gl, "glDrawArrays").apis
    assert command(gl, "glDispatchCompute").apis >= {"gl", "glcore", "gles2"}
    every = set().union(*(c.apis for c in gl.commands.values()))
    assert every == {"gl", "glcore", "gles1", "gles2", "glsc2"}
    assert all(c.apis for c in gl.commands.values())


def test_object_classes(gl: Registry) -> None:
    classes = gl.object_classes()
    assert {"texture", "buffer", "program", "shader", "sync", "framebuffer"} <= classes
    assert "display list" in classes  # multi-word classes are kept as written


# --- enums ------------------------------------------------------------------------------------


def test_enum_values(gl: Registry) -> None:
    assert gl.enums["GL_TEXTURE_2D"] == 0x0DE1
    assert gl.enums["GL_TIMEOUT_IGNORED"] == 0xFFFFFFFFFFFFFFFF
    assert gl.enums["GL_INVALID_INDEX"] == 0xFFFFFFFF
    assert "GL_TEXTURE_2D" in gl.enum_names[0x0DE1]
    assert all(gl.enums[n] == v for v, names in gl.enum_names.items() for n in names)


def test_enum_per_api_value_prefers_own_api(gl: Registry) -> None:
    # gl.xml gives GL_ACTIVE_PROGRAM_EXT one value for GL and another for GLES.
    assert gl.enums["GL_ACTIVE_PROGRAM_EXT"] == 0x8B8D


# --- ctypes -----------------------------------------------------------------------------------


def test_every_gl_type_maps_to_ctypes(gl: Registry) -> None:
    for cmd in gl.commands.values():
        for p in cmd.params:
            assert ctypes_type(p) is not None, (cmd.name, p.name, p.ctype)
            assert ctypes_type(p) is ctypes_type(p.ctype), (cmd.name, p.name)
        if cmd.return_ctype == "void":
            assert ctypes_type(cmd.return_ctype) is None
        else:
            assert ctypes_type(cmd.return_ctype) is not None, cmd.name


@pytest.mark.parametrize(
    ("ctype", "expected"),
    [
        ("GLenum", ctypes.c_uint),
        ("GLint", ctypes.c_int),
        ("GLfloat", ctypes.c_float),
        ("GLdouble", ctypes.c_double),
        ("GLboolean", ctypes.c_ubyte),
        ("GLint64", ctypes.c_int64),
        ("GLuint64EXT", ctypes.c_uint64),
        ("GLsizeiptr", ctypes.c_ssize_t),
        ("GLchar", ctypes.c_char),
        ("GLsync", ctypes.c_void_p),
        ("GLDEBUGPROC", ctypes.c_void_p),
        ("const GLchar *const*", ctypes.c_void_p),
        ("struct _cl_event *", ctypes.c_void_p),
    ],
)
def test_ctypes_mapping(ctype: str, expected: type) -> None:
    assert ctypes_type(ctype) is expected


def test_ctypes_unknown_type() -> None:
    with pytest.raises(ValueError, match="Widget"):
        ctypes_type("Widget")


# --- other registries -------------------------------------------------------------------------


def test_egl(cache_home: Path) -> None:
    egl = load_registry("egl")
    create = command(egl, "eglCreateContext")
    assert create.return_ctype == "EGLContext"
    assert [p.name for p in create.params] == ["dpy", "config", "share_context", "attrib_list"]
    assert param(create, "attrib_list").const
    assert create.apis == {"egl"}
    assert egl.enums["EGL_NO_CONTEXT"] == 0  # written EGL_CAST(EGLContext,0)
    assert egl.enums["EGL_DONT_CARE"] == -1  # written EGL_CAST(EGLint,-1)


def test_glx(cache_home: Path) -> None:
    glx = load_registry("glx")
    create = command(glx, "glXCreateContextAttribsARB")
    assert create.return_ctype == "GLXContext"
    attribs = param(create, "attrib_list")
    assert (attribs.ctype, attribs.base, attribs.const) == ("const int *", "int", True)
    assert param(create, "direct").ctype == "Bool"


def test_wgl(cache_home: Path) -> None:
    assert command(load_registry("wgl"), "wglCreateContextAttribsARB").return_ctype == "HGLRC"


def test_unknown_api() -> None:
    with pytest.raises(ValueError, match="vk"):
        load_registry("vk")


# --- the cache --------------------------------------------------------------------------------


def count_parses(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    calls: list[str] = []
    real = reg.parse_registry

    def counting(path: str, api: str) -> Registry:
        calls.append(api)
        return real(path, api)

    monkeypatch.setattr(reg, "parse_registry", counting)
    return calls


def test_cache_round_trip(cache_home: Path, monkeypatch: pytest.MonkeyPatch, gl: Registry) -> None:
    parses = count_parses(monkeypatch)
    first = load_registry("gl")
    assert parses == ["gl"]
    assert list((cache_home / "retrace").glob("registry-gl-*.marshal"))
    assert load_registry("gl") is first  # functools.cache
    assert load_registry() is first  # the same however it is asked for

    reg._load_registry.cache_clear()
    second = load_registry("gl")
    assert parses == ["gl"]  # read back from the cache
    assert second is not first
    assert second == first == gl
    assert command(second, "glShaderSource") == command(gl, "glShaderSource")


def test_cache_stale_schema_reparses(cache_home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    parses = count_parses(monkeypatch)
    load_registry("glx")
    reg._load_registry.cache_clear()
    monkeypatch.setattr(reg, "SCHEMA_VERSION", reg.SCHEMA_VERSION + 1)
    load_registry("glx")
    assert parses == ["glx", "glx"]
    reg._load_registry.cache_clear()
    load_registry("glx")
    assert parses == ["glx", "glx"]  # the new entry is current again


def test_two_schemas_keep_their_own_entries(
    cache_home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two retraces sharing one glad2 (two checkouts, one venv) each keep their entry
    instead of parsing and overwriting the other's on every start."""
    parses = count_parses(monkeypatch)
    current = reg.SCHEMA_VERSION
    for schema in (current, current + 1, current, current + 1):
        monkeypatch.setattr(reg, "SCHEMA_VERSION", schema)
        reg._load_registry.cache_clear()
        load_registry("egl")
    assert parses == ["egl", "egl"]
    assert len(list((cache_home / "retrace").glob("registry-egl-*.marshal"))) == 2


def test_cache_corrupt_file_reparses(cache_home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    parses = count_parses(monkeypatch)
    first = load_registry("egl")
    (entry,) = (cache_home / "retrace").glob("registry-egl-*.marshal")
    entry.write_bytes(b"not a registry")
    reg._load_registry.cache_clear()
    assert load_registry("egl") == first
    assert parses == ["egl", "egl"]


@pytest.mark.parametrize("where", [0.0, 0.5, 0.999])
def test_cache_damaged_byte_reparses(
    cache_home: Path, monkeypatch: pytest.MonkeyPatch, where: float
) -> None:
    """One flipped byte anywhere (header, a command's record, the enums) is caught by the
    checksum: the entry is parsed again and rewritten, never decoded."""
    parses = count_parses(monkeypatch)
    first = load_registry("glx")
    (entry,) = (cache_home / "retrace").glob("registry-glx-*.marshal")
    data = bytearray(entry.read_bytes())
    data[int(len(data) * where)] ^= 0x20
    entry.write_bytes(bytes(data))
    reg._load_registry.cache_clear()
    assert load_registry("glx") == first
    assert parses == ["glx", "glx"]
    reg._load_registry.cache_clear()
    assert load_registry("glx") == first
    assert parses == ["glx", "glx"]  # the rewritten entry is trusted again


def test_cache_truncated_reparses(cache_home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    parses = count_parses(monkeypatch)
    first = load_registry("wgl")
    (entry,) = (cache_home / "retrace").glob("registry-wgl-*.marshal")
    entry.write_bytes(entry.read_bytes()[:-100])
    reg._load_registry.cache_clear()
    assert load_registry("wgl") == first
    assert parses == ["wgl", "wgl"]


def test_cache_other_glad_version_reparses(
    cache_home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import glad

    parses = count_parses(monkeypatch)
    load_registry("egl")
    reg._load_registry.cache_clear()
    monkeypatch.setattr(glad, "__version__", "0.0.0-other", raising=False)
    load_registry("egl")
    assert parses == ["egl", "egl"]


def test_cached_commands_decode_on_lookup(
    cache_home: Path, gl: Registry, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A cached registry decodes only the commands looked up, and each equals the parsed one."""
    load_registry("gl")
    reg._load_registry.cache_clear()
    decoded: list[str] = []
    real = reg._decode_command

    def counting(name: str, record: bytes) -> Command:
        decoded.append(name)
        return real(name, record)

    monkeypatch.setattr(reg, "_decode_command", counting)
    cached = load_registry("gl")
    assert decoded == []
    assert command(cached, "glDrawElements") == command(gl, "glDrawElements")
    assert command(cached, "glDrawElements") is command(cached, "glDrawElements")
    assert decoded == ["glDrawElements"]
    assert cached.command("glNoSuchCommand") is None
    assert len(cached.commands) == len(gl.commands)
    assert cached.enum_names[0x0DE1] == gl.enum_names[0x0DE1]


def test_cache_unwritable_directory(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("a file where the cache directory should go")
    monkeypatch.setenv("XDG_CACHE_HOME", str(blocker))
    reg._load_registry.cache_clear()
    try:
        assert command(load_registry("wgl"), "wglCreateContext").apis == {"wgl"}
    finally:
        reg._load_registry.cache_clear()
