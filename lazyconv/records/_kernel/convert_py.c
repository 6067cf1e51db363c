/* lazyconv.records._ckernel: down-conversion (convert.c) of runs, chunks and payloads of v2
 * batches, one legacy message, and the entry scans. Each entry point holds a Py_buffer on its
 * data and releases the GIL while convert.c works; it never constructs errors about the data:
 * it says where it stopped (or declines) and the Python reference code takes over there. */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <string.h>

#include "convert.h"
#include "format.h"
#include "legacy_message.h"
#include "module.h"
#include "wire.h"


/* Grow `out` by `extra` bytes and lock it with a writable Py_buffer. */
static int reserve(PyObject *out, Py_ssize_t extra, Py_ssize_t *start, Py_buffer *view)
{
    *start = PyByteArray_GET_SIZE(out);
    if (extra > PY_SSIZE_T_MAX - *start) {
        PyErr_NoMemory();
        return -1;
    }
    if (PyByteArray_Resize(out, *start + extra) < 0)
        return -1;
    return PyObject_GetBuffer(out, view, PyBUF_WRITABLE);
}

static int finish(PyObject *out, Py_buffer *view, Py_ssize_t length)
{
    PyBuffer_Release(view);
    return PyByteArray_Resize(out, length);
}

/* Convert the plain v2 batches at the start of p[0:n) into `out` (lc_convert_run, the GIL
 * released, `out` grown as the run needs). -1 with an exception set on allocation failure. */
static int convert_run_into(const uint8_t *p, size_t n, PyObject *out, int to_magic, long long first_offset,
                            size_t *consumed_out, int64_t *converted_out, int64_t *temporary_out,
                            enum lc_stop *stop_out)
{
    Py_buffer view;
    size_t consumed = 0;
    int64_t converted = 0, temporary = 0;
    enum lc_stop stop = LC_STOP_END;
    for (;;) {
        Py_ssize_t start;
        size_t bound = lc_run_bound(p + consumed, n - consumed);
        if (reserve(out, (Py_ssize_t)bound, &start, &view) < 0)
            return -1;
        lc_run_result result;
        Py_BEGIN_ALLOW_THREADS
        lc_convert_run(p + consumed, n - consumed, to_magic, first_offset, (uint8_t *)view.buf + start,
                       bound, &result);
        Py_END_ALLOW_THREADS
        if (finish(out, &view, start + (Py_ssize_t)result.written) < 0)
            return -1;
        consumed += result.consumed;
        converted += result.converted;
        temporary += result.temporary;
        stop = result.stop;
        /* lc_run_bound covers every batch the run converts; a second round is only a safety net */
        if (stop != LC_STOP_NO_SPACE || result.consumed == 0)
            break;
    }
    if (stop == LC_STOP_NO_SPACE)
        stop = LC_STOP_INVALID;
    *consumed_out = consumed;
    *converted_out = converted;
    *temporary_out = temporary;
    *stop_out = stop;
    return 0;
}

PyDoc_STRVAR(convert_v2_run_doc,
             "convert_v2_run(data, out, to_magic, first_offset) -> (consumed, converted, temporary, stop)\n\n"
             "Down-convert the consecutive magic-2 batches at the start of data (a buffer of whole\n"
             "entries) to magic to_magic (0 or 1), appending legacy messages to the bytearray out:\n"
             "control batches are dropped, records below first_offset (an int64) are skipped and a\n"
             "batch left without records writes nothing. Stops at the first entry it does not\n"
             "handle: consumed is the number of input bytes handled, converted the records\n"
             "written, temporary the sum of (batch size + bytes written) over the batches that\n"
             "wrote records, stop why it ended (STOP_* constants; STOP_END: all of data). The\n"
             "entry at `consumed` must be converted by the reference code, which raises the\n"
             "errors. The GIL is released while converting; out must not be used by another\n"
             "thread meanwhile (it is locked against resizing).");
