/*
 * _scanner: the hot loop of the trace reader.
 *
 * Turns apitrace's decompressed event stream into flat, fixed-size records
 * (calls, argument slots, value nodes, a byte pool for strings and blobs) that
 * Python wraps as numpy arrays without creating an object per call or value.
 * Only signature definitions -- a few hundred per trace -- become Python
 * objects.
 *
 * Calls are delivered in the order they *leave* (return), which is the order
 * apitrace's parser delivers them and the order glretrace replays them; a call
 * that another thread's call overtook stays pending until its leave event.
 * Each pending call owns scratch buffers; on leave its records are appended to
 * the output batch, which Python takes with take().
 *
 * Data arrives in arbitrary chunks.  An event that runs past the end of the
 * buffered data is rolled back (every side effect of the partial event is
 * undone) and parsed again once more data has been fed.
 *
 * feed() scans without holding the GIL, so that a reader on another thread
 * scans while the replay loop runs: the GIL is taken back (hold()) only by
 * the code that makes Python objects (definitions, errors), until the next
 * event begins.
 */

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

#include "records.h"

/* retrace.trace.flags.CallFlag values set by the reader itself. */
#define FLAG_FAKE 1u
#define FLAG_INCOMPLETE 64u

#define MAX_DEPTH 64
/* nargs of the scratch call that absorbs a leave event without its enter */
#define STRAY UINT32_MAX

typedef struct {
    char *data;
    size_t len, cap;
} Buf;

/* PyErr_NoMemory(), also where scan() runs without the GIL. */
static void no_memory(void) {
    PyGILState_STATE gil = PyGILState_Ensure();
    PyErr_NoMemory();
    PyGILState_Release(gil);
}

static int buf_reserve(Buf *b, size_t extra) {
    if (b->len + extra <= b->cap)
        return 0;
    size_t cap = b->cap ? b->cap : 256;
    while (cap < b->len + extra)
        cap *= 2;
    char *d = realloc(b->data, cap);
    if (!d) {
        no_memory();
        return -1;
    }
    b->data = d;
    b->cap = cap;
    return 0;
}

static int buf_append(Buf *b, const void *p, size_t n) {
    if (buf_reserve(b, n) < 0)
        return -1;
    memcpy(b->data + b->len, p, n);
    b->len += n;
    return 0;
}

/* A buffer that grew for one large event (a blob of megabytes: a texture, a buffer's
 * data) shrinks back to this once it holds less, so that the scanner does not keep each
 * of its copies of that event (input, call, batch) for the rest of the run. */
#define BUF_KEEP ((size_t)4 << 20)

static void buf_trim(Buf *b) {
    if (b->cap <= BUF_KEEP || b->len > BUF_KEEP)
        return;
    char *d = realloc(b->data, BUF_KEEP); /* keeps the first len bytes */
    if (d) {
        b->data = d;
        b->cap = BUF_KEEP;
    }
}

static void buf_free(Buf *b) {
    free(b->data);
    b->data = NULL;
    b->len = b->cap = 0;
}

typedef struct {
    CallRec rec;      /* node_start/slot_start/bt_start unused while pending */
    Buf nodes, slots, pool, bt;
} Pending;

/* Signature tables: per id, -1 = not yet defined, else the member/arg count. */
typedef struct {
    int64_t *count;
    size_t size;
} Table;

static int64_t table_get(Table *t, uint64_t id) {
    return id < t->size ? t->count[id] : -1;
}

/* Signature ids are small, dense numbers; a larger one is damage. */
#define MAX_SIG_ID (1u << 24)

static int table_set(Table *t, uint64_t id, int64_t value) {
    if (id >= t->size) {
        size_t size = t->size ? t->size : 64;
        while (size <= id)
            size *= 2;
        int64_t *c = realloc(t->count, size * sizeof *c);
        if (!c) {
            no_memory();
            return -1;
        }
        for (size_t i = t->size; i < size; ++i)
            c[i] = -1;
        t->count = c;
        t->size = size;
    }
    t->count[id] = value;
    return 0;
}

enum { K_CALL, K_STRUCT, K_ENUM, K_BITMASK, K_FRAME, K_COUNT };

typedef struct {
    PyObject_HEAD
    unsigned version;
    Table tables[K_COUNT];   /* K_ENUM holds the value of version < 3 enums */
    PyObject *defs;          /* new definitions since the last take() */
    uint64_t next_call_no;

    Buf in;                  /* unconsumed input */
    uint64_t in_offset;      /* stream offset of in.data[0] */
    size_t need;             /* bytes the last partial event is known to need */

    Pending *pending;
    size_t npending, cappending;

    Buf out_calls, out_slots, out_nodes, out_pool, out_bt;
    size_t ncalls_out;

    /* rollback log for the event being parsed */
    struct { int kind; uint64_t id; } *log;
    size_t nlog, caplog;
    Py_ssize_t ndefs_before;

    /* parse position */
    const uint8_t *p, *end;
    Pending *cur;
    int depth;
    /* error state: set when a format error was found */
    PyObject *error;         /* (offset, message) or None */
    PyThreadState *released; /* while scan() runs without the GIL */
} Scanner;

/* Take the GIL back, for code that makes Python objects; scan() lets it go again at the
   next event. */
static void hold(Scanner *s) {
    if (s->released) {
        PyEval_RestoreThread(s->released);
        s->released = NULL;
    }
}

