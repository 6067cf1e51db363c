/* lazyconv.records._ckernel.encode_v2_records: the v2 records of RecordsBuilder, encoded. */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <stdint.h>
#include <string.h>

#include "module.h"

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

static PyMethodDef builder_methods[] = {
    {"encode_v2_records", py_encode_v2_records, METH_VARARGS, encode_v2_records_doc},
    {NULL, NULL, 0, NULL},
};

int lc_py_builder_init(PyObject *module) { return PyModule_AddFunctions(module, builder_methods); }