static PyObject *py_convert_v2_run(PyObject *self, PyObject *args)
{
    Py_buffer data;
    PyObject *out;
    int to_magic;
    long long first_offset;
    if (!PyArg_ParseTuple(args, "y*O!iL", &data, &PyByteArray_Type, &out, &to_magic, &first_offset))
        return NULL;
    if (to_magic != 0 && to_magic != 1) {
        PyBuffer_Release(&data);
        PyErr_SetString(PyExc_ValueError, "to_magic must be 0 or 1");
        return NULL;
    }
    size_t consumed;
    int64_t converted, temporary;
    enum lc_stop stop;
    int failed = convert_run_into(data.buf, (size_t)data.len, out, to_magic, first_offset, &consumed, &converted,
                                  &temporary, &stop);
    PyBuffer_Release(&data);
    if (failed)
        return NULL;
    return Py_BuildValue("(nLLi)", (Py_ssize_t)consumed, (long long)converted, (long long)temporary, (int)stop);
}

PyDoc_STRVAR(convert_v2_run_ends_doc,
             "convert_v2_run_ends(data, out, to_magic) -> bytes | None\n\n"
             "Down-convert data, whole uncompressed magic-2 batches with offsets >= 0 (a run as\n"
             "segment_run takes it), to magic to_magic (0 or 1) without a first-offset filter,\n"
             "appending to the bytearray out, and return len(out) after each batch as native int64\n"
             "(a control batch writes nothing). None, out unchanged, when data is anything else\n"
             "(the caller converts batch by batch through the reference code).");
static PyObject *py_convert_v2_run_ends(PyObject *self, PyObject *args)
{
    Py_buffer data, view;
    PyObject *out;
    int to_magic;
    if (!PyArg_ParseTuple(args, "y*O!i", &data, &PyByteArray_Type, &out, &to_magic))
        return NULL;
    if (to_magic != 0 && to_magic != 1) {
        PyBuffer_Release(&data);
        PyErr_SetString(PyExc_ValueError, "to_magic must be 0 or 1");
        return NULL;
    }
    const uint8_t *p = data.buf;
    size_t n = (size_t)data.len, pos = 0, entries = 0;
    while (n - pos >= LC_RECORD_BATCH_OVERHEAD) { /* delimit first: the ends need a count */
        const uint8_t *b = p + pos;
        int32_t length = get_i32(b + LC_LENGTH_OFFSET);
        if (length < LC_BATCH_LENGTH_MIN || (size_t)length > n - pos - LC_LOG_OVERHEAD)
            break;
        /* what no run holds, though lc_convert_run would take it: a negative base offset (its
         * records would be dropped by the first-offset filter) or a compressed control batch */
        if (b[LC_MAGIC_OFFSET] != 2 || get_i64(b + LC_BASE_OFFSET_OFFSET) < 0 ||
            (b[LC_ATTRIBUTES_OFFSET + 1] & LC_COMPRESSION_CODEC_MASK))
            break;
        pos += (size_t)length + LC_LOG_OVERHEAD;
        entries++;
    }
    if (pos != n) {
        PyBuffer_Release(&data);
        Py_RETURN_NONE;
    }
    int64_t *ends = PyMem_Malloc((entries ? entries : 1) * sizeof(int64_t));
    if (ends == NULL) {
        PyBuffer_Release(&data);
        return PyErr_NoMemory();
    }
    size_t bound = lc_run_bound(p, n);
    Py_ssize_t start;
    if (reserve(out, (Py_ssize_t)bound, &start, &view) < 0) {
        PyMem_Free(ends);
        PyBuffer_Release(&data);
        return NULL;
    }
    int converted_all = 1;
    size_t written = 0;
    Py_BEGIN_ALLOW_THREADS
    pos = 0;
    for (size_t i = 0; i < entries; i++) {
        /* read again, so checked again: another thread may rewrite data while the GIL is
         * released, and a length read twice must never take the walk past the buffer */
        int32_t length = get_i32(p + pos + LC_LENGTH_OFFSET);
        if (n - pos < LC_RECORD_BATCH_OVERHEAD || length < LC_BATCH_LENGTH_MIN ||
            (size_t)length > n - pos - LC_LOG_OVERHEAD) {
            converted_all = 0;
            break;
        }
        size_t size = (size_t)length + LC_LOG_OVERHEAD;
        lc_run_result result;
        lc_convert_run(p + pos, size, to_magic, 0, (uint8_t *)view.buf + start + written, bound - written,
                       &result);
        if (result.stop != LC_STOP_END || result.consumed != size) {
            converted_all = 0;
            break;
        }
        written += result.written;
        ends[i] = (int64_t)start + (int64_t)written;
        pos += size;
    }
    Py_END_ALLOW_THREADS
    PyBuffer_Release(&data);
    PyObject *packed = NULL;
    if (finish(out, &view, start + (converted_all ? (Py_ssize_t)written : 0)) == 0) {
        if (converted_all)
            packed = PyBytes_FromStringAndSize((const char *)ends, (Py_ssize_t)(entries * sizeof(int64_t)));
        else
            packed = Py_NewRef(Py_None);
    }
    PyMem_Free(ends);
    return packed;
}

