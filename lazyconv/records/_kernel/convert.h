/* The down-conversion kernel: magic v2 records to magic 0/1 messages, without Python objects.
 * Pure C over byte ranges (no CPython API): callable with the GIL released. */
#ifndef LAZYCONV_CONVERT_H
#define LAZYCONV_CONVERT_H

#include <stddef.h>
#include <stdint.h>

/* Why lc_convert_run stopped (the batch at `consumed` is left for the Python path). */
enum lc_stop {
    LC_STOP_END = 0,        /* every batch of the range was converted */
    LC_STOP_COMPRESSED = 1, /* a compressed (non-control) batch */
    LC_STOP_NOT_V2 = 2,     /* an entry whose magic is not 2 */
    LC_STOP_PARTIAL = 3,    /* the range ends inside an entry */
    LC_STOP_INVALID = 4,    /* a batch or record the strict parser must report (or an edge
                               case such as an offset or timestamp beyond int64) */
    LC_STOP_NO_SPACE = 5,   /* the output needs more room before the next batch */
};

/* Converting the records of one batch (or of one decompressed payload). */
typedef struct {
    int64_t base_offset;
    int64_t base_timestamp;
    int has_log_append_time;
    int64_t log_append_time;
    int filter;             /* records below first_offset are parsed but not written */
    int64_t first_offset;
    int to_magic;           /* 0 or 1 */
    uint8_t attributes;     /* attributes of every written message */
    int relative_offsets;   /* offsets relative to the first kept record (v1 wrapper inners) */
} lc_records_params;

typedef struct {
    int64_t kept;
    int64_t first_kept_offset; /* absolute; 0 when nothing was kept */
    int64_t last_kept_offset;
    int64_t max_timestamp;
    size_t written;
} lc_records_result;

/* The fewest bytes a v2 record takes: its length, attributes, timestamp and offset deltas, key
 * and value lengths and header count, one byte each at least. A record count above the payload's
 * size / LC_MIN_RECORD_SIZE cannot be right: the kernels leave such a batch to the reference code
 * (which reports it) before reserving anything for its records. */
#define LC_MIN_RECORD_SIZE 7

/* Bytes a converted record may need beyond its v2 bytes (v1: 34-byte message overhead with
 * log header, against at least LC_MIN_RECORD_SIZE bytes of v2 record). */
#define LC_MAX_GROWTH_PER_RECORD 27

/* Convert `count` records of data[0:n) into out[0:cap). Returns 0 on success (the records end
 * exactly at n), -1 when the strict parser must take over (malformed or unwritable record).
 * The caller guarantees cap >= n + count * LC_MAX_GROWTH_PER_RECORD (count <= n / LC_MIN_RECORD_SIZE
 * keeps that below about 5 n). */
int lc_convert_records(const uint8_t *data, size_t n, int64_t count, const lc_records_params *params,
                       uint8_t *out, size_t cap, lc_records_result *result);

typedef struct {
    size_t consumed;        /* bytes of input fully handled (whole entries) */
    size_t written;         /* bytes appended to out */
    int64_t converted;      /* records written */
    int64_t temporary;      /* sum of (batch size + bytes written) over batches that kept records */
    enum lc_stop stop;
} lc_run_result;

/* Convert consecutive uncompressed v2 batches of data[0:n) to `to_magic` (0/1), dropping
 * control batches, into out[0:cap). Stops at the first entry it does not handle. */
void lc_convert_run(const uint8_t *data, size_t n, int to_magic, int64_t first_offset, uint8_t *out,
                    size_t cap, lc_run_result *result);

/* Room for the conversion of data[0:n): what lc_convert_run can need before it stops (the
 * whole v2 batches at its start, each at most LC_MAX_GROWTH_PER_RECORD bytes per record larger). */
size_t lc_run_bound(const uint8_t *data, size_t n);

/* Walk the entries of data[0:n) as the Python entry splitter does. Returns the end of the
 * complete entries (a trailing partial entry is left out, as the splitter skips it) when every
 * complete entry is a well-formed v2 batch that is uncompressed or a control batch; -1 when any
 * entry needs the Python path (legacy or compressed entries, anything the splitter rejects). */
int64_t lc_scan_plain_v2(const uint8_t *data, size_t n);

/* Why lc_chunk_end stopped. */
enum lc_chunk_stop {
    LC_CHUNK_DONE = 0,  /* the chunk ends at `end` exactly where the reference policy ends it
                           (next batch does not fit, end of data, a partial entry, or an entry
                           the splitter rejects: each left for the next call) */
    LC_CHUNK_MIXED = 1, /* an entry the reference policy would take into this chunk is not a
                           plain v2 batch (legacy, compressed, header too short): the caller
                           groups this chunk itself */
};

/* The end of the chunk starting at data[0] under the lazy send's policy: the first entry
 * unconditionally, then following entries while the total of their sizes stays <= chunk_size,
 * every one a complete, uncompressed (or control) v2 batch. Never reads past data[n). */
enum lc_chunk_stop lc_chunk_end(const uint8_t *data, size_t n, size_t chunk_size, size_t *end);

/* One complete entry as lc_scan_entries sees it. */
typedef struct {
    int64_t position;      /* from the start of the scanned range */
    int64_t size;          /* 12 + size field */
    int magic;
    int attributes;        /* low byte */
    int64_t base_offset;   /* v2: header base offset; legacy: the message offset */
    int32_t last_offset_delta; /* v2: the header's (0 when the length is below 49); legacy: 0 */
    int64_t record_count;  /* v2: header count; legacy: 1, or -1 for a compressed wrapper */
    int64_t max_timestamp; /* v2: header; v1: the message timestamp; v0: -1 */
    int valid;             /* size, CRC and (uncompressed) record structure all fine */
    int records_checked;   /* the records were parsed (uncompressed entries) */
} lc_entry;

enum lc_scan_stop {
    LC_SCAN_END = 0,      /* the range ends exactly after the last entry */
    LC_SCAN_PARTIAL = 1,  /* a trailing incomplete entry (skipped, as a fetch's partial batch) */
    LC_SCAN_BAD_SIZE = 2, /* a size field below 14: nothing after it can be delimited */
    LC_SCAN_BAD_MAGIC = 3,/* a magic above 2: likewise */
    LC_SCAN_MORE = 4,     /* `max_entries` were filled: call again from `*consumed` */
};

/* Delimit and check up to max_entries entries of data[0:n), as the entry splitter delimits
 * them and as DefaultBatch/LegacyBatch validate() and iteration check them. */
enum lc_scan_stop lc_scan_entries(const uint8_t *data, size_t n, lc_entry *entries, size_t max_entries,
                                  size_t *count, size_t *consumed);

#endif
