/* The CPython face of segment_run.c (registered by module.c). */
#ifndef LAZYCONV_SEGMENT_RUN_PY_H
#define LAZYCONV_SEGMENT_RUN_PY_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>

PyObject *lc_py_segment_run(PyObject *self, PyObject *args);
extern const char lc_segment_run_doc[];

/* Registers the functions below on the module (module.c). */
int lc_py_segment_run_init(PyObject *module);

#endif
