/* Reading and writing the wire's integers and varints, bounds-checked (shared by the kernels). */
#ifndef LAZYCONV_WIRE_H
#define LAZYCONV_WIRE_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
#define TO_BIG_ENDIAN_64(u) (u)
#define TO_BIG_ENDIAN_32(u) (u)
#else
#define TO_BIG_ENDIAN_64(u) __builtin_bswap64(u)
#define TO_BIG_ENDIAN_32(u) __builtin_bswap32(u)
#endif

static inline int64_t get_i64(const uint8_t *p)
{
    uint64_t v = 0;
    for (int i = 0; i < 8; i++)
        v = (v << 8) | p[i];
    return (int64_t)v;
}

static inline int32_t get_i32(const uint8_t *p)
{
    return (int32_t)(((uint32_t)p[0] << 24) | ((uint32_t)p[1] << 16) | ((uint32_t)p[2] << 8) | p[3]);
}

static inline void put_i64(uint8_t *p, int64_t v)
{
    uint64_t u = TO_BIG_ENDIAN_64((uint64_t)v); /* big-endian on the wire */
    memcpy(p, &u, 8);
}

static inline void put_i32(uint8_t *p, int32_t v)
{
    uint32_t u = TO_BIG_ENDIAN_32((uint32_t)v);
    memcpy(p, &u, 4);
}

/* Unsigned base-128 varint of at most max_bytes bytes from [*pp, end); Java's semantics: bits
 * beyond 64 are dropped (the caller masks to 32 for varints). Returns 0, or -1 if malformed. */
static inline int read_uvarint(const uint8_t **pp, const uint8_t *end, int max_bytes, uint64_t *value)
{
    const uint8_t *p = *pp;
    uint64_t v = 0;
    for (int i = 0; i < max_bytes; i++) {
        if (p >= end)
            return -1;
        uint8_t b = *p++;
        if (7 * i < 64)
            v |= (uint64_t)(b & 0x7F) << (7 * i);
        if (b < 0x80) {
            *pp = p;
            *value = v;
            return 0;
        }
    }
    return -1;
}

static inline int read_varint(const uint8_t **pp, const uint8_t *end, int32_t *value)
{
    const uint8_t *p = *pp;
    if (p < end && *p < 0x80) { /* one byte: the common case */
        uint32_t u = *p;
        *value = (int32_t)((u >> 1) ^ (0u - (u & 1)));
        *pp = p + 1;
        return 0;
    }
    uint64_t u;
    if (read_uvarint(pp, end, 5, &u) < 0)
        return -1;
    uint32_t u32 = (uint32_t)u;
    *value = (int32_t)((u32 >> 1) ^ (0u - (u32 & 1)));
    return 0;
}

static inline int read_varlong(const uint8_t **pp, const uint8_t *end, int64_t *value)
{
    const uint8_t *p = *pp;
    if (p < end && *p < 0x80) { /* one byte: small timestamp deltas */
        uint64_t u = *p;
        *value = (int64_t)((u >> 1) ^ (0ull - (u & 1)));
        *pp = p + 1;
        return 0;
    }
    uint64_t u;
    if (read_uvarint(pp, end, 10, &u) < 0)
        return -1;
    *value = (int64_t)((u >> 1) ^ (0ull - (u & 1)));
    return 0;
}

#endif
