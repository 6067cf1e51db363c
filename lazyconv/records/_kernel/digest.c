/* Record digests over wire bytes (see digest.h for the canonical encoding). */
#include "digest.h"

#include "crc.h"
#include "format.h"
#include "records_walk.h"
#include "wire.h"

/* Both CRCs of a canonical encoding, fed piece by piece. */
typedef struct {
    uint32_t c32, c32c;
} dual_crc;

static inline void dual_update(dual_crc *h, const uint8_t *p, size_t n)
{
    h->c32 = lc_crc32(h->c32, p, n);
    h->c32c = lc_crc32c(h->c32c, p, n);
}

static inline uint64_t dual_value(const dual_crc *h)
{
    return ((uint64_t)h->c32c << 32) | h->c32;
}

static inline void update_i32(dual_crc *h, int32_t v)
{
    uint8_t b[4];
    put_i32(b, v);
    dual_update(h, b, 4);
}

/* The prefix every digest of a record shares: key and value. */
static inline void digest_key_value(dual_crc *h, const uint8_t *key, int32_t klen, const uint8_t *value,
                                    int32_t vlen)
{
    update_i32(h, klen < 0 ? -1 : klen);
    if (klen > 0)
        dual_update(h, key, (size_t)klen);
    update_i32(h, vlen < 0 ? -1 : vlen);
    if (vlen > 0)
        dual_update(h, value, (size_t)vlen);
}

/* offset int64 | timestamp int64 | header count int32: what follows key and value in a record's
 * canonical encoding (records/_digest.py), not a wire layout. */
enum { TAIL_OFFSET_AT = 0, TAIL_TIMESTAMP_AT = 8, TAIL_HEADER_COUNT_AT = 16, TAIL_SIZE = 20 };

static inline void digest_tail(dual_crc *h, int64_t offset, int64_t timestamp, int32_t header_count)
{
    uint8_t b[TAIL_SIZE];
    put_i64(b + TAIL_OFFSET_AT, offset);
    put_i64(b + TAIL_TIMESTAMP_AT, timestamp);
    put_i32(b + TAIL_HEADER_COUNT_AT, header_count);
    dual_update(h, b, TAIL_SIZE);
}

/* The headers of one record into h, checked as the reader checks them (keys: any bytes). */
static int digest_headers(dual_crc *h, const uint8_t **pp, const uint8_t *end, int32_t count)
{
    const uint8_t *p = *pp;
    if (count < 0 || count > end - p)
        return -1;
    for (int32_t i = 0; i < count; i++) {
        const uint8_t *key, *value;
        int32_t key_length, value_length;
        if (lc_v2_header_read(&p, end, &key, &key_length, &value, &value_length) < 0)
            return -1;
        update_i32(h, key_length);
        dual_update(h, key, (size_t)key_length);
        update_i32(h, value_length);
        if (value_length > 0)
            dual_update(h, value, (size_t)value_length);
    }
    *pp = p;
    return 0;
}

static inline int add_overflows(int64_t base, int64_t delta, int64_t *sum)
{
    return __builtin_add_overflow(base, delta, sum);
}

int lc_digest_v2_records(const uint8_t *data, size_t n, int64_t count, int64_t base_offset,
                         int64_t base_timestamp, int has_override, int64_t override, lc_v2_digest *d)
{
    const uint8_t *p = data, *end = data + n;
    if (count < 1 || (uint64_t)count > n)
        return -1;
    d->offsets_increasing = 1;
    d->has_headers = 0;
    d->full = d->no_headers = d->no_timestamp = 0;
    d->max_raw_timestamp = INT64_MIN;
    int64_t previous = 0;
    for (int64_t index = 0; index < count; index++) {
        lc_v2_record r;
        int64_t offset, raw_ts;
        if (lc_v2_record_read(&p, end, &r) < 0)
            return -1;
        if (add_overflows(base_offset, r.offset_delta, &offset) ||
            add_overflows(base_timestamp, r.timestamp_delta, &raw_ts))
            return -1;
        int64_t timestamp = has_override ? override : raw_ts;
        dual_crc shared = {0, 0};
        digest_key_value(&shared, r.key, r.key_length, r.value, r.value_length);
        dual_crc h = shared;
        digest_tail(&h, offset, -1, 0);
        d->no_timestamp += dual_value(&h);
        h = shared;
        digest_tail(&h, offset, timestamp, 0);
        uint64_t without_headers = dual_value(&h);
        d->no_headers += without_headers;
        if (r.header_count == 0) {
            d->full += without_headers;
        } else {
            h = shared;
            digest_tail(&h, offset, timestamp, r.header_count);
            if (digest_headers(&h, &p, r.end, r.header_count) < 0)
                return -1;
            d->full += dual_value(&h);
            d->has_headers = 1;
        }
        if (p != r.end)
            return -1;
        if (index == 0)
            d->first_offset = offset;
        else if (offset <= previous)
            d->offsets_increasing = 0;
        previous = offset;
        if (raw_ts > d->max_raw_timestamp)
            d->max_raw_timestamp = raw_ts;
    }
    if (p != end)
        return -1;
    d->last_offset = previous;
    return 0;
}

/* One plain (uncompressed) legacy entry at m[0:size), or -1 if the reader would object or it
 * is compressed: its offset (+ shift) and digest out. */
