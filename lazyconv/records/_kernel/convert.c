/* Down-conversion kernel (see convert.h). Every read is bounds-checked against the end of its
 * range before it happens, whatever the length fields say. Anything unusual stops the kernel
 * at the start of the batch: the Python reference parser then handles that batch, so errors
 * (types, messages, positions) are the reference's. */
#include "convert.h"

#include <string.h>


#include "crc.h"
#include "format.h"
#include "legacy_message.h"
#include "records_walk.h"
#include "wire.h"

int lc_convert_records(const uint8_t *data, size_t n, int64_t count, const lc_records_params *params,
                       uint8_t *out, size_t cap, lc_records_result *result)
{
    const uint8_t *p = data;
    const uint8_t *end = data + n;
    uint8_t *w = out;
    int64_t kept = 0, first_kept = 0, last_kept = 0, rel = 0, max_timestamp = -1;
    /* read once: the writes to out could alias *params as far as the compiler knows */
    const int to_magic = params->to_magic;
    const uint8_t attributes = params->attributes;
    (void)cap; /* the caller reserved enough: see convert.h */

    for (int64_t index = 0; index < count; index++) {
        lc_v2_record r;
        if (lc_v2_record_walk(&p, end, &r) < 0)
            return -1;
        const int32_t off_delta = r.offset_delta, klen = r.key_length, vlen = r.value_length;
        const int64_t ts_delta = r.timestamp_delta;
        const uint8_t *key = r.key, *value = r.value;

        /* offsets and timestamps as exact integers: anything beyond int64 is the slow path's */
        __int128 offset = (__int128)params->base_offset + off_delta;
        if (params->filter && offset < params->first_offset)
            continue;
        __int128 timestamp = params->has_log_append_time ? (__int128)params->log_append_time
                                                         : (__int128)params->base_timestamp + ts_delta;
        if (offset > INT64_MAX || offset < INT64_MIN || timestamp > INT64_MAX || timestamp < -1)
            return -1;
        if (kept > 0 && offset <= last_kept)
            return -1;
        if (kept == 0) {
            first_kept = (int64_t)offset;
            if (params->relative_offsets)
                rel = first_kept;
        }
        __int128 written_offset = offset - rel;
        if (written_offset > INT64_MAX || written_offset < INT64_MIN)
            return -1;
        last_kept = (int64_t)offset;
        if ((int64_t)timestamp > max_timestamp)
            max_timestamp = (int64_t)timestamp;
        kept++;

        w = lc_write_legacy_message(w, (int64_t)written_offset, to_magic, attributes, (int64_t)timestamp, key,
                                    klen, value, vlen);
    }
    if (p != end)
        return -1;
    result->kept = kept;
    result->first_kept_offset = first_kept;
    result->last_kept_offset = last_kept;
    result->max_timestamp = max_timestamp;
    result->written = (size_t)(w - out);
    return 0;
}

void lc_convert_run(const uint8_t *data, size_t n, int to_magic, int64_t first_offset, uint8_t *out,
                    size_t cap, lc_run_result *result)
{
    size_t pos = 0, written = 0;
    int64_t converted = 0, temporary = 0;
    enum lc_stop stop = LC_STOP_END;
    lc_records_params params;
    memset(&params, 0, sizeof params);
    params.filter = 1;
    params.first_offset = first_offset;
    params.to_magic = to_magic;

    while (pos < n) {
        const uint8_t *batch = data + pos;
        size_t remaining = n - pos;
        if (remaining < LC_HEADER_SIZE_UP_TO_MAGIC) {
            stop = LC_STOP_PARTIAL;
            break;
        }
        int32_t length = get_i32(batch + LC_LENGTH_OFFSET);
        if (batch[LC_MAGIC_OFFSET] != 2) {
            stop = LC_STOP_NOT_V2;
            break;
        }
        if (length < LC_BATCH_LENGTH_MIN) {
            stop = LC_STOP_INVALID;
            break;
        }
        size_t size = (size_t)length + LC_LOG_OVERHEAD;
        if (remaining < size) {
            stop = LC_STOP_PARTIAL;
            break;
        }
        uint8_t attributes = batch[LC_ATTRIBUTES_OFFSET + 1]; /* the low byte of the int16 */
        if (attributes & LC_CONTROL_FLAG_MASK) { /* dropped below magic 2 */
            pos += size;
            continue;
        }
        if (attributes & LC_COMPRESSION_CODEC_MASK) {
            stop = LC_STOP_COMPRESSED;
            break;
        }
        int32_t count = get_i32(batch + LC_RECORDS_COUNT_OFFSET);
        size_t payload = size - LC_RECORD_BATCH_OVERHEAD;
        if (count < 0 || (size_t)count > payload / LC_MIN_RECORD_SIZE) { /* cannot hold them */
            stop = LC_STOP_INVALID;
            break;
        }
        if (count == 0) {
            pos += size;
            continue;
        }
        size_t need = payload + (size_t)count * LC_MAX_GROWTH_PER_RECORD;
        if (cap - written < need) {
            stop = LC_STOP_NO_SPACE;
            break;
        }
        params.base_offset = get_i64(batch + LC_BASE_OFFSET_OFFSET);
        params.base_timestamp = get_i64(batch + LC_BASE_TIMESTAMP_OFFSET);
        params.has_log_append_time = (attributes & LC_TIMESTAMP_TYPE_MASK) != 0;
        params.log_append_time = get_i64(batch + LC_MAX_TIMESTAMP_OFFSET);
        params.attributes = (params.has_log_append_time && to_magic == 1) ? LC_TIMESTAMP_TYPE_MASK : 0;
        lc_records_result records;
        if (lc_convert_records(batch + LC_RECORDS_OFFSET, payload, count, &params, out + written,
                               cap - written, &records) < 0) {
            stop = LC_STOP_INVALID;
            break;
        }
        if (records.kept > 0) {
            written += records.written;
            converted += records.kept;
            temporary += (int64_t)size + (int64_t)records.written;
        }
        pos += size;
    }
    result->consumed = pos;
    result->written = written;
    result->converted = converted;
    result->temporary = temporary;
    result->stop = stop;
}

