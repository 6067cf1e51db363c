/* lazyconv.records._ckernel.iter_v2_records: the records of one v2 payload, one at a time. */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include "module.h"
#include "record_py.h"
#include "records_walk.h"

/* ---------------------------------------------------------------------------------------- */
/* RecordIterator: v2 records decoded one at a time (each record's objects are freed before the
 * next is made, so the allocator reuses them); on a malformed record it hands over to the
 * reference generator returned by fallback(position_in_data, index), which yields or raises
 * exactly what the reference does from there. */

typedef struct {
    PyObject_HEAD
    Py_buffer view;
    int has_view;
    PyTypeObject *record_type;
    Py_ssize_t pos;
    long long index, count;
    long long base_offset, base_timestamp;
    PyObject *base_offset_obj, *base_timestamp_obj, *override, *fallback, *delegate;
} RecordIterator;

static void record_iterator_release(RecordIterator *it)
{
    if (it->has_view) {
        PyBuffer_Release(&it->view);
        it->has_view = 0;
    }
}

static void record_iterator_dealloc(RecordIterator *it)
{
    record_iterator_release(it);
    Py_XDECREF(it->record_type);
    Py_XDECREF(it->base_offset_obj);
    Py_XDECREF(it->base_timestamp_obj);
    Py_XDECREF(it->override);
    Py_XDECREF(it->fallback);
    Py_XDECREF(it->delegate);
    Py_TYPE(it)->tp_free((PyObject *)it);
}

static PyObject *record_iterator_hand_over(RecordIterator *it, Py_ssize_t at)
{
    record_iterator_release(it);
    PyObject *delegate = PyObject_CallFunction(it->fallback, "nL", at, it->index);
    if (delegate == NULL)
        return NULL;
    it->delegate = PyObject_GetIter(delegate);
    Py_DECREF(delegate);
    if (it->delegate == NULL)
        return NULL;
    return PyIter_Next(it->delegate);
}

static PyObject *record_iterator_next(RecordIterator *it)
{
    if (it->delegate != NULL)
        return PyIter_Next(it->delegate);
    if (!it->has_view)
        return NULL;
    const uint8_t *data = it->view.buf, *end = data + it->view.len;
    const uint8_t *p = data + it->pos;
    if (it->index >= it->count) {
        if (p != end) /* bytes remain: the reference raises it */
            return record_iterator_hand_over(it, it->pos);
        record_iterator_release(it);
        return NULL;
    }
    lc_v2_record r;
    if (lc_v2_record_read(&p, end, &r) < 0)
        return record_iterator_hand_over(it, it->pos);
    PyObject *record = lc_build_record(it->record_type, &r, it->base_offset, it->base_offset_obj, it->base_timestamp,
                                    it->base_timestamp_obj, it->override, NULL);
    if (record == NULL)
        return PyErr_Occurred() ? NULL : record_iterator_hand_over(it, it->pos);
    it->pos = r.end - data;
    it->index++;
    return record;
}

static PyTypeObject RecordIteratorType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "lazyconv.records._ckernel.RecordIterator",
    .tp_basicsize = sizeof(RecordIterator),
    .tp_dealloc = (destructor)record_iterator_dealloc,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "Iterator over the v2 records of a buffer (see iter_v2_records).",
    .tp_iter = PyObject_SelfIter,
    .tp_iternext = (iternextfunc)record_iterator_next,
};

PyDoc_STRVAR(iter_v2_records_doc,
             "iter_v2_records(record_type, data, count, base_offset, base_timestamp, timestamp_override, fallback)\n"
             "-> iterator\n\n"
             "The count v2 records of data as record_type tuples, decoded one at a time. Where a\n"
             "record is malformed (or bytes remain after the last), iteration continues with\n"
             "fallback(position_in_data, index): the reference generator from that record, which\n"
             "raises its error. The iterator holds a buffer on data until it is exhausted.");
static PyObject *py_iter_v2_records(PyObject *self, PyObject *args)
{
    PyTypeObject *record_type;
    PyObject *data, *base_offset_obj, *base_timestamp_obj, *override, *fallback;
    long long count;
    if (!PyArg_ParseTuple(args, "O!OLOOOO", &PyType_Type, &record_type, &data, &count, &base_offset_obj,
                          &base_timestamp_obj, &override, &fallback))
        return NULL;
    if (!PyType_IsSubtype(record_type, &PyTuple_Type)) {
        PyErr_SetString(PyExc_TypeError, "record_type must be a tuple subclass");
        return NULL;
    }
    long long base_offset = PyLong_AsLongLong(base_offset_obj);
    if (base_offset == -1 && PyErr_Occurred())
        return NULL;
    long long base_timestamp = PyLong_AsLongLong(base_timestamp_obj);
    if (base_timestamp == -1 && PyErr_Occurred())
        return NULL;
    RecordIterator *it = PyObject_New(RecordIterator, &RecordIteratorType);
    if (it == NULL)
        return NULL;
    it->has_view = 0;
    it->record_type = (PyTypeObject *)Py_NewRef(record_type);
    it->base_offset_obj = Py_NewRef(base_offset_obj);
    it->base_timestamp_obj = Py_NewRef(base_timestamp_obj);
    it->override = override == Py_None ? NULL : Py_NewRef(override);
    it->fallback = Py_NewRef(fallback);
    it->delegate = NULL;
    it->pos = 0;
    it->index = 0;
    it->count = count < 0 ? 0 : count;
    it->base_offset = base_offset;
    it->base_timestamp = base_timestamp;
    if (PyObject_GetBuffer(data, &it->view, PyBUF_SIMPLE) < 0) {
        Py_DECREF(it);
        return NULL;
    }
    it->has_view = 1;
    return (PyObject *)it;
}

static PyMethodDef record_iterator_methods[] = {
    {"iter_v2_records", py_iter_v2_records, METH_VARARGS, iter_v2_records_doc},
    {NULL, NULL, 0, NULL},
};

int lc_py_record_iterator_init(PyObject *module)
{
    if (PyType_Ready(&RecordIteratorType) < 0)
        return -1;
    return PyModule_AddFunctions(module, record_iterator_methods);
}