/* Parse results. */
#define OK 0
#define MORE 1   /* ran out of data: roll back and wait for more */
#define BAD 2    /* format error: self->error is set */
#define FAIL 3   /* Python exception (out of memory) */

#define TRY(x) do { int _r = (x); if (_r != OK) return _r; } while (0)

static int bad(Scanner *s, const char *fmt, ...) {
    char msg[256];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    hold(s);
    uint64_t off = s->in_offset + (uint64_t)(s->p - (const uint8_t *)s->in.data);
    Py_XDECREF(s->error);
    s->error = Py_BuildValue("(Ks)", (unsigned long long)off, msg);
    return s->error ? BAD : FAIL;
}

static inline int rd_byte(Scanner *s, int *c) {
    if (s->p >= s->end)
        return MORE;
    *c = *s->p++;
    return OK;
}

static inline int rd_uint(Scanner *s, uint64_t *value) {
    uint64_t v = 0;
    unsigned shift = 0;
    for (;;) {
        if (s->p >= s->end)
            return MORE;
        uint8_t c = *s->p++;
        if (shift < 64)
            v |= (uint64_t)(c & 0x7f) << shift;
        shift += 7;
        if (!(c & 0x80))
            break;
        if (shift > 70)
            return bad(s, "variable-length integer longer than 10 bytes");
    }
    *value = v;
    return OK;
}

static inline int rd_bytes(Scanner *s, uint64_t n, const uint8_t **data) {
    if ((uint64_t)(s->end - s->p) < n) {
        s->need = (size_t)(s->p - (const uint8_t *)s->in.data) + n;
        return MORE;
    }
    *data = s->p;
    s->p += n;
    return OK;
}

static int rd_string_obj(Scanner *s, PyObject **obj) {
    uint64_t n;
    const uint8_t *d;
    TRY(rd_uint(s, &n));
    TRY(rd_bytes(s, n, &d));
    hold(s);
    *obj = PyBytes_FromStringAndSize((const char *)d, (Py_ssize_t)n);
    return *obj ? OK : FAIL;
}

/* A signed integer written as a typed value (enum values, version < 3 enums). */
static int rd_sint(Scanner *s, int64_t *value) {
    int c;
    uint64_t u;
    TRY(rd_byte(s, &c));
    if (c != T_SINT && c != T_UINT)
        return bad(s, "expected an integer, found type byte 0x%02x", c);
    TRY(rd_uint(s, &u));
    *value = c == T_SINT ? (int64_t)(0 - u) : (int64_t)u;
    return OK;
}

static int define(Scanner *s, int kind, uint64_t id, int64_t count, PyObject *def) {
    hold(s); /* (its callers held it to make `def`) */
    if (!def)
        return FAIL;
    if (id >= MAX_SIG_ID) {
        Py_DECREF(def);
        return bad(s, "signature id %llu is too large", (unsigned long long)id);
    }
    int rc = PyList_Append(s->defs, def);
    Py_DECREF(def);
    if (rc < 0 || table_set(&s->tables[kind], id, count) < 0)
        return FAIL;
    if (s->nlog == s->caplog) {
        size_t cap = s->caplog ? s->caplog * 2 : 16;
        void *l = realloc(s->log, cap * sizeof *s->log);
        if (!l) {
            no_memory();
            return FAIL;
        }
        s->log = l;
        s->caplog = cap;
    }
    s->log[s->nlog].kind = kind;
    s->log[s->nlog].id = id;
    s->nlog++;
    return OK;
}

/* Reads a list of `count` strings into a new tuple. */
static int rd_names(Scanner *s, uint64_t count, PyObject **tuple) {
    if (count > (uint64_t)(s->end - s->p) && count > (1u << 20))
        return bad(s, "implausible name count %llu", (unsigned long long)count);
    hold(s);
    PyObject *t = PyTuple_New((Py_ssize_t)count);
    if (!t)
        return FAIL;
    for (uint64_t i = 0; i < count; ++i) {
        PyObject *name;
        int r = rd_string_obj(s, &name);
        if (r != OK) {
            Py_DECREF(t);
            return r;
        }
        PyTuple_SET_ITEM(t, (Py_ssize_t)i, name);
    }
    *tuple = t;
    return OK;
}

static int parse_call_sig(Scanner *s, uint32_t *id_out, int64_t *nargs) {
    uint64_t id, count;
    TRY(rd_uint(s, &id));
    int64_t n = table_get(&s->tables[K_CALL], id);
    if (n < 0) {
        PyObject *name, *args;
        TRY(rd_string_obj(s, &name));
        int r = rd_uint(s, &count);
        if (r == OK)
            r = rd_names(s, count, &args);
        if (r != OK) {
            Py_DECREF(name);
            return r;
        }
        n = (int64_t)count;
        TRY(define(s, K_CALL, id, n, Py_BuildValue("(sKNN)", "call", (unsigned long long)id, name, args)));
    }
    *id_out = (uint32_t)id;
    *nargs = n;
    return OK;
}

static int parse_value(Scanner *s);

static int push_node(Scanner *s, uint8_t tag, uint32_t aux, uint64_t v, size_t *index) {
    Buf *b = &s->cur->nodes;
    if (buf_reserve(b, sizeof(Node)) < 0)
        return FAIL;
    Node *n = (Node *)(b->data + b->len);
    memset(n, 0, sizeof *n);
    n->tag = tag;
    n->aux = aux;
    n->v.u = v;
    if (index)
        *index = b->len / sizeof(Node);
    b->len += sizeof(Node);
    return OK;
}

