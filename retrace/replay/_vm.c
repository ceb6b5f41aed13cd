/*
 * _vm: the compiled form of a trace and the loop that replays it.
 *
 * A trace compiles to one op per replayed call.  Most GL calls take nothing
 * but numbers (glEnable, glUniform4f, glDrawArrays...): the compiler writes
 * their arguments, already converted to the parameter types, into a flat
 * argument pool, and the loop calls the driver's function directly.  Every
 * other call (window-system calls, calls whose object names are remapped at
 * replay time, arrays, blobs) was compiled in Python to an entry
 * `(function, args)`, and its op only says which entry to call.
 *
 * Why not ctypes or libffi for the direct calls: a ctypes call costs about
 * 0.2 us of argument conversion, which on call-bound traces is more than the
 * driver's own work, and one Python tuple per call made the compiled trace
 * the largest thing in memory.  libffi's headers are not on every machine
 * that can build this module.  Instead, a function of at most eight
 * floating-point arguments is called through a fixed prototype of six
 * integers, eight doubles and (for longer calls) ten more integers.  On the
 * x86-64 System V and AArch64 calling conventions integer and floating-point
 * arguments are assigned independently, so the k-th integer argument of the
 * fixed prototype lands where the real prototype expects its k-th integer
 * argument: in a register, then in an 8-byte stack slot (Apple's AArch64
 * packs stack arguments, so there only the registers are used).  A float is
 * read from the low 32 bits of its register, so a float's bits are passed in
 * the low half of a double.  Elsewhere, or for longer prototypes, add_proto()
 * refuses and those calls stay Python entries.
 *
 * A direct call may also name objects (glBindTexture, glCallList): such an
 * argument is looked up at replay time in the replay's name table for its
 * class, a dict that every pass refills in place, and passed unchanged when
 * the table lacks it (a name the program invented without glGen*).  Where
 * the table depends on replay state (names per context, uniform locations per
 * program) the lookup is a Python function of the traced value instead.
 *
 * Input pointers are direct too when the trace holds what they point to as
 * data: a blob, a string, an array of numbers, which the compiler converts
 * to the element type once, or an array of strings (glShaderSource's, as an
 * array of pointers to them), kept in the data pool; or an offset into a
 * bound buffer object (an opaque value below 2^40; above, it is an address in
 * the traced process and Python refuses the call).
 *
 * The data pool is a file, not the heap (see "the data pool" below): the
 * loop's memory stays flat however long the trace, while every pass after the
 * first still runs the ops compiled once.
 *
 * Per op the program also keeps the trace call number, the function name id,
 * the profiling row kind and whether glGetError may follow it, in flat arrays
 * the profiler reads in bulk.
 *
 * The loop publishes the call it is running (publish()): before each op it
 * stores the op's call number in a word the caller may share with another
 * process (a MAP_SHARED mapping made before fork), so that a supervisor can
 * say which call a driver crash happened in.  One store per op, no syscall.
 */

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include "../trace/records.h"

#if (defined(__x86_64__) && !defined(_WIN32)) || defined(__aarch64__)
#define NATIVE_CALLS 1
#else
#define NATIVE_CALLS 0
#endif

#define INT_REGS 6 /* in registers on both conventions (AArch64 has two more) */
#define FLOAT_REGS 8
#if defined(__APPLE__) && defined(__aarch64__)
#define MORE_INTS 2 /* x6 and x7 */
#else
#define MORE_INTS 10 /* x6, x7 on AArch64, then 8-byte stack slots in order */
#endif
#define LONG_INTS 16 /* the integers LongTrampoline takes */
#define MAX_ARGS 16
#define PY_OP UINT32_MAX
/* Code.set_sig() kinds besides a proto id */
#define SIG_UNKNOWN (-3) /* not planned yet: Python plans it */
#define SIG_SKIP (-2)    /* compiles to nothing */
#define SIG_SLOW (-1)    /* compiled in Python */
#define CHECK_SIGNALS_EVERY 65536

/* What the loop publishes (publish()): [0] the call number of the op running or
   last run, [1] 1 while a loop runs.  A private pair until publish() is called. */
enum { PROGRESS_CALL, PROGRESS_RUNNING, PROGRESS_WORDS };
static int64_t own_progress[PROGRESS_WORDS];
static volatile int64_t *progress = own_progress;
static Py_buffer progress_view; /* keeps the published buffer alive */

/* Parameter types of direct calls, as add_proto() receives them (exported as ARG_*):
   numbers, an input pointer to anything (A_PTR), or to numbers of one type (A_PTR_OF + that
   type), or to object names (A_NAMES_IN, A_NAMES_OUT: see "name arrays"), or to strings
   (A_STRINGS: glShaderSource's, an array of pointers to them). */
enum { A_I8, A_U8, A_I16, A_U16, A_I32, A_U32, A_I64, A_U64, A_F32, A_F64, A_NUMBERS };
#define A_PTR 10
#define A_PTR_OF 16
#define A_NAMES_IN (A_PTR_OF + A_NUMBERS)
#define A_NAMES_OUT (A_NAMES_IN + 1)
#define A_STRINGS (A_NAMES_OUT + 1)
#define A_COUNT (A_STRINGS + 1)
#define IS_NAMES(t) ((t) == A_NAMES_IN || (t) == A_NAMES_OUT)
#define IS_FLOAT(t) ((t) == A_F32 || (t) == A_F64)
#define IS_POINTER(t) ((t) == A_PTR || (t) >= A_PTR_OF)
#define DATA_CHUNK (1u << 20)
#define DATA_TAIL 4096u /* bytes of a chunk left empty after its data: see "the data pool" */
#define MAX_OFFSET (1ull << 40) /* buffer offsets are below; addresses above */
/* the most values an output may have (exported as MOST_OUTPUT_VALUES: Python refuses more),
   and names a name array: compile() hands longer ones to Python (a hand-made glGenBuffers of
   134 million names keeps a driver busy for a minute) */
#define MOST_VALUES (1u << 24)
static const uint8_t SIZE_OF[A_NUMBERS] = {1, 1, 2, 2, 4, 4, 8, 8, 4, 8};

/* Profiling rows (exported as ROW_*; retrace.replay.program.Row), and which per-op flag
   selects the ops bracket() calls back around (exported as MARK_*). */
enum { ROW_NONE = 0, ROW_CALL, ROW_DRAW, ROW_BEGIN, ROW_END, ROW_LIST_END };
enum { MARK_NONE, MARK_ROWS, MARK_CHECKABLE };

typedef struct {
    void *fn;
    uint8_t nargs;
    uint8_t type[MAX_ARGS];
    uint16_t lookups;           /* bit k: argument k is an object name to remap */
    uint16_t names;             /* bit k: argument k is an array of them ("name arrays") */
    PyObject *table[MAX_ARGS];  /* per remapped argument: traced name -> driver name (dict) */
    PyObject *effect;           /* NULL, or what the replay records of the result ("effects") */
    uint8_t result;             /* with an effect: the result's type (A_*) */
} Proto;

typedef struct {
    int32_t proto; /* a proto id or one of SIG_* */
    uint32_t name_id;
    uint8_t row;
    uint8_t work;  /* its calls make the GPU work (retrace.gl.work) */
    uint8_t lists; /* Python compiles its calls while a display list compiles (glCallList) */
    uint8_t memos; /* calls of it Python compiled into entries that calls like them reuse */
} Sig;

/* A Python entry that calls of one signature with the same values compile to (memo()), or
   NO_ENTRY where they compile to nothing: the call's key (memo_key()) is `len` words at
   `key` of the code's memo keys. */
typedef struct {
    uint32_t sig, entry;
    uint8_t frame_end; /* the op ends a frame: its index goes to the code's frame_ends */
    size_t key, len;
} Memo;
#define MEMOS_PER_SIG 16 /* (window-system calls: one per drawable, typically) */
#define NO_ENTRY UINT32_MAX /* a Memo's entry where its calls compile to no op */

typedef struct {
    uint32_t proto; /* a proto id, or PY_OP */
    uint32_t arg;   /* into the argument pool, or the Python entry's index */
} Op;

/* (the integer result register: read only where a proto has an effect, and narrowed to the
   result's type, since a callee returning less leaves the rest undefined) */
typedef uint64_t (*Trampoline)(uint64_t, uint64_t, uint64_t, uint64_t, uint64_t, uint64_t,
                               double, double, double, double, double, double, double, double);
typedef uint64_t (*LongTrampoline)(uint64_t, uint64_t, uint64_t, uint64_t, uint64_t, uint64_t,
                                   double, double, double, double, double, double, double,
                                   double, uint64_t, uint64_t, uint64_t, uint64_t, uint64_t,
                                   uint64_t, uint64_t, uint64_t, uint64_t, uint64_t);

typedef struct {
    void *data;
    size_t len, cap; /* in items */
} Vec;

static int vec_grow(Vec *v, size_t item, size_t extra) {
    if (v->len + extra <= v->cap)
        return 0;
    size_t cap = v->cap ? v->cap : 4096;
    while (cap < v->len + extra)
        cap *= 2;
    void *d = realloc(v->data, cap * item);
    if (!d) {
        PyErr_NoMemory();
        return -1;
    }
    v->data = d;
    v->cap = cap;
    return 0;
}

/* --- events: what the loop measures around calls, draw calls and frames --------------- */

/* Kinds of event (events() takes what to measure per kind in this order) and what to
   measure of each (bits, exported as MEASURE_*): MEASURE_CLOCK marks a kind as measured at
   all, and the clock is always read. */
enum { EV_CALL, EV_DRAW, EV_FRAME, EV_KINDS };
enum { M_CLOCK = 1, M_GPU_TIMES = 2, M_PIXELS = 4, M_MEMORY = 8, M_DISJOINT = 16, M_BUSY = 32 };
#define GL_TIMESTAMP 0x8E28
#define GL_SAMPLES_PASSED 0x8914
#define GL_QUERY_RESULT 0x8866
#define GL_GPU_DISJOINT_EXT 0x8FBB
#define QUERY_BATCH 512 /* query objects made at a time */
#define READ_EVERY 1024 /* calls and draws ended since the last take when on_full is called */
#define RING_HEAD 64    /* bytes before a ring's records: its counts (see "the ring") */
#define MISSING INT64_MIN

typedef void (*GenFn)(int32_t, uint32_t *);
typedef void (*DeleteFn)(int32_t, const uint32_t *);
typedef void (*TargetQueryFn)(uint32_t, uint32_t);
typedef void (*TargetFn)(uint32_t);
typedef void (*ResultFn)(uint32_t, uint32_t, uint64_t *);
typedef void (*IntegerFn)(uint32_t, int32_t *);
typedef void (*Integer64Fn)(uint32_t, int64_t *);

/* The GL functions events use, named on OpenGL and on OpenGL ES: exported in this order as
   QUERY_FUNCTIONS, whose addresses in the current context enter_context() takes. */
#define QUERY_FUNCTIONS(X)                                                                    \
    X(gen, GenFn, "glGenQueries", "glGenQueriesEXT")                                          \
    X(del, DeleteFn, "glDeleteQueries", "glDeleteQueriesEXT")                                 \
    X(counter, TargetQueryFn, "glQueryCounter", "glQueryCounterEXT")                          \
    X(begin, TargetQueryFn, "glBeginQuery", "glBeginQueryEXT")                                \
    X(end, TargetFn, "glEndQuery", "glEndQueryEXT")                                           \
    X(result, ResultFn, "glGetQueryObjectui64v", "glGetQueryObjectui64vEXT")                  \
    X(integer, IntegerFn, "glGetIntegerv", "glGetIntegerv")                                   \
    X(integer64, Integer64Fn, "glGetInteger64v", "glGetInteger64vEXT")

#define ONE(name, type, gl_name, gles_name) +1
enum { QUERY_FUNCTION_COUNT = 0 QUERY_FUNCTIONS(ONE) };
#undef ONE

typedef struct {
#define MEMBER(name, type, gl_name, gles_name) type name;
    QUERY_FUNCTIONS(MEMBER)
#undef MEMBER
} GlQueries;

/* One event as take_events() reports it (exported as EVENT_FIELDS and EVENT_SIZE, from
   which Python builds its record type): ns since the pass began on the CPU clock
   (CLOCK_MONOTONIC) and on the GPU's (GL timestamps), samples passed, the GPU-disjoint
   flag, virtual and resident memory in bytes, the GPU time of the GPU work in the event
   (busy: "brackets" below) and the rest of its GPU span (idle); MISSING where nothing was
   measured. */
#define EVENT_FIELDS(X)                                                                       \
    X(cpu_start) X(cpu_end) X(gpu_start) X(gpu_end) X(pixels) X(disjoint) X(vsize_start)      \
        X(vsize_end) X(rss_start) X(rss_end) X(busy) X(idle)

typedef struct {
#define FIELD(name) int64_t name;
    EVENT_FIELDS(FIELD)
#undef FIELD
} EventRecord;

typedef struct {
    EventRecord r;                     /* gpu_start and pixels: what is read already */
    uint32_t start_q, end_q, pixels_q; /* query objects not read yet, 0 for none */
    int64_t work_first, work_last;     /* the brackets in it: numbers [first, last) */
    uint8_t start_shared; /* a frame whose start is the end of the frame before (frame()) */
} Event;

/* Brackets: with GPU Busy measured (M_BUSY at any kind), every op that makes the GPU work
   (the `work` flag, from retrace.gl.work; a glBegin..glEnd block is one) runs between two
   GL_TIMESTAMP queries of its own, issued right before and after it, so that its GPU time
   leaves out the time the GPU waited for the replayer to send it.  Brackets are numbered
   in the pass; an event's busy time is the sum over the brackets that began and ended in
   it, which is a difference of running totals (`Total`): each bracket is read once, late
   as events are, whatever number of events hold it. */
typedef struct {
    uint32_t start_q, end_q; /* 0 for none: the bracket has no value */
} Bracket;

typedef struct {
    int64_t ns;      /* GPU time of the brackets before this one */
    int64_t missing; /* of those, the brackets with no value */
} Total;

typedef struct {
    uint8_t what[EV_KINDS];      /* M_* per kind of event; 0: not measured */
    uint8_t per_op;              /* calls or draws are measured: the loop reads op rows */
    uint8_t open[EV_KINDS];      /* an event of this kind has begun and not ended */
    uint8_t context;             /* a context is current: `gl` holds its functions */
    GlQueries gl;                /* NULL where the context has no such function */
    int64_t cpu_base, gpu_base;  /* when the pass began, on each clock (gpu: MISSING: not yet) */
    int statm;                   /* /proc/self/statm, -1 when memory is not measured */
    int64_t page;                /* bytes per page of statm's counts */
    Event current[EV_KINDS];     /* the open event of each kind */
    Vec done[EV_KINDS];          /* Event: ended, not taken */
    size_t ready[EV_KINDS];      /* of those, ended before the last take */
    size_t unread;               /* calls and draws ended since the last take */
    Vec timestamps, samples, every; /* uint32: free query objects, and all made */
    PyObject *on_full;           /* called when READ_EVERY calls and draws wait */
    uint8_t busy;                /* some kind measures M_BUSY: work ops are bracketed */
    uint8_t open_frame_ended;    /* (frame(): the frame before ended here, just now) */
    Bracket bracket;             /* the bracket of the op running now */
    uint8_t bracket_open;        /* begun and not ended */
    Vec brackets;                /* Bracket: ended, not read, in order */
    size_t brackets_ready;       /* of those, ended before the last take */
    int64_t brackets_begun;      /* in the pass: the next bracket's number */
    Vec totals;                  /* Total before brackets totals_from.., up to those read */
    int64_t totals_from;
    Py_buffer ring;              /* with ring.obj: where the loop takes events itself */
    size_t ring_cap;             /* records of each kind it holds */
} Events;

/* --- the data pool: what input pointers point to ------------------------------------------
 *
 * Blobs (texture and buffer uploads), strings and arrays are most of a trace's bytes, and
 * a multi-pass profile runs them again, so the compiled trace must keep them; kept in the
 * heap, they made the replayer's RSS grow with the trace (a 256 KiB texture upload per
 * frame: a peak of 136 MiB at 100 frames, 212 at 400; now 113 at both).  They are kept in a file instead: an unlinked temporary
 * file (`Code(file, where)`), appended to with pwrite() and mapped in chunks that never
 * move (the driver may keep a pointer it was given, glVertexPointer on client memory, and
 * read it at a later draw).  A chunk's pages become resident when the driver reads them;
 * once the loop has run the last op that points into a chunk, run() drops them from the
 * process (madvise MADV_DONTNEED).  The page cache keeps them, so a later pass, or the
 * driver reading a kept pointer, faults them back in from memory; on a disk the kernel may
 * write them back and reclaim them under pressure (on a tmpfs the page cache is memory,
 * swappable but not counted in this RSS).  Resident data is then at most about a chunk and
 * the staging buffer, as glretrace holds one call at a time.
 *
 * The chunks are mapped private and writable, because some drivers write where GL says they
 * only read: Mesa 22's noop driver (GALLIUM_NOOP=1) takes a client vertex array for a buffer
 * object at a draw and stores into it, 0x70 and 0x94 bytes past its start (its threaded
 * context's first-user pointer and shared flag).  glretrace, whose arrays are heap memory,
 * survives that; a read-only mapping made it a SIGSEGV in the draw.  What a driver stores
 * lands in a private copy of the page, never in the file: dropping the page (behind the
 * loop, and wherever pwrite() adds data, `data_store`) reads the trace's bytes back, so
 * what a driver stores reaches neither the data added after it nor the next pass.  The last
 * DATA_TAIL bytes of a chunk hold no data, so that such reads and stores a little past an
 * input's end land in the pool, as they land in glretrace's heap, whatever is mapped after
 * the chunk (nothing: a SIGSEGV; or other memory of the process, overwritten).
 *
 * Why this rather than re-reading the trace in every pass, as glretrace does: parsing and
 * compiling again would cost a multi-pass profile that time once per pass.  Why pwrite()
 * rather than stores through a writable mapping: each first store to a page of a shared
 * file mapping faults, and a full disk would be a SIGBUS there; measured on ext4, 400 MB of
 * 256 KiB pieces took 0.43 s through the mapping, 0.12 s with pwrite, 0.28 s into fresh heap
 * memory.  Space is reserved with posix_fallocate, so a full disk is an OSError when a
 * chunk is made.  Small data is staged in the heap and written a chunk at a time (and
 * before every run), so that a glUniform4fv costs no system call.
 */
