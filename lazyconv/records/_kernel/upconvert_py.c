/* lazyconv.records._ckernel.legacy_set_to_v2: a message set of uncompressed magic 0/1 messages
 * (what most old producers send, and a compressed wrapper's inner messages once decompressed)
 * as the records of one v2 batch, in one pass over the bytes.
 *
 * The reference twin is lazyconv.conversion._up._plain_set plus RecordsBuilder (_v2_batch):
 * the same checks (framing, the CRC-32, no codec, one magic, key and value lengths that fill
 * the message exactly, the LogAppendTime and compacted-topic rules), the same records (offset
 * deltas 0..n-1, timestamp deltas from the first record's, no headers). Anything else is
 * declined: the caller's Python path then meets it and raises what Kafka answered.
 *
 * Why one pass is enough: a v2 record is never longer than the legacy entry it comes from, so
 * the output is reserved once at the input's size. Per message, the input holds 12 (log
 * header) + 14 (magic 0) or 22 (magic 1) + key + value bytes; the record holds at most 5
 * (length) + 1 (attributes) + 1 (magic 0: timestamp delta 0) or 10 (magic 1) + 5 (offset delta
 * below 2^31) + 5 + 5 (key and value lengths, int32) + 1 (no headers) + key + value bytes:
 * 23 <= 26 and 32 <= 34. Every write is still checked against the reserved end. */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <stdint.h>
#include <string.h>

#include "crc.h"
#include "format.h"
#include "module.h"
#include "wire.h"

/* What the batch header needs of the set (the records are in the output). */
typedef struct {
    int magic;              /* of every message */
    int64_t last_offset;    /* the last message's offset, as written (the wrapper check) */
    int64_t count;          /* records written */
    int64_t first_timestamp; /* the batch's base timestamp */
    int64_t max_timestamp;  /* the greatest timestamp, from -1 */
} set_facts;

/* One message's fields, pointing into the input. */
typedef struct {
    int magic;
    int64_t offset, timestamp;
    const uint8_t *key, *value;
    int32_t key_length, value_length; /* -1: null */
} legacy_fields;

static inline size_t varint_size(uint64_t u)
{
    size_t n = 1;
    for (; u >= 0x80; u >>= 7)
        n++;
    return n;
}

static inline uint64_t zigzag64(int64_t v) { return ((uint64_t)v << 1) ^ (v < 0 ? UINT64_MAX : 0); }

static inline uint8_t *write_varint(uint8_t *w, uint64_t u)
{
    for (; u >= 0x80; u >>= 7)
        *w++ = (uint8_t)(u | 0x80);
    *w++ = (uint8_t)u;
    return w;
}

/* Read and check the message at [p, end), as _plain_set does (in another order: every check
 * declines alike). Returns the message's end, or NULL to decline. Each length is checked
 * against what is left before anything is read behind it. */
