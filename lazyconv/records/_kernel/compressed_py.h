/* The CPython face of the compressed-batch down-conversion (registered by module.c). */
#ifndef LAZYCONV_COMPRESSED_PY_H
#define LAZYCONV_COMPRESSED_PY_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>

PyObject *lc_py_convert_v2_compressed(PyObject *self, PyObject *args);
extern const char lc_convert_v2_compressed_doc[];

/* Registers the functions below on the module (module.c). */
int lc_py_compressed_init(PyObject *module);

#endif