static inline Node *node_at(Scanner *s, size_t index) {
    return (Node *)s->cur->nodes.data + index;
}

/* Strings, blobs and wide strings live in the pool; the node holds offset and length. */
static int pool_node(Scanner *s, uint8_t tag, const void *data, uint64_t len, size_t nbytes) {
    if (len > UINT32_MAX)
        return bad(s, "string or blob of %llu bytes is too large", (unsigned long long)len);
    Buf *pool = &s->cur->pool;
    uint64_t off = pool->len;
    if (buf_append(pool, data, nbytes) < 0)
        return FAIL;
    return push_node(s, tag, (uint32_t)len, off, NULL);
}

static int parse_wstring(Scanner *s) {
    uint64_t len;
    TRY(rd_uint(s, &len));
    if (len > (uint64_t)(s->end - s->p)) {  /* each character takes at least one byte */
        s->need = (size_t)(s->p - (const uint8_t *)s->in.data) + len;
        return MORE;
    }
    if (len > UINT32_MAX / 4)
        return bad(s, "wide string too long");
    Buf *pool = &s->cur->pool;
    uint64_t off = pool->len;
    if (buf_reserve(pool, len * 4) < 0)
        return FAIL;
    for (uint64_t i = 0; i < len; ++i) {
        uint64_t c;
        TRY(rd_uint(s, &c));
        uint32_t w = (uint32_t)c;
        memcpy(pool->data + pool->len, &w, 4);
        pool->len += 4;
    }
    return push_node(s, T_WSTRING, (uint32_t)len, off, NULL);
}

static int parse_enum(Scanner *s) {
    uint64_t id, count;
    int64_t value;
    TRY(rd_uint(s, &id));
    int64_t known = table_get(&s->tables[K_ENUM], id);
    if (s->version >= 3) {
        if (known < 0) {
            TRY(rd_uint(s, &count));
            if (count > (1u << 20))
                return bad(s, "implausible enum size %llu", (unsigned long long)count);
            hold(s);
            PyObject *values = PyTuple_New((Py_ssize_t)count);
            if (!values)
                return FAIL;
            for (uint64_t i = 0; i < count; ++i) {
                PyObject *name;
                int64_t v;
                int r = rd_string_obj(s, &name);
                if (r == OK && (r = rd_sint(s, &v)) != OK)
                    Py_DECREF(name);
                if (r != OK) {
                    Py_DECREF(values);
                    return r;
                }
                PyTuple_SET_ITEM(values, (Py_ssize_t)i, Py_BuildValue("(NL)", name, (long long)v));
            }
            TRY(define(s, K_ENUM, id, 0, Py_BuildValue("(sKN)", "enum", (unsigned long long)id, values)));
        }
        TRY(rd_sint(s, &value));
    } else {
        /* version < 3: each enum signature is one name with its value */
        if (known < 0) {
            PyObject *name;
            TRY(rd_string_obj(s, &name));
            int r = rd_sint(s, &value);
            if (r != OK) {
                Py_DECREF(name);
                return r;
            }
            TRY(define(s, K_ENUM, id, value,
                       Py_BuildValue("(sK((NL)))", "enum", (unsigned long long)id, name, (long long)value)));
        } else {
            value = known;
        }
    }
    if (id > UINT32_MAX)
        return bad(s, "enum signature id too large");
    return push_node(s, T_ENUM, (uint32_t)id, (uint64_t)value, NULL);
}

static int parse_bitmask(Scanner *s) {
    uint64_t id, count, value;
    TRY(rd_uint(s, &id));
    if (table_get(&s->tables[K_BITMASK], id) < 0) {
        TRY(rd_uint(s, &count));
        if (count > (1u << 20))
            return bad(s, "implausible bitmask size %llu", (unsigned long long)count);
        hold(s);
        PyObject *flags = PyTuple_New((Py_ssize_t)count);
        if (!flags)
            return FAIL;
        for (uint64_t i = 0; i < count; ++i) {
            PyObject *name;
            uint64_t v;
            int r = rd_string_obj(s, &name);
            if (r == OK && (r = rd_uint(s, &v)) != OK)
                Py_DECREF(name);
            if (r != OK) {
                Py_DECREF(flags);
                return r;
            }
            PyTuple_SET_ITEM(flags, (Py_ssize_t)i, Py_BuildValue("(NK)", name, (unsigned long long)v));
        }
        TRY(define(s, K_BITMASK, id, 0, Py_BuildValue("(sKN)", "bitmask", (unsigned long long)id, flags)));
    }
    TRY(rd_uint(s, &value));
    return push_node(s, T_BITMASK, (uint32_t)id, value, NULL);
}

/* Arrays, structs and reprs: the node is followed by its children; v.u is
 * the number of nodes in the subtree below it, so readers can skip it. */
static int parse_children(Scanner *s, uint8_t tag, uint32_t aux, uint64_t count) {
    size_t index;
    if (++s->depth > MAX_DEPTH)
        return bad(s, "values nested more than %d deep", MAX_DEPTH);
    TRY(push_node(s, tag, aux, 0, &index));
    for (uint64_t i = 0; i < count; ++i)
        TRY(parse_value(s));
    s->depth--;
    node_at(s, index)->v.u = s->cur->nodes.len / sizeof(Node) - index - 1;
    return OK;
}

