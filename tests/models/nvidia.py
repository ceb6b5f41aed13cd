"""A model of NVIDIA's EGL driver: Mesa behind a libglvnd vendor library that departs from it
where NVIDIA's driver was measured to (nvidia_egl.c says how, and what is modelled).

`build` compiles nvidia_egl.c and writes the JSON vendor file libglvnd loads it by;
`environment` is the environment that puts it in place of every other EGL vendor
(`__EGL_VENDOR_LIBRARY_FILENAMES`), for a process started with it. By hand, to
reproduce on llvmpipe what NVIDIA does:

    python -m tests.models.nvidia [--] retrace replay traces/glxgears.trace

or, to keep the build in DIR for a shell's later commands:

    export $(python -m tests.models.nvidia --build DIR)
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

SOURCE = Path(__file__).with_name("nvidia_egl.c")
LIBRARY = "libEGL_nvidia_model.so"
# libglvnd's default places for vendor files (its sysconfdir first, then its datadir)
VENDOR_DIRS = (Path("/etc/glvnd/egl_vendor.d"), Path("/usr/share/glvnd/egl_vendor.d"))
VENDOR_VARIABLE = "__EGL_VENDOR_LIBRARY_FILENAMES"


class ModelBuildError(Exception):
    """Mesa's vendor library is not installed, or the model does not compile."""


def mesa_vendor_library() -> str:
    """The library Mesa's installed glvnd vendor file names (libEGL_mesa.so.0 on Debian)."""
    for folder in VENDOR_DIRS:
        for vendor_file in sorted(folder.glob("*.json")):
            library = json.loads(vendor_file.read_text())["ICD"]["library_path"]
            if "EGL_mesa" in library:
                return library
    raise ModelBuildError(f"no Mesa EGL vendor file in {', '.join(map(str, VENDOR_DIRS))}")


def build(directory: Path) -> Path:
    """Compile the model into `directory`; the path of its JSON vendor file."""
    library = directory / LIBRARY
    compiler = os.environ.get("CC", "cc")
    command = [
        compiler, "-shared", "-fPIC", "-O2", "-std=c11", "-Wall", "-Wextra",
        f'-DWRAPPED="{mesa_vendor_library()}"', "-o", str(library), str(SOURCE),
    ]  # fmt: skip
    done = subprocess.run(command, capture_output=True, text=True, timeout=120)
    if done.returncode != 0:
        raise ModelBuildError(f"{' '.join(command)} failed:\n{done.stderr}")
    vendor_file = directory / "nvidia_model.json"
    vendor = {"file_format_version": "1.0.0", "ICD": {"library_path": str(library)}}
    vendor_file.write_text(json.dumps(vendor))
    return vendor_file


def environment(vendor_file: Path) -> dict[str, str]:
    """This process's environment with the model as the only EGL vendor."""
    return {**os.environ, VENDOR_VARIABLE: str(vendor_file)}


def main(argv: list[str]) -> int:
    if argv[:1] == ["--build"] and len(argv) == 2:
        kept = Path(argv[1]).resolve()
        kept.mkdir(parents=True, exist_ok=True)
        print(f"{VENDOR_VARIABLE}={build(kept)}")
        return 0
    command = argv[1:] if argv[:1] == ["--"] else argv
    if not command:
        print(f"usage: python -m tests.models.nvidia [--] COMMAND...\n{__doc__}", file=sys.stderr)
        return 2
    with tempfile.TemporaryDirectory(prefix="nvidia-model-") as directory:
        vendor_file = build(Path(directory))
        return subprocess.run(command, env=environment(vendor_file), check=False).returncode


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