typedef struct {
    const char *map; /* the chunk's mapping of the data file */
    size_t size;     /* bytes mapped */
    size_t last_op;  /* the last op whose data is in it */
} Chunk;

typedef struct {
    int fd;                /* the data file (the pool's own descriptor) */
    PyObject *where;       /* what to call it in messages */
    Vec chunks;            /* Chunk, in file order */
    off_t end;             /* the file's size: the last chunk ends here */
    size_t used, written;  /* bytes of the last chunk given out, and already in the file */
    char *stage;           /* DATA_CHUNK bytes: the last chunk's bytes [written, used) */
    Vec scratch;           /* an array of numbers, converted before it is put */
    size_t in_heap;        /* bytes of an op array kept in the heap (COL_HEAP) */
} Data;

/* --- the op arrays ------------------------------------------------------------------------
 *
 * The ops, their arguments and the per-op metadata grow by about 30 bytes per op: 3 GB for a
 * trace of 10^8 calls.  In the heap they made peak RSS grow with the trace's length, so an
 * array larger than COL_HEAP moves to the data pool's file, into a region of its own far past
 * the pool's bytes (`COL_REGION` apart: the file is sparse), mapped shared and written through
 * the mapping (a few bytes per op: pwrite would cost a system call each), and run() drops its
 * pages behind it as it drops the pool's (every CHECK_SIGNALS_EVERY ops); a later pass faults
 * them back from the page cache.  Smaller arrays, those of every trace of up to a few million
 * calls, stay in the heap: a first write to a page of a shared file mapping costs a fault in
 * the file system, 30 to 100 ns per op measured on ext4.  Space is reserved with
 * posix_fallocate before a mapping grows, so a full disk is an OSError, not a SIGBUS.  Where
 * the file cannot hold them (no mremap, a file system without sparse files that large) they
 * stay in the heap.
 */
#define COL_REGION ((off_t)1 << 40) /* bytes of the file per array: 2^37 ops of 8 bytes */
#define COL_FIRST ((size_t)1 << 16)
#define COL_HEAP ((size_t)16 << 20)  /* larger arrays move to the file (Code's in_heap) */
#define COL_STEP ((size_t)64 << 20)  /* growth past this is linear: at most this much unused */
enum { COL_OPS, COL_ARGS, COL_CALL_NOS, COL_NAME_IDS, COL_ROWS, COL_CHECKABLE, COL_WORK, COLS };

typedef struct {
    void *data;
    size_t len, cap; /* in items */
    off_t at;        /* its region of the data file (from COL_REGION on); -1: heap only */
    size_t mapped;   /* bytes mapped there; 0: in the heap */
} Col;

typedef struct {
    PyObject_HEAD
    Vec protos, sigs;
    Vec memos, memo_keys, key;                /* Memo; their keys (uint64); scratch key */
    PyObject *frame_ends;                     /* the list of frame-ending ops memos append to */
    Col ops, args;
    Data data;                                /* what input pointers point to */
    Col call_nos, name_ids, rows, checkable; /* per op */
    Col work;                                 /* per op: 1 where it makes the GPU work */
    Py_ssize_t position;                      /* the op running now, for callbacks */
    int marks;                                /* 0: no callbacks; 1: rows; 2: checkable */
    PyObject *before, *after;                 /* callbacks around marked ops, or NULL */
    Events ev;                                /* what the loop measures around events */
    int share_gil;                            /* run() lets the GIL go around direct calls */
    int in_begin;                             /* compiling: a glBegin block is open */
    int once;         /* run once (`once()`): ops and arguments that have run leave the heap too */
    int once_meta;    /* ... and their metadata (`once(False)`: no table reads it after) */
    size_t forgotten; /* with once: the ops before this one may have left memory */
} Code;

#define AT(vec, type) ((type *)(vec).data)

static int data_error(const Data *d);

static int data_write(const Data *d, const char *src, size_t len, off_t offset);

/* An op array of `bytes` in its region of the file, moved there from the heap or grown. */
static int col_map(Data *d, Col *v, size_t item, size_t bytes) {
#ifdef MREMAP_MAYMOVE
    int failed = posix_fallocate(d->fd, v->at, (off_t)bytes);
    if (failed == ENOSPC || (failed && v->mapped)) {
        errno = failed;
        return data_error(d);
    }
    if (failed)
        return 1; /* no room for the regions on this file system: the heap it is */
    void *m;
    if (v->mapped) {
        m = mremap(v->data, v->mapped, bytes, MREMAP_MAYMOVE);
    } else {
        if (data_write(d, v->data, v->len * item, v->at))
            return -1;
        m = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, d->fd, v->at);
        if (m != MAP_FAILED)
            free(v->data);
    }
    if (m == MAP_FAILED)
        return data_error(d);
    v->data = m;
    v->mapped = bytes;
    v->cap = bytes / item;
    return 0;
#else
    (void)d, (void)v, (void)item, (void)bytes;
    return 1;
#endif
}

/* Room for `extra` more items of `item` bytes in an op array (col_grow()'s growing). */
static int col_grow_to(Data *d, Col *v, size_t item, size_t extra) {
    size_t need = (v->len + extra) * item, bytes = v->cap ? v->cap * item : COL_FIRST;
    while (bytes < need)
        bytes = bytes < COL_STEP ? bytes * 2 : bytes + COL_STEP;
    if (v->at >= 0 && bytes > d->in_heap) {
        int r = col_map(d, v, item, bytes);
        if (r <= 0)
            return r;
        v->at = -1;
    }
    void *m = realloc(v->data, bytes);
    if (!m) {
        PyErr_NoMemory();
        return -1;
    }
    v->data = m;
    v->cap = bytes / item;
    return 0;
}

/* Room for `extra` more items of `item` bytes in an op array (checked per op compiled). */
static inline int col_grow(Data *d, Col *v, size_t item, size_t extra) {
    return v->len + extra <= v->cap ? 0 : col_grow_to(d, v, item, extra);
}

static void col_free(Col *v) {
    if (v->mapped)
        munmap(v->data, v->mapped);
    else
        free(v->data);
}

/* Drop the whole pages of items [from, to) of an op array from the process: the file keeps
   them.  With `forget`, an array in the heap loses its pages there too (the whole pages
   inside the items, its allocator's header before them untouched): they read as zeros
   after, so only for items that are never read again (`Code.once`). */
static void col_drop(const Col *v, size_t item, size_t from, size_t to, int forget) {
    static size_t page;
    if (!page)
        page = (size_t)sysconf(_SC_PAGESIZE);
    if (v->mapped) {
        size_t a = from * item / page * page, b = to * item / page * page;
        if (b > a)
            madvise((char *)v->data + a, b - a, MADV_DONTNEED);
    } else if (forget) {
        uintptr_t a = ((uintptr_t)v->data + from * item + page - 1) / page * page;
        uintptr_t b = ((uintptr_t)v->data + to * item) / page * page;
        if (b > a)
            madvise((void *)a, b - a, MADV_DONTNEED);
    }
}

/* Drop ops [from, to) and their arguments from the process (`args_from`: where the arguments
   of op `from` on begin, updated to those of op `to`). */
static void ops_drop(Code *c, size_t from, size_t to, size_t *args_from) {
    for (size_t k = to; k > from; k--) { /* the last direct op's arguments (read first: a
                                            fault maps the pages around it back) */
        const Op *op = &AT(c->ops, Op)[k - 1];
        if (op->proto != PY_OP) {
            col_drop(&c->args, 8, *args_from, op->arg, c->once);
            *args_from = op->arg;
            break;
        }
    }
    col_drop(&c->ops, sizeof(Op), from, to, c->once);
    col_drop(&c->call_nos, 8, from, to, c->once_meta); /* (unless tables read it after) */
    col_drop(&c->name_ids, 4, from, to, c->once_meta);
    col_drop(&c->rows, 1, from, to, c->once_meta);
    col_drop(&c->checkable, 1, from, to, c->once_meta);
    col_drop(&c->work, 1, from, to, c->once_meta);
    if (c->once && to > c->forgotten)
        c->forgotten = to;
}

/* 0 where the metadata of ops from `start` on is still there to read, else -1 with
   RuntimeError (`once(False)`: it left memory behind the loop). */
static int meta_kept(const Code *c, Py_ssize_t start, const char *what) {
    if (c->once_meta && (size_t)start < c->forgotten) {
        PyErr_Format(PyExc_RuntimeError, "%s: the metadata of the ops before %zu has left (once())",
                     what, c->forgotten);
        return -1;
    }
    return 0;
}

static int push_meta(Code *c, uint64_t call_no, uint32_t name_id, uint8_t row, uint8_t check,
                     uint8_t work) {
    Data *d = &c->data;
    if (col_grow(d, &c->ops, sizeof(Op), 1) || col_grow(d, &c->call_nos, 8, 1) ||
        col_grow(d, &c->name_ids, 4, 1) || col_grow(d, &c->rows, 1, 1) ||
        col_grow(d, &c->checkable, 1, 1) || col_grow(d, &c->work, 1, 1))
        return -1;
    AT(c->work, uint8_t)[c->work.len++] = work;
    AT(c->call_nos, int64_t)[c->call_nos.len++] = (int64_t)call_no;
    AT(c->name_ids, uint32_t)[c->name_ids.len++] = name_id;
    AT(c->rows, uint8_t)[c->rows.len++] = row;
    AT(c->checkable, uint8_t)[c->checkable.len++] = check;
    return 0;
}

/* Applies ACTION (Py_VISIT or Py_CLEAR) to every Python object a Code holds. */
#define EACH_OBJECT(c, ACTION)                                                                \
    do {                                                                                      \
        ACTION((c)->before);                                                                  \
        ACTION((c)->after);                                                                   \
        ACTION((c)->ev.on_full);                                                              \
        ACTION((c)->data.where);                                                              \
        ACTION((c)->frame_ends);                                                              \
        for (size_t i_ = 0; i_ < (c)->protos.len; i_++) {                                     \
            for (int k_ = 0; k_ < MAX_ARGS; k_++)                                             \
                ACTION(AT((c)->protos, Proto)[i_].table[k_]);                                 \
            ACTION(AT((c)->protos, Proto)[i_].effect);                                        \
        }                                                                                     \
    } while (0)

static int Code_traverse(Code *c, visitproc visit, void *arg) {
    EACH_OBJECT(c, Py_VISIT);
    return 0;
}

static int Code_clear(Code *c) {
    EACH_OBJECT(c, Py_CLEAR);
    return 0;
}

static void Code_dealloc(Code *c) {
    PyObject_GC_UnTrack(c);
    Code_clear(c);
    for (size_t i = 0; i < c->data.chunks.len; i++) {
        Chunk *k = &AT(c->data.chunks, Chunk)[i];
        munmap((void *)k->map, k->size);
    }
    free(c->data.stage);
    Vec *vecs[] = {&c->protos,           &c->sigs,             &c->data.chunks,
                   &c->memos,            &c->memo_keys,        &c->key,
                   &c->data.scratch,     &c->ev.done[EV_CALL], &c->ev.done[EV_DRAW],
                   &c->ev.done[EV_FRAME], &c->ev.timestamps,   &c->ev.samples,
                   &c->ev.every,          &c->ev.brackets,     &c->ev.totals};
    for (size_t i = 0; i < sizeof vecs / sizeof *vecs; i++)
        free(vecs[i]->data);
    Col *cols[] = {&c->ops,  &c->args,      &c->call_nos, &c->name_ids,
                   &c->rows, &c->checkable, &c->work};
    for (size_t i = 0; i < sizeof cols / sizeof *cols; i++)
        col_free(cols[i]);
    if (c->ev.statm >= 0)
        close(c->ev.statm);
    if (c->ev.ring.obj)
        PyBuffer_Release(&c->ev.ring);
    if (c->data.fd >= 0)
        close(c->data.fd);
    Py_TYPE(c)->tp_free((PyObject *)c);
}

/* Code(file, where, in_heap): `file` (a descriptor, or an object with fileno()) is the data
   pool's file, open for reading and writing and empty, which the code keeps a descriptor of
   its own to; `where` names it in messages; an op array larger than `in_heap` bytes moves
   to that file (COL_HEAP unless given). */
static PyObject *Code_new(PyTypeObject *type, PyObject *args, PyObject *kwargs) {
    static char *names[] = {"file", "where", "in_heap", NULL};
    PyObject *file, *where;
    Py_ssize_t in_heap = (Py_ssize_t)COL_HEAP;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "OU|n:Code", names, &file, &where, &in_heap))
        return NULL;
    int fd = PyObject_AsFileDescriptor(file);
    if (fd < 0)
        return NULL;
    Code *c = (Code *)PyType_GenericNew(type, NULL, NULL);
    if (!c)
        return NULL;
    c->ev.statm = -1;
    c->data.in_heap = in_heap < 0 ? 0 : (size_t)in_heap;
    Col *cols[COLS] = {&c->ops,  &c->args,      &c->call_nos, &c->name_ids,
                       &c->rows, &c->checkable, &c->work};
    for (int k = 0; k < COLS; k++)
        cols[k]->at = (k + 1) * COL_REGION;
    c->data.fd = fcntl(fd, F_DUPFD_CLOEXEC, 0);
    c->data.where = Py_NewRef(where);
    if (c->data.fd < 0) {
        PyErr_SetFromErrnoWithFilenameObject(PyExc_OSError, where);
        Py_DECREF(c);
        return NULL;
    }
    return (PyObject *)c;
}

static Py_ssize_t Code_len(Code *c) { return (Py_ssize_t)c->ops.len; }

/*
 * add_proto(address, types, tables, effect=None, result=0) -> id, or -1
 *
 * `types`: one A_* code per parameter; `tables`: per parameter None, or the
 * dict its object names are remapped through, or a function that remaps
 * them.  `effect`: None, or what the replay records of each call's result,
 * of type `result` (an integer A_* code): see "effects".  -1 when the
 * function cannot be called directly here.
 */
static PyObject *Code_add_proto(Code *c, PyObject *args) {
    unsigned long long address;
    Py_buffer types;
    PyObject *tables, *effect = Py_None;
    unsigned char result = 0;
    if (!PyArg_ParseTuple(args, "Ky*O!|Ob", &address, &types, &PyTuple_Type, &tables, &effect,
                          &result))
        return NULL;
    Proto p = {(void *)(uintptr_t)address, (uint8_t)types.len, {0}, 0, 0, {NULL}, NULL, result};
    int ints = 0, floats = 0, ok = NATIVE_CALLS && address && types.len <= MAX_ARGS &&
                                   PyTuple_GET_SIZE(tables) == types.len &&
                                   (effect == Py_None || (PyCallable_Check(effect) &&
                                                          result < A_NUMBERS && !IS_FLOAT(result)));
    for (Py_ssize_t i = 0; ok && i < types.len; i++) {
        uint8_t t = ((uint8_t *)types.buf)[i];
        PyObject *table = PyTuple_GET_ITEM(tables, i);
        int remapped = (t < A_NUMBERS && !IS_FLOAT(t)) || IS_NAMES(t);
        ok = t < A_COUNT && (t < A_NUMBERS || IS_POINTER(t)) &&
             (table == Py_None ? !IS_NAMES(t)
                               : remapped && (PyDict_Check(table) || PyCallable_Check(table))) &&
             (t != A_NAMES_OUT || (i > 0 && p.type[0] < A_NUMBERS && !IS_FLOAT(p.type[0])));
        p.type[i] = t;
        if (IS_FLOAT(t))
            floats++;
        else
            ints++;
        if (ok && table != Py_None) {
            p.lookups |= (uint16_t)(1u << i);
            p.names |= (uint16_t)(IS_NAMES(t) << i);
            p.table[i] = table;
        }
    }
    PyBuffer_Release(&types);
    if (!ok || ints > INT_REGS + MORE_INTS || floats > FLOAT_REGS)
        return PyLong_FromLong(-1);
    if (vec_grow(&c->protos, sizeof(Proto), 1))
        return NULL;
    for (int k = 0; k < MAX_ARGS; k++)
        Py_XINCREF(p.table[k]);
    if (effect != Py_None)
        p.effect = Py_NewRef(effect);
    AT(c->protos, Proto)[c->protos.len] = p;
    return PyLong_FromSize_t(c->protos.len++);
}

static PyObject *Code_set_sig(Code *c, PyObject *args) {
    unsigned int sig, name_id, row;
    int proto, work = 0, lists = 0;
    if (!PyArg_ParseTuple(args, "IiII|pp", &sig, &proto, &name_id, &row, &work, &lists))
        return NULL;
    if (proto >= (int)c->protos.len || proto < SIG_SKIP) {
        PyErr_SetString(PyExc_ValueError, "no such proto");
        return NULL;
    }
    if (sig >= c->sigs.len) {
        if (vec_grow(&c->sigs, sizeof(Sig), sig + 1 - c->sigs.len))
            return NULL;
        for (size_t i = c->sigs.len; i <= sig; i++)
            AT(c->sigs, Sig)[i] = (Sig){SIG_UNKNOWN, 0, 0, 0, 0, 0};
        c->sigs.len = sig + 1;
    }
    Sig *old = &AT(c->sigs, Sig)[sig];
    *old = (Sig){proto, name_id, (uint8_t)row, (uint8_t)work, (uint8_t)lists, old->memos};
    Py_RETURN_NONE;
}

static int is_signed(uint8_t type) {
    return type == A_I8 || type == A_I16 || type == A_I32 || type == A_I64;
}