static int parse_struct(Scanner *s) {
    uint64_t id, count;
    TRY(rd_uint(s, &id));
    int64_t n = table_get(&s->tables[K_STRUCT], id);
    if (n < 0) {
        PyObject *name, *members;
        TRY(rd_string_obj(s, &name));
        int r = rd_uint(s, &count);
        if (r == OK)
            r = rd_names(s, count, &members);
        if (r != OK) {
            Py_DECREF(name);
            return r;
        }
        n = (int64_t)count;
        TRY(define(s, K_STRUCT, id, n, Py_BuildValue("(sKNN)", "struct", (unsigned long long)id, name, members)));
    }
    return parse_children(s, T_STRUCT, (uint32_t)id, (uint64_t)n);
}

static int parse_value(Scanner *s) {
    int c;
    uint64_t u;
    const uint8_t *d;
    TRY(rd_byte(s, &c));
    switch (c) {
    case T_NULL:
    case T_FALSE:
    case T_TRUE:
        return push_node(s, (uint8_t)c, 0, 0, NULL);
    case T_SINT:
        TRY(rd_uint(s, &u));
        return push_node(s, T_SINT, 0, 0 - u, NULL);
    case T_UINT:
    case T_OPAQUE:
        TRY(rd_uint(s, &u));
        return push_node(s, (uint8_t)c, 0, u, NULL);
    case T_FLOAT: {
        float f;
        TRY(rd_bytes(s, 4, &d));
        memcpy(&f, d, 4);
        Node n;
        n.v.d = f;
        return push_node(s, T_FLOAT, 0, n.v.u, NULL);
    }
    case T_DOUBLE:
        TRY(rd_bytes(s, 8, &d));
        memcpy(&u, d, 8);
        return push_node(s, T_DOUBLE, 0, u, NULL);
    case T_STRING:
    case T_BLOB:
        TRY(rd_uint(s, &u));
        TRY(rd_bytes(s, u, &d));
        return pool_node(s, (uint8_t)c, d, u, (size_t)u);
    case T_WSTRING:
        return parse_wstring(s);
    case T_ENUM:
        return parse_enum(s);
    case T_BITMASK:
        return parse_bitmask(s);
    case T_ARRAY:
        TRY(rd_uint(s, &u));
        if (u > UINT32_MAX)
            return bad(s, "array of %llu elements is too large", (unsigned long long)u);
        return parse_children(s, T_ARRAY, (uint32_t)u, u);
    case T_STRUCT:
        return parse_struct(s);
    case T_REPR:
        return parse_children(s, T_REPR, 0, 2);
    default:
        s->p--;
        return bad(s, "unknown value type 0x%02x", c);
    }
}

static int parse_frame(Scanner *s, uint64_t *id_out) {
    uint64_t id;
    TRY(rd_uint(s, &id));
    if (table_get(&s->tables[K_FRAME], id) < 0) {
        hold(s);
        PyObject *parts[3] = {NULL, NULL, NULL};  /* module, function, file name */
        long long line = -1, offset = -1;
        int r = OK, c;
        for (;;) {
            uint64_t u;
            if ((r = rd_byte(s, &c)) != OK || c == 0)
                break;
            if (c >= 1 && c <= 3) {
                PyObject *str;
                if ((r = rd_string_obj(s, &str)) != OK)
                    break;
                Py_XSETREF(parts[c - 1], str);
            } else if (c == 4 || c == 5) {
                if ((r = rd_uint(s, &u)) != OK)
                    break;
                if (c == 4)
                    line = (long long)u;
                else
                    offset = (long long)u;
            } else {
                s->p--;
                r = bad(s, "unknown backtrace detail 0x%02x", c);
                break;
            }
        }
        if (r != OK) {
            for (int i = 0; i < 3; ++i)
                Py_XDECREF(parts[i]);
            return r;
        }
        for (int i = 0; i < 3; ++i)
            if (!parts[i]) {
                parts[i] = Py_None;
                Py_INCREF(Py_None);
            }
        TRY(define(s, K_FRAME, id, 0,
                   Py_BuildValue("(sKNNNLL)", "frame", (unsigned long long)id, parts[0], parts[1], parts[2], line, offset)));
    }
    *id_out = id;
    return OK;
}

static int parse_details(Scanner *s) {
    Pending *call = s->cur;
    for (;;) {
        int c;
        uint64_t u;
        TRY(rd_byte(s, &c));
        switch (c) {
        case 0:
            return OK;
        case 1: {  /* argument */
            TRY(rd_uint(s, &u));
            int stray = call->rec.nargs == STRAY;
            if (u >= call->rec.nargs && !stray)
                return bad(s, "argument index %llu out of range (the signature has %u)",
                           (unsigned long long)u, call->rec.nargs);
            int32_t index = (int32_t)(call->nodes.len / sizeof(Node));
            TRY(parse_value(s));
            if (!stray)
                ((int32_t *)call->slots.data)[u] = index;
            break;
        }
        case 2: {  /* return value */
            int32_t index = (int32_t)(call->nodes.len / sizeof(Node));
            TRY(parse_value(s));
            call->rec.ret = index;
            break;
        }
        case 3:  /* thread number (version < 4) */
            TRY(rd_uint(s, &u));
            call->rec.thread = (uint32_t)u;
            break;
        case 4: {  /* backtrace */
            TRY(rd_uint(s, &u));
            if (u > (1u << 16))
                return bad(s, "implausible backtrace depth %llu", (unsigned long long)u);
            for (uint64_t i = 0; i < u; ++i) {
                uint64_t id;
                TRY(parse_frame(s, &id));
                uint32_t id32 = (uint32_t)id;
                if (buf_append(&call->bt, &id32, 4) < 0)
                    return FAIL;
            }
            break;
        }
        case 5:  /* flags */
            TRY(rd_uint(s, &u));
            if (u & 1)
                call->rec.flags |= FLAG_FAKE;
            break;
        default:
            s->p--;
            return bad(s, "unknown call detail 0x%02x", c);
        }
    }
}

