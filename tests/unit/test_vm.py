"""The C compiler and replay loop (`retrace/replay/_vm.c`), against real C functions.

The functions called directly are ctypes callbacks: real C entry points with
real prototypes, so these tests check the register trampoline's calling
convention for every parameter type, not a model of it. Replays through real
GL drivers are checked against glretrace in test_replay.py and
test_profile.py.
"""

from __future__ import annotations

import array
import ctypes
import math
import os
import tempfile

import pytest
from tracegen import TraceWriter

from retrace.replay import _vm
from retrace.replay.compiler import _arg_type
from retrace.trace.model import NODES
from retrace.trace.reader import TraceReader

pytestmark = pytest.mark.skipif(not _vm.NATIVE_CALLS, reason="no direct calls on this ABI")

I8, U8, I16, U16, I32, U32 = (_vm.ARG_I8, _vm.ARG_U8, _vm.ARG_I16, _vm.ARG_U16,
                              _vm.ARG_I32, _vm.ARG_U32)  # fmt: skip
I64, U64, F32, F64 = _vm.ARG_I64, _vm.ARG_U64, _vm.ARG_F32, _vm.ARG_F64
PTR, PTR_OF = _vm.ARG_PTR, _vm.ARG_PTR_OF
ROW_NONE, ROW_DRAW, ROW_BEGIN, ROW_END = _vm.ROW_NONE, _vm.ROW_DRAW, _vm.ROW_BEGIN, _vm.ROW_END

CTYPES = {
    PTR: ctypes.c_void_p,
    PTR_OF + F32: ctypes.c_void_p,
    PTR_OF + U16: ctypes.c_void_p,
    I8: ctypes.c_int8,
    U8: ctypes.c_uint8,
    I16: ctypes.c_int16,
    U16: ctypes.c_uint16,
    I32: ctypes.c_int32,
    U32: ctypes.c_uint32,
    I64: ctypes.c_int64,
    U64: ctypes.c_uint64,
    F32: ctypes.c_float,
    F64: ctypes.c_double,
}


class Recorder:
    """A C function of the given parameter types that records its arguments."""

    def __init__(self, types: list[int]) -> None:
        self.calls: list[tuple] = []
        self.fn = ctypes.CFUNCTYPE(None, *(CTYPES[t] for t in types))(
            lambda *args: self.calls.append(args)
        )
        self.address = ctypes.cast(self.fn, ctypes.c_void_p).value
        self.types = bytes(types)


def new_code(file=None, **options) -> _vm.Code:
    """A code object whose data pool is `file`, else an unlinked temporary file."""
    if file is not None:
        return _vm.Code(file, str(file.name), **options)
    with tempfile.TemporaryFile() as file:
        return _vm.Code(file, "test data")


def resident_kib(file, op_arrays: bool = False) -> int:
    """KiB of `file`'s pages mapped into this process and resident (from /proc/self/smaps):
    of the data pool, or with `op_arrays` of the op arrays' regions past it."""
    inode, total, ours = os.fstat(file.fileno()).st_ino, 0, False
    with open("/proc/self/smaps") as smaps:
        for line in smaps:
            fields = line.split()
            if "-" in fields[0] and len(fields) >= 5:  # a mapping's header line
                past_pool = int(fields[2], 16) >= _vm.OP_ARRAYS_AT
                ours = fields[4] == str(inode) and past_pool == op_arrays
            elif ours and fields[0] == "Rss:":
                total += int(fields[1])
    return total


def batches_of(tmp_path, calls: list[tuple[str, tuple[bytes, ...], int]]):
    """The batches holding `calls` (name, argument values, thread), and signature ids."""
    w = TraceWriter()
    for name, values, thread in calls:
        names = tuple(f"a{i}" for i in range(len(values)))
        w.call(name, names, dict(enumerate(values)), thread=thread)
    path = tmp_path / "t.trace"
    path.write_bytes(w.snappy())
    reader = TraceReader(str(path))
    batches = list(reader.batches())
    sig_ids = {sig.name: sig.id for sig in reader.signatures.functions.values()}
    return batches, sig_ids


def batch_of(tmp_path, calls: list[tuple[str, tuple[bytes, ...], int]]):
    """One batch holding `calls`, and signature ids."""
    (batch,), sig_ids = batches_of(tmp_path, calls)
    return batch, sig_ids


def compile_all(code, batch, start=0, thread=0, in_list=False) -> int:
    return code.compile(batch.calls, batch.slots, batch.nodes, batch.pool, start, thread, in_list)


def test_every_parameter_type_reaches_the_function_as_declared(tmp_path):
    types = [I8, F32, U16, F64, I32, U64, F32, I16, U8, F64]
    f = Recorder(types)
    w = TraceWriter
    values = (
        w.int(-5),  # int8 -5
        w.float(1.5),
        w.int(70_000),  # uint16 wraps, as a C cast does
        w.double(math.pi),
        w.int(-2_000_000_000),
        w.int(2**64 - 1),
        w.int(3),  # an integer where a float is declared
        w.float(-7.9),  # a float where an integer is declared: truncated
        w.int(300),  # uint8 wraps
        w.double(-0.0),
    )
    batch, sigs = batch_of(tmp_path, [("f", values, 0)])
    code = new_code()
    proto = code.add_proto(f.address, f.types, (None,) * len(types))
    assert proto >= 0
    code.set_sig(sigs["f"], proto, 0, 1)
    assert compile_all(code, batch) == 1 and len(code) == 1 and code.is_direct(0)
    code.run(0, 1, [])
    (args,) = f.calls
    assert args[:6] == (-5, 1.5, 70_000 % 65536, math.pi, -2_000_000_000, 2**64 - 1)
    assert args[6:9] == (3.0, -7, 44)
    assert args[9] == 0.0 and math.copysign(1, args[9]) == -1


