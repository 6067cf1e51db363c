/* lazyconv.records._ckernel.segment_run: segment_run.c with the GIL released. */
#include "segment_run_py.h"

#include "format.h"
#include "segment_run.h"

#define RUN_GIL_THRESHOLD 16384 /* shorter buffers keep the GIL */
#define RUN_MAX_ROWS 1024       /* batches per call */

/* An optional int64 argument: None, or an int. Returns 0, or -1 with an exception set. */
static int optional_int64(PyObject *obj, int *present, long long *value)
{
    *present = obj != Py_None;
    *value = 0;
    if (!*present)
        return 0;
    *value = PyLong_AsLongLong(obj);
    return *value == -1 && PyErr_Occurred() ? -1 : 0;
}

static PyObject *optional_result(int present, long long value)
{
    if (!present)
        Py_RETURN_NONE;
    return PyLong_FromLongLong(value);
}

/* The rows of a run as the Python side wants them: lists, no per-row objects beyond ints. */
static PyObject *rows_to_lists(const lc_run_row *rows, size_t taken)
{
    PyObject *positions = PyList_New((Py_ssize_t)taken), *last_offsets = PyList_New((Py_ssize_t)taken);
    PyObject *max_timestamps = PyList_New((Py_ssize_t)taken), *records = PyList_New((Py_ssize_t)taken);
    PyObject *last_records = PyList_New((Py_ssize_t)taken), *markers = PyList_New(0);
    PyObject *first_epoch = NULL, *result = NULL;
    if (!positions || !last_offsets || !max_timestamps || !records || !last_records || !markers)
        goto done;
    for (size_t k = 0; k < taken; k++) {
        const lc_run_row *r = &rows[k];
        int control = (r->flags & LC_RUN_CONTROL) != 0;
        PyObject *last_record = control ? Py_NewRef(Py_None) : PyLong_FromLongLong(r->last_record);
        PyObject *position = PyLong_FromLongLong(r->position), *last = PyLong_FromLongLong(r->last_offset);
        PyObject *ts = PyLong_FromLongLong(r->max_timestamp), *count = PyLong_FromLongLong(control ? 0 : r->records);
        /* the lists own them from here, NULLs included (a failed list is dropped whole) */
        PyList_SET_ITEM(positions, k, position);
        PyList_SET_ITEM(last_offsets, k, last);
        PyList_SET_ITEM(max_timestamps, k, ts);
        PyList_SET_ITEM(records, k, count);
        PyList_SET_ITEM(last_records, k, last_record);
        if (!position || !last || !ts || !count || !last_record)
            goto done;
        if (first_epoch == NULL && r->epoch >= 0) {
            first_epoch = Py_BuildValue("(LL)", (long long)r->epoch, (long long)r->position);
            if (first_epoch == NULL)
                goto done;
        }
        if (r->flags & (LC_RUN_CONTROL | LC_RUN_TRANSACTIONAL)) {
            PyObject *marker = Py_BuildValue("(LLLLL)", (long long)r->position, (long long)r->base_offset,
                                             (long long)r->first_record, (long long)r->producer_id,
                                             (long long)r->flags);
            if (marker == NULL || PyList_Append(markers, marker) < 0) {
                Py_XDECREF(marker);
                goto done;
            }
            Py_DECREF(marker);
        }
    }
    if (first_epoch == NULL)
        first_epoch = Py_NewRef(Py_None);
    result = Py_BuildValue("(OOOOOOO)", positions, last_offsets, max_timestamps, records, last_records, markers,
                           first_epoch);
done:
    Py_XDECREF(positions);
    Py_XDECREF(last_offsets);
    Py_XDECREF(max_timestamps);
    Py_XDECREF(records);
    Py_XDECREF(last_records);
    Py_XDECREF(markers);
    Py_XDECREF(first_epoch);
    return result;
}

