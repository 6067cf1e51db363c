/* The validation job's fast path: a run of sound, in-order magic-2 batches checked, digested
 * and described in one pass, without Python objects per batch.
 *
 * A "run" is the longest sequence of consecutive entries from the start of a buffer that are
 * complete magic-2 batches (uncompressed, or compressed data batches whose records the caller
 * decompresses) with a valid CRC-32C, well-formed records, and nothing the segment scan would
 * report: base offsets above the previous batch's
 * last offset (and, for a range's first batch, at or above the segment's base offset), record
 * offsets increasing within [base offset, last offset], partition leader epochs not going
 * backwards, and (CreateTime) a header max timestamp equal to the records' max. The walk stops
 * before the first entry that is anything else: the caller's reference path checks it and
 * reports whatever is wrong. Pure C over byte ranges (the caller's decompression aside).
 */
#ifndef LAZYCONV_SEGMENT_RUN_H
#define LAZYCONV_SEGMENT_RUN_H

#include <stddef.h>
#include <stdint.h>

/* What the checks carry from one batch to the next. */
typedef struct {
    int has_prev_offset;     /* a batch was seen in this range (prev_offset is its max) */
    int64_t prev_offset;     /* the largest last offset so far */
    int64_t min_base_offset; /* the segment's base offset: checked for the range's first batch */
    int has_prev_epoch;
    int32_t prev_epoch;      /* the largest partition leader epoch so far (>= 0) */
    int64_t max_timestamp;   /* the log's running max of header max timestamps (-1 at first) */
} lc_run_state;

/* Row flags. */
#define LC_RUN_CONTROL 1       /* a control batch (its one record is a marker) */
#define LC_RUN_TRANSACTIONAL 2 /* the transactional attribute is set */
#define LC_RUN_ABORT 4         /* a control batch whose marker key says ABORT (type 0) */
#define LC_RUN_COMPRESSED 8    /* its records were decompressed by the caller's function */
#define LC_RUN_ZSTD 16         /* compressed with zstd (never down-converted) */

/* The caller's decompression of a compressed batch's records region: 0 with the records in
 * *out[0:*out_n) (valid until the run ends), 1 to stop the run before the batch (a stream
 * that does not decode: the reference path reports it), -1 to abort the walk (a failure of
 * the caller's own, e.g. an exception to propagate). */
typedef int (*lc_decompress_fn)(void *context, int codec, const uint8_t *data, size_t n, const uint8_t **out,
                                size_t *out_n);

/* One batch of a run; every field an int64 so the Python side reads rows as one array. */
typedef struct {
    int64_t position;       /* the caller's position_base + the batch's offset in the buffer */
    int64_t size;           /* 12 + length */
    int64_t base_offset;
    int64_t last_offset;    /* base offset + last offset delta */
    int64_t first_record;   /* offset of the first record */
    int64_t last_record;    /* offset of the last record */
    int64_t records;        /* record count */
    int64_t max_timestamp;  /* the running max after this batch (lc_run_state.max_timestamp) */
    int64_t epoch;          /* partition leader epoch as stored */
    int64_t producer_id;
    int64_t flags;          /* LC_RUN_* */
} lc_run_row;

#define LC_RUN_ROW_FIELDS 11

/* What the data (non-control) batches of a run add up to. */
typedef struct {
    int64_t records;
    uint64_t full;          /* Σ record digests as stored (timestamp, headers) */
    /* of the data batches that are not zstd (what a consumer below magic 2 can receive): */
    int64_t convertible_records;
    uint64_t no_headers;    /* Σ digests without headers (a magic 1 consumer) */
    uint64_t no_timestamp;  /* Σ digests without headers, timestamp -1 (a magic 0 consumer) */
} lc_run_sums;

/* Walk data[0:n) from its start; fill at most max_rows rows and return how many; *consumed is
 * the end of the last batch taken (the entry there is the caller's). `state` is read and
 * updated; `sums` is added to. Compressed batches are taken only with a `decompress` function
 * (NULL: the run stops before one). Never reads outside data[0:n) or the decompressed
 * records. Returns (size_t)-1 when `decompress` aborted the walk. */
size_t lc_segment_run(const uint8_t *data, size_t n, int64_t position_base, lc_run_state *state,
                      lc_run_row *rows, size_t max_rows, lc_run_sums *sums, size_t *consumed,
                      lc_decompress_fn decompress, void *context);

#endif