static const uint8_t *read_legacy(const uint8_t *p, const uint8_t *end, int compacted, legacy_fields *m)
{
    if ((size_t)(end - p) < LC_LOG_OVERHEAD + LC_RECORD_OVERHEAD_V0)
        return NULL;
    int32_t size = get_i32(p + LC_SIZE_OFFSET);
    if (size < LC_RECORD_OVERHEAD_V0 || (size_t)size > (size_t)(end - p) - LC_LOG_OVERHEAD)
        return NULL;
    const uint8_t *message = p + LC_LOG_OVERHEAD, *stop = message + size;
    int magic = (int8_t)message[LC_LEGACY_MAGIC_OFFSET];
    uint8_t attributes = message[LC_LEGACY_ATTRIBUTES_OFFSET];
    if (magic < 0 || magic > 1 || (attributes & LC_COMPRESSION_CODEC_MASK))
        return NULL; /* another magic, or a compressed wrapper */
    if (magic == 1 && size < LC_RECORD_OVERHEAD_V1)
        return NULL;
    const uint8_t *crc_start = message + LC_LEGACY_MAGIC_OFFSET;
    if (lc_crc32(0, crc_start, (size_t)(stop - crc_start)) != (uint32_t)get_i32(message + LC_LEGACY_CRC_OFFSET))
        return NULL;
    int64_t timestamp = -1;
    const uint8_t *q = message + LC_LEGACY_ATTRIBUTES_OFFSET + LC_LEGACY_ATTRIBUTES_LENGTH;
    if (magic == 1) {
        timestamp = get_i64(q);
        q += LC_LEGACY_TIMESTAMP_LENGTH;
        if ((attributes & LC_TIMESTAMP_TYPE_MASK) && timestamp == -1)
            return NULL; /* LogAppendTime without a timestamp: INVALID_TIMESTAMP, said by Python */
        if (timestamp < -1)
            return NULL; /* refused by the Python path (INVALID_TIMESTAMP) */
    }
    /* the overhead (checked above) holds the key length and the value length */
    int32_t key_length = get_i32(q);
    q += LC_LEGACY_KEY_SIZE_LENGTH;
    size_t key_bytes = key_length > 0 ? (size_t)key_length : 0;
    if (key_length < -1 || key_bytes + LC_LEGACY_VALUE_SIZE_LENGTH > (size_t)(stop - q))
        return NULL;
    const uint8_t *key = q;
    q += key_bytes;
    int32_t value_length = get_i32(q);
    q += LC_LEGACY_VALUE_SIZE_LENGTH;
    size_t value_bytes = value_length > 0 ? (size_t)value_length : 0;
    if (value_length < -1 || value_bytes != (size_t)(stop - q))
        return NULL; /* lengths past the message's end, or bytes left unread */
    if (compacted && key_length == -1)
        return NULL;
    m->magic = magic;
    m->offset = get_i64(p + LC_OFFSET_OFFSET);
    m->timestamp = timestamp;
    m->key = key;
    m->key_length = key_length;
    m->value = q;
    m->value_length = value_length;
    return stop;
}

/* The whole set [p, end) as v2 records written at [w, w_end). Returns the bytes written, or -1
 * to decline (what was written is then to be dropped). Needs no lock: reads the input once,
 * field by field, each read bounds-checked as it is made (so a buffer another thread rewrites
 * meanwhile gives wrong records at worst, never a read or write out of bounds). */
static Py_ssize_t legacy_set_records(const uint8_t *p, const uint8_t *end, int compacted, uint8_t *w,
                                     uint8_t *w_end, set_facts *facts)
{
    uint8_t *const start = w;
    legacy_fields m;
    int64_t count = 0;
    if (p == end)
        return -1; /* an empty set: the careful path answers it */
    while (p < end) {
        const uint8_t *next = read_legacy(p, end, compacted, &m);
        if (next == NULL)
            return -1;
        if (count == 0) {
            facts->magic = m.magic;
            facts->first_timestamp = m.timestamp;
            facts->max_timestamp = -1;
        } else if (m.magic != facts->magic) {
            return -1; /* mixed magics: INVALID_RECORD, said by Python */
        }
        int64_t timestamp_delta;
        if (count >= INT32_MAX || __builtin_sub_overflow(m.timestamp, facts->first_timestamp, &timestamp_delta))
            return -1; /* beyond the varint or varlong: the Python path raises */
        size_t key_bytes = m.key_length > 0 ? (size_t)m.key_length : 0;
        size_t value_bytes = m.value_length > 0 ? (size_t)m.value_length : 0;
        size_t body = LC_RECORD_ATTRIBUTES_LENGTH + varint_size(zigzag64(timestamp_delta)) +
                      varint_size(zigzag64(count)) + varint_size(zigzag64(m.key_length)) + key_bytes +
                      varint_size(zigzag64(m.value_length)) + value_bytes + 1 /* header count 0 */;
        if (body > INT32_MAX)
            return -1; /* a record length past the varint: the Python path raises */
        size_t record = varint_size(zigzag64((int64_t)body)) + body;
        if (record > (size_t)(w_end - w))
            return -1; /* cannot happen (see the top of this file); never written past */
        w = write_varint(w, zigzag64((int64_t)body));
        *w++ = 0; /* record attributes */
        w = write_varint(w, zigzag64(timestamp_delta));
        w = write_varint(w, zigzag64(count));
        w = write_varint(w, zigzag64(m.key_length));
        if (key_bytes) {
            memcpy(w, m.key, key_bytes);
            w += key_bytes;
        }
        w = write_varint(w, zigzag64(m.value_length));
        if (value_bytes) {
            memcpy(w, m.value, value_bytes);
            w += value_bytes;
        }
        *w++ = 0; /* no headers */
        if (m.timestamp > facts->max_timestamp)
            facts->max_timestamp = m.timestamp;
        facts->last_offset = m.offset;
        count++;
        p = next;
    }
    facts->count = count;
    return (Py_ssize_t)(w - start);
}

