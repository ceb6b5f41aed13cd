"""The GL API as data, read from the Khronos XML registry.

Replaying a trace means calling thousands of distinct GL entry points with
arguments decoded from the trace. Rather than keep hand-written per-function
tables that drift from the specification, the replayer builds its dispatch from
the Khronos registry files (gl.xml, egl.xml, glx.xml, wgl.xml) that ship inside
the ``glad2`` wheel. This module turns one of those files into a small,
immutable model:

* `Command`: return type, parameters and alias of every entry point, plus the
  set of APIs (gl, glcore, gles1, gles2, glsc2, or egl/glx/wgl) that list it in
  a ``<feature>`` or ``<extension>``. ``glcore`` is derived: a command required
  by a desktop GL version and not removed by a ``<remove profile="core">``, or
  named by an extension that supports ``glcore``.
* `Param`: the declaration split into what the replayer needs to marshal an
  argument: base type, pointer depth, whether the driver reads the pointee
  (const) or writes it (output), the ``len`` expression, the enum group and the
  object class (texture, buffer, program, ...) of object names.
* ``enums``: every enumerant name with its integer value, and the reverse map.

Parsing gl.xml costs a noticeable fraction of a second, which is too much on the
replay start path, so the parsed `Registry` is kept in a per-user cache
directory (``$XDG_CACHE_HOME/retrace`` or ``~/.cache/retrace``), written on
first use. Loading the whole model back (pickle) still took 20 ms, most of it
making thousands of objects a replay never looks at, so the cache holds each
command as its own small `marshal` record, decoded on first lookup, and the
enumerants as one more, decoded when one is first named (errors, mostly): the GL
cache loads in about 1.5 ms. An entry is valid only for the same `SCHEMA_VERSION`
(the meaning of the derivations below), glad2 version, XML path, size and
modification time, and marshal format, and only if its checksum matches: a
missing, stale, damaged or unwritable cache silently falls back to parsing and
is rewritten.
"""

from __future__ import annotations

import ctypes
import functools
import marshal
import os
import sys
import zlib
from collections.abc import Iterator, Mapping
from typing import TYPE_CHECKING, Any, NamedTuple, TypeAlias, overload

from retrace.cachedir import user_cache_dir
from retrace.errors import RetraceError

if TYPE_CHECKING:
    import xml.etree.ElementTree as ET

# Bump whenever the cached records or the derivations below change meaning. It names the
# cache file too, so that two retraces sharing one glad2 never overwrite each other's.
SCHEMA_VERSION = 4

APIS = ("gl", "egl", "glx", "wgl")


class Param(NamedTuple):
    """One parameter of a command, as declared in the registry."""

    name: str
    ctype: str  # the C type as written, e.g. "const GLchar *const*"
    base: str  # the type with qualifiers and pointers stripped, e.g. "GLchar"
    pointer_depth: int  # 0 for values, 1 for T*, 2 for T**
    const: bool  # a pointer to const data: an input array or string
    output: bool  # a pointer to non-const data: the driver writes through it
    length: str | None  # the len="..." expression as written, e.g. "n", "COMPSIZE(pname)"
    group: str | None  # the enum group, e.g. "TextureTarget"
    object_class: str | None  # the object namespace of names passed here, e.g. "texture"


class Command(NamedTuple):
    """One entry point."""

    name: str
    return_ctype: str  # "void", "GLuint", "const GLubyte *", ...
    return_class: str | None  # object class of a returned name (glCreateProgram -> "program")
    params: tuple[Param, ...]
    apis: frozenset[str]  # the APIs whose features or extensions list the command
    alias: str | None  # the command this one is equivalent to, if the registry says so


class CommandTable(Mapping[str, Command]):
    """Commands by name, each decoded from its cached record on first lookup: a replay looks
    up tens of the registry's thousands of commands."""

    __slots__ = ("_records", "_decoded")

    def __init__(self, records: dict[str, bytes]):
        self._records = records
        self._decoded: dict[str, Command] = {}

    def __getitem__(self, name: str) -> Command:
        try:
            return self._decoded[name]
        except KeyError:
            command = self._decoded[name] = _decode_command(name, self._records[name])
            return command

    def __iter__(self) -> Iterator[str]:
        return iter(self._records)

    def __len__(self) -> int:
        return len(self._records)


