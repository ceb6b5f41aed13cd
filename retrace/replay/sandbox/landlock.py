"""Landlock: file system (and TCP) access rules the process puts on itself, with ctypes.

PyPI's `landlock` package has only development releases; the three system calls
(`landlock_create_ruleset`, `landlock_add_rule`, `landlock_restrict_self`, Linux 5.13+)
take a few packed structures, declared here from <linux/landlock.h>.

A ruleset names the accesses it handles; what it handles is denied except beneath the
paths of its rules. Each kernel's ABI version says which accesses it knows: the
ruleset handles those (truncation from ABI 3, TCP from 4, device ioctls from 5, signals
to processes outside the sandbox from 6) and no others, so an older kernel confines
less rather than refusing. Restriction applies to the calling thread and to the threads
and processes it starts later, never to files already open.
"""

from __future__ import annotations

import ctypes
import enum
import os
from collections.abc import Iterable
from typing import NoReturn

from retrace.libc import no_new_privs, syscall

CREATE_RULESET, ADD_RULE, RESTRICT_SELF = 444, 445, 446  # every architecture
_CREATE_RULESET_VERSION = 1
_RULE_PATH_BENEATH = 1

# LANDLOCK_ACCESS_FS_*, bit 0 first, as <linux/landlock.h> numbers them
Fs = enum.IntFlag(
    "Fs",
    "EXECUTE WRITE_FILE READ_FILE READ_DIR REMOVE_DIR REMOVE_FILE MAKE_CHAR MAKE_DIR MAKE_REG "
    "MAKE_SOCK MAKE_FIFO MAKE_BLOCK MAKE_SYM REFER TRUNCATE IOCTL_DEV",
)
# the last file system access each ABI version added: a ruleset handles every one up to it
_LAST_FS_BY_ABI = {1: Fs.MAKE_SYM, 2: Fs.REFER, 3: Fs.TRUNCATE, 5: Fs.IOCTL_DEV}
# the accesses a rule on a file (not a folder) may hold
_FILE_ONLY = Fs.EXECUTE | Fs.WRITE_FILE | Fs.READ_FILE | Fs.TRUNCATE | Fs.IOCTL_DEV
_NET_TCP = 0b11  # ABI 4: bind and connect
_SCOPE_SIGNAL = 1 << 1  # ABI 6

READ = Fs.READ_FILE | Fs.READ_DIR
WRITE = (
    Fs.WRITE_FILE
    | READ
    | Fs.REMOVE_DIR
    | Fs.REMOVE_FILE
    | Fs.MAKE_DIR
    | Fs.MAKE_REG
    | Fs.REFER
    | Fs.TRUNCATE
)  # files and folders made, changed and removed; no devices, links, pipes or sockets
DEVICE = Fs.READ_FILE | Fs.WRITE_FILE | Fs.IOCTL_DEV


class _RulesetAttr(ctypes.Structure):
    _fields_ = (
        ("handled_access_fs", ctypes.c_uint64),
        ("handled_access_net", ctypes.c_uint64),
        ("scoped", ctypes.c_uint64),
    )


class _PathBeneathAttr(ctypes.Structure):
    _pack_ = 1
    _fields_ = (("allowed_access", ctypes.c_uint64), ("parent_fd", ctypes.c_int32))


def abi() -> int:
    """The kernel's Landlock ABI version; raises OSError where it has none (ENOSYS: not
    built in or filtered out, EOPNOTSUPP: built in but not enabled at boot)."""
    flags = ctypes.c_uint32(_CREATE_RULESET_VERSION)
    version = syscall(CREATE_RULESET, None, ctypes.c_size_t(0), flags)
    if version < 0:
        _fail("landlock_create_ruleset")
    return version


def handled(version: int) -> int:
    """The file system accesses a ruleset handles on a kernel of ABI `version`."""
    last = _LAST_FS_BY_ABI[max(v for v in _LAST_FS_BY_ABI if v <= version)]
    return (last << 1) - 1


def restrict(rules: Iterable[tuple[str, int]]) -> None:
    """Confine this thread (and what it starts later) to `rules`: (path, accesses allowed
    beneath it; only those a file can have where the path is a file). The accesses of
    `handled` are denied everywhere else, TCP entirely, and signals to processes outside.
    A path that does not exist is left out. Call with no other thread running."""
    version = abi()
    fs = handled(version)
    attr = _RulesetAttr(fs, _NET_TCP if version >= 4 else 0, _SCOPE_SIGNAL if version >= 6 else 0)
    size = 8 * (1 if version < 4 else 2 if version < 6 else 3)  # the fields this ABI reads
    ruleset = syscall(CREATE_RULESET, ctypes.byref(attr), ctypes.c_size_t(size), 0)
    if ruleset < 0:
        _fail("landlock_create_ruleset")
    try:
        for path, access in rules:
            _add(ruleset, path, access & fs)
        no_new_privs()
        if syscall(RESTRICT_SELF, ctypes.c_int(ruleset), ctypes.c_uint32(0)) != 0:
            _fail("landlock_restrict_self")
    finally:
        os.close(ruleset)


def _add(ruleset: int, path: str, access: int) -> None:
    try:
        fd = os.open(path, os.O_PATH | os.O_CLOEXEC)
    except FileNotFoundError:
        return
    try:
        if not os.path.isdir(path):
            access &= _FILE_ONLY
        rule = ctypes.byref(_PathBeneathAttr(access, fd))
        beneath = ctypes.c_int(_RULE_PATH_BENEATH)
        if syscall(ADD_RULE, ctypes.c_int(ruleset), beneath, rule, ctypes.c_uint32(0)) != 0:
            _fail(f"landlock_add_rule({path})")
    finally:
        os.close(fd)


def _fail(what: str) -> NoReturn:
    code = ctypes.get_errno()
    raise OSError(code, f"{what}: {os.strerror(code)}")
