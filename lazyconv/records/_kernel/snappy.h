/* Raw snappy compression with the bytes of Google's snappy 1.1.10, which snappy-java (Kafka's
 * snappy codec) bundles: the same hash, table sizes, skipping and copy encoding, so that a
 * snappy wrapper lazyconv writes is the one Kafka writes. Decompression stays in Python. */
#ifndef LAZYCONV_SNAPPY_H
#define LAZYCONV_SNAPPY_H

#include <stddef.h>
#include <stdint.h>

/* The most input one raw stream holds: its length preamble is a varint of a uint32. */
#define LC_SNAPPY_MAX_INPUT UINT32_MAX

/* The most bytes lc_snappy_compress writes for n bytes of input (snappy's own bound). */
size_t lc_snappy_max_compressed(size_t n);

/* Compresses in[0:n] into out (at least lc_snappy_max_compressed(n) bytes) as one raw snappy
 * stream (the length varint, then 64 KiB fragments); returns the bytes written, or 0 (nothing
 * written or read) when n is past LC_SNAPPY_MAX_INPUT: callers refuse such an n first. */
size_t lc_snappy_compress(const uint8_t *in, size_t n, uint8_t *out);

#endif