def test_arguments_past_the_registers_go_on_the_stack(tmp_path):
    # glTexSubImage3D's shape: eleven integer-class arguments, so five past the registers,
    # with floats between them
    types = [U32, I32, I16, I32, I8, F32, I32, U64, I32, F64, U32, U16, I64]
    f = Recorder(types)
    w = TraceWriter
    ints = [7, -1, -300, 4, -5, None, 6, 2**40 + 9, -8, None, 9, 65535, -(2**40)]
    values = tuple(
        w.float(2.5) if t == F32 else w.double(0.125) if t == F64 else w.int(v)
        for t, v in zip(types, ints, strict=True)
    )
    batch, sigs = batch_of(tmp_path, [("f", values, 0)])
    code = new_code()
    code.set_sig(sigs["f"], code.add_proto(f.address, f.types, (None,) * len(types)), 0, 1)
    assert compile_all(code, batch) == 1 and code.is_direct(0)
    code.run(0, 1, [])
    assert f.calls == [(7, -1, -300, 4, -5, 2.5, 6, 2**40 + 9, -8, 0.125, 9, 65535, -(2**40))]


def test_longest_prototypes_called_directly():
    code = new_code()
    address = Recorder([I32]).address
    assert code.add_proto(address, bytes([I32] * 8 + [F32] * 8), (None,) * 16) >= 0
    assert code.add_proto(address, bytes([I32] * 17), (None,) * 17) == -1
    assert code.add_proto(address, bytes([F64] * 9), (None,) * 9) == -1
    assert code.add_proto(address, bytes([F32]), ({},)) == -1  # a float is no object name
    assert code.add_proto(0, bytes([I32]), (None,)) == -1


def test_object_names_are_remapped_through_the_live_table(tmp_path):
    f = Recorder([U32, U32])
    batch, sigs = batch_of(tmp_path, [("bind", (TraceWriter.int(7), TraceWriter.int(3)), 0)])
    table: dict[int, int] = {3: 1003}
    code = new_code()
    code.set_sig(sigs["bind"], code.add_proto(f.address, f.types, (None, table)), 0, 1)
    compile_all(code, batch)
    code.run(0, 1, [])
    table[3] = 2003  # a later pass refills the same table
    code.run(0, 1, [])
    table.clear()  # a name the program never generated passes through
    code.run(0, 1, [])
    assert f.calls == [(7, 1003), (7, 2003), (7, 3)]


def test_input_pointers_pass_offsets_and_data_that_stays_put(tmp_path):
    w = TraceWriter
    calls = [
        ("f", (w.blob(b"\x01\x02\x03"),), 0),
        ("f", (w.string("name"),), 0),
        ("f", (w.opaque(64),), 0),  # an offset into a bound buffer
        ("f", (b"\x00",), 0),  # NULL
        ("floats", (w.array(w.float(0.5), w.int(2), w.double(-1.25)),), 0),
        ("shorts", (w.array(w.int(65535), w.int(7)),), 0),
    ]
    batch, sigs = batch_of(tmp_path, calls)
    f, floats, shorts = Recorder([PTR]), Recorder([PTR_OF + F32]), Recorder([PTR_OF + U16])
    code = new_code()
    for name, r in (("f", f), ("floats", floats), ("shorts", shorts)):
        code.set_sig(sigs[name], code.add_proto(r.address, r.types, (None,)), 0, 1)
    assert compile_all(code, batch) == len(calls)
    code.run(0, len(code), [])
    blob, string, offset, null = (args[0] for args in f.calls)
    assert ctypes.string_at(blob, 3) == b"\x01\x02\x03"
    assert ctypes.string_at(string) == b"name"  # NUL-terminated
    assert (offset, null) == (64, None)
    assert list((ctypes.c_float * 3).from_address(floats.calls[0][0])) == [0.5, 2.0, -1.25]
    assert list((ctypes.c_uint16 * 2).from_address(shorts.calls[0][0])) == [65535, 7]
    # the driver may keep a client pointer until a later draw: more compiled data
    # (megabytes of it) never moves what was kept
    big, _ = batches_of(tmp_path, [("f", (w.blob(bytes(3 << 20)),), 0)] * 2)
    code.set_sig(0, code.add_proto(f.address, f.types, (None,)), 0, 1)
    for batch in big:
        assert compile_all(code, batch) == len(batch)
    f.calls.clear()
    code.run(0, 1, [])
    assert f.calls[0][0] == blob and ctypes.string_at(blob, 3) == b"\x01\x02\x03"


def test_data_leaves_memory_once_run_and_is_read_again_by_the_next_pass(tmp_path):
    """The data pool is a file: a chunk's pages leave the process once the loop has run
    the last op pointing into it, and the next pass (or a kept pointer) reads the same
    bytes back. Pieces of 300 KiB span several chunks; one of 3 MiB gets its own."""
    w = TraceWriter
    pieces = [bytes([k]) * (300 << 10) for k in range(1, 13)] + [b"\x63" * (3 << 20)]
    batches, sigs = batches_of(tmp_path, [("f", (w.blob(p), w.int(len(p))), 0) for p in pieces])
    seen: list[bytes] = []
    f = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_int32)(
        lambda at, n: seen.append(ctypes.string_at(at, n))
    )
    with tempfile.TemporaryFile(dir=tmp_path) as file:
        code = new_code(file)
        address = ctypes.cast(f, ctypes.c_void_p).value
        code.set_sig(sigs["f"], code.add_proto(address, bytes([PTR, I32]), (None, None)), 0, 1)
        for batch in batches:
            assert compile_all(code, batch) == len(batch)
        kept = code.keep(b"from Python")
        code.add_py(0, 99, 0, 0, False)
        entries = [(lambda: seen.append(ctypes.string_at(kept)), ())]
        for _ in range(2):
            seen.clear()
            code.run(0, len(code), entries)
            assert seen == [*pieces, b"from Python"]
            assert resident_kib(file) == 0
        assert os.fstat(file.fileno()).st_size >= sum(map(len, pieces))


