/* Raw snappy compression, byte for byte as snappy 1.1.10 compresses (see snappy.h).
 *
 * The format: a varint of the uncompressed length, then elements: a literal (tag 00, its length
 * in the tag or in 1-4 bytes after it) or a copy of earlier output (tag 01: length 4-11 and an
 * 11-bit offset; tag 10: length 1-64 and a 16-bit offset). What makes the bytes Kafka's are the
 * encoder's choices, which this file follows:
 *
 * - the input is compressed in independent fragments of 64 KiB, each with a fresh hash table of
 *   the smallest power of two >= its size, at least 256 and at most 16384 entries;
 * - a table entry is found from the 4 bytes at a position as bits 18-31 of bytes * 0x1e35a7bd,
 *   masked to the table's size (the hash of snappy 1.1.9 and 1.1.10 built without the CPU's
 *   CRC32 instructions, as all snappy-java's libraries but macOS arm64's are: earlier versions,
 *   and Rust's snap, take the top log2(size) bits, the same only for a full table);
 * - the search steps one byte at a time for 32 misses, then ever more (skip >> 5) bytes;
 * - after a copy, the positions before and at its end enter the table, and a match found right
 *   there continues the copy run without a literal;
 * - a copy of 12 or more bytes or at an offset of 2048 or more takes the 2-byte-offset form, in
 *   pieces of 64 (60 when 65-67 would be left), the last piece of 4-11 again the short form. */
#include "snappy.h"

#include <stddef.h>
#include <string.h>

#define FRAGMENT_SIZE 65536
#define MAX_TABLE_BITS 14
#define MIN_TABLE_SIZE 256
#define INPUT_MARGIN 15 /* the search stops this far from the fragment's end */
#define HASH_MULTIPLIER 0x1e35a7bdu

size_t lc_snappy_max_compressed(size_t n)
{
    return 32 + n + n / 6;
}

static inline uint32_t load32(const uint8_t *p)
{
    uint32_t v;
    memcpy(&v, p, 4);
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
    v = __builtin_bswap32(v);
#endif
    return v;
}

/* How many bytes at a equal those at b, b's run ending at end (a < b): 8 at a time. */
static inline size_t match_length(const uint8_t *a, const uint8_t *b, const uint8_t *end)
{
    size_t n = 0, left = (size_t)(end - b);
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
    while (left - n >= 8) {
        uint64_t x, y;
        memcpy(&x, a + n, 8);
        memcpy(&y, b + n, 8);
        if (x != y) /* the lowest differing byte is the first: little-endian */
            return n + ((size_t)__builtin_ctzll(x ^ y) >> 3);
        n += 8;
    }
#endif
    while (n < left && a[n] == b[n])
        n++;
    return n;
}

static uint8_t *put_varint(uint8_t *op, uint32_t n)
{
    while (n >= 0x80) {
        *op++ = (uint8_t)(n | 0x80);
        n >>= 7;
    }
    *op++ = (uint8_t)n;
    return op;
}

static uint8_t *emit_literal(uint8_t *op, const uint8_t *from, size_t length)
{
    if (length == 0)
        return op;
    size_t n = length - 1;
    if (n < 60) {
        *op++ = (uint8_t)(n << 2);
    } else {
        int count = 0;
        for (size_t rest = n; rest != 0; rest >>= 8)
            count++;
        *op++ = (uint8_t)((59 + count) << 2);
        for (int i = 0; i < count; i++)
            *op++ = (uint8_t)(n >> (8 * i));
    }
    memcpy(op, from, length);
    return op + length;
}

/* One copy element of 1-64 bytes: the short form when allowed and it fits. */
static uint8_t *emit_copy_piece(uint8_t *op, size_t offset, size_t length, int short_allowed)
{
    if (short_allowed && offset < 2048) {
        *op++ = (uint8_t)(1 | ((length - 4) << 2) | ((offset >> 8) << 5));
        *op++ = (uint8_t)offset;
    } else {
        *op++ = (uint8_t)(2 | ((length - 1) << 2));
        *op++ = (uint8_t)offset;
        *op++ = (uint8_t)(offset >> 8);
    }
    return op;
}

static uint8_t *emit_copy(uint8_t *op, size_t offset, size_t length)
{
    if (length < 12)
        return emit_copy_piece(op, offset, length, 1);
    while (length >= 68) {
        op = emit_copy_piece(op, offset, 64, 0);
        length -= 64;
    }
    if (length > 64) {
        op = emit_copy_piece(op, offset, 60, 0);
        length -= 60;
    }
    return emit_copy_piece(op, offset, length, length < 12);
}

static uint8_t *compress_fragment(const uint8_t *base, size_t size, uint8_t *op, uint16_t *table)
{
    size_t table_size = MIN_TABLE_SIZE;
    while (table_size < size && table_size < (1u << MAX_TABLE_BITS))
        table_size <<= 1;
    memset(table, 0, table_size * sizeof *table);
    const uint32_t mask = (uint32_t)table_size - 1;
#define SLOT(bytes) (table + ((((uint32_t)(bytes) * HASH_MULTIPLIER) >> (32 - MAX_TABLE_BITS)) & mask))
    const uint8_t *end = base + size, *next_emit = base;
    if (size < INPUT_MARGIN)
        return emit_literal(op, next_emit, size);
    const uint8_t *limit = end - INPUT_MARGIN;
    const uint8_t *ip = base + 1;
    for (;;) {
        uint32_t skip = 32;
        const uint8_t *next = ip, *candidate;
        for (;;) { /* find a 4-byte match */
            ip = next;
            uint32_t step = skip >> 5;
            skip += step;
            if (limit - ip < (ptrdiff_t)step) /* also when the fragment is 15 bytes: ip > limit */
                return emit_literal(op, next_emit, (size_t)(end - next_emit));
            next = ip + step;
            uint32_t bytes = load32(ip);
            uint16_t *slot = SLOT(bytes);
            candidate = base + *slot;
            *slot = (uint16_t)(ip - base);
            if (load32(candidate) == bytes)
                break;
        }
        op = emit_literal(op, next_emit, (size_t)(ip - next_emit));
        for (;;) { /* copies while the bytes right after one match again */
            const uint8_t *start = ip;
            size_t matched = 4 + match_length(candidate + 4, ip + 4, end);
            ip += matched;
            op = emit_copy(op, (size_t)(start - candidate), matched);
            next_emit = ip;
            if (ip >= limit)
                return emit_literal(op, next_emit, (size_t)(end - next_emit));
            *SLOT(load32(ip - 1)) = (uint16_t)(ip - 1 - base);
            uint32_t bytes = load32(ip);
            uint16_t *slot = SLOT(bytes);
            candidate = base + *slot;
            *slot = (uint16_t)(ip - base);
            if (load32(candidate) != bytes)
                break;
        }
        ip++;
    }
#undef SLOT
}

size_t lc_snappy_compress(const uint8_t *in, size_t n, uint8_t *out)
{
    uint16_t table[1u << MAX_TABLE_BITS];
    if (n > LC_SNAPPY_MAX_INPUT) /* a longer length varint than snappy's format has */
        return 0;
    uint8_t *op = put_varint(out, (uint32_t)n);
    for (size_t start = 0; start < n; start += FRAGMENT_SIZE) {
        size_t size = n - start < FRAGMENT_SIZE ? n - start : FRAGMENT_SIZE;
        op = compress_fragment(in + start, size, op, table);
    }
    return (size_t)(op - out);
}
