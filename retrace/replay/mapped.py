"""Mapped buffer memory: where the traced program's mappings live in this replay.

apitrace records what a program writes into a mapped buffer as fake `memcpy`
calls whose destination is an address in the traced process. The replay keeps
one region per live mapping -- per buffer object, not per binding target, since
engines keep many buffers mapped at once (persistent, coherent maps that stay
mapped across frames, draws and other maps of the same target) -- and resolves
each memcpy by address range, as apitrace's own region map does. A region ends
when its buffer is unmapped, identified by the driver's pointer to it, or when a
newer mapping covers the same traced addresses (the program freed and reused
them).
"""

from __future__ import annotations

import bisect
import ctypes
from typing import NamedTuple


class Region(NamedTuple):
    """A mapped range: where the traced program saw it and where the driver put it now."""

    traced: int
    size: int
    real: int


class MappedMemory:
    """The live mappings of one replay pass, sorted by traced address."""

    def __init__(self) -> None:
        self._starts: list[int] = []
        self._regions: list[Region] = []
        self.misses = 0  # memcpys that landed in no live mapping this pass
        self.first_miss: int | None = None  # the first such destination address

    def clear(self) -> None:
        self._starts.clear()
        self._regions.clear()
        self.misses = 0
        self.first_miss = None

    def __len__(self) -> int:
        return len(self._regions)

    def map(self, traced: int, size: int, real: int) -> None:
        """A new mapping; any older one it overlaps in the traced process is gone."""
        if not traced or not real or size <= 0:
            return
        end = traced + size
        i = bisect.bisect_right(self._starts, traced)
        if i and self._regions[i - 1].traced + self._regions[i - 1].size > traced:
            i -= 1
        j = i
        while j < len(self._regions) and self._regions[j].traced < end:
            j += 1
        self._starts[i:j] = [traced]
        self._regions[i:j] = [Region(traced, size, real)]

    def unmap(self, real: int) -> None:
        """The driver's mapping at `real` ended (its buffer was unmapped)."""
        for i, region in enumerate(self._regions):
            if region.real == real:
                del self._starts[i], self._regions[i]
                return

    def write(self, traced: int, data: int | bytes, size: int) -> bool:
        """Copy `size` bytes of data (at an address, as the compiled trace keeps them in its
        data pool, or bytes) to where a traced address lives now; False (and a miss
        counted) if no live mapping holds all of it."""
        i = bisect.bisect_right(self._starts, traced) - 1
        if i >= 0:
            region = self._regions[i]
            offset = traced - region.traced
            if offset + size <= region.size:
                ctypes.memmove(region.real + offset, data, size)
                return True
        self.misses += 1
        if self.first_miss is None:
            self.first_miss = traced
        return False
