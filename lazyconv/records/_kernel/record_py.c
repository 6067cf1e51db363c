/* lazyconv.records._ckernel: the Record objects the decoders make (record_iterator.c,
 * plain_iterator.c), and the kernel's own Record type. */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <limits.h>

#include "module.h"
#include "record_py.h"

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
        PyObject *key = PyUnicode_DecodeUTF8((const char *)key_bytes, key_length, "surrogateescape");
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

/* Every type make_record_type made, by base (a dict owning both: types live as long as the
 * process). A second base is a reloaded lazyconv.records._types or another NamedTuple: it gets its
 * own type, as correct and without the free list, which serves the first type made only. */
static PyObject *made_record_types = NULL;
static PyTypeObject *native_record_type = NULL; /* the first type made (the dict owns it) */
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
    PyObject *result = Py_BuildValue("(ON)", (PyObject *)Py_TYPE(self)->tp_base, fields);
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
    .name = "lazyconv.records._types.Record",
    .basicsize = 0, /* the base's */
    .itemsize = 0,
    .flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC,
    .slots = native_record_slots,
};

PyDoc_STRVAR(make_record_type_doc,
             "make_record_type(record) -> type\n\n"
             "The kernel's subclass of the NamedTuple record (5 fields, no __dict__), which the\n"
             "decoders create when given it: same fields, methods, repr and pickling, faster to\n"
             "allocate and free. Made once per record type; later calls return the same type.");
static PyObject *py_make_record_type(PyObject *self, PyObject *args)
{
    PyTypeObject *record;
    if (!PyArg_ParseTuple(args, "O!", &PyType_Type, &record))
        return NULL;
    if (made_record_types == NULL && (made_record_types = PyDict_New()) == NULL)
        return NULL;
    PyObject *made = PyDict_GetItemWithError(made_record_types, (PyObject *)record);
    if (made != NULL)
        return Py_NewRef(made);
    if (PyErr_Occurred())
        return NULL;
    if (!PyType_IsSubtype(record, &PyTuple_Type) || record->tp_dictoffset != 0 || record->tp_weaklistoffset != 0 ||
        record->tp_basicsize != PyTuple_Type.tp_basicsize || record->tp_itemsize != PyTuple_Type.tp_itemsize) {
        PyErr_SetString(PyExc_TypeError, "make_record_type: a tuple subclass without __dict__ or __weakref__ is needed");
        return NULL;
    }
    PyObject *type = PyType_FromSpecWithBases(&native_record_spec, (PyObject *)record);
    if (type == NULL)
        return NULL;
    if (PyDict_SetItem(made_record_types, (PyObject *)record, type) < 0) {
        Py_DECREF(type);
        return NULL;
    }
    if (native_record_type == NULL)
        native_record_type = (PyTypeObject *)type;
    return type;
}

/* The last timestamp made by a decoder that keeps one: records of a batch often share their
 * timestamp (and every record of a log-append-time batch does), and ints are immutable, so
 * equal timestamps share one int object. */

PyObject *lc_cached_timestamp(lc_timestamp_cache *cache, long long base, long long delta)
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
PyObject *lc_build_record(PyTypeObject *record_type, const lc_v2_record *r, long long base_offset,
                              PyObject *base_offset_obj, long long base_timestamp, PyObject *base_timestamp_obj,
                              PyObject *override, lc_timestamp_cache *cache)
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
    else if (cache == NULL || (timestamp = lc_cached_timestamp(cache, base_timestamp, r->timestamp_delta)) == NULL)
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

static PyMethodDef record_methods[] = {
    {"make_record_type", py_make_record_type, METH_VARARGS, make_record_type_doc},
    {NULL, NULL, 0, NULL},
};

int lc_py_record_init(PyObject *module) { return PyModule_AddFunctions(module, record_methods); }