PyDoc_STRVAR(legacy_set_to_v2_doc,
             "legacy_set_to_v2(data, out, compacted) -> (magic, last_offset, count, first_timestamp,\n"
             "max_timestamp) | None\n\n"
             "Append to the bytearray out the v2 records (the batch body) of data, a message set of\n"
             "uncompressed magic 0/1 messages: offset deltas 0..count-1, timestamp deltas from the\n"
             "first record's timestamp, keys and values kept, no headers. last_offset is the last\n"
             "message's offset as written; first_timestamp and max_timestamp are the batch header's\n"
             "base and max timestamps. None, out unchanged, when data is empty or anything in it is\n"
             "not plain or not sound (framing, CRC-32, a codec, mixed magics, lengths that do not\n"
             "fill a message exactly, a LogAppendTime message without a timestamp, a timestamp below\n"
             "-1, a null key when compacted is true, deltas beyond the wire's varints): the caller's\n"
             "Python path then meets it and raises what Kafka answered. The GIL is released for sets\n"
             "of 4 KiB and more; out must not be used by another thread meanwhile (it is locked\n"
             "against resizing).");

static PyObject *py_legacy_set_to_v2(PyObject *self, PyObject *args)
{
    Py_buffer data, view;
    PyObject *out;
    int compacted;
    if (!PyArg_ParseTuple(args, "y*O!p", &data, &PyByteArray_Type, &out, &compacted))
        return NULL;
    Py_ssize_t start = PyByteArray_GET_SIZE(out);
    /* the records are never longer than the set: one reservation, trimmed afterwards */
    if (data.len > PY_SSIZE_T_MAX - start) {
        PyBuffer_Release(&data);
        return PyErr_NoMemory();
    }
    if (PyByteArray_Resize(out, start + data.len) < 0) {
        PyBuffer_Release(&data);
        return NULL;
    }
    if (PyObject_GetBuffer(out, &view, PyBUF_WRITABLE) < 0) { /* locks out against resizing */
        PyBuffer_Release(&data);
        PyByteArray_Resize(out, start);
        return NULL;
    }
    const uint8_t *p = (const uint8_t *)data.buf;
    uint8_t *w = (uint8_t *)view.buf + start;
    set_facts facts;
    Py_ssize_t written;
    if (data.len >= GIL_RELEASE_THRESHOLD) {
        Py_BEGIN_ALLOW_THREADS
        written = legacy_set_records(p, p + data.len, compacted, w, w + data.len, &facts);
        Py_END_ALLOW_THREADS
    } else {
        written = legacy_set_records(p, p + data.len, compacted, w, w + data.len, &facts);
    }
    PyBuffer_Release(&view);
    PyBuffer_Release(&data);
    if (PyByteArray_Resize(out, start + (written < 0 ? 0 : written)) < 0)
        return NULL;
    if (written < 0)
        Py_RETURN_NONE;
    return Py_BuildValue("(iLLLL)", facts.magic, (long long)facts.last_offset, (long long)facts.count,
                         (long long)facts.first_timestamp, (long long)facts.max_timestamp);
}

static PyMethodDef upconvert_methods[] = {
    {"legacy_set_to_v2", py_legacy_set_to_v2, METH_VARARGS, legacy_set_to_v2_doc},
    {NULL, NULL, 0, NULL},
};

int lc_py_upconvert_init(PyObject *module) { return PyModule_AddFunctions(module, upconvert_methods); }