PyDoc_STRVAR(convert_v2_records_doc,
             "convert_v2_records(out, data, count, base_offset, base_timestamp, log_append_time,\n"
             "                   to_magic, attributes, relative_offsets)\n"
             "-> (kept, last_offset, max_timestamp, first_offset) | None\n\n"
             "Append one legacy message per record of the count v2 records of data (a whole\n"
             "decompressed payload) to the bytearray out, as records._codec.convert_v2_records_to_legacy\n"
             "does without a first-offset filter (first_offset: the absolute offset of the first\n"
             "record, 0 when count is 0). Returns None (out unchanged) when the reference\n"
             "code must handle the payload (malformed or unwritable records): it raises the error.");
static PyObject *py_convert_v2_records(PyObject *self, PyObject *args)
{
    Py_buffer data, view;
    PyObject *out, *log_append_obj;
    long long count, base_offset, base_timestamp;
    int to_magic, attributes, relative;
    if (!PyArg_ParseTuple(args, "O!y*LLLOiip", &PyByteArray_Type, &out, &data, &count, &base_offset,
                          &base_timestamp, &log_append_obj, &to_magic, &attributes, &relative))
        return NULL;
    lc_records_params params;
    memset(&params, 0, sizeof params);
    params.base_offset = base_offset;
    params.base_timestamp = base_timestamp;
    if (log_append_obj != Py_None) {
        params.has_log_append_time = 1;
        params.log_append_time = PyLong_AsLongLong(log_append_obj);
        if (params.log_append_time == -1 && PyErr_Occurred()) {
            PyBuffer_Release(&data);
            return NULL;
        }
    }
    params.to_magic = to_magic;
    params.attributes = (uint8_t)attributes;
    params.relative_offsets = relative;
    if ((to_magic != 0 && to_magic != 1) || count < 0 || (uint64_t)count > (uint64_t)data.len / LC_MIN_RECORD_SIZE) {
        PyBuffer_Release(&data);
        Py_RETURN_NONE; /* the reference code says what is wrong */
    }
    size_t bound = (size_t)data.len + (size_t)count * LC_MAX_GROWTH_PER_RECORD;
    Py_ssize_t start;
    if (reserve(out, (Py_ssize_t)bound, &start, &view) < 0) {
        PyBuffer_Release(&data);
        return NULL;
    }
    lc_records_result result;
    int status;
    Py_BEGIN_ALLOW_THREADS
    status = lc_convert_records(data.buf, (size_t)data.len, count, &params, (uint8_t *)view.buf + start, bound,
                                &result);
    Py_END_ALLOW_THREADS
    PyBuffer_Release(&data);
    if (finish(out, &view, start + (status == 0 ? (Py_ssize_t)result.written : 0)) < 0)
        return NULL;
    if (status < 0)
        Py_RETURN_NONE;
    return Py_BuildValue("(LLLL)", (long long)result.kept, (long long)result.last_kept_offset,
                         (long long)result.max_timestamp, (long long)result.first_kept_offset);
}

