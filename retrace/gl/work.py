"""Which GL commands make the GPU work: what `GPU Busy` brackets (`retrace/replay/_vm.c`).

The one place that decides it. The GPU executes the commands that produce pixels or
buffer contents: draws, compute dispatches, clears, blits, copies, mipmap generation,
resolves, accumulation-buffer operations and framebuffer readbacks, and display lists,
which may hold any of them. Every other command only changes state that the next such
command reads, or moves data the driver copies on the CPU (uploads from client memory),
so bracketing it would time nothing of the GPU's.

The families below are applied to the Khronos registry's command names (so every
vendor variant the registry lists is in, and no name outside it), and state setters
that share a family's prefix are told apart by their parameters: glClearColor and
glClearDepth take only the values later clears use, a clear names what it clears (a
buffer mask, a buffer, a texture or a framebuffer).
"""

from __future__ import annotations

import functools
import re

from retrace.gl.registry import Command, load_registry

# Names that make the GPU work by their family alone. Draws: every gl[Multi[Mode]]Draw*
# command except the draw-buffer selectors (glDrawBuffers); glBegin..glEnd is one draw.
_FAMILIES = re.compile(
    r"gl(?:Multi(?:Mode)?)?Draw(?!Buffer)\w*"
    r"|glDispatchCompute\w*|glBlit\w*|glCopy(?!Path)\w*|glGenerate\w*Mipmap\w*"
    r"|glResolve\w*|glReadn?Pixels\w*|glCallLists?|glCallCommandListNV|glBitmap\w*"
    r"|glRect\w+|glEvalMesh\w+|glAccum\w*|glBegin|glEnd",
    re.ASCII,
)
_CLEAR = re.compile(r"glClear\w*", re.ASCII)


def _names_its_target(command: Command) -> bool:
    """A parameter that says what to clear: an enum (a mask, a buffer, a target) or an
    object (a texture, a buffer, a framebuffer)."""
    return any(p.group is not None or p.object_class is not None for p in command.params)


@functools.cache
def makes_gpu_work(name: str) -> bool:
    """Whether calls of the GL function `name` make the GPU work (decoding only the
    registry records of the clear family: a replay's start-up looks up tens of names)."""
    command = load_registry("gl").command(name)
    if command is None:
        return False
    if _CLEAR.fullmatch(name):
        return _names_its_target(command)
    return _FAMILIES.fullmatch(name) is not None


def gpu_work_commands() -> frozenset[str]:
    """Every registry command whose calls make the GPU work."""
    return frozenset(filter(makes_gpu_work, load_registry("gl").commands))
