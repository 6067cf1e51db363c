/* lazyconv.records._ckernel: the CPython face of the compiled kernel (crc.c, convert.c,
 * lz4frame.c; the record parser in records_walk.h).
 *
 * Every function that works on a buffer holds a Py_buffer on it and releases the GIL while the
 * C code runs (CRCs only above a size where that pays). Nothing here constructs errors about
 * the data: the kernel says where it stopped and the Python reference code takes over there.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <limits.h>

#include "convert.h"
#include "crc.h"
#include "digest_py.h"
#include "segment_run_py.h"
#include "compressed_py.h"
#include "format.h"
#include "legacy_message.h"
#include "lz4frame.h"
#include "records_walk.h"
#include "wire.h"

#include <string.h>

#define GIL_RELEASE_THRESHOLD 4096 /* CRCs of shorter buffers keep the GIL */

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
    PyObject *list = PyList_New(0);
    if (list == NULL)
        return NULL;
    if (lc_cpu_has_pclmul() && PyList_Append(list, PyUnicode_FromString("pclmul")) < 0)
        goto fail;
    if (lc_cpu_has_sse42() && PyList_Append(list, PyUnicode_FromString("sse4.2")) < 0)
        goto fail;
    PyObject *tuple = PyList_AsTuple(list);
    Py_DECREF(list);
    return tuple;
fail:
    Py_DECREF(list);
    return NULL;
}

