/*
 * _dump: `retrace dump`'s text, formatted in C from the scanner's flat records.
 *
 * apitrace dump formats in C++; formatting value by value in Python made
 * retrace dump five times slower. Python still decides which calls to print
 * (call set, verbose flags: whole arrays at a time) and hands over the
 * signatures' text; this formats the chosen calls of one batch into one bytes
 * object, with apitrace's quirks (see retrace.trace.dump's docstring).
 */

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "records.h"

#define MAX_DEPTH 256 /* nesting the formatter follows; deeper values print as "?" */

/* apitrace dump's options, as bits of format_calls' `style` */
#define STYLE_CALL_NOS 1   /* "N " before each call (--call-nos, the default) */
#define STYLE_THREAD_IDS 2 /* "@T " before each call's name (--thread-ids) */
#define STYLE_ONELINE 4    /* --multiline=no: newlines in strings as \n; no backtrace, no blank line */
#define STYLE_BLOBS 8      /* blobs written to blob_call<N>[_K].bin and named (--blobs) */

typedef struct {
    PyObject *bytes;
    size_t len, cap;
} Out;

static int put(Out *o, const char *p, size_t n) {
    if (o->len + n > o->cap) {
        size_t cap = o->cap ? o->cap * 2 : 1 << 16;
        while (cap < o->len + n)
            cap *= 2;
        if (!o->bytes)
            o->bytes = PyBytes_FromStringAndSize(NULL, (Py_ssize_t)cap);
        else if (_PyBytes_Resize(&o->bytes, (Py_ssize_t)cap) < 0)
            return -1;
        if (!o->bytes)
            return -1;
        o->cap = cap;
    }
    memcpy(PyBytes_AS_STRING(o->bytes) + o->len, p, n);
    o->len += n;
    return 0;
}

static int puts_(Out *o, const char *s) { return put(o, s, strlen(s)); }

static int put_bytes(Out *o, PyObject *b) {
    if (!PyBytes_Check(b)) {
        PyErr_SetString(PyExc_TypeError, "dump tables hold bytes");
        return -1;
    }
    return put(o, PyBytes_AS_STRING(b), (size_t)PyBytes_GET_SIZE(b));
}

static int putf(Out *o, const char *format, ...) {
    char text[64];
    va_list args;
    va_start(args, format);
    int n = vsnprintf(text, sizeof text, format, args);
    va_end(args);
    return put(o, text, (size_t)n);
}

typedef struct {
    const Node *nodes;
    Py_ssize_t node_count;
    const char *pool;
    Py_ssize_t pool_len;
    PyObject *enums, *bitmasks, *structs; /* id -> {value: name}, ((name, flag), ...), (name, ...) */
    Out *out;
    unsigned style;   /* STYLE_* bits */
    uint32_t call_no; /* of the call being formatted (blob file names) */
    unsigned blobs;   /* its blobs written so far */
} Batch;

/* A dict or tuple entry by signature id; KeyError when the trace never defined it. */
static PyObject *by_id(PyObject *table, uint32_t id) {
    PyObject *key = PyLong_FromUnsignedLong(id);
    if (!key)
        return NULL;
    PyObject *found = PyDict_GetItemWithError(table, key);
    if (!found && !PyErr_Occurred())
        PyErr_SetObject(PyExc_KeyError, key);
    Py_DECREF(key);
    return found;
}

/* A C string literal as apitrace writes it, up to the first NUL: plain chars are
   signed, and the high octal digit repeats the middle one. */
static int quote(Out *o, const char *wide_prefix, const uint8_t *p8, const uint32_t *p32,
                 size_t n, int oneline) {
    if (puts_(o, wide_prefix) < 0 || put(o, "\"", 1) < 0)
        return -1;
    for (size_t k = 0; k < n; k++) {
        uint32_t c = p32 ? p32[k] : p8[k];
        if (c == 0)
            break;
        if (!p32 && c >= 0x80)
            c |= 0xFFFFFF00u;
        char text[8];
        size_t len = 0;
        if (c == 0x22) {
            memcpy(text, "\\\"", len = 2);
        } else if (c == 0x5C) {
            memcpy(text, "\\\\", len = 2);
        } else if (c == 0x0A && oneline) {
            memcpy(text, "\\n", len = 2);
        } else if ((c >= 0x20 && c <= 0x7E) || c == 0x09 || c == 0x0A) {
            text[len++] = (char)c;
        } else if (c == 0x0D) {
            continue;
        } else {
            unsigned low = c & 7, mid = (c >> 3) & 7;
            text[len++] = '\\';
            if (mid) {
                text[len++] = (char)('0' + mid);
                text[len++] = (char)('0' + mid);
            }
            text[len++] = (char)('0' + low);
        }
        if (put(o, text, len) < 0)
            return -1;
    }
    return put(o, "\"", 1);
}

