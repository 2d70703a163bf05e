/* worker.h - the build's workers (worker.c; internal to the build: build.c).
 *
 * The pipeline is a ring of slots between N worker threads and the writer (build.c says how it
 * is ordered): a worker claims input position i while i < next_write + nslots, renders it into
 * slot i % nslots and marks it done; the writer takes the slots in input order and clears them.
 */
#ifndef SHC_WORKER_H
#define SHC_WORKER_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

#include "augment.h"
#include "build.h"
#include "feed.h"
#include "fieldsin.h"
#include "fmt.h"
#include "image.h"
#include "inputs.h"
#include "resample.h"
#include "sample.h"
#include "stream.h"

/* One input's results: K samples (K = shc_render_count), or a reject. The arrays are allocated
 * once per slot and reused. */
typedef struct {
    int done;
    int rc;                     /* 0: samples ready; else rejected, why says why */
    fmt_msg why;                /* with rc 0: the decoder's warning, "" if none */
    fmt_image *imgs;
    fmt_sample_meta *metas;
    fmt_aug_params *params;
    uint8_t *aux;               /* K records of FMT_AUG_RECORD_MAX bytes when augmenting */
    uint8_t *tbuf;              /* the target record (detection builds) */
    size_t tcap;
    uint8_t *pbuf;              /* the pair record (detection builds with --fields) */
    size_t pcap;
} shc_slot;

typedef struct {
    const shc_build_opts *o;
    const fmt_inputs *in;
    const shc_annot *annot;     /* detection builds: the annotations, else NULL */
    shc_slot *slots;
    size_t nslots;
    fmt_rs_cache *cache;        /* resize coefficients shared by the workers */
    shc_feed *feed;             /* archive members' bytes (NULL: no archive among the inputs) */
    shc_stream *stream;         /* a streamed build's items (NULL: the inputs are listed) */
    const shc_fields_in *fields;    /* --fields: each input's record (NULL: none) */
    size_t next_claim, next_write, end;
    int stop;
    pthread_mutex_t mu;
    pthread_cond_t space, ready;
} shc_pipeline;

/* A worker thread (pthread_create's start routine; arg: the shc_pipeline): claims positions and
 * renders them into their slots until pl->end is reached or pl->stop is set. Returns NULL. */
void *shc_worker(void *arg);

#endif
