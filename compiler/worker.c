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
    if (annot) {
        /* the boxes go where the pixels went (one sample: detection builds do not augment) */
        uint32_t sw, sh, len, dropped;
        fmt_geom_plan plan;
        shc_render_geometry(rs, &sw, &sh, &plan);
        fmt_msg why = {{0}};
        int rc = shc_annot_target(annot, (size_t)pos, sw, sh, &plan, &s->tbuf, &s->tcap, &len,
                                  &dropped, &why);
        if (rc) {
            s->rc = rc;
            s->why = why;
            return;
        }
        s->metas[0].aux = s->tbuf;
        s->metas[0].aux_len = len;
    }
    /* fields (not with augment; with annotations the target and fields share a pair record) */
    if (stream) {
        const uint8_t *rec;
        uint32_t len;
        shc_stream_item_fields(stream, pos, &rec, &len);
        if (rec && len > s->tcap) {
            /* a copy: the writer finishes the item (freeing its record) before writing it */
            uint8_t *g = realloc(s->tbuf, len);
            if (!g) {
                s->rc = fmt_fail(&s->why, ENOMEM, "out of memory");
                return;
            }
            s->tbuf = g;
            s->tcap = len;
        }
        if (rec) {
            memcpy(s->tbuf, rec, len);
            s->metas[0].aux = s->tbuf;
            s->metas[0].aux_len = len;
        }
    } else if (fields && !annot) {
        s->metas[0].aux = fields->recs[pos];
        s->metas[0].aux_len = fields->lens[pos];
    } else if (fields) {
        /* target and fields: one pair record (fields.h) */
        uint32_t len = fmt_pair_size(s->metas[0].aux_len, fields->lens[pos]);
        if (!len) {
            s->rc = fmt_fail(&s->why, EINVAL, "its target and fields records are too large "
                             "together");
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
        fmt_pair_encode(s->metas[0].aux, s->metas[0].aux_len, fields->recs[pos],
                        fields->lens[pos], s->pbuf, s->pcap);
        s->metas[0].aux = s->pbuf;
        s->metas[0].aux_len = len;
    }
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
