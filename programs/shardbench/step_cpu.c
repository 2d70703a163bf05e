/* step_cpu.c - the training step on the CPU: an emulated step (a sleep of known length) and a
 * small model trained by SGD, in plain loops.
 *
 * The model works one sample at a time: box-average the sample down to side x side per channel,
 * normalise, forward, and add the sample's gradient to the batch's; the weights change once per
 * batch, after every sample has been seen, so the result is true mini-batch SGD on the mean loss
 * and does not depend on the order of samples within a batch. Nothing is kept per sample, so the
 * memory is the weights, their gradients and one sample's activations, whatever the batch size.
 */
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "step_cpu.h"

#define CPU_DEFAULT_SIDE 16u
#define CPU_DEFAULT_HIDDEN 128u
#define CPU_DEFAULT_LR 0.05f
#define CPU_MAX_SIDE 512u
#define CPU_MAX_HIDDEN 65536u
#define CPU_MAX_CLASSES 65536u
#define CPU_MAX_STEP_MS 3600000.0       /* an hour: anything longer is a mistake */

typedef struct {
    sb_step_kind kind;
    sb_model model;
    double step_ms;
    uint32_t side, hidden, classes;
    float lr;
    float mean[3], inv_std[3];
    uint64_t seed;

    /* fixed by the first model batch */
    uint32_t channels;          /* 0 until then */
    size_t dim;                 /* side * side * channels: the model's input */
    size_t in2;                 /* input of the output layer: hidden (MLP) or dim (softmax) */
    float *w1, *b1;             /* MLP: hidden x dim, hidden */
    float *w2, *b2;             /* classes x in2, classes */
    float *g1, *gb1, *g2, *gb2; /* their gradients, summed over a batch */
    float *x, *h, *dh;          /* one sample: input (dim), hidden (hidden), its gradient */
    double *logit;              /* classes */
    float *acc;                 /* one output row of the box average: side * channels */
    uint32_t *ry, *rx;          /* box bounds: rows ry[o]..ry[o+1]-1 feed output row o */

    sb_step_stats st;
} cpu_step;

