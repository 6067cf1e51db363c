/* lazyconv.records._ckernel: the CRCs (crc.c) and what the CPU offers them. */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <string.h>

#include "crc.h"
#include "module.h"

static PyObject *crc_common(PyObject *args, int castagnoli)
{
    Py_buffer view;
    unsigned long start = 0;
    if (!PyArg_ParseTuple(args, "y*|k", &view, &start))
        return NULL;
    uint32_t crc = (uint32_t)start;
    const uint8_t *p = view.buf;
    size_t n = (size_t)view.len;
    if (n >= GIL_RELEASE_THRESHOLD) {
        Py_BEGIN_ALLOW_THREADS
        crc = castagnoli ? lc_crc32c(crc, p, n) : lc_crc32(crc, p, n);
        Py_END_ALLOW_THREADS
    } else {
        crc = castagnoli ? lc_crc32c(crc, p, n) : lc_crc32(crc, p, n);
    }
    PyBuffer_Release(&view);
    return PyLong_FromUnsignedLong(crc);
}

PyDoc_STRVAR(crc32_doc, "crc32(data, value=0) -> int\n\nCRC-32 (zlib's) of data, continuing from value.");
static PyObject *py_crc32(PyObject *self, PyObject *args) { return crc_common(args, 0); }

PyDoc_STRVAR(crc32c_doc, "crc32c(data, value=0) -> int\n\nCRC-32C (Castagnoli) of data, continuing from value.");
static PyObject *py_crc32c(PyObject *self, PyObject *args) { return crc_common(args, 1); }

static int impl_from_name(const char *name, enum lc_crc_impl *impl)
{
    if (strcmp(name, "auto") == 0)
        *impl = LC_CRC_AUTO;
    else if (strcmp(name, "portable") == 0)
        *impl = LC_CRC_PORTABLE;
    else if (strcmp(name, "hardware") == 0)
        *impl = LC_CRC_HARDWARE;
    else
        return -1;
    return 0;
}

PyDoc_STRVAR(select_crc_doc,
             "select_crc(crc32='auto', crc32c='auto') -> None\n\n"
             "Force the CRC implementations ('auto', 'portable' or 'hardware'), for tests.\n"
             "Raises ValueError for an unknown name or hardware the CPU lacks.");
static PyObject *py_select_crc(PyObject *self, PyObject *args, PyObject *kwargs)
{
    static char *kwlist[] = {"crc32", "crc32c", NULL};
    const char *a = "auto", *b = "auto";
    enum lc_crc_impl ia, ib;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "|ss", kwlist, &a, &b))
        return NULL;
    if (impl_from_name(a, &ia) < 0 || impl_from_name(b, &ib) < 0) {
        PyErr_Format(PyExc_ValueError, "CRC implementation must be auto, portable or hardware, got %s/%s", a, b);
        return NULL;
    }
    if (lc_crc_select(ia, ib) < 0) {
        PyErr_SetString(PyExc_ValueError, "this CPU lacks the instructions of the hardware CRC implementation");
        return NULL;
    }
    Py_RETURN_NONE;
}

PyDoc_STRVAR(crc_implementations_doc,
             "crc_implementations() -> (str, str)\n\nThe CRC-32 and CRC-32C implementations in use.");
static PyObject *py_crc_implementations(PyObject *self, PyObject *noargs)
{
    return Py_BuildValue("(ss)", lc_crc32_impl_name(), lc_crc32c_impl_name());
}

PyDoc_STRVAR(cpu_features_doc, "cpu_features() -> tuple[str, ...]\n\nThe CPU features the kernel can use.");
static PyObject *py_cpu_features(PyObject *self, PyObject *noargs)
{
    /* Py_BuildValue makes each string and hands it to the tuple: no reference is left over (the
     * list this replaced leaked one string per feature per call) */
    int pclmul = lc_cpu_has_pclmul(), sse42 = lc_cpu_has_sse42();
    if (pclmul && sse42)
        return Py_BuildValue("(ss)", "pclmul", "sse4.2");
    if (pclmul)
        return Py_BuildValue("(s)", "pclmul");
    if (sse42)
        return Py_BuildValue("(s)", "sse4.2");
    return PyTuple_New(0);
}

static PyMethodDef crc_methods[] = {
    {"crc32", py_crc32, METH_VARARGS, crc32_doc},
    {"crc32c", py_crc32c, METH_VARARGS, crc32c_doc},
    {"select_crc", (PyCFunction)(void (*)(void))py_select_crc, METH_VARARGS | METH_KEYWORDS, select_crc_doc},
    {"crc_implementations", py_crc_implementations, METH_NOARGS, crc_implementations_doc},
    {"cpu_features", py_cpu_features, METH_NOARGS, cpu_features_doc},
    {NULL, NULL, 0, NULL},
};

int lc_py_crc_init(PyObject *module)
{
    lc_crc_init(); /* picks the CPU's routines */
    return PyModule_AddFunctions(module, crc_methods);
}
