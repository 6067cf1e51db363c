/* The one parser of a magic-2 record's structure, shared by every kernel that walks records
 * (conversion, validation, decoding, digests). It checks exactly what the reference parser
 * (records._codec.iter_v2_records) checks, in the same order, and never reads past `end`
 * whatever a length field says. Below it, the one reader of a legacy (magic 0/1) message, as
 * records._codec.parse_legacy_message(check_crc=True) reads it. */
#ifndef LAZYCONV_RECORDS_WALK_H
#define LAZYCONV_RECORDS_WALK_H

#include <stddef.h>
#include <stdint.h>

#include "crc.h"
#include "format.h"
#include "wire.h"

/* One record's fields, pointing into the input. */
typedef struct {
    int64_t timestamp_delta;
    int32_t offset_delta;
    int32_t key_length;          /* -1: null key */
    int32_t value_length;        /* -1: null value */
    int32_t header_count;
    const uint8_t *key;
    const uint8_t *value;
    const uint8_t *headers;      /* the first header (header_count of them up to `end`) */
    const uint8_t *end;          /* the record's end (its length prefix says where) */
} lc_v2_record;

/* Parse one record's framing at *pp within [*pp, end): the length varint, then within the
 * record attributes (ignored), timestamp delta, offset delta, key, value and the header count.
 * The headers are not parsed: on success *pp points at the first header and the caller either
 * skips them (lc_v2_headers_skip) or decodes them (lc_v2_header_read), then checks it is at
 * r->end.
 * Returns 0, or -1 when the reference parser would reject the record. */
static inline int lc_v2_record_read(const uint8_t **pp, const uint8_t *end, lc_v2_record *r)
{
    const uint8_t *p = *pp;
    int32_t length;
    if (read_varint(&p, end, &length) < 0 || length < 0 || length > end - p)
        return -1;
    const uint8_t *rec_end = p + length;
    if (p >= rec_end)
        return -1;
    p++; /* attributes: unused by every reader */
    if (read_varlong(&p, rec_end, &r->timestamp_delta) < 0 || read_varint(&p, rec_end, &r->offset_delta) < 0 ||
        read_varint(&p, rec_end, &r->key_length) < 0)
        return -1;
    r->key = p;
    if (r->key_length >= 0) {
        if (r->key_length > rec_end - p)
            return -1;
        p += r->key_length;
    } else {
        r->key_length = -1;
    }
    if (read_varint(&p, rec_end, &r->value_length) < 0)
        return -1;
    r->value = p;
    if (r->value_length >= 0) {
        if (r->value_length > rec_end - p)
            return -1;
        p += r->value_length;
    } else {
        r->value_length = -1;
    }
    if (read_varint(&p, rec_end, &r->header_count) < 0)
        return -1;
    r->headers = p;
    r->end = rec_end;
    *pp = p;
    return 0;
}

/* One header at *pp within [*pp, end): its key (length >= 0, any bytes: Kafka stores keys that
 * are not UTF-8, the reference decodes them with surrogateescape) and value (value_length -1:
 * null). Returns 0 (*pp after the header) or -1. */
static inline int lc_v2_header_read(const uint8_t **pp, const uint8_t *end, const uint8_t **key, int32_t *key_length,
                                    const uint8_t **value, int32_t *value_length)
{
    const uint8_t *p = *pp;
    if (read_varint(&p, end, key_length) < 0 || *key_length < 0 || *key_length > end - p)
        return -1;
    *key = p;
    p += *key_length;
    if (read_varint(&p, end, value_length) < 0)
        return -1;
    *value = p;
    if (*value_length >= 0) {
        if (*value_length > end - p)
            return -1;
        p += *value_length;
    } else {
        *value_length = -1;
    }
    *pp = p;
    return 0;
}

/* A record's `count` headers: structure checked, nothing kept. */
static inline int lc_v2_headers_skip(const uint8_t **pp, const uint8_t *end, int32_t count)
{
    const uint8_t *p = *pp;
    if (count < 0 || count > end - p)
        return -1;
    for (int32_t i = 0; i < count; i++) {
        const uint8_t *key, *value;
        int32_t key_length, value_length;
        if (lc_v2_header_read(&p, end, &key, &key_length, &value, &value_length) < 0)
            return -1;
    }
    *pp = p;
    return 0;
}

/* The whole record: framing, headers (structure) and the exact end. On success
 * *pp is the record's end. */
static inline int lc_v2_record_walk(const uint8_t **pp, const uint8_t *end, lc_v2_record *r)
{
    const uint8_t *p = *pp;
    if (lc_v2_record_read(&p, end, r) < 0)
        return -1;
    if (r->header_count != 0 && lc_v2_headers_skip(&p, r->end, r->header_count) < 0)
        return -1;
    if (p != r->end)
        return -1;
    *pp = p;
    return 0;
}

/* One legacy message's fields, pointing into the input. */
typedef struct {
    int64_t offset;
    int64_t timestamp;           /* -1 for magic 0 */
    int32_t key_length;          /* -1: null key */
    int32_t value_length;        /* -1: null value */
    const uint8_t *key;
    const uint8_t *value;
} lc_legacy_message;

/* The delimited legacy entry entry[0:total) (12-byte log header included; total >= 17) of
 * `magic` (0 or 1): size at least the overhead, CRC-32, key and value filling the message
 * exactly. Returns 0, or -1 when the reference parser would reject it. */
static inline int lc_legacy_message_read(const uint8_t *entry, size_t total, int magic, lc_legacy_message *m)
{
    size_t overhead = magic == 0 ? LC_RECORD_OVERHEAD_V0 : LC_RECORD_OVERHEAD_V1;
    if (total - LC_LOG_OVERHEAD < overhead)
        return -1;
    const uint8_t *end = entry + total, *message = entry + LC_LOG_OVERHEAD;
    uint32_t stored = (uint32_t)get_i32(message + LC_LEGACY_CRC_OFFSET);
    const uint8_t *body = message + LC_LEGACY_MAGIC_OFFSET;
    if (lc_crc32(0, body, (size_t)(end - body)) != stored)
        return -1;
    m->offset = get_i64(entry + LC_OFFSET_OFFSET);
    m->timestamp = magic == 0 ? -1 : get_i64(message + LC_LEGACY_TIMESTAMP_OFFSET);
    const uint8_t *p = message + (magic == 0 ? LC_LEGACY_KEY_SIZE_OFFSET_V0 : LC_LEGACY_KEY_SIZE_OFFSET_V1);
    m->key_length = get_i32(p);
    p += LC_LEGACY_KEY_SIZE_LENGTH;
    m->key = p;
    if (m->key_length >= 0) {
        if ((int64_t)m->key_length > end - p - LC_LEGACY_VALUE_SIZE_LENGTH)
            return -1;
        p += m->key_length;
    } else {
        m->key_length = -1;
    }
    m->value_length = get_i32(p);
    p += LC_LEGACY_VALUE_SIZE_LENGTH;
    m->value = p;
    if (m->value_length >= 0) {
        if ((int64_t)m->value_length > end - p)
            return -1;
        p += m->value_length;
    } else {
        m->value_length = -1;
    }
    return p == end ? 0 : -1;
}

#endif