/* An integer as the register image of a parameter type, extended as the callee expects. */
static uint64_t narrow(uint64_t u, uint8_t type) {
    switch (type) {
    case A_I8: return (uint64_t)(int64_t)(int8_t)u;
    case A_U8: return (uint8_t)u;
    case A_I16: return (uint64_t)(int64_t)(int16_t)u;
    case A_U16: return (uint16_t)u;
    case A_I32: return (uint64_t)(int64_t)(int32_t)u;
    case A_U32: return (uint32_t)u;
    default: return u;
    }
}

static inline int convert(const Node *n, uint8_t type, uint64_t *out);

static int data_error(const Data *d) {
    PyErr_SetFromErrnoWithFilenameObject(PyExc_OSError, d->where);
    return -1;
}

/* Write `len` bytes at `offset` of the data file. */
static int data_write(const Data *d, const char *src, size_t len, off_t offset) {
    while (len) {
        ssize_t n = pwrite(d->fd, src, len, offset);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            return data_error(d);
        src += n, len -= (size_t)n, offset += n;
    }
    return 0;
}

/*
 * Write `len` bytes at byte `from` of the last chunk, then drop the pages they fall in from
 * the process: a page a driver wrote into is a private copy, which would go on showing what
 * the file held when it was copied; dropped, it is read again from the file.
 */
static int data_store(const Data *d, size_t from, const char *src, size_t len) {
    const Chunk *last = &AT(d->chunks, Chunk)[d->chunks.len - 1];
    if (data_write(d, src, len, d->end - (off_t)last->size + (off_t)from))
        return -1;
    size_t page = (size_t)sysconf(_SC_PAGESIZE), first = from / page * page;
    madvise((void *)(last->map + first), from + len - first, MADV_DONTNEED);
    return 0;
}

/* Write what is staged of the last chunk to the file, before any op may read it. */
static int data_flush(Data *d) {
    if (d->used <= d->written)
        return 0;
    if (data_store(d, d->written, d->stage + d->written, d->used - d->written))
        return -1;
    d->written = d->used;
    return 0;
}

/* A new last chunk of `size` bytes (a multiple of the page size) at the end of the file. */
static int data_chunk(Data *d, size_t size) {
    if (data_flush(d) || vec_grow(&d->chunks, sizeof(Chunk), 1))
        return -1;
    if (!d->stage && !(d->stage = malloc(DATA_CHUNK))) {
        PyErr_NoMemory();
        return -1;
    }
    int failed = d->end + (off_t)size > COL_REGION ? EFBIG /* the op arrays' regions */
                                                   : posix_fallocate(d->fd, d->end, (off_t)size);
    if (failed) {
        errno = failed;
        return data_error(d);
    }
    /* where the last chunk ends, if free: the kernel then merges the two mappings */
    void *after = NULL;
    if (d->chunks.len) {
        const Chunk *last = &AT(d->chunks, Chunk)[d->chunks.len - 1];
        after = (void *)(last->map + last->size);
    }
    void *map = mmap(after, size, PROT_READ | PROT_WRITE, MAP_PRIVATE, d->fd, d->end);
    if (map == MAP_FAILED)
        return data_error(d);
    AT(d->chunks, Chunk)[d->chunks.len++] = (Chunk){map, size, 0};
    d->end += (off_t)size;
    d->used = d->written = 0;
    return 0;
}

/*
 * Put `len` bytes and a NUL (a string's terminator) into the data pool, for op `op` and
 * those after it; returns where they stay for the life of the code, NULL on error.
 */
static const char *data_put(Data *d, const char *src, size_t len, size_t op) {
    size_t padded = (len + 1 + 7) & ~(size_t)7;
    Chunk *last = d->chunks.len ? &AT(d->chunks, Chunk)[d->chunks.len - 1] : NULL;
    const char *at;
    if (padded > DATA_CHUNK - DATA_TAIL) { /* a chunk of its own, written at once; the file
                                              reads 0 after */
        size_t page = (size_t)sysconf(_SC_PAGESIZE);
        if (data_chunk(d, (padded + DATA_TAIL + page - 1) / page * page))
            return NULL;
        last = &AT(d->chunks, Chunk)[d->chunks.len - 1];
        if (data_store(d, 0, src, len))
            return NULL;
        d->used = d->written = last->size;
        at = last->map;
    } else {
        if (!last || d->used + padded > last->size - DATA_TAIL) {
            if (data_chunk(d, DATA_CHUNK))
                return NULL;
            last = &AT(d->chunks, Chunk)[d->chunks.len - 1];
        }
        memcpy(d->stage + d->used, src, len);
        memset(d->stage + d->used + len, 0, padded - len);
        at = last->map + d->used;
        d->used += padded;
    }
    last->last_op = op;
    return at;
}

/* Drop the pages of chunk k from the process: the file keeps them. */
static void data_drop(const Data *d, size_t k) {
    const Chunk *chunk = &AT(d->chunks, Chunk)[k];
    madvise((void *)chunk->map, chunk->size, MADV_DONTNEED);
}

/* The first chunk that ops from `op` on may point into (chunks are in op order). */
static size_t data_first(const Data *d, size_t op) {
    size_t lo = 0, hi = d->chunks.len;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (AT(d->chunks, Chunk)[mid].last_op < op)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

static int number_tag(uint8_t tag) {
    return tag <= T_DOUBLE || tag == T_ENUM || tag == T_BITMASK || tag == T_OPAQUE;
}

/* --- name arrays: glGen* and glDelete* -----------------------------------------------------
 *
 * glDeleteTextures(n, names) passes the driver's names for the trace's, which only the
 * replay knows; glGenTextures(n, names) has the driver write names the replay must record
 * against those the trace recorded there.  Compiled in Python, each such call cost about
 * 20 us and ran as a Python entry.  Direct, the traced names are kept in the pool after
 * their count (a uint32 each), and the argument points at the first; when the call runs,
 * the loop passes an array of its own: the names remapped through the parameter's table
 * (A_NAMES_IN), or room for the driver's, stored in the table under the traced ones after
 * the call (A_NAMES_OUT: as many as argument 0 says, which compile() checks the trace
 * recorded).  A table is a dict, or a function: for A_NAMES_IN it remaps one name, for
 * A_NAMES_OUT it returns the dict (the current context's, for names per context).
 */

/* The traced names of array `n` into the pool, after their count: 0 where they are not
   all integers or more than MOST_VALUES (Python decides), -1 on error. */
static int names_put(Code *c, const Node *n, uint64_t *out) {
    size_t count = n->aux;
    if (n->v.u != count || count > MOST_VALUES)
        return 0;
    for (size_t k = 0; k < count; k++)
        if (n[1 + k].tag != T_SINT && n[1 + k].tag != T_UINT)
            return 0;
    Vec *scratch = &c->data.scratch;
    scratch->len = 0;
    if (vec_grow(scratch, 1, (count + 1) * 4)) /* (in bytes, as convert_pointer() grows it) */
        return -1;
    uint32_t *dst = scratch->data;
    dst[0] = (uint32_t)count;
    for (size_t k = 0; k < count; k++)
        dst[1 + k] = (uint32_t)n[1 + k].v.u;
    const char *at = data_put(&c->data, (const char *)dst, (count + 1) * 4, c->ops.len);
    if (!at)
        return -1;
    *out = (uint64_t)(uintptr_t)(at + 4);
    return 1;
}

static uint32_t names_count(uint64_t arg) { return ((const uint32_t *)(uintptr_t)arg)[-1]; }

/* An array of strings (blobs, NULLs) into the pool, each NUL-terminated, then an array of
   pointers to them, which `out` points at; 0 where the array holds anything else or is
   nested (Python decides), -1 on error. */
static int strings_put(Code *c, const Node *n, const char *pool, Py_ssize_t pool_len,
                       uint64_t *out) {
    size_t count = n->aux;
    if (n->v.u != count || count > MOST_VALUES)
        return 0;
    for (size_t k = 0; k < count; k++)
        if (n[1 + k].tag != T_STRING && n[1 + k].tag != T_BLOB && n[1 + k].tag != T_NULL)
            return 0;
    Vec *scratch = &c->data.scratch;
    scratch->len = 0;
    if (vec_grow(scratch, 1, count * 8 + 1)) /* (in bytes, as convert_pointer() grows it) */
        return -1;
    uint64_t *at = scratch->data;
    for (size_t k = 0; k < count; k++) {
        const Node *s = &n[1 + k];
        const char *kept = NULL;
        if (s->tag != T_NULL) {
            if ((Py_ssize_t)(s->v.u + s->aux) > pool_len)
                return 0;
            if (!(kept = data_put(&c->data, pool + s->v.u, s->aux, c->ops.len)))
                return -1;
        }
        at[k] = (uint64_t)(uintptr_t)kept;
    }
    const char *array = data_put(&c->data, (const char *)at, count * 8, c->ops.len);
    if (!array)
        return -1;
    *out = (uint64_t)(uintptr_t)array;
    return 1;
}

/*
 * An input pointer's argument: NULL, a buffer offset, or data kept in the pool
 * (a blob or string as it is, an array of numbers converted to `elem`, an array
 * of strings for A_STRINGS: strings_put()).  0 when
 * Python must decide (an address, a nested array, an array where any data may
 * be meant), -1 on error.
 */
static int convert_pointer(Code *c, const Node *n, uint8_t type, const char *pool,
                           Py_ssize_t pool_len, uint64_t *out) {
    switch (n->tag) {
    case T_NULL:
        *out = 0;
        return 1;
    case T_OPAQUE:
        *out = n->v.u;
        return n->v.u < MAX_OFFSET;
    case T_BLOB:
    case T_STRING: {
        if ((Py_ssize_t)(n->v.u + n->aux) > pool_len)
            return 0;
        const char *at = data_put(&c->data, pool + n->v.u, n->aux, c->ops.len);
        if (!at)
            return -1;
        *out = (uint64_t)(uintptr_t)at;
        return 1;
    }
    case T_ARRAY: {
        if (type == A_STRINGS)
            return strings_put(c, n, pool, pool_len, out);
        if (type < A_PTR_OF || n->v.u != n->aux) /* untyped, or nested */
            return 0;
        uint8_t elem = type - A_PTR_OF;
        size_t size = SIZE_OF[elem], count = n->aux;
        for (size_t k = 0; k < count; k++)
            if (!number_tag(n[1 + k].tag))
                return 0;
        Vec *scratch = &c->data.scratch;
        scratch->len = 0;
        if (vec_grow(scratch, 1, count * size + 1))
            return -1;
        char *dst = scratch->data;
        for (size_t k = 0; k < count; k++) {
            uint64_t v;
            convert(&n[1 + k], elem, &v);
            memcpy(dst + k * size, &v, size); /* little-endian: the low bytes */
        }
        const char *at = data_put(&c->data, dst, count * size, c->ops.len);
        if (!at)
            return -1;
        *out = (uint64_t)(uintptr_t)at;
        return 1;
    }
    default:
        return 0;
    }
}

/* A trace value as the register image of a parameter type; 0 when it is no number. */
static inline int convert(const Node *n, uint8_t type, uint64_t *out) {
    int real = 0, negative_ok = 0;
    double d = 0;
    uint64_t u = 0;
    switch (n->tag) {
    case T_NULL:
    case T_FALSE:
        break;
    case T_TRUE:
        u = 1;
        break;
    case T_SINT:
        u = n->v.u;
        negative_ok = 1;
        break;
    case T_UINT:
    case T_ENUM:
    case T_BITMASK:
    case T_OPAQUE:
        u = n->v.u;
        break;
    case T_FLOAT:
    case T_DOUBLE:
        d = n->v.d;
        real = 1;
        break;
    default:
        return 0;
    }
    if (type == A_F32 || type == A_F64) {
        if (!real)
            d = negative_ok ? (double)(int64_t)u : (double)u;
        if (type == A_F64) {
            memcpy(out, &d, 8);
        } else {
            float f = (float)d;
            uint32_t bits;
            memcpy(&bits, &f, 4);
            *out = bits;
        }
        return 1;
    }
    if (real) /* a float where an integer is declared: truncate, as C would */
        u = (d >= -9.2e18 && d <= 9.2e18) ? (uint64_t)(int64_t)d : 0;
    *out = narrow(u, type);
    return 1;
}

/* --- memos: calls compiled in Python once per distinct call -------------------------------
 *
 * A program swaps thousands of times with the same arguments, and each swap compiled in Python
 * cost about 20 us (its values decoded, its handler run, its op added); so do GL calls that need
 * Python when they run (a glViewport, a glBeginQuery each frame).  Where Python says a
 * call's entry depends on nothing but the call's values and compiling it changed nothing else
 * (memo()), later calls of that signature with the same values become ops of the same entry
 * here.  A call's key is its shape (argument and result slots) and every node of its values
 * (tag, aux, payload); calls with strings or blobs, whose bytes are in the batch's pool, have
 * no key.
 */

/* The key of call `r` into c->key; 0 when it has none. */
static int memo_key(Code *c, const CallRec *r, const int32_t *slot, const Node *node) {
    Vec *key = &c->key;
    key->len = 0;
    if (vec_grow(key, 8, 3 + (size_t)r->nargs + 2 * (size_t)r->node_count))
        return -1;
    uint64_t *w = key->data;
    size_t n = 0;
    w[n++] = r->nargs;
    w[n++] = r->node_count;
    w[n++] = (uint64_t)(int64_t)r->ret;
    for (uint32_t k = 0; k < r->nargs; k++)
        w[n++] = (uint64_t)(int64_t)slot[r->slot_start + k];
    for (uint32_t k = 0; k < r->node_count; k++) {
        const Node *v = &node[r->node_start + k];
        if (v->tag == T_STRING || v->tag == T_BLOB || v->tag == T_WSTRING || v->tag > T_WSTRING)
            return 0;
        w[n++] = (uint64_t)v->tag | (uint64_t)v->aux << 32;
        w[n++] = v->v.u;
    }
    key->len = n;
    return 1;
}

/*
 * The profiling row of an op of signature `s` compiled now, and its checkable and work flags,
 * by glretrace's rules (Python's Compiler._row and _emit): no rows while a display list
 * compiles; a glBegin..glEnd block is one draw row, its glBegin not checkable (glGetError is
 * an error inside the block) and the calls inside no rows.  A glBegin or glEnd opens or
 * closes the block (c->in_begin).
 */
static uint8_t op_row(Code *c, const Sig *s, int in_list, uint8_t *check, uint8_t *work) {
    uint8_t row = s->row;
    if (in_list || row == ROW_NONE)
        row = ROW_NONE;
    else if (row == ROW_BEGIN)
        c->in_begin = 1;
    else if (row == ROW_END)
        c->in_begin = 0;
    else if (c->in_begin)
        row = ROW_NONE;
    *check = s->row != ROW_NONE && row != ROW_BEGIN && !c->in_begin;
    *work = row != ROW_NONE && s->work;
    return row;
}

/* Compile call `r` into an op of a memo of its signature if it has one with its key: 1 if
   done, 0 if Python must compile it, -1 on error.  Its row, checkable and work flags follow
   op_row() (a window-system call's row is ROW_NONE: none of them). */
static int memo_reuse(Code *c, const CallRec *r, const int32_t *slot, const Node *node,
                      int in_list) {
    int has = memo_key(c, r, slot, node);
    if (has <= 0)
        return has;
    const uint64_t *key = c->key.data, *keys = c->memo_keys.data;
    const Sig *s = &AT(c->sigs, Sig)[r->sig];
    for (size_t m = 0; m < c->memos.len; m++) {
        const Memo *memo = &AT(c->memos, Memo)[m];
        if (memo->sig != r->sig || memo->len != c->key.len ||
            memcmp(keys + memo->key, key, memo->len * 8))
            continue;
        if (memo->entry == NO_ENTRY)
            return 1;
        if (memo->frame_end) {
            PyObject *at = PyLong_FromSize_t(c->ops.len);
            int failed = !at || PyList_Append(c->frame_ends, at) < 0;
            Py_XDECREF(at);
            if (failed)
                return -1;
        }
        uint8_t check, work, row = op_row(c, s, in_list, &check, &work);
        if (push_meta(c, r->no, s->name_id, row, check, work))
            return -1;
        AT(c->ops, Op)[c->ops.len++] = (Op){PY_OP, memo->entry};
        return 1;
    }
    return 0;
}

/*
 * memo(calls, slots, nodes, index, entry, frame_ends) -> whether memoised
 *
 * Call `index` of the batch, whose signature Python compiles, became an op of Python entry
 * `entry` (or no op at all: NO_ENTRY), which depends on nothing but the call's values, and
 * compiling it changed nothing else: compile() makes later calls of its signature with the
 * same values ops of that entry too (or nothing), and where `frame_ends` is a list (not None)
 * appends their op indices to it, as Python does for the calls that end frames.  False where
 * the call has no key (strings, blobs) or its signature has MEMOS_PER_SIG already.
 */
static PyObject *Code_memo(Code *c, PyObject *args) {
    Py_buffer calls, slots, nodes;
    Py_ssize_t index;
    unsigned int entry;
    PyObject *frame_ends;
    if (!PyArg_ParseTuple(args, "y*y*y*nIO", &calls, &slots, &nodes, &index, &entry, &frame_ends))
        return NULL;
    PyObject *result = NULL;
    Py_ssize_t count = calls.len / (Py_ssize_t)sizeof(CallRec);
    const CallRec *r = (const CallRec *)calls.buf + index;
    if (index < 0 || index >= count || r->sig >= c->sigs.len ||
        (frame_ends != Py_None && !PyList_Check(frame_ends)) ||
        (frame_ends != Py_None && c->frame_ends && c->frame_ends != frame_ends)) {
        PyErr_SetString(PyExc_ValueError, "memo(): no such call, or not a list of frame ends");
        goto done;
    }
    Sig *s = &AT(c->sigs, Sig)[r->sig];
    int has = s->memos < MEMOS_PER_SIG ? memo_key(c, r, slots.buf, nodes.buf) : 0;
    if (has < 0)
        goto done;
    if (has) {
        if (vec_grow(&c->memos, sizeof(Memo), 1) || vec_grow(&c->memo_keys, 8, c->key.len))
            goto done;
        memcpy(AT(c->memo_keys, uint64_t) + c->memo_keys.len, c->key.data, c->key.len * 8);
        AT(c->memos, Memo)[c->memos.len++] =
            (Memo){r->sig, entry, frame_ends != Py_None, c->memo_keys.len, c->key.len};
        c->memo_keys.len += c->key.len;
        s->memos++;
        if (frame_ends != Py_None && !c->frame_ends)
            c->frame_ends = Py_NewRef(frame_ends);
    }
    result = PyBool_FromLong(has);
done:
    PyBuffer_Release(&calls);
    PyBuffer_Release(&slots);
    PyBuffer_Release(&nodes);
    return result;
}

/*
 * compile(calls, slots, nodes, pool, start, thread, in_list, stops=None, compiling=False)
 *     -> stop
 *
 * Compiles the batch's calls from `start` on for as long as each one is a
 * direct call or skipped, of the given thread, and all its arguments are
 * numbers or data it can keep; returns the index of the first call Python
 * must handle (or the
 * batch length).  `in_list`: whether a display list is being compiled, which with
 * `in_begin` (a glBegin block is open, kept here as the calls open and close it)
 * decides the profiling row (op_row()).
 * `stops`: one byte per call of the batch, non-zero where Python must decide
 * (a snapshot after the call, a call outside --calls).  `compiling`: a display list is
 * being compiled, so calls of signatures set with `lists` go to Python (which refuses a
 * glCallList that would make a list call itself).
 */
static int traced_result(const CallRec *r, const Node *node, uint8_t type);

static PyObject *Code_compile(Code *c, PyObject *args) {
    Py_buffer calls, slots, nodes, pool, stops = {0};
    Py_ssize_t start;
    unsigned int thread;
    int in_list, compiling = 0;
    if (!PyArg_ParseTuple(args, "y*y*y*y*nIp|z*p", &calls, &slots, &nodes, &pool, &start,
                          &thread, &in_list, &stops, &compiling))
        return NULL;
    const uint8_t *stop = stops.buf;
    const CallRec *rec = calls.buf;
    const int32_t *slot = slots.buf;
    const Node *node = nodes.buf;
    Py_ssize_t count = calls.len / (Py_ssize_t)sizeof(CallRec), i = start;
    const Sig *sigs = c->sigs.data;
    const Proto *protos = c->protos.data;
    int failed = 0;
    for (; i < count; i++) {
        const CallRec *r = &rec[i];
        if (r->sig >= c->sigs.len)
            break;
        Sig s = sigs[r->sig];
        if (s.proto == SIG_SKIP)
            continue;
        if (r->thread != thread || (stop && i < stops.len && stop[i]) || (s.lists && compiling))
            break;
        if (s.proto < 0) {
            int reused = s.memos ? memo_reuse(c, r, slot, node, in_list) : 0;
            if (reused < 0) {
                failed = 1;
                break;
            }
            if (!reused)
                break;
            continue;
        }
        const Proto *p = &protos[s.proto];
        if (r->nargs != p->nargs || (p->effect && !traced_result(r, node, p->result)))
            break;
        if (col_grow(&c->data, &c->args, 8, p->nargs + (p->effect != NULL))) {
            failed = 1;
            break;
        }
        size_t chunks = c->data.chunks.len, used = c->data.used;
        int ok = 1;
        for (uint32_t k = 0; ok == 1 && k < r->nargs; k++) {
            int32_t at = slot[r->slot_start + k];
            uint64_t *a = AT(c->args, uint64_t) + c->args.len + k;
            const Node *n = &node[r->node_start + (uint32_t)(at < 0 ? 0 : at)];
            if (IS_NAMES(p->type[k])) /* an array of the trace's names, else Python decides */
                ok = at >= 0 && n->tag == T_ARRAY ? names_put(c, n, a) : 0;
            else if (at < 0)
                *a = 0; /* the trace holds no value: pass zero */
            else if (IS_POINTER(p->type[k]))
                ok = convert_pointer(c, n, p->type[k], pool.buf, pool.len, a);
            else
                ok = convert(n, p->type[k], a);
            if (ok == 1 && p->type[k] == A_NAMES_OUT) { /* room for what argument 0 says */
                int32_t count_at = slot[r->slot_start];
                uint8_t tag = count_at >= 0 ? node[r->node_start + (uint32_t)count_at].tag : T_NULL;
                int64_t wanted = (int64_t)AT(c->args, uint64_t)[c->args.len];
                /* (the trace's count of names: the pool's copy is not in the file yet) */
                ok = (tag == T_SINT || tag == T_UINT) && wanted >= 0 && (uint64_t)wanted <= n->aux;
            }
        }
        if (ok != 1) {
            if (c->data.chunks.len == chunks) /* give back data kept for earlier arguments */
                c->data.used = used;
            failed = ok < 0;
            break;
        }
        uint8_t check, work, row = op_row(c, &s, in_list, &check, &work);
        if (push_meta(c, r->no, s.name_id, row, check, work)) {
            failed = 1;
            break;
        }
        AT(c->ops, Op)[c->ops.len++] = (Op){(uint32_t)s.proto, (uint32_t)c->args.len};
        c->args.len += r->nargs;
        if (p->effect) /* the traced result, after the arguments */
            convert(&node[r->node_start + (uint32_t)r->ret], p->result,
                    AT(c->args, uint64_t) + c->args.len++);
    }
    PyBuffer_Release(&calls);
    PyBuffer_Release(&slots);
    PyBuffer_Release(&nodes);
    PyBuffer_Release(&pool);
    if (stop)
        PyBuffer_Release(&stops);
    if (failed)
        return NULL;
    if (c->args.len > UINT32_MAX - MAX_ARGS) {
        PyErr_SetString(PyExc_MemoryError, "the compiled trace has too many arguments");
        return NULL;
    }
    return PyLong_FromSsize_t(i);
}

/* keep(data) -> address: bytes a Python entry passes to the driver or copies (a fake
   memcpy's), kept in the data pool for the op added next, NUL-terminated; valid for the
   life of the code. */
static PyObject *Code_keep(Code *c, PyObject *arg) {
    Py_buffer view;
    if (PyObject_GetBuffer(arg, &view, PyBUF_SIMPLE) < 0)
        return NULL;
    const char *at = data_put(&c->data, view.buf, (size_t)view.len, c->ops.len);
    PyBuffer_Release(&view);
    return at ? PyLong_FromVoidPtr((void *)at) : NULL;
}

static PyObject *Code_add_py(Code *c, PyObject *args) {
    unsigned int index, name_id, row;
    unsigned long long call_no;
    int check, work = 0;
    if (!PyArg_ParseTuple(args, "IKIIp|p", &index, &call_no, &name_id, &row, &check, &work))
        return NULL;
    if (push_meta(c, call_no, name_id, (uint8_t)row, (uint8_t)check, (uint8_t)work))
        return NULL;
    AT(c->ops, Op)[c->ops.len++] = (Op){PY_OP, index};
    Py_RETURN_NONE;
}

/*
 * Locations(fallback): the uniform locations of the program glUniform* sets now, looked up
 * here rather than through a Python function per call (30% of a wz2100 trace's ops are
 * glUniform*).  Python keeps it current (`set(table)`: the traced -> real dict of that
 * program, or None where it has none); a negative location, or any with no table, passes
 * unchanged, and one the table lacks (an array element past its array's base) is asked of
 * `fallback`.  Called, it maps one location as a direct call's remapping does.
 */
typedef struct {
    PyObject_HEAD
    PyObject *table, *fallback;
} Locations;

static PyTypeObject LocationsType;

/* A location through `l`: a new reference, or NULL with an exception set. */
static PyObject *locations_get(Locations *l, PyObject *key) {
    int overflow;
    long long value = PyLong_AsLongLongAndOverflow(key, &overflow);
    if (value == -1 && !overflow && PyErr_Occurred())
        return NULL;
    if (!l->table || value < 0 || overflow < 0)
        return Py_NewRef(key);
    PyObject *real = PyDict_GetItemWithError(l->table, key);
    if (real)
        return Py_NewRef(real);
    return PyErr_Occurred() ? NULL : PyObject_CallOneArg(l->fallback, key);
}

static PyObject *Locations_new(PyTypeObject *type, PyObject *args, PyObject *kwargs) {
    PyObject *fallback;
    if (!PyArg_ParseTuple(args, "O:Locations", &fallback))
        return NULL;
    Locations *l = (Locations *)PyType_GenericNew(type, NULL, NULL);
    if (l)
        l->fallback = Py_NewRef(fallback);
    return (PyObject *)l;
}

static PyObject *Locations_set(Locations *l, PyObject *table) {
    if (table != Py_None && !PyDict_Check(table)) {
        PyErr_SetString(PyExc_TypeError, "Locations.set() takes a dict or None");
        return NULL;
    }
    Py_XSETREF(l->table, table == Py_None ? NULL : Py_NewRef(table));
    Py_RETURN_NONE;
}

static PyObject *Locations_call(Locations *l, PyObject *args, PyObject *kwargs) {
    PyObject *key;
    if (kwargs || !PyArg_ParseTuple(args, "O!", &PyLong_Type, &key)) {
        if (kwargs)
            PyErr_SetString(PyExc_TypeError, "Locations() takes one location");
        return NULL;
    }
    return locations_get(l, key);
}

static int Locations_traverse(Locations *l, visitproc visit, void *arg) {
    Py_VISIT(l->table);
    Py_VISIT(l->fallback);
    return 0;
}

static int Locations_clear(Locations *l) {
    Py_CLEAR(l->table);
    Py_CLEAR(l->fallback);
    return 0;
}

static void Locations_dealloc(Locations *l) {
    PyObject_GC_UnTrack(l);
    Locations_clear(l);
    Py_TYPE(l)->tp_free((PyObject *)l);
}

static PyMethodDef Locations_methods[] = {
    {"set", (PyCFunction)Locations_set, METH_O,
     "set(table): the traced -> real dict of the program glUniform* sets now, or None"},
    {NULL, NULL, 0, NULL},
};

static PyTypeObject LocationsType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "retrace.replay._vm.Locations",
    .tp_basicsize = sizeof(Locations),
    .tp_dealloc = (destructor)Locations_dealloc,
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC,
    .tp_traverse = (traverseproc)Locations_traverse,
    .tp_clear = (inquiry)Locations_clear,
    .tp_call = (ternaryfunc)Locations_call,
    .tp_doc = "Locations(fallback): uniform locations of the program in use (set(table)), "
              "for direct glUniform* calls; called, it maps one.",
    .tp_methods = Locations_methods,
    .tp_new = Locations_new,
};

