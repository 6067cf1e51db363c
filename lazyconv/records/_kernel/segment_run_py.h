/* The CPython face of segment_run.c (registered in module.c's method table). */
#ifndef LAZYCONV_SEGMENT_RUN_PY_H
#define LAZYCONV_SEGMENT_RUN_PY_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>

PyObject *lc_py_segment_run(PyObject *self, PyObject *args);
extern const char lc_segment_run_doc[];

#define LC_SEGMENT_RUN_METHODS \
    {"segment_run", lc_py_segment_run, METH_VARARGS, lc_segment_run_doc},

#endif
