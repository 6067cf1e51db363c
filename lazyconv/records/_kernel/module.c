/* lazyconv.records._ckernel: the CPython face of the compiled kernel, module init only (each
 * concern registers its own functions and types: see module.h). lazyconv.records._impl is the
 * only Python module that imports it.
 *
 * Every function that works on a buffer holds a Py_buffer on it and releases the GIL while the
 * C code runs (CRCs only above a size where that pays). Nothing here constructs errors about
 * the data: the kernel says where it stopped and the Python reference code takes over there. */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include "compressed_py.h"
#include "digest_py.h"
#include "format.h"
#include "module.h"
#include "segment_run_py.h"

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "lazyconv.records._ckernel",
    "The compiled kernel of lazyconv.records (lazyconv.records._impl chooses between it and the reference).", -1,
    NULL,
};

/* FORMAT: every wire layout constant of format.h (generated from _format.py), by name. */
static int add_format(PyObject *m)
{
    PyObject *format = PyDict_New(), *value;
    if (format == NULL)
        return -1;
#define ADD_FORMAT(name)                                                                 \
    value = PyLong_FromLong(LC_##name);                                                  \
    if (value == NULL || PyDict_SetItemString(format, #name, value) < 0) {               \
        Py_XDECREF(value);                                                               \
        Py_DECREF(format);                                                               \
        return -1;                                                                       \
    }                                                                                    \
    Py_DECREF(value);
    LC_FORMAT_NAMES(ADD_FORMAT)
#undef ADD_FORMAT
    if (PyModule_AddObject(m, "FORMAT", format) < 0) {
        Py_DECREF(format);
        return -1;
    }
    return 0;
}

PyMODINIT_FUNC PyInit__ckernel(void)
{
    PyObject *m = PyModule_Create(&module);
    if (m == NULL)
        return NULL;
    if (lc_py_crc_init(m) < 0 || lc_py_convert_init(m) < 0 || lc_py_compressed_init(m) < 0 ||
        lc_py_record_init(m) < 0 || lc_py_record_iterator_init(m) < 0 || lc_py_plain_iterator_init(m) < 0 ||
        lc_py_lz4_init(m) < 0 || lc_py_builder_init(m) < 0 || lc_py_digest_init(m) < 0 ||
        lc_py_segment_run_init(m) < 0 || lc_py_chunk_send_init(m) < 0 || lc_py_upconvert_init(m) < 0 ||
        lc_py_buffer_init(m) < 0 || lc_py_snappy_init(m) < 0 ||
        add_format(m) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
