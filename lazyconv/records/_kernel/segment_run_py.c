/* lazyconv.records._ckernel.segment_run: segment_run.c with the GIL released. */
#include "segment_run_py.h"

#include "callback_py.h"
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

/* The Python decompress function of one segment_run call and what it returned. */
typedef struct {
    PyObject *function; /* decompress(codec, data: bytes) -> bytes | None */
    PyObject *payloads; /* list: one result per call, in batch order */
} decompress_context;

static int call_decompress(void *context, int codec, const uint8_t *data, size_t n, const uint8_t **out,
                           size_t *out_n)
{
    decompress_context *ctx = context;
    /* a copy, not a view: nothing the function keeps can outlive the caller's buffer */
    PyObject *result = PyObject_CallFunction(ctx->function, "iy#", codec, (const char *)data, (Py_ssize_t)n);
    return lc_bytes_result(result, ctx->payloads, "segment_run", out, out_n);
}

/* (index in the run, records or None for zstd) per compressed batch taken; `payloads` holds
 * one result per decompress call, the last one possibly for the batch the run stopped at. */
static PyObject *compressed_list(const lc_run_row *rows, size_t taken, PyObject *payloads)
{
    PyObject *list = PyList_New(0);
    Py_ssize_t next = 0;
    if (list == NULL)
        return NULL;
    for (size_t k = 0; k < taken; k++) {
        if (!(rows[k].flags & LC_RUN_COMPRESSED))
            continue;
        PyObject *payload = rows[k].flags & LC_RUN_ZSTD ? Py_None : PyList_GET_ITEM(payloads, next);
        next++;
        PyObject *item = Py_BuildValue("(nO)", (Py_ssize_t)k, payload);
        if (item == NULL || PyList_Append(list, item) < 0) {
            Py_XDECREF(item);
            Py_DECREF(list);
            return NULL;
        }
        Py_DECREF(item);
    }
    return list;
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
    "segment_run(data, position_base, prev_offset, min_base_offset, prev_epoch, max_timestamp, decompress=None)\n"
    "-> (consumed, (positions, last_offsets, max_timestamps, records, last_records, markers, first_epoch),\n"
    "    prev_offset, prev_epoch, max_timestamp, data_records, full, convertible_records, no_headers,\n"
    "    no_timestamp, compressed)\n\n"
    "Check and digest the run of sound, in-order magic-2 batches at the start of data (see\n"
    "lazyconv.records._segment_run). prev_offset and prev_epoch are None before the first batch /\n"
    "epoch. decompress(codec, data) -> bytes | None decompresses a compressed data batch's records\n"
    "(None: the run stops before the batch); with decompress None the run stops at any compressed\n"
    "batch. Per batch: position, last offset, running max timestamp, records (0 for a control\n"
    "batch), last record offset (None for a control batch); markers lists (position, base_offset,\n"
    "first_record, producer_id, flags) of control and transactional batches; first_epoch is\n"
    "(epoch, position) of the first batch with an epoch >= 0, or None. data_records and full add\n"
    "up the data batches, the next three the data batches that are not zstd (sums modulo 2**64);\n"
    "compressed lists (index in the run, records or None for zstd) per compressed batch. At most\n"
    "1024 batches are taken per call.";

PyObject *lc_py_segment_run(PyObject *self, PyObject *args)
{
    Py_buffer data;
    long long position_base, min_base, max_timestamp, prev_offset, prev_epoch;
    PyObject *prev_offset_obj, *prev_epoch_obj, *decompress_obj = Py_None;
    if (!PyArg_ParseTuple(args, "y*LOLOL|O", &data, &position_base, &prev_offset_obj, &min_base, &prev_epoch_obj,
                          &max_timestamp, &decompress_obj))
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
    if (decompress_obj != Py_None && !PyCallable_Check(decompress_obj)) {
        PyBuffer_Release(&data);
        PyErr_SetString(PyExc_TypeError, "decompress must be None or callable");
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
    decompress_context ctx = {decompress_obj, PyList_New(0)};
    if (rows == NULL || ctx.payloads == NULL) {
        PyMem_Free(rows);
        Py_XDECREF(ctx.payloads);
        PyBuffer_Release(&data);
        return PyErr_NoMemory();
    }
    lc_run_sums sums = {0, 0, 0, 0, 0};
    size_t consumed, taken;
    if (decompress_obj != Py_None) { /* calls back into Python: the GIL stays held */
        taken = lc_segment_run(data.buf, n, position_base, &state, rows, max_rows, &sums, &consumed,
                               call_decompress, &ctx);
    } else if (n >= RUN_GIL_THRESHOLD) {
        Py_BEGIN_ALLOW_THREADS
        taken = lc_segment_run(data.buf, n, position_base, &state, rows, max_rows, &sums, &consumed, NULL, NULL);
        Py_END_ALLOW_THREADS
    } else {
        taken = lc_segment_run(data.buf, n, position_base, &state, rows, max_rows, &sums, &consumed, NULL, NULL);
    }
    PyBuffer_Release(&data);
    PyObject *lists = NULL, *compressed = NULL;
    if (taken != (size_t)-1) {
        lists = rows_to_lists(rows, taken);
        compressed = lists ? compressed_list(rows, taken, ctx.payloads) : NULL;
    }
    PyMem_Free(rows);
    Py_DECREF(ctx.payloads);
    if (lists == NULL || compressed == NULL) {
        Py_XDECREF(lists);
        return NULL;
    }
    PyObject *offset = optional_result(state.has_prev_offset, state.prev_offset);
    PyObject *epoch = optional_result(state.has_prev_epoch, state.prev_epoch);
    if (offset == NULL || epoch == NULL) {
        Py_DECREF(lists);
        Py_DECREF(compressed);
        Py_XDECREF(offset);
        Py_XDECREF(epoch);
        return NULL;
    }
    return Py_BuildValue("(nNNNLLKLKKN)", (Py_ssize_t)consumed, lists, offset, epoch, (long long)state.max_timestamp,
                         (long long)sums.records, (unsigned long long)sums.full,
                         (long long)sums.convertible_records, (unsigned long long)sums.no_headers,
                         (unsigned long long)sums.no_timestamp, compressed);
}

static PyMethodDef methods[] = {
    {"segment_run", lc_py_segment_run, METH_VARARGS, lc_segment_run_doc},
    {NULL, NULL, 0, NULL},
};

int lc_py_segment_run_init(PyObject *module) { return PyModule_AddFunctions(module, methods); }