def test_what_the_driver_stores_into_its_input_reaches_no_data_added_later_nor_a_later_pass(
    tmp_path,
):
    """Mesa's noop driver stores into a client vertex array at the draw that reads it (at
    0x70 and 0x94 bytes past its start): the pool is writable, so that is no crash, and the
    stores stay in the process's copies of the pages. Data compiled after them (here into
    the page stored into, past the array's end) reads as traced, and so does the next pass."""
    w = TraceWriter
    array, later = b"A" * 64, b"B" * 64
    seen: list[bytes] = []
    kept: list[int] = []

    def pointer(at: int, n: int) -> None:  # glVertexPointer: the driver keeps `at`
        seen.append(ctypes.string_at(at, n))
        kept.append(at)

    def draw() -> None:  # glDrawArrays: the driver stores into what it kept
        ctypes.memset(kept[-1] + 0x70, 0xFF, 8)
        ctypes.memset(kept[-1] + 0x94, 1, 1)

    f = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_int32)(pointer)
    g = ctypes.CFUNCTYPE(None)(draw)
    pointer_op = (ctypes.cast(f, ctypes.c_void_p).value, bytes([PTR, I32]), (None, None))
    with tempfile.TemporaryFile(dir=tmp_path) as file:
        code = new_code(file)
        for data in (array, later):  # the second compiled after the first was drawn
            batch, sigs = batch_of(
                tmp_path, [("f", (w.blob(data), w.int(len(data))), 0), ("g", (), 0)]
            )
            code.set_sig(sigs["f"], code.add_proto(*pointer_op), 0, 1)
            code.set_sig(
                sigs["g"], code.add_proto(ctypes.cast(g, ctypes.c_void_p).value, b"", ()), 0, 2
            )
            start = len(code)
            assert compile_all(code, batch) == 2
            code.run(start, len(code), [])
        code.run(0, 2, [])
        assert seen == [array, later, array]


def pool_ranges(file) -> list[tuple[int, int]]:
    """The address ranges this process maps `file` at (from /proc/self/maps)."""
    inode, ranges = str(os.fstat(file.fileno()).st_ino), []
    with open("/proc/self/maps") as maps:
        for line in maps:
            fields = line.split()
            if fields[4] == inode:
                start, end = fields[0].split("-")
                ranges.append((int(start, 16), int(end, 16)))
    return ranges


def test_a_little_past_the_end_of_any_data_is_still_the_pool(tmp_path):
    """What the noop driver reads and stores past a small client array (up to 0x9c bytes past
    its start) lands in the pool, even past the data that ends a chunk: not in whatever the
    process maps after it. Pieces of 1023 bytes (1024 with the NUL) would fill chunks of any
    power-of-two size exactly; one of 3 MiB with its NUL would fill a chunk of its own."""
    reach = 0x9C
    with tempfile.TemporaryFile(dir=tmp_path) as file:
        code = new_code(file)
        pieces = [(code.keep(bytes(1023)), 1023) for _ in range(4096)]
        pieces.append((code.keep(bytes((3 << 20) - 1)), (3 << 20) - 1))
        ranges = pool_ranges(file)
        outside = [
            at
            for at, n in pieces
            if not any(start <= at + n + reach < end for start, end in ranges)
        ]
        assert outside == []


# KiB of the op arrays left resident after a run: of each of the six, the 64 KiB the kernel
# maps around a fault (fault-around) at the end of what ran
LEFT_RESIDENT = 6 * 64


def test_the_op_arrays_leave_memory_once_run_too(tmp_path):
    """The ops, their arguments and metadata (30 bytes an op here: 3 MB) larger than they
    may be in the heap (64 KiB here, 16 MiB by default) move to the data file: their pages
    leave the process behind the loop, and a later pass reads them back. RSS stays flat in
    the trace's length."""
    calls = 100_000
    batches, sigs = batches_of(tmp_path, [("f", (TraceWriter.int(k),), 0) for k in range(calls)])
    f = Recorder([U32])
    with tempfile.TemporaryFile(dir=tmp_path) as file:
        code = new_code(file, in_heap=64 << 10)
        code.set_sig(sigs["f"], code.add_proto(f.address, f.types, (None,)), 0, 1)
        for batch in batches:
            assert compile_all(code, batch) == len(batch)
        assert len(code) == calls
        assert os.fstat(file.fileno()).st_size > _vm.OP_ARRAYS_AT  # they are in the file
        for _ in range(2):
            f.calls.clear()
            code.run(0, len(code), [])
            assert f.calls == [(k,) for k in range(calls)]
            assert resident_kib(file, op_arrays=True) <= LEFT_RESIDENT
        assert code.column("call_nos", 0, calls).tolist() == list(range(calls))
        assert code.row_counts(0, calls) == (0, calls, 0, 0, 0, 0)  # calls rows, counted in C
        assert code.row_counts(10, 20) == (0, 10, 0, 0, 0, 0)
        assert resident_kib(file, op_arrays=True) <= LEFT_RESIDENT


def anonymous_kib() -> int:
    """KiB of this process's anonymous memory resident now (the heap's among them)."""
    with open("/proc/self/status") as status:
        return next(int(line.split()[1]) for line in status if line.startswith("RssAnon:"))


