/* lazyconv.records._ckernel: buffers that are written whole before they are read.
 *
 * bytearray(n) zeroes its n bytes; a buffer that a socket read fills completely before anything
 * reads it (a received frame) pays that memset for nothing: 3-4 % of the gateway's CPU for old
 * consumers, 1 MiB per upstream response. */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include "module.h"

PyDoc_STRVAR(uninitialized_bytearray_doc,
             "uninitialized_bytearray(size) -> bytearray\n\n"
             "A bytearray of size bytes whose contents are unspecified (not zeroed): for a buffer\n"
             "that is filled whole before any byte of it is read. size must be an int >= 0.");
static PyObject *py_uninitialized_bytearray(PyObject *self, PyObject *arg)
{
    /* an int only (what operator.index takes), as the reference twin: not bytes, not a float */
    Py_ssize_t size = PyNumber_AsSsize_t(arg, PyExc_OverflowError);
    if (size == -1 && PyErr_Occurred())
        return NULL;
    if (size < 0) {
        PyErr_Format(PyExc_ValueError, "a buffer size must be >= 0, got %zd", size);
        return NULL;
    }
    /* NULL contents: CPython allocates size + 1 bytes and writes only the trailing NUL */
    return PyByteArray_FromStringAndSize(NULL, size);
}

static PyMethodDef buffer_methods[] = {
    {"uninitialized_bytearray", py_uninitialized_bytearray, METH_O, uninitialized_bytearray_doc},
    {NULL, NULL, 0, NULL},
};

int lc_py_buffer_init(PyObject *module) { return PyModule_AddFunctions(module, buffer_methods); }
