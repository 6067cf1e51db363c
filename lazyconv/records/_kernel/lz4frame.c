/* Kafka's lz4 frame walk (see lz4frame.h). */
#include "lz4frame.h"

#include <string.h>

#define XXH_PRIME1 2654435761u
#define XXH_PRIME2 2246822519u
#define XXH_PRIME3 3266489917u
#define XXH_PRIME4 668265263u
#define XXH_PRIME5 374761393u

static inline uint32_t rotl32(uint32_t v, int r) { return (v << r) | (v >> (32 - r)); }

static inline uint32_t le32(const uint8_t *p)
{
    return (uint32_t)p[0] | ((uint32_t)p[1] << 8) | ((uint32_t)p[2] << 16) | ((uint32_t)p[3] << 24);
}

static inline uint32_t xxh_round(uint32_t acc, uint32_t lane)
{
    acc += lane * XXH_PRIME2;
    acc = rotl32(acc, 13);
    return acc * XXH_PRIME1;
}

uint32_t lc_xxh32(const uint8_t *data, size_t n, uint32_t seed)
{
    const uint8_t *p = data, *end = data + n;
    uint32_t h;
    if (n >= 16) { /* four accumulators over 16-byte stripes */
        uint32_t a1 = seed + XXH_PRIME1 + XXH_PRIME2, a2 = seed + XXH_PRIME2, a3 = seed, a4 = seed - XXH_PRIME1;
        while (end - p >= 16) {
            a1 = xxh_round(a1, le32(p));
            a2 = xxh_round(a2, le32(p + 4));
            a3 = xxh_round(a3, le32(p + 8));
            a4 = xxh_round(a4, le32(p + 12));
            p += 16;
        }
        h = rotl32(a1, 1) + rotl32(a2, 7) + rotl32(a3, 12) + rotl32(a4, 18);
    } else {
        h = seed + XXH_PRIME5;
    }
    h += (uint32_t)n;
    while (end - p >= 4) { /* the remaining whole lanes */
        h += le32(p) * XXH_PRIME3;
        h = rotl32(h, 17) * XXH_PRIME4;
        p += 4;
    }
    while (p < end) { /* then single bytes */
        h += (uint32_t)(*p++) * XXH_PRIME5;
        h = rotl32(h, 11) * XXH_PRIME1;
    }
    h ^= h >> 15; /* avalanche */
    h *= XXH_PRIME2;
    h ^= h >> 13;
    h *= XXH_PRIME3;
    h ^= h >> 16;
    return h;
}

#define FLG_CONTENT_CHECKSUM 0x04
#define FLG_CONTENT_SIZE 0x08
#define FLG_BLOCK_CHECKSUM 0x10
#define FLG_INDEPENDENT 0x20
#define BLOCK_UNCOMPRESSED 0x80000000u

static const uint8_t LZ4_MAGIC[4] = {0x04, 0x22, 0x4D, 0x18};

int64_t lc_lz4_frame_blocks(const uint8_t *data, size_t n, int magic, lc_lz4_block *blocks, size_t max_blocks,
                            size_t *block_max)
{
    if (n < 6 || memcmp(data, LZ4_MAGIC, 4) != 0)
        return -1;
    uint8_t flg = data[4], bd = data[5];
    if ((flg & 0x03) || !(flg & FLG_INDEPENDENT) || (flg >> 6) != 1 || (bd & 0x8F))
        return -1;
    int code = (bd >> 4) & 0x07;
    if (code < 4)
        return -1;
    size_t max = (size_t)1 << (8 + 2 * code); /* 4: 64 KiB, 5: 256 KiB, 6: 1 MiB, 7: 4 MiB */
    size_t pos = 6;
    if (flg & FLG_CONTENT_SIZE) {
        if (n < pos + 8)
            return -1;
        pos += 8;
    }
    if (n < pos + 1)
        return -1;
    /* magic 0 frames carry Kafka's broken header checksum (over the magic bytes too): the
     * reference does not check it, nor does this walk */
    if (magic >= 1 && data[pos] != (uint8_t)((lc_xxh32(data + 4, pos - 4, 0) >> 8) & 0xFF))
        return -1;
    pos++;
    if (flg & FLG_BLOCK_CHECKSUM)
        return -1;
    int64_t count = 0;
    for (;;) {
        if (n - pos < 4)
            return -1;
        uint32_t word = le32(data + pos);
        size_t size = word & ~BLOCK_UNCOMPRESSED;
        if (size == 0) {
            if ((flg & FLG_CONTENT_CHECKSUM) && n - pos - 4 < 4)
                return -1;
            *block_max = max;
            return count; /* anything after the end mark (and content checksum) is ignored */
        }
        if (size > max)
            return -1;
        size_t start = pos + 4;
        if (n - start < size)
            return -1;
        if ((size_t)count == max_blocks)
            return -1;
        blocks[count].start = start;
        blocks[count].size = size;
        blocks[count].stored = (word & BLOCK_UNCOMPRESSED) != 0;
        count++;
        pos = start + size;
    }
}
