"""The sandbox's pieces without GL: the seccomp program (run by an interpreter of classic
BPF written from the kernel's documentation, and by the kernel itself), Landlock on this
kernel, and the manifest's setting."""

from __future__ import annotations

import errno
import struct
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from retrace.batch.manifest import load_manifest
from retrace.errors import UsageError
from retrace.replay import sandbox
from retrace.replay.sandbox import landlock, seccomp
from retrace.replay.sandbox.seccomp import RET_ALLOW, RET_ERRNO, RET_KILL_PROCESS, Rule

X86_64 = seccomp._ARCHES["x86_64"]
AARCH64 = seccomp._ARCHES["aarch64"]
AF_INET, AF_UNIX, AF_NETLINK = 2, 1, 16


def run_bpf(program: bytes, nr: int, arch: int, args: tuple[int, ...] = ()) -> int:
    """What the kernel's classic BPF would return for a call (struct seccomp_data)."""
    data = struct.pack("<iIQ6Q", nr, arch, 0, *(list(args) + [0] * (6 - len(args))))
    insns = [struct.unpack("=HBBI", program[i : i + 8]) for i in range(0, len(program), 8)]
    a, pc = 0, 0
    while True:
        code, jt, jf, k = insns[pc]  # an IndexError: a jump out of the program
        if code == 0x20:  # ld [k]
            (a,) = struct.unpack_from("<I", data, k)
            pc += 1
        elif code == 0x15:  # jeq
            pc += 1 + (jt if a == k else jf)
        elif code == 0x35:  # jge
            pc += 1 + (jt if a >= k else jf)
        elif code == 0x06:  # ret
            return k
        else:
            raise AssertionError(f"unexpected instruction {code:#x}")


RULES = sandbox._seccomp_rules(display=False)
WINDOW_RULES = sandbox._seccomp_rules(display=True)


@pytest.mark.parametrize("arch", [X86_64, AARCH64], ids=["x86_64", "aarch64"])
def test_the_program_denies_what_the_rules_name_and_allows_the_rest(arch):
    n = arch.numbers
    headless, window = seccomp.build(RULES, arch), seccomp.build(WINDOW_RULES, arch)
    eperm = RET_ERRNO | errno.EPERM

    for program in (headless, window):
        assert run_bpf(program, n["execve"], arch.audit) == eperm
        assert run_bpf(program, n["execveat"], arch.audit) == eperm
        for family in (AF_INET, 10, AF_NETLINK, 17):  # AF_INET6, AF_PACKET too
            assert run_bpf(program, n["socket"], arch.audit, (family, 1, 0)) == eperm
        assert run_bpf(program, n["socketpair"], arch.audit, (AF_INET, 1, 0)) == eperm
        assert run_bpf(program, n["socketpair"], arch.audit, (AF_UNIX, 1, 0)) == RET_ALLOW
        assert run_bpf(program, n["io_uring_setup"], arch.audit) == RET_ERRNO | errno.ENOSYS
        assert run_bpf(program, n["ioctl"], arch.audit, (2, 0x5412)) == eperm  # TIOCSTI
        assert run_bpf(program, n["ioctl"], arch.audit, (2, 0x5401)) == RET_ALLOW  # TCGETS
        # only the low word of an argument counts, as the kernel reads an int
        assert run_bpf(program, n["ioctl"], arch.audit, (2, 0x5412 | 1 << 32)) == eperm
        for other in range(0, 460):  # every other call passes
            if other not in {n[rule.syscall] for rule in RULES}:
                assert run_bpf(program, other, arch.audit, (AF_INET,)) == RET_ALLOW
        # another ABI's call (its numbers mean other calls): the process dies
        assert run_bpf(program, 11, 0x40000003) == RET_KILL_PROCESS  # i386's execve
    assert run_bpf(headless, n["socket"], arch.audit, (AF_UNIX, 1, 0)) == eperm
    assert run_bpf(window, n["socket"], arch.audit, (AF_UNIX, 1, 0)) == RET_ALLOW


def test_x32_calls_are_killed_on_x86_64():
    program = seccomp.build(RULES, X86_64)
    assert run_bpf(program, 0x40000000 | 59, X86_64.audit) == RET_KILL_PROCESS
    assert run_bpf(program, 0x40000000 | 1, X86_64.audit) == RET_KILL_PROCESS
    assert run_bpf(seccomp.build(RULES, AARCH64), 0x40000000 | 59, AARCH64.audit) == RET_ALLOW


