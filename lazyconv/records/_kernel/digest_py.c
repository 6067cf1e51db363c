/* lazyconv.records._ckernel.digest_*: record digests (digest.c) with the GIL released on
 * buffers worth it. Arguments are checked here; the data never raises (a function declines). */
#include "digest_py.h"

#include "callback_py.h"
#include "digest.h"

#define DIGEST_GIL_THRESHOLD 16384

/* A timestamp override argument: None, or an int64. Returns 0, or -1 with an exception set. */
static int parse_override(PyObject *obj, int *has_override, long long *override)
{
    *has_override = obj != Py_None;
    *override = 0;
    if (!*has_override)
        return 0;
    *override = PyLong_AsLongLong(obj);
    return *override == -1 && PyErr_Occurred() ? -1 : 0;
}

const char lc_digest_v2_records_doc[] =
    "digest_v2_records(data, count, base_offset, base_timestamp, timestamp_override) -> tuple | None\n\n"
    "Digest the count (>= 1) v2 records filling data exactly: (first_offset, last_offset,\n"
    "offsets_increasing, max_raw_timestamp, has_headers, full, no_headers, no_timestamp), the\n"
    "last three sums of record digests modulo 2**64; None when the records are malformed or an\n"
    "offset or timestamp leaves int64 (the reference decoder then reports).";

PyObject *lc_py_digest_v2_records(PyObject *self, PyObject *args)
{
    Py_buffer data;
    long long count, base_offset, base_timestamp, override;
    PyObject *override_obj;
    if (!PyArg_ParseTuple(args, "y*LLLO", &data, &count, &base_offset, &base_timestamp, &override_obj))
        return NULL;
    int has_override;
    if (parse_override(override_obj, &has_override, &override) < 0) {
        PyBuffer_Release(&data);
        return NULL;
    }
    lc_v2_digest d;
    int rc;
    if (data.len >= DIGEST_GIL_THRESHOLD) {
        Py_BEGIN_ALLOW_THREADS
        rc = lc_digest_v2_records(data.buf, (size_t)data.len, count, base_offset, base_timestamp, has_override,
                                  override, &d);
        Py_END_ALLOW_THREADS
    } else {
        rc = lc_digest_v2_records(data.buf, (size_t)data.len, count, base_offset, base_timestamp, has_override,
                                  override, &d);
    }
    PyBuffer_Release(&data);
    if (rc < 0)
        Py_RETURN_NONE;
    return Py_BuildValue("(LLNLNKKK)", (long long)d.first_offset, (long long)d.last_offset,
                         PyBool_FromLong(d.offsets_increasing), (long long)d.max_raw_timestamp,
                         PyBool_FromLong(d.has_headers), (unsigned long long)d.full,
                         (unsigned long long)d.no_headers, (unsigned long long)d.no_timestamp);
}

const char lc_digest_legacy_run_doc[] =
    "digest_legacy_run(data, min_offset, shift, timestamp_override) -> (consumed, entries, last_offset,\n"
    "count, sum, stop)\n\n"
    "Digest the plain magic 0/1 messages at the start of data (CRC-32 and structure checked),\n"
    "offsets + shift, magic 1 timestamps replaced by timestamp_override unless None: count and\n"
    "sum (modulo 2**64) of the digests, without headers, of those at or above min_offset; stop\n"
    "is 0 (end), 1 (partial entry) or 2 (an entry left to the reader).";

PyObject *lc_py_digest_legacy_run(PyObject *self, PyObject *args)
{
    Py_buffer data;
    long long min_offset, shift, override;
    PyObject *override_obj;
    if (!PyArg_ParseTuple(args, "y*LLO", &data, &min_offset, &shift, &override_obj))
        return NULL;
    int has_override;
    if (parse_override(override_obj, &has_override, &override) < 0) {
        PyBuffer_Release(&data);
        return NULL;
    }
    lc_legacy_digest d;
    if (data.len >= DIGEST_GIL_THRESHOLD) {
        Py_BEGIN_ALLOW_THREADS
        lc_digest_legacy_run(data.buf, (size_t)data.len, min_offset, shift, has_override, override, &d);
        Py_END_ALLOW_THREADS
    } else {
        lc_digest_legacy_run(data.buf, (size_t)data.len, min_offset, shift, has_override, override, &d);
    }
    PyBuffer_Release(&data);
    return Py_BuildValue("(nLLLKi)", (Py_ssize_t)d.consumed, (long long)d.entries, (long long)d.last_offset,
                         (long long)d.count, (unsigned long long)d.sum, (int)d.stop);
}

/* The Python decompress function of one digest_delivered call and what it returned. */
typedef struct {
    PyObject *function; /* decompress(codec, magic, value: bytes) -> bytes | None */
    PyObject *results;  /* list: keeps every returned buffer alive until the walk ends */
} wrapper_context;

static int call_wrapper_decompress(void *context, int codec, int magic, const uint8_t *value, size_t n,
                                   const uint8_t **out, size_t *out_n)
{
    wrapper_context *ctx = context;
    PyObject *result = PyObject_CallFunction(ctx->function, "iiy#", codec, magic, (const char *)value, (Py_ssize_t)n);
    return lc_bytes_result(result, ctx->results, "digest_delivered", out, out_n);
}

const char lc_digest_delivered_doc[] =
    "digest_delivered(data, min_offset, decompress) -> (consumed, entries, last_offset, count, sum, stop)\n\n"
    "digest_legacy_run over what a legacy consumer receives: plain magic 0/1 messages and compressed\n"
    "wrappers (codecs 1..3), each wrapper's value decompressed by decompress(codec, magic, value) ->\n"
    "bytes | None (None: the wrapper is left to the reader, stop 2) and its inner messages digested\n"
    "with absolute offsets. last_offset is the last entry's (a wrapper's own offset).";

PyObject *lc_py_digest_delivered(PyObject *self, PyObject *args)
{
    Py_buffer data;
    long long min_offset;
    PyObject *function;
    if (!PyArg_ParseTuple(args, "y*LO", &data, &min_offset, &function))
        return NULL;
    if (!PyCallable_Check(function)) {
        PyBuffer_Release(&data);
        PyErr_SetString(PyExc_TypeError, "decompress must be callable");
        return NULL;
    }
    wrapper_context ctx = {function, PyList_New(0)};
    if (ctx.results == NULL) {
        PyBuffer_Release(&data);
        return NULL;
    }
    lc_legacy_digest d;
    int rc = lc_digest_delivered(data.buf, (size_t)data.len, min_offset, call_wrapper_decompress, &ctx, &d);
    PyBuffer_Release(&data);
    Py_DECREF(ctx.results);
    if (rc < 0)
        return NULL;
    return Py_BuildValue("(nLLLKi)", (Py_ssize_t)d.consumed, (long long)d.entries, (long long)d.last_offset,
                         (long long)d.count, (unsigned long long)d.sum, (int)d.stop);
}

static PyMethodDef methods[] = {
    {"digest_v2_records", lc_py_digest_v2_records, METH_VARARGS, lc_digest_v2_records_doc},
    {"digest_legacy_run", lc_py_digest_legacy_run, METH_VARARGS, lc_digest_legacy_run_doc},
    {"digest_delivered", lc_py_digest_delivered, METH_VARARGS, lc_digest_delivered_doc},
    {NULL, NULL, 0, NULL},
};

int lc_py_digest_init(PyObject *module) { return PyModule_AddFunctions(module, methods); }