@pytest.mark.parametrize("metadata", [True, False], ids=["metadata-kept", "metadata-left"])
def test_a_program_run_once_leaves_its_ops_behind_in_the_heap_too(tmp_path, metadata):
    """`once()` (a replay of one pass): the ops and their arguments, in the heap for a trace
    this size, leave memory as they run, as the arrays in the data file do, and without
    `metadata` (a replay's, which no table reads) their per-op metadata too; running the
    ops, or reading metadata that left, again is an error, not zeros called or read."""
    calls = 200_000
    batches, sigs = batches_of(tmp_path, [("f", (TraceWriter.int(k),), 0) for k in range(calls)])
    f = ctypes.cast(ctypes.CDLL(None).abs, ctypes.c_void_p).value  # (no Python per call)
    with tempfile.TemporaryFile(dir=tmp_path) as file:
        code = new_code(file)
        code.set_sig(sigs["f"], code.add_proto(f, bytes([U32]), (None,)), 0, 1)
        for batch in batches:
            assert compile_all(code, batch) == len(batch)
        assert os.fstat(file.fileno()).st_size < _vm.OP_ARRAYS_AT  # (they are in the heap)
        code.once(metadata)
        before = anonymous_kib()
        code.run(0, calls, [])
        ops_and_arguments = calls * 16 // 1024  # (8 bytes an op, 8 its argument)
        per_op_metadata = calls * 15 // 1024  # (call number 8, name 4, row, flags)
        left = before - anonymous_kib()
        if metadata:
            assert ops_and_arguments * 3 // 4 < left < ops_and_arguments + per_op_metadata // 2
            assert code.column("call_nos", 0, calls).tolist() == list(range(calls))
            assert code.meta(0)[0] == 0
        else:
            assert left > (ops_and_arguments + per_op_metadata) * 3 // 4
            for read in (
                lambda: code.column("call_nos", 0, calls),
                lambda: code.row_counts(0, calls),
                lambda: code.meta(0),
                lambda: code.event_rows(0, calls, 2, array.array("q"), 0, ()),
            ):
                with pytest.raises(RuntimeError, match="once"):
                    read()
        with pytest.raises(RuntimeError, match="once"):
            code.run(0, calls, [])
        with pytest.raises(RuntimeError, match="once"):
            code.is_direct(0)


def test_a_data_file_that_cannot_take_the_data_is_an_error_naming_it(tmp_path):
    batch, sigs = batch_of(tmp_path, [("f", (TraceWriter.blob(b"x" * 100),), 0)])
    with open("/dev/full", "r+b") as full:
        code = new_code(full)
        f = Recorder([PTR])
        code.set_sig(sigs["f"], code.add_proto(f.address, f.types, (None,)), 0, 1)
        with pytest.raises(OSError) as error:
            compile_all(code, batch)
        assert error.value.filename == "/dev/full"


def test_pointers_python_must_pass(tmp_path):
    w = TraceWriter
    batch, sigs = batch_of(
        tmp_path,
        [
            ("f", (w.opaque(1 << 40),), 0),  # an address in the traced process
            ("floats", (w.array(w.array(w.float(1))),), 0),  # nested
            ("f", (w.array(w.int(1)),), 0),  # an array where any data may be meant
            ("floats", (w.array(w.string("x")),), 0),
        ],
    )
    f, floats = Recorder([PTR]), Recorder([PTR_OF + F32])
    code = new_code()
    code.set_sig(sigs["f"], code.add_proto(f.address, f.types, (None,)), 0, 1)
    code.set_sig(sigs["floats"], code.add_proto(floats.address, floats.types, (None,)), 0, 1)
    assert [compile_all(code, batch, start=i) for i in range(4)] == [0, 1, 2, 3]
    assert len(code) == 0


def test_arrays_of_strings_pass_as_arrays_of_pointers_to_them(tmp_path):
    """glShaderSource's strings (or blobs, or NULLs) are kept in the pool, NUL-terminated,
    and passed as an array of pointers to them; arrays of anything else, or nested, are
    Python's."""
    w = TraceWriter
    strings = (w.string("void main()"), w.blob(b"{ }"), w.null)
    calls = [
        ("f", (w.int(3), w.array(*strings)), 0),
        ("f", (w.int(0), w.array()), 0),
        ("f", (w.int(1), w.array(w.int(1))), 0),
        ("f", (w.int(1), w.array(w.array(w.string("x")))), 0),
    ]
    batch, sigs = batch_of(tmp_path, calls)
    seen: list[list[bytes | None]] = []
    fn = ctypes.CFUNCTYPE(None, ctypes.c_int32, ctypes.POINTER(ctypes.c_char_p))(
        lambda n, given: seen.append([given[i] for i in range(n)])
    )
    code = new_code()
    address = ctypes.cast(fn, ctypes.c_void_p).value
    code.set_sig(
        sigs["f"], code.add_proto(address, bytes([I32, _vm.ARG_STRINGS]), (None, None)), 0, 1
    )
    assert compile_all(code, batch) == 2
    assert [compile_all(code, batch, start=i) for i in (2, 3)] == [2, 3]
    for _ in range(2):  # (and again from the pool's file)
        seen.clear()
        code.run(0, 2, [])
        assert seen == [[b"void main()", b"{ }", None], []]


def test_lookup_functions_remap_through_replay_state(tmp_path):
    f = Recorder([I32])
    batch, sigs = batch_of(tmp_path, [("uniform", (TraceWriter.int(-1),), 0)])
    seen = []

    def location(traced: int) -> int:
        seen.append(traced)
        return traced + 100 if traced >= 0 else traced

    code = new_code()
    code.set_sig(sigs["uniform"], code.add_proto(f.address, f.types, (location,)), 0, 1)
    compile_all(code, batch)
    code.run(0, 1, [])
    assert seen == [-1] and f.calls == [(-1,)]  # signed: -1 stays -1

    def broken(traced: int) -> int:
        raise LookupError("no program")

    code2 = new_code()
    code2.set_sig(sigs["uniform"], code2.add_proto(f.address, f.types, (broken,)), 0, 1)
    compile_all(code2, batch)
    with pytest.raises(LookupError):
        code2.run(0, 1, [])


