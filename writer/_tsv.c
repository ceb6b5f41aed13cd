/*
 * _tsv: the rows of a MetricWriter table, parsed in C.
 *
 * `retrace diff` and `summary` read profiles of millions of call rows; the
 * Python reader spent about 2.5 us per row splitting and converting. This
 * module parses the rows of one table straight from the file's bytes into
 * column buffers that Python turns into `array.array`s with one copy.
 *
 * It takes only rows it can read exactly as the Python reader would
 * (`tsv_reader._add_row`, the reference): integers of plain digits, numbers
 * that CPython's own float parser reads whole, `-` and `#ERR<digits>` cells.
 * Any other row -- a malformed one, a number written with spaces or
 * underscores -- stops the scan at its first byte, and Python reads that
 * line (and raises its error, naming the line).
 */

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <math.h>
#include <stdint.h>
#include <string.h>

/* A growing bytes object, handed to Python without another copy. */
typedef struct {
    PyObject *bytes;
    size_t len, cap;
} Buf;

static int put(Buf *b, const void *p, size_t n) {
    if (b->len + n > b->cap) {
        size_t cap = b->cap ? b->cap * 2 : 4096;
        while (cap < b->len + n)
            cap *= 2;
        if (!b->bytes)
            b->bytes = PyBytes_FromStringAndSize(NULL, (Py_ssize_t)cap);
        else if (_PyBytes_Resize(&b->bytes, (Py_ssize_t)cap) < 0)
            return -1;
        if (!b->bytes)
            return -1;
        b->cap = cap;
    }
    memcpy(PyBytes_AS_STRING(b->bytes) + b->len, p, n);
    b->len += n;
    return 0;
}

/* The bytes written, as a new reference (the buffer is left empty). */
static PyObject *take_bytes(Buf *b) {
    if (!b->bytes)
        return PyBytes_FromStringAndSize(NULL, 0);
    if (_PyBytes_Resize(&b->bytes, (Py_ssize_t)b->len) < 0)
        return NULL;
    PyObject *out = b->bytes;
    *b = (Buf){0};
    return out;
}

/* Plain decimal digits, an optional leading '-', at most 18 digits (no overflow):
   what int() reads the same way. */
static int parse_int(const char *p, size_t n, int64_t *out) {
    int negative = n > 0 && p[0] == '-';
    size_t i = negative;
    if (n == i || n - i > 18)
        return 0;
    int64_t v = 0;
    for (; i < n; i++) {
        if (p[i] < '0' || p[i] > '9')
            return 0;
        v = v * 10 + (p[i] - '0');
    }
    *out = negative ? -v : v;
    return 1;
}

/* A number cell as float() reads it. Plain decimals of at most 15 significant digits
   and 22 decimals, the cells profiles are made of, take Clinger's fast path: the
   digits and the power of ten are both exact doubles, so one division rounds
   correctly, to the double CPython's parser returns (and without its x87
   control-word switches, which cost most of the time per cell). The rest goes to
   that parser, the function float() uses once it has stripped spaces and
   underscores; a cell with those (or anything else left over) is not taken. */
static int parse_double(const char *p, size_t n, double *out) {
    static const double powers[23] = {1e0,  1e1,  1e2,  1e3,  1e4,  1e5,  1e6,  1e7,
                                      1e8,  1e9,  1e10, 1e11, 1e12, 1e13, 1e14, 1e15,
                                      1e16, 1e17, 1e18, 1e19, 1e20, 1e21, 1e22};
    int negative = n > 0 && p[0] == '-';
    size_t i = negative, digits = 0, decimals = 0;
    int64_t mantissa = 0, point = 0;
    for (; i < n; i++) {
        if (p[i] >= '0' && p[i] <= '9') {
            mantissa = mantissa * 10 + (p[i] - '0');
            decimals += point;
            if (++digits > 15)
                break;
        } else if (p[i] == '.' && !point) {
            point = 1;
        } else {
            break;
        }
    }
    if (i == n && digits > 0 && decimals <= 22) {
        double v = (double)mantissa / powers[decimals];
        *out = negative ? -v : v;
        return 1;
    }
    char text[64];
    if (n == 0 || n >= sizeof text)
        return 0;
    memcpy(text, p, n);
    text[n] = '\0';
    char *end;
    double v = PyOS_string_to_double(text, &end, NULL);
    if (v == -1.0 && PyErr_Occurred()) {
        PyErr_Clear();
        return 0;
    }
    if (end != text + n)
        return 0;
    *out = v;
    return 1;
}

