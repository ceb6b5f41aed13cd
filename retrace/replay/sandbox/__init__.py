"""--sandbox: the replay child confines itself before it reads a call of the trace.

A trace from a stranger is input the driver and retrace's replay trust a great deal
(pointers, sizes, counts); a flaw either leaves could let a crafted trace run code in
the replaying process. With --sandbox the child (`contain.supervise` forks it) confines
itself with what the Linux kernel offers, before it reads the trace or loads the driver:

* Landlock (`landlock.py`): it may read anything the user can, and write only beneath
  the paths its command writes (the profile's store, the snapshots' folder, a legacy
  profile's output file), a temporary folder of its own (its $TMPDIR: the data pool of
  `program.py`), and the sandbox's own caches; devices only the GPU's nodes and
  /dev/null; it executes nothing, reaches no TCP port and signals no process outside.
* seccomp (`seccomp.py`): execve and execveat fail, and so do sockets of every family
  but AF_UNIX (and AF_UNIX too unless a --window needs the display server), io_uring
  (whose operations would bypass the socket rule), and the terminal ioctls that push
  input into the user's terminal (TIOCSTI, TIOCLINUX), which Landlock cannot stop on the
  terminal the child inherits as its standard streams.

The sandbox's caches are its own, beneath the trace cache's folder (``sandbox/``): its
trace cache (RETRACE_CACHE_DIR) and the driver's shader caches (Mesa's, NVIDIA's). A
child that writes cache entries could otherwise plant a crafted one that an unconfined
retrace, or another program using the driver, reads later. What the parent does before
the fork (the registry, parsed once per user, from glad2's XML) stays its own.
"""

from __future__ import annotations

import contextlib
import errno
import importlib
import os
import sys
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from functools import partial
from typing import TYPE_CHECKING

from retrace.errors import RetraceError

if TYPE_CHECKING:
    from retrace.replay.sandbox import seccomp

MODES = ("on", "best-effort")
PROBE = "RETRACE_TEST_SANDBOX_PROBE"  # tests only: a file the confined child tries to write
_AF_UNIX = 1
_TIOCSTI, _TIOCLINUX = 0x5412, 0x541C
_DEVICES = ("/dev/dri", "/dev/null")  # what GL drivers open read-write (and /dev/nvidia*)
_CACHE_VARIABLES = {  # each driver's shader cache, in the sandbox's cache folder
    "MESA_SHADER_CACHE_DIR": "mesa_shader_cache",
    "__GL_SHADER_DISK_CACHE_PATH": "nvidia_shader_cache",
}
_requested: list[tuple[bool, bool]] = []  # (landlock, seccomp) to use, once --sandbox checked


def request(mode: str) -> None:
    """--sandbox (`mode` "on") or --sandbox=best-effort: replay children confine themselves.
    A kernel without Landlock or seccomp filters is refused, or with best-effort a warning."""
    missing = {name: why for name, why in _lacking().items() if why}
    reasons, names = "; ".join(dict.fromkeys(missing.values())), " and ".join(missing)
    if missing and mode != "best-effort":
        raise RetraceError(f"--sandbox: {reasons}; --sandbox=best-effort replays without {names}")
    if missing:
        print(
            f"retrace: warning: --sandbox=best-effort: {reasons}: the replay runs without {names}",
            file=sys.stderr,
        )
    _requested[:] = [("Landlock" not in missing, "seccomp" not in missing)]


def _lacking() -> dict[str, str | None]:
    """Why each mechanism cannot be used here, or None where it can."""
    from retrace.replay.sandbox import landlock, seccomp

    if not sys.platform.startswith("linux"):  # (the system call numbers would mean others)
        return dict.fromkeys(("Landlock", "seccomp"), f"{sys.platform} is not Linux")
    try:
        landlock.abi()
        no_landlock = None
    except OSError as e:
        no_landlock = f"this kernel has no Landlock ({e.strerror})"
    return {"Landlock": no_landlock, "seccomp": seccomp.available()}


def _folder() -> str:
    """Where the sandboxed children's caches live: ``sandbox/`` in the trace cache's folder."""
    from retrace.trace import cache

    return os.path.join(cache.directory(), "sandbox")