static int digest_legacy_message(const uint8_t *m, size_t size, int64_t shift, int has_override, int64_t override,
                                 int64_t *offset, uint64_t *digest)
{
    int magic = m[LC_LOG_OVERHEAD + LC_LEGACY_MAGIC_OFFSET];
    lc_legacy_message message;
    if (magic > 1 || (m[LC_LOG_OVERHEAD + LC_LEGACY_ATTRIBUTES_OFFSET] & 0x07) != 0 ||
        lc_legacy_message_read(m, size, magic, &message) < 0)
        return -1;
    if (add_overflows(message.offset, shift, offset))
        return -1;
    int64_t timestamp = magic == 1 && has_override ? override : message.timestamp;
    dual_crc h = {0, 0};
    digest_key_value(&h, message.key, message.key_length, message.value, message.value_length);
    digest_tail(&h, *offset, timestamp, 0);
    *digest = dual_value(&h);
    return 0;
}

/* An empty walk: nothing digested, the last offset -1. */
static inline void digest_start(lc_legacy_digest *d)
{
    d->entries = d->count = 0;
    d->sum = 0;
    d->last_offset = -1;
    d->stop = LC_DIGEST_END;
}

void lc_digest_legacy_run(const uint8_t *data, size_t n, int64_t min_offset, int64_t shift, int has_override,
                          int64_t override, lc_legacy_digest *d)
{
    size_t pos = 0;
    digest_start(d);
    while (pos < n) {
        if (n - pos < LC_LOG_OVERHEAD + LC_LEGACY_ATTRIBUTES_OFFSET) {
            d->stop = LC_DIGEST_PARTIAL;
            break;
        }
        int32_t size_field = get_i32(data + pos + LC_SIZE_OFFSET);
        if (size_field < LC_RECORD_OVERHEAD_V0 || data[pos + LC_LOG_OVERHEAD + LC_LEGACY_MAGIC_OFFSET] > 1) {
            d->stop = LC_DIGEST_DECLINED;
            break;
        }
        size_t size = LC_LOG_OVERHEAD + (size_t)size_field;
        if (size > n - pos) {
            d->stop = LC_DIGEST_PARTIAL;
            break;
        }
        int64_t offset;
        uint64_t digest;
        if (digest_legacy_message(data + pos, size, shift, has_override, override, &offset, &digest) < 0) {
            d->stop = LC_DIGEST_DECLINED;
            break;
        }
        if (offset >= min_offset) {
            d->count++;
            d->sum += digest;
        }
        d->last_offset = offset;
        d->entries++;
        pos += size;
    }
    d->consumed = pos;
}

/* One compressed wrapper at entry[0:size): 0 and its digests added to d, 1 declined, -1 aborted. */
static int digest_wrapper(const uint8_t *entry, size_t size, int64_t min_offset, lc_wrapper_decompress_fn decompress,
                          void *context, lc_legacy_digest *d)
{
    int magic = entry[LC_LOG_OVERHEAD + LC_LEGACY_MAGIC_OFFSET];
    int attributes = entry[LC_LOG_OVERHEAD + LC_LEGACY_ATTRIBUTES_OFFSET];
    int codec = attributes & LC_COMPRESSION_CODEC_MASK;
    lc_legacy_message m;
    if (magic > 1 || codec == 0 || codec > 3 || lc_legacy_message_read(entry, size, magic, &m) < 0 ||
        m.value_length < 0)
        return 1;
    const uint8_t *inner;
    size_t inner_n;
    int rc = decompress(context, codec, magic, m.value, (size_t)m.value_length, &inner, &inner_n);
    if (rc != 0)
        return rc;
    int64_t shift = 0;
    if (magic == 1 && m.offset != 0) { /* inner offsets relative to the last inner message */
        lc_legacy_digest probe;
        lc_digest_legacy_run(inner, inner_n, INT64_MIN, 0, 0, 0, &probe);
        if (probe.stop != LC_DIGEST_END || probe.entries == 0 || m.offset < probe.last_offset ||
            __builtin_sub_overflow(m.offset, probe.last_offset, &shift))
            return 1;
    }
    int has_override = magic == 1 && (attributes & LC_TIMESTAMP_TYPE_MASK);
    lc_legacy_digest run;
    lc_digest_legacy_run(inner, inner_n, min_offset, shift, has_override, m.timestamp, &run);
    if (run.stop != LC_DIGEST_END || run.entries == 0)
        return 1;
    d->count += run.count;
    d->sum += run.sum;
    d->last_offset = m.offset;
    d->entries++;
    return 0;
}

int lc_digest_delivered(const uint8_t *data, size_t n, int64_t min_offset, lc_wrapper_decompress_fn decompress,
                        void *context, lc_legacy_digest *d)
{
    size_t pos = 0;
    digest_start(d);
    while (pos < n) {
        lc_legacy_digest plain;
        lc_digest_legacy_run(data + pos, n - pos, min_offset, 0, 0, 0, &plain);
        if (plain.entries) {
            d->entries += plain.entries;
            d->count += plain.count;
            d->sum += plain.sum;
            d->last_offset = plain.last_offset;
        }
        pos += plain.consumed;
        d->stop = plain.stop;
        if (plain.stop != LC_DIGEST_DECLINED)
            break;
        /* declined: a compressed wrapper, or an entry the caller's reader must take */
        const uint8_t *entry = data + pos;
        int32_t size_field = get_i32(entry + LC_SIZE_OFFSET);
        if (size_field < LC_RECORD_OVERHEAD_V0 || (size_t)size_field > n - pos - LC_LOG_OVERHEAD)
            break; /* lc_digest_legacy_run saw the header: a short one stops as PARTIAL */
        int rc = digest_wrapper(entry, (size_t)size_field + LC_LOG_OVERHEAD, min_offset, decompress, context, d);
        if (rc < 0) {
            d->consumed = pos;
            return -1;
        }
        if (rc > 0)
            break;
        pos += (size_t)size_field + LC_LOG_OVERHEAD;
        d->stop = LC_DIGEST_END;
    }
    d->consumed = pos;
    return 0;
}
