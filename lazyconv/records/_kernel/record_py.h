/* Making the Record tuples of decoded v2 records (record_py.c), for the two iterators. */
#ifndef LAZYCONV_RECORD_PY_H
#define LAZYCONV_RECORD_PY_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>

#include "records_walk.h"

/* The last timestamp made by a decoder that keeps one: records of a batch often share their
 * timestamp (and every record of a log-append-time batch does), and ints are immutable, so
 * equal timestamps share one int object. */
typedef struct {
    PyObject *object; /* NULL: none yet (owned reference otherwise) */
    int64_t value;
} lc_timestamp_cache;

/* base + delta as an int, from the cache when it is the last one made (a new reference); NULL
 * with no exception set beyond int64 (the caller makes it exactly), with one on failure. */
PyObject *lc_cached_timestamp(lc_timestamp_cache *cache, long long base, long long delta);

/* The record_type tuple of the record lc_v2_record_read parsed into r (see record_py.c). */
PyObject *lc_build_record(PyTypeObject *record_type, const lc_v2_record *r, long long base_offset,
                          PyObject *base_offset_obj, long long base_timestamp, PyObject *base_timestamp_obj,
                          PyObject *override, lc_timestamp_cache *cache);

#endif