int64_t lc_scan_plain_v2(const uint8_t *data, size_t n)
{
    size_t pos = 0;
    for (;;) {
        size_t remaining = n - pos;
        if (remaining < LC_LOG_OVERHEAD)
            return (int64_t)pos;
        const uint8_t *entry = data + pos;
        int32_t size = get_i32(entry + LC_SIZE_OFFSET);
        if (size < LC_RECORD_OVERHEAD_V0)
            return -1;
        if (remaining < LC_HEADER_SIZE_UP_TO_MAGIC)
            return (int64_t)pos;
        if (entry[LC_MAGIC_OFFSET] > 2)
            return -1;
        if (remaining < LC_LOG_OVERHEAD + (size_t)size)
            return (int64_t)pos;
        if (entry[LC_MAGIC_OFFSET] != 2 || size < LC_BATCH_LENGTH_MIN)
            return -1;
        uint8_t attributes = entry[LC_ATTRIBUTES_OFFSET + 1];
        if ((attributes & LC_COMPRESSION_CODEC_MASK) && !(attributes & LC_CONTROL_FLAG_MASK))
            return -1;
        pos += LC_LOG_OVERHEAD + (size_t)size;
    }
}

enum lc_chunk_stop lc_chunk_end(const uint8_t *data, size_t n, size_t chunk_size, size_t *end)
{
    size_t pos = 0;
    for (;;) {
        *end = pos;
        size_t remaining = n - pos;
        /* the reference splitter ends (or raises) here: the chunk ends before this entry */
        if (remaining < LC_LOG_OVERHEAD)
            return LC_CHUNK_DONE;
        const uint8_t *entry = data + pos;
        int32_t size = get_i32(entry + LC_SIZE_OFFSET);
        if (size < LC_RECORD_OVERHEAD_V0 || remaining < LC_HEADER_SIZE_UP_TO_MAGIC ||
            entry[LC_MAGIC_OFFSET] > 2 || remaining < LC_LOG_OVERHEAD + (size_t)size)
            return LC_CHUNK_DONE;
        size_t entry_size = LC_LOG_OVERHEAD + (size_t)size;
        if (pos > 0 && (pos >= chunk_size || entry_size > chunk_size - pos))
            return LC_CHUNK_DONE;
        /* the reference policy takes this entry into the chunk: it must be plain v2 */
        if (entry[LC_MAGIC_OFFSET] != 2 || size < LC_BATCH_LENGTH_MIN)
            return LC_CHUNK_MIXED;
        uint8_t attributes = entry[LC_ATTRIBUTES_OFFSET + 1];
        if ((attributes & LC_COMPRESSION_CODEC_MASK) && !(attributes & LC_CONTROL_FLAG_MASK))
            return LC_CHUNK_MIXED;
        pos += entry_size;
    }
}

/* Records of an uncompressed v2 batch parse exactly as the reference iterates them. */
static int check_v2_records(const uint8_t *data, size_t n, int64_t count)
{
    const uint8_t *p = data, *end = data + n;
    lc_v2_record r;
    for (int64_t index = 0; index < count; index++)
        if (lc_v2_record_walk(&p, end, &r) < 0)
            return -1;
    return p == end ? 0 : -1;
}

/* parse_legacy_message(check_crc=True) on a delimited entry. */
static int check_legacy(const uint8_t *entry, size_t total, int magic)
{
    lc_legacy_message m;
    return lc_legacy_message_read(entry, total, magic, &m);
}

