/* The CPython face of the compressed-batch down-conversion (registered in module.c's table). */
#ifndef LAZYCONV_COMPRESSED_PY_H
#define LAZYCONV_COMPRESSED_PY_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>

PyObject *lc_py_convert_v2_compressed(PyObject *self, PyObject *args);
extern const char lc_convert_v2_compressed_doc[];

#define LC_CONVERT_COMPRESSED_METHODS \
    {"convert_v2_compressed", lc_py_convert_v2_compressed, METH_VARARGS, lc_convert_v2_compressed_doc},

#endif