def test_a_rule_on_many_values_jumps_right():
    values = tuple(range(100, 300))
    arch = X86_64
    program = seccomp.build([Rule("ioctl", errno.EACCES, arg=1, values=values)], arch)
    for value in (99, *values, 300):
        want = RET_ERRNO | errno.EACCES if value in values else RET_ALLOW
        assert run_bpf(program, arch.numbers["ioctl"], arch.audit, (0, value)) == want
    with pytest.raises(ValueError):
        seccomp.build([Rule("ioctl", arg=1, values=tuple(range(251)))], arch)
    with pytest.raises(ValueError):
        seccomp.build([Rule("ioctl", arg=6, values=(1,))], arch)


ATTEMPT = """
def attempt(what, f):
    try:
        f()
        print(what, "done")
    except OSError as e:
        print(what, e.errno)
"""


def confined(confine: str, attempts: str) -> dict[str, str]:
    """Run by a fresh Python: `confine`, then `attempts` (`attempt(WHAT, FUNCTION)`); how
    each attempt ended, "done" or the errno."""
    code = "import os, socket\n" + confine + ATTEMPT + textwrap.dedent(attempts)
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    return dict(line.split() for line in done.stdout.splitlines())


def test_the_kernel_runs_the_program():
    missing = seccomp.available()
    if missing is not None:
        pytest.skip(missing)
    results = confined(
        "from retrace.replay import sandbox\nfrom retrace.replay.sandbox import seccomp\n"
        "seccomp.install(sandbox._seccomp_rules(display=False))\n",
        """
        attempt("inet", lambda: socket.socket(socket.AF_INET).close())
        attempt("unix", lambda: socket.socket(socket.AF_UNIX).close())
        attempt("pair", lambda: [s.close() for s in socket.socketpair()])
        attempt("file", lambda: open(os.devnull, "w").close())
        attempt("exec", lambda: os.execv("/bin/true", ["true"]))
        """,
    )
    eperm = str(errno.EPERM)
    assert results == {"inet": eperm, "unix": eperm, "pair": "done", "file": "done", "exec": eperm}


def test_landlock_confines_writes_and_execution(tmp_path):
    try:
        landlock.abi()
    except OSError as e:
        pytest.skip(f"no Landlock here: {e.strerror}")
    (tmp_path / "out").mkdir()
    (tmp_path / "other.txt").write_text("kept")
    results = confined(
        "from retrace.replay.sandbox import landlock\n"
        f'landlock.restrict([("/", landlock.READ), ({str(tmp_path / "out")!r}, landlock.WRITE)])\n',
        f"""
        attempt("out", lambda: open({str(tmp_path / "out" / "new.txt")!r}, "w").write("x"))
        attempt("other", lambda: open({str(tmp_path / "other.txt")!r}, "w").close())
        attempt("new", lambda: open({str(tmp_path / "new.txt")!r}, "w").close())
        attempt("read", lambda: open({str(tmp_path / "other.txt")!r}).read())
        attempt("exec", lambda: os.execv("/bin/true", ["true"]))
        """,
    )
    eacces = str(errno.EACCES)
    want = {"out": "done", "other": eacces, "new": eacces, "read": "done", "exec": eacces}
    assert results == want
    assert (tmp_path / "other.txt").read_text() == "kept"
    assert not (tmp_path / "new.txt").exists()


def test_each_abi_handles_the_rights_it_knows():
    assert landlock.handled(1) == (1 << 13) - 1
    assert (
        landlock.handled(2) & landlock.Fs.REFER and not landlock.handled(2) & landlock.Fs.TRUNCATE
    )
    assert landlock.handled(4) == landlock.handled(3)
    assert landlock.handled(7) & landlock.Fs.IOCTL_DEV


def test_the_manifest_setting(tmp_path):
    trace = Path(__file__).parents[2] / "traces" / "glxgears.trace"
    head = f'[defaults]\npframes = "opengl: GPU Duration"\n\n[[trace]]\npath = "{trace}"\n'
    for value, mode in (("true", "on"), ('"best-effort"', "best-effort"), ("false", None)):
        path = tmp_path / "m.toml"
        path.write_text(f"{head}sandbox = {value}\n")
        (job,) = load_manifest(path).jobs
        assert job.sandbox == mode
        assert job.sandbox_args() == ([f"--sandbox={mode}"] if mode else [])
    path.write_text(f"{head}sandbox = 1\n")
    with pytest.raises(UsageError, match='sandbox must be true, false or "best-effort", not 1'):
        load_manifest(path)