PyDoc_STRVAR(append_legacy_message_doc,
             "append_legacy_message(out, offset, timestamp, key, value, magic, attributes) -> int\n\n"
             "Append one legacy entry (offset, size, CRC-32, magic-0 message if magic is 0, else\n"
             "magic 1) to the bytearray out; returns the bytes appended. key/value: bytes-like or\n"
             "None. Raises OverflowError/ValueError/TypeError on values the wire cannot hold (the\n"
             "Python reference then reports them as it always has).");
static PyObject *py_append_legacy_message(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 7) {
        PyErr_SetString(PyExc_TypeError, "append_legacy_message takes 7 arguments");
        return NULL;
    }
    PyObject *out = args[0];
    if (!PyByteArray_Check(out)) {
        PyErr_SetString(PyExc_TypeError, "out must be a bytearray");
        return NULL;
    }
    long long offset = PyLong_AsLongLong(args[1]);
    if (offset == -1 && PyErr_Occurred())
        return NULL;
    long magic = PyLong_AsLong(args[5]);
    if (magic == -1 && PyErr_Occurred())
        return NULL;
    long long timestamp = 0;
    if (magic != 0) {
        timestamp = PyLong_AsLongLong(args[2]);
        if (timestamp == -1 && PyErr_Occurred())
            return NULL;
    }
    long attributes = PyLong_AsLong(args[6]);
    if (attributes == -1 && PyErr_Occurred())
        return NULL;
    if (attributes < -128 || attributes > 127) {
        PyErr_SetString(PyExc_ValueError, "attributes out of int8 range");
        return NULL;
    }
    Py_buffer key = {0}, value = {0};
    int has_key = args[3] != Py_None, has_value = args[4] != Py_None;
    if (has_key && PyObject_GetBuffer(args[3], &key, PyBUF_SIMPLE) < 0)
        return NULL;
    if (has_value && PyObject_GetBuffer(args[4], &value, PyBUF_SIMPLE) < 0) {
        if (has_key)
            PyBuffer_Release(&key);
        return NULL;
    }
    Py_ssize_t overhead = magic == 0 ? LC_RECORD_OVERHEAD_V0 : LC_RECORD_OVERHEAD_V1;
    Py_ssize_t klen = has_key ? key.len : -1, vlen = has_value ? value.len : -1;
    Py_ssize_t size = overhead + (klen > 0 ? klen : 0) + (vlen > 0 ? vlen : 0);
    PyObject *result = NULL;
    if (size > INT32_MAX || klen > INT32_MAX || vlen > INT32_MAX) {
        PyErr_SetString(PyExc_OverflowError, "message too large for int32 sizes");
        goto done;
    }
    Py_ssize_t start = PyByteArray_GET_SIZE(out);
    if (PyByteArray_Resize(out, start + LC_LOG_OVERHEAD + size) < 0)
        goto done;
    lc_write_legacy_message((uint8_t *)PyByteArray_AS_STRING(out) + start, offset, (int)magic,
                            (uint8_t)attributes, timestamp, key.buf, (int32_t)klen, value.buf, (int32_t)vlen);
    result = PyLong_FromSsize_t(LC_LOG_OVERHEAD + size);
done:
    if (has_key)
        PyBuffer_Release(&key);
    if (has_value)
        PyBuffer_Release(&value);
    return result;
}

#define SCAN_BLOCK 4096

PyDoc_STRVAR(scan_entries_doc,
             "scan_entries(data, base_position=0) -> (entries, end, stop)\n\n"
             "Delimit and check every complete entry of data (see records.scan.scan_batches, the\n"
             "documented entry point). entries: list of tuples (position, size, magic, attributes,\n"
             "base_offset, last_offset_delta, record_count, max_timestamp, valid, records_checked);\n"
             "end: base_position + bytes delimited; stop: SCAN_* code. GIL released while scanning.");