def test_compilation_stops_where_python_must_take_over(tmp_path):
    w = TraceWriter
    batch, sigs = batch_of(
        tmp_path,
        [
            ("f", (w.int(1),), 0),
            ("skipped", (w.int(2),), 0),
            ("f", (w.string("not a number"),), 0),  # 2: not a number
            ("f", (w.int(4),), 1),  # 3: another thread
            ("g", (w.int(5),), 1),  # 4: a signature not planned yet
            ("slow", (w.int(6),), 1),  # 5: compiled in Python
        ],
    )
    f = Recorder([I32])
    code = new_code()
    code.set_sig(sigs["f"], code.add_proto(f.address, f.types, (None,)), 0, 1)
    code.set_sig(sigs["skipped"], _vm.SIG_SKIP, 0, 1)
    code.set_sig(sigs["slow"], _vm.SIG_SLOW, 0, 1)
    assert compile_all(code, batch) == 2
    assert compile_all(code, batch, start=3) == 3
    assert compile_all(code, batch, start=3, thread=1) == 4
    assert compile_all(code, batch, start=5, thread=1) == 5
    code.run(0, len(code), [])
    assert f.calls == [(1,), (4,)]
    assert [code.meta(i)[0] for i in range(len(code))] == [0, 3]


def test_rows_inside_display_lists_and_begin_blocks(tmp_path):
    batch, sigs = batch_of(tmp_path, [("f", (TraceWriter.int(1),), 0)])
    f = Recorder([I32])
    code = new_code()
    code.set_sig(sigs["f"], code.add_proto(f.address, f.types, (None,)), 9, 2)
    compile_all(code, batch)
    compile_all(code, batch, in_list=True)
    code.in_begin = True
    compile_all(code, batch)
    # (call no, name id, row, checkable): no profiling row while a list compiles or a
    # glBegin block is open; no glGetError inside glBegin/glEnd
    assert [code.meta(i) for i in range(3)] == [(0, 9, 2, 1), (0, 9, 0, 1), (0, 9, 0, 0)]


def test_begin_blocks_open_and_close_as_they_compile(tmp_path):
    w = TraceWriter
    calls = [("glBegin", (w.int(4),), 0), ("f", (w.int(1),), 0), ("glEnd", (), 0)]
    batch, sigs = batch_of(tmp_path, calls)
    code = new_code()
    for name, row in (("glBegin", ROW_BEGIN), ("f", ROW_DRAW), ("glEnd", ROW_END)):
        f = Recorder([I32] if name != "glEnd" else [])
        code.set_sig(sigs[name], code.add_proto(f.address, f.types, (None,) * len(f.types)), 0, row)
    assert compile_all(code, batch) == 3 and not code.in_begin
    # the block is one draw row: its glBegin not checkable, the calls inside no rows
    rows = [code.meta(i)[2:] for i in range(3)]
    assert rows == [(ROW_BEGIN, 0), (ROW_NONE, 0), (ROW_END, 1)]
    assert compile_all(code, batch, start=0) == 3 and len(code) == 6
    code.in_begin = True  # (Python opened a block)
    compile_all(code, batch, start=1)
    assert [code.meta(i)[2:] for i in (6, 7)] == [(ROW_NONE, 0), (ROW_END, 1)]
    assert not code.in_begin
    # a display list compiles: no rows, and the block is the list's, not opened here
    compile_all(code, batch, in_list=True)
    assert [code.meta(i)[2:] for i in (8, 9, 10)] == [(ROW_NONE, 1), (ROW_NONE, 1), (ROW_NONE, 1)]
    assert not code.in_begin


def test_list_calls_go_to_python_only_while_a_display_list_compiles(tmp_path):
    batch, sigs = batch_of(tmp_path, [("f", (TraceWriter.int(1),), 0)])
    f = Recorder([I32])
    code = new_code()
    code.set_sig(sigs["f"], code.add_proto(f.address, f.types, (None,)), 0, 1, False, True)
    assert compile_all(code, batch) == 1  # direct: no list compiles
    args = (batch.calls, batch.slots, batch.nodes, batch.pool, 0, 0, True, None)
    assert code.compile(*args, True) == 0  # a list compiles: Python checks the call
    assert code.compile(*args, False) == 1  # (in_list alone decides only the row)
    assert len(code) == 2 and code.is_direct(0) and code.is_direct(1)


def test_memos_compile_calls_like_one_python_compiled_to_its_entry(tmp_path):
    w = TraceWriter
    calls = [
        ("swap", (w.int(7), w.int(1)), 0),  # 0: compiled by Python, memoised
        ("f", (w.int(2),), 0),
        ("swap", (w.int(7), w.int(1)), 0),  # 2: its memo
        ("swap", (w.int(7), w.int(2)), 0),  # 3: other values: Python
        ("swap", (w.int(7), w.string("x")), 0),  # 4: a string: no key, Python
        ("swap", (w.int(7), w.int(1)), 1),  # 5: another thread: Python
    ]
    batch, sigs = batch_of(tmp_path, calls)
    f = Recorder([I32])
    code = new_code()
    code.set_sig(sigs["swap"], _vm.SIG_SLOW, 3, 0)
    code.set_sig(sigs["f"], code.add_proto(f.address, f.types, (None,)), 0, 1)
    buffers = (batch.calls, batch.slots, batch.nodes)
    frame_ends: list[int] = []
    assert compile_all(code, batch) == 0
    frame_ends.append(len(code))
    code.add_py(0, 0, 3, 0, False)
    assert code.memo(*buffers, 0, 0, frame_ends)
    assert not code.memo(*buffers, 4, 0, frame_ends)  # (no key)
    assert compile_all(code, batch, start=1) == 3
    assert frame_ends == [0, 2] and len(code) == 3 and not code.is_direct(2)
    assert code.meta(2) == (2, 3, 0, 0)
    seen: list[object] = []
    assert code.run(0, 3, [(seen.append, ("swapped",))]) == 3
    assert seen == ["swapped", "swapped"] and f.calls == [(2,)]
    assert compile_all(code, batch, start=4) == 4
    assert compile_all(code, batch, start=5) == 5


