/* lmdbcheck.h - the lmdb backend's check of an LMDB environment's pages (lmdbcheck.c), and the
 * LMDB constants that the backend (lmdb.c) and the check share. Internal to formats/. */
#ifndef FMT_LMDBCHECK_H
#define FMT_LMDBCHECK_H

#include <stdint.h>

#include "fmt.h"

#define LM_PAGE_HEADER 16u          /* LMDB's page header (PAGEHDRSZ) */
#define LM_MAX_PAGE 32768u          /* LMDB's largest page size (MAX_PAGESIZE) */

/* The page size LMDB picks for a new environment: the OS page size, capped at LM_MAX_PAGE. */
uint64_t fmt_lmdb_page_size(void);

/* Where a value lies in data.mdb: its offset in the file and its size. */
typedef struct {
    uint64_t off, size;
} fmt_lmdb_value;

/* Check the file data (a shard's data.mdb) as formats/lmdb.md says, without LMDB: both meta
 * pages, then every branch, leaf and overflow page header of the main database. 0, or
 * FMT_ETRUNC / FMT_EFORMAT / FMT_ECORRUPT / an errno with the reason in *msg (may be NULL).
 * *pin (may be NULL) receives the hash of the bytes checked, the manifest's pin; *skel (may be
 * NULL) where the __shardc__/index value lies (size 0: the shard has none), the manifest's
 * skeleton range. */
int fmt_lmdb_tree_check(const char *data, uint64_t *pin, fmt_lmdb_value *skel, fmt_msg *msg);

/* fmt_lmdb_tree_check of the file open as fd (left open), and where vals is not NULL, where the
 * value of every 8-byte key (the sample keys) lies, in key order: *vals (malloc'd; free it) holds
 * *nvals of them. A reader that no longer holds the environment reads values there. */
int fmt_lmdb_tree_walk(int fd, uint64_t *pin, fmt_lmdb_value **vals, uint64_t *nvals,
                       fmt_lmdb_value *skel, fmt_msg *msg);

#endif