class Registry:
    """The commands and enumerants of one registry file."""

    __slots__ = ("api", "commands", "_enums", "_enums_record", "_enum_names")

    def __init__(
        self, api: str, commands: Mapping[str, Command], enums: dict[str, int] | bytes
    ) -> None:
        """`enums`: name -> value, or its marshal record (the cache's), decoded on first use:
        a replay names enumerants only for errors, and decoding 6,000 of them costs 2 ms."""
        self.api = api  # "gl", "egl", "glx" or "wgl": which file this came from
        self.commands = commands
        self._enums = None if isinstance(enums, bytes) else enums
        self._enums_record = enums if isinstance(enums, bytes) else b""
        self._enum_names: dict[int, list[str]] | None = None

    @property
    def enums(self) -> dict[str, int]:
        """Every enumerant's name -> its value."""
        if self._enums is None:
            self._enums = marshal.loads(self._enums_record)
        return self._enums

    def __eq__(self, other: object) -> bool:
        """The same file's content (a parsed registry equals its cached copy)."""
        return isinstance(other, Registry) and (self.api, self.commands, self.enums) == (
            other.api,
            other.commands,
            other.enums,
        )

    def command(self, name: str) -> Command | None:
        return self.commands.get(name)

    @property
    def enum_names(self) -> dict[int, list[str]]:
        """Value -> names, in registry order (made on first use: only errors are named)."""
        if self._enum_names is None:
            self._enum_names = {}
            for name, value in self.enums.items():
                self._enum_names.setdefault(value, []).append(name)
        return self._enum_names

    def object_classes(self) -> set[str]:
        """Every object class named on a parameter or a return value."""
        classes = {c.return_class for c in self.commands.values() if c.return_class}
        for cmd in self.commands.values():
            classes.update(p.object_class for p in cmd.params if p.object_class)
        return classes


# --- declarations ---------------------------------------------------------------------------


def _decl_ctype(elem: ET.Element) -> str:
    """The C type of a <param> or <proto>: everything in it except the <name>."""
    parts = [elem.text or ""]
    for child in elem:
        if child.tag != "name":
            parts.append(child.text or "")
        parts.append(child.tail or "")
    return " ".join("".join(parts).split())


def _split_ctype(ctype: str) -> tuple[str, int, bool]:
    """(base type, pointer depth, whether what the outermost pointer points to is const)."""
    tokens = ctype.replace("*", " * ").split()
    depth = tokens.count("*")
    base = " ".join(t for t in tokens if t not in ("*", "const"))
    if depth == 0:
        return base, 0, False
    last_star = len(tokens) - 1 - tokens[::-1].index("*")
    # Arrays of input pointers appear both as "const T *const*" and, in older entry points
    # (glShaderSourceARB, the IBM pointer lists), as "const T **"; no "const T **" in the
    # registries is written through, so any const before the last star means an input.
    return base, depth, "const" in tokens[:last_star]


def _parse_param(elem: ET.Element) -> Param:
    ctype = _decl_ctype(elem)
    base, depth, pointee_const = _split_ctype(ctype)
    # "struct _cl_context *" and the like are opaque handles: neither read nor written.
    data = depth > 0 and not (depth == 1 and base.startswith("struct "))
    return Param(
        name=elem.findtext("name", ""),
        ctype=ctype,
        base=base,
        pointer_depth=depth,
        const=data and pointee_const,
        output=data and not pointee_const,
        length=elem.get("len"),
        group=elem.get("group"),
        object_class=elem.get("class"),
    )