static void pending_free(Pending *p) {
    buf_free(&p->nodes);
    buf_free(&p->slots);
    buf_free(&p->pool);
    buf_free(&p->bt);
}

static int init_slots(Pending *p, uint32_t nargs) {
    p->slots.len = 0;
    if (buf_reserve(&p->slots, (size_t)nargs * 4) < 0)
        return FAIL;
    memset(p->slots.data, 0xff, (size_t)nargs * 4);
    p->slots.len = (size_t)nargs * 4;
    return OK;
}

/* Appends a finished call to the output batch. */
static int emit(Scanner *s, Pending *p) {
    CallRec rec = p->rec;
    size_t pool_base = s->out_pool.len;
    rec.node_start = (uint32_t)(s->out_nodes.len / sizeof(Node));
    rec.node_count = (uint32_t)(p->nodes.len / sizeof(Node));
    rec.slot_start = (uint32_t)(s->out_slots.len / 4);
    rec.bt_start = (uint32_t)(s->out_bt.len / 4);
    rec.bt_count = (uint32_t)(p->bt.len / 4);
    if (pool_base == 0 && p->pool.len > BUF_KEEP) {
        /* A call of megabytes (a texture) is usually alone in its batch: its pool becomes
         * the batch's, instead of a second copy of it at once. */
        Buf empty = s->out_pool;
        s->out_pool = p->pool;
        p->pool = empty;
    } else if (buf_append(&s->out_pool, p->pool.data, p->pool.len) < 0)
        return FAIL;
    if (buf_append(&s->out_calls, &rec, sizeof rec) < 0 ||
        buf_append(&s->out_slots, p->slots.data, p->slots.len) < 0 ||
        buf_append(&s->out_bt, p->bt.data, p->bt.len) < 0 ||
        buf_reserve(&s->out_nodes, p->nodes.len) < 0)
        return FAIL;
    Node *dst = (Node *)(s->out_nodes.data + s->out_nodes.len);
    memcpy(dst, p->nodes.data, p->nodes.len);
    if (pool_base && p->pool.len) {
        for (uint32_t i = 0; i < rec.node_count; ++i) {
            uint8_t t = dst[i].tag;
            if (t == T_STRING || t == T_BLOB || t == T_WSTRING)
                dst[i].v.u += pool_base;
        }
    }
    s->out_nodes.len += p->nodes.len;
    s->ncalls_out++;
    return OK;
}

static Pending *new_pending(Scanner *s) {
    if (s->npending == s->cappending) {
        size_t cap = s->cappending ? s->cappending * 2 : 8;
        Pending *p = realloc(s->pending, cap * sizeof *p);
        if (!p) {
            no_memory();
            return NULL;
        }
        memset(p + s->cappending, 0, (cap - s->cappending) * sizeof *p);
        s->pending = p;
        s->cappending = cap;
    }
    Pending *p = &s->pending[s->npending++];
    p->nodes.len = p->slots.len = p->pool.len = p->bt.len = 0;
    memset(&p->rec, 0, sizeof p->rec);
    p->rec.ret = -1;
    return p;
}

/* Removes pending call i, keeping the others in enter order and recycling its buffers. */
static void drop_pending(Scanner *s, size_t i) {
    Pending done = s->pending[i];
    memmove(&s->pending[i], &s->pending[i + 1], (s->npending - i - 1) * sizeof done);
    buf_trim(&done.nodes);
    buf_trim(&done.pool);
    s->pending[--s->npending] = done;
}

/* Undoes the signature definitions made by a partial event. */
static int rollback_defs(Scanner *s) {
    for (size_t i = 0; i < s->nlog; ++i)
        s->tables[s->log[i].kind].count[s->log[i].id] = -1;
    s->nlog = 0;
    hold(s);
    return PyList_SetSlice(s->defs, s->ndefs_before, PyList_GET_SIZE(s->defs), NULL);
}

static int parse_enter(Scanner *s, uint64_t offset) {
    uint64_t thread = 0;
    uint32_t sig;
    int64_t nargs;
    if (s->version >= 4)
        TRY(rd_uint(s, &thread));
    Pending *p = new_pending(s);
    if (!p)
        return FAIL;
    s->cur = p;
    int r = parse_call_sig(s, &sig, &nargs);
    if (r == OK) {
        p->rec.no = s->next_call_no;
        p->rec.offset = offset;
        p->rec.sig = sig;
        p->rec.thread = (uint32_t)thread;
        p->rec.nargs = (uint32_t)nargs;
        r = init_slots(p, (uint32_t)nargs);
    }
    if (r == OK)
        r = parse_details(s);
    if (r != OK) {
        s->npending--;
        return r;
    }
    s->next_call_no++;
    return OK;
}

