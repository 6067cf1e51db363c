/* The validation job's fast path over runs of sound magic-2 batches (see segment_run.h). */
#include "segment_run.h"

#include "crc.h"
#include "digest.h"
#include "format.h"
#include "records_walk.h"
#include "wire.h"

/* Offsets beyond this leave room for base offset + any int32 delta. */
#define MAX_SAFE_BASE_OFFSET (INT64_MAX - INT32_MAX)
#define LC_CODEC_ZSTD 4

/* Whether the first record of a control batch's payload is an ABORT marker (key type 0). */
static int is_abort_marker(const uint8_t *payload, size_t n)
{
    const uint8_t *p = payload;
    lc_v2_record r;
    if (lc_v2_record_read(&p, payload + n, &r) < 0)
        return 0; /* unreachable after a successful digest */
    return r.key_length >= 4 && r.key[2] == 0 && r.key[3] == 0;
}

/* Check and describe the batch at b[0:size) against `state`; 0 and the row filled, 1 when the
 * caller's reference path must take it, -1 when `decompress` aborted. Updates nothing. */
static int take_batch(const uint8_t *b, size_t size, const lc_run_state *state, lc_run_row *row,
                      lc_v2_digest *digest, lc_decompress_fn decompress, void *context)
{
    uint8_t attributes = b[LC_ATTRIBUTES_OFFSET + 1]; /* the low byte of the int16 */
    int codec = attributes & LC_COMPRESSION_CODEC_MASK;
    if (codec && (decompress == NULL || (attributes & LC_CONTROL_FLAG_MASK)))
        return 1;
    int64_t base = get_i64(b + LC_BASE_OFFSET_OFFSET);
    int32_t delta = get_i32(b + LC_LAST_OFFSET_DELTA_OFFSET);
    int32_t count = get_i32(b + LC_RECORDS_COUNT_OFFSET);
    if (base < 0 || base > MAX_SAFE_BASE_OFFSET || delta < 0 || count < 1)
        return 1;
    int64_t last = base + delta;
    if (state->has_prev_offset ? base <= state->prev_offset : base < state->min_base_offset)
        return 1;
    int32_t epoch = get_i32(b + LC_PARTITION_LEADER_EPOCH_OFFSET);
    if (epoch >= 0 && state->has_prev_epoch && epoch < state->prev_epoch)
        return 1;
    uint32_t stored_crc = (uint32_t)get_i32(b + LC_CRC_OFFSET);
    if (lc_crc32c(0, b + LC_ATTRIBUTES_OFFSET, size - LC_ATTRIBUTES_OFFSET) != stored_crc)
        return 1;
    const uint8_t *payload = b + LC_RECORDS_OFFSET;
    size_t payload_size = size - LC_RECORD_BATCH_OVERHEAD;
    if (codec) {
        int rc = decompress(context, codec, payload, payload_size, &payload, &payload_size);
        if (rc != 0)
            return rc < 0 ? -1 : 1;
    }
    int64_t max_timestamp = get_i64(b + LC_MAX_TIMESTAMP_OFFSET);
    int log_append_time = (attributes & LC_TIMESTAMP_TYPE_MASK) != 0;
    if (lc_digest_v2_records(payload, payload_size, count, base, get_i64(b + LC_BASE_TIMESTAMP_OFFSET),
                             log_append_time, max_timestamp, digest) < 0)
        return 1;
    if (!digest->offsets_increasing || digest->first_offset < base || digest->last_offset > last)
        return 1;
    if (!log_append_time && digest->max_raw_timestamp != max_timestamp)
        return 1;
    int64_t flags = 0;
    if (attributes & LC_CONTROL_FLAG_MASK) {
        flags |= LC_RUN_CONTROL;
        if (is_abort_marker(payload, payload_size))
            flags |= LC_RUN_ABORT;
    }
    if (attributes & LC_TRANSACTIONAL_FLAG_MASK)
        flags |= LC_RUN_TRANSACTIONAL;
    if (codec)
        flags |= LC_RUN_COMPRESSED | (codec == LC_CODEC_ZSTD ? LC_RUN_ZSTD : 0);
    row->size = (int64_t)size;
    row->base_offset = base;
    row->last_offset = last;
    row->first_record = digest->first_offset;
    row->last_record = digest->last_offset;
    row->records = count;
    row->max_timestamp = max_timestamp; /* the batch's own; the caller makes it a running max */
    row->epoch = epoch;
    row->producer_id = get_i64(b + LC_PRODUCER_ID_OFFSET);
    row->flags = flags;
    return 0;
}

size_t lc_segment_run(const uint8_t *data, size_t n, int64_t position_base, lc_run_state *state,
                      lc_run_row *rows, size_t max_rows, lc_run_sums *sums, size_t *consumed,
                      lc_decompress_fn decompress, void *context)
{
    size_t pos = 0, taken = 0;
    while (taken < max_rows && n - pos >= LC_RECORD_BATCH_OVERHEAD) {
        const uint8_t *b = data + pos;
        int32_t length = get_i32(b + LC_LENGTH_OFFSET);
        if (b[LC_MAGIC_OFFSET] != 2 || length < LC_BATCH_LENGTH_MIN ||
            (size_t)length > n - pos - LC_LOG_OVERHEAD)
            break;
        size_t size = (size_t)length + LC_LOG_OVERHEAD;
        lc_run_row *row = &rows[taken];
        lc_v2_digest digest;
        int rc = take_batch(b, size, state, row, &digest, decompress, context);
        if (rc < 0) {
            *consumed = pos;
            return (size_t)-1;
        }
        if (rc > 0)
            break;
        row->position = position_base + (int64_t)pos;
        state->has_prev_offset = 1;
        state->prev_offset = row->last_offset;
        if (row->epoch >= 0) {
            state->has_prev_epoch = 1;
            state->prev_epoch = (int32_t)row->epoch;
        }
        if (row->max_timestamp > state->max_timestamp)
            state->max_timestamp = row->max_timestamp;
        row->max_timestamp = state->max_timestamp;
        if (!(row->flags & LC_RUN_CONTROL)) {
            sums->records += row->records;
            sums->full += digest.full;
            if (!(row->flags & LC_RUN_ZSTD)) {
                sums->convertible_records += row->records;
                sums->no_headers += digest.no_headers;
                sums->no_timestamp += digest.no_timestamp;
            }
        }
        pos += size;
        taken++;
    }
    *consumed = pos;
    return taken;
}