static double sb_now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* splitmix64: a seeded, portable stream for the initial weights */
static uint64_t next_u64(uint64_t *state)
{
    uint64_t z = (*state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

/* Uniform in [-a, a). */
static float uniform(uint64_t *state, float a)
{
    double u = (double)(next_u64(state) >> 11) * (1.0 / 9007199254740992.0);
    return (float)((2.0 * u - 1.0) * a);
}

static int check_opts(const sb_step_opts *o)
{
    if (o->kind != SB_STEP_EMULATED && o->kind != SB_STEP_MODEL)
        return SHR_EINVAL;
    if (o->kind == SB_STEP_EMULATED)
        return isfinite(o->step_ms) && o->step_ms >= 0 && o->step_ms <= CPU_MAX_STEP_MS
               ? 0 : SHR_EINVAL;
    if (o->model != SB_MODEL_SOFTMAX && o->model != SB_MODEL_MLP)
        return SHR_EINVAL;
    if (o->classes == 0 || o->classes > CPU_MAX_CLASSES || o->model_side > CPU_MAX_SIDE ||
        o->hidden > CPU_MAX_HIDDEN || !isfinite(o->lr) || o->lr < 0)
        return SHR_EINVAL;
    for (int c = 0; c < 3; c++)
        if (!isfinite(o->std[c]) || o->std[c] < 0 || !isfinite(o->mean[c]))
            return SHR_EINVAL;
    return 0;
}

static void free_model(cpu_step *s)
{
    float **fs[] = {&s->w1, &s->b1, &s->w2, &s->b2, &s->g1, &s->gb1, &s->g2, &s->gb2,
                    &s->x, &s->h, &s->dh, &s->acc};
    for (size_t i = 0; i < sizeof fs / sizeof *fs; i++) {
        free(*fs[i]);
        *fs[i] = NULL;
    }
    free(s->logit);
    s->logit = NULL;
    s->channels = 0;
}

/* Allocate and initialise the weights for `channels` input channels. On failure nothing is
 * kept and the step still has no model. */
static int init_model(cpu_step *s, uint32_t channels)
{
    int mlp = s->model == SB_MODEL_MLP;
    size_t dim = (size_t)s->side * s->side * channels;
    size_t in2 = mlp ? s->hidden : dim;
    size_t k = s->classes;
    s->dim = dim;
    s->in2 = in2;
    s->w2 = malloc(k * in2 * sizeof *s->w2);
    s->b2 = calloc(k, sizeof *s->b2);
    s->g2 = malloc(k * in2 * sizeof *s->g2);
    s->gb2 = malloc(k * sizeof *s->gb2);
    s->x = malloc(dim * sizeof *s->x);
    s->acc = malloc((size_t)s->side * channels * sizeof *s->acc);
    s->logit = malloc(k * sizeof *s->logit);
    int ok = s->w2 && s->b2 && s->g2 && s->gb2 && s->x && s->acc && s->logit;
    if (mlp) {
        s->w1 = malloc(in2 * dim * sizeof *s->w1);
        s->b1 = calloc(in2, sizeof *s->b1);
        s->g1 = malloc(in2 * dim * sizeof *s->g1);
        s->gb1 = malloc(in2 * sizeof *s->gb1);
        s->h = malloc(in2 * sizeof *s->h);
        s->dh = malloc(in2 * sizeof *s->dh);
        ok = ok && s->w1 && s->b1 && s->g1 && s->gb1 && s->h && s->dh;
    }
    if (!ok) {
        free_model(s);
        return ENOMEM;
    }
    /* Glorot-uniform for the output layer, He-uniform for the ReLU layer; biases start at 0 */
    uint64_t state = s->seed;
    if (mlp) {
        float a1 = sqrtf(6.0f / (float)dim);
        for (size_t i = 0; i < in2 * dim; i++)
            s->w1[i] = uniform(&state, a1);
    }
    float a2 = sqrtf(6.0f / (float)(in2 + k));
    for (size_t i = 0; i < k * in2; i++)
        s->w2[i] = uniform(&state, a2);
    s->channels = channels;
    return 0;
}

int sb_cpu_step_create(void **out, const sb_step_opts *o)
{
    if (!out)
        return SHR_EINVAL;
    *out = NULL;
    if (!o || check_opts(o))
        return SHR_EINVAL;
    cpu_step *s = calloc(1, sizeof *s);
    if (!s)
        return ENOMEM;
    s->kind = o->kind;
    s->model = o->model;
    s->step_ms = o->step_ms;
    s->side = o->model_side ? o->model_side : CPU_DEFAULT_SIDE;
    s->hidden = o->hidden ? o->hidden : CPU_DEFAULT_HIDDEN;
    s->classes = o->classes;
    s->lr = o->lr > 0 ? o->lr : CPU_DEFAULT_LR;
    s->seed = o->seed;
    for (int c = 0; c < 3; c++) {
        s->mean[c] = (float)o->mean[c];
        s->inv_std[c] = o->std[c] > 0 ? (float)(1.0 / o->std[c]) : 1.0f;
    }
    if (s->kind == SB_STEP_MODEL) {
        s->ry = malloc(((size_t)s->side + 1) * sizeof *s->ry);
        s->rx = malloc(((size_t)s->side + 1) * sizeof *s->rx);
        if (!s->ry || !s->rx) {
            sb_cpu_step_free(s);
            return ENOMEM;
        }
    }
    *out = s;
    return 0;
}

void sb_cpu_step_free(void *p)
{
    cpu_step *s = p;
    if (!s)
        return;
    free_model(s);
    free(s->ry);
    free(s->rx);
    free(s);
}

/* Box bounds for n source pixels onto `side` outputs: output o averages [b[o], b[o+1]) where
 * that is non-empty; when the source is smaller than the output, outputs repeat the nearest
 * source pixel instead. */
static void box_bounds(uint32_t *b, uint32_t n, uint32_t side)
{
    for (uint32_t o = 0; o <= side; o++)
        b[o] = (uint32_t)((uint64_t)o * n / side);
}

static uint32_t box_end(const uint32_t *b, uint32_t o)
{
    return b[o + 1] > b[o] ? b[o + 1] : b[o] + 1;
}

/* IEEE half bits to float. */
static float half_to_float(uint16_t h)
{
    uint32_t sign = (uint32_t)(h & 0x8000) << 16, e = (h >> 10) & 0x1f, m = h & 0x3ff;
    float v = e == 0 ? ldexpf((float)m, -24) : e == 31 ? (m ? NAN : INFINITY)
                                                      : ldexpf((float)(m | 0x400), (int)e - 25);
    uint32_t u;
    memcpy(&u, &v, 4);
    u |= sign;
    memcpy(&v, &u, 4);
    return v;
}

/* Element (y, x, c) of sample p of batch b, whatever its dtype and layout. */
static float element(const shr_batch *b, const uint8_t *p, uint32_t y, uint32_t x, uint32_t c)
{
    size_t e = b->layout == SHR_LAYOUT_NCHW
                   ? ((size_t)c * b->height + y) * b->width + x
                   : ((size_t)y * b->width + x) * b->channels + c;
    switch (b->dtype) {
    case SHR_DTYPE_F32: {
        float f;
        memcpy(&f, p + 4 * e, 4);
        return f;
    }
    case SHR_DTYPE_F16: {
        uint16_t u;
        memcpy(&u, p + 2 * e, 2);
        return half_to_float(u);
    }
    default:
        return p[e];
    }
}

/* Sample p of batch b (h x w x c) into s->x: channel-major side x side, normalised. */
static void downsample(cpu_step *s, const shr_batch *b, const uint8_t *p, uint32_t h, uint32_t w)
{
    uint32_t side = s->side, ch = s->channels;
    int plain = b->dtype == SHR_DTYPE_U8 && (b->layout == SHR_LAYOUT_NHWC || ch == 1);
    for (uint32_t oy = 0; oy < side; oy++) {
        memset(s->acc, 0, (size_t)side * ch * sizeof *s->acc);
        uint32_t y0 = s->ry[oy], y1 = box_end(s->ry, oy);
        for (uint32_t y = y0; y < y1; y++) {
            const uint8_t *row = p + (size_t)y * w * ch;
            for (uint32_t ox = 0; ox < side; ox++) {
                uint32_t x0 = s->rx[ox], x1 = box_end(s->rx, ox);
                float *a = s->acc + (size_t)ox * ch;
                for (uint32_t x = x0; x < x1; x++)
                    for (uint32_t c = 0; c < ch; c++)
                        a[c] += plain ? row[(size_t)x * ch + c] : element(b, p, y, x, c);
            }
        }
        for (uint32_t ox = 0; ox < side; ox++) {
            float inv = 1.0f / (float)((y1 - y0) * (box_end(s->rx, ox) - s->rx[ox]));
            for (uint32_t c = 0; c < ch; c++) {
                float v = s->acc[(size_t)ox * ch + c] * inv;
                s->x[((size_t)c * side + oy) * side + ox] = (v - s->mean[c]) * s->inv_std[c];
            }
        }
    }
}

/* y = W x + b for W rows x cols */
static void affine(const float *w, const float *b, const float *x, size_t rows, size_t cols,
                   double *y)
{
    for (size_t r = 0; r < rows; r++) {
        const float *wr = w + r * cols;
        float sum = 0;
        for (size_t i = 0; i < cols; i++)
            sum += wr[i] * x[i];
        y[r] = (double)sum + b[r];
    }
}

/* Forward and backward for one sample already in s->x; adds its gradient (scaled by `scale`,
 * 1/n) to the sums. Returns the sample's loss; *hit is 1 when the prediction was right. */
static double sample_step(cpu_step *s, uint32_t label, float scale, int *hit)
{
    int mlp = s->model == SB_MODEL_MLP;
    size_t k = s->classes, in2 = s->in2;
    const float *in = s->x;
    if (mlp) {
        for (size_t j = 0; j < in2; j++) {
            const float *wr = s->w1 + j * s->dim;
            float sum = s->b1[j];
            for (size_t i = 0; i < s->dim; i++)
                sum += wr[i] * s->x[i];
            s->h[j] = sum > 0 ? sum : 0;
        }
        in = s->h;
    }
    affine(s->w2, s->b2, in, k, in2, s->logit);
    size_t best = 0;
    double mx = s->logit[0];
    for (size_t c = 1; c < k; c++)
        if (s->logit[c] > mx) {
            mx = s->logit[c];
            best = c;
        }
    *hit = best == label;
    double z = 0;
    for (size_t c = 0; c < k; c++) {
        s->logit[c] = exp(s->logit[c] - mx);
        z += s->logit[c];
    }
    /* -log softmax[label], computed from the shifted logit so it stays finite */
    double loss = log(z) - log(s->logit[label]);
    if (!isfinite(loss))
        loss = log(z) + 745.0;  /* exp underflowed: the loss is at least this large */
    if (mlp)
        memset(s->dh, 0, in2 * sizeof *s->dh);
    for (size_t c = 0; c < k; c++) {
        /* d loss / d logit = softmax - onehot */
        float d = (float)(s->logit[c] / z - (c == label ? 1.0 : 0.0)) * scale;
        if (d == 0)
            continue;
        s->gb2[c] += d;
        float *gr = s->g2 + c * in2;
        const float *wr = s->w2 + c * in2;
        for (size_t i = 0; i < in2; i++)
            gr[i] += d * in[i];
        if (mlp)
            for (size_t i = 0; i < in2; i++)
                s->dh[i] += d * wr[i];
    }
    if (mlp) {
        for (size_t j = 0; j < in2; j++) {
            if (s->h[j] <= 0 || s->dh[j] == 0)
                continue;   /* ReLU off: no gradient flows to this unit's inputs */
            float d = s->dh[j];
            s->gb1[j] += d;
            float *gr = s->g1 + j * s->dim;
            for (size_t i = 0; i < s->dim; i++)
                gr[i] += d * s->x[i];
        }
    }
    return loss;
}

static void sgd(float *w, const float *g, size_t n, float lr)
{
    for (size_t i = 0; i < n; i++)
        w[i] -= lr * g[i];
}

static int model_step(cpu_step *s, const shr_batch *b)
{
    for (uint32_t i = 0; i < b->n; i++)
        if (b->labels[i] < 0 || (uint64_t)b->labels[i] >= s->classes)
            return SHR_EINVAL;
    if (s->channels && b->channels != s->channels)
        return SHR_EINVAL;
    if (!s->channels) {
        int rc = init_model(s, b->channels);
        if (rc)
            return rc;
    }
    size_t k = s->classes, in2 = s->in2;
    memset(s->g2, 0, k * in2 * sizeof *s->g2);
    memset(s->gb2, 0, k * sizeof *s->gb2);
    if (s->model == SB_MODEL_MLP) {
        memset(s->g1, 0, in2 * s->dim * sizeof *s->g1);
        memset(s->gb1, 0, in2 * sizeof *s->gb1);
    }
    box_bounds(s->ry, b->height, s->side);
    box_bounds(s->rx, b->width, s->side);
    size_t stride = (size_t)b->height * b->width * b->channels *
                    (b->dtype == SHR_DTYPE_F32 ? 4 : b->dtype == SHR_DTYPE_F16 ? 2 : 1);
    float scale = 1.0f / (float)b->n;
    double loss = 0;
    uint64_t correct = 0;
    for (uint32_t i = 0; i < b->n; i++) {
        downsample(s, b, b->data + i * stride, b->height, b->width);
        int hit;
        loss += sample_step(s, (uint32_t)b->labels[i], scale, &hit);
        correct += (uint64_t)hit;
    }
    sgd(s->w2, s->g2, k * in2, s->lr);
    sgd(s->b2, s->gb2, k, s->lr);
    if (s->model == SB_MODEL_MLP) {
        sgd(s->w1, s->g1, in2 * s->dim, s->lr);
        sgd(s->b1, s->gb1, in2, s->lr);
    }
    s->st.loss_sum += loss / b->n;
    s->st.loss_batches++;
    s->st.correct += correct;
    s->st.seen += b->n;
    return 0;
}

static void emulated_step(cpu_step *s)
{
    struct timespec deadline;
    clock_gettime(CLOCK_MONOTONIC, &deadline);
    long long ns = (long long)(s->step_ms * 1e6 + 0.5);
    deadline.tv_sec += (time_t)(ns / 1000000000);
    deadline.tv_nsec += (long)(ns % 1000000000);
    if (deadline.tv_nsec >= 1000000000) {
        deadline.tv_sec++;
        deadline.tv_nsec -= 1000000000;
    }
    /* an absolute deadline: a signal that interrupts the sleep cannot make the step shorter */
    while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &deadline, NULL) == EINTR)
        ;
}

int sb_cpu_step_run(void *p, const shr_batch *b)
{
    cpu_step *s = p;
    if (!s || !b || b->n == 0 || !b->data || b->channels < 1 || b->channels > 3 ||
        b->height == 0 || b->width == 0)
        return SHR_EINVAL;
    if (s->kind == SB_STEP_MODEL && !b->labels)
        return SHR_EINVAL;
    double t0 = sb_now_s();
    int rc = 0;
    if (s->kind == SB_STEP_EMULATED)
        emulated_step(s);
    else
        rc = model_step(s, b);
    s->st.busy_s += sb_now_s() - t0;
    return rc;
}

int sb_cpu_step_sync(void *p, sb_step_stats *st)
{
    cpu_step *s = p;
    if (!s)
        return SHR_EINVAL;
    if (st)
        *st = s->st;
    memset(&s->st, 0, sizeof s->st);
    return 0;
}
