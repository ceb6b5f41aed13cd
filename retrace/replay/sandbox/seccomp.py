"""seccomp-bpf: a filter that makes chosen system calls fail, built and installed with ctypes.

The only Python bindings of seccomp are libseccomp's (Debian's python3-seccomp, not on
PyPI) and a 2021 ctypes wrapper of the same library; the filter retrace needs is a few
comparisons, so it is built here as classic BPF, the program the kernel runs on every
system call of the process and its threads and children (`seccomp(2)`).

The program checks the architecture first (a call through another ABI, such as x86's
32-bit `int 0x80` or x32, would carry other numbers: the process is killed), then
compares the call's number with each rule's, and an argument with the rule's values.
An argument is compared in its low 32 bits, which is what the kernel reads of the
`int` and `unsigned int` arguments filtered here (a socket's family, an ioctl's request).
"""

from __future__ import annotations

import ctypes
import errno
import os
import struct
from collections.abc import Sequence
from typing import NamedTuple

import retrace.replay.sandbox.landlock as landlock
from retrace.libc import no_new_privs, syscall

# <linux/filter.h>, <linux/bpf_common.h>: the instructions the program uses
_LD_W_ABS = 0x20  # A = 32-bit word of seccomp_data at k
_JEQ = 0x15  # pc += A == k ? jt : jf
_JGE = 0x35  # pc += A >= k ? jt : jf
_RET = 0x06  # return k

# <linux/seccomp.h>
_NR_AT, _ARCH_AT, _ARGS_AT = 0, 4, 16  # offsets in struct seccomp_data
RET_KILL_PROCESS = 0x80000000
RET_ERRNO = 0x00050000
RET_ALLOW = 0x7FFF0000
_SET_MODE_FILTER = 1
# Without it the kernel turns on the speculative store bypass mitigation for a filtered
# process, which slows the driver's own code (llvmpipe renders on the CPU); a side
# channel is outside what the sandbox is for: the child may read the user's files anyway.
_FILTER_FLAG_SPEC_ALLOW = 1 << 2
_GET_ACTION_AVAIL = 2
_X32_BIT = 0x40000000  # x86_64's x32 ABI: the same numbers with this bit set


class Arch(NamedTuple):
    audit: int  # AUDIT_ARCH_*: what seccomp_data.arch holds for native calls
    x32: bool  # whether numbers with _X32_BIT reach this filter (x86_64 only)
    numbers: dict[str, int]  # system call numbers


_ARCHES = {
    "x86_64": Arch(
        0xC000003E,
        True,
        {
            "ioctl": 16,
            "socket": 41,
            "socketpair": 53,
            "execve": 59,
            "seccomp": 317,
            "execveat": 322,
        },
    ),
    "aarch64": Arch(
        0xC00000B7,
        False,
        {
            "ioctl": 29,
            "socket": 198,
            "socketpair": 199,
            "execve": 221,
            "seccomp": 277,
            "execveat": 281,
        },
    ),
}
# numbered alike on every architecture since Linux 5.1
for _arch in _ARCHES.values():
    _arch.numbers.update(
        io_uring_setup=425,
        io_uring_enter=426,
        io_uring_register=427,
        landlock_create_ruleset=landlock.CREATE_RULESET,
        landlock_add_rule=landlock.ADD_RULE,
        landlock_restrict_self=landlock.RESTRICT_SELF,
    )


class Rule(NamedTuple):
    """Fail `syscall` with `error`: always (`arg` -1), or according to its argument `arg`:
    when that argument is one of `values`, or (`unless`) when it is none of them."""

    syscall: str
    error: int = errno.EPERM
    arg: int = -1
    values: tuple[int, ...] = ()
    unless: bool = False


def native() -> Arch | None:
    """This machine's architecture, or None where retrace has no numbers for it."""
    return _ARCHES.get(os.uname().machine)


def _insn(code: int, k: int, jt: int = 0, jf: int = 0) -> bytes:
    return struct.pack("=HBBI", code, jt, jf, k)


def build(rules: Sequence[Rule], arch: Arch) -> bytes:
    """The BPF program (struct sock_filter[]) that applies `rules`, allowing anything else."""
    kill, allow = _insn(_RET, RET_KILL_PROCESS), _insn(_RET, RET_ALLOW)
    program = [_insn(_LD_W_ABS, _ARCH_AT), _insn(_JEQ, arch.audit, 1, 0), kill]
    program.append(_insn(_LD_W_ABS, _NR_AT))
    if arch.x32:
        program += [_insn(_JGE, _X32_BIT, 0, 1), kill]
    for rule in rules:
        body = _rule_body(rule)
        program.append(_insn(_JEQ, arch.numbers[rule.syscall], 0, len(body)))
        program += body  # ends with a return: the next rule starts with A = number again
    program.append(allow)
    if len(program) > 4096:  # BPF_MAXINSNS
        raise ValueError("seccomp program too long")
    return b"".join(program)


def _rule_body(rule: Rule) -> list[bytes]:
    """The instructions run for `rule`'s system call; each path ends in a return."""
    fail, allow = _insn(_RET, RET_ERRNO | rule.error), _insn(_RET, RET_ALLOW)
    if rule.arg < 0:
        return [fail]
    if not 0 <= rule.arg < 6 or len(rule.values) > 250:  # 6 arguments; jumps reach 255 ahead
        raise ValueError(f"unfilterable rule {rule}")
    on_match, otherwise = (allow, fail) if rule.unless else (fail, allow)
    count = len(rule.values)
    body = [_insn(_LD_W_ABS, _ARGS_AT + 8 * rule.arg)]  # the low word (little-endian)
    # value i jumps over the values after it and `otherwise` to `on_match`
    body += [_insn(_JEQ, value & 0xFFFFFFFF, count - i, 0) for i, value in enumerate(rule.values)]
    return [*body, otherwise, on_match]


def available() -> str | None:
    """Why seccomp filters cannot be installed here, or None if they can."""
    if native() is None:
        return f"retrace has no seccomp filter for {os.uname().machine}"
    action = ctypes.c_uint32(RET_ERRNO)
    if _seccomp(_GET_ACTION_AVAIL, 0, ctypes.byref(action)) != 0:
        return f"this kernel has no seccomp filters ({_error()})"
    return None


def install(rules: Sequence[Rule]) -> None:
    """Filter every later system call of this process (and of what it starts) by `rules`.
    Irreversible; sets no_new_privs, which the kernel requires of an unprivileged filter."""
    arch = native()
    if arch is None:
        raise OSError(errno.ENOSYS, f"no seccomp filter for {os.uname().machine}")
    program = build(rules, arch)
    insns = ctypes.create_string_buffer(program, len(program))

    class _Fprog(ctypes.Structure):
        _fields_ = (("len", ctypes.c_ushort), ("filter", ctypes.c_void_p))

    fprog = _Fprog(len(program) // 8, ctypes.addressof(insns))
    no_new_privs()
    if _seccomp(_SET_MODE_FILTER, _FILTER_FLAG_SPEC_ALLOW, ctypes.byref(fprog)) != 0:
        raise OSError(ctypes.get_errno(), f"seccomp(SECCOMP_SET_MODE_FILTER): {_error()}")


def _seccomp(operation: int, flags: int, args: object) -> int:
    arch = native()
    number = arch.numbers["seccomp"] if arch else -1
    return syscall(number, ctypes.c_uint(operation), ctypes.c_uint(flags), args)


def _error() -> str:
    return os.strerror(ctypes.get_errno())
