/* CRC-32 and CRC-32C: portable slice-by-8 tables built here at init, PCLMULQDQ folding for
 * CRC-32 and the SSE4.2 crc32 instruction (three interleaved streams) for CRC-32C, chosen at
 * run time from the CPU's features.
 *
 * Conventions (both CRCs are "reflected"): the first byte's least significant bit is the
 * highest-degree coefficient. The raw state s (the finished CRC xor 0xFFFFFFFF) after a message
 * M is M(x) * x^32 mod P(x), with the initial state xored into M's first four bytes.
 */
#include "crc.h"

#include <string.h>

#if defined(__x86_64__) || defined(__i386__)
#define LC_X86 1
#include <immintrin.h>
#endif

#define CRC32_POLY_REFLECTED 0xEDB88320u   /* x^32 + x^26 + ... + 1, bit-reversed */
#define CRC32_POLY_NORMAL 0x04C11DB7u
#define CRC32C_POLY_REFLECTED 0x82F63B78u

static uint32_t crc32_tables[8][256];
static uint32_t crc32c_tables[8][256];

static int have_pclmul;
static int have_sse42;
static int use_pclmul;
static int use_sse42;

static void build_slice8(uint32_t tables[8][256], uint32_t poly)
{
    for (uint32_t b = 0; b < 256; b++) {
        uint32_t s = b;
        for (int bit = 0; bit < 8; bit++)
            s = (s & 1) ? (s >> 1) ^ poly : s >> 1;
        tables[0][b] = s;
    }
    for (int k = 1; k < 8; k++)
        for (uint32_t b = 0; b < 256; b++) {
            uint32_t prev = tables[k - 1][b];
            tables[k][b] = (prev >> 8) ^ tables[0][prev & 0xFF];
        }
}

static inline uint32_t load_le32(const uint8_t *p)
{
    return (uint32_t)p[0] | ((uint32_t)p[1] << 8) | ((uint32_t)p[2] << 16) | ((uint32_t)p[3] << 24);
}

/* Raw state in, raw state out. */
static uint32_t raw_slice8(uint32_t tables[8][256], uint32_t s, const uint8_t *p, size_t n)
{
    while (n >= 8) { /* byte-wise loads: no alignment needed */
        uint32_t lo = s ^ load_le32(p);
        uint32_t hi = load_le32(p + 4);
        s = tables[7][lo & 0xFF] ^ tables[6][(lo >> 8) & 0xFF] ^ tables[5][(lo >> 16) & 0xFF] ^
            tables[4][lo >> 24] ^ tables[3][hi & 0xFF] ^ tables[2][(hi >> 8) & 0xFF] ^
            tables[1][(hi >> 16) & 0xFF] ^ tables[0][hi >> 24];
        p += 8;
        n -= 8;
    }
    while (n--)
        s = tables[0][(s ^ *p++) & 0xFF] ^ (s >> 8);
    return s;
}

/* ---------------------------------------------------------------------------------------- */
/* CRC-32 by carry-less multiplication.
 *
 * A 16-byte chunk C loaded little-endian has bit i <-> x^(127-i): its low quadword is H and its
 * high quadword L with C = H*x^64 + L. Moving C forward by N bits (to align it with the chunk
 * N/8 bytes later) is C*x^N = H*x^(N+64) + L*x^N (mod P). The product of two 64-bit reflected
 * operands in a 128-bit reflected register carries one extra factor x, so the constants are
 * x^(N+63) mod P and x^(N-1) mod P, each stored reflected in 64 bits (x^d at bit 63-d).
 * The folded 128-bit remainder is congruent to everything before it, so the CRC of the message
 * is the table CRC (from a zero state) of those 16 bytes followed by the unfolded tail. */

static uint64_t fold512_hi, fold512_lo, fold128_hi, fold128_lo;

static uint32_t xpow_mod_p(unsigned n)
{
    uint64_t r = 1;
    for (unsigned i = 0; i < n; i++) {
        r <<= 1;
        if (r & 0x100000000ull)
            r ^= 0x100000000ull | CRC32_POLY_NORMAL;
    }
    return (uint32_t)r;
}

static uint64_t reflect_in_64(uint32_t poly)
{
    uint64_t out = 0;
    for (int d = 0; d < 32; d++)
        if (poly & (1u << d))
            out |= 1ull << (63 - d);
    return out;
}