static int parse_leave(Scanner *s) {
    uint64_t no;
    TRY(rd_uint(s, &no));
    size_t i;
    for (i = 0; i < s->npending; ++i)
        if (s->pending[i].rec.no == no)
            break;
    if (i == s->npending) {
        /* A leave without its enter: parse its details into a scratch call and drop them. */
        Pending *p = new_pending(s);
        if (!p)
            return FAIL;
        p->rec.nargs = STRAY;
        s->cur = p;
        int r = parse_details(s);
        s->npending--;
        return r;
    }
    Pending *p = &s->pending[i];
    /* Save what the leave event may change, to roll back a partial event. */
    CallRec saved = p->rec;
    size_t nodes = p->nodes.len, pool = p->pool.len, bt = p->bt.len;
    int32_t slots_small[32];
    int32_t *slots_saved = p->rec.nargs <= 32 ? slots_small : malloc(p->slots.len + 1);
    if (!slots_saved) {
        no_memory();
        return FAIL;
    }
    memcpy(slots_saved, p->slots.data, p->slots.len);
    s->cur = p;
    int r = parse_details(s);
    if (r == OK) {
        r = emit(s, p);
        if (r == OK)
            drop_pending(s, i);
    } else {
        p->rec = saved;
        p->nodes.len = nodes;
        p->pool.len = pool;
        p->bt.len = bt;
        memcpy(p->slots.data, slots_saved, p->slots.len);
    }
    if (slots_saved != slots_small)
        free(slots_saved);
    return r;
}

/* Parses as many whole events as the buffered input holds. */
static int scan(Scanner *s) {
    const uint8_t *base = (const uint8_t *)s->in.data;
    s->p = base;
    s->end = base + s->in.len;
    int r = OK;
    while (s->p < s->end) {
        if (!s->released)
            s->released = PyEval_SaveThread();
        const uint8_t *start = s->p;
        uint64_t offset = s->in_offset + (uint64_t)(start - base);
        int c = *s->p++;
        s->nlog = 0;
        s->ndefs_before = PyList_GET_SIZE(s->defs);
        s->depth = 0;
        s->need = 0;
        if (c == 0)
            r = parse_enter(s, offset);
        else if (c == 1)
            r = parse_leave(s);
        else {
            s->p--;
            r = bad(s, "unknown event type 0x%02x", c);
        }
        if (r != OK) {
            if (r == MORE || r == BAD)
                if (rollback_defs(s) < 0)
                    r = FAIL;
            s->p = start;
            break;
        }
    }
    hold(s);
    size_t used = (size_t)(s->p - base);
    memmove(s->in.data, s->in.data + used, s->in.len - used);
    s->in.len -= used;
    buf_trim(&s->in);
    s->in_offset += used;
    if (r != MORE)
        s->need = 0;
    else if (s->need)
        s->need -= used;
    return r == MORE ? OK : r;
}

/* ---- Python interface ---- */

static int Scanner_init(Scanner *self, PyObject *args, PyObject *kwds) {
    static char *kwlist[] = {"version", "offset", NULL};
    unsigned version;
    unsigned long long offset = 0;
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "I|K", kwlist, &version, &offset))
        return -1;
    self->version = version;
    self->in_offset = offset;
    Py_XSETREF(self->defs, PyList_New(0));
    Py_XSETREF(self->error, Py_NewRef(Py_None));
    return self->defs ? 0 : -1;
}