/* Integers are most of a dump: written by hand, printf's parsing costs more. */
static int put_unsigned(Out *o, uint64_t v) {
    char text[24];
    size_t n = sizeof text;
    do {
        text[--n] = (char)('0' + v % 10);
        v /= 10;
    } while (v);
    return put(o, text + n, sizeof text - n);
}

static int put_signed(Out *o, int64_t v) {
    if (v < 0 && put(o, "-", 1) < 0)
        return -1;
    return put_unsigned(o, v < 0 ? 0 - (uint64_t)v : (uint64_t)v);
}

static int real(Out *o, double d, int precision) {
    if (isnan(d)) /* glibc prints NaN's sign */
        return puts_(o, signbit(d) ? "-nan" : "nan");
    return precision == 7 ? putf(o, "%.7g", d) : putf(o, "%.16g", d);
}

static Py_ssize_t next_sibling(const Batch *b, Py_ssize_t i) {
    uint8_t tag = b->nodes[i].tag;
    return i + 1 + (tag == T_ARRAY || tag == T_STRUCT || tag == T_REPR ? (Py_ssize_t)b->nodes[i].v.u : 0);
}

static int value(const Batch *b, Py_ssize_t i, int depth);

static int members(const Batch *b, Py_ssize_t i, int *first, int depth) {
    PyObject *names = by_id(b->structs, b->nodes[i].aux);
    if (!names)
        return -1;
    Py_ssize_t child = i + 1;
    for (Py_ssize_t m = 0; m < PyTuple_GET_SIZE(names); m++) {
        if (child >= b->node_count)
            break;
        PyObject *name = PyTuple_GET_ITEM(names, m);
        if (PyBytes_GET_SIZE(name)) {
            if ((!*first && put(b->out, ", ", 2) < 0) || put_bytes(b->out, name) < 0 ||
                put(b->out, " = ", 3) < 0 || value(b, child, depth + 1) < 0)
                return -1;
            *first = 0;
        } else if (b->nodes[child].tag == T_STRUCT) { /* anonymous struct: members inline */
            if (members(b, child, first, depth + 1) < 0)
                return -1;
        }
        child = next_sibling(b, child);
    }
    return 0;
}

static int enum_value(const Batch *b, const Node *n) {
    PyObject *names = by_id(b->enums, n->aux);
    if (!names)
        return -1;
    PyObject *key = PyLong_FromLongLong(n->v.i);
    if (!key)
        return -1;
    PyObject *name = PyDict_GetItemWithError(names, key);
    Py_DECREF(key);
    if (name)
        return put_bytes(b->out, name);
    return PyErr_Occurred() ? -1 : put_signed(b->out, n->v.i);
}

static int bitmask(const Batch *b, const Node *n) {
    PyObject *flags = by_id(b->bitmasks, n->aux);
    if (!flags)
        return -1;
    uint64_t v = n->v.u;
    int parts = 0;
    for (Py_ssize_t k = 0; k < PyTuple_GET_SIZE(flags); k++) {
        PyObject *pair = PyTuple_GET_ITEM(flags, k);
        uint64_t flag = PyLong_AsUnsignedLongLong(PyTuple_GET_ITEM(pair, 1));
        if (flag == (uint64_t)-1 && PyErr_Occurred())
            return -1;
        if ((flag && (v & flag) == flag) || (!flag && v == 0)) {
            if ((parts++ && put(b->out, " | ", 3) < 0) ||
                put_bytes(b->out, PyTuple_GET_ITEM(pair, 0)) < 0)
                return -1;
            v &= ~flag;
        }
        if (v == 0)
            break;
    }
    if (v || !parts)
        return (parts && put(b->out, " | ", 3) < 0) ? -1 : putf(b->out, "0x%llx", (unsigned long long)v);
    return 0;
}

