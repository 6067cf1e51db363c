/* Record digests: the per-record checksum of the validation job, computed over wire bytes.
 *
 * A record's digest is (CRC-32C << 32) | CRC-32 of its canonical encoding
 *
 *     key length i32 (-1: null) | key | value length i32 (-1: null) | value
 *     | offset i64 | timestamp i64 | header count i32
 *     | per header: key length i32 | key (its bytes in the log) | value length i32 (-1: null) | value
 *
 * and a set of records is summarised by the sum of their digests modulo 2**64. The parts that
 * differ between what different consumers see (timestamp, headers) come last, so one pass over
 * key and value serves all three digests below. Pure C over byte ranges: callable without the GIL.
 *
 * Every function here declines (returns a "not handled" result) instead of judging: whatever it
 * does not digest, the Python reference decodes and reports.
 */
#ifndef LAZYCONV_DIGEST_H
#define LAZYCONV_DIGEST_H

#include <stddef.h>
#include <stdint.h>

/* What the records of one v2 batch (or decompressed payload) digest to. */
typedef struct {
    int64_t first_offset, last_offset; /* of the first and the last record */
    int offsets_increasing;            /* every record's offset above the previous one's */
    int64_t max_raw_timestamp;         /* max of base timestamp + delta (before any override) */
    int has_headers;                   /* some record has at least one header */
    uint64_t full;                     /* Σ digests: consumer timestamp, headers */
    uint64_t no_headers;               /* Σ digests: consumer timestamp, no headers */
    uint64_t no_timestamp;             /* Σ digests: timestamp -1, no headers */
} lc_v2_digest;

/* Digest `count` (>= 1) v2 records that fill data[0:n) exactly. The consumer timestamp is
 * `override` when has_override (LogAppendTime), else base_timestamp + delta. Returns 0, or -1
 * when the records are malformed or an offset or timestamp leaves int64 (not handled). */
int lc_digest_v2_records(const uint8_t *data, size_t n, int64_t count, int64_t base_offset,
                         int64_t base_timestamp, int has_override, int64_t override, lc_v2_digest *d);

/* Why lc_digest_legacy_run stopped. */
enum lc_digest_stop {
    LC_DIGEST_END = 0,      /* data ends exactly after the last entry */
    LC_DIGEST_PARTIAL = 1,  /* a trailing incomplete entry (or header) */
    LC_DIGEST_DECLINED = 2, /* an entry this function does not digest: compressed, magic 2,
                               a CRC or structure problem (the caller's reader decides) */
};

typedef struct {
    size_t consumed;        /* bytes of whole entries digested */
    int64_t entries;        /* how many */
    int64_t last_offset;    /* offset of the last digested entry */
    int64_t count;          /* records at or above min_offset */
    uint64_t sum;           /* Σ digests (message timestamp, no headers) of those */
    enum lc_digest_stop stop;
} lc_legacy_digest;

/* Digest the plain (uncompressed) magic 0/1 messages at the start of data[0:n): each one's
 * CRC-32 and structure are checked as the reader checks them; anything else stops the walk.
 * A record's offset is its message's offset + shift (the inner messages of a v1 wrapper), and
 * its timestamp `override` for magic 1 messages when has_override (a LogAppendTime wrapper).
 * An offset beyond int64 after the shift stops the walk too (declined). */
void lc_digest_legacy_run(const uint8_t *data, size_t n, int64_t min_offset, int64_t shift, int has_override,
                          int64_t override, lc_legacy_digest *d);

/* The caller's decompression of a legacy wrapper's value (codec 1..3, the wrapper's magic): 0
 * with the inner messages in *out[0:*out_n) (valid until the walk ends), 1 to leave the wrapper
 * to the caller's reader, -1 to abort the walk (a failure of the caller's own). */
typedef int (*lc_wrapper_decompress_fn)(void *context, int codec, int magic, const uint8_t *value, size_t n,
                                        const uint8_t **out, size_t *out_n);

/* lc_digest_legacy_run that also digests compressed magic 0/1 wrappers: each one's CRC-32 and
 * structure checked, its value decompressed by `decompress`, its inner messages digested with
 * absolute offsets (a magic 1 wrapper with a non-zero offset holds offsets relative to its last
 * inner message) and, for a LogAppendTime magic 1 wrapper, its timestamp; the wrapper's offset
 * is the entry's last offset. A wrapper whose inner messages do not all digest (or whose
 * offsets leave int64) is declined. Returns -1 when `decompress` aborted the walk. */
int lc_digest_delivered(const uint8_t *data, size_t n, int64_t min_offset, lc_wrapper_decompress_fn decompress,
                        void *context, lc_legacy_digest *d);

#endif
