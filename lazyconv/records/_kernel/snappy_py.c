/* lazyconv.records._ckernel: raw snappy compression with Kafka's bytes (snappy.c). */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include "module.h"
#include "snappy.h"

PyDoc_STRVAR(snappy_compress_raw_doc,
             "snappy_compress_raw(data) -> bytes\n\n"
             "data (any bytes-like object) as one raw snappy stream, byte for byte as snappy 1.1.10\n"
             "(bundled by snappy-java, Kafka's codec) writes it. More than 4 GiB - 1 bytes (past\n"
             "the uint32 of the stream's length preamble) raises OverflowError before a byte is read.");
static PyObject *py_snappy_compress_raw(PyObject *self, PyObject *args)
{
    Py_buffer data;
    if (!PyArg_ParseTuple(args, "y*", &data))
        return NULL;
    if ((uint64_t)data.len > LC_SNAPPY_MAX_INPUT) { /* before the output is allocated or a byte read */
        PyErr_Format(PyExc_OverflowError,
                     "snappy_compress_raw: %zd bytes is past snappy's length preamble (a uint32)",
                     data.len);
        PyBuffer_Release(&data);
        return NULL;
    }
    size_t bound = lc_snappy_max_compressed((size_t)data.len);
    if (bound > (size_t)PY_SSIZE_T_MAX) {
        PyBuffer_Release(&data);
        return PyErr_NoMemory();
    }
    PyObject *out = PyBytes_FromStringAndSize(NULL, (Py_ssize_t)bound);
    if (out == NULL) {
        PyBuffer_Release(&data);
        return NULL;
    }
    uint8_t *target = (uint8_t *)PyBytes_AS_STRING(out);
    size_t written;
    if (data.len >= GIL_RELEASE_THRESHOLD) {
        Py_BEGIN_ALLOW_THREADS
        written = lc_snappy_compress(data.buf, (size_t)data.len, target);
        Py_END_ALLOW_THREADS
    } else {
        written = lc_snappy_compress(data.buf, (size_t)data.len, target);
    }
    PyBuffer_Release(&data);
    if (_PyBytes_Resize(&out, (Py_ssize_t)written) < 0)
        return NULL;
    return out;
}

static PyMethodDef methods[] = {
    {"snappy_compress_raw", py_snappy_compress_raw, METH_VARARGS, snappy_compress_raw_doc},
    {NULL, NULL, 0, NULL},
};

int lc_py_snappy_init(PyObject *module)
{
    return PyModule_AddFunctions(module, methods);
}