def _command_apis(root: ET.Element) -> dict[str, set[str]]:
    """Command name -> the APIs whose features or extensions require it."""
    apis: dict[str, set[str]] = {}
    core: set[str] = set()  # desktop GL commands still present in the core profile
    for feature in root.iter("feature"):
        api = feature.get("api", "")
        for require in feature.iter("require"):
            for cmd in require.iter("command"):
                name = cmd.get("name", "")
                apis.setdefault(name, set()).add(api)
                if api == "gl" and require.get("profile") != "compatibility":
                    core.add(name)
        for remove in feature.iter("remove"):
            if api == "gl" and remove.get("profile") == "core":
                core.difference_update(cmd.get("name", "") for cmd in remove.iter("command"))
    for name in core:
        apis[name].add("glcore")

    for ext in root.iter("extension"):
        supported = set(ext.get("supported", "").split("|")) - {"disabled", ""}
        for require in ext.iter("require"):
            targets = set(supported)
            only = require.get("api")
            if only is not None:
                # glcore is the core profile of "gl", so api="gl" keeps it.
                targets = {a for a in targets if a == only or (only == "gl" and a == "glcore")}
            if require.get("profile") == "compatibility":
                targets.discard("glcore")
            if targets:
                for cmd in require.iter("command"):
                    apis.setdefault(cmd.get("name", ""), set()).update(targets)
    return apis


def _parse_commands(root: ET.Element) -> dict[str, Command]:
    apis = _command_apis(root)
    # Most parameters repeat ("GLenum target", "GLsizei n") and there are few distinct API
    # sets; sharing equal ones keeps the parsed model small.
    shared: dict[Param, Param] = {}
    api_sets: dict[frozenset[str], frozenset[str]] = {}
    commands: dict[str, Command] = {}
    block = root.find("commands")
    for elem in block if block is not None else ():
        proto = elem.find("proto")
        if elem.tag != "command" or proto is None:
            continue
        name = proto.findtext("name", "")
        params = []
        for p in elem.iter("param"):
            param = _parse_param(p)
            params.append(shared.setdefault(param, param))
        alias = elem.find("alias")
        listed = frozenset(apis.get(name, ()))
        commands[name] = Command(
            name=name,
            return_ctype=_decl_ctype(proto),
            return_class=proto.get("class"),
            params=tuple(params),
            apis=api_sets.setdefault(listed, listed),
            alias=alias.get("name") if alias is not None else None,
        )
    return commands


# --- enumerants -----------------------------------------------------------------------------


def _enum_value(text: str) -> int | None:
    """The integer an enum's value attribute denotes, or None for non-integers.

    Besides plain decimal and hex, EGL writes typed constants such as
    ``EGL_CAST(EGLint,-1)``; GLX has one string constant ("GLX").
    """
    text = text.strip()
    if text.startswith("EGL_CAST(") and text.endswith(")"):
        text = text[len("EGL_CAST(") : -1].rpartition(",")[2].strip()
    try:
        return int(text, 16) if text.lower().startswith("0x") else int(text, 10)
    except ValueError:
        return None


def _parse_enums(root: ET.Element, api: str) -> dict[str, int]:
    enums: dict[str, int] = {}
    for block in root.iter("enums"):
        for elem in block.iter("enum"):
            name = elem.get("name", "")
            value = _enum_value(elem.get("value", ""))
            if value is None:
                continue
            # A few enumerants have different values per API (GL_ACTIVE_PROGRAM_EXT);
            # the registry's own API wins over any other.
            if name not in enums or elem.get("api") == api:
                enums[name] = value
    return enums


# --- loading and the cache ------------------------------------------------------------------


def registry_path(api: str) -> str:
    """The XML file glad2 ships for `api` (its real path: the cache's key names it)."""
    if api not in APIS:
        raise ValueError(f"unknown registry {api!r}; expected one of {', '.join(APIS)}")
    try:
        import glad
    except ImportError as exc:
        raise RetraceError(
            "the GL registry comes from the glad2 package: pip install glad2"
        ) from exc
    return os.path.join(os.path.dirname(os.path.realpath(glad.__file__)), "files", f"{api}.xml")