#define MAX_FIELDS 4096

typedef struct {
    const char *start[MAX_FIELDS];
    size_t len[MAX_FIELDS];
    size_t count; /* MAX_FIELDS + 1 when there are more */
    double cells[MAX_FIELDS];
    int64_t codes[MAX_FIELDS]; /* of #ERR cells, -1 for the others */
} Fields;

static void split(const char *p, size_t n, Fields *f) {
    f->count = 0;
    for (;;) {
        const char *tab = memchr(p, '\t', n);
        size_t len = tab ? (size_t)(tab - p) : n;
        if (f->count == MAX_FIELDS) {
            f->count++;
            return;
        }
        f->start[f->count] = p;
        f->len[f->count++] = len;
        if (!tab)
            return;
        n -= len + 1;
        p = tab + 1;
    }
}

static int is(const char *p, size_t n, const char *word) {
    return n == strlen(word) && memcmp(p, word, n) == 0;
}

/* The UTF-8 bytes of `text`: a str (for an ASCII one, its own characters: no copy) or
   a bytes-like object. */
typedef struct {
    const char *data;
    Py_ssize_t len;
    Py_buffer view; /* held when `text` is not a str */
} Text;

static int text_open(PyObject *text, Text *t) {
    t->view.obj = NULL;
    if (PyUnicode_Check(text)) {
        t->data = PyUnicode_AsUTF8AndSize(text, &t->len);
        return t->data ? 0 : -1;
    }
    if (PyObject_GetBuffer(text, &t->view, PyBUF_SIMPLE) < 0)
        return -1;
    t->data = t->view.buf;
    t->len = t->view.len;
    return 0;
}

static void text_close(Text *t) {
    if (t->view.obj)
        PyBuffer_Release(&t->view);
}

/* The line at `pos` (its length without line-ending characters) and where the next starts. */
static size_t line_at(const Text *t, Py_ssize_t pos, Py_ssize_t *next) {
    const char *line = t->data + pos;
    const char *nl = memchr(line, '\n', (size_t)(t->len - pos));
    size_t n = nl ? (size_t)(nl - line) : (size_t)(t->len - pos);
    *next = pos + (Py_ssize_t)n + (nl != NULL);
    while (n > 0 && (line[n - 1] == '\r' || line[n - 1] == '\n'))
        n--;
    return n;
}

static PyObject *decode(const char *p, size_t n) {
    return PyUnicode_DecodeUTF8(p, (Py_ssize_t)n, "surrogatepass");
}

/* The name objects of recent rows by a hash of their bytes: most rows name one of a
   few hundred functions, so most rows skip decoding, hashing and interning. */
#define NAME_SLOTS 1024

typedef struct {
    const char *bytes; /* in the caller's data, alive for the whole call */
    size_t len;
    PyObject *name; /* borrowed from the interning dict */
} NameSlot;

typedef struct {
    Buf call_nos, programs, frames, errors;
    Buf *values;
    Py_ssize_t metrics;
    NameSlot names[NAME_SLOTS];
} Columns;

