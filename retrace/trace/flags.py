"""Call classification derived from function names, as apitrace's parser does it.

apitrace stores no call flags in the file except FAKE; everything else is
derived from the function name when the signature is first seen.
"""

from __future__ import annotations

import enum


class CallFlag(enum.IntFlag):
    """Properties of a call; values are retrace's own, the meanings apitrace's."""

    NONE = 0
    FAKE = 1 << 0  # emitted by the tracer, never made by the application (file flag)
    NON_REPRODUCIBLE = 1 << 1
    NO_SIDE_EFFECTS = 1 << 2  # queries: skipped on replay
    RENDER = 1 << 3  # draws, clears, blits
    SWAP_RENDERTARGET = 1 << 4  # binds a new render target (glBindFramebuffer*)
    END_FRAME = 1 << 5
    INCOMPLETE = 1 << 6  # entered but never returned (program died, trace cut off)
    VERBOSE = 1 << 7  # hidden by `dump` unless -v
    MARKER = 1 << 8
    MARKER_PUSH = 1 << 9
    MARKER_POP = 1 << 10
    SWAPBUFFERS = END_FRAME | SWAP_RENDERTARGET
