/* lazyconv.records._ckernel.convert_v2_compressed: one compressed v2 batch, its records already
 * decompressed, down-converted into a legacy wrapper; the codec is a Python callback. */
#include "compressed_py.h"

#include "convert.h"
#include "format.h"
#include "legacy_message.h"
#include "wire.h"

#define GIL_THRESHOLD 16384 /* shorter payloads keep the GIL */

/* Append the wrapper message (null key, `value`) to `out`. 1 when it cannot be written (a value
 * past the int32 size field: the reference reports it), -1 with an exception set on allocation
 * failure, 0 on success. */
static int append_wrapper(PyObject *out, int64_t offset, int64_t timestamp, const uint8_t *value, size_t vlen,
                          int magic, uint8_t attributes)
{
    size_t overhead = magic == 0 ? LC_RECORD_OVERHEAD_V0 : LC_RECORD_OVERHEAD_V1;
    if (vlen > (size_t)INT32_MAX - overhead)
        return 1;
    size_t entry = lc_legacy_entry_size(magic, -1, (int32_t)vlen);
    Py_ssize_t start = PyByteArray_GET_SIZE(out);
    if ((size_t)(PY_SSIZE_T_MAX - start) < entry) {
        PyErr_NoMemory();
        return -1;
    }
    if (PyByteArray_Resize(out, start + (Py_ssize_t)entry) < 0)
        return -1;
    lc_write_legacy_message((uint8_t *)PyByteArray_AS_STRING(out) + start, offset, magic, attributes, timestamp,
                            NULL, -1, value, (int32_t)vlen);
    return 0;
}

const char lc_convert_v2_compressed_doc[] =
    "convert_v2_compressed(out, entry, payload, to_magic, compress) -> (kept, temporary) | None\n\n"
    "Down-convert one gzip, snappy or lz4 v2 data batch (entry: its bytes; payload: its records,\n"
    "already decompressed) to magic to_magic (0 or 1), appending one wrapper message to the\n"
    "bytearray out, as convert.convert_compressed_v2_entry converts it: the records become the\n"
    "wrapper's inner messages (offsets relative to the first for magic 1), compressed by\n"
    "compress(codec, inner: bytes, to_magic) -> bytes. kept: the records converted (0: nothing\n"
    "appended); temporary: the batch's size plus the inner messages' and the wrapper's\n"
    "overhead. None, out unchanged, when the reference code must take the batch (a codec or\n"
    "magic it does not convert, records it does not parse, a negative offset): it raises the\n"
    "error. An exception compress raises is passed on, out unchanged.";