/* --blobs: the blob's bytes into blob_call<N>.bin in the working folder, named in the text. */
static int blob_file(const Batch *b, const Node *n) {
    char name[64];
    unsigned *count = (unsigned *)&b->blobs; /* the formatter's one mutable counter */
    if (*count)
        snprintf(name, sizeof name, "blob_call%u_%u.bin", (unsigned)b->call_no, *count);
    else
        snprintf(name, sizeof name, "blob_call%u.bin", (unsigned)b->call_no);
    ++*count;
    if (n->v.u > (uint64_t)b->pool_len || (uint64_t)n->aux > (uint64_t)b->pool_len - n->v.u)
        return put(b->out, "?", 1);
    FILE *f = fopen(name, "wb");
    if (!f || fwrite(b->pool + n->v.u, 1, (size_t)n->aux, f) != (size_t)n->aux) {
        PyErr_SetFromErrnoWithFilename(PyExc_OSError, name);
        if (f)
            fclose(f);
        return -1;
    }
    if (fclose(f) != 0) {
        PyErr_SetFromErrnoWithFilename(PyExc_OSError, name);
        return -1;
    }
    return (puts_(b->out, "blob(\"") < 0 || puts_(b->out, name) < 0) ? -1 : puts_(b->out, "\")");
}

static int value(const Batch *b, Py_ssize_t i, int depth) {
    if (i < 0 || i >= b->node_count || depth > MAX_DEPTH)
        return put(b->out, "?", 1);
    const Node *n = &b->nodes[i];
    Out *o = b->out;
    switch (n->tag) {
    case T_NULL:
        return puts_(o, "NULL");
    case T_FALSE:
        return puts_(o, "false");
    case T_TRUE:
        return puts_(o, "true");
    case T_SINT:
        return put_signed(o, n->v.i);
    case T_UINT:
        return put_unsigned(o, n->v.u);
    case T_FLOAT:
        return real(o, n->v.d, 7);
    case T_DOUBLE:
        return real(o, n->v.d, 16);
    case T_STRING:
    case T_WSTRING: {
        int wide = n->tag == T_WSTRING;
        size_t size = (size_t)n->aux * (wide ? 4 : 1);
        if (n->v.u > (uint64_t)b->pool_len || size > (size_t)b->pool_len - n->v.u)
            return put(o, "?", 1);
        const char *p = b->pool + n->v.u;
        if (wide) {
            uint32_t *codes = PyMem_Malloc(size ? size : 1);
            if (!codes)
                return PyErr_NoMemory(), -1;
            memcpy(codes, p, size); /* the pool need not be aligned for uint32 */
            int r = quote(o, "L", NULL, codes, n->aux, (b->style & STYLE_ONELINE) != 0);
            PyMem_Free(codes);
            return r;
        }
        return quote(o, "", (const uint8_t *)p, NULL, n->aux, (b->style & STYLE_ONELINE) != 0);
    }
    case T_BLOB:
        if (b->style & STYLE_BLOBS)
            return blob_file(b, n);
        return (puts_(o, "blob(") < 0 || put_unsigned(o, n->aux) < 0) ? -1 : put(o, ")", 1);
    case T_ENUM:
        return enum_value(b, n);
    case T_BITMASK:
        return bitmask(b, n);
    case T_ARRAY: {
        if (n->aux == 1)
            return put(o, "&", 1) < 0 ? -1 : value(b, i + 1, depth + 1);
        if (put(o, "{", 1) < 0)
            return -1;
        Py_ssize_t child = i + 1;
        for (uint32_t k = 0; k < n->aux && child < b->node_count; k++) {
            if ((k && put(o, ", ", 2) < 0) || value(b, child, depth + 1) < 0)
                return -1;
            child = next_sibling(b, child);
        }
        return put(o, "}", 1);
    }
    case T_STRUCT: {
        int first = 1;
        if (put(o, "{", 1) < 0 || members(b, i, &first, depth) < 0)
            return -1;
        return put(o, "}", 1);
    }
    case T_OPAQUE:
        return putf(o, "0x%llx", (unsigned long long)n->v.u);
    case T_REPR: /* the human-readable half */
        return value(b, i + 1, depth + 1);
    default:
        return put(o, "?", 1);
    }
}

static int get_buffer(PyObject *obj, Py_buffer *view, Py_ssize_t item) {
    if (PyObject_GetBuffer(obj, view, PyBUF_C_CONTIGUOUS) < 0)
        return -1;
    if (view->len % item) {
        PyBuffer_Release(view);
        PyErr_SetString(PyExc_ValueError, "format_calls: a buffer of partial records");
        return -1;
    }
    return 0;
}