def parse_registry(path: str, api: str) -> Registry:
    """Build a Registry from an XML file, without the cache."""
    import xml.etree.ElementTree as ET  # only when the cache is cold

    root = ET.parse(path).getroot()
    return Registry(api=api, commands=_parse_commands(root), enums=_parse_enums(root, api))


def _cache_dir() -> str:
    return user_cache_dir()


_MAGIC = b"retrace-registry\n"
_DIGEST = 4  # bytes of CRC-32 over the rest of the file: damage, not tampering, is the risk


def _cache_key(path: str) -> tuple[Any, ...]:
    import glad

    st = os.stat(path)
    version = getattr(glad, "__version__", "")
    return (SCHEMA_VERSION, version, path, st.st_size, st.st_mtime_ns, marshal.version)


def _cache_file(path: str, api: str) -> str:
    # a short name per registry file; a clash only costs a reparse (the key is checked)
    digest = f"{zlib.crc32(path.encode()):08x}"
    return os.path.join(_cache_dir(), f"registry-{api}-{digest}-v{SCHEMA_VERSION}.marshal")


def _encode_command(cmd: Command) -> bytes:
    params = tuple(
        (p.name, p.ctype, p.base, p.pointer_depth, p.const, p.output)
        + (p.length, p.group, p.object_class)
        for p in cmd.params
    )
    return marshal.dumps((cmd.return_ctype, cmd.return_class, params, sorted(cmd.apis), cmd.alias))


_new = tuple.__new__


def _decode_command(name: str, record: bytes) -> Command:
    return_ctype, return_class, params, apis, alias = marshal.loads(record)
    # (tuple.__new__: a NamedTuple's own __new__ took half the time; the records are ours)
    params = tuple([_new(Param, p) for p in params])
    return _new(Command, (name, return_ctype, return_class, params, frozenset(apis), alias))


def _read_cache(file: str, key: tuple[Any, ...], api: str) -> Registry | None:
    """The cached registry, or None when the entry is missing, stale or damaged in any way
    (the checksum is checked before marshal reads a byte of it)."""
    try:
        with open(file, "rb") as f:
            data = f.read()
    except OSError:
        return None
    body = memoryview(data)[len(_MAGIC) + _DIGEST :]
    digest = data[len(_MAGIC) : len(_MAGIC) + _DIGEST]
    if not data.startswith(_MAGIC) or _checksum(body) != digest:
        return None
    try:
        cached_key, records, enums = marshal.loads(body)
    except (ValueError, EOFError, TypeError):  # written by a different marshal format
        return None
    if cached_key != key or not isinstance(enums, bytes):
        return None
    return Registry(api=api, commands=CommandTable(records), enums=enums)


def _checksum(body: bytes | memoryview) -> bytes:
    return zlib.crc32(body).to_bytes(_DIGEST, "little")


def _write_cache(file: str, key: tuple[Any, ...], registry: Registry) -> None:
    import tempfile  # only when the cache is written: 5 ms of imports

    records = {name: _encode_command(cmd) for name, cmd in registry.commands.items()}
    body = marshal.dumps((key, records, marshal.dumps(registry.enums)))
    digest = _checksum(body)
    try:
        folder, name = os.path.split(file)
        os.makedirs(folder, exist_ok=True)
        # Write a temporary file and rename it, so that concurrent loaders never see half.
        fd, tmp = tempfile.mkstemp(dir=folder, prefix=name, suffix=".tmp")
        try:
            with os.fdopen(fd, "wb") as f:
                f.write(_MAGIC + digest + body)
            os.replace(tmp, file)
        except BaseException:
            os.unlink(tmp)
            raise
    except OSError:
        pass  # a read-only or full cache directory only costs the next start a parse


def load_registry(api: str = "gl") -> Registry:
    """The registry for "gl", "egl", "glx" or "wgl", from the cache when it is current;
    loaded once per process and API, however the API is given."""
    return _load_registry(api)


