/* The parts of the CPython extension lazyconv.records._ckernel, one file per concern (each
 * registers its functions and types on the module; module.c only calls them):
 *
 *   crc_py.c          crc32, crc32c, select_crc, crc_implementations, cpu_features
 *   convert_py.c      convert_v2_run, convert_v2_run_ends, convert_v2_records, convert_v2_chunk,
 *                     append_legacy_message, scan_entries, scan_plain_v2
 *   compressed_py.c   convert_v2_compressed
 *   record_py.c       make_record_type, and the Record tuples both iterators make
 *   record_iterator.c iter_v2_records (the RecordIterator type)
 *   plain_iterator.c  iter_plain_v2 (the PlainV2Iterator type)
 *   lz4_py.c          lz4_frame_blocks, xxh32
 *   builder_py.c      encode_v2_records
 *   digest_py.c       digest_v2_records, digest_legacy_run, digest_delivered
 *   segment_run_py.c  segment_run
 *   chunk_send_py.c   send_plain_chunk
 *   upconvert_py.c    legacy_set_to_v2
 *   buffer_py.c       uninitialized_bytearray
 *   snappy_py.c       snappy_compress_raw
 *
 * The C they call works on plain buffers and knows nothing of Python: crc.c, convert.c,
 * lz4frame.c, snappy.c, digest.c, segment_run.c, records_walk.h, legacy_message.h, wire.h. */
#ifndef LAZYCONV_MODULE_H
#define LAZYCONV_MODULE_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>

/* CRCs (and lz4 frame walks) of shorter buffers keep the GIL: releasing it costs more. */
#define GIL_RELEASE_THRESHOLD 4096

/* Each returns 0, or -1 with an exception set. */
int lc_py_crc_init(PyObject *module);
int lc_py_convert_init(PyObject *module);
int lc_py_compressed_init(PyObject *module);
int lc_py_record_init(PyObject *module);
int lc_py_record_iterator_init(PyObject *module);
int lc_py_plain_iterator_init(PyObject *module);
int lc_py_lz4_init(PyObject *module);
int lc_py_builder_init(PyObject *module);
int lc_py_digest_init(PyObject *module);
int lc_py_segment_run_init(PyObject *module);
int lc_py_chunk_send_init(PyObject *module);
int lc_py_upconvert_init(PyObject *module);
int lc_py_buffer_init(PyObject *module);
int lc_py_snappy_init(PyObject *module);

#endif
