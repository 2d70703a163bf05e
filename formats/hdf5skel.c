/* hdf5skel.c - an hdf5 shard before its file arrives (backend.h r_head_of, r_tail,
 * r_open_parts): its metadata from the bytes before and after its pixels, which the manifest
 * entry's pins locate and hash (docs/REMOTE.md, "Samples of varying sizes, targets").
 */
#include "hdf5_int.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* A shard's pins (manifest.h) hash every byte HDF5 reads, all but the pixels [pin_skip_off,
 * +pin_skip_len): those bytes, before and after the pixels, are the skeleton. They go into a
 * sparse temporary file of the shard's size ($TMPDIR, else /tmp; HDF5 wants a path it can
 * resolve, which a memfd's is not), the pixels left a hole, which the shard's precheck and open
 * read as they read a shard's file: the pin first, then HDF5 (attributes, index datasets),
 * every check of a local open. What the open keeps is in memory (h5_meta); the file goes as
 * soon as it is open. */

int fmt_h5r_head_of(const fmt_manifest_shard *ms, uint64_t *len, fmt_msg *msg)
{
    if (!(ms->pins & FMT_PIN_OPEN))
        return fmt_fail(msg, FMT_EUNSUPPORTED, "its manifest entry does not pin the bytes HDF5 "
                        "reads (a build before pins)");
    *len = ms->pin_skip_len ? ms->pin_skip_off : ms->bytes;
    return 0;
}

int fmt_h5r_tail(const uint8_t *head, const fmt_manifest_shard *ms, uint64_t *from, uint64_t *to,
                 fmt_msg *msg)
{
    (void)head;                 /* (checked with the tail, by the pin) */
    (void)msg;
    *from = ms->pin_skip_len ? ms->pin_skip_off + ms->pin_skip_len : ms->bytes;
    *to = ms->bytes;
    return 0;
}

int fmt_h5r_open_parts(void **out, const fmt_manifest_shard *ms, const uint8_t *head,
                       size_t head_len, const uint8_t *tail, size_t tail_len, fmt_msg *msg)
{
    *out = NULL;
    if (head_len > ms->bytes || tail_len > ms->bytes - head_len)
        return fmt_fail(msg, FMT_EINVAL, "parts of %zu and %zu bytes of a %" PRIu64 "-byte file",
                        head_len, tail_len, ms->bytes);
    const char *tmp = getenv("TMPDIR");
    char path[PATH_MAX];
    snprintf(path, sizeof path, "%s/.shardc-skeleton-XXXXXX", tmp && *tmp ? tmp : "/tmp");
    int fd = mkostemp(path, O_CLOEXEC);
    if (fd < 0)
        return fmt_fail(msg, errno, "cannot create a file like %s: %s", path, strerror(errno));
    int rc = 0;
    if (ftruncate(fd, (off_t)ms->bytes) != 0)
        rc = errno;
    if (!rc)
        rc = fmt_h5_pwrite_all(fd, head, head_len, 0);
    if (!rc)
        rc = fmt_h5_pwrite_all(fd, tail, tail_len, ms->bytes - tail_len);
    if (rc) {
        unlink(path);
        close(fd);
        return fmt_fail(msg, rc, "cannot write %s: %s", path, strerror(rc));
    }
    rc = fmt_h5r_precheck(path, ms, msg);
    if (!rc)
        rc = fmt_h5r_open(out, NULL, path, FMT_ACCESS_PREAD, msg);
    if (!rc && fmt_h5r_as_skeleton(*out) != 0) {
        rc = fmt_fail(msg, FMT_EUNSUPPORTED, "its pixels are not contiguous in the file");
        fmt_h5r_close(*out);
        *out = NULL;
    }
    unlink(path);
    close(fd);
    return rc;
}