# (functools.cache keys load_registry() and load_registry("gl") apart: a replay, which
# asks both ways, held two registries, 1.8 MiB of objects, and loaded the second in 9 ms)
@functools.cache
def _load_registry(api: str) -> Registry:
    path = registry_path(api)
    key = _cache_key(path)
    file = _cache_file(path, api)
    registry = _read_cache(file, key, api)
    if registry is None:
        registry = parse_registry(path, api)
        _write_cache(file, key, registry)
    return registry


# --- ctypes ---------------------------------------------------------------------------------

# The ctypes type of one GL value: a number, a char or a pointer (quoted: _SimpleCData is
# generic only in typeshed).
CType: TypeAlias = "type[ctypes._SimpleCData[Any]]"

# GLhandleARB is a pointer on macOS and an unsigned int everywhere else (see gl.xml).
_HANDLE_ARB: CType = ctypes.c_void_p if sys.platform == "darwin" else ctypes.c_uint

_CTYPES: dict[str, CType | None] = {
    "void": None,
    "GLvoid": None,
    "GLenum": ctypes.c_uint,
    "GLuint": ctypes.c_uint,
    "GLbitfield": ctypes.c_uint,
    "GLint": ctypes.c_int,
    "GLsizei": ctypes.c_int,
    "GLfixed": ctypes.c_int,
    "GLclampx": ctypes.c_int,
    "GLfloat": ctypes.c_float,
    "GLclampf": ctypes.c_float,
    "GLdouble": ctypes.c_double,
    "GLclampd": ctypes.c_double,
    "GLboolean": ctypes.c_ubyte,
    "GLubyte": ctypes.c_ubyte,
    "GLbyte": ctypes.c_byte,
    "GLshort": ctypes.c_short,
    "GLushort": ctypes.c_ushort,
    "GLhalf": ctypes.c_ushort,
    "GLhalfARB": ctypes.c_ushort,
    "GLhalfNV": ctypes.c_ushort,
    "GLint64": ctypes.c_int64,
    "GLint64EXT": ctypes.c_int64,
    "GLuint64": ctypes.c_uint64,
    "GLuint64EXT": ctypes.c_uint64,
    "GLintptr": ctypes.c_ssize_t,
    "GLintptrARB": ctypes.c_ssize_t,
    "GLsizeiptr": ctypes.c_ssize_t,
    "GLsizeiptrARB": ctypes.c_ssize_t,
    "GLvdpauSurfaceNV": ctypes.c_ssize_t,
    "GLchar": ctypes.c_char,
    "GLcharARB": ctypes.c_char,
    "GLhandleARB": _HANDLE_ARB,
    # Opaque pointers and callbacks.
    "GLsync": ctypes.c_void_p,
    "GLeglImageOES": ctypes.c_void_p,
    "GLeglClientBufferEXT": ctypes.c_void_p,
    "GLDEBUGPROC": ctypes.c_void_p,
    "GLDEBUGPROCARB": ctypes.c_void_p,
    "GLDEBUGPROCKHR": ctypes.c_void_p,
    "GLDEBUGPROCAMD": ctypes.c_void_p,
    "GLVULKANPROCNV": ctypes.c_void_p,
}


@overload
def ctypes_type(param_or_ctype: Param) -> CType: ...
@overload
def ctypes_type(param_or_ctype: str) -> CType | None: ...
def ctypes_type(param_or_ctype: Param | str) -> CType | None:
    """The ctypes type that passes a GL value of this type; None for a void return (a
    parameter is never void).

    Every pointer, whatever it points to, is passed as c_void_p.
    """
    if isinstance(param_or_ctype, Param):
        base, depth = param_or_ctype.base, param_or_ctype.pointer_depth
    else:
        base, depth, _ = _split_ctype(param_or_ctype)
    if depth:
        return ctypes.c_void_p
    if base not in _CTYPES or (_CTYPES[base] is None and isinstance(param_or_ctype, Param)):
        raise ValueError(f"no ctypes mapping for the GL type {base!r}")
    return _CTYPES[base]
