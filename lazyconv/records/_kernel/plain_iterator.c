/* lazyconv.records._ckernel.iter_plain_v2: the records of a run of plain v2 batches. */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include "format.h"
#include "module.h"
#include "record_py.h"
#include "records_walk.h"
#include "wire.h"

/* ---------------------------------------------------------------------------------------- */
/* PlainV2Iterator: every record of a run of uncompressed (or control) v2 batches, one record at
 * a time, the batch headers walked in C too (no per-batch Python, no batch objects, one record's
 * objects alive at a time). What the fast path does not decode goes to Python through
 * fallback(batch_position, record_position, index), which returns an iterator over the rest of
 * that batch's records as the reference yields them (record_position -1: the whole batch, as
 * a DefaultBatch; else from the record at record_position of the batch's records, index being
 * its index): a batch whose header the fast path leaves to the batch's own code (compressed,
 * empty, a record count beyond its bytes), or a malformed record. When that iterator ends, the
 * C walk resumes at the next batch; if it raises, the error propagates and a later call goes on
 * with the next batch, as chaining the batches' iterators does (itertools.chain), except when
 * the batch's iteration could not start (iter(batch) raised): then the iteration is over, as
 * chain's is. */

typedef struct {
    PyObject_HEAD
    Py_buffer view;
    int has_view;
    PyTypeObject *record_type;
    PyObject *fallback, *delegate;
    Py_ssize_t end;         /* the end of the complete batches (scan_plain_v2) */
    Py_ssize_t next_batch;  /* where the next batch starts */
    Py_ssize_t batch;       /* the current batch's position (in_batch) */
    Py_ssize_t pos;         /* the next record's position */
    int in_batch;
    long long index, count;
    int64_t base_offset, base_timestamp, max_timestamp;
    int log_append_time;
    lc_timestamp_cache timestamps;
} PlainV2Iterator;

static void plain_iterator_release(PlainV2Iterator *it)
{
    if (it->has_view) {
        PyBuffer_Release(&it->view);
        it->has_view = 0;
    }
}

static void plain_iterator_dealloc(PlainV2Iterator *it)
{
    plain_iterator_release(it);
    Py_XDECREF(it->record_type);
    Py_XDECREF(it->fallback);
    Py_XDECREF(it->delegate);
    Py_XDECREF(it->timestamps.object);
    Py_TYPE(it)->tp_free((PyObject *)it);
}

/* Continue with the reference for the rest of the batch at it->batch (record_position -1: the
 * whole batch); the C walk resumes at the next batch afterwards. 0, or -1 with an exception. */
static int plain_iterator_delegate(PlainV2Iterator *it, Py_ssize_t record_position)
{
    it->in_batch = 0;
    PyObject *rest = PyObject_CallFunction(it->fallback, "nnL", it->batch, record_position,
                                           record_position < 0 ? 0LL : it->index);
    if (rest != NULL) {
        it->delegate = PyObject_GetIter(rest);
        Py_DECREF(rest);
    }
    if (it->delegate != NULL)
        return 0;
    /* a batch whose iteration cannot even start (iter(batch) raised): chaining the batches'
     * iterators stops there for good, so does this iterator */
    if (record_position < 0)
        plain_iterator_release(it);
    return -1;
}