enum lc_scan_stop lc_scan_entries(const uint8_t *data, size_t n, lc_entry *entries, size_t max_entries,
                                  size_t *count, size_t *consumed)
{
    size_t pos = 0, k = 0;
    enum lc_scan_stop stop;
    for (;;) {
        size_t remaining = n - pos;
        if (remaining == 0) {
            stop = LC_SCAN_END;
            break;
        }
        if (remaining < LC_LOG_OVERHEAD) {
            stop = LC_SCAN_PARTIAL;
            break;
        }
        const uint8_t *entry = data + pos;
        int32_t size = get_i32(entry + LC_SIZE_OFFSET);
        if (size < LC_RECORD_OVERHEAD_V0) {
            stop = LC_SCAN_BAD_SIZE;
            break;
        }
        if (remaining < LC_HEADER_SIZE_UP_TO_MAGIC) {
            stop = LC_SCAN_PARTIAL;
            break;
        }
        int magic = entry[LC_MAGIC_OFFSET];
        if (magic > 2) {
            stop = LC_SCAN_BAD_MAGIC;
            break;
        }
        size_t total = LC_LOG_OVERHEAD + (size_t)size;
        if (remaining < total) {
            stop = LC_SCAN_PARTIAL;
            break;
        }
        if (k == max_entries) {
            stop = LC_SCAN_MORE;
            break;
        }
        lc_entry *e = &entries[k++];
        e->position = (int64_t)pos;
        e->size = (int64_t)total;
        e->magic = magic;
        e->base_offset = get_i64(entry + LC_OFFSET_OFFSET);
        e->valid = 0;
        e->records_checked = 0;
        if (magic == 2) {
            e->attributes = total > LC_ATTRIBUTES_OFFSET + 1 ? entry[LC_ATTRIBUTES_OFFSET + 1] : 0;
            if (size < LC_BATCH_LENGTH_MIN) { /* no header to read: DefaultBatch refuses it */
                e->last_offset_delta = 0;
                e->record_count = 0;
                e->max_timestamp = -1;
            } else {
                int32_t records = get_i32(entry + LC_RECORDS_COUNT_OFFSET);
                e->last_offset_delta = get_i32(entry + LC_LAST_OFFSET_DELTA_OFFSET);
                e->record_count = records;
                e->max_timestamp = get_i64(entry + LC_MAX_TIMESTAMP_OFFSET);
                uint32_t stored = (uint32_t)get_i32(entry + LC_CRC_OFFSET);
                int crc_ok = lc_crc32c(0, entry + LC_ATTRIBUTES_OFFSET, total - LC_ATTRIBUTES_OFFSET) == stored;
                if (e->attributes & LC_COMPRESSION_CODEC_MASK) {
                    e->valid = crc_ok;
                } else {
                    size_t payload = total - LC_RECORD_BATCH_OVERHEAD;
                    e->records_checked = 1;
                    e->valid = crc_ok && records >= 0 &&
                               (records == 0 || ((size_t)records <= payload &&
                                                 check_v2_records(entry + LC_RECORDS_OFFSET, payload, records) == 0));
                }
            }
        } else {
            e->attributes = entry[LC_LOG_OVERHEAD + LC_LEGACY_ATTRIBUTES_OFFSET];
            e->last_offset_delta = 0;
            int wrapper = (e->attributes & LC_COMPRESSION_CODEC_MASK) != 0;
            e->record_count = wrapper ? -1 : 1;
            e->max_timestamp = -1;
            if (magic == 1 && total >= LC_LOG_OVERHEAD + LC_LEGACY_TIMESTAMP_OFFSET + LC_LEGACY_TIMESTAMP_LENGTH)
                e->max_timestamp = get_i64(entry + LC_LOG_OVERHEAD + LC_LEGACY_TIMESTAMP_OFFSET);
            e->records_checked = !wrapper;
            e->valid = check_legacy(entry, total, magic) == 0;
        }
        pos += total;
    }
    *count = k;
    *consumed = pos;
    return stop;
}

size_t lc_run_bound(const uint8_t *data, size_t n)
{
    size_t pos = 0, bound = 0;
    while (n - pos >= LC_RECORD_BATCH_OVERHEAD) {
        const uint8_t *b = data + pos;
        int32_t length = get_i32(b + LC_LENGTH_OFFSET);
        int32_t count = get_i32(b + LC_RECORDS_COUNT_OFFSET);
        if (b[LC_MAGIC_OFFSET] != 2 || length < LC_BATCH_LENGTH_MIN || (size_t)length + LC_LOG_OVERHEAD > n - pos)
            break;
        size_t payload = (size_t)length + LC_LOG_OVERHEAD - LC_RECORD_BATCH_OVERHEAD;
        if (count > 0 && (size_t)count <= payload / LC_MIN_RECORD_SIZE) /* else lc_convert_run stops */
            bound += payload + (size_t)count * LC_MAX_GROWTH_PER_RECORD;
        pos += (size_t)length + LC_LOG_OVERHEAD;
    }
    return bound;
}