static PyObject *py_scan_entries(PyObject *self, PyObject *args)
{
    Py_buffer data;
    long long base = 0;
    if (!PyArg_ParseTuple(args, "y*|L", &data, &base))
        return NULL;
    PyObject *list = PyList_New(0);
    lc_entry *block = PyMem_Malloc(sizeof(lc_entry) * SCAN_BLOCK);
    if (list == NULL || block == NULL) {
        Py_XDECREF(list);
        PyMem_Free(block);
        PyBuffer_Release(&data);
        return PyErr_NoMemory();
    }
    const uint8_t *p = data.buf;
    size_t n = (size_t)data.len, done = 0;
    enum lc_scan_stop stop;
    do {
        size_t count = 0, consumed = 0;
        Py_BEGIN_ALLOW_THREADS
        stop = lc_scan_entries(p + done, n - done, block, SCAN_BLOCK, &count, &consumed);
        Py_END_ALLOW_THREADS
        for (size_t i = 0; i < count; i++) {
            lc_entry *e = &block[i];
            PyObject *item = Py_BuildValue("(LLiiLiLLOO)", (long long)(base + (int64_t)done + e->position),
                                           (long long)e->size, e->magic, e->attributes, (long long)e->base_offset,
                                           (int)e->last_offset_delta, (long long)e->record_count,
                                           (long long)e->max_timestamp, e->valid ? Py_True : Py_False,
                                           e->records_checked ? Py_True : Py_False);
            if (item == NULL || PyList_Append(list, item) < 0) {
                Py_XDECREF(item);
                Py_DECREF(list);
                PyMem_Free(block);
                PyBuffer_Release(&data);
                return NULL;
            }
            Py_DECREF(item);
        }
        done += consumed;
    } while (stop == LC_SCAN_MORE);
    PyMem_Free(block);
    PyBuffer_Release(&data);
    PyObject *result = Py_BuildValue("(OLi)", list, (long long)(base + (int64_t)done), (int)stop);
    Py_DECREF(list);
    return result;
}

PyDoc_STRVAR(scan_plain_v2_doc,
             "scan_plain_v2(data) -> int\n\n"
             "The end of the complete entries of data when every one is a well-formed magic-2 batch\n"
             "that is uncompressed or a control batch (a trailing partial entry is left out, as the\n"
             "entry splitter skips it); -1 when some entry needs the Python path. GIL released.");
static PyObject *py_scan_plain_v2(PyObject *self, PyObject *args)
{
    Py_buffer data;
    if (!PyArg_ParseTuple(args, "y*", &data))
        return NULL;
    int64_t end;
    Py_BEGIN_ALLOW_THREADS
    end = lc_scan_plain_v2(data.buf, (size_t)data.len);
    Py_END_ALLOW_THREADS
    PyBuffer_Release(&data);
    return PyLong_FromLongLong(end);
}

PyDoc_STRVAR(convert_v2_chunk_doc,
             "convert_v2_chunk(data, out, chunk_size, to_magic, first_offset) -> (end, stop, converted, temporary)\n\n"
             "One chunk of the lazy send, decided and converted in one call. data starts at an entry;\n"
             "the chunk is the first entry, then the following ones while their sizes total at\n"
             "most chunk_size. CHUNK_DONE: the chunk is data[0:end) (end 0: nothing the kernel can\n"
             "take), it ends where the reference policy ends it, and its plain v2 batches were\n"
             "converted into the bytearray out (to_magic 0 or 1, records below first_offset\n"
             "skipped; converted and temporary as convert_v2_run). CHUNK_MIXED: the reference policy\n"
             "would take into this chunk an entry the kernel does not convert, or a batch is invalid:\n"
             "nothing is meant to be used (out may hold partial output); the caller groups and\n"
             "converts the chunk itself. The GIL is released while scanning and converting.");