@contextmanager
def prepared(writes: Sequence[str], display: bool) -> Iterator[Callable[[], None] | None]:
    """In the parent, around the fork: the child's own temporary folder, removed after it,
    and the function the child calls to confine itself (None without --sandbox).
    `writes`: the paths its command writes (folders end with a separator); `display`: it
    talks to a display server."""
    if not _requested:
        yield None
        return
    from retrace.gl.registry import load_registry

    load_registry("gl")  # the child inherits it parsed, and could not fill the registry cache
    caches = _folder()
    # (not tempfile's mkdtemp: its imports cost the command 5-10 ms)
    name = f"retrace-sandbox-{os.getpid()}-{os.urandom(4).hex()}"
    scratch = os.path.join(os.environ.get("TMPDIR") or "/tmp", name)
    try:
        os.makedirs(caches, exist_ok=True)
        for path in writes:  # made now where missing, for a rule to name it
            if path.endswith(os.sep):
                os.makedirs(path, exist_ok=True)  # (as the first snapshot would make it)
            elif not os.path.exists(path):
                open(path, "a").close()  # noqa: SIM115
        os.mkdir(scratch, 0o700)
    except OSError as e:
        raise RetraceError(f"--sandbox: cannot make its folders: {e.strerror}") from None
    try:
        yield partial(_enter, tuple(writes), display, scratch, caches)
    finally:
        try:
            os.rmdir(scratch)  # the data pool's file had no name: the folder is empty
        except OSError:
            import shutil

            shutil.rmtree(scratch, ignore_errors=True)


def _enter(writes: tuple[str, ...], display: bool, scratch: str, caches: str) -> None:
    """In the child, before anything of the trace: confine this process."""
    from retrace.replay.sandbox import landlock, seccomp

    use_landlock, use_seccomp = _requested[0]
    os.environ["TMPDIR"] = scratch
    os.environ["RETRACE_CACHE_DIR"] = caches
    for variable, name in _CACHE_VARIABLES.items():
        os.environ[variable] = os.path.join(caches, name)
    if "tempfile" in sys.modules:
        import tempfile

        tempfile.tempdir = None  # it remembers the $TMPDIR it saw first
    if display:  # importing pyGLFW runs a Python to ask its library's version: now, then
        with contextlib.suppress(ImportError):  # (the viewer reports it missing)
            importlib.import_module("glfw")
    try:
        if use_landlock:
            nvidia = [f"/dev/{name}" for name in os.listdir("/dev") if name.startswith("nvidia")]
            devices = [*_DEVICES, *nvidia]
            landlock.restrict(
                [("/", landlock.READ)]
                + [(path, landlock.DEVICE) for path in devices]
                + [(path, landlock.WRITE) for path in (*writes, scratch, caches)]
            )
        if use_seccomp:
            seccomp.install(_seccomp_rules(display))
    except OSError as e:
        raise RetraceError(f"--sandbox: cannot confine the replay: {e.strerror}") from None
    if os.environ.get(PROBE):
        _probe(os.environ[PROBE])


def _seccomp_rules(display: bool) -> list[seccomp.Rule]:
    from retrace.replay.sandbox.seccomp import Rule

    unix = (_AF_UNIX,)
    return [
        Rule("execve"),
        Rule("execveat"),
        Rule("socket", arg=0, values=unix, unless=True) if display else Rule("socket"),
        Rule("socketpair", arg=0, values=unix, unless=True),
        Rule("io_uring_setup", errno.ENOSYS),
        Rule("io_uring_enter", errno.ENOSYS),
        Rule("io_uring_register", errno.ENOSYS),
        Rule("ioctl", arg=1, values=(_TIOCSTI, _TIOCLINUX)),
    ]


def _probe(path: str) -> None:
    """Tests only: what code run by an exploited flaw would try, and whether it could."""
    import socket

    def report(what: str, attempt: Callable[[], object]) -> None:
        try:
            attempt()
            outcome = "done"
        except OSError as e:
            outcome = f"refused ({errno.errorcode.get(e.errno or 0, e.errno)})"
        print(f"retrace: sandbox probe: {what}: {outcome}", file=sys.stderr, flush=True)

    report(f"write {path}", lambda: open(path, "w").close())  # noqa: SIM115
    report("socket AF_INET", lambda: socket.socket(socket.AF_INET, socket.SOCK_STREAM).close())
    report("execute /bin/true", lambda: os.execv("/bin/true", ["true"]))