static void Scanner_dealloc(Scanner *self) {
    for (int k = 0; k < K_COUNT; ++k)
        free(self->tables[k].count);
    for (size_t i = 0; i < self->cappending; ++i)
        pending_free(&self->pending[i]);
    free(self->pending);
    free(self->log);
    buf_free(&self->in);
    buf_free(&self->out_calls);
    buf_free(&self->out_slots);
    buf_free(&self->out_nodes);
    buf_free(&self->out_pool);
    buf_free(&self->out_bt);
    Py_XDECREF(self->defs);
    Py_XDECREF(self->error);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static PyObject *Scanner_feed(Scanner *self, PyObject *arg) {
    Py_buffer view;
    if (self->error != Py_None) {
        PyErr_SetString(PyExc_RuntimeError, "feed() after a format error");
        return NULL;
    }
    if (PyObject_GetBuffer(arg, &view, PyBUF_SIMPLE) < 0)
        return NULL;
    int rc = buf_append(&self->in, view.buf, (size_t)view.len);
    PyBuffer_Release(&view);
    if (rc < 0)
        return NULL;
    /* A partial event that is known to need more bytes than are buffered waits. */
    if (self->need && self->in.len < self->need)
        return PyLong_FromSize_t(self->ncalls_out);
    if (scan(self) == FAIL)
        return NULL;
    return PyLong_FromSize_t(self->ncalls_out);
}

static PyObject *Scanner_finish(Scanner *self, PyObject *unused) {
    /* Calls that entered but never left are delivered in enter order, marked incomplete. */
    for (size_t i = 0; i < self->npending; ++i) {
        Pending *p = &self->pending[i];
        p->rec.flags |= FLAG_INCOMPLETE;
        if (emit(self, p) != OK)
            return NULL;
    }
    self->npending = 0;
    return PyLong_FromSize_t(self->ncalls_out);
}

/* The memory of a large taken buffer, handed to Python without a copy: a read-only
 * buffer that frees it when the last view of it goes. */
typedef struct {
    PyObject_HEAD
    char *data;
    Py_ssize_t len;
} Taken;

static void Taken_dealloc(Taken *self) {
    free(self->data);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static int Taken_getbuffer(Taken *self, Py_buffer *view, int flags) {
    return PyBuffer_FillInfo(view, (PyObject *)self, self->data, self->len, 1, flags);
}

static PyBufferProcs Taken_as_buffer = {(getbufferproc)Taken_getbuffer, NULL};

static PyTypeObject TakenType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "retrace.trace._scanner.Taken",
    .tp_basicsize = sizeof(Taken),
    .tp_dealloc = (destructor)Taken_dealloc,
    .tp_as_buffer = &Taken_as_buffer,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "Memory the scanner handed over (read through memoryview).",
};

/* The buffer's bytes, and a new empty buffer: small ones copied into bytes, large ones
 * (a batch holding a texture) handed over as a memoryview, so that the batch is not held
 * twice while Python takes it. */
static PyObject *take_buf(Buf *b) {
    if (b->len <= BUF_KEEP) {
        PyObject *r = PyBytes_FromStringAndSize(b->data, (Py_ssize_t)b->len);
        b->len = 0;
        buf_trim(b);
        return r;
    }
    Taken *taken = PyObject_New(Taken, &TakenType);
    if (!taken)
        return NULL;
    taken->data = b->data;
    taken->len = (Py_ssize_t)b->len;
    b->data = NULL;
    b->len = b->cap = 0;
    PyObject *view = PyMemoryView_FromObject((PyObject *)taken);
    Py_DECREF(taken);
    return view;
}

static PyObject *Scanner_take(Scanner *self, PyObject *unused) {
    PyObject *defs = self->defs;
    self->defs = PyList_New(0);
    if (!self->defs) {
        self->defs = defs;
        return NULL;
    }
    self->ncalls_out = 0;
    return Py_BuildValue("(NNNNNN)", take_buf(&self->out_calls), take_buf(&self->out_slots),
                         take_buf(&self->out_nodes), take_buf(&self->out_pool),
                         take_buf(&self->out_bt), defs);
}

static PyObject *Scanner_get_error(Scanner *self, void *closure) {
    return Py_NewRef(self->error);
}

static PyObject *Scanner_get_offset(Scanner *self, void *closure) {
    return PyLong_FromUnsignedLongLong(self->in_offset);
}

static PyObject *Scanner_get_buffered(Scanner *self, void *closure) {
    return PyLong_FromSize_t(self->in.len);
}

static PyObject *Scanner_get_pending(Scanner *self, void *closure) {
    return PyLong_FromSize_t(self->npending);
}

static PyMethodDef Scanner_methods[] = {
    {"feed", (PyCFunction)Scanner_feed, METH_O,
     "feed(data) -> calls ready: parse every whole event in the buffered input."},
    {"finish", (PyCFunction)Scanner_finish, METH_NOARGS,
     "finish() -> calls ready: end of stream; pending calls are delivered as incomplete."},
    {"take", (PyCFunction)Scanner_take, METH_NOARGS,
     "take() -> (calls, slots, nodes, pool, backtraces, definitions) and start a new batch."},
    {NULL}
};

static PyGetSetDef Scanner_getset[] = {
    {"error", (getter)Scanner_get_error, NULL, "(offset, message) of a format error, or None", NULL},
    {"offset", (getter)Scanner_get_offset, NULL, "stream offset of the first unparsed byte", NULL},
    {"buffered", (getter)Scanner_get_buffered, NULL, "bytes buffered but not yet parsed", NULL},
    {"pending", (getter)Scanner_get_pending, NULL, "calls entered but not yet left", NULL},
    {NULL}
};

static PyTypeObject ScannerType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "retrace.trace._scanner.Scanner",
    .tp_basicsize = sizeof(Scanner),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "Incremental scanner of apitrace's event stream into flat records.",
    .tp_new = PyType_GenericNew,
    .tp_init = (initproc)Scanner_init,
    .tp_dealloc = (destructor)Scanner_dealloc,
    .tp_methods = Scanner_methods,
    .tp_getset = Scanner_getset,
};

/* calls_of(calls, wanted): the indices of the call records whose signature id has a
   non-zero byte in `wanted` (indexed by signature id), for readers that look for a few
   functions among a batch's calls (replay's read-ahead of viewports) */
static PyObject *calls_of(PyObject *self, PyObject *args) {
    (void)self;
    Py_buffer calls, wanted;
    if (!PyArg_ParseTuple(args, "y*y*", &calls, &wanted))
        return NULL;
    const CallRec *rec = calls.buf;
    const uint8_t *want = wanted.buf;
    Py_ssize_t count = calls.len / (Py_ssize_t)sizeof(CallRec);
    PyObject *found = PyList_New(0);
    for (Py_ssize_t i = 0; found && i < count; i++) {
        if (rec[i].sig >= (uint64_t)wanted.len || !want[rec[i].sig])
            continue;
        PyObject *index = PyLong_FromSsize_t(i);
        if (!index || PyList_Append(found, index) < 0)
            Py_CLEAR(found);
        Py_XDECREF(index);
    }
    PyBuffer_Release(&calls);
    PyBuffer_Release(&wanted);
    return found;
}

/* Whether call number `no` with CallFlag bits `bits` is in a call set: in one of the
   `n_intervals` sorted, disjoint (start, stop) pairs, or in one of the `n_ranges`
   (start, stop, step, kinds) ranges (kinds 0: every kind of call). */