static PyObject *py_convert_v2_chunk(PyObject *self, PyObject *args)
{
    Py_buffer data;
    PyObject *out;
    Py_ssize_t chunk_size;
    int to_magic;
    long long first_offset;
    if (!PyArg_ParseTuple(args, "y*O!niL", &data, &PyByteArray_Type, &out, &chunk_size, &to_magic, &first_offset))
        return NULL;
    if ((to_magic != 0 && to_magic != 1) || chunk_size < 0) {
        PyBuffer_Release(&data);
        PyErr_SetString(PyExc_ValueError, "to_magic must be 0 or 1 and chunk_size not negative");
        return NULL;
    }
    size_t end = 0, consumed = 0;
    int64_t converted = 0, temporary = 0;
    enum lc_chunk_stop chunk_stop;
    Py_BEGIN_ALLOW_THREADS
    chunk_stop = lc_chunk_end(data.buf, (size_t)data.len, (size_t)chunk_size, &end);
    Py_END_ALLOW_THREADS
    if (chunk_stop == LC_CHUNK_DONE && end > 0) {
        enum lc_stop stop;
        if (convert_run_into(data.buf, end, out, to_magic, first_offset, &consumed, &converted, &temporary,
                             &stop) < 0) {
            PyBuffer_Release(&data);
            return NULL;
        }
        if (stop != LC_STOP_END || consumed != end)
            chunk_stop = LC_CHUNK_MIXED; /* an invalid batch: the reference code reports it */
    }
    PyBuffer_Release(&data);
    return Py_BuildValue("(niLL)", (Py_ssize_t)end, (int)chunk_stop, (long long)converted, (long long)temporary);
}

static PyMethodDef convert_methods[] = {
    {"convert_v2_run", py_convert_v2_run, METH_VARARGS, convert_v2_run_doc},
    {"convert_v2_records", py_convert_v2_records, METH_VARARGS, convert_v2_records_doc},
    {"convert_v2_run_ends", py_convert_v2_run_ends, METH_VARARGS, convert_v2_run_ends_doc},
    {"scan_plain_v2", py_scan_plain_v2, METH_VARARGS, scan_plain_v2_doc},
    {"convert_v2_chunk", py_convert_v2_chunk, METH_VARARGS, convert_v2_chunk_doc},
    {"scan_entries", py_scan_entries, METH_VARARGS, scan_entries_doc},
    {"append_legacy_message", (PyCFunction)(void (*)(void))py_append_legacy_message, METH_FASTCALL, append_legacy_message_doc},
    {NULL, NULL, 0, NULL},
};

int lc_py_convert_init(PyObject *module)
{
    if (PyModule_AddFunctions(module, convert_methods) < 0 ||
        PyModule_AddIntConstant(module, "STOP_END", LC_STOP_END) < 0 ||
        PyModule_AddIntConstant(module, "STOP_COMPRESSED", LC_STOP_COMPRESSED) < 0 ||
        PyModule_AddIntConstant(module, "STOP_NOT_V2", LC_STOP_NOT_V2) < 0 ||
        PyModule_AddIntConstant(module, "STOP_PARTIAL", LC_STOP_PARTIAL) < 0 ||
        PyModule_AddIntConstant(module, "STOP_INVALID", LC_STOP_INVALID) < 0 ||
        PyModule_AddIntConstant(module, "CHUNK_DONE", LC_CHUNK_DONE) < 0 ||
        PyModule_AddIntConstant(module, "CHUNK_MIXED", LC_CHUNK_MIXED) < 0 ||
        PyModule_AddIntConstant(module, "SCAN_END", LC_SCAN_END) < 0 ||
        PyModule_AddIntConstant(module, "SCAN_PARTIAL", LC_SCAN_PARTIAL) < 0 ||
        PyModule_AddIntConstant(module, "SCAN_BAD_SIZE", LC_SCAN_BAD_SIZE) < 0 ||
        PyModule_AddIntConstant(module, "SCAN_BAD_MAGIC", LC_SCAN_BAD_MAGIC) < 0)
        return -1;
    return 0;
}