PyObject *lc_py_convert_v2_compressed(PyObject *self, PyObject *args)
{
    PyObject *out, *compress;
    Py_buffer entry, payload;
    int to_magic;
    if (!PyArg_ParseTuple(args, "O!y*y*iO", &PyByteArray_Type, &out, &entry, &payload, &to_magic, &compress))
        return NULL;
    PyObject *result = NULL, *inner = NULL, *value = NULL;
    Py_buffer compressed = {0};
    const uint8_t *e = entry.buf;
    if ((to_magic != 0 && to_magic != 1) || entry.len < LC_RECORD_BATCH_OVERHEAD)
        goto decline;
    uint8_t attributes = e[LC_ATTRIBUTES_OFFSET + 1]; /* the low byte */
    int codec = attributes & LC_COMPRESSION_CODEC_MASK;
    if (codec < 1 || codec > 3) /* gzip, snappy, lz4: zstd has no legacy form */
        goto decline;
    int64_t count = get_i32(e + LC_RECORDS_COUNT_OFFSET);
    if (count <= 0) {
        result = Py_BuildValue("(ii)", 0, 0);
        goto done;
    }
    /* a v2 record takes LC_MIN_RECORD_SIZE bytes at least: a count the payload cannot hold is
     * the reference's to report, before anything is reserved for it */
    if ((uint64_t)count > (uint64_t)payload.len / LC_MIN_RECORD_SIZE)
        goto decline;
    int log_append = (attributes & LC_TIMESTAMP_TYPE_MASK) != 0;
    lc_records_params params;
    memset(&params, 0, sizeof params);
    params.base_offset = get_i64(e + LC_BASE_OFFSET_OFFSET);
    params.base_timestamp = get_i64(e + LC_BASE_TIMESTAMP_OFFSET);
    params.has_log_append_time = log_append;
    params.log_append_time = get_i64(e + LC_MAX_TIMESTAMP_OFFSET);
    params.to_magic = to_magic;
    params.attributes = log_append && to_magic == 1 ? LC_TIMESTAMP_TYPE_MASK : 0;
    params.relative_offsets = to_magic == 1;
    /* count <= payload.len / LC_MIN_RECORD_SIZE, and payload.len is a live buffer's size: no overflow below */
    size_t bound = (size_t)payload.len + (size_t)count * LC_MAX_GROWTH_PER_RECORD;
    inner = PyBytes_FromStringAndSize(NULL, (Py_ssize_t)bound);
    if (inner == NULL)
        goto done;
    uint8_t *inner_bytes = (uint8_t *)PyBytes_AS_STRING(inner); /* a new object only we hold */
    lc_records_result converted;
    int status;
    if (payload.len >= GIL_THRESHOLD) {
        Py_BEGIN_ALLOW_THREADS
        status = lc_convert_records(payload.buf, (size_t)payload.len, count, &params, inner_bytes, bound,
                                    &converted);
        Py_END_ALLOW_THREADS
    } else {
        status = lc_convert_records(payload.buf, (size_t)payload.len, count, &params, inner_bytes, bound,
                                    &converted);
    }
    if (status < 0)
        goto decline;
    if (converted.kept == 0) {
        result = Py_BuildValue("(ii)", 0, 0);
        goto done;
    }
    if (converted.first_kept_offset < 0) /* no legacy message carries one: the reference refuses */
        goto decline;
    if (_PyBytes_Resize(&inner, (Py_ssize_t)converted.written) < 0)
        goto done; /* inner is NULL now */
    value = PyObject_CallFunction(compress, "iOi", codec, inner, to_magic);
    if (value == NULL || PyObject_GetBuffer(value, &compressed, PyBUF_SIMPLE) < 0)
        goto done;
    uint8_t wrapper_attributes = (uint8_t)(codec | (log_append && to_magic == 1 ? LC_TIMESTAMP_TYPE_MASK : 0));
    int64_t timestamp = log_append ? params.log_append_time : converted.max_timestamp;
    int appended = append_wrapper(out, converted.last_kept_offset, timestamp, compressed.buf,
                                  (size_t)compressed.len, to_magic, wrapper_attributes);
    if (appended < 0)
        goto done;
    if (appended > 0)
        goto decline;
    size_t overhead = to_magic == 0 ? LC_RECORD_OVERHEAD_V0 : LC_RECORD_OVERHEAD_V1;
    result = Py_BuildValue("(Ln)", (long long)converted.kept,
                           (Py_ssize_t)((size_t)entry.len + converted.written + LC_LOG_OVERHEAD + overhead));
    goto done;
decline:
    result = Py_NewRef(Py_None);
done:
    if (compressed.obj != NULL)
        PyBuffer_Release(&compressed);
    Py_XDECREF(value);
    Py_XDECREF(inner);
    PyBuffer_Release(&payload);
    PyBuffer_Release(&entry);
    return result;
}

static PyMethodDef methods[] = {
    {"convert_v2_compressed", lc_py_convert_v2_compressed, METH_VARARGS, lc_convert_v2_compressed_doc},
    {NULL, NULL, 0, NULL},
};

int lc_py_compressed_init(PyObject *module) { return PyModule_AddFunctions(module, methods); }