def test_memos_of_no_entry_compile_calls_like_one_that_compiled_to_nothing(tmp_path):
    w = TraceWriter
    calls = [
        ("poll", (w.int(1), w.int(0)), 0),  # 0: Python compiled it to nothing, memoised
        ("f", (w.int(2),), 0),
        ("poll", (w.int(1), w.int(0)), 0),  # 2: its memo: no op
        ("poll", (w.int(1), w.int(1)), 0),  # 3: other values: Python
    ]
    batch, sigs = batch_of(tmp_path, calls)
    f = Recorder([I32])
    code = new_code()
    code.set_sig(sigs["poll"], _vm.SIG_SLOW, 3, _vm.ROW_CALL)
    code.set_sig(sigs["f"], code.add_proto(f.address, f.types, (None,)), 0, 1)
    assert compile_all(code, batch) == 0
    assert code.memo(batch.calls, batch.slots, batch.nodes, 0, _vm.NO_ENTRY, None)
    assert compile_all(code, batch, start=1) == 3
    assert len(code) == 1 and code.is_direct(0)  # f alone
    assert code.run(0, 1, []) == 1 and f.calls == [(2,)]


def test_memoised_gl_calls_are_the_rows_direct_calls_would_be(tmp_path):
    batch, sigs = batch_of(tmp_path, [("g", (TraceWriter.int(1),), 0)] * 3)
    code = new_code()
    code.set_sig(sigs["g"], _vm.SIG_SLOW, 4, ROW_DRAW, True)
    assert compile_all(code, batch) == 0
    code.add_py(0, 0, 4, ROW_DRAW, True, True)
    assert code.memo(batch.calls, batch.slots, batch.nodes, 0, 0, None)
    assert compile_all(code, batch, start=1) == 3
    assert compile_all(code, batch, start=2, in_list=True) == 3  # (no row while a list compiles)
    assert [code.meta(i)[2:] for i in range(4)] == [(ROW_DRAW, 1)] * 3 + [(ROW_NONE, 1)]
    assert code.column("work", 0, 4).tolist() == [1, 1, 1, 0]


def test_effects_get_each_direct_calls_first_argument_and_traced_and_real_results(tmp_path):
    w = TraceWriter()
    for program, traced in ((7, -2), (8, 5)):
        w.call("loc", ("p", "name"), {0: w.int(program), 1: w.string("u")}, ret=w.int(traced))
    w.call("loc", ("p", "name"), {0: w.int(9), 1: w.string("u")})  # no result: Python
    path = tmp_path / "t.trace"
    path.write_bytes(w.snappy())
    reader = TraceReader(str(path))
    (batch,) = reader.batches()
    sig = next(iter(reader.signatures.functions))
    seen: list[tuple] = []
    names: list[bytes] = []
    fn = ctypes.CFUNCTYPE(ctypes.c_int32, ctypes.c_uint32, ctypes.c_char_p)(
        lambda program, name: names.append(name) or -program
    )
    code = new_code()
    table = {7: 70}  # (the call is made with the driver's program, the effect gets the traced)
    address = ctypes.cast(fn, ctypes.c_void_p).value
    proto = code.add_proto(
        address, bytes([U32, PTR]), (table, None), lambda *a: seen.append(a), I32
    )
    code.set_sig(sig, proto, 0, 1)
    assert compile_all(code, batch) == 2
    code.run(0, 2, [])
    assert seen == [(7, -2, -70), (8, 5, -8)] and names == [b"u", b"u"]
    assert code.add_proto(address, bytes([U32, PTR]), (table, None), seen.append, F32) == -1


def test_name_arrays_are_remapped_in_and_recorded_out(tmp_path):
    w = TraceWriter
    names = w.array(w.int(5), w.int(6))
    calls = [
        ("gen", (w.int(2), names), 0),
        ("gen", (w.int(3), names), 0),  # more than the trace recorded: Python
        ("delete", (w.int(2), w.array(w.int(5), w.int(9))), 0),
        ("delete", (w.int(1), w.array(w.float(5.0))), 0),  # not names: Python
    ]
    batch, sigs = batch_of(tmp_path, calls)
    seen: list[list[int]] = []
    gen = ctypes.CFUNCTYPE(None, ctypes.c_int32, ctypes.POINTER(ctypes.c_uint32))(
        lambda n, out: [out.__setitem__(i, 50 + i) for i in range(n)] and None
    )
    delete = ctypes.CFUNCTYPE(None, ctypes.c_int32, ctypes.POINTER(ctypes.c_uint32))(
        lambda n, names: seen.append([names[i] for i in range(n)])
    )
    table: dict[int, int] = {}
    code = new_code()
    for name, fn, kind in (("gen", gen, _vm.ARG_NAMES_OUT), ("delete", delete, _vm.ARG_NAMES_IN)):
        address = ctypes.cast(fn, ctypes.c_void_p).value
        code.set_sig(sigs[name], code.add_proto(address, bytes([I32, kind]), (None, table)), 0, 1)
    assert compile_all(code, batch) == 1
    assert compile_all(code, batch, start=2) == 3
    code.run(0, 2, [])
    # the driver's names recorded under the traced ones; a traced name the table lacks passes
    assert table == {5: 50, 6: 51} and seen == [[50, 9]]
    # a table may be a function giving the dict (a context's); the output's count comes first
    address = ctypes.cast(gen, ctypes.c_void_p).value
    assert code.add_proto(address, bytes([I32, _vm.ARG_NAMES_OUT]), (None, lambda: table)) >= 0
    assert code.add_proto(address, bytes([_vm.ARG_NAMES_OUT, I32]), (table, None)) == -1
    assert code.add_proto(address, bytes([I32, _vm.ARG_NAMES_IN]), (None, None)) == -1


