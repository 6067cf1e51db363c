/* lazyconv.records._ckernel: send_plain_chunk, one chunk of a lazy down-converting send read
 * from its segment, converted (convert.c) and written to the client's socket in one call, the
 * GIL released throughout: the step the Python send would otherwise take in a dozen calls per
 * chunk (read the window, decide the chunk, convert, write). It decides and converts exactly
 * as convert_v2_chunk does and declines whatever that declines; the Python send then takes the
 * chunk through its reference path, which meets every error. */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <errno.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "convert.h"
#include "format.h"
#include "module.h"

/* What send_plain_chunk did (the module's SEND_* constants). */
enum lc_send_stop {
    LC_SEND_CONVERTED = 0, /* the chunk was converted and (as far as the socket took it) sent */
    LC_SEND_DECLINED = 1,  /* not a chunk the kernel converts: nothing was sent */
    LC_SEND_SHORT = 2,     /* the file ended inside the window: nothing was sent */
};

static int64_t now_ns(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (int64_t)t.tv_sec * 1000000000 + t.tv_nsec;
}

typedef struct {
    enum lc_send_stop stop;
    size_t end;           /* the chunk is the window's [0, end) */
    int64_t converted;    /* records written */
    int64_t temporary;    /* as convert_v2_run */
    size_t out_len;       /* bytes the chunk converted to */
    size_t piece_len;     /* min(out_len, remaining): what the send owes of it */
    size_t sent;          /* bytes of the piece the socket took */
    int read_errno;       /* the file's read failed (nothing converted or sent) */
    int no_memory;        /* the output could not be allocated (nothing sent) */
    int send_errno;       /* the socket failed after `sent` bytes */
    int64_t elapsed_ns;   /* reading and converting, as the Python send times a chunk */
} send_result;

/* Read the window [position, position + length) of file_fd into window, decide and convert its
 * chunk into *out (allocated here, freed by the caller), and write up to `remaining` bytes of it
 * to sock_fd without blocking. No Python object is touched: runs without the GIL. */
static void send_chunk(int file_fd, int64_t position, size_t length, int sock_fd, size_t remaining,
                       size_t chunk_size, int to_magic, int64_t first_offset, uint8_t *window,
                       uint8_t **out, send_result *r)
{
    int64_t started = now_ns();
    size_t got = 0;
    while (got < length) {
        ssize_t n = pread(file_fd, window + got, length - got, (off_t)(position + (int64_t)got));
        if (n < 0) {
            if (errno == EINTR)
                continue;
            r->read_errno = errno;
            return;
        }
        if (n == 0) {
            r->stop = LC_SEND_SHORT;
            return;
        }
        got += (size_t)n;
    }
    size_t end = 0;
    if (lc_chunk_end(window, length, chunk_size, &end) != LC_CHUNK_DONE || end == 0) {
        r->stop = LC_SEND_DECLINED;
        return;
    }
    size_t bound = lc_run_bound(window, end);
    *out = PyMem_RawMalloc(bound > 0 ? bound : 1);
    if (*out == NULL) {
        r->no_memory = 1;
        return;
    }
    lc_run_result run;
    lc_convert_run(window, end, to_magic, first_offset, *out, bound, &run);
    if (run.stop != LC_STOP_END || run.consumed != end) {
        r->stop = LC_SEND_DECLINED; /* an invalid batch (or no room): the reference code reports it */
        return;
    }
    r->stop = LC_SEND_CONVERTED;
    r->end = end;
    r->converted = run.converted;
    r->temporary = run.temporary;
    r->out_len = run.written;
    r->piece_len = run.written < remaining ? run.written : remaining;
    r->elapsed_ns = now_ns() - started;
    while (r->sent < r->piece_len) {
        ssize_t n = send(sock_fd, *out + r->sent, r->piece_len - r->sent, MSG_DONTWAIT | MSG_NOSIGNAL);
        if (n > 0) {
            r->sent += (size_t)n;
            continue;
        }
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK)
            r->send_errno = errno;
        break; /* the socket is full (or failed): the caller keeps the rest */
    }
}

