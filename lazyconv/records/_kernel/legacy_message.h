/* Writing one legacy (magic 0 or 1) entry: the one writer of the conversion kernel, the
 * wrapper of a compressed batch's conversion and append_legacy_message. */
#ifndef LAZYCONV_LEGACY_MESSAGE_H
#define LAZYCONV_LEGACY_MESSAGE_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "crc.h"
#include "format.h"
#include "wire.h"

/* Bytes of the entry lc_write_legacy_message writes (a length of -1 is a null key or value).
 * The caller checks the message size fits the int32 size field. */
static inline size_t lc_legacy_entry_size(int magic, int32_t key_length, int32_t value_length)
{
    return LC_LOG_OVERHEAD + (magic == 0 ? LC_RECORD_OVERHEAD_V0 : LC_RECORD_OVERHEAD_V1) +
           (key_length > 0 ? (size_t)key_length : 0) + (value_length > 0 ? (size_t)value_length : 0);
}

/* Write the entry at w (room: lc_legacy_entry_size): offset, size, CRC-32, magic (0, or 1 for
 * any other value), attributes, the timestamp for magic 1, key and value. Returns its end. */
__attribute__((always_inline)) static inline uint8_t *lc_write_legacy_message(uint8_t *w, int64_t offset, int magic, uint8_t attributes,
                                               int64_t timestamp, const uint8_t *key, int32_t key_length,
                                               const uint8_t *value, int32_t value_length)
{
    size_t key_bytes = key_length > 0 ? (size_t)key_length : 0;
    size_t value_bytes = value_length > 0 ? (size_t)value_length : 0;
    size_t size = lc_legacy_entry_size(magic, key_length, value_length) - LC_LOG_OVERHEAD;
    put_i64(w + LC_OFFSET_OFFSET, offset);
    put_i32(w + LC_SIZE_OFFSET, (int32_t)size);
    uint8_t *body = w + LC_LOG_OVERHEAD + LC_LEGACY_MAGIC_OFFSET, *q = body;
    *q++ = magic == 0 ? 0 : 1;
    *q++ = attributes;
    if (magic != 0) {
        put_i64(q, timestamp);
        q += LC_LEGACY_TIMESTAMP_LENGTH;
    }
    put_i32(q, key_length);
    q += LC_LEGACY_KEY_SIZE_LENGTH;
    if (key_bytes)
        memcpy(q, key, key_bytes);
    q += key_bytes;
    put_i32(q, value_length);
    q += LC_LEGACY_VALUE_SIZE_LENGTH;
    if (value_bytes)
        memcpy(q, value, value_bytes);
    q += value_bytes;
    put_i32(w + LC_LOG_OVERHEAD + LC_LEGACY_CRC_OFFSET, (int32_t)lc_crc32(0, body, (size_t)(q - body)));
    return q;
}

#endif