/* --- the program in use: glUseProgram without Python -------------------------------------
 *
 * GTK 4 calls glUseProgram before nearly every draw, each time with another program (170,091
 * of the 643,935 calls of a 25 s recording of gtk4-widget-factory).  Through a Python
 * function that recorded the program in use and pointed the uniform locations at its table,
 * they were 13-17% of its replay.  A ProgramInUse is that function in C, the remapping of a
 * direct glUseProgram's program: it makes the traced program `current`'s (its `program`
 * attribute: a TracedContext), points `uniforms` (the Locations) at that program's table in
 * `tables` (traced program -> its locations), and gives the driver's name for it from
 * `names`; with a log (a profile's first pass: `log(code, changes)`) it also appends (the op
 * running in `code`, the program) to list `changes`, as `changed(program)` does for the
 * changes Python makes.  Where it cannot stand in for Python
 * it calls `use(traced)` instead, then gives the name all the same: where `current` is None
 * (no context is current) and for program 0 (glUniform* then sets the bound pipeline's
 * active program).
 */
typedef struct {
    PyObject_HEAD
    PyObject *names, *tables, *use; /* dict, dict, callable */
    Locations *uniforms;
    PyObject *current;  /* the context whose program it records, or NULL */
    PyObject *changes;  /* the list it logs changes in, or NULL */
    PyObject *log_code; /* the Code whose running op a change is logged at */
} ProgramInUse;

static PyTypeObject ProgramInUseType;
static PyTypeObject CodeType;
static PyObject *str_program; /* "program", interned */

/* Where `u` logs: append (the op running, program `key`); -1 with an exception set. */
static int log_change(ProgramInUse *u, PyObject *key) {
    if (!u->changes)
        return 0;
    PyObject *change = Py_BuildValue("(nO)", ((Code *)u->log_code)->position, key);
    int failed = !change || PyList_Append(u->changes, change) < 0;
    Py_XDECREF(change);
    return failed ? -1 : 0;
}

/* The driver's name for traced program `key` (of value `v`), its use recorded: a new
   reference, NULL with an exception set, or NULL without one (not in `names`: unchanged). */
static PyObject *program_in_use(ProgramInUse *u, PyObject *key, uint64_t v) {
    if (u->current && v) {
        if (PyObject_SetAttr(u->current, str_program, key) < 0)
            return NULL;
        PyObject *table = PyDict_GetItemWithError(u->tables, key);
        if (!table && PyErr_Occurred())
            return NULL;
        if (table && !PyDict_Check(table)) {
            PyErr_SetString(PyExc_TypeError, "ProgramInUse: a program's table is not a dict");
            return NULL;
        }
        Py_XSETREF(u->uniforms->table, Py_XNewRef(table));
        if (log_change(u, key))
            return NULL;
    } else {
        PyObject *done = PyObject_CallOneArg(u->use, key);
        if (!done)
            return NULL;
        Py_DECREF(done);
    }
    PyObject *real = PyDict_GetItemWithError(u->names, key);
    return Py_XNewRef(real);
}

static PyObject *ProgramInUse_new(PyTypeObject *type, PyObject *args, PyObject *kwargs) {
    PyObject *names, *uniforms, *tables, *use;
    if (!PyArg_ParseTuple(args, "O!O!O!O:ProgramInUse", &PyDict_Type, &names, &LocationsType,
                          &uniforms, &PyDict_Type, &tables, &use))
        return NULL;
    ProgramInUse *u = (ProgramInUse *)PyType_GenericNew(type, NULL, NULL);
    if (u) {
        u->names = Py_NewRef(names);
        u->uniforms = (Locations *)Py_NewRef(uniforms);
        u->tables = Py_NewRef(tables);
        u->use = Py_NewRef(use);
    }
    return (PyObject *)u;
}

static PyObject *ProgramInUse_call(ProgramInUse *u, PyObject *args, PyObject *kwargs) {
    PyObject *key;
    if (kwargs || !PyArg_ParseTuple(args, "O!", &PyLong_Type, &key)) {
        if (kwargs)
            PyErr_SetString(PyExc_TypeError, "ProgramInUse() takes one program");
        return NULL;
    }
    uint64_t v = PyLong_AsUnsignedLongLongMask(key);
    if (v == (uint64_t)-1 && PyErr_Occurred())
        return NULL;
    PyObject *real = program_in_use(u, key, v);
    return real || PyErr_Occurred() ? real : Py_NewRef(key);
}

static PyObject *ProgramInUse_log(ProgramInUse *u, PyObject *args) {
    PyObject *code, *changes;
    if (!PyArg_ParseTuple(args, "OO:log", &code, &changes))
        return NULL;
    if (code == Py_None && changes == Py_None) {
        Py_CLEAR(u->changes);
        Py_CLEAR(u->log_code);
        Py_RETURN_NONE;
    }
    if (!Py_IS_TYPE(code, &CodeType) || !PyList_Check(changes)) {
        PyErr_SetString(PyExc_TypeError, "log() takes a Code and a list, or None and None");
        return NULL;
    }
    Py_XSETREF(u->log_code, Py_NewRef(code));
    Py_XSETREF(u->changes, Py_NewRef(changes));
    Py_RETURN_NONE;
}

static PyObject *ProgramInUse_changed(ProgramInUse *u, PyObject *program) {
    if (!PyLong_Check(program)) {
        PyErr_SetString(PyExc_TypeError, "changed() takes a program");
        return NULL;
    }
    if (log_change(u, program))
        return NULL;
    Py_RETURN_NONE;
}

static PyObject *ProgramInUse_get_current(ProgramInUse *u, void *closure) {
    return Py_NewRef(u->current ? u->current : Py_None);
}

static int ProgramInUse_set_current(ProgramInUse *u, PyObject *value, void *closure) {
    if (!value) {
        PyErr_SetString(PyExc_AttributeError, "current cannot be deleted (set None)");
        return -1;
    }
    Py_XSETREF(u->current, value == Py_None ? NULL : Py_NewRef(value));
    return 0;
}

static int ProgramInUse_traverse(ProgramInUse *u, visitproc visit, void *arg) {
    Py_VISIT(u->names);
    Py_VISIT(u->uniforms);
    Py_VISIT(u->tables);
    Py_VISIT(u->use);
    Py_VISIT(u->current);
    Py_VISIT(u->changes);
    Py_VISIT(u->log_code);
    return 0;
}

static int ProgramInUse_clear(ProgramInUse *u) {
    Py_CLEAR(u->names);
    Py_CLEAR(u->uniforms);
    Py_CLEAR(u->tables);
    Py_CLEAR(u->use);
    Py_CLEAR(u->current);
    Py_CLEAR(u->changes);
    Py_CLEAR(u->log_code);
    return 0;
}

static void ProgramInUse_dealloc(ProgramInUse *u) {
    PyObject_GC_UnTrack(u);
    ProgramInUse_clear(u);
    Py_TYPE(u)->tp_free((PyObject *)u);
}