PyDoc_STRVAR(send_plain_chunk_doc,
             "send_plain_chunk(file_fd, position, length, sock_fd, remaining, chunk_size, to_magic,\n"
             "                 first_offset) -> (stop, end, converted, temporary, out_len, sent, rest,\n"
             "                                   elapsed_ns, send_errno)\n\n"
             "Read [position, position + length) of file_fd (a window starting at an entry), decide\n"
             "and convert its chunk as convert_v2_chunk does, and write the first min(out_len,\n"
             "remaining) bytes of the conversion to the non-blocking socket sock_fd. SEND_CONVERTED:\n"
             "the chunk is the window's [0, end); sent bytes went out, rest is the part of the piece\n"
             "the socket did not take (None when all did), send_errno the socket's error (0: none;\n"
             "else it failed after `sent` bytes). SEND_DECLINED (the chunk is not plain v2, or is\n"
             "invalid) and SEND_SHORT (the file ended in the window): nothing was sent, the caller\n"
             "converts the chunk itself. A failed read raises OSError. The GIL is released.");

static PyObject *py_send_plain_chunk(PyObject *self, PyObject *args)
{
    int file_fd, sock_fd, to_magic;
    long long position, first_offset;
    Py_ssize_t length, remaining, chunk_size;
    if (!PyArg_ParseTuple(args, "iLninniL", &file_fd, &position, &length, &sock_fd, &remaining, &chunk_size,
                          &to_magic, &first_offset))
        return NULL;
    if ((to_magic != 0 && to_magic != 1) || position < 0 || length <= 0 || remaining <= 0 || chunk_size < 0 ||
        first_offset < 0) {
        PyErr_SetString(PyExc_ValueError,
                        "send_plain_chunk needs to_magic 0 or 1, a window of at least one byte at a position "
                        "and first offset not negative, something still owed and a chunk size not negative");
        return NULL;
    }
    uint8_t *window = PyMem_RawMalloc((size_t)length);
    if (window == NULL)
        return PyErr_NoMemory();
    uint8_t *out = NULL;
    send_result r;
    memset(&r, 0, sizeof r);
    Py_BEGIN_ALLOW_THREADS
    send_chunk(file_fd, position, (size_t)length, sock_fd, (size_t)remaining, (size_t)chunk_size, to_magic,
               first_offset, window, &out, &r);
    Py_END_ALLOW_THREADS
    PyMem_RawFree(window);
    if (r.no_memory)
        return PyErr_NoMemory();
    if (r.read_errno != 0) {
        PyMem_RawFree(out);
        errno = r.read_errno;
        return PyErr_SetFromErrno(PyExc_OSError);
    }
    PyObject *rest;
    if (r.sent < r.piece_len) {
        rest = PyBytes_FromStringAndSize((const char *)out + r.sent, (Py_ssize_t)(r.piece_len - r.sent));
        if (rest == NULL) {
            PyMem_RawFree(out);
            return NULL;
        }
    } else {
        rest = Py_NewRef(Py_None);
    }
    PyMem_RawFree(out);
    return Py_BuildValue("(inLLnnNLi)", (int)r.stop, (Py_ssize_t)r.end, (long long)r.converted,
                         (long long)r.temporary, (Py_ssize_t)r.out_len, (Py_ssize_t)r.sent, rest,
                         (long long)r.elapsed_ns, r.send_errno);
}

static PyMethodDef chunk_send_methods[] = {
    {"send_plain_chunk", py_send_plain_chunk, METH_VARARGS, send_plain_chunk_doc},
    {NULL, NULL, 0, NULL},
};

int lc_py_chunk_send_init(PyObject *module)
{
    if (PyModule_AddFunctions(module, chunk_send_methods) < 0)
        return -1;
    if (PyModule_AddIntConstant(module, "SEND_CONVERTED", LC_SEND_CONVERTED) < 0 ||
        PyModule_AddIntConstant(module, "SEND_DECLINED", LC_SEND_DECLINED) < 0 ||
        PyModule_AddIntConstant(module, "SEND_SHORT", LC_SEND_SHORT) < 0)
        return -1;
    return 0;
}
