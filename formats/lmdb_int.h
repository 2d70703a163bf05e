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
#define LM_RESERVED_PREFIX "__shardc__/"
#define LM_META_MAGIC "SHARDLMD"
#define LM_META_MAJOR 1u
#define LM_META_MINOR 0u
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

#endif