const char lc_segment_run_doc[] =
    "segment_run(data, position_base, prev_offset, min_base_offset, prev_epoch, max_timestamp)\n"
    "-> (consumed, (positions, last_offsets, max_timestamps, records, last_records, markers, first_epoch),\n"
    "    prev_offset, prev_epoch, max_timestamp, data_records, full, no_headers, no_timestamp)\n\n"
    "Check and digest the run of sound, in-order, uncompressed magic-2 batches at the start of\n"
    "data (see lazyconv.records.segment_run). prev_offset and prev_epoch are None before the\n"
    "first batch / epoch. Per batch: position, last offset, running max timestamp, records (0\n"
    "for a control batch), last record offset (None for a control batch); markers lists\n"
    "(position, base_offset, first_record, producer_id, flags) of control and transactional\n"
    "batches; first_epoch is (epoch, position) of the first batch with an epoch >= 0, or None.\n"
    "The last four results add up the data batches (sums modulo 2**64). At most 1024 batches\n"
    "are taken per call.";

PyObject *lc_py_segment_run(PyObject *self, PyObject *args)
{
    Py_buffer data;
    long long position_base, min_base, max_timestamp, prev_offset, prev_epoch;
    PyObject *prev_offset_obj, *prev_epoch_obj;
    if (!PyArg_ParseTuple(args, "y*LOLOL", &data, &position_base, &prev_offset_obj, &min_base, &prev_epoch_obj,
                          &max_timestamp))
        return NULL;
    lc_run_state state;
    int has_offset, has_epoch;
    if (optional_int64(prev_offset_obj, &has_offset, &prev_offset) < 0 ||
        optional_int64(prev_epoch_obj, &has_epoch, &prev_epoch) < 0) {
        PyBuffer_Release(&data);
        return NULL;
    }
    if (has_epoch && (prev_epoch < 0 || prev_epoch > INT32_MAX)) {
        PyBuffer_Release(&data);
        PyErr_SetString(PyExc_ValueError, "prev_epoch must be None or an int32 >= 0");
        return NULL;
    }
    state.has_prev_offset = has_offset;
    state.prev_offset = prev_offset;
    state.min_base_offset = min_base;
    state.has_prev_epoch = has_epoch;
    state.prev_epoch = (int32_t)prev_epoch;
    state.max_timestamp = max_timestamp;
    size_t n = (size_t)data.len;
    size_t max_rows = n / LC_RECORD_BATCH_OVERHEAD + 1;
    if (max_rows > RUN_MAX_ROWS)
        max_rows = RUN_MAX_ROWS; /* the caller calls again from `consumed` */
    lc_run_row *rows = PyMem_Malloc(max_rows * sizeof(lc_run_row));
    if (rows == NULL) {
        PyBuffer_Release(&data);
        return PyErr_NoMemory();
    }
    lc_run_sums sums = {0, 0, 0, 0};
    size_t consumed, taken;
    if (n >= RUN_GIL_THRESHOLD) {
        Py_BEGIN_ALLOW_THREADS
        taken = lc_segment_run(data.buf, n, position_base, &state, rows, max_rows, &sums, &consumed);
        Py_END_ALLOW_THREADS
    } else {
        taken = lc_segment_run(data.buf, n, position_base, &state, rows, max_rows, &sums, &consumed);
    }
    PyBuffer_Release(&data);
    PyObject *lists = rows_to_lists(rows, taken);
    PyMem_Free(rows);
    if (lists == NULL)
        return NULL;
    PyObject *offset = optional_result(state.has_prev_offset, state.prev_offset);
    PyObject *epoch = optional_result(state.has_prev_epoch, state.prev_epoch);
    if (offset == NULL || epoch == NULL) {
        Py_DECREF(lists);
        Py_XDECREF(offset);
        Py_XDECREF(epoch);
        return NULL;
    }
    return Py_BuildValue("(nNNNLLKKK)", (Py_ssize_t)consumed, lists, offset, epoch, (long long)state.max_timestamp,
                         (long long)sums.records, (unsigned long long)sums.full,
                         (unsigned long long)sums.no_headers, (unsigned long long)sums.no_timestamp);
}