static PyObject *plain_iterator_next(PlainV2Iterator *it)
{
    for (;;) {
        if (it->delegate != NULL) {
            PyObject *item = PyIter_Next(it->delegate);
            if (item != NULL)
                return item;
            Py_CLEAR(it->delegate); /* ended or raised: the next call goes on with the next batch */
            if (PyErr_Occurred())
                return NULL;
            continue;
        }
        if (!it->has_view)
            return NULL;
        const uint8_t *data = it->view.buf;
        if (it->in_batch) {
            const uint8_t *p = data + it->pos, *batch_end = data + it->next_batch;
            if (it->index >= it->count) {
                if (p != batch_end) { /* bytes after the last record: the reference raises it */
                    if (plain_iterator_delegate(it, it->pos - it->batch - LC_RECORDS_OFFSET) < 0)
                        return NULL;
                    continue;
                }
                it->in_batch = 0;
                continue;
            }
            lc_v2_record r;
            PyObject *record = NULL;
            if (lc_v2_record_read(&p, batch_end, &r) == 0) {
                /* log-append time: every record has the batch's max timestamp (delta 0 from it) */
                if (it->log_append_time) {
                    PyObject *max_timestamp = lc_cached_timestamp(&it->timestamps, it->max_timestamp, 0);
                    if (max_timestamp == NULL)
                        return NULL;
                    record = lc_build_record(it->record_type, &r, it->base_offset, NULL, 0, NULL, max_timestamp, NULL);
                    Py_DECREF(max_timestamp);
                } else
                    record = lc_build_record(it->record_type, &r, it->base_offset, NULL, it->base_timestamp, NULL, NULL,
                                          &it->timestamps);
                if (record == NULL && PyErr_Occurred())
                    return NULL;
            }
            if (record == NULL) {
                if (plain_iterator_delegate(it, it->pos - it->batch - LC_RECORDS_OFFSET) < 0)
                    return NULL;
                continue;
            }
            it->pos = r.end - data;
            it->index++;
            return record;
        }
        /* the next batch's header */
        Py_ssize_t position = it->next_batch;
        if (position >= it->end) {
            plain_iterator_release(it);
            return NULL;
        }
        const uint8_t *batch = data + position;
        if (it->end - position < LC_RECORDS_OFFSET) { /* scan_plain_v2 rules this out; never read past */
            PyErr_SetString(PyExc_ValueError, "iter_plain_v2: a batch header runs past the end");
            plain_iterator_release(it);
            return NULL;
        }
        int32_t length = get_i32(batch + LC_LENGTH_OFFSET);
        if (length < LC_BATCH_LENGTH_MIN || length > it->end - position - LC_LOG_OVERHEAD) {
            PyErr_SetString(PyExc_ValueError, "iter_plain_v2: a batch runs past the end");
            plain_iterator_release(it);
            return NULL;
        }
        Py_ssize_t following = position + LC_LOG_OVERHEAD + length;
        uint8_t attributes = batch[LC_ATTRIBUTES_OFFSET + 1];
        int32_t count = get_i32(batch + LC_RECORDS_COUNT_OFFSET);
        it->batch = position;
        it->next_batch = following;
        if ((attributes & LC_COMPRESSION_CODEC_MASK) || count <= 0 ||
            count > following - position - LC_RECORD_BATCH_OVERHEAD) {
            /* compressed control batches, empty batches and the error cases: the batch's own path */
            if (plain_iterator_delegate(it, -1) < 0)
                return NULL;
            continue;
        }
        it->in_batch = 1;
        it->pos = position + LC_RECORDS_OFFSET;
        it->index = 0;
        it->count = count;
        it->base_offset = get_i64(batch + LC_BASE_OFFSET_OFFSET);
        it->base_timestamp = get_i64(batch + LC_BASE_TIMESTAMP_OFFSET);
        it->max_timestamp = get_i64(batch + LC_MAX_TIMESTAMP_OFFSET);
        it->log_append_time = (attributes & LC_TIMESTAMP_TYPE_MASK) != 0;
    }
}

static PyTypeObject PlainV2IteratorType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "lazyconv.records._ckernel.PlainV2Iterator",
    .tp_basicsize = sizeof(PlainV2Iterator),
    .tp_dealloc = (destructor)plain_iterator_dealloc,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "Iterator over the records of a run of plain v2 batches (see iter_plain_v2).",
    .tp_iter = PyObject_SelfIter,
    .tp_iternext = (iternextfunc)plain_iterator_next,
};

PyDoc_STRVAR(iter_plain_v2_doc,
             "iter_plain_v2(record_type, data, end, fallback) -> iterator\n\n"
             "Every record of the batches of data[0:end) as record_type tuples (offset, timestamp,\n"
             "key, value, headers), decoded one at a time with the batch headers read in C; end is\n"
             "what scan_plain_v2(data) returned (every entry before it a complete v2 batch). The\n"
             "rest of a batch the fast path does not decode comes from fallback(batch_position,\n"
             "record_position, index) (record_position -1: the whole batch; else the position of\n"
             "the record in the batch's records), an iterable of the reference's records. The\n"
             "iterator holds a buffer on data until it is exhausted.");
static PyObject *py_iter_plain_v2(PyObject *self, PyObject *args)
{
    PyTypeObject *record_type;
    PyObject *data, *fallback;
    Py_ssize_t end;
    if (!PyArg_ParseTuple(args, "O!OnO", &PyType_Type, &record_type, &data, &end, &fallback))
        return NULL;
    if (!PyType_IsSubtype(record_type, &PyTuple_Type)) {
        PyErr_SetString(PyExc_TypeError, "record_type must be a tuple subclass");
        return NULL;
    }
    PlainV2Iterator *it = PyObject_New(PlainV2Iterator, &PlainV2IteratorType);
    if (it == NULL)
        return NULL;
    it->has_view = 0;
    it->record_type = (PyTypeObject *)Py_NewRef(record_type);
    it->fallback = Py_NewRef(fallback);
    it->delegate = NULL;
    it->next_batch = it->batch = it->pos = 0;
    it->in_batch = 0;
    it->index = it->count = 0;
    it->timestamps.object = NULL;
    it->timestamps.value = 0;
    if (PyObject_GetBuffer(data, &it->view, PyBUF_SIMPLE) < 0) {
        Py_DECREF(it);
        return NULL;
    }
    it->has_view = 1;
    if (end < 0 || end > it->view.len) {
        Py_DECREF(it);
        PyErr_SetString(PyExc_ValueError, "iter_plain_v2: end must be within data");
        return NULL;
    }
    it->end = end;
    return (PyObject *)it;
}

static PyMethodDef plain_iterator_methods[] = {
    {"iter_plain_v2", py_iter_plain_v2, METH_VARARGS, iter_plain_v2_doc},
    {NULL, NULL, 0, NULL},
};

int lc_py_plain_iterator_init(PyObject *module)
{
    if (PyType_Ready(&PlainV2IteratorType) < 0)
        return -1;
    return PyModule_AddFunctions(module, plain_iterator_methods);
}
