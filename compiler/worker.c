/* worker.c - the build's workers: an input claimed, decoded and rendered into its slot, each
 * sample hashed and summed there, for the writer (build.c) to take in input order. */
#include "worker.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "annot.h"
#include "render.h"


/* Decode and render one input, then hash and sum each sample. On failure s->rc is set and
 * s->why says why. */
static void process(const shc_build_opts *o, const shc_annot *annot, shc_feed *feed,
                    shc_stream *stream, const shc_fields_in *fields, const fmt_input *in,
                    uint64_t pos, shc_render_scratch *rs, shc_slot *s)
{
    uint32_t n = shc_render_count(&o->r);
    int32_t label = in ? in->label : 0;
    if (stream) {
        /* a streamed item (in is NULL): the stream says how to render it */
        s->rc = shc_stream_render(stream, pos, &o->r, rs, s->imgs, s->params, &label, &s->why);
    } else if (in->archive) {
        /* an archive member: its bytes come from the feeder */
        uint8_t *data;
        size_t len;
        s->rc = shc_feed_take(feed, pos, &data, &len, &s->why);
        if (s->rc == 0)
            s->rc = shc_render_mem_into(&o->r, data, len, pos, rs, s->imgs, s->params, &s->why);
        free(data);
    } else {
        s->rc = shc_render_into(&o->r, in->path, pos, rs, s->imgs, s->params, &s->why);
    }
    if (s->rc)
        return;
    for (uint32_t v = 0; v < n; v++) {
        fmt_image *im = &s->imgs[v];
        fmt_sample_meta *m = &s->metas[v];
        size_t npix = (size_t)im->width * im->height;
        memset(m, 0, sizeof *m);
        m->height = im->height;
        m->width = im->width;
        m->channels = im->channels;
        m->label = label;
        m->source = pos;
        m->hash = fmt_hash64(im->pixels, npix * im->channels);
        fmt_pixel_sums(im->pixels, npix, im->channels, m->sum, m->sumsq);
        if (o->r.augment) {
            uint8_t *rec = s->aux + (size_t)v * FMT_AUG_RECORD_MAX;
            m->aux = rec;
            m->aux_len = fmt_aug_encode(&s->params[v], rec);
        }
    }
    /* the target: from the annotations, or the streamed item's own (one sample: detection
     * builds do not augment); the boxes go where the pixels went */
    const uint8_t *tg = NULL, *fl = NULL;
    uint32_t tlen = 0, flen = 0;
    if (annot || stream) {
        uint32_t sw, sh, dropped;
        fmt_geom_plan plan;
        shc_render_geometry(rs, &sw, &sh, &plan);
        fmt_msg why = {{0}};
        int rc = annot ? shc_annot_target(annot, (size_t)pos, sw, sh, &plan, &s->tbuf, &s->tcap,
                                          &tlen, &dropped, &why)
                       : shc_stream_item_target(stream, pos, sw, sh, &plan, &s->tbuf, &s->tcap,
                                                &tlen, &dropped, &why);
        if (rc) {
            s->rc = rc;
            s->why = why;
            return;
        }
        tg = tlen ? s->tbuf : NULL;
    }
    /* the fields (not with augment): a streamed item's, or the --fields file's */
    if (stream) {
        shc_stream_item_fields(stream, pos, &fl, &flen);
    } else if (fields) {
        fl = fields->recs[pos];
        flen = fields->lens[pos];
    }
    /* one aux record: the target, the fields, or both in a pair record (fields.h) */
    if (!fl) {
        if (tg) {
            s->metas[0].aux = s->tbuf;
            s->metas[0].aux_len = tlen;
        }
        return;
    }
    if (!tg && !stream) {
        /* the --fields file's record: it outlives the sample */
        s->metas[0].aux = (uint8_t *)fl;
        s->metas[0].aux_len = flen;
        return;
    }
    /* into pbuf: the pair, or a streamed item's fields record (the writer finishes the item,
     * freeing it, before writing the sample) */
    uint32_t len = tg ? fmt_pair_size(tlen, flen) : flen;
    if (!len) {
        s->rc = fmt_fail(&s->why, EINVAL, "its target and fields records are too large together");
        return;
    }
    if (len > s->pcap) {
        uint8_t *g = realloc(s->pbuf, len);
        if (!g) {
            s->rc = fmt_fail(&s->why, ENOMEM, "out of memory");
            return;
        }
        s->pbuf = g;
        s->pcap = len;
    }
    if (tg)
        fmt_pair_encode(tg, tlen, fl, flen, s->pbuf, s->pcap);
    else
        memcpy(s->pbuf, fl, flen);
    s->metas[0].aux = s->pbuf;
    s->metas[0].aux_len = len;
}

void *shc_worker(void *arg)
{
    shc_pipeline *pl = arg;
    shc_render_scratch *rs = NULL;
    int rzrc = shc_render_scratch_create(pl->cache, &rs);
    for (;;) {
        pthread_mutex_lock(&pl->mu);
        while (!pl->stop && pl->next_claim < pl->end &&
               pl->next_claim >= pl->next_write + pl->nslots)
            pthread_cond_wait(&pl->space, &pl->mu);
        if (pl->stop || pl->next_claim >= pl->end) {
            pthread_mutex_unlock(&pl->mu);
            break;
        }
        size_t i = pl->next_claim++;
        pthread_mutex_unlock(&pl->mu);

        shc_slot *s = &pl->slots[i % pl->nslots];
        if (rzrc) {
            s->rc = fmt_fail(&s->why, rzrc, "%s", fmt_strerror(rzrc));
        } else {
            /* a stream's items are not in pl->in while the build runs */
            process(pl->o, pl->annot, pl->feed, pl->stream, pl->fields,
                    pl->stream ? NULL : &pl->in->items[i], i, rs, s);
        }

        pthread_mutex_lock(&pl->mu);
        s->done = 1;
        if (s->rc == SHC_EEND && i < pl->end)
            pl->end = i;        /* the stream ended here: nothing more to claim */
        pthread_cond_broadcast(&pl->ready);
        pthread_mutex_unlock(&pl->mu);
    }
    shc_render_scratch_free(rs);
    return NULL;
}
