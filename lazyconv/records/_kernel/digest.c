/* Record digests over wire bytes (see digest.h for the canonical encoding). */
#include "digest.h"

#include "crc.h"
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

/* offset | timestamp | header count: what follows key and value. */
static inline void digest_tail(dual_crc *h, int64_t offset, int64_t timestamp, int32_t header_count)
{
    uint8_t b[20];
    put_i64(b, offset);
    put_i64(b + 8, timestamp);
    put_i32(b + 16, header_count);
    dual_update(h, b, 20);
}

/* The headers of one record into h, checked as the reader checks them (UTF-8 keys). */
static int digest_headers(dual_crc *h, const uint8_t **pp, const uint8_t *end, int32_t count)
{
    const uint8_t *p = *pp;
    for (int32_t i = 0; i < count; i++) {
        int32_t klen, vlen;
        if (read_varint(&p, end, &klen) < 0 || klen < 0 || klen > end - p || !valid_utf8(p, (size_t)klen))
            return -1;
        update_i32(h, klen);
        dual_update(h, p, (size_t)klen);
        p += klen;
        if (read_varint(&p, end, &vlen) < 0)
            return -1;
        if (vlen >= 0) {
            if (vlen > end - p)
                return -1;
            update_i32(h, vlen);
            dual_update(h, p, (size_t)vlen);
            p += vlen;
        } else {
            update_i32(h, -1);
        }
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
        int32_t length, off_delta, klen, vlen, hcount;
        int64_t ts_delta, offset, raw_ts;
        if (read_varint(&p, end, &length) < 0 || length < 0 || length > end - p)
            return -1;
        const uint8_t *rec_end = p + length;
        if (p >= rec_end)
            return -1;
        p++; /* attributes: unused */
        if (read_varlong(&p, rec_end, &ts_delta) < 0 || read_varint(&p, rec_end, &off_delta) < 0 ||
            read_varint(&p, rec_end, &klen) < 0)
            return -1;
        const uint8_t *key = p;
        if (klen >= 0) {
            if (klen > rec_end - p)
                return -1;
            p += klen;
        }
        if (read_varint(&p, rec_end, &vlen) < 0)
            return -1;
        const uint8_t *value = p;
        if (vlen >= 0) {
            if (vlen > rec_end - p)
                return -1;
            p += vlen;
        }
        if (read_varint(&p, rec_end, &hcount) < 0 || hcount < 0 || hcount > rec_end - p)
            return -1;
        if (add_overflows(base_offset, off_delta, &offset) || add_overflows(base_timestamp, ts_delta, &raw_ts))
            return -1;
        int64_t timestamp = has_override ? override : raw_ts;
        dual_crc shared = {0, 0};
        digest_key_value(&shared, key, klen, value, vlen);
        dual_crc h = shared;
        digest_tail(&h, offset, -1, 0);
        d->no_timestamp += dual_value(&h);
        h = shared;
        digest_tail(&h, offset, timestamp, 0);
        uint64_t without_headers = dual_value(&h);
        d->no_headers += without_headers;
        if (hcount == 0) {
            d->full += without_headers;
        } else {
            h = shared;
            digest_tail(&h, offset, timestamp, hcount);
            if (digest_headers(&h, &p, rec_end, hcount) < 0)
                return -1;
            d->full += dual_value(&h);
            d->has_headers = 1;
        }
        if (p != rec_end)
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

/* One plain legacy entry at data[0:size), or -1 if the reader would object (or it is
 * compressed): offset, timestamp and digest out. */
static int digest_legacy_message(const uint8_t *m, size_t size, int64_t shift, int has_override, int64_t override,
                                 int64_t *offset, uint64_t *digest)
{
    int magic = m[16];
    size_t overhead = magic == 0 ? 14 : 22;
    if (magic > 1 || size - 12 < overhead || (m[17] & 0x07) != 0)
        return -1;
    if ((uint32_t)get_i32(m + 12) != lc_crc32(0, m + 16, size - 16))
        return -1;
    const uint8_t *p = m + (magic == 0 ? 18 : 26), *end = m + size;
    int64_t timestamp = magic == 0 ? -1 : has_override ? override : get_i64(m + 18);
    int32_t klen = get_i32(p);
    p += 4;
    const uint8_t *key = p;
    if (klen >= 0) {
        if (klen > end - p - 4)
            return -1;
        p += klen;
    }
    int32_t vlen = get_i32(p);
    p += 4;
    const uint8_t *value = p;
    if (vlen >= 0) {
        if (vlen > end - p)
            return -1;
        p += vlen;
    }
    if (p != end)
        return -1;
    if (add_overflows(get_i64(m), shift, offset))
        return -1;
    dual_crc h = {0, 0};
    digest_key_value(&h, key, klen, value, vlen);
    digest_tail(&h, *offset, timestamp, 0);
    *digest = dual_value(&h);
    return 0;
}

void lc_digest_legacy_run(const uint8_t *data, size_t n, int64_t min_offset, int64_t shift, int has_override,
                          int64_t override, lc_legacy_digest *d)
{
    size_t pos = 0;
    d->entries = d->count = 0;
    d->sum = 0;
    d->last_offset = -1;
    d->stop = LC_DIGEST_END;
    while (pos < n) {
        if (n - pos < 17) {
            d->stop = LC_DIGEST_PARTIAL;
            break;
        }
        int32_t size_field = get_i32(data + pos + 8);
        if (size_field < 14 || data[pos + 16] > 1) {
            d->stop = LC_DIGEST_DECLINED;
            break;
        }
        size_t size = 12 + (size_t)size_field;
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
