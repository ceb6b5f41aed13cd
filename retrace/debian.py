"""The Debian packages a replay needs, which pip cannot install.

A replay loads libEGL, Mesa's EGL driver and the GL client libraries with ctypes at run
time; on Debian and Ubuntu they come from these packages. `python -m retrace.debian`
checks them (tools/setup.sh, the README's first command, and .ci/run call it before
anything else), and the error for a missing EGL driver names the driver's packages.

    python -m retrace.debian [--install] [PACKAGE...]

Exit 0 when every package is installed (or the system has no dpkg to ask). Otherwise it
prints the `apt-get install` line of the missing ones and exits 1; with --install, run
as root, it runs that line instead.
"""

from __future__ import annotations

import os
import sys

# libEGL (glvnd), Mesa's EGL vendor library and its DRI drivers (llvmpipe among them).
DRIVER = ("libegl1", "libegl-mesa0", "libgl1-mesa-dri")
# The GL client libraries a trace's calls are dispatched to: libOpenGL.so.0, libGLESv2,
# libGLESv1_CM, libGL.so.1 (retrace.replay.ws.egl_api.GL_LIBRARIES).
REPLAY = (*DRIVER, "libopengl0", "libgles2", "libgles1", "libgl1")


def install_line(packages: tuple[str, ...] | list[str]) -> str:
    """The command that installs `packages`, as a user would type it."""
    return "apt-get install -y --no-install-recommends " + " ".join(packages)


# The end of the "no EGL driver found" error: what gives the machine a driver.
DRIVER_HINT = f"install Mesa's EGL driver (Debian, Ubuntu: {install_line(DRIVER)})"


def missing(packages: tuple[str, ...] | list[str]) -> list[str] | None:
    """The packages dpkg does not list as installed, or None without dpkg."""
    import shutil  # (here: the replay imports this module for DRIVER_HINT, and needs neither)
    import subprocess

    if shutil.which("dpkg-query") is None:
        return None
    listed = subprocess.run(
        ["dpkg-query", "-W", "-f", "${Package} ${db:Status-Status}\n", *packages],
        capture_output=True,
        text=True,
        check=False,
    ).stdout.split("\n")
    installed = {line.split()[0] for line in listed if line.endswith(" installed")}
    return [name for name in packages if name not in installed]


def main(argv: list[str]) -> int:
    install = argv[:1] == ["--install"]
    packages = argv[1:] if install else argv
    absent = missing(packages or REPLAY)
    if absent is None:
        print(
            "retrace: no dpkg to ask: a replay needs libEGL, Mesa's EGL driver and libGL",
            file=sys.stderr,
        )
        return 0
    if not absent:
        return 0
    if install and os.geteuid() == 0:
        import subprocess

        env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
        subprocess.run(["apt-get", "update", "-q"], check=True, env=env)
        return subprocess.run([*install_line(absent).split(), "-q"], env=env).returncode
    print(
        f"retrace: error: a replay needs Debian packages; as root run: {install_line(absent)}",
        file=sys.stderr,
    )
    return 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
