/* Python functions the kernels call back (the codecs, for the validation job's walks). */
#ifndef LAZYCONV_CALLBACK_PY_H
#define LAZYCONV_CALLBACK_PY_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>

/* Take a callback's `result` (a new reference, NULL when it raised): 0 when it is bytes, kept
 * alive in the list `keep` and exposed as *out[0:*out_n); 1 for None (the caller declines);
 * -1 with an exception set otherwise. `who` names the entry point in the TypeError. */
static inline int lc_bytes_result(PyObject *result, PyObject *keep, const char *who, const uint8_t **out,
                                  size_t *out_n)
{
    if (result == NULL)
        return -1;
    if (result == Py_None) {
        Py_DECREF(result);
        return 1;
    }
    if (!PyBytes_Check(result)) {
        Py_DECREF(result);
        PyErr_Format(PyExc_TypeError, "%s: decompress must return bytes or None", who);
        return -1;
    }
    int appended = PyList_Append(keep, result);
    Py_DECREF(result); /* the list keeps it alive for the rest of the walk */
    if (appended < 0)
        return -1;
    *out = (const uint8_t *)PyBytes_AS_STRING(result);
    *out_n = (size_t)PyBytes_GET_SIZE(result);
    return 0;
}

#endif
