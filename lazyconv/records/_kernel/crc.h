/* CRC-32 (ISO-HDLC, zlib's) and CRC-32C (Castagnoli) with run-time selected implementations.
 *
 * Every routine takes and returns the *finished* CRC (as zlib.crc32 and crc32c.crc32c do):
 * crc = lc_crc32(crc, data, n) continues a running CRC, starting from 0.
 */
#ifndef LAZYCONV_CRC_H
#define LAZYCONV_CRC_H

#include <stddef.h>
#include <stdint.h>

/* Which implementation lc_crc32 / lc_crc32c dispatch to. */
enum lc_crc_impl { LC_CRC_AUTO = 0, LC_CRC_PORTABLE = 1, LC_CRC_HARDWARE = 2 };

/* Build the tables and detect the CPU; call once before anything else. */
void lc_crc_init(void);

/* 1 if the CPU has the instruction (PCLMULQDQ + SSE4.1 for CRC-32, SSE4.2 for CRC-32C). */
int lc_cpu_has_pclmul(void);
int lc_cpu_has_sse42(void);

/* Select the implementation (tests force each path); returns 0, or -1 if unavailable. */
int lc_crc_select(enum lc_crc_impl crc32_impl, enum lc_crc_impl crc32c_impl);
/* The names of the implementations in use ("pclmul"/"slice-by-8", "sse4.2"/"slice-by-8"). */
const char *lc_crc32_impl_name(void);
const char *lc_crc32c_impl_name(void);

uint32_t lc_crc32(uint32_t crc, const uint8_t *data, size_t n);
uint32_t lc_crc32c(uint32_t crc, const uint8_t *data, size_t n);

#endif
