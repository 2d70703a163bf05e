/* feed.h - the bytes of archive members, delivered to a build by input position.
 *
 * A build's inputs are in the folder walk's order (inputs.h), an archive's members in the order
 * they were written. One feeder thread walks the archives (archive.h) and hands each wanted
 * member's bytes to the position that needs it; the workers take them by position, in any order.
 *
 * Memory: members read ahead of the lowest position still missing ("need") are kept only while
 * all held bytes stay within the budget; a member that does not fit is passed over and read
 * again by a later walk of its archive. The member at `need` is always kept (waiting, while the
 * positions below it are still being taken, for the held bytes to fit), so each walk makes
 * progress, and it waits too while 128 members whose turn has come are not yet taken. An
 * archive written in the inputs' order (tar --sort=name, WebDataset shards) is read once,
 * holding at most those 128 members; any other order is read in as many walks as it takes,
 * holding at most budget + one member (+ the 128).
 *
 * Thread-safety: shc_feed_take from any number of threads; start, stop and free from one.
 */
#ifndef SHC_FEED_H
#define SHC_FEED_H

#include <stddef.h>
#include <stdint.h>

#include "fmt.h"
#include "inputs.h"

typedef struct shc_feed shc_feed;

/* Start the feeder for the archive members among in->items[lo, hi) (in must outlive the
 * feeder). max_member: a larger member is a reject (FMT_ETOOBIG) and is never read; budget: the
 * bytes held ahead (above). Returns 0, ENOMEM, EAGAIN (no thread). */
int shc_feed_start(const fmt_inputs *in, uint64_t lo, uint64_t hi, uint64_t max_member,
                   uint64_t budget, shc_feed **out);

/* The bytes of in->items[pos] (an archive member in [lo, hi)), waiting until they are read.
 * Each position is taken once. Returns 0 with *data (malloc'd; the caller frees it) and *len;
 * or the member's error (FMT_ETOOBIG, FMT_ETRUNC, FMT_ECORRUPT, an errno value) with msg
 * saying why; ECANCELED once the feeder is stopped. */
int shc_feed_take(shc_feed *f, uint64_t pos, uint8_t **data, size_t *len, fmt_msg *msg);

/* Whether the build may publish what it read: 0, or the error that condemns an archive, with
 * msg naming it: FMT_EHASH (its compressed stream failed its check, or did not decode, which
 * is known only at the end of a walk, after members were delivered) or ESTALE (the file, or a
 * member at its ordinal, is not the one listed). With wait, after the feeder has ended, i.e.
 * after every walk has read its archive to the end: call it so before publishing; without,
 * now (at most one member late). After such an error every position not yet delivered gets it. */
int shc_feed_check(shc_feed *f, int wait, fmt_msg *msg);

/* Ask the feeder to stop: takers waiting, and those to come, get ECANCELED. Does not wait
 * (shc_feed_free does): call it before joining the threads that take. */
void shc_feed_stop(shc_feed *f);

/* Stop the feeder (takers waiting get ECANCELED), join its thread and free everything held.
 * Accepts NULL. */
void shc_feed_free(shc_feed *f);

/* Peak bytes held at once (for measurements). */
uint64_t shc_feed_peak(const shc_feed *f);

/* Walks made of the archives (one per archive when they are in the inputs' order). */
uint64_t shc_feed_walks(const shc_feed *f);

#endif