/* Room for the conversion of data[0:n): what lc_convert_run can need before it stops. */
static size_t run_bound(const uint8_t *data, size_t n)
{
    size_t pos = 0, bound = 0;
    while (n - pos >= LC_RECORD_BATCH_OVERHEAD) {
        const uint8_t *b = data + pos;
        int32_t length = get_i32(b + LC_LENGTH_OFFSET);
        int32_t count = get_i32(b + LC_RECORDS_COUNT_OFFSET);
        if (b[LC_MAGIC_OFFSET] != 2 || length < LC_BATCH_LENGTH_MIN || (size_t)length + LC_LOG_OVERHEAD > n - pos)
            break;
        size_t payload = (size_t)length + LC_LOG_OVERHEAD - LC_RECORD_BATCH_OVERHEAD;
        if (count > 0 && (size_t)count <= payload)
            bound += payload + (size_t)count * LC_MAX_GROWTH_PER_RECORD;
        pos += (size_t)length + LC_LOG_OVERHEAD;
    }
    return bound;
}

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
        size_t bound = run_bound(p + consumed, n - consumed);
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
        /* run_bound covers every batch the run converts; a second round is only a safety net */
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
    size_t bound = run_bound(p, n);
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
        size_t size = (size_t)get_i32(p + pos + LC_LENGTH_OFFSET) + LC_LOG_OVERHEAD;
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
    if ((to_magic != 0 && to_magic != 1) || count < 0 || (uint64_t)count > (uint64_t)data.len) {
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

/* One record's headers as a tuple of (str, bytes | None); NULL with no exception set when the
 * reference must report a problem. */
static PyObject *decode_headers(const uint8_t **pp, const uint8_t *end, int32_t count)
{
    const uint8_t *p = *pp;
    if (count < 0 || count > end - p)
        return NULL;
    PyObject *headers = PyTuple_New(count);
    if (headers == NULL)
        return NULL;
    for (int32_t i = 0; i < count; i++) {
        const uint8_t *key_bytes, *value_bytes;
        int32_t key_length, value_length;
        if (lc_v2_header_read(&p, end, &key_bytes, &key_length, &value_bytes, &value_length) < 0)
            goto fail;
        PyObject *key = PyUnicode_DecodeUTF8((const char *)key_bytes, key_length, "strict");
        PyObject *value = value_length < 0 ? Py_NewRef(Py_None)
                                           : PyBytes_FromStringAndSize((const char *)value_bytes, value_length);
        PyObject *pair = key == NULL || value == NULL ? NULL : PyTuple_Pack(2, key, value);
        Py_XDECREF(key);
        Py_XDECREF(value);
        if (pair == NULL)
            goto fail;
        PyTuple_SET_ITEM(headers, i, pair);
    }
    *pp = p;
    return headers;
fail:
    Py_DECREF(headers);
    return NULL;
}

/* offset or timestamp base + delta as an exact Python int (no int64 wrap-around); base_obj is
 * the base as a Python int, or NULL to make one when needed. */
static PyObject *exact_sum(long long base, PyObject *base_obj, long long delta)
{
    if (delta >= 0 ? base <= LLONG_MAX - delta : base >= LLONG_MIN - delta)
        return PyLong_FromLongLong(base + delta);
    PyObject *owned = NULL;
    if (base_obj == NULL && (base_obj = owned = PyLong_FromLongLong(base)) == NULL)
        return NULL;
    PyObject *d = PyLong_FromLongLong(delta);
    PyObject *sum = d == NULL ? NULL : PyNumber_Add(base_obj, d);
    Py_XDECREF(d);
    Py_XDECREF(owned);
    return sum;
}

/* ---- The kernel's record type: a subclass of the public Record NamedTuple ----
 *
 * Identical to Record for every use (it is a Record and a tuple: fields, equality, hashing,
 * ordering, unpacking, _replace/_asdict, repr — named "Record" — and pickling, which yields a
 * plain Record), with its own deallocation and a free list: CPython's generic path for a heap
 * tuple subclass (subtype_dealloc: re-tracking, the trashcan twice, no free list) costs more
 * per record than the decoding. Only the decoders create it (always untracked: its items are
 * ints, bytes, None and tuples of str/bytes pairs); Python code that makes one (_replace,
 * _make) gets a tracked object, which this deallocation handles too. */

#define RECORD_FREE_LIST_SIZE 64

static PyTypeObject *native_record_type = NULL; /* owned, set by make_record_type */
static PyObject *record_free_list[RECORD_FREE_LIST_SIZE];
static int record_free_count = 0;

static void native_record_free(PyObject *self)
{
    PyTypeObject *type = Py_TYPE(self);
    for (Py_ssize_t i = Py_SIZE(self); --i >= 0;)
        Py_XDECREF(PyTuple_GET_ITEM(self, i));
    if (type == native_record_type && Py_SIZE(self) == 5 && record_free_count < RECORD_FREE_LIST_SIZE)
        record_free_list[record_free_count++] = self; /* untracked, its type reference dropped below */
    else
        type->tp_free(self);
    Py_DECREF(type); /* instances of heap types own a reference to their type */
}

/* 1 if freeing this record's items cannot come back here without a tuple's own deallocation in
 * between (which bounds the recursion with the trashcan): ints, bytes or None for the first
 * four, an exact tuple for the headers, as the decoders make them. */
static inline int native_record_is_flat(PyObject *self)
{
    if (Py_SIZE(self) != 5)
        return 0;
    for (Py_ssize_t i = 0; i < 4; i++) {
        PyObject *item = PyTuple_GET_ITEM(self, i);
        if (item != NULL && item != Py_None && !PyLong_CheckExact(item) && !PyBytes_CheckExact(item))
            return 0;
    }
    PyObject *headers = PyTuple_GET_ITEM(self, 4);
    return headers == NULL || PyTuple_CheckExact(headers);
}

static void native_record_dealloc(PyObject *self)
{
    PyObject_GC_UnTrack(self);
    if (native_record_is_flat(self)) { /* the decoders' records: no trashcan needed */
        native_record_free(self);
        return;
    }
    /* anything else (a record built by Python code may nest records): the trashcan bounds the
     * C recursion of deallocating deeply nested objects */
    Py_TRASHCAN_BEGIN(self, native_record_dealloc)
    native_record_free(self);
    Py_TRASHCAN_END
}

/* An untracked 5-item instance of the native record type, items NULL. */
static PyObject *new_native_record(void)
{
    if (record_free_count > 0) {
        PyObject *record = record_free_list[--record_free_count];
        /* sets the type (a new reference to it), the size and a fresh reference count */
        return (PyObject *)PyObject_InitVar((PyVarObject *)record, native_record_type, 5);
    }
    return (PyObject *)PyObject_GC_NewVar(PyTupleObject, native_record_type, 5);
}

static int native_record_traverse(PyObject *self, visitproc visit, void *arg)
{
    Py_VISIT(Py_TYPE(self)); /* a heap type's instances reference it */
    for (Py_ssize_t i = Py_SIZE(self); --i >= 0;)
        Py_VISIT(PyTuple_GET_ITEM(self, i));
    return 0;
}

static PyObject *native_record_reduce(PyObject *self, PyObject *noargs)
{
    /* pickled (and copied) as the public type: Record(*fields) */
    PyObject *fields = PyTuple_GetSlice(self, 0, PyTuple_GET_SIZE(self));
    if (fields == NULL)
        return NULL;
    PyObject *result = Py_BuildValue("(ON)", (PyObject *)native_record_type->tp_base, fields);
    return result;
}

static PyMethodDef native_record_methods[] = {
    {"__reduce__", native_record_reduce, METH_NOARGS, "Pickled as the public Record type."},
    {NULL, NULL, 0, NULL},
};

static PyType_Slot native_record_slots[] = {
    {Py_tp_dealloc, native_record_dealloc},
    {Py_tp_traverse, native_record_traverse},
    {Py_tp_methods, native_record_methods},
    {Py_tp_doc, "A Record made by the compiled kernel (a Record in every respect; see lazyconv.records.Record)."},
    {0, NULL},
};

static PyType_Spec native_record_spec = {
    .name = "lazyconv.records.types.Record",
    .basicsize = 0, /* the base's */
    .itemsize = 0,
    .flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC,
    .slots = native_record_slots,
};

PyDoc_STRVAR(make_record_type_doc,
             "make_record_type(record) -> type\n\n"
             "The kernel's subclass of the NamedTuple record (5 fields, no __dict__), which the\n"
             "decoders create when given it: same fields, methods, repr and pickling, faster to\n"
             "allocate and free. Made once; later calls return the same type.");
static PyObject *py_make_record_type(PyObject *self, PyObject *args)
{
    PyTypeObject *record;
    if (!PyArg_ParseTuple(args, "O!", &PyType_Type, &record))
        return NULL;
    if (native_record_type != NULL) {
        if (native_record_type->tp_base != record) {
            PyErr_SetString(PyExc_ValueError, "make_record_type: already made for another type");
            return NULL;
        }
        return Py_NewRef((PyObject *)native_record_type);
    }
    if (!PyType_IsSubtype(record, &PyTuple_Type) || record->tp_dictoffset != 0 || record->tp_weaklistoffset != 0 ||
        record->tp_basicsize != PyTuple_Type.tp_basicsize || record->tp_itemsize != PyTuple_Type.tp_itemsize) {
        PyErr_SetString(PyExc_TypeError, "make_record_type: a tuple subclass without __dict__ or __weakref__ is needed");
        return NULL;
    }
    PyObject *type = PyType_FromSpecWithBases(&native_record_spec, (PyObject *)record);
    if (type == NULL)
        return NULL;
    native_record_type = (PyTypeObject *)type;
    return Py_NewRef(type);
}

/* The last timestamp made by a decoder that keeps one: records of a batch often share their
 * timestamp (and every record of a log-append-time batch does), and ints are immutable, so
 * equal timestamps share one int object. */
typedef struct {
    PyObject *object; /* NULL: none yet (owned reference otherwise) */
    int64_t value;
} timestamp_cache;

static PyObject *cached_timestamp(timestamp_cache *cache, long long base, long long delta)
{
    if (!(delta >= 0 ? base <= LLONG_MAX - delta : base >= LLONG_MIN - delta))
        return NULL; /* beyond int64: made exactly by the caller */
    int64_t value = base + delta;
    if (cache->object == NULL || cache->value != value) {
        PyObject *made = PyLong_FromLongLong(value);
        if (made == NULL)
            return NULL;
        Py_XSETREF(cache->object, made);
        cache->value = value;
    }
    return Py_NewRef(cache->object);
}

/* An untracked 5-tuple of record_type with NULL items. A tuple subclass without __dict__ or
 * __weakref__ slots (a NamedTuple) is allocated directly: no zero-filling of the memory and no
 * collector tracking (its items cannot form cycles), as tp_alloc would do and
 * PyObject_GC_UnTrack undo; any other subclass through its tp_alloc. */
static PyObject *alloc_record(PyTypeObject *record_type)
{
    PyObject *record;
    if (record_type == native_record_type) {
        record = new_native_record();
        if (record == NULL)
            return NULL;
        for (Py_ssize_t i = 0; i < 5; i++)
            PyTuple_SET_ITEM(record, i, NULL);
        return record;
    }
    if (record_type->tp_alloc == PyType_GenericAlloc && record_type->tp_dictoffset == 0 &&
        record_type->tp_weaklistoffset == 0 && record_type->tp_basicsize == PyTuple_Type.tp_basicsize &&
        record_type->tp_itemsize == PyTuple_Type.tp_itemsize) {
        /* PyObject_GC_NewVar sets the type (a reference to a heap type) and the size */
        record = (PyObject *)PyObject_GC_NewVar(PyTupleObject, record_type, 5);
        if (record == NULL)
            return NULL;
        for (Py_ssize_t i = 0; i < 5; i++)
            PyTuple_SET_ITEM(record, i, NULL);
        return record;
    }
    record = record_type->tp_alloc(record_type, 5);
    if (record != NULL)
        PyObject_GC_UnTrack(record);
    return record;
}

/* The record_type tuple (offset, timestamp, key, value, headers) of the record whose framing
 * lc_v2_record_read parsed into r. NULL with no exception set when its headers or its end are
 * malformed (the reference reports it); NULL with an exception on a Python error. The tuple is
 * allocated with the type's tp_alloc and filled in place (no constructor call) and untracked
 * from the collector: ints, bytes, None and (str, bytes) pairs cannot form cycles. */
static PyObject *build_record(PyTypeObject *record_type, const lc_v2_record *r, long long base_offset,
                              PyObject *base_offset_obj, long long base_timestamp, PyObject *base_timestamp_obj,
                              PyObject *override, timestamp_cache *cache)
{
    PyObject *headers;
    if (r->header_count == 0) {
        if (r->headers != r->end)
            return NULL; /* bytes after the fields */
        headers = PyTuple_New(0); /* the empty-tuple singleton */
        if (headers == NULL)
            return NULL;
    } else {
        const uint8_t *p = r->headers;
        headers = decode_headers(&p, r->end, r->header_count);
        if (headers == NULL)
            return NULL;
        if (p != r->end) {
            Py_DECREF(headers);
            return NULL;
        }
    }
    PyObject *record = alloc_record(record_type);
    if (record == NULL) {
        Py_DECREF(headers);
        return NULL;
    }
    PyObject *offset = exact_sum(base_offset, base_offset_obj, r->offset_delta);
    PyObject *timestamp;
    if (override != NULL)
        timestamp = Py_NewRef(override);
    else if (cache == NULL || (timestamp = cached_timestamp(cache, base_timestamp, r->timestamp_delta)) == NULL)
        timestamp = PyErr_Occurred() ? NULL : exact_sum(base_timestamp, base_timestamp_obj, r->timestamp_delta);
    PyObject *key = r->key_length < 0 ? Py_NewRef(Py_None)
                                      : PyBytes_FromStringAndSize((const char *)r->key, r->key_length);
    PyObject *value = r->value_length < 0 ? Py_NewRef(Py_None)
                                          : PyBytes_FromStringAndSize((const char *)r->value, r->value_length);
    PyTuple_SET_ITEM(record, 0, offset);
    PyTuple_SET_ITEM(record, 1, timestamp);
    PyTuple_SET_ITEM(record, 2, key);
    PyTuple_SET_ITEM(record, 3, value);
    PyTuple_SET_ITEM(record, 4, headers);
    if (offset == NULL || timestamp == NULL || key == NULL || value == NULL) {
        Py_DECREF(record);
        if (!PyErr_Occurred())
            PyErr_SetString(PyExc_SystemError, "record decoding failed without an exception");
        return NULL;
    }
    return record;
}

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
    PyObject *record = build_record(it->record_type, &r, it->base_offset, it->base_offset_obj, it->base_timestamp,
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
    timestamp_cache timestamps;
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
                    PyObject *max_timestamp = cached_timestamp(&it->timestamps, it->max_timestamp, 0);
                    if (max_timestamp == NULL)
                        return NULL;
                    record = build_record(it->record_type, &r, it->base_offset, NULL, 0, NULL, max_timestamp, NULL);
                    Py_DECREF(max_timestamp);
                } else
                    record = build_record(it->record_type, &r, it->base_offset, NULL, it->base_timestamp, NULL, NULL,
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

/* ---- Kafka's lz4 frame (lz4frame.c) ---- */

#define LZ4_MAX_BLOCKS 256 /* more blocks in one frame: the reference walks it */

PyDoc_STRVAR(lz4_frame_blocks_doc,
             "lz4_frame_blocks(data, magic) -> tuple | None\n\n"
             "The data blocks of the Kafka lz4 frame data as one flat tuple (block_max, start,\n"
             "size, stored, start, size, stored, ...): every block's bytes are data[start:start+size],\n"
             "stored meaning uncompressed. The frame is walked with the reference parser's checks\n"
             "(header checksum checked for magic >= 1 only); None when the reference must parse it\n"
             "(it raises the error), for block checksums, or for more than 256 blocks.");
static PyObject *py_lz4_frame_blocks(PyObject *self, PyObject *args)
{
    Py_buffer data;
    int magic;
    if (!PyArg_ParseTuple(args, "y*i", &data, &magic))
        return NULL;
    lc_lz4_block blocks[LZ4_MAX_BLOCKS];
    size_t block_max = 0;
    int64_t count;
    if (data.len >= GIL_RELEASE_THRESHOLD) { /* the walk reads O(blocks) words, not the data */
        Py_BEGIN_ALLOW_THREADS
        count = lc_lz4_frame_blocks(data.buf, (size_t)data.len, magic, blocks, LZ4_MAX_BLOCKS, &block_max);
        Py_END_ALLOW_THREADS
    } else {
        count = lc_lz4_frame_blocks(data.buf, (size_t)data.len, magic, blocks, LZ4_MAX_BLOCKS, &block_max);
    }
    PyBuffer_Release(&data);
    if (count < 0)
        Py_RETURN_NONE;
    PyObject *result = PyTuple_New(1 + 3 * (Py_ssize_t)count);
    if (result == NULL)
        return NULL;
    PyObject *item = PyLong_FromSize_t(block_max);
    if (item == NULL)
        goto fail;
    PyTuple_SET_ITEM(result, 0, item);
    for (int64_t i = 0; i < count; i++) {
        PyObject *start = PyLong_FromSize_t(blocks[i].start), *size = PyLong_FromSize_t(blocks[i].size);
        PyTuple_SET_ITEM(result, 1 + 3 * i, start);
        PyTuple_SET_ITEM(result, 2 + 3 * i, size);
        PyTuple_SET_ITEM(result, 3 + 3 * i, PyBool_FromLong(blocks[i].stored));
        if (start == NULL || size == NULL)
            goto fail;
    }
    return result;
fail:
    Py_DECREF(result);
    return NULL;
}

PyDoc_STRVAR(xxh32_doc, "xxh32(data, seed=0) -> int\n\nxxHash32 of data (the kernel's own, for tests).");
static PyObject *py_xxh32(PyObject *self, PyObject *args)
{
    Py_buffer data;
    unsigned int seed = 0;
    if (!PyArg_ParseTuple(args, "y*|I", &data, &seed))
        return NULL;
    uint32_t h = lc_xxh32(data.buf, (size_t)data.len, seed);
    PyBuffer_Release(&data);
    return PyLong_FromUnsignedLong(h);
}

/* ---- v2 record encoding (the builder) ---- */

static size_t uvarint_size(uint64_t v)
{
    size_t n = 1;
    while (v >= 0x80) {
        v >>= 7;
        n++;
    }
    return n;
}

static uint64_t zigzag(int64_t v) { return ((uint64_t)v << 1) ^ (uint64_t)(v >> 63); }

static uint8_t *put_uvarint(uint8_t *p, uint64_t v)
{
    while (v >= 0x80) {
        *p++ = (uint8_t)(v | 0x80);
        v >>= 7;
    }
    *p++ = (uint8_t)v;
    return p;
}

/* One record's fields, borrowed from its tuple. */
typedef struct {
    int64_t offset_delta, timestamp_delta;
    const char *key, *value;
    Py_ssize_t klen, vlen; /* -1: null */
    PyObject *headers;     /* a tuple of (str, bytes | None) pairs */
    size_t body;           /* bytes after the length prefix */
} v2_fields;

/* Borrow and size one record; 0 ok, 1 leave it to the reference encoder. No exception set. */
static int v2_record_fields(PyObject *record, long long base_offset, long long base_timestamp, v2_fields *f)
{
    if (!PyTuple_CheckExact(record) || PyTuple_GET_SIZE(record) != 5)
        return 1;
    if (!PyLong_CheckExact(PyTuple_GET_ITEM(record, 0)) || !PyLong_CheckExact(PyTuple_GET_ITEM(record, 1)))
        return 1; /* exact ints only: no Python code (__index__) runs between the two passes */
    int overflow = 0;
    long long offset = PyLong_AsLongLongAndOverflow(PyTuple_GET_ITEM(record, 0), &overflow);
    if (overflow || (offset == -1 && PyErr_Occurred()))
        goto fallback;
    long long timestamp = PyLong_AsLongLongAndOverflow(PyTuple_GET_ITEM(record, 1), &overflow);
    if (overflow || (timestamp == -1 && PyErr_Occurred()))
        goto fallback;
    /* the builder checks offsets (delta 0..INT32_MAX) and timestamps (>= -1) before this */
    long long offset_delta, timestamp_delta;
    if (__builtin_sub_overflow(offset, base_offset, &offset_delta) || offset_delta < 0 || offset_delta > INT32_MAX ||
        __builtin_sub_overflow(timestamp, base_timestamp, &timestamp_delta))
        return 1;
    f->offset_delta = offset_delta;
    f->timestamp_delta = timestamp_delta;
    PyObject *key = PyTuple_GET_ITEM(record, 2), *value = PyTuple_GET_ITEM(record, 3);
    f->headers = PyTuple_GET_ITEM(record, 4);
    if ((key != Py_None && !PyBytes_CheckExact(key)) || (value != Py_None && !PyBytes_CheckExact(value)) ||
        !PyTuple_CheckExact(f->headers))
        return 1;
    f->key = key == Py_None ? NULL : PyBytes_AS_STRING(key);
    f->klen = key == Py_None ? -1 : PyBytes_GET_SIZE(key);
    f->value = value == Py_None ? NULL : PyBytes_AS_STRING(value);
    f->vlen = value == Py_None ? -1 : PyBytes_GET_SIZE(value);
    if (f->klen > INT32_MAX || f->vlen > INT32_MAX)
        return 1;
    Py_ssize_t hcount = PyTuple_GET_SIZE(f->headers);
    size_t body = 1 + uvarint_size(zigzag(f->timestamp_delta)) + uvarint_size(zigzag(f->offset_delta)) +
                  uvarint_size(zigzag(f->klen)) + (f->klen > 0 ? (size_t)f->klen : 0) +
                  uvarint_size(zigzag(f->vlen)) + (f->vlen > 0 ? (size_t)f->vlen : 0) + uvarint_size(zigzag(hcount));
    for (Py_ssize_t i = 0; i < hcount; i++) {
        PyObject *pair = PyTuple_GET_ITEM(f->headers, i);
        if (!PyTuple_CheckExact(pair) || PyTuple_GET_SIZE(pair) != 2 || !PyUnicode_CheckExact(PyTuple_GET_ITEM(pair, 0)))
            return 1;
        PyObject *hval = PyTuple_GET_ITEM(pair, 1);
        if (hval != Py_None && !PyBytes_CheckExact(hval))
            return 1;
        Py_ssize_t hklen;
        if (PyUnicode_AsUTF8AndSize(PyTuple_GET_ITEM(pair, 0), &hklen) == NULL)
            goto fallback; /* e.g. lone surrogates: the reference raises its own error */
        Py_ssize_t hvlen = hval == Py_None ? -1 : PyBytes_GET_SIZE(hval);
        body += uvarint_size(zigzag(hklen)) + (size_t)hklen + uvarint_size(zigzag(hvlen)) + (hvlen > 0 ? (size_t)hvlen : 0);
    }
    if (body > INT32_MAX)
        return 1;
    f->body = body;
    return 0;
fallback:
    PyErr_Clear();
    return 1;
}

static uint8_t *put_v2_record(uint8_t *p, const v2_fields *f)
{
    p = put_uvarint(p, zigzag((int64_t)f->body));
    *p++ = 0; /* record attributes */
    p = put_uvarint(p, zigzag(f->timestamp_delta));
    p = put_uvarint(p, zigzag(f->offset_delta));
    p = put_uvarint(p, zigzag(f->klen));
    if (f->klen > 0) {
        memcpy(p, f->key, (size_t)f->klen);
        p += f->klen;
    }
    p = put_uvarint(p, zigzag(f->vlen));
    if (f->vlen > 0) {
        memcpy(p, f->value, (size_t)f->vlen);
        p += f->vlen;
    }
    Py_ssize_t hcount = PyTuple_GET_SIZE(f->headers);
    p = put_uvarint(p, zigzag(hcount));
    for (Py_ssize_t i = 0; i < hcount; i++) {
        PyObject *pair = PyTuple_GET_ITEM(f->headers, i), *hval = PyTuple_GET_ITEM(pair, 1);
        Py_ssize_t hklen;
        const char *hkey = PyUnicode_AsUTF8AndSize(PyTuple_GET_ITEM(pair, 0), &hklen); /* cached: cannot fail now */
        p = put_uvarint(p, zigzag(hklen));
        memcpy(p, hkey, (size_t)hklen);
        p += hklen;
        if (hval == Py_None) {
            p = put_uvarint(p, zigzag(-1));
        } else {
            Py_ssize_t hvlen = PyBytes_GET_SIZE(hval);
            p = put_uvarint(p, zigzag(hvlen));
            memcpy(p, PyBytes_AS_STRING(hval), (size_t)hvlen);
            p += hvlen;
        }
    }
    return p;
}

PyDoc_STRVAR(encode_v2_records_doc,
             "encode_v2_records(out, records, base_offset, base_timestamp) -> bool\n\n"
             "Append the v2 encoding of records (a list of (offset, timestamp, key, value, headers)\n"
             "tuples as RecordsBuilder keeps them) to the bytearray out, as\n"
             "records._codec.append_v2_record does one by one. False, with out unchanged, when a\n"
             "record needs the reference encoder (a value beyond the wire's ranges, a header key\n"
             "that is not UTF-8 encodable, unexpected types): the caller encodes them all itself.");

static PyObject *py_encode_v2_records(PyObject *self, PyObject *args)
{
    PyObject *out, *records;
    long long base_offset, base_timestamp;
    if (!PyArg_ParseTuple(args, "O!O!LL", &PyByteArray_Type, &out, &PyList_Type, &records, &base_offset,
                          &base_timestamp))
        return NULL;
    Py_ssize_t count = PyList_GET_SIZE(records);
    size_t total = 0;
    v2_fields f;
    for (Py_ssize_t i = 0; i < count; i++) {
        if (v2_record_fields(PyList_GET_ITEM(records, i), base_offset, base_timestamp, &f))
            Py_RETURN_FALSE;
        total += uvarint_size(zigzag((int64_t)f.body)) + f.body;
        if (total > (size_t)PY_SSIZE_T_MAX / 2)
            Py_RETURN_FALSE;
    }
    Py_ssize_t start = PyByteArray_GET_SIZE(out);
    if (PyByteArray_Resize(out, start + (Py_ssize_t)total) < 0)
        return NULL;
    uint8_t *p = (uint8_t *)PyByteArray_AS_STRING(out) + start;
    uint8_t *end = p + total;
    /* records is a list the caller does not change meanwhile (no Python code runs here) */
    for (Py_ssize_t i = 0; i < count; i++) {
        if (v2_record_fields(PyList_GET_ITEM(records, i), base_offset, base_timestamp, &f) ||
            (size_t)(end - p) < uvarint_size(zigzag((int64_t)f.body)) + f.body)
            break; /* cannot happen (same fields, nothing ran in between); never write past end */
        p = put_v2_record(p, &f);
    }
    if (p != end) { /* cannot happen: both passes size the same fields */
        PyByteArray_Resize(out, start);
        PyErr_SetString(PyExc_SystemError, "encode_v2_records: size mismatch");
        return NULL;
    }
    Py_RETURN_TRUE;
}

static PyMethodDef methods[] = {
    {"crc32", py_crc32, METH_VARARGS, crc32_doc},
    {"crc32c", py_crc32c, METH_VARARGS, crc32c_doc},
    {"select_crc", (PyCFunction)(void (*)(void))py_select_crc, METH_VARARGS | METH_KEYWORDS, select_crc_doc},
    {"crc_implementations", py_crc_implementations, METH_NOARGS, crc_implementations_doc},
    {"cpu_features", py_cpu_features, METH_NOARGS, cpu_features_doc},
    {"convert_v2_run", py_convert_v2_run, METH_VARARGS, convert_v2_run_doc},
    {"convert_v2_records", py_convert_v2_records, METH_VARARGS, convert_v2_records_doc},
    {"convert_v2_run_ends", py_convert_v2_run_ends, METH_VARARGS, convert_v2_run_ends_doc},
    {"scan_plain_v2", py_scan_plain_v2, METH_VARARGS, scan_plain_v2_doc},
    {"convert_v2_chunk", py_convert_v2_chunk, METH_VARARGS, convert_v2_chunk_doc},
    {"encode_v2_records", py_encode_v2_records, METH_VARARGS, encode_v2_records_doc},
    {"scan_entries", py_scan_entries, METH_VARARGS, scan_entries_doc},
    {"iter_v2_records", py_iter_v2_records, METH_VARARGS, iter_v2_records_doc},
    {"iter_plain_v2", py_iter_plain_v2, METH_VARARGS, iter_plain_v2_doc},
    {"make_record_type", py_make_record_type, METH_VARARGS, make_record_type_doc},
    {"lz4_frame_blocks", py_lz4_frame_blocks, METH_VARARGS, lz4_frame_blocks_doc},
    {"xxh32", py_xxh32, METH_VARARGS, xxh32_doc},
    {"append_legacy_message", (PyCFunction)(void (*)(void))py_append_legacy_message, METH_FASTCALL,
     append_legacy_message_doc},
    LC_DIGEST_METHODS
    LC_SEGMENT_RUN_METHODS
    LC_CONVERT_COMPRESSED_METHODS
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "lazyconv.records._ckernel",
    "The compiled kernel of lazyconv.records (see lazyconv.records._native for the Python face).", -1, methods,
};

#define ADD_FORMAT(name) \
    tmp = PyLong_FromLong(LC_##name); \
    if (tmp == NULL || PyDict_SetItemString(format, #name, tmp) < 0) { Py_XDECREF(tmp); goto fail; } \
    Py_DECREF(tmp);

PyMODINIT_FUNC PyInit__ckernel(void)
{
    lc_crc_init();
    if (PyType_Ready(&RecordIteratorType) < 0 || PyType_Ready(&PlainV2IteratorType) < 0)
        return NULL;
    PyObject *m = PyModule_Create(&module);
    if (m == NULL)
        return NULL;
    PyObject *format = PyDict_New(), *tmp;
    if (format == NULL)
        goto fail_module;
    LC_FORMAT_NAMES(ADD_FORMAT)
    if (PyModule_AddObject(m, "FORMAT", format) < 0)
        goto fail;
    if (PyModule_AddIntConstant(m, "STOP_END", LC_STOP_END) < 0 ||
        PyModule_AddIntConstant(m, "STOP_COMPRESSED", LC_STOP_COMPRESSED) < 0 ||
        PyModule_AddIntConstant(m, "STOP_NOT_V2", LC_STOP_NOT_V2) < 0 ||
        PyModule_AddIntConstant(m, "STOP_PARTIAL", LC_STOP_PARTIAL) < 0 ||
        PyModule_AddIntConstant(m, "STOP_INVALID", LC_STOP_INVALID) < 0 ||
        PyModule_AddIntConstant(m, "CHUNK_DONE", LC_CHUNK_DONE) < 0 ||
        PyModule_AddIntConstant(m, "CHUNK_MIXED", LC_CHUNK_MIXED) < 0 ||
        PyModule_AddIntConstant(m, "SCAN_END", LC_SCAN_END) < 0 ||
        PyModule_AddIntConstant(m, "SCAN_PARTIAL", LC_SCAN_PARTIAL) < 0 ||
        PyModule_AddIntConstant(m, "SCAN_BAD_SIZE", LC_SCAN_BAD_SIZE) < 0 ||
        PyModule_AddIntConstant(m, "SCAN_BAD_MAGIC", LC_SCAN_BAD_MAGIC) < 0)
        goto fail_module;
    return m;
fail:
    Py_DECREF(format);
fail_module:
    Py_DECREF(m);
    return NULL;
}
