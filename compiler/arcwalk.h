/* arcwalk.h - walking the members of an archive (tar, compressed tar, zip) in stream order,
 * through libarchive, without extracting anything.
 *
 * A walk reads the archive once, front to back, and calls the visitor for each member with its
 * name, size, type and ordinal. With nesting on, a top-level member named *.tar is opened as an
 * archive of its own while the outer one streams (ImageNet's tar of class tars): its members are
 * visited after it, named "INNER.tar!path". Deeper tars are plain members. Two walks of the same
 * unchanged archive visit the same members with the same ordinals: the listing and the reading of
 * a build rely on it.
 *
 * Nothing is written anywhere: member names are strings only, so a name like "../x.jpg" cannot
 * reach the file system (shc_arc_name_safe lets callers refuse it as an input name).
 */
#ifndef SHC_ARCWALK_H
#define SHC_ARCWALK_H

#include <stddef.h>
#include <stdint.h>

#include "fmt.h"

/* Does the file name say archive: .tar .tgz .tar.gz .tar.bz2 .tbz2 .tar.xz .txz .tar.zst .tar.lz4
 * .zip? */
int shc_arc_is_archive_name(const char *path);

enum { SHC_ARC_FILE, SHC_ARC_DIR, SHC_ARC_LINK, SHC_ARC_OTHER, SHC_ARC_ERROR, SHC_ARC_BADNAME };

typedef struct {
    const char *name;       /* "a/b.jpg"; in an inner tar "inner.tar!a/b.jpg"; as extraction
                             * writes it: "." components and repeated or trailing '/' removed
                             * ("./a//./b.jpg" -> "a/b.jpg"), UTF-8 names in UTF-8 whatever the
                             * locale; SHC_ARC_BADNAME: "(member SEQ: NAME...)" */
    const char *outer;      /* the top-level member ("inner.tar"; == name when not nested) */
    const char *inner;      /* the path inside the inner tar, or NULL */
    uint64_t seq;           /* ordinal in the walk, from 0; inner members counted where they are */
    int64_t size;           /* bytes, -1 when the header does not say */
    int type;               /* SHC_ARC_*; SHC_ARC_ERROR: an inner tar is damaged from here on,
                             * error says why (the walk goes on with the outer archive);
                             * SHC_ARC_BADNAME: a file or link whose name is unusable (longer
                             * than 4096 bytes, empty, or not readable), error says which */
    const char *error;
} shc_arc_member;

typedef struct shc_arc_reader shc_arc_reader;

/* Called for each member; r reads its data (shc_arc_read), valid during the call only. Return 0 to
 * go on; anything else stops the walk, which returns it. */
typedef int (*shc_arc_visit)(void *ctx, const shc_arc_member *m, shc_arc_reader *r);

/* Walk the archive at path (nest: open top-level *.tar members too). Returns 0 after the last
 * member, the visitor's code, or an error with msg naming the archive, the last member read and
 * libarchive's reason: errno values for the file, FMT_EFORMAT (not an archive we read),
 * FMT_ETRUNC (ends early), FMT_ECORRUPT (damaged). Members visited before an error stay valid. */
int shc_arc_walk(const char *path, int nest, shc_arc_visit visit, void *ctx, fmt_msg *msg);

/* An archive file's identity: a build lists an archive in one walk and reads its members in
 * others, matching them by ordinal, so it checks that every walk reads the same file. */
typedef struct {
    uint64_t dev, ino;
    int64_t size, mtime_s, mtime_ns;
} shc_arc_id;

int shc_arc_id_same(const shc_arc_id *a, const shc_arc_id *b);

/* shc_arc_walk, and: the file's identity in *id (when id is not NULL) as it was opened; with
 * expect, a file that is not that one (size, modification time, inode or device differ) fails
 * with ESTALE before any member is visited. Either way a file that changes while it is walked
 * fails with ESTALE at the end (msg names the archive).
 * A compressed archive is read to the end of its compressed stream, past the last member, so
 * the stream's checksum (gzip CRC-32, zstd frame checksum, xz and bzip2 block checks, lz4
 * content checksum) is always compared: a stream that fails it, or does not decode, fails the
 * walk with FMT_EHASH, whatever the visitor was given before; none of its members can be trusted
 * (msg names the archive, the filter and the reason). A stream that ends early is FMT_ETRUNC as
 * above: the members visited before it stay valid. Plain tar has no data checksum: its members'
 * bytes are what the file holds. */
int shc_arc_walk_id(const char *path, int nest, const shc_arc_id *expect, shc_arc_id *id,
                    shc_arc_visit visit, void *ctx, fmt_msg *msg);

/* The current member's data, at most max bytes (FMT_ETOOBIG beyond, read no further), in *data
 * (malloc'd, caller frees; at least one byte allocated). Errors: FMT_ETRUNC / FMT_ECORRUPT with
 * msg (libarchive's reason), ENOMEM. Call at most once per member. */
int shc_arc_read(shc_arc_reader *r, uint64_t max, uint8_t **data, size_t *len, fmt_msg *msg);

/* name as walks give member names ("./a//./b" -> "a/b") into out (4097 bytes): 1, 0 when it is
 * empty, -1 when longer than 4096 bytes. */
int shc_arc_norm_name(const char *name, char *out);

/* Is a member name usable as an input name: relative, and no ".." component? */
int shc_arc_name_safe(const char *name);

#endif