static PyObject *intern_name(Columns *c, const char *p, size_t n, PyObject *interned) {
    uint32_t h = 2166136261u;
    for (size_t i = 0; i < n; i++)
        h = (h ^ (unsigned char)p[i]) * 16777619u;
    NameSlot *slot = &c->names[h % NAME_SLOTS];
    if (slot->name && slot->len == n && memcmp(slot->bytes, p, n) == 0)
        return slot->name;
    PyObject *name = decode(p, n);
    if (!name)
        return NULL;
    PyObject *same = PyDict_SetDefault(interned, name, name); /* borrowed */
    Py_DECREF(name);
    if (same)
        *slot = (NameSlot){p, n, same};
    return same;
}

static void columns_free(Columns *c) {
    Py_CLEAR(c->call_nos.bytes);
    Py_CLEAR(c->programs.bytes);
    Py_CLEAR(c->frames.bytes);
    Py_CLEAR(c->errors.bytes);
    if (c->values)
        for (Py_ssize_t m = 0; m < c->metrics; m++)
            Py_CLEAR(c->values[m].bytes);
    free(c->values);
}

/* One row into the columns, or 0 (nothing written) when the fast path does not take it. */
static int take_row(Columns *c, Fields *f, int calls, int64_t *counter, int64_t row,
                    PyObject *names, PyObject *interned, PyObject *pending_name[1]) {
    size_t first = calls ? 4 : 1;
    if (calls) {
        if (f->count == 1 && is(f->start[0], f->len[0], "frame_end")) {
            ++*counter;
            return 1;
        }
        if (f->count < 4 || !is(f->start[0], f->len[0], "call"))
            return 0;
    } else if (f->count == 0 || !is(f->start[0], f->len[0], "frame")) {
        return 0;
    }
    if (f->count > MAX_FIELDS || (Py_ssize_t)(f->count - first) != c->metrics)
        return 0;
    int64_t call_no = 0, program = 0;
    if (calls && (!parse_int(f->start[1], f->len[1], &call_no) ||
                  !parse_int(f->start[2], f->len[2], &program)))
        return 0;
    /* read every cell before writing any, so that a row not taken leaves no trace */
    double *cells = f->cells;
    int64_t *codes = f->codes;
    for (Py_ssize_t m = 0; m < c->metrics; m++) {
        const char *p = f->start[first + m];
        size_t n = f->len[first + m];
        codes[m] = -1;
        if (n == 1 && p[0] == '-') {
            cells[m] = Py_NAN;
        } else if (n >= 4 && memcmp(p, "#ERR", 4) == 0) {
            if (!parse_int(p + 4, n - 4, &codes[m]) || codes[m] < 0)
                return 0;
            cells[m] = Py_NAN;
        } else if (!parse_double(p, n, &cells[m])) {
            return 0;
        }
    }
    if (calls) {
        pending_name[0] = intern_name(c, f->start[3], f->len[3], interned);
        if (!pending_name[0])
            return -1;
        if (put(&c->call_nos, &call_no, 8) < 0 || put(&c->programs, &program, 8) < 0)
            return -1;
    }
    for (Py_ssize_t m = 0; m < c->metrics; m++) {
        if (put(&c->values[m], &cells[m], 8) < 0)
            return -1;
        if (codes[m] >= 0) {
            int64_t error[3] = {row, m, codes[m]};
            if (put(&c->errors, error, sizeof error) < 0)
                return -1;
        }
    }
    if (put(&c->frames, counter, 8) < 0)
        return -1;
    if (calls && PyList_Append(names, pending_name[0]) < 0)
        return -1;
    if (!calls)
        ++*counter;
    return 1;
}