static PyObject *format_calls(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *calls_obj, *slots_obj, *nodes_obj, *backtraces_obj, *chosen_obj, *flags_obj;
    PyObject *pool_obj, *shapes, *enums, *bitmasks, *structs, *frames;
    unsigned long long fake, incomplete, end_frame; /* the CallFlag bits the text shows */
    unsigned long long hidden;                      /* those of calls left out (-v's) */
    unsigned int style;
    if (!PyArg_ParseTuple(args, "OOOOOOO(KKK)KO!O!O!O!O!I", &calls_obj, &slots_obj, &nodes_obj,
                          &pool_obj, &backtraces_obj, &chosen_obj, &flags_obj, &fake, &incomplete,
                          &end_frame, &hidden, &PyDict_Type, &shapes, &PyDict_Type, &enums,
                          &PyDict_Type, &bitmasks, &PyDict_Type, &structs, &PyDict_Type, &frames,
                          &style))
        return NULL;
    Py_buffer views[7];
    PyObject *objs[7] = {calls_obj, slots_obj, nodes_obj, backtraces_obj, chosen_obj, flags_obj,
                         pool_obj};
    Py_ssize_t items[7] = {sizeof(CallRec), 4, sizeof(Node), 4, 1, 8, 1};
    int held = 0;
    PyObject *result = NULL, *ends = NULL;
    Out out = {0};
    for (; held < 7; held++)
        if (get_buffer(objs[held], &views[held], items[held]) < 0)
            goto done;
    const CallRec *calls = views[0].buf;
    const int32_t *slots = views[1].buf;
    const uint32_t *bts = views[3].buf;
    const uint64_t *flags = views[5].buf;
    const uint8_t *chosen = views[4].buf;
    Py_ssize_t ncalls = views[0].len / (Py_ssize_t)sizeof(CallRec);
    Py_ssize_t nslots = views[1].len / 4, nbts = views[3].len / 4;
    if (views[4].len != ncalls || views[5].len / 8 != ncalls) {
        PyErr_SetString(PyExc_ValueError, "format_calls: one choice and one flag per call");
        goto done;
    }
    Batch b = {views[2].buf, views[2].len / (Py_ssize_t)sizeof(Node), views[6].buf, views[6].len,
               enums, bitmasks, structs, &out, style, 0, 0};
    ends = PyList_New(0);
    if (!ends)
        goto done;
    for (Py_ssize_t c = 0; c < ncalls; c++) {
        if (!chosen[c] || (flags[c] & hidden))
            continue;
        const CallRec *r = &calls[c];
        PyObject *shape = by_id(shapes, r->sig); /* (b"name(", (b"arg = ", ...)) */
        if (!shape)
            goto done;
        PyObject *prefixes = PyTuple_GET_ITEM(shape, 1);
        b.call_no = r->no;
        b.blobs = 0;
        if ((style & STYLE_CALL_NOS) && (put_unsigned(&out, r->no) < 0 || put(&out, " ", 1) < 0))
            goto done;
        if ((style & STYLE_THREAD_IDS) &&
            (put(&out, "@", 1) < 0 || put_unsigned(&out, r->thread) < 0 || put(&out, " ", 1) < 0))
            goto done;
        if (put_bytes(&out, PyTuple_GET_ITEM(shape, 0)) < 0)
            goto done;
        Py_ssize_t nargs = PyTuple_GET_SIZE(prefixes);
        if ((uint64_t)r->slot_start + r->nargs > (uint64_t)nslots || (Py_ssize_t)r->nargs != nargs) {
            PyErr_SetString(PyExc_ValueError, "format_calls: a call's arguments do not fit");
            goto done;
        }
        for (Py_ssize_t a = 0; a < nargs; a++) {
            int32_t slot = slots[r->slot_start + a];
            if ((a && put(&out, ", ", 2) < 0) || put_bytes(&out, PyTuple_GET_ITEM(prefixes, a)) < 0)
                goto done;
            if (slot < 0 ? put(&out, "?", 1) < 0 : value(&b, (Py_ssize_t)r->node_start + slot, 0) < 0)
                goto done;
        }
        if (put(&out, ")", 1) < 0)
            goto done;
        if (r->ret >= 0 &&
            (put(&out, " = ", 3) < 0 || value(&b, (Py_ssize_t)r->node_start + r->ret, 0) < 0))
            goto done;
        uint64_t f = flags[c];
        if (f & (fake | incomplete)) {
            if (put(&out, " //", 3) < 0 || ((f & fake) && puts_(&out, " fake") < 0) ||
                ((f & incomplete) && puts_(&out, " incomplete") < 0))
                goto done;
        }
        if (put(&out, "\n", 1) < 0)
            goto done;
        if (r->bt_count && !(style & STYLE_ONELINE)) { /* apitrace leaves them out then */
            if (puts_(&out, "Backtrace:\n") < 0)
                goto done;
            for (uint32_t k = 0; k < r->bt_count && (Py_ssize_t)(r->bt_start + k) < nbts; k++) {
                PyObject *line = by_id(frames, bts[r->bt_start + k]);
                if (!line || put_bytes(&out, line) < 0 || put(&out, "\n", 1) < 0)
                    goto done;
            }
        }
        if ((f & end_frame) && !(style & STYLE_ONELINE) && put(&out, "\n", 1) < 0)
            goto done;
        PyObject *end = PyLong_FromSize_t(out.len);
        if (!end || PyList_Append(ends, end) < 0) {
            Py_XDECREF(end);
            goto done;
        }
        Py_DECREF(end);
    }
    if (!out.bytes)
        out.bytes = PyBytes_FromStringAndSize(NULL, 0);
    else if (_PyBytes_Resize(&out.bytes, (Py_ssize_t)out.len) < 0)
        goto done;
    if (out.bytes) {
        result = PyTuple_Pack(2, out.bytes, ends);
    }
done:
    Py_XDECREF(out.bytes);
    Py_XDECREF(ends);
    for (int k = 0; k < held; k++)
        PyBuffer_Release(&views[k]);
    return result;
}

