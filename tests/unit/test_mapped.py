"""Mapped buffer memory: one region per live mapping, resolved by traced address."""

from __future__ import annotations

import ctypes

from retrace.replay.mapped import MappedMemory


def buffers(*sizes: int) -> list[ctypes.Array]:
    return [ctypes.create_string_buffer(n) for n in sizes]


def address(buffer: ctypes.Array) -> int:
    return ctypes.addressof(buffer)


def test_many_mappings_live_at_once_and_unmap_by_their_own_pointer():
    a, b, c = buffers(64, 64, 64)
    mem = MappedMemory()
    mem.map(0x1000, 64, address(a))
    mem.map(0x9000, 64, address(b))
    mem.map(0x5000, 64, address(c))
    mem.unmap(address(c))  # another buffer ends its mapping: the persistent ones stay
    assert mem.write(0x1000 + 8, b"AAAA", 4) and mem.write(0x9000, b"BB", 2)
    assert a.raw[8:12] == b"AAAA" and b.raw[:2] == b"BB"
    assert not mem.write(0x5000, b"C", 1) and c.raw[:1] == b"\0"
    assert len(mem) == 2 and mem.misses == 1 and mem.first_miss == 0x5000


def test_a_write_must_fit_its_mapping():
    (a,) = buffers(16)
    mem = MappedMemory()
    mem.map(0x2000, 16, address(a))
    assert mem.write(0x2000, b"x" * 16, 16)
    assert not mem.write(0x2008, b"y" * 9, 9)  # one byte past the end
    assert not mem.write(0x1FFF, b"z", 1)  # one byte before the start
    assert a.raw == b"x" * 16 and mem.misses == 2 and mem.first_miss == 0x2008


def test_a_new_mapping_replaces_the_ones_it_overlaps():
    old1, old2, new, other = buffers(32, 32, 64, 16)
    mem = MappedMemory()
    mem.map(0x1000, 32, address(old1))
    mem.map(0x1020, 32, address(old2))
    mem.map(0x3000, 16, address(other))
    mem.map(0x1010, 64, address(new))  # the program freed both and reused their addresses
    assert len(mem) == 2
    assert mem.write(0x1010, b"N" * 64, 64) and new.raw == b"N" * 64
    assert old1.raw == b"\0" * 32 and old2.raw == b"\0" * 32
    assert not mem.write(0x1000, b"o", 1)  # the old range below the new one is gone too
    assert mem.write(0x3000, b"k", 1) and other.raw[:1] == b"k"


def test_failed_maps_record_nothing_and_clear_starts_a_pass():
    (a,) = buffers(8)
    mem = MappedMemory()
    mem.map(0x1000, 8, 0)  # the driver's map failed
    mem.map(0, 8, address(a))  # the traced map failed
    assert len(mem) == 0 and not mem.write(0x1000, b"a", 1)
    mem.clear()
    assert mem.misses == 0 and mem.first_miss is None