#ifdef LC_X86
__attribute__((target("pclmul,sse4.1")))
static inline __m128i fold(__m128i chunk, __m128i k)
{
    return _mm_xor_si128(_mm_clmulepi64_si128(chunk, k, 0x00), _mm_clmulepi64_si128(chunk, k, 0x11));
}

__attribute__((target("pclmul,sse4.1")))
static uint32_t raw_crc32_pclmul(uint32_t s, const uint8_t *p, size_t n)
{
    if (n < 64)
        return raw_slice8(crc32_tables, s, p, n);
    const __m128i k512 = _mm_set_epi64x((long long)fold512_lo, (long long)fold512_hi);
    const __m128i k128 = _mm_set_epi64x((long long)fold128_lo, (long long)fold128_hi);
    __m128i x0 = _mm_loadu_si128((const __m128i *)p);
    __m128i x1 = _mm_loadu_si128((const __m128i *)(p + 16));
    __m128i x2 = _mm_loadu_si128((const __m128i *)(p + 32));
    __m128i x3 = _mm_loadu_si128((const __m128i *)(p + 48));
    x0 = _mm_xor_si128(x0, _mm_cvtsi32_si128((int)s));
    p += 64;
    n -= 64;
    while (n >= 64) {
        x0 = _mm_xor_si128(fold(x0, k512), _mm_loadu_si128((const __m128i *)p));
        x1 = _mm_xor_si128(fold(x1, k512), _mm_loadu_si128((const __m128i *)(p + 16)));
        x2 = _mm_xor_si128(fold(x2, k512), _mm_loadu_si128((const __m128i *)(p + 32)));
        x3 = _mm_xor_si128(fold(x3, k512), _mm_loadu_si128((const __m128i *)(p + 48)));
        p += 64;
        n -= 64;
    }
    x1 = _mm_xor_si128(x1, fold(x0, k128));
    x2 = _mm_xor_si128(x2, fold(x1, k128));
    x3 = _mm_xor_si128(x3, fold(x2, k128));
    while (n >= 16) {
        x3 = _mm_xor_si128(fold(x3, k128), _mm_loadu_si128((const __m128i *)p));
        p += 16;
        n -= 16;
    }
    uint8_t rest[16];
    _mm_storeu_si128((__m128i *)rest, x3);
    s = raw_slice8(crc32_tables, 0, rest, 16);
    return raw_slice8(crc32_tables, s, p, n);
}

/* ---------------------------------------------------------------------------------------- */
/* CRC-32C with the crc32 instruction: three independent streams over consecutive blocks of
 * BLOCK bytes hide the instruction's latency; they are joined with "shift by BLOCK zero
 * bytes" operators, linear maps of the 32-bit state tabulated here at init. */

#define LONG_BLOCK 2048
#define SHORT_BLOCK 128

static uint32_t shift_long[4][256];
static uint32_t shift_short[4][256];

static void build_shift(uint32_t table[4][256], size_t zeros)
{
    static const uint8_t zero_block[256];
    uint32_t image[32];
    for (int bit = 0; bit < 32; bit++) {
        uint32_t s = 1u << bit;
        for (size_t done = 0; done < zeros; done += sizeof zero_block)
            s = raw_slice8(crc32c_tables, s, zero_block, sizeof zero_block < zeros - done ? sizeof zero_block : zeros - done);
        image[bit] = s;
    }
    for (int k = 0; k < 4; k++)
        for (uint32_t b = 0; b < 256; b++) {
            uint32_t s = 0;
            for (int j = 0; j < 8; j++)
                if (b & (1u << j))
                    s ^= image[8 * k + j];
            table[k][b] = s;
        }
}

static inline uint32_t shift(uint32_t table[4][256], uint32_t s)
{
    return table[0][s & 0xFF] ^ table[1][(s >> 8) & 0xFF] ^ table[2][(s >> 16) & 0xFF] ^ table[3][s >> 24];
}

__attribute__((target("sse4.2")))
static inline uint64_t load_u64(const uint8_t *p)
{
    uint64_t v;
    memcpy(&v, p, 8);
    return v;
}