/* call_flags(calls, by_sig, stop) -> (flags, beyond): each call's CallFlag bits, those its
   signature's name implies (`by_sig`, uint64 by signature id) and those its record has
   (FAKE, INCOMPLETE), as uint64 in a bytearray; and the index of the first call numbered
   past `stop` (the call count if none is), where a dump of calls up to `stop` ends. */
static PyObject *call_flags(PyObject *self, PyObject *args) {
    (void)self;
    Py_buffer calls, by_sig;
    unsigned long long stop;
    if (!PyArg_ParseTuple(args, "y*y*K", &calls, &by_sig, &stop))
        return NULL;
    const CallRec *rec = calls.buf;
    const uint64_t *sig_flags = by_sig.buf;
    Py_ssize_t count = calls.len / (Py_ssize_t)sizeof(CallRec);
    size_t sigs = (size_t)by_sig.len / sizeof(uint64_t);
    PyObject *result = NULL;
    PyObject *flags = PyByteArray_FromStringAndSize(NULL, count * (Py_ssize_t)sizeof(uint64_t));
    if (flags) {
        uint64_t *out = (uint64_t *)PyByteArray_AS_STRING(flags);
        Py_ssize_t beyond = count;
        for (Py_ssize_t i = 0; i < count; i++) {
            out[i] = (rec[i].sig < sigs ? sig_flags[rec[i].sig] : 0) | rec[i].flags;
            if (beyond == count && rec[i].no > stop)
                beyond = i;
        }
        result = Py_BuildValue("(On)", flags, beyond);
        Py_DECREF(flags);
    }
    PyBuffer_Release(&calls);
    PyBuffer_Release(&by_sig);
    return result;
}

static PyObject *quote_bytes(PyObject *self, PyObject *arg) {
    (void)self;
    if (!PyBytes_Check(arg)) {
        PyErr_SetString(PyExc_TypeError, "quote: bytes expected");
        return NULL;
    }
    Out out = {0};
    if (quote(&out, "", (const uint8_t *)PyBytes_AS_STRING(arg), NULL,
              (size_t)PyBytes_GET_SIZE(arg), 0) < 0 ||
        _PyBytes_Resize(&out.bytes, (Py_ssize_t)out.len) < 0) {
        Py_XDECREF(out.bytes);
        return NULL;
    }
    return out.bytes;
}

static PyMethodDef methods[] = {
    {"quote", quote_bytes, METH_O, "quote(text) -> bytes: a C string literal as apitrace writes it"},
    {"format_calls", format_calls, METH_VARARGS,
     "format_calls(calls, slots, nodes, pool, backtraces, chosen, flags, (fake, incomplete, "
     "end_frame), hidden, shapes, enums, bitmasks, structs, frames, style) -> (text, ends): "
     "the dump lines of the chosen calls of one batch (chosen: one byte per call; flags: "
     "each call's uint64 CallFlag bits, of which the three named show and calls with any of "
     "`hidden` are left out) and the "
     "offset where each call's text ends. The tables map signature ids to bytes: shapes to "
     "(b'name(', (b'arg = ', ...)), enums to {value: name}, bitmasks to ((name, flag), ...), "
     "structs to member names, frames to backtrace lines. style: bits 1 call numbers, 2 thread "
     "ids, 4 newlines in strings escaped, 8 blobs written to files."},
    {"call_flags", call_flags, METH_VARARGS,
     "call_flags(calls, by_sig, stop) -> (flags, beyond): each call's CallFlag bits (uint64), "
     "and the index of the first call numbered past stop"},
    {NULL, NULL, 0, NULL}};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_dump", "retrace dump's text, formatted in C.", -1, methods, NULL, NULL,
    NULL, NULL};

PyMODINIT_FUNC PyInit__dump(void) { return PyModule_Create(&module); }
