/*
 * _guard.c: scratch memory the GL driver writes into, ending where the process may not
 * write, and the fault handler that tells an overrun of it from a crash of the driver.
 *
 * What a readback writes (glReadPixels, glGetTexImage...) is thrown away by the replay, so
 * every such call writes into one arena, reused: scratch(n) gives n writable bytes that end
 * exactly where GUARD_BYTES of address space the process can neither read nor write begin
 * (PROT_NONE, MAP_NORESERVE: address space only, no memory). A driver writing past what
 * retrace sized for it faults at once instead of overwriting the heap, even with a row
 * stride of megabytes, and watch() installs a SIGSEGV/SIGBUS handler that, when the
 * faulting address lies in the guard, stores 1 and the distance past the end in a word the
 * supervising parent shares (retrace.replay.contain), then lets the fault take its course
 * (the previous handler, or death by the signal): the parent then blames retrace's sizing,
 * not the driver.
 *
 * action() and set_action() save and reinstate a signal's action as it is, for the handlers
 * retrace installs for a while (retrace.replay.handlers): Python's signal module cannot put back a
 * handler installed outside Python (a tracer's, such as apitrace's, or a host program's).
 */

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <signal.h>
#include <stdint.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#define GUARD_BYTES ((size_t)1 << 30) /* more than any row or image stride a driver jumps */

enum { OVERRUN_HIT, OVERRUN_PAST, OVERRUN_WORDS };
static int64_t own_words[OVERRUN_WORDS];
static volatile int64_t *words = own_words;
static Py_buffer words_view;
static char *arena;      /* [arena, arena + capacity) writable, then the guard */
static size_t capacity;  /* 0: no arena yet */
static struct sigaction previous_segv, previous_bus;
static int watching;

static void on_fault(int number, siginfo_t *info, void *context) {
    (void)context;
    char *at = (char *)info->si_addr;
    if (capacity && at >= arena + capacity && at < arena + capacity + GUARD_BYTES) {
        words[OVERRUN_PAST] = (int64_t)(at - (arena + capacity));
        words[OVERRUN_HIT] = 1;
    }
    /* returning re-runs the faulting write, which now meets the previous action; a signal
       sent rather than faulted (raise, kill: si_code <= 0) is sent again, to meet it too */
    sigaction(number, number == SIGBUS ? &previous_bus : &previous_segv, NULL);
    if (info->si_code <= 0)
        raise(number);
}

/* scratch(n): the address of n writable bytes followed by the guard (valid until the next
   call asks for more) */
static PyObject *guard_scratch(PyObject *self, PyObject *arg) {
    (void)self;
    Py_ssize_t n = PyLong_AsSsize_t(arg);
    if (n < 0) {
        if (!PyErr_Occurred())
            PyErr_SetString(PyExc_ValueError, "scratch() needs a size >= 0");
        return NULL;
    }
    if ((size_t)n > capacity) {
        size_t page = (size_t)sysconf(_SC_PAGESIZE);
        size_t want = ((size_t)n + page - 1) / page * page;
        char *fresh = mmap(NULL, want + GUARD_BYTES, PROT_READ | PROT_WRITE,
                           MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
        if (fresh == MAP_FAILED)
            return PyErr_SetFromErrno(PyExc_MemoryError);
        if (mprotect(fresh + want, GUARD_BYTES, PROT_NONE) < 0) {
            munmap(fresh, want + GUARD_BYTES);
            return PyErr_SetFromErrno(PyExc_OSError);
        }
        if (capacity)
            munmap(arena, capacity + GUARD_BYTES);
        arena = fresh;
        capacity = want;
    }
    return PyLong_FromVoidPtr(arena + capacity - n);
}

/* watch(buffer): from now on an overrun into the guard writes (1, bytes past the end) as
   two int64 into `buffer` (a shared mapping) before the fault ends the process */
static PyObject *guard_watch(PyObject *self, PyObject *arg) {
    (void)self;
    Py_buffer view;
    if (PyObject_GetBuffer(arg, &view, PyBUF_WRITABLE) < 0)
        return NULL;
    if (view.len < (Py_ssize_t)sizeof own_words || ((uintptr_t)view.buf & 7)) {
        PyBuffer_Release(&view);
        PyErr_SetString(PyExc_ValueError, "watch() needs 16 aligned, writable bytes");
        return NULL;
    }
    if (words != own_words)
        PyBuffer_Release(&words_view);
    words_view = view;
    words = (volatile int64_t *)view.buf;
    words[OVERRUN_HIT] = 0;
    words[OVERRUN_PAST] = 0;
    if (!watching) {
        struct sigaction action;
        memset(&action, 0, sizeof action);
        action.sa_sigaction = on_fault;
        action.sa_flags = SA_SIGINFO | SA_NODEFER;
        sigemptyset(&action.sa_mask);
        if (sigaction(SIGSEGV, &action, &previous_segv) < 0 ||
            sigaction(SIGBUS, &action, &previous_bus) < 0)
            return PyErr_SetFromErrno(PyExc_OSError);
        watching = 1;
    }
    Py_RETURN_NONE;
}

/* action(number): the signal's action now, as the bytes of its struct sigaction */
static PyObject *guard_action(PyObject *self, PyObject *arg) {
    (void)self;
    long number = PyLong_AsLong(arg);
    if (number == -1 && PyErr_Occurred())
        return NULL;
    struct sigaction action;
    if (sigaction((int)number, NULL, &action) < 0)
        return PyErr_SetFromErrno(PyExc_OSError);
    return PyBytes_FromStringAndSize((const char *)&action, sizeof action);
}

/* set_action(number, action): reinstate an action that action(number) returned */
static PyObject *guard_set_action(PyObject *self, PyObject *args) {
    (void)self;
    int number;
    Py_buffer saved;
    if (!PyArg_ParseTuple(args, "iy*:set_action", &number, &saved))
        return NULL;
    struct sigaction action;
    int sized = saved.len == (Py_ssize_t)sizeof action;
    if (sized)
        memcpy(&action, saved.buf, sizeof action);
    PyBuffer_Release(&saved);
    if (!sized) {
        PyErr_SetString(PyExc_ValueError, "set_action() needs what action() returned");
        return NULL;
    }
    if (sigaction(number, &action, NULL) < 0)
        return PyErr_SetFromErrno(PyExc_OSError);
    Py_RETURN_NONE;
}

static PyMethodDef guard_functions[] = {
    {"scratch", guard_scratch, METH_O,
     "scratch(n): address of n writable bytes that end where the guard begins"},
    {"watch", guard_watch, METH_O,
     "watch(buffer): record an overrun into the guard as (1, bytes past) int64s there"},
    {"action", guard_action, METH_O, "action(number): the signal's action now, as bytes"},
    {"set_action", guard_set_action, METH_VARARGS,
     "set_action(number, action): reinstate an action that action() returned"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef guard_module = {
    PyModuleDef_HEAD_INIT, "_guard", "Scratch memory followed by a guard, and its watch.", -1,
    guard_functions,
};

PyMODINIT_FUNC PyInit__guard(void) {
    PyObject *m = PyModule_Create(&guard_module);
    if (!m)
        return NULL;
    if (PyModule_AddIntConstant(m, "OVERRUN_HIT", OVERRUN_HIT) < 0 ||
        PyModule_AddIntConstant(m, "OVERRUN_PAST", OVERRUN_PAST) < 0 ||
        PyModule_AddIntConstant(m, "OVERRUN_WORDS", OVERRUN_WORDS) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
