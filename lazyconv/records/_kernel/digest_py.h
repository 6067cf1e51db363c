/* The CPython face of digest.c (registered in module.c's method table). */
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

#define LC_DIGEST_METHODS \
    {"digest_v2_records", lc_py_digest_v2_records, METH_VARARGS, lc_digest_v2_records_doc}, \
    {"digest_legacy_run", lc_py_digest_legacy_run, METH_VARARGS, lc_digest_legacy_run_doc}, \
    {"digest_delivered", lc_py_digest_delivered, METH_VARARGS, lc_digest_delivered_doc},

#endif