static PyObject *parse_rows(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *source, *names, *interned;
    Py_ssize_t pos, metrics;
    int calls;
    long long counter_in;
    if (!PyArg_ParseTuple(args, "OnpnLO!O!", &source, &pos, &calls, &metrics, &counter_in,
                          &PyList_Type, &names, &PyDict_Type, &interned))
        return NULL;
    Text t;
    if (text_open(source, &t) < 0)
        return NULL;
    PyObject *result = NULL, *left = NULL;
    Fields *f = NULL;
    Columns c = {0};
    c.metrics = metrics;
    if (metrics < 0 || metrics > MAX_FIELDS || pos < 0 || pos > t.len) {
        PyErr_SetString(PyExc_ValueError, "parse_rows: bad position or metric count");
        goto done;
    }
    c.values = calloc((size_t)metrics + 1, sizeof(Buf));
    f = PyMem_Malloc(sizeof(Fields));
    if (!c.values || !f) {
        PyErr_NoMemory();
        goto done;
    }
    int64_t counter = counter_in, rows = 0;
    Py_ssize_t lines = 0;
    while (pos < t.len) {
        Py_ssize_t next;
        const char *line = t.data + pos;
        size_t n = line_at(&t, pos, &next);
        lines++;
        pos = next;
        if (n == 0)
            break;
        split(line, n, f);
        PyObject *name[1] = {NULL};
        size_t before = c.frames.len;
        int taken = take_row(&c, f, calls, &counter, rows, names, interned, name);
        if (taken < 0)
            goto done;
        if (!taken) {
            left = decode(line, n);
            if (!left)
                goto done;
            break;
        }
        rows += c.frames.len > before;
    }
    PyObject *values = PyTuple_New(metrics);
    if (!values)
        goto done;
    for (Py_ssize_t m = 0; m < metrics; m++) {
        PyObject *column = take_bytes(&c.values[m]);
        if (!column) {
            Py_DECREF(values);
            goto done;
        }
        PyTuple_SET_ITEM(values, m, column);
    }
    result = Py_BuildValue("nnLNNNNNO", pos, lines, (long long)counter, take_bytes(&c.call_nos),
                           take_bytes(&c.programs), take_bytes(&c.frames), values,
                           take_bytes(&c.errors), left ? left : Py_None);
done:
    Py_XDECREF(left);
    PyMem_Free(f);
    columns_free(&c);
    text_close(&t);
    return result;
}

static PyObject *next_header(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *source;
    Py_ssize_t pos;
    if (!PyArg_ParseTuple(args, "On", &source, &pos))
        return NULL;
    Text t;
    if (text_open(source, &t) < 0)
        return NULL;
    PyObject *result = NULL;
    Py_ssize_t lines = 0;
    if (pos < 0 || pos > t.len) {
        PyErr_SetString(PyExc_ValueError, "next_header: bad position");
        goto done;
    }
    while (pos < t.len) {
        Py_ssize_t next;
        const char *line = t.data + pos;
        size_t n = line_at(&t, pos, &next);
        lines++;
        pos = next;
        if ((n == 1 && line[0] == '#') || (n >= 2 && line[0] == '#' && line[1] == '\t')) {
            result = Py_BuildValue("Nnn", decode(line, n), pos, lines);
            goto done;
        }
    }
    result = Py_BuildValue("Onn", Py_None, pos, lines);
done:
    text_close(&t);
    return result;
}

static PyMethodDef methods[] = {
    {"next_header", next_header, METH_VARARGS,
     "next_header(text, pos) -> (header, pos, lines): the first table header line at or after "
     "UTF-8 byte `pos` of `text` (None at the end), where the line after it starts, and how "
     "many lines were read."},
    {"parse_rows", parse_rows, METH_VARARGS,
     "parse_rows(text, pos, calls, metrics, counter, names, interned) -> (pos, lines, counter, "
     "call_nos, programs, frames, values, errors, left): the rows of one table from UTF-8 byte "
     "`pos` until a blank line, the end of `text`, or a row left to Python (`left`, its text; "
     "None otherwise), and where the line after that starts. `counter` is the frame of the "
     "next row. Columns are native int64/double bytes; errors are (row, metric, code) int64 "
     "triples; names are appended to `names`, one object per distinct name."},
    {NULL, NULL, 0, NULL}};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_tsv", "The rows of MetricWriter tables, parsed in C.", -1, methods,
    NULL,                  NULL,   NULL,                                             NULL};

PyMODINIT_FUNC PyInit__tsv(void) { return PyModule_Create(&module); }
