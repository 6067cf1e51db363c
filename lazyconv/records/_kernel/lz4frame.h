/* Kafka's lz4 frame (the LZ4 frame format subset Kafka writes and reads), walked without the
 * CPython API: magic, FLG/BD descriptor, optional content size, header checksum (xxHash32,
 * not checked for magic 0, whose writers hashed the wrong bytes: KAFKA-3160), the data blocks
 * (size word with the uncompressed flag), the end mark and the optional content checksum. The
 * block payloads are left to the lz4 library. */
#ifndef LAZYCONV_LZ4FRAME_H
#define LAZYCONV_LZ4FRAME_H

#include <stddef.h>
#include <stdint.h>

/* xxHash32 of data[0:n) with seed (written from the xxHash specification). */
uint32_t lc_xxh32(const uint8_t *data, size_t n, uint32_t seed);

/* One data block of a frame. */
typedef struct {
    size_t start;   /* of its bytes in the frame */
    size_t size;
    int stored;     /* the uncompressed-block flag: the bytes are the data */
} lc_lz4_block;

/* Walk the frame data[0:n) with the checks of the reference parser
 * (records.compression._lz4_decompress), in its order. Returns the number of blocks (at most
 * max_blocks are stored in blocks) and the frame's block maximum size in *block_max, or -1 when
 * the reference must parse the frame: anything it rejects, a frame with block checksums (left
 * to it), or more than max_blocks blocks. Never reads past data[n). */
int64_t lc_lz4_frame_blocks(const uint8_t *data, size_t n, int magic, lc_lz4_block *blocks, size_t max_blocks,
                            size_t *block_max);

#endif