__attribute__((target("sse4.2")))
static uint32_t raw_crc32c_sse42(uint32_t s, const uint8_t *p, size_t n)
{
    while (n && ((uintptr_t)p & 7)) {
        s = _mm_crc32_u8(s, *p++);
        n--;
    }
    while (n >= 3 * LONG_BLOCK) {
        uint64_t a = s, b = 0, c = 0;
        for (size_t i = 0; i < LONG_BLOCK; i += 8) {
            a = _mm_crc32_u64(a, load_u64(p + i));
            b = _mm_crc32_u64(b, load_u64(p + LONG_BLOCK + i));
            c = _mm_crc32_u64(c, load_u64(p + 2 * LONG_BLOCK + i));
        }
        s = shift(shift_long, shift(shift_long, (uint32_t)a) ^ (uint32_t)b) ^ (uint32_t)c;
        p += 3 * LONG_BLOCK;
        n -= 3 * LONG_BLOCK;
    }
    while (n >= 3 * SHORT_BLOCK) {
        uint64_t a = s, b = 0, c = 0;
        for (size_t i = 0; i < SHORT_BLOCK; i += 8) {
            a = _mm_crc32_u64(a, load_u64(p + i));
            b = _mm_crc32_u64(b, load_u64(p + SHORT_BLOCK + i));
            c = _mm_crc32_u64(c, load_u64(p + 2 * SHORT_BLOCK + i));
        }
        s = shift(shift_short, shift(shift_short, (uint32_t)a) ^ (uint32_t)b) ^ (uint32_t)c;
        p += 3 * SHORT_BLOCK;
        n -= 3 * SHORT_BLOCK;
    }
    uint64_t w = s;
    while (n >= 8) {
        w = _mm_crc32_u64(w, load_u64(p));
        p += 8;
        n -= 8;
    }
    s = (uint32_t)w;
    while (n--)
        s = _mm_crc32_u8(s, *p++);
    return s;
}
#endif /* LC_X86 */

/* ---------------------------------------------------------------------------------------- */

void lc_crc_init(void)
{
    build_slice8(crc32_tables, CRC32_POLY_REFLECTED);
    build_slice8(crc32c_tables, CRC32C_POLY_REFLECTED);
    fold512_hi = reflect_in_64(xpow_mod_p(512 + 63));
    fold512_lo = reflect_in_64(xpow_mod_p(512 - 1));
    fold128_hi = reflect_in_64(xpow_mod_p(128 + 63));
    fold128_lo = reflect_in_64(xpow_mod_p(128 - 1));
#ifdef LC_X86
    build_shift(shift_long, LONG_BLOCK);
    build_shift(shift_short, SHORT_BLOCK);
    __builtin_cpu_init();
    have_pclmul = __builtin_cpu_supports("pclmul") && __builtin_cpu_supports("sse4.1");
    have_sse42 = __builtin_cpu_supports("sse4.2");
#endif
    use_pclmul = have_pclmul;
    use_sse42 = have_sse42;
}

int lc_cpu_has_pclmul(void) { return have_pclmul; }
int lc_cpu_has_sse42(void) { return have_sse42; }

int lc_crc_select(enum lc_crc_impl crc32_impl, enum lc_crc_impl crc32c_impl)
{
    if ((crc32_impl == LC_CRC_HARDWARE && !have_pclmul) || (crc32c_impl == LC_CRC_HARDWARE && !have_sse42))
        return -1;
    use_pclmul = crc32_impl == LC_CRC_AUTO ? have_pclmul : crc32_impl == LC_CRC_HARDWARE;
    use_sse42 = crc32c_impl == LC_CRC_AUTO ? have_sse42 : crc32c_impl == LC_CRC_HARDWARE;
    return 0;
}

const char *lc_crc32_impl_name(void) { return use_pclmul ? "pclmul" : "slice-by-8"; }
const char *lc_crc32c_impl_name(void) { return use_sse42 ? "sse4.2" : "slice-by-8"; }

uint32_t lc_crc32(uint32_t crc, const uint8_t *data, size_t n)
{
#ifdef LC_X86
    if (use_pclmul)
        return ~raw_crc32_pclmul(~crc, data, n);
#endif
    return ~raw_slice8(crc32_tables, ~crc, data, n);
}

uint32_t lc_crc32c(uint32_t crc, const uint8_t *data, size_t n)
{
#ifdef LC_X86
    if (use_sse42)
        return ~raw_crc32c_sse42(~crc, data, n);
#endif
    return ~raw_slice8(crc32c_tables, ~crc, data, n);
}