static PyGetSetDef ProgramInUse_getset[] = {
    {"current", (getter)ProgramInUse_get_current, (setter)ProgramInUse_set_current,
     "the context whose program it records in C, or None (use(traced) records it)", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static PyMethodDef ProgramInUse_methods[] = {
    {"log", (PyCFunction)ProgramInUse_log, METH_VARARGS,
     "log(code, changes): append (code's running op, program) to list changes at every "
     "program it records; log(None, None): no more"},
    {"changed", (PyCFunction)ProgramInUse_changed, METH_O,
     "changed(program): the program in use changed in Python's way: logged like those it "
     "records"},
    {NULL, NULL, 0, NULL},
};

static PyTypeObject ProgramInUseType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "retrace.replay._vm.ProgramInUse",
    .tp_basicsize = sizeof(ProgramInUse),
    .tp_dealloc = (destructor)ProgramInUse_dealloc,
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC,
    .tp_traverse = (traverseproc)ProgramInUse_traverse,
    .tp_clear = (inquiry)ProgramInUse_clear,
    .tp_call = (ternaryfunc)ProgramInUse_call,
    .tp_doc = "ProgramInUse(names, uniforms, tables, use): glUseProgram's remapping in C; "
              "called with a traced program, records its use and gives the driver's name.",
    .tp_getset = ProgramInUse_getset,
    .tp_methods = ProgramInUse_methods,
    .tp_new = ProgramInUse_new,
};

/* The driver's name for a traced one, through a name table; unchanged when absent. */
static int remap(PyObject *table, uint8_t type, uint64_t *v) {
    if (Py_IS_TYPE(table, &LocationsType)) {
        Locations *l = (Locations *)table;
        if (!l->table || (is_signed(type) && (int64_t)*v < 0))
            return 0; /* (the common case without a Python object) */
    }
    PyObject *key = is_signed(type) ? PyLong_FromLongLong((long long)*v)
                                    : PyLong_FromUnsignedLongLong(*v);
    if (!key)
        return -1;
    PyObject *real;
    if (Py_IS_TYPE(table, &LocationsType)) {
        real = locations_get((Locations *)table, key);
    } else if (Py_IS_TYPE(table, &ProgramInUseType)) {
        real = program_in_use((ProgramInUse *)table, key, *v);
    } else if (PyDict_Check(table)) {
        real = PyDict_GetItemWithError(table, key);
        Py_XINCREF(real);
    } else {
        real = PyObject_CallOneArg(table, key); /* a lookup function */
    }
    Py_DECREF(key);
    if (!real) /* not in the table: passed unchanged */
        return PyErr_Occurred() ? -1 : 0;
    unsigned long long r = PyLong_AsUnsignedLongLongMask(real);
    Py_DECREF(real);
    if (r == (unsigned long long)-1 && PyErr_Occurred())
        return -1;
    *v = narrow(r, type);
    return 0;
}

/* --- effects: what the replay records of a direct call's result -------------------------
 *
 * glGetUniformLocation, glCreateShader, glFenceSync and the like are direct calls but for
 * one thing: the replay records what the driver returned (a uniform's location, the driver's
 * name for a created object), keyed by what the trace recorded, for the calls after them to
 * remap.  Compiled in Python, each cost about 20 us to compile and a Python entry to run;
 * direct, the call stores the traced result after its arguments, and the loop calls the
 * proto's effect with (its first traced argument or 0, the traced result, the driver's), as
 * integers of the result's type: the call's only Python.
 */

/* Whether call `r` has a traced result an effect can take: an integer (a handle too). */
static int traced_result(const CallRec *r, const Node *node, uint8_t type) {
    if (r->ret < 0)
        return 0;
    uint8_t tag = node[r->node_start + (uint32_t)r->ret].tag;
    return (tag == T_SINT || tag == T_UINT || tag == T_OPAQUE) && !IS_FLOAT(type);
}

static PyObject *as_int(uint64_t v, uint8_t type) {
    return is_signed(type) ? PyLong_FromLongLong((long long)v) : PyLong_FromUnsignedLongLong(v);
}

static int call_effect(const Proto *p, const uint64_t *a, uint64_t result) {
    PyObject *first = p->nargs ? as_int(a[0], p->type[0]) : PyLong_FromLong(0);
    PyObject *traced = as_int(a[p->nargs], p->result);
    PyObject *real = as_int(narrow(result, p->result), p->result);
    PyObject *res = first && traced && real
                        ? PyObject_CallFunctionObjArgs(p->effect, first, traced, real, NULL)
                        : NULL;
    Py_XDECREF(first);
    Py_XDECREF(traced);
    Py_XDECREF(real);
    Py_XDECREF(res);
    return res ? 0 : -1;
}

#define NAMES_ON_STACK 64 /* names a call's arrays hold on the stack; more are on the heap */

/* How many names array argument k of a call holds when it runs ("name arrays"). */
static size_t names_wanted(const Proto *p, const uint64_t *a, int k) {
    return p->type[k] == A_NAMES_IN ? names_count(a[k]) : (uint32_t)a[0];
}

/* After the call: the driver's names in `room`, stored under the traced ones. */
static int names_record(const Proto *p, const uint64_t *a, const uint32_t *room) {
    for (int k = 0; k < p->nargs; k++) {
        if (!((p->names >> k) & 1))
            continue;
        size_t count = names_wanted(p, a, k);
        if (p->type[k] == A_NAMES_OUT) {
            PyObject *table = p->table[k];
            PyObject *dict = PyDict_Check(table) ? Py_NewRef(table) : PyObject_CallNoArgs(table);
            if (!dict || !PyDict_Check(dict)) {
                if (dict)
                    PyErr_SetString(PyExc_TypeError, "a names table is a dict");
                Py_XDECREF(dict);
                return -1;
            }
            const uint32_t *traced = (const uint32_t *)(uintptr_t)a[k];
            for (size_t i = 0; i < count; i++) {
                PyObject *key = PyLong_FromUnsignedLong(traced[i]);
                PyObject *real = PyLong_FromUnsignedLong(room[i]);
                int failed = !key || !real || PyDict_SetItem(dict, key, real) < 0;
                Py_XDECREF(key);
                Py_XDECREF(real);
                if (failed) {
                    Py_DECREF(dict);
                    return -1;
                }
            }
            Py_DECREF(dict);
        }
        room += count;
    }
    return 0;
}

static inline int call_direct(const Proto *p, const uint64_t *a) {
#if NATIVE_CALLS
    uint64_t r[LONG_INTS] = {0}, result;
    double f[FLOAT_REGS] = {0};
    int ni = 0, nf = 0, failed = 0;
    uint32_t on_stack[NAMES_ON_STACK], *room = on_stack, *heap = NULL;
    if (p->names) {
        size_t total = 0;
        for (int k = 0; k < p->nargs; k++)
            if ((p->names >> k) & 1)
                total += names_wanted(p, a, k);
        if (total > NAMES_ON_STACK && !(room = heap = malloc(total * 4))) {
            PyErr_NoMemory();
            return -1;
        }
    }
    uint32_t *next = room;
    for (int k = 0; k < p->nargs; k++) {
        if ((p->names >> k) & 1) {
            const uint32_t *traced = (const uint32_t *)(uintptr_t)a[k];
            size_t count = names_wanted(p, a, k);
            if (p->type[k] == A_NAMES_OUT)
                memset(next, 0, count * 4); /* (what a call that fails leaves) */
            for (size_t i = 0; p->type[k] == A_NAMES_IN && i < count; i++) {
                uint64_t v = traced[i];
                if (remap(p->table[k], A_U32, &v)) {
                    failed = 1;
                    goto done;
                }
                next[i] = (uint32_t)v;
            }
            r[ni++] = (uint64_t)(uintptr_t)next;
            next += count;
        } else if (IS_FLOAT(p->type[k])) {
            memcpy(&f[nf++], &a[k], 8);
        } else {
            r[ni] = a[k];
            if ((p->lookups >> k) & 1 && remap(p->table[k], p->type[k], &r[ni])) {
                failed = 1;
                goto done;
            }
            ni++;
        }
    }
    if (ni <= INT_REGS)
        result = ((Trampoline)p->fn)(r[0], r[1], r[2], r[3], r[4], r[5], f[0], f[1], f[2], f[3],
                                     f[4], f[5], f[6], f[7]);
    else
        result = ((LongTrampoline)p->fn)(r[0], r[1], r[2], r[3], r[4], r[5], f[0], f[1], f[2],
                                         f[3], f[4], f[5], f[6], f[7], r[6], r[7], r[8], r[9],
                                         r[10], r[11], r[12], r[13], r[14], r[15]);
    failed = (p->names && names_record(p, a, room)) || (p->effect && call_effect(p, a, result));
done:
    free(heap);
    return failed ? -1 : 0;
#else
    (void)p;
    (void)a;
    return 0;
#endif
}

static int call_entry(PyObject *entries, uint32_t index) {
    if ((Py_ssize_t)index >= PyList_GET_SIZE(entries)) {
        PyErr_SetString(PyExc_IndexError, "no compiled entry for this op");
        return -1;
    }
    PyObject *entry = PyList_GET_ITEM(entries, index);
    if (!PyTuple_Check(entry) || PyTuple_GET_SIZE(entry) != 2) {
        PyErr_SetString(PyExc_TypeError, "a compiled entry is a (function, args) tuple");
        return -1;
    }
    PyObject *res = PyObject_Call(PyTuple_GET_ITEM(entry, 0), PyTuple_GET_ITEM(entry, 1), NULL);
    Py_XDECREF(res);
    return res ? 0 : -1;
}

/*
 * bracket(marks, before, after): from the next op on, call before(i, mark)
 * and after(i, mark) around every op whose mark is not zero; marks 1 selects
 * the profiling rows, 2 the checkable flags, 0 no op.  Either callback may be
 * None.  Callbacks may change the brackets while a pass runs.
 */
static PyObject *Code_bracket(Code *c, PyObject *args) {
    int marks;
    PyObject *before, *after;
    if (!PyArg_ParseTuple(args, "iOO", &marks, &before, &after))
        return NULL;
    if (marks < MARK_NONE || marks > MARK_CHECKABLE) {
        PyErr_SetString(PyExc_ValueError, "marks is 0, 1 or 2");
        return NULL;
    }
    c->marks = marks;
    Py_XSETREF(c->before, before == Py_None ? NULL : Py_NewRef(before));
    Py_XSETREF(c->after, after == Py_None ? NULL : Py_NewRef(after));
    Py_RETURN_NONE;
}

static int call_mark(PyObject *fn, Py_ssize_t i, uint8_t mark) {
    if (!fn)
        return 0;
    Py_INCREF(fn); /* the callback may replace itself */
    PyObject *res = PyObject_CallFunction(fn, "nI", i, (unsigned int)mark);
    Py_DECREF(fn);
    Py_XDECREF(res);
    return res ? 0 : -1;
}

/* CLOCK_MONOTONIC in ns: Python's time.perf_counter_ns() on Linux. */
static inline int64_t now_ns(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (int64_t)t.tv_sec * 1000000000 + t.tv_nsec;
}

static const EventRecord NOTHING_MEASURED = {
#define UNMEASURED(name) .name = MISSING,
    EVENT_FIELDS(UNMEASURED)
#undef UNMEASURED
};

static int can_time(const Events *ev) {
    return ev->context && ev->gl.gen && ev->gl.del && ev->gl.result && ev->gl.counter;
}

static int can_count(const Events *ev) {
    return ev->context && ev->gl.gen && ev->gl.del && ev->gl.result && ev->gl.begin &&
           ev->gl.end;
}

/* A free query object from `free`, made in a batch when there is none.  0 with an
   exception set when memory runs out; 0 without one when GL made no queries (a trace that
   swaps inside glBegin/glEnd): that event goes unmeasured. */
static uint32_t take_query(Events *ev, Vec *free) {
    if (free->len == 0) {
        if (vec_grow(free, 4, QUERY_BATCH) || vec_grow(&ev->every, 4, QUERY_BATCH))
            return 0;
        uint32_t *made = AT(ev->every, uint32_t) + ev->every.len;
        memset(made, 0, QUERY_BATCH * sizeof *made);
        ev->gl.gen(QUERY_BATCH, made);
        if (!made[0]) /* GL refused (GL_INVALID_OPERATION) and wrote nothing */
            return 0;
        ev->every.len += QUERY_BATCH;
        for (int k = QUERY_BATCH - 1; k >= 0; k--)
            AT(*free, uint32_t)[free->len++] = made[k];
    }
    return AT(*free, uint32_t)[--free->len];
}

/* A query's result; the query goes back to `free` unless that is NULL (room was made). */
static int64_t query_result(Events *ev, uint32_t query, Vec *free) {
    uint64_t value = 0;
    ev->gl.result(query, GL_QUERY_RESULT, &value);
    if (free)
        AT(*free, uint32_t)[free->len++] = query;
    return (int64_t)value;
}

static int64_t since_base(const Events *ev, int64_t timestamp) {
    return timestamp - (ev->gpu_base == MISSING ? 0 : ev->gpu_base);
}

/* Virtual and resident memory now, in bytes (MISSING if statm cannot be read). */
static void read_memory(const Events *ev, int64_t *vsize, int64_t *rss) {
    char text[128];
    ssize_t n = pread(ev->statm, text, sizeof text - 1, 0);
    long long size, resident;
    *vsize = *rss = MISSING;
    if (n <= 0)
        return;
    text[n] = 0;
    if (sscanf(text, "%lld %lld", &size, &resident) == 2) {
        *vsize = size * ev->page;
        *rss = resident * ev->page;
    }
}

/* Begin an event of kind k: its queries (none with `queries` 0: glEndList runs while GL
   still compiles its list, where a query would be compiled rather than run). The clock and
   memory are read after every event beginning at this op has its queries (stamp_start). */
static int begin_event(Events *ev, int k, int queries) {
    Event *e = &ev->current[k];
    e->r = NOTHING_MEASURED;
    e->start_q = e->end_q = e->pixels_q = 0;
    e->start_shared = 0;
    e->work_first = ev->brackets_begun;
    ev->open[k] = 1;
    if (queries && (ev->what[k] & M_GPU_TIMES) && k == EV_FRAME && ev->done[k].len &&
        AT(ev->done[k], Event)[ev->done[k].len - 1].end_q && ev->open_frame_ended) {
        e->start_shared = 1; /* (frame(): the timestamp just taken ends one, starts the next) */
    } else if (queries && (ev->what[k] & M_GPU_TIMES) && can_time(ev)) {
        if (!(e->start_q = take_query(ev, &ev->timestamps)) && PyErr_Occurred())
            return -1;
        if (e->start_q)
            ev->gl.counter(e->start_q, GL_TIMESTAMP);
    }
    if (queries && (ev->what[k] & M_PIXELS) && can_count(ev)) {
        if (!(e->pixels_q = take_query(ev, &ev->samples)) && PyErr_Occurred())
            return -1;
        if (e->pixels_q)
            ev->gl.begin(GL_SAMPLES_PASSED, e->pixels_q);
    }
    return 0;
}

/* The clock and memory at the start of the events of `kinds` (a bit per kind), after their
   queries: the CPU time is the event's own. */
static void stamp_start(Events *ev, unsigned kinds) {
    int64_t vsize = MISSING, rss = MISSING;
    for (int k = EV_CALL; k < EV_KINDS; k++)
        if ((kinds >> k & 1) && (ev->what[k] & M_MEMORY)) {
            read_memory(ev, &vsize, &rss);
            break;
        }
    int64_t now = now_ns() - ev->cpu_base;
    for (int k = EV_CALL; k < EV_KINDS; k++) {
        if (!(kinds >> k & 1))
            continue;
        EventRecord *r = &ev->current[k].r;
        r->cpu_start = now;
        if (ev->what[k] & M_MEMORY)
            r->vsize_start = vsize, r->rss_start = rss;
    }
}

/* End the open event of kind k at `now` (clock and memory read first, for every event
   ending here): its end queries, and it waits in `done` to be read. An event that ends
   where no context is current has no GPU values. */
static int end_event(Events *ev, int k, int64_t now, int64_t vsize, int64_t rss) {
    Event *e = &ev->current[k];
    e->r.cpu_end = now;
    /* a bracket still open (a glBegin whose glEnd is in a display list) is work in it that
       nothing times: last < first says so */
    e->work_last = ev->bracket_open ? e->work_first - 1 : ev->brackets_begun;
    if (ev->what[k] & M_MEMORY)
        e->r.vsize_end = vsize, e->r.rss_end = rss;
    if (!ev->context) { /* (leave_context read its queries) */
        e->r.gpu_start = e->r.pixels = MISSING;
        e->start_shared = 0;
    } else {
        if (e->start_q || e->r.gpu_start != MISSING || e->start_shared) {
            if (can_time(ev) && !(e->end_q = take_query(ev, &ev->timestamps)) && PyErr_Occurred())
                return -1;
            if (e->end_q)
                ev->gl.counter(e->end_q, GL_TIMESTAMP);
            else /* no end to measure to: a start query stays unread (deleted with the rest) */
                e->start_q = 0, e->start_shared = 0, e->r.gpu_start = MISSING;
        }
        if ((ev->what[k] & M_DISJOINT) && ev->gl.integer) { /* covers all since it was read */
            int32_t disjoint = 0;
            ev->gl.integer(GL_GPU_DISJOINT_EXT, &disjoint);
            e->r.disjoint = disjoint;
        }
        if (e->pixels_q)
            ev->gl.end(GL_SAMPLES_PASSED);
    }
    if (vec_grow(&ev->done[k], sizeof(Event), 1))
        return -1;
    AT(ev->done[k], Event)[ev->done[k].len++] = *e;
    ev->open[k] = 0;
    return 0;
}

/* Events starting at an op of this row: the call (unless it is glEnd, which closes one)
   and the draw (glBegin and draws). */
static int events_begin(Events *ev, uint8_t row) {
    int draw = row == ROW_DRAW || row == ROW_BEGIN, queries = row != ROW_LIST_END;
    unsigned kinds = 0;
    for (int k = EV_CALL; k <= (draw ? EV_DRAW : EV_CALL); k++) {
        if (!ev->what[k])
            continue;
        if (begin_event(ev, k, queries))
            return -1;
        kinds |= 1u << k;
    }
    if (kinds)
        stamp_start(ev, kinds);
    return 0;
}

static int ring_take(Events *ev);

/* `n` more calls, draws or brackets ended: on_full() when READ_EVERY wait to be read (with a
   ring, the loop takes them itself). */
static int count_unread(Events *ev, size_t n) {
    ev->unread += n;
    if (ev->unread < READ_EVERY)
        return 0;
    if (ev->ring.obj)
        return ring_take(ev);
    if (!ev->on_full)
        return 0;
    PyObject *on_full = ev->on_full;
    Py_INCREF(on_full);
    PyObject *res = PyObject_CallNoArgs(on_full);
    Py_DECREF(on_full);
    Py_XDECREF(res);
    return res ? 0 : -1;
}

/* Events ending at an op of this row: the draw first (the inner one), then the call. */
static int events_end(Events *ev, uint8_t row) {
    int draw = row == ROW_DRAW || row == ROW_END;
    int last = draw ? EV_DRAW : EV_CALL, memory = 0, ending = 0;
    for (int k = EV_CALL; k <= last; k++)
        if (ev->open[k])
            memory |= ev->what[k] & M_MEMORY, ending++;
    if (!ending)
        return 0;
    int64_t now = now_ns() - ev->cpu_base, vsize = MISSING, rss = MISSING;
    if (memory)
        read_memory(ev, &vsize, &rss);
    for (int k = last; k >= EV_CALL; k--)
        if (ev->open[k] && end_event(ev, k, now, vsize, rss))
            return -1;
    return count_unread(ev, (size_t)ending);
}

/* The bracket of a work op, begun right before it (after the events beginning there). */
static int bracket_begin(Events *ev) {
    Bracket *b = &ev->bracket;
    b->start_q = b->end_q = 0;
    ev->bracket_open = 1;
    if (can_time(ev) && !(b->start_q = take_query(ev, &ev->timestamps)) && PyErr_Occurred())
        return -1;
    if (b->start_q)
        ev->gl.counter(b->start_q, GL_TIMESTAMP);
    return 0;
}

/* ...and ended right after it, before the events ending there: it waits to be read.  One
   with no start (no context could time it; leave_context() ran inside the op) or no end
   has no value. */
static int bracket_end(Events *ev) {
    Bracket *b = &ev->bracket;
    ev->bracket_open = 0;
    if (b->start_q && can_time(ev) && !(b->end_q = take_query(ev, &ev->timestamps)) &&
        PyErr_Occurred())
        return -1;
    if (b->end_q)
        ev->gl.counter(b->end_q, GL_TIMESTAMP);
    else /* a start query stays unread (deleted with the rest) */
        b->start_q = 0;
    if (vec_grow(&ev->brackets, sizeof(Bracket), 1))
        return -1;
    AT(ev->brackets, Bracket)[ev->brackets.len++] = *b;
    ev->brackets_begun++;
    return count_unread(ev, 1);
}

/* Read the first `n` brackets waiting into the running totals; their queries go back to
   the free list (room was made), or with `keep` 0 nowhere (they are about to be deleted). */
static int read_brackets(Events *ev, size_t n, int keep) {
    if (vec_grow(&ev->totals, sizeof(Total), n))
        return -1;
    Vec *timestamps = keep ? &ev->timestamps : NULL;
    Bracket *b = ev->brackets.data;
    Total *t = AT(ev->totals, Total) + ev->totals.len - 1;
    for (size_t i = 0; i < n; i++, t++) {
        t[1] = t[0];
        if (b[i].end_q) {
            int64_t start = query_result(ev, b[i].start_q, timestamps);
            t[1].ns += query_result(ev, b[i].end_q, timestamps) - start;
        } else {
            t[1].missing++;
        }
    }
    ev->totals.len += n;
    memmove(b, b + n, (ev->brackets.len - n) * sizeof(Bracket));
    ev->brackets.len -= n;
    ev->brackets_ready = ev->brackets_ready > n ? ev->brackets_ready - n : 0;
    return 0;
}

/* An event's busy and idle times, once its brackets are read (and its queries): MISSING
   where a bracket in it has no value, or the GPU timer was disjoint (GL_GPU_DISJOINT_EXT,
   read at its end when the pass asks). */
static void settle_busy(const Events *ev, Event *e) {
    const Total *t = ev->totals.data;
    int64_t first = e->work_first - ev->totals_from, last = e->work_last - ev->totals_from;
    EventRecord *r = &e->r;
    r->busy = r->idle = MISSING;
    if (first < 0 || last < first || last >= (int64_t)ev->totals.len ||
        t[first].missing != t[last].missing ||
        r->disjoint > 0)
        return;
    r->busy = t[last].ns - t[first].ns;
    if (r->gpu_start != MISSING && r->gpu_end != MISSING)
        r->idle = r->gpu_end - r->gpu_start - r->busy;
}

/* Drop the totals no event needs any more: those before the first bracket of every event
   open or not taken. */
static void trim_totals(Events *ev) {
    int64_t keep = ev->brackets_begun;
    for (int k = EV_CALL; k < EV_KINDS; k++) {
        if (ev->open[k] && ev->current[k].work_first < keep)
            keep = ev->current[k].work_first;
        if (ev->done[k].len && AT(ev->done[k], Event)[0].work_first < keep)
            keep = AT(ev->done[k], Event)[0].work_first;
    }
    int64_t drop = keep - ev->totals_from;
    if (drop > (int64_t)ev->totals.len - 1)
        drop = (int64_t)ev->totals.len - 1;
    if (drop <= 0)
        return;
    Total *t = ev->totals.data;
    memmove(t, t + drop, (ev->totals.len - (size_t)drop) * sizeof(Total));
    ev->totals.len -= (size_t)drop;
    ev->totals_from += drop;
}

/* Read an ended event's queries into its record; they go back to the free lists, or with
   `keep` 0 nowhere (they are about to be deleted). */
static void read_event(Events *ev, Event *e, int keep) {
    Vec *timestamps = keep ? &ev->timestamps : NULL, *samples = keep ? &ev->samples : NULL;
    if (e->end_q) { /* (end_event left no start without an end) */
        if (e->start_q)
            e->r.gpu_start = since_base(ev, query_result(ev, e->start_q, timestamps));
        e->r.gpu_end = since_base(ev, query_result(ev, e->end_q, timestamps));
    }
    if (e->pixels_q) {
        int64_t before = e->r.pixels == MISSING ? 0 : e->r.pixels;
        e->r.pixels = before + query_result(ev, e->pixels_q, samples);
    }
    e->start_q = e->end_q = e->pixels_q = 0;
}

/* After frame event done[i] is read: the frame after it, if its start is this one's end
   (one GL_TIMESTAMP query at each frame end, read once, rather than two back to back). */
static void pass_on_end(Events *ev, size_t i) {
    Vec *done = &ev->done[EV_FRAME];
    Event *next = i + 1 < done->len    ? &AT(*done, Event)[i + 1]
                  : ev->open[EV_FRAME] ? &ev->current[EV_FRAME]
                                       : NULL;
    if (next && next->start_shared) {
        next->r.gpu_start = AT(*done, Event)[i].r.gpu_end;
        next->start_shared = 0;
    }
}

/* --- the ring -----------------------------------------------------------------------------
 *
 * Without one, Python takes the events (take_events()) at every frame end and whenever
 * READ_EVERY calls and draws have ended: per frame, Python calls and objects that cost a
 * profile of short frames more than the replay itself.  With a ring (events()' `ring`: a
 * buffer Python gives, in memory it shares with its parent so that a crash keeps what the
 * ring holds), the loop takes them itself at those moments: it reads the events that had
 * ended at the previous take into the ring, and Python moves them out (into the store)
 * when the ring is full (on_full()) and at the end.  Layout: an int64 count of records per
 * kind (written after the records it counts; Python sets it back to 0 when it has moved
 * them), RING_HEAD bytes in all, then `ring_cap` EventRecords per kind. */
static int64_t *ring_counts(const Events *ev) { return (int64_t *)ev->ring.buf; }

static EventRecord *ring_records(const Events *ev, int k) {
    return (EventRecord *)((char *)ev->ring.buf + RING_HEAD) + (size_t)k * ev->ring_cap;
}

/* Python moves the ring's records out (on_full()): room for more. */
static int ring_empty(Events *ev) {
    PyObject *on_full = ev->on_full;
    if (!on_full) {
        PyErr_SetString(PyExc_RuntimeError, "the event ring is full and nothing empties it");
        return -1;
    }
    Py_INCREF(on_full);
    PyObject *res = PyObject_CallNoArgs(on_full);
    Py_DECREF(on_full);
    Py_XDECREF(res);
    return res ? 0 : -1;
}

/* take_events(0), into the ring: the events that had ended at the previous take. */
static int ring_take(Events *ev) {
    size_t brackets = ev->brackets_ready;
    if (vec_grow(&ev->timestamps, 4, 2 * brackets) || read_brackets(ev, brackets, 1))
        return -1;
    ev->brackets_ready = ev->brackets.len;
    for (int k = EV_CALL; k < EV_KINDS; k++) {
        size_t n = ev->ready[k];
        if (vec_grow(&ev->timestamps, 4, 2 * n) || vec_grow(&ev->samples, 4, n))
            return -1;
        Event *done = ev->done[k].data;
        for (size_t i = 0; i < n;) {
            int64_t *count = &ring_counts(ev)[k];
            if ((size_t)*count >= ev->ring_cap) {
                if (ring_empty(ev))
                    return -1;
                if ((size_t)*count >= ev->ring_cap) {
                    PyErr_SetString(PyExc_RuntimeError, "on_full() left the event ring full");
                    return -1;
                }
                continue;
            }
            EventRecord *r = ring_records(ev, k) + *count;
            size_t m = ev->ring_cap - (size_t)*count;
            m = m < n - i ? m : n - i;
            for (size_t j = i; j < i + m; j++) {
                read_event(ev, &done[j], 1);
                if (k == EV_FRAME)
                    pass_on_end(ev, j);
                settle_busy(ev, &done[j]);
                *r++ = done[j].r;
            }
            *count += (int64_t)m;
            i += m;
        }
        memmove(done, done + n, (ev->done[k].len - n) * sizeof(Event));
        ev->done[k].len -= n;
        ev->ready[k] = ev->done[k].len;
    }
    trim_totals(ev);
    ev->unread = 0;
    return 0;
}

/* Stop measuring and forget everything (query objects not deleted died with their
   context). */
static void events_reset(Events *ev) {
    memset(ev->what, 0, sizeof ev->what);
    memset(ev->open, 0, sizeof ev->open);
    ev->per_op = ev->context = 0;
    memset(&ev->gl, 0, sizeof ev->gl);
    for (int k = EV_CALL; k < EV_KINDS; k++)
        ev->done[k].len = ev->ready[k] = 0;
    ev->unread = 0;
    ev->every.len = ev->timestamps.len = ev->samples.len = 0;
    ev->busy = ev->bracket_open = 0;
    ev->brackets.len = ev->brackets_ready = ev->totals.len = 0;
    ev->brackets_begun = ev->totals_from = 0;
    if (ev->statm >= 0)
        close(ev->statm);
    ev->statm = -1;
    Py_CLEAR(ev->on_full);
    if (ev->ring.obj)
        PyBuffer_Release(&ev->ring);
    ev->ring.obj = NULL;
    ev->ring_cap = 0;
}

/*
 * events(calls, draws, frames, on_full, ring=None) or events(None)
 *
 * From the next op on, measure every call and draw-call event (events as the
 * profiler counts them: a glBegin..glEnd block is one of each; calls compiled
 * into display lists are none) and the frames frame() delimits: per kind of
 * event, the MEASURE_* bits of what to measure, 0 for none.  The pass's clocks
 * start now.  `on_full`: called when READ_EVERY calls and draws wait to be
 * taken, or with a `ring` (a writable buffer: "the ring"), when the ring is full.
 * enter_context() gives the current context's query functions; no GL
 * query is issued before.  events(None) stops and drops what was not taken.
 */
static PyObject *Code_events(Code *c, PyObject *args) {
    Events *ev = &c->ev;
    events_reset(ev);
    if (PyTuple_GET_SIZE(args) == 1 && PyTuple_GET_ITEM(args, 0) == Py_None)
        Py_RETURN_NONE;
    unsigned char what[EV_KINDS];
    PyObject *on_full, *ring = Py_None;
    if (!PyArg_ParseTuple(args, "bbbO|O", &what[EV_CALL], &what[EV_DRAW], &what[EV_FRAME],
                          &on_full, &ring))
        return NULL;
    if (ring != Py_None) {
        if (PyObject_GetBuffer(ring, &ev->ring, PyBUF_WRITABLE) < 0)
            return NULL;
        if (ev->ring.len < RING_HEAD ||
            (size_t)(ev->ring.len - RING_HEAD) < EV_KINDS * sizeof(EventRecord) ||
            ((uintptr_t)ev->ring.buf & 7)) {
            events_reset(ev);
            PyErr_SetString(PyExc_ValueError, "events(): the ring holds no record of each kind");
            return NULL;
        }
        ev->ring_cap = (size_t)(ev->ring.len - RING_HEAD) / (EV_KINDS * sizeof(EventRecord));
        memset(ev->ring.buf, 0, RING_HEAD);
    }
    int memory = 0;
    for (int k = EV_CALL; k < EV_KINDS; k++)
        memory |= what[k] & M_MEMORY;
    if (memory) {
        ev->statm = open("/proc/self/statm", O_RDONLY | O_CLOEXEC);
        if (ev->statm < 0)
            return PyErr_SetFromErrnoWithFilename(PyExc_OSError, "/proc/self/statm");
        ev->page = sysconf(_SC_PAGESIZE);
    }
    memcpy(ev->what, what, sizeof what);
    ev->per_op = what[EV_CALL] || what[EV_DRAW];
    ev->busy = ((what[EV_CALL] | what[EV_DRAW] | what[EV_FRAME]) & M_BUSY) != 0;
    if (vec_grow(&ev->totals, sizeof(Total), 1))
        return NULL;
    AT(ev->totals, Total)[ev->totals.len++] = (Total){0, 0};
    ev->on_full = on_full == Py_None ? NULL : Py_NewRef(on_full);
    ev->cpu_base = now_ns();
    ev->gpu_base = MISSING;
    Py_RETURN_NONE;
}

/* enter_context(functions): a context is current (the pass's first, or another after
   leave_context()): the addresses of QUERY_FUNCTIONS in it, 0 for those it lacks.  Events
   still open count their samples here from now on. */
static PyObject *Code_enter_context(Code *c, PyObject *functions) {
    Events *ev = &c->ev;
    unsigned long long f[QUERY_FUNCTION_COUNT];
    if (!PyTuple_Check(functions) || PyTuple_GET_SIZE(functions) != QUERY_FUNCTION_COUNT) {
        PyErr_SetString(PyExc_TypeError, "enter_context() takes the QUERY_FUNCTIONS' addresses");
        return NULL;
    }
    for (size_t i = 0; i < QUERY_FUNCTION_COUNT; i++) {
        f[i] = PyLong_AsUnsignedLongLong(PyTuple_GET_ITEM(functions, (Py_ssize_t)i));
        if (PyErr_Occurred())
            return NULL;
    }
    size_t i = 0;
#define SET(name, type, gl_name, gles_name) ev->gl.name = (type)(uintptr_t)f[i++];
    QUERY_FUNCTIONS(SET)
#undef SET
    ev->context = 1;
    int gpu_times = 0;
    for (int k = EV_CALL; k < EV_KINDS; k++)
        gpu_times |= ev->what[k] & M_GPU_TIMES;
    if (gpu_times && ev->gpu_base == MISSING && ev->gl.integer64) /* GPU times count from here */
        ev->gl.integer64(GL_TIMESTAMP, &ev->gpu_base);
    for (int k = EV_CALL; k < EV_KINDS; k++) {
        Event *e = &ev->current[k];
        if (!ev->open[k] || !(ev->what[k] & M_PIXELS) || !can_count(ev))
            continue;
        if (!(e->pixels_q = take_query(ev, &ev->samples)) && PyErr_Occurred())
            return NULL;
        if (e->pixels_q)
            ev->gl.begin(GL_SAMPLES_PASSED, e->pixels_q);
    }
    Py_RETURN_NONE;
}

/* leave_context(): the current context is about to change or go.  Reads every query made
   in it (open events keep their start time and the samples counted so far) and deletes
   them; until enter_context(), events get no queries. */
static PyObject *Code_leave_context(Code *c, PyObject *Py_UNUSED(ignored)) {
    Events *ev = &c->ev;
    if (!ev->context)
        Py_RETURN_NONE;
    for (int k = EV_CALL; k < EV_KINDS; k++) {
        Event *e = &ev->current[k];
        if (!ev->open[k])
            continue;
        if (e->start_q)
            e->r.gpu_start = since_base(ev, query_result(ev, e->start_q, NULL));
        if (e->pixels_q) {
            ev->gl.end(GL_SAMPLES_PASSED);
            int64_t before = e->r.pixels == MISSING ? 0 : e->r.pixels;
            e->r.pixels = before + query_result(ev, e->pixels_q, NULL);
        }
        e->start_q = e->pixels_q = 0;
    }
    ev->bracket.start_q = 0; /* a bracket open now (inside an op) has no value */
    if (read_brackets(ev, ev->brackets.len, 0))
        return NULL;
    for (int k = EV_CALL; k < EV_KINDS; k++) {
        for (size_t i = 0; i < ev->done[k].len; i++) {
            Event *e = &AT(ev->done[k], Event)[i];
            read_event(ev, e, 0);
            if (k == EV_FRAME)
                pass_on_end(ev, i);
            settle_busy(ev, e);
        }
        ev->ready[k] = ev->done[k].len; /* read already: nothing to wait for */
    }
    if (ev->every.len && ev->gl.del)
        ev->gl.del((int32_t)ev->every.len, ev->every.data);
    ev->every.len = ev->timestamps.len = ev->samples.len = 0;
    memset(&ev->gl, 0, sizeof ev->gl);
    ev->context = 0;
    Py_RETURN_NONE;
}

/* frame(begin): end the open frame event, if any, and with `begin` begin the next; with a
   ring, then take the events into it. */
static PyObject *Code_frame(Code *c, PyObject *arg) {
    Events *ev = &c->ev;
    int begin = PyObject_IsTrue(arg);
    if (begin < 0)
        return NULL;
    if (!ev->what[EV_FRAME])
        Py_RETURN_NONE;
    int ended = ev->open[EV_FRAME];
    if (ended) {
        int64_t now = now_ns() - ev->cpu_base, vsize = MISSING, rss = MISSING;
        if (ev->what[EV_FRAME] & M_MEMORY)
            read_memory(ev, &vsize, &rss);
        if (end_event(ev, EV_FRAME, now, vsize, rss))
            return NULL;
    }
    if (begin) {
        ev->open_frame_ended = (uint8_t)ended; /* (its end query starts this one) */
        int failed = begin_event(ev, EV_FRAME, 1);
        ev->open_frame_ended = 0;
        if (failed)
            return NULL;
        stamp_start(ev, 1u << EV_FRAME);
    }
    if (ev->ring.obj && ring_take(ev)) /* (a frame end: the moment Python would take them) */
        return NULL;
    Py_RETURN_NONE;
}

/* take_events(all) -> (calls, draws, frames): bytes of EventRecord, in event order, of the
   events that had ended at the previous take (so the GPU is done with them and reading
   does not stall it), or with `all` of every event that ended.  Reads their queries in
   the current context, the one they ran in (leave_context() read the others), and frees
   them for reuse. */
static PyObject *Code_take_events(Code *c, PyObject *arg) {
    Events *ev = &c->ev;
    int all = PyObject_IsTrue(arg);
    if (all < 0)
        return NULL;
    size_t brackets = all ? ev->brackets.len : ev->brackets_ready;
    /* (their ends came before the events' that hold them) */
    if (vec_grow(&ev->timestamps, 4, 2 * brackets) || read_brackets(ev, brackets, 1))
        return NULL;
    ev->brackets_ready = ev->brackets.len;
    PyObject *out = PyTuple_New(EV_KINDS);
    if (!out)
        return NULL;
    for (int k = EV_CALL; k < EV_KINDS; k++) {
        size_t n = all ? ev->done[k].len : ev->ready[k];
        /* room for every query read to go back to its free list */
        if (vec_grow(&ev->timestamps, 4, 2 * n) || vec_grow(&ev->samples, 4, n)) {
            Py_DECREF(out);
            return NULL;
        }
        PyObject *records = PyBytes_FromStringAndSize(NULL, (Py_ssize_t)(n * sizeof(EventRecord)));
        if (!records) {
            Py_DECREF(out);
            return NULL;
        }
        PyTuple_SET_ITEM(out, k, records);
        EventRecord *r = (EventRecord *)PyBytes_AS_STRING(records);
        Event *done = ev->done[k].data;
        for (size_t i = 0; i < n; i++) {
            read_event(ev, &done[i], 1);
            if (k == EV_FRAME)
                pass_on_end(ev, i);
            settle_busy(ev, &done[i]);
            r[i] = done[i].r;
        }
        memmove(done, done + n, (ev->done[k].len - n) * sizeof(Event));
        ev->done[k].len -= n;
        ev->ready[k] = ev->done[k].len;
    }
    trim_totals(ev);
    ev->unread = 0;
    return out;
}

/*
 * run(start, end, entries) -> end
 *
 * Runs ops [start, end) with the current brackets; an exception from a
 * callback or an entry stops the loop and propagates.  Once the loop has run
 * the last op that points into a chunk of the data pool, the chunk's pages
 * leave the process.  With share_gil(True), runs of direct calls that touch no
 * Python object (no name to remap, no callback, no event to measure) run
 * without the GIL, so that another thread (the reader: `ahead.py`) runs
 * meanwhile; Python entries, lookups, callbacks and signals take it back.
 */
static PyObject *Code_run(Code *c, PyObject *args) {
    Py_ssize_t start, end;
    PyObject *entries;
    if (!PyArg_ParseTuple(args, "nnO!", &start, &end, &PyList_Type, &entries))
        return NULL;
    if (start < 0 || end > (Py_ssize_t)c->ops.len || start > end) {
        PyErr_SetString(PyExc_IndexError, "op range out of bounds");
        return NULL;
    }
    if (c->once && (size_t)start < c->forgotten) {
        PyErr_Format(PyExc_RuntimeError, "run(): the ops before %zu have run once (once())",
                     c->forgotten);
        return NULL;
    }
    Data *data = &c->data;
    if (data_flush(data))
        return NULL;
    size_t chunk = data_first(data, (size_t)start); /* the next chunk to drop */
    size_t kept_op = (size_t)start, kept_arg = 0;     /* the op arrays' pages from here on */
    for (Py_ssize_t k = start; k < end && k < start + MAX_ARGS; k++)
        if (AT(c->ops, Op)[k].proto != PY_OP) {
            kept_arg = AT(c->ops, Op)[k].arg;
            break;
        }
    size_t drop_after = chunk < data->chunks.len ? AT(data->chunks, Chunk)[chunk].last_op : SIZE_MAX;
    Py_INCREF(entries);
    PyObject *result = NULL;
    PyThreadState *released = NULL; /* while direct calls run without the GIL */
    progress[PROGRESS_RUNNING] = 1;
    for (Py_ssize_t i = start; i < end; i++) {
        /* read through c each time: callbacks may change the brackets */
        const Op op = AT(c->ops, Op)[i];
        uint8_t mark = c->marks == MARK_ROWS        ? AT(c->rows, uint8_t)[i]
                       : c->marks == MARK_CHECKABLE ? AT(c->checkable, uint8_t)[i]
                                       : 0;
        c->position = i;
        progress[PROGRESS_CALL] = AT(c->call_nos, int64_t)[i];
        uint8_t work = c->ev.busy ? AT(c->work, uint8_t)[i] : 0;
        uint8_t row = c->ev.per_op || work ? AT(c->rows, uint8_t)[i] : ROW_NONE;
        if (c->share_gil) {
            const Proto *p = op.proto != PY_OP ? &AT(c->protos, Proto)[op.proto] : NULL;
            int pure = p && !mark && row == ROW_NONE && !work && !p->lookups && !p->effect;
            if (pure && !released) {
                released = PyEval_SaveThread();
            } else if (!pure && released) {
                PyEval_RestoreThread(released);
                released = NULL;
            }
        }
        if (row != ROW_NONE && row != ROW_END && events_begin(&c->ev, row))
            goto done;
        if (work && row != ROW_END && bracket_begin(&c->ev)) /* glEnd ends glBegin's */
            goto done;
        if (mark && call_mark(c->before, i, mark))
            goto done;
        if (op.proto == PY_OP) {
            if (call_entry(entries, op.arg))
                goto done;
        } else if (call_direct(&AT(c->protos, Proto)[op.proto], AT(c->args, uint64_t) + op.arg)) {
            goto done;
        }
        if (work && row != ROW_BEGIN && bracket_end(&c->ev))
            goto done;
        if (row != ROW_NONE && row != ROW_BEGIN && events_end(&c->ev, row))
            goto done;
        if (mark && call_mark(c->after, i, mark))
            goto done;
        if ((size_t)i >= drop_after) {
            for (; chunk < data->chunks.len && AT(data->chunks, Chunk)[chunk].last_op <= (size_t)i;
                 chunk++)
                data_drop(data, chunk);
            drop_after =
                chunk < data->chunks.len ? AT(data->chunks, Chunk)[chunk].last_op : SIZE_MAX;
        }
        if ((i & (CHECK_SIGNALS_EVERY - 1)) == 0) {
            ops_drop(c, kept_op, (size_t)i, &kept_arg);
            kept_op = (size_t)i;
            if (released) {
                PyEval_RestoreThread(released);
                released = NULL;
            }
            if (PyErr_CheckSignals())
                goto done;
        }
    }
    if (released) {
        PyEval_RestoreThread(released);
        released = NULL;
    }
    ops_drop(c, kept_op, (size_t)end, &kept_arg);
    result = PyLong_FromSsize_t(end);
done:
    if (released) /* (no error comes from a call run without it; this is for safety) */
        PyEval_RestoreThread(released);
    progress[PROGRESS_RUNNING] = 0;
    Py_DECREF(entries);
    return result;
}

/* column(name, start, stop) -> memoryview: a copy of ops [start, stop) of one per-op array,
   typed (call_nos int64, name_ids uint32, rows, checkable and work uint8) so that Python needs
   no dtype of its own */
static PyObject *Code_column(Code *c, PyObject *args) {
    const char *name;
    Py_ssize_t start, stop;
    if (!PyArg_ParseTuple(args, "snn", &name, &start, &stop))
        return NULL;
    const Col *v = NULL;
    size_t item = 0;
    const char *format = NULL; /* the struct module's code of the item type */
    if (!strcmp(name, "call_nos"))
        v = &c->call_nos, item = sizeof(int64_t), format = "q";
    else if (!strcmp(name, "name_ids"))
        v = &c->name_ids, item = sizeof(uint32_t), format = "I";
    else if (!strcmp(name, "rows"))
        v = &c->rows, item = sizeof(uint8_t), format = "B";
    else if (!strcmp(name, "checkable"))
        v = &c->checkable, item = sizeof(uint8_t), format = "B";
    else if (!strcmp(name, "work"))
        v = &c->work, item = sizeof(uint8_t), format = "B";
    if (!v) {
        PyErr_Format(PyExc_KeyError, "no column %s", name);
        return NULL;
    }
    if (stop > (Py_ssize_t)v->len)
        stop = (Py_ssize_t)v->len;
    if (start < 0 || start > stop) {
        PyErr_SetString(PyExc_IndexError, "op range out of bounds");
        return NULL;
    }
    if (meta_kept(c, start, "column()"))
        return NULL;
    PyObject *bytes = PyBytes_FromStringAndSize((const char *)v->data + (size_t)start * item,
                                                (Py_ssize_t)((size_t)(stop - start) * item));
    col_drop(v, item, (size_t)start, (size_t)stop, 0); /* (copied: its pages leave again) */
    PyObject *view = bytes ? PyMemoryView_FromObject(bytes) : NULL;
    Py_XDECREF(bytes);
    PyObject *typed = view ? PyObject_CallMethod(view, "cast", "s", format) : NULL;
    Py_XDECREF(view);
    return typed;
}

/* A buffer argument as int64 items (its length a whole number of them); 0 or -1 with an
   exception set. */
static int int64_buffer(PyObject *obj, Py_buffer *view, const char *what) {
    if (PyObject_GetBuffer(obj, view, PyBUF_SIMPLE) < 0)
        return -1;
    if (view->len % 8) {
        PyBuffer_Release(view);
        PyErr_Format(PyExc_ValueError, "%s: not whole int64 items", what);
        return -1;
    }
    return 0;
}

/*
 * event_rows(start, stop, kinds, frame_ends, first_frame, changes) -> tuple of bytes
 *
 * The per-event metadata of the profile's call tables, for the ops [start, stop) whose row
 * is one of `kinds` (a bit per ROW_*), each as bytes of int64 (so that Python writes them
 * to its store without numpy): the call number, the function name id, the frame (the
 * number of `frame_ends`, sorted op indices, below the op, plus `first_frame`), and for
 * each of `changes` (bytes of int64 pairs (op, value), sorted by op) the value of the last
 * change in an op before this one, 0 before the first.
 */
static PyObject *Code_event_rows(Code *c, PyObject *args) {
    Py_ssize_t start, stop;
    unsigned int kinds;
    long long first_frame;
    PyObject *frame_ends_obj, *changes;
    if (!PyArg_ParseTuple(args, "nnIOLO!", &start, &stop, &kinds, &frame_ends_obj, &first_frame,
                          &PyTuple_Type, &changes))
        return NULL;
    if (start < 0 || stop > (Py_ssize_t)c->ops.len || start > stop) {
        PyErr_SetString(PyExc_IndexError, "op range out of bounds");
        return NULL;
    }
    if (meta_kept(c, start, "event_rows()"))
        return NULL;
    Py_ssize_t logs = PyTuple_GET_SIZE(changes), columns = 3 + logs;
    Py_buffer ends, log[8];
    if (logs > 8) {
        PyErr_SetString(PyExc_ValueError, "event_rows() takes at most 8 change logs");
        return NULL;
    }
    if (int64_buffer(frame_ends_obj, &ends, "frame_ends"))
        return NULL;
    Py_ssize_t opened = 0;
    PyObject *out = NULL;
    for (; opened < logs; opened++)
        if (int64_buffer(PyTuple_GET_ITEM(changes, opened), &log[opened], "changes"))
            goto done;
    const uint8_t *rows = AT(c->rows, uint8_t);
    Py_ssize_t count = 0;
    for (Py_ssize_t i = start; i < stop; i++)
        count += kinds >> rows[i] & 1;
    out = PyTuple_New(columns);
    if (!out)
        goto done;
    int64_t *column[3 + 8];
    for (Py_ssize_t k = 0; k < columns; k++) {
        PyObject *bytes = PyBytes_FromStringAndSize(NULL, count * 8);
        if (!bytes) {
            Py_CLEAR(out);
            goto done;
        }
        PyTuple_SET_ITEM(out, k, bytes);
        column[k] = (int64_t *)PyBytes_AS_STRING(bytes);
    }
    const int64_t *end_ops = ends.buf;
    size_t n_ends = (size_t)ends.len / 8, frame = 0, at[8] = {0};
    Py_ssize_t j = 0;
    for (Py_ssize_t i = start; i < stop; i++) {
        if (!(kinds >> rows[i] & 1))
            continue;
        while (frame < n_ends && end_ops[frame] < i)
            frame++;
        column[0][j] = AT(c->call_nos, int64_t)[i];
        column[1][j] = AT(c->name_ids, uint32_t)[i];
        column[2][j] = first_frame + (int64_t)frame;
        for (Py_ssize_t k = 0; k < logs; k++) {
            const int64_t *pairs = log[k].buf;
            size_t n = (size_t)log[k].len / 16;
            while (at[k] < n && pairs[2 * at[k]] < i)
                at[k]++;
            column[3 + k][j] = at[k] ? pairs[2 * (at[k] - 1) + 1] : 0;
        }
        j++;
    }
done:
    for (Py_ssize_t k = 0; k < opened; k++)
        PyBuffer_Release(&log[k]);
    PyBuffer_Release(&ends);
    return out;
}

/*
 * event_values(records, end, start, missing) -> bytes
 *
 * One metric's values from bytes of EventRecord (take_events()): field `end` of each
 * record, less field `start` unless that is -1; `missing` where a field used was not
 * measured (MISSING).  As int64 bytes, or as doubles when `missing` is a float (a column
 * of doubles, whose missing value is NaN).
 */
static PyObject *vm_event_values(PyObject *self, PyObject *args) {
    (void)self;
    Py_buffer records;
    int end, start;
    PyObject *missing_obj;
    if (!PyArg_ParseTuple(args, "y*iiO", &records, &end, &start, &missing_obj))
        return NULL;
    const int fields = (int)(sizeof(EventRecord) / 8), doubles = PyFloat_Check(missing_obj);
    PyObject *out = NULL;
    long long missing = doubles ? 0 : PyLong_AsLongLong(missing_obj);
    double missing_double = doubles ? PyFloat_AS_DOUBLE(missing_obj) : 0.0;
    if (PyErr_Occurred())
        goto done;
    if (records.len % (Py_ssize_t)sizeof(EventRecord) || end < 0 || end >= fields ||
        start < -1 || start >= fields) {
        PyErr_SetString(PyExc_ValueError, "event_values(): not event records, or no such field");
        goto done;
    }
    Py_ssize_t n = records.len / (Py_ssize_t)sizeof(EventRecord);
    out = PyBytes_FromStringAndSize(NULL, n * 8);
    if (!out)
        goto done;
    int64_t *ints = (int64_t *)PyBytes_AS_STRING(out);
    double *reals = (double *)PyBytes_AS_STRING(out);
    const int64_t *r = records.buf;
    for (Py_ssize_t i = 0; i < n; i++, r += fields) {
        int64_t v = r[end];
        if (v != MISSING && start >= 0)
            v = r[start] == MISSING ? MISSING : v - r[start];
        if (doubles)
            reals[i] = v == MISSING ? missing_double : (double)v;
        else
            ints[i] = v == MISSING ? missing : v;
    }
done:
    PyBuffer_Release(&records);
    return out;
}

/* row_counts(start, stop) -> how many of ops [start, stop) have each row kind (ROW_*), counted
   here: a copy of the rows of 10^8 ops would be 100 MB */
static PyObject *Code_row_counts(Code *c, PyObject *args) {
    Py_ssize_t start, stop;
    if (!PyArg_ParseTuple(args, "nn", &start, &stop))
        return NULL;
    if (stop > (Py_ssize_t)c->rows.len)
        stop = (Py_ssize_t)c->rows.len;
    if (start < 0 || start > stop) {
        PyErr_SetString(PyExc_IndexError, "op range out of bounds");
        return NULL;
    }
    if (meta_kept(c, start, "row_counts()"))
        return NULL;
    size_t counts[ROW_LIST_END + 1] = {0};
    const uint8_t *rows = c->rows.data;
    for (Py_ssize_t i = start; i < stop; i++)
        if (rows[i] <= ROW_LIST_END)
            counts[rows[i]]++;
    col_drop(&c->rows, 1, (size_t)start, (size_t)stop, 0);
    PyObject *result = PyTuple_New(ROW_LIST_END + 1);
    for (int k = 0; result && k <= ROW_LIST_END; k++) {
        PyObject *n = PyLong_FromSize_t(counts[k]);
        if (!n) {
            Py_CLEAR(result);
            break;
        }
        PyTuple_SET_ITEM(result, k, n);
    }
    return result;
}

/* An op's index from Python; -1 with an exception set when it is none. */
static Py_ssize_t op_index(Code *c, PyObject *arg) {
    Py_ssize_t i = PyLong_AsSsize_t(arg);
    if (i == -1 && PyErr_Occurred())
        return -1;
    if (i < 0 || i >= (Py_ssize_t)c->ops.len) {
        PyErr_SetString(PyExc_IndexError, "op index out of range");
        return -1;
    }
    return i;
}

/* meta(i) -> (call_no, name_id, row, checkable) of one op */
static PyObject *Code_meta(Code *c, PyObject *arg) {
    Py_ssize_t i = op_index(c, arg);
    if (i < 0 || meta_kept(c, i, "meta()"))
        return NULL;
    return Py_BuildValue("(LIBB)", (long long)AT(c->call_nos, int64_t)[i],
                         AT(c->name_ids, uint32_t)[i], AT(c->rows, uint8_t)[i],
                         AT(c->checkable, uint8_t)[i]);
}

static PyObject *Code_is_direct(Code *c, PyObject *arg) {
    Py_ssize_t i = op_index(c, arg);
    if (i < 0)
        return NULL;
    if (c->once && (size_t)i < c->forgotten) {
        PyErr_Format(PyExc_RuntimeError, "is_direct(): op %zd has run once (once())", i);
        return NULL;
    }
    return PyBool_FromLong(AT(c->ops, Op)[i].proto != PY_OP);
}

/* once(metadata=True): this code runs its ops one time only (a replay of one pass): once
   they have run, they and their arguments leave memory, from the heap too, as the data
   pool's chunks and the arrays in the file do; running them again is an error.  With
   `metadata` false their per-op metadata leaves too (nothing reads it after: a replay's, not
   a profile's, whose tables do), and reading it is an error. */
static PyObject *Code_once(Code *c, PyObject *args) {
    int metadata = 1;
    if (!PyArg_ParseTuple(args, "|p", &metadata))
        return NULL;
    c->once = 1;
    c->once_meta = !metadata;
    Py_RETURN_NONE;
}

/* share_gil(on): whether run() lets other threads run during runs of direct calls */
static PyObject *Code_share_gil(Code *c, PyObject *arg) {
    int on = PyObject_IsTrue(arg);
    if (on < 0)
        return NULL;
    c->share_gil = on;
    Py_RETURN_NONE;
}

static PyObject *Code_get_position(Code *c, void *closure) {
    (void)closure;
    return PyLong_FromSsize_t(c->position);
}

static PyObject *Code_get_in_begin(Code *c, void *closure) {
    (void)closure;
    return PyBool_FromLong(c->in_begin);
}

static int Code_set_in_begin(Code *c, PyObject *value, void *closure) {
    (void)closure;
    int on = value ? PyObject_IsTrue(value) : -1;
    if (on < 0) {
        if (!value)
            PyErr_SetString(PyExc_TypeError, "in_begin cannot be deleted");
        return -1;
    }
    c->in_begin = on;
    return 0;
}

static PyMethodDef Code_methods[] = {
    {"add_proto", (PyCFunction)Code_add_proto, METH_VARARGS,
     "add_proto(address, types, tables, effect=None, result=0) -> id, or -1 when it cannot be "
     "called directly"},
    {"set_sig", (PyCFunction)Code_set_sig, METH_VARARGS,
     "set_sig(sig, proto, name_id, row[, work, lists]): how calls of a trace signature "
     "compile"},
    {"compile", (PyCFunction)Code_compile, METH_VARARGS,
     "compile(calls, slots, nodes, pool, start, thread, in_list, stops=None, "
     "compiling=False) -> stop index"},
    {"memo", (PyCFunction)Code_memo, METH_VARARGS,
     "memo(calls, slots, nodes, index, entry, frame_ends) -> whether later calls like this one "
     "compile to ops of the same entry"},
    {"keep", (PyCFunction)Code_keep, METH_O,
     "keep(data) -> address of a NUL-terminated copy in the data pool, for the next op"},
    {"add_py", (PyCFunction)Code_add_py, METH_VARARGS,
     "add_py(entry_index, call_no, name_id, row, checkable[, work]): an op calling a Python "
     "entry"},
    {"run", (PyCFunction)Code_run, METH_VARARGS, "run(start, end, entries) -> end"},
    {"bracket", (PyCFunction)Code_bracket, METH_VARARGS,
     "bracket(marks, before, after): callbacks around marked ops"},
    {"events", (PyCFunction)Code_events, METH_VARARGS,
     "events(calls, draws, frames, on_full, ring=None) or events(None): what to measure per "
     "event"},
    {"enter_context", (PyCFunction)Code_enter_context, METH_O,
     "enter_context(functions): a context is current, with these QUERY_FUNCTIONS"},
    {"leave_context", (PyCFunction)Code_leave_context, METH_NOARGS,
     "leave_context(): read and delete the current context's queries before it changes"},
    {"frame", (PyCFunction)Code_frame, METH_O,
     "frame(begin): end the open frame event, and with `begin` begin the next"},
    {"take_events", (PyCFunction)Code_take_events, METH_O,
     "take_events(all) -> (calls, draws, frames) measured, read"},
    {"column", (PyCFunction)Code_column, METH_VARARGS,
     "column(name, start, stop) -> memoryview of the op array's type"},
    {"event_rows", (PyCFunction)Code_event_rows, METH_VARARGS,
     "event_rows(start, stop, kinds, frame_ends, first_frame, changes) -> int64 bytes"},
    {"meta", (PyCFunction)Code_meta, METH_O, "meta(i) -> (call_no, name_id, row, checkable)"},
    {"row_counts", (PyCFunction)Code_row_counts, METH_VARARGS,
     "row_counts(start, stop) -> ops of each row kind among ops [start, stop)"},
    {"is_direct", (PyCFunction)Code_is_direct, METH_O, "is_direct(i) -> whether op i is native"},
    {"once", (PyCFunction)Code_once, METH_VARARGS,
     "once(metadata=True): ops leave memory, from the heap too, once they have run, and "
     "without `metadata` their per-op metadata too; running or reading them again is an "
     "error"},
    {"share_gil", (PyCFunction)Code_share_gil, METH_O,
     "share_gil(on): whether run() lets other threads run during runs of direct calls"},
    {NULL, NULL, 0, NULL},
};

static PyGetSetDef Code_getset[] = {
    {"position", (getter)Code_get_position, NULL, "the op running now", NULL},
    {"in_begin", (getter)Code_get_in_begin, (setter)Code_set_in_begin,
     "compiling: a glBegin block is open (compile() opens and closes it too)", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static PySequenceMethods Code_as_sequence = {.sq_length = (lenfunc)Code_len};

static PyTypeObject CodeType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "retrace.replay._vm.Code",
    .tp_basicsize = sizeof(Code),
    .tp_dealloc = (destructor)Code_dealloc,
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC,
    .tp_traverse = (traverseproc)Code_traverse,
    .tp_clear = (inquiry)Code_clear,
    .tp_doc = "Code(file, where, in_heap=16 MiB): a compiled trace: ops, their arguments, the data pool they "
              "point into (in `file`) and per-op metadata.",
    .tp_methods = Code_methods,
    .tp_getset = Code_getset,
    .tp_as_sequence = &Code_as_sequence,
    .tp_new = Code_new,
};

/* A frame end's submission and wait (`frame_fence`): a context's frames are fenced, and the
   wait for the frame before's fence flushes this one too. */
#define GL_SYNC_GPU_COMMANDS_COMPLETE 0x9117
#define GL_SYNC_FLUSH_COMMANDS_BIT 0x1
#define GL_TIMEOUT_IGNORED UINT64_MAX
typedef void *(*FenceSyncFn)(unsigned int, unsigned int);
typedef unsigned int (*ClientWaitSyncFn)(void *, unsigned int, uint64_t);
typedef void (*DeleteSyncFn)(void *);
typedef void (*FlushFn)(void);

/* frame_fence(functions, previous) -> fence: fence the frame (glFenceSync), then wait for
   `previous`, the frame before's fence in the same context, flushing (glClientWaitSync with
   GL_SYNC_FLUSH_COMMANDS_BIT), and delete it; where there is none (0), flush.  `functions`:
   the addresses of glFenceSync, glClientWaitSync, glDeleteSync and glFlush.  One call, as
   three through ctypes cost a frame end more than the driver's work on short frames; the GIL
   goes while the driver waits. */
static PyObject *vm_frame_fence(PyObject *self, PyObject *args) {
    (void)self;
    unsigned long long fence_sync, client_wait_sync, delete_sync, flush, previous;
    if (!PyArg_ParseTuple(args, "(KKKK)K", &fence_sync, &client_wait_sync, &delete_sync, &flush,
                          &previous))
        return NULL;
    if (!fence_sync || !client_wait_sync || !delete_sync || !flush) {
        PyErr_SetString(PyExc_ValueError, "frame_fence() needs the four functions' addresses");
        return NULL;
    }
    void *fence;
    Py_BEGIN_ALLOW_THREADS
    fence = ((FenceSyncFn)(uintptr_t)fence_sync)(GL_SYNC_GPU_COMMANDS_COMPLETE, 0);
    if (previous) {
        void *sync = (void *)(uintptr_t)previous;
        ((ClientWaitSyncFn)(uintptr_t)client_wait_sync)(sync, GL_SYNC_FLUSH_COMMANDS_BIT,
                                                        GL_TIMEOUT_IGNORED);
        ((DeleteSyncFn)(uintptr_t)delete_sync)(sync);
    } else {
        ((FlushFn)(uintptr_t)flush)();
    }
    Py_END_ALLOW_THREADS
    return PyLong_FromUnsignedLongLong((uintptr_t)fence);
}

typedef unsigned int (*GetErrorFn)(void);

/* gl_errors(get_error, most) -> (code, ...): glGetError (at `get_error`) called until it
   answers GL_NO_ERROR, at most `most` times (a lost context answers GL_CONTEXT_LOST for
   ever): the codes it answered, in order. Through ctypes and a Python loop the usual empty
   answer cost a frame end about 1 us. */
static PyObject *vm_gl_errors(PyObject *self, PyObject *args) {
    (void)self;
    unsigned long long address;
    int most;
    if (!PyArg_ParseTuple(args, "Ki", &address, &most))
        return NULL;
    if (!address) {
        PyErr_SetString(PyExc_ValueError, "gl_errors() needs glGetError's address");
        return NULL;
    }
    GetErrorFn get_error = (GetErrorFn)(uintptr_t)address;
    unsigned int code = most > 0 ? get_error() : 0;
    if (!code)
        return PyTuple_New(0);
    PyObject *codes = PyList_New(0);
    for (int i = 0; codes && code;) {
        PyObject *value = PyLong_FromUnsignedLong(code);
        if (!value || PyList_Append(codes, value) < 0)
            Py_CLEAR(codes);
        Py_XDECREF(value);
        code = ++i < most ? get_error() : 0;
    }
    if (!codes)
        return NULL;
    PyObject *result = PyList_AsTuple(codes);
    Py_DECREF(codes);
    return result;
}

/* publish(buffer): from now on every loop writes its progress words (call number, running)
   into `buffer`, a writable buffer of at least 16 bytes (a shared mmap) */
static PyObject *vm_publish(PyObject *self, PyObject *arg) {
    (void)self;
    Py_buffer view;
    if (PyObject_GetBuffer(arg, &view, PyBUF_WRITABLE) < 0)
        return NULL;
    if (view.len < (Py_ssize_t)sizeof own_progress || ((uintptr_t)view.buf & 7)) {
        PyBuffer_Release(&view);
        PyErr_SetString(PyExc_ValueError, "publish() needs 16 aligned, writable bytes");
        return NULL;
    }
    if (progress != own_progress)
        PyBuffer_Release(&progress_view);
    progress_view = view;
    progress = (volatile int64_t *)view.buf;
    progress[PROGRESS_CALL] = -1;
    progress[PROGRESS_RUNNING] = 0;
    Py_RETURN_NONE;
}

static PyMethodDef vm_functions[] = {
    {"event_values", vm_event_values, METH_VARARGS,
     "event_values(records, end, start, missing) -> int64 or double bytes of one metric"},
    {"publish", vm_publish, METH_O,
     "publish(buffer): write (call number running, loop running) as two int64 there"},
    {"gl_errors", vm_gl_errors, METH_VARARGS,
     "gl_errors(get_error, most) -> the codes glGetError at `get_error` answers, at most "
     "`most`, until GL_NO_ERROR"},
    {"frame_fence", vm_frame_fence, METH_VARARGS,
     "frame_fence((fence_sync, client_wait_sync, delete_sync, flush), previous) -> fence: "
     "fence the frame, wait for the frame before's fence (flushing) and delete it, else flush"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef vm_module = {
    PyModuleDef_HEAD_INIT, "_vm", "The compiled trace and its replay loop.", -1, vm_functions,
};

/* What Python must agree on with this file, exported so that it is written once: the
   progress words, the event record's fields and size, what events measure, the functions
   they need, the profiling rows and bracket marks, the parameter types of direct calls. */
static int add_shared(PyObject *m) {
    PyObject *fields = Py_BuildValue("(" 
#define NAME_FORMAT(name) "s"
        EVENT_FIELDS(NAME_FORMAT)
#undef NAME_FORMAT
        ")"
#define NAME(name) , #name
        EVENT_FIELDS(NAME)
#undef NAME
    );
    PyObject *functions = Py_BuildValue("("
#define PAIR_FORMAT(name, type, gl_name, gles_name) "(ss)"
        QUERY_FUNCTIONS(PAIR_FORMAT)
#undef PAIR_FORMAT
        ")"
#define PAIR(name, type, gl_name, gles_name) , gl_name, gles_name
        QUERY_FUNCTIONS(PAIR)
#undef PAIR
    );
    PyObject *missing = PyLong_FromLongLong(MISSING);
    PyObject *timeout_ignored = PyLong_FromUnsignedLongLong(GL_TIMEOUT_IGNORED);
    int failed = !fields || !functions || !missing || !timeout_ignored ||
                 PyModule_AddObjectRef(m, "EVENT_FIELDS", fields) < 0 ||
                 PyModule_AddObjectRef(m, "QUERY_FUNCTIONS", functions) < 0 ||
                 PyModule_AddObjectRef(m, "MISSING", missing) < 0 ||
                 PyModule_AddObjectRef(m, "GL_TIMEOUT_IGNORED", timeout_ignored) < 0;
    Py_XDECREF(fields);
    Py_XDECREF(functions);
    Py_XDECREF(missing);
    Py_XDECREF(timeout_ignored);
    if (failed)
        return -1;
    static const struct {
        const char *name;
        long value;
    } ints[] = {
        {"PROGRESS_CALL", PROGRESS_CALL},
        {"PROGRESS_RUNNING", PROGRESS_RUNNING},
        {"PROGRESS_WORDS", PROGRESS_WORDS},
        {"EVENT_SIZE", sizeof(EventRecord)},
        {"RING_HEAD", RING_HEAD},
        {"OP_ARRAYS_AT", (long)COL_REGION},
        {"MEASURE_CLOCK", M_CLOCK},
        {"MEASURE_GPU_TIMES", M_GPU_TIMES},
        {"MEASURE_PIXELS", M_PIXELS},
        {"MEASURE_MEMORY", M_MEMORY},
        {"MEASURE_DISJOINT", M_DISJOINT},
        {"MEASURE_BUSY", M_BUSY},
        {"GL_SAMPLES_PASSED", GL_SAMPLES_PASSED},
        {"ROW_NONE", ROW_NONE},
        {"ROW_CALL", ROW_CALL},
        {"ROW_DRAW", ROW_DRAW},
        {"ROW_BEGIN", ROW_BEGIN},
        {"ROW_END", ROW_END},
        {"ROW_LIST_END", ROW_LIST_END},
        {"MARK_NONE", MARK_NONE},
        {"MARK_ROWS", MARK_ROWS},
        {"MARK_CHECKABLE", MARK_CHECKABLE},
        {"ARG_I8", A_I8},
        {"ARG_U8", A_U8},
        {"ARG_I16", A_I16},
        {"ARG_U16", A_U16},
        {"ARG_I32", A_I32},
        {"ARG_U32", A_U32},
        {"ARG_I64", A_I64},
        {"ARG_U64", A_U64},
        {"ARG_F32", A_F32},
        {"ARG_F64", A_F64},
        {"ARG_PTR", A_PTR},
        {"ARG_PTR_OF", A_PTR_OF},
        {"ARG_NAMES_IN", A_NAMES_IN},
        {"ARG_NAMES_OUT", A_NAMES_OUT},
        {"ARG_STRINGS", A_STRINGS},
        {"MOST_OUTPUT_VALUES", MOST_VALUES},
        {"GL_SYNC_FLUSH_COMMANDS_BIT", GL_SYNC_FLUSH_COMMANDS_BIT},
    };
    for (size_t i = 0; i < sizeof ints / sizeof *ints; i++)
        if (PyModule_AddIntConstant(m, ints[i].name, ints[i].value) < 0)
            return -1;
    return 0;
}

PyMODINIT_FUNC PyInit__vm(void) {
    if (PyType_Ready(&CodeType) < 0 || PyType_Ready(&LocationsType) < 0 ||
        PyType_Ready(&ProgramInUseType) < 0)
        return NULL;
    if (!(str_program = PyUnicode_InternFromString("program")))
        return NULL;
    PyObject *m = PyModule_Create(&vm_module);
    if (!m)
        return NULL;
    Py_INCREF(&CodeType);
    if (PyModule_AddObjectRef(m, "Locations", (PyObject *)&LocationsType) < 0 ||
        PyModule_AddObjectRef(m, "ProgramInUse", (PyObject *)&ProgramInUseType) < 0 ||
        PyModule_AddObject(m, "Code", (PyObject *)&CodeType) < 0 ||
        PyModule_AddIntConstant(m, "NATIVE_CALLS", NATIVE_CALLS) < 0 ||
        PyModule_AddIntConstant(m, "CALL_SIZE", sizeof(CallRec)) < 0 ||
        PyModule_AddIntConstant(m, "NODE_SIZE", sizeof(Node)) < 0 ||
        PyModule_AddIntConstant(m, "SIG_SKIP", SIG_SKIP) < 0 ||
        PyModule_AddIntConstant(m, "NO_ENTRY", NO_ENTRY) < 0 ||
        PyModule_AddIntConstant(m, "SIG_SLOW", SIG_SLOW) < 0 || add_shared(m) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
