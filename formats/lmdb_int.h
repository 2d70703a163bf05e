/* lmdb_int.h - what the two halves of the lmdb backend share: lmdb.c (the LMDB error codes'
 * translation, the writer and the backend table fmt_backend_lmdb) and lmdbread.c (the reader,
 * whose entry points the table names): the value and metadata layout of formats/lmdb.md. Internal
 * to formats/.
 */
#ifndef FMT_LMDB_INT_H
#define FMT_LMDB_INT_H

#include <stddef.h>
#include <stdint.h>

#include "backend.h"


#define LM_VALUE_MAGIC "SHLV"
#define LM_VALUE_VERSION 1u
#define LM_VALUE_HEADER 48u
#define LM_META_KEY "__shardc__/meta"
#define LM_INDEX_KEY "__shardc__/index"   /* (version 1.1) the shard's skeleton */
#define LM_RESERVED_PREFIX "__shardc__/"
#define LM_META_MAGIC "SHARDLMD"
#define LM_META_MAJOR 1u
#define LM_META_MINOR 1u
#define LM_META_SIZE 128u
#define LM_META_HASHED 120u         /* meta_hash covers bytes 0..119 */

/* ---- shared helpers (lmdb.c) ---- */

/* An LMDB return code as a library error code (see the top of lmdb.c). */
int fmt_lm_code(int mrc);

uint64_t fmt_lm_round_up(uint64_t x, uint64_t a);

/* ---- the reader (lmdbread.c): its entries in fmt_backend_lmdb, as backend.h says ---- */

int fmt_lmr_precheck(const char *path, const fmt_manifest_shard *ms, fmt_msg *msg);
int fmt_lmr_pins(const void *p, const char *path, fmt_shard_info *info);
int fmt_lmr_open(void **out, const char *dir, const char *path, fmt_access access, fmt_msg *msg);
void fmt_lmr_close(void *p);
const fmt_shard_info *fmt_lmr_info(const void *p);
int fmt_lmr_get(const void *p, uint64_t i, fmt_sample *out);
int fmt_lmr_read(const void *p, uint64_t i, void *dst, void *scratch, size_t scratch_len);
int fmt_lmr_check(const void *p, uint64_t i);
int fmt_lmr_advise(const void *p, fmt_advice advice);
/* a shard before its file arrives: its skeleton from the manifest's range (lmdbread.c) */
int fmt_lmr_head_of(const fmt_manifest_shard *ms, uint64_t *len, fmt_msg *msg);
int fmt_lmr_tail(const uint8_t *head, const fmt_manifest_shard *ms, uint64_t *from, uint64_t *to,
                 fmt_msg *msg);
int fmt_lmr_open_parts(void **out, const fmt_manifest_shard *ms, const uint8_t *head,
                       size_t head_len, const uint8_t *tail, size_t tail_len, fmt_msg *msg);

#endif
