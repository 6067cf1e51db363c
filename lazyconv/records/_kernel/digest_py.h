/* The CPython face of digest.c (registered by module.c). */
#ifndef LAZYCONV_DIGEST_PY_H
#define LAZYCONV_DIGEST_PY_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>

PyObject *lc_py_digest_v2_records(PyObject *self, PyObject *args);
PyObject *lc_py_digest_legacy_run(PyObject *self, PyObject *args);
extern const char lc_digest_v2_records_doc[];
extern const char lc_digest_legacy_run_doc[];
PyObject *lc_py_digest_delivered(PyObject *self, PyObject *args);
extern const char lc_digest_delivered_doc[];

/* Registers the functions below on the module (module.c). */
int lc_py_digest_init(PyObject *module);

#endif