static int in_call_set(uint64_t no, uint64_t bits, const uint64_t *intervals, size_t n_intervals,
                       const uint64_t *ranges, size_t n_ranges) {
    size_t lo = 0, hi = n_intervals; /* the first interval starting after `no` */
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (intervals[2 * mid] <= no)
            lo = mid + 1;
        else
            hi = mid;
    }
    if (lo && no <= intervals[2 * (lo - 1) + 1])
        return 1;
    for (size_t k = 0; k < n_ranges; k++) {
        const uint64_t *r = ranges + 4 * k;
        if (no >= r[0] && no <= r[1] && (no - r[0]) % r[2] == 0 && (!r[3] || (bits & r[3])))
            return 1;
    }
    return 0;
}

/* calls_in(nos, kinds, flags, intervals, ranges, asked, invert): set to 1 the byte in
   `asked` (writable, one per call) of every call a call set selects, or with `invert` of
   every call it does not.  The calls: their numbers `nos` (uint64) and CallFlag bits, as
   `flags[kinds[i]]` (`kinds`: uint32 per call, an index into the uint64 `flags`; the
   signature or function of each call) or, with `kinds` None, `flags[i]`.  The set: uint64
   `intervals` (start, stop) and `ranges` (start, stop, step, kinds)
   (retrace.trace.callset.CallSet.mark). */
static PyObject *calls_in(PyObject *self, PyObject *args) {
    (void)self;
    Py_buffer nos, kinds = {0}, flags, intervals, ranges, asked;
    PyObject *kinds_obj;
    int invert;
    if (!PyArg_ParseTuple(args, "y*Oy*y*y*w*p", &nos, &kinds_obj, &flags, &intervals, &ranges,
                          &asked, &invert))
        return NULL;
    PyObject *result = NULL;
    if (kinds_obj != Py_None && PyObject_GetBuffer(kinds_obj, &kinds, PyBUF_SIMPLE) < 0)
        goto done;
    Py_ssize_t count = nos.len / 8;
    size_t n_flags = (size_t)flags.len / 8;
    if (nos.len % 8 || asked.len < count || flags.len % 8 || intervals.len % 16 ||
        ranges.len % 32 || (kinds.buf ? kinds.len != count * 4 : (Py_ssize_t)n_flags < count)) {
        PyErr_SetString(PyExc_ValueError, "calls_in(): buffers of the wrong size");
        goto done;
    }
    const uint64_t *no = nos.buf, *bits = flags.buf;
    const uint32_t *kind = kinds.buf;
    uint8_t *out = asked.buf;
    for (Py_ssize_t i = 0; i < count; i++) {
        size_t k = kind ? kind[i] : (size_t)i;
        if (in_call_set(no[i], k < n_flags ? bits[k] : 0, intervals.buf,
                        (size_t)intervals.len / 16, ranges.buf, (size_t)ranges.len / 32) != invert)
            out[i] = 1;
    }
    result = Py_NewRef(Py_None);
done:
    PyBuffer_Release(&nos);
    if (kinds.buf)
        PyBuffer_Release(&kinds);
    PyBuffer_Release(&flags);
    PyBuffer_Release(&intervals);
    PyBuffer_Release(&ranges);
    PyBuffer_Release(&asked);
    return result;
}

static PyMethodDef module_functions[] = {
    {"calls_of", calls_of, METH_VARARGS,
     "calls_of(calls, wanted): indices of the calls whose signature id is marked in wanted"},
    {"calls_in", calls_in, METH_VARARGS,
     "calls_in(nos, kinds, flags, intervals, ranges, asked, invert): mark a call set's calls"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_scanner",
    "C scanner for apitrace's binary event stream.", -1, module_functions,
};

PyMODINIT_FUNC PyInit__scanner(void) {
    if (PyType_Ready(&ScannerType) < 0 || PyType_Ready(&TakenType) < 0)
        return NULL;
    PyObject *m = PyModule_Create(&module);
    if (!m)
        return NULL;
    Py_INCREF(&ScannerType);
    if (PyModule_AddObject(m, "Scanner", (PyObject *)&ScannerType) < 0) {
        Py_DECREF(&ScannerType);
        Py_DECREF(m);
        return NULL;
    }
    /* records.h's field lists as ((name, struct code), ...): Python's view of the records */
#define FIELD_FORMAT(type, name, code) "(ss)"
#define FIELD(type, name, code) , #name, code
    PyObject *call_fields = Py_BuildValue("(" CALL_FIELDS(FIELD_FORMAT) ")" CALL_FIELDS(FIELD));
    PyObject *node_fields = Py_BuildValue("(" NODE_FIELDS(FIELD_FORMAT) ")" NODE_FIELDS(FIELD));
#undef FIELD
#undef FIELD_FORMAT
    int failed = !call_fields || !node_fields ||
                 PyModule_AddObjectRef(m, "CALL_FIELDS", call_fields) < 0 ||
                 PyModule_AddObjectRef(m, "NODE_FIELDS", node_fields) < 0 ||
                 PyModule_AddIntConstant(m, "CALL_SIZE", sizeof(CallRec)) < 0 ||
                 PyModule_AddIntConstant(m, "NODE_SIZE", sizeof(Node)) < 0 ||
                 PyModule_AddIntConstant(m, "RECORD_LAYOUT", RECORD_LAYOUT) < 0;
    Py_XDECREF(call_fields);
    Py_XDECREF(node_fields);
    if (failed) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