def test_name_arrays_longer_than_an_output_may_be_go_to_python(tmp_path):
    """A damaged trace's glGenBuffers or glDeleteBuffers of more than MOST_OUTPUT_VALUES
    names is Python's to decide (which refuses outputs that long); at the limit, direct."""
    w = TraceWriter
    batch, sigs = batch_of(tmp_path, [("f", (w.int(1), w.array(w.int(5))), 0)])
    # the call's nodes (count, array, name) with the array made longer, in place
    most = _vm.MOST_OUTPUT_VALUES
    head, name = bytes(batch.nodes[: 2 * NODES.size]), bytes(batch.nodes[2 * NODES.size :])
    nodes = bytearray(head)
    for _ in range((most + 1) // 4096):  # (in pieces: the whole is 256 MiB)
        nodes += name * 4096
    nodes += name * ((most + 1) % 4096)
    fields = [f for f, code in NODES.fields if not code.endswith("x")]  # (not the padding)
    fn = ctypes.CFUNCTYPE(None, ctypes.c_int32, ctypes.POINTER(ctypes.c_uint32))(lambda n, a: 0)
    address = ctypes.cast(fn, ctypes.c_void_p).value
    for count, compiled in ((most + 1, 0), (most, 1)):
        for k, values in ((0, {"v": count}), (1, {"v": count, "aux": count})):
            node = dict(zip(fields, NODES.record.unpack_from(nodes, k * NODES.size), strict=True))
            NODES.record.pack_into(nodes, k * NODES.size, *{**node, **values}.values())
        for kind in (_vm.ARG_NAMES_OUT, _vm.ARG_NAMES_IN):
            code = new_code()
            code.set_sig(sigs["f"], code.add_proto(address, bytes([I32, kind]), (None, {})), 0, 1)
            args = (batch.calls, batch.slots, nodes, batch.pool, 0, 0, False)
            assert code.compile(*args) == compiled


def test_long_name_arrays_after_arrays_of_numbers(tmp_path):
    w = TraceWriter
    # more names than the loop holds on the stack, and more bytes than the array of numbers
    # before grew the compiler's scratch to
    many = list(range(1, 1101))
    calls = [
        ("f", (w.array(w.float(1.0)),), 0),
        ("delete", (w.int(len(many)), w.array(*map(w.int, many))), 0),
    ]
    batch, sigs = batch_of(tmp_path, calls)
    f = Recorder([PTR_OF + F32])
    seen: list[list[int]] = []
    delete = ctypes.CFUNCTYPE(None, ctypes.c_int32, ctypes.POINTER(ctypes.c_uint32))(
        lambda n, names: seen.append([names[i] for i in range(n)])
    )
    code = new_code()
    code.set_sig(sigs["f"], code.add_proto(f.address, f.types, (None,)), 0, 1)
    address = ctypes.cast(delete, ctypes.c_void_p).value
    proto = code.add_proto(address, bytes([I32, _vm.ARG_NAMES_IN]), (None, {1100: 7}))
    code.set_sig(sigs["delete"], proto, 0, 1)
    assert compile_all(code, batch) == 2
    code.run(0, 2, [])
    assert seen == [many[:-1] + [7]]


def test_uniform_locations_are_mapped_through_the_table_set_and_the_fallback(tmp_path):
    w = TraceWriter
    values = [w.int(3), w.int(5), w.int(-1), w.int(9)]
    batch, sigs = batch_of(tmp_path, [("u", (v,), 0) for v in values])
    f = Recorder([I32])
    asked: list[int] = []
    locations = _vm.Locations(lambda traced: asked.append(traced) or traced + 100)
    code = new_code()
    code.set_sig(sigs["u"], code.add_proto(f.address, f.types, (locations,)), 0, 1)
    assert compile_all(code, batch) == 4
    code.run(0, 4, [])  # no table: every location as traced
    table = {3: 30, 5: -1}
    locations.set(table)
    code.run(0, 4, [])  # 9 is not in it: the fallback's
    table[9] = 90  # (the table itself, as it fills)
    code.run(0, 4, [])
    locations.set(None)
    code.run(0, 1, [])
    no_table, first = [(3,), (5,), (-1,), (9,)], [(30,), (-1,), (-1,), (109,)]
    filled = [(30,), (-1,), (-1,), (90,)]
    assert f.calls == no_table + first + filled + [(3,)]
    assert asked == [9]
    locations.set(table)
    assert (locations(5), locations(-7), locations(11)) == (-1, -7, 111)


def test_a_program_in_use_records_it_in_c_and_in_python_where_it_cannot(tmp_path):
    """glUseProgram's remapping: the driver's name, the traced program made the current
    context's and its uniform table the one direct glUniform* calls take; with no current
    context and for program 0, `use` is called instead. Logged, those it records and
    those Python says changed (`changed`)."""
    w = TraceWriter
    batch, sigs = batch_of(tmp_path, [("use", (w.int(p),), 0) for p in (5, 7, 0, 9)])
    f = Recorder([U32])
    used: list[int] = []
    locations = _vm.Locations(lambda traced: -2)
    tables = {5: {1: 10}, 9: {1: 90}}
    programs = _vm.ProgramInUse({5: 50, 0: 0, 9: 0}, locations, tables, used.append)
    code = new_code()
    code.set_sig(sigs["use"], code.add_proto(f.address, f.types, (programs,)), 0, 1)
    assert compile_all(code, batch) == 4

    class Context:
        program = 3

    code.run(0, 4, [])  # no current context: Python's, every one
    assert (used, f.calls, Context.program) == ([5, 7, 0, 9], [(50,), (7,), (0,), (0,)], 3)
    used.clear()
    context = programs.current = Context()
    seen = []
    for i in range(4):
        code.run(i, i + 1, [])
        seen.append((context.program, locations(1)))
    # 7 has no table: locations pass unchanged; 0 is Python's (its `use` records nothing here)
    assert seen == [(5, 10), (7, 1), (7, 1), (9, 90)]
    assert used == [0] and f.calls[4:] == [(50,), (7,), (0,), (0,)]
    assert programs.current is context and programs(5) == 50 and context.program == 5
    changes: list[tuple[int, int]] = []
    programs.log(code, changes)  # (op running, program) of those it records
    code.run(0, 4, [])
    programs.changed(4)  # (at the op that ran last)
    programs.log(None, None)
    code.run(0, 1, [])
    programs.changed(6)
    assert changes == [(0, 5), (1, 7), (3, 9), (3, 4)]
    with pytest.raises(TypeError):
        programs.log(code, None)
    programs.current = None
    assert programs(9) == 0 and used == [0, 0, 9] and context.program == 5


def test_python_entries_brackets_and_errors():
    code = new_code()
    seen: list[object] = []
    entries = [(seen.append, ("a",)), (seen.append, ("b",)), (seen.append, ("c",))]
    code.add_py(0, 10, 0, 1, True)
    code.add_py(1, 11, 0, 0, False)
    code.add_py(2, 12, 0, 4, True)
    code.bracket(
        1, lambda i, m: seen.append(("before", i, m)), lambda i, m: seen.append(("after", i, m))
    )
    assert code.run(0, 3, entries) == 3
    assert seen == [
        ("before", 0, 1),
        "a",
        ("after", 0, 1),
        "b",
        ("before", 2, 4),
        "c",
        ("after", 2, 4),
    ]
    seen.clear()
    code.bracket(2, None, lambda i, m: seen.append(i))  # the checkable ops
    code.run(0, 3, entries)
    assert seen == ["a", 0, "b", "c", 2]

    def fail():
        raise KeyError("stop here")

    code.bracket(0, None, None)
    code.add_py(3, 13, 0, 0, False)
    with pytest.raises(KeyError, match="stop here"):
        code.run(0, 4, [*entries, (fail, ())])
    assert code.position == 3
    with pytest.raises(IndexError):
        code.run(0, 5, entries)


def test_registry_types_map_to_the_declared_widths():
    assert _arg_type(ctypes.c_uint) == U32 and _arg_type(ctypes.c_ubyte) == U8
    assert _arg_type(ctypes.c_short) == I16 and _arg_type(ctypes.c_ssize_t) == I64
    assert _arg_type(ctypes.c_float) == F32 and _arg_type(ctypes.c_double) == F64
    assert _arg_type(ctypes.c_void_p) is None and _arg_type(ctypes.c_char) is None


def int64s(data: bytes) -> list[int]:
    return memoryview(data).cast("q").tolist()


def test_event_rows_give_each_event_its_call_frame_and_state_in_use():
    code = new_code()
    # ops 0..5: (call no, name id, row); frames end at ops 1 and 4
    ops = [(10, 1, _vm.ROW_CALL), (11, 2, _vm.ROW_NONE), (12, 3, _vm.ROW_DRAW),
           (13, 1, _vm.ROW_CALL), (14, 2, _vm.ROW_BEGIN), (15, 4, _vm.ROW_DRAW)]  # fmt: skip
    for i, (no, name, row) in enumerate(ops):
        code.add_py(i, no, name, row, False)
    frame_ends = array.array("q", [1, 4])
    programs = array.array("q", [2, 7, 4, 9])  # (op, program): 7 from op 2 on (after op 2)
    calls = code.event_rows(0, 6, 1 << _vm.ROW_CALL | 1 << _vm.ROW_DRAW, frame_ends, 5, (programs,))
    assert [int64s(c) for c in calls] == [
        [10, 12, 13, 15],  # call numbers
        [1, 3, 1, 4],  # name ids
        [5, 6, 6, 7],  # 5 + the frames ended before the op
        [0, 0, 7, 9],  # the program of the last change in an op before (none before op 2)
    ]
    draws = code.event_rows(2, 6, 1 << _vm.ROW_DRAW | 1 << _vm.ROW_BEGIN, frame_ends, 0, ())
    assert [int64s(c) for c in draws] == [[12, 14, 15], [3, 2, 4], [1, 1, 2]]
    with pytest.raises(IndexError):
        code.event_rows(0, 7, 2, frame_ends, 0, ())


def test_event_values_are_differences_of_fields_with_missing_where_unmeasured():
    width = len(_vm.EVENT_FIELDS)
    records = array.array("q", range(width)) + array.array("q", [_vm.MISSING] + [5] * (width - 1))
    assert int64s(_vm.event_values(records, 3, 1, -1)) == [2, 0]
    assert int64s(_vm.event_values(records, 0, -1, -1)) == [0, -1]
    assert int64s(_vm.event_values(records, 1, 0, -1)) == [1, -1]
    doubles = memoryview(_vm.event_values(records, 1, 0, math.nan)).cast("d").tolist()
    assert doubles[0] == 1.0 and math.isnan(doubles[1])
    with pytest.raises(ValueError):
        _vm.event_values(records, width, -1, 0)
