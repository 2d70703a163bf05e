/* part.c - slices of the input list, --part auto, the part folder and the part record. */
#include "part.h"

#include <dirent.h>
#include <errno.h>
#include <inttypes.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <xxhash.h>

#include "fmt.h"
#include "manifest.h"
#include "util.h"

int shc_part_parse(const char *arg, shc_part *p, fmt_msg *msg)
{
    const char *slash = strchr(arg, '/');
    uint64_t i, n;
    char ibuf[32];
    if (!slash || (size_t)(slash - arg) >= sizeof ibuf)
        return fmt_fail(msg, EINVAL, "bad --part '%s' (expected I/N, e.g. 3/8, or auto)", arg);
    memcpy(ibuf, arg, (size_t)(slash - arg));
    ibuf[slash - arg] = '\0';
    if (shc_parse_uint(ibuf, 0, UINT32_MAX, &i) || shc_parse_uint(slash + 1, 1, SHC_PART_MAX, &n))
        return fmt_fail(msg, EINVAL, "bad --part '%s' (expected I/N with N from 1 to %u)", arg,
                        SHC_PART_MAX);
    if (i >= n)
        return fmt_fail(msg, EINVAL, "bad --part '%s': parts count from 0, so I is 0..%" PRIu64,
                        arg, n - 1);
    p->index = (uint32_t)i;
    p->count = (uint32_t)n;
    return 0;
}

/* A variable as an unsigned integer: 1 if set and valid, 0 if unset, -1 if set but not a number. */
static int env_num(char *(*get)(const char *), const char *name, uint64_t *v)
{
    const char *s = get(name);
    if (!s || !*s)
        return 0;
    return shc_parse_uint(s, 0, UINT64_MAX, v) == 0 ? 1 : -1;
}

static int from_slurm_array(char *(*get)(const char *), shc_part *p, fmt_msg *msg)
{
    uint64_t id, min = 0, max = 0, step = 1, count = 0;
    int hid = env_num(get, "SLURM_ARRAY_TASK_ID", &id);
    int hmin = env_num(get, "SLURM_ARRAY_TASK_MIN", &min);
    int hmax = env_num(get, "SLURM_ARRAY_TASK_MAX", &max);
    int hstep = env_num(get, "SLURM_ARRAY_TASK_STEP", &step);
    int hcount = env_num(get, "SLURM_ARRAY_TASK_COUNT", &count);
    if (hid < 0 || hmin < 0 || hmax < 0 || hstep < 0 || hcount < 0 || step == 0)
        return fmt_fail(msg, EINVAL, "--part auto: a SLURM_ARRAY_TASK_* variable is not a number");
    if (!hmax && !hcount)
        return fmt_fail(msg, EINVAL, "--part auto: SLURM_ARRAY_TASK_ID is set but neither "
                        "SLURM_ARRAY_TASK_COUNT nor SLURM_ARRAY_TASK_MAX");
    if (id < min || (id - min) % step != 0 || (hmax && (max < min || id > max)))
        return fmt_fail(msg, EINVAL, "--part auto: SLURM_ARRAY_TASK_ID %" PRIu64 " is not in the "
                        "array %" PRIu64 "-%" PRIu64 ":%" PRIu64, id, min, max, step);
    uint64_t span = hmax ? (max - min) / step + 1 : count;
    if (!hcount)
        count = span;
    /* an array given as a list (--array=1,3,7) has MIN/MAX/COUNT that no contiguous range fits */
    if (count != span || count == 0 || count > SHC_PART_MAX)
        return fmt_fail(msg, EINVAL, "--part auto: the job array (min %" PRIu64 ", max %" PRIu64
                        ", step %" PRIu64 ", count %" PRIu64 ") is not one contiguous range of at "
                        "most %u tasks (use --array=0-N-1, or --part I/N)", min, max, step, count,
                        SHC_PART_MAX);
    p->index = (uint32_t)((id - min) / step);
    p->count = (uint32_t)count;
    return 0;
}

int shc_part_from_env(char *(*get)(const char *), shc_part *p, const char **from, fmt_msg *msg)
{
    if (get("SLURM_ARRAY_TASK_ID")) {
        *from = "SLURM_ARRAY_TASK_*";
        return from_slurm_array(get, p, msg);
    }
    static const char *const pairs[][3] = {
        {"OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_RANK/SIZE"},
        {"PMI_RANK", "PMI_SIZE", "PMI_RANK/PMI_SIZE"},
        {"MV2_COMM_WORLD_RANK", "MV2_COMM_WORLD_SIZE", "MV2_COMM_WORLD_RANK/SIZE"},
        {"SLURM_PROCID", "SLURM_NTASKS", "SLURM_PROCID/SLURM_NTASKS"},
    };
    for (size_t k = 0; k < sizeof pairs / sizeof *pairs; k++) {
        uint64_t r, n;
        int hr = env_num(get, pairs[k][0], &r), hn = env_num(get, pairs[k][1], &n);
        if (!hr && !hn)
            continue;
        *from = pairs[k][2];
        if (hr != 1 || hn != 1 || n == 0 || n > SHC_PART_MAX || r >= n)
            return fmt_fail(msg, EINVAL, "--part auto: %s=%s and %s=%s do not give a part (rank "
                            "below size, size 1..%u)", pairs[k][0],
                            get(pairs[k][0]) ? get(pairs[k][0]) : "", pairs[k][1],
                            get(pairs[k][1]) ? get(pairs[k][1]) : "", SHC_PART_MAX);
        p->index = (uint32_t)r;
        p->count = (uint32_t)n;
        return 0;
    }
    *from = NULL;
    return fmt_fail(msg, ENOENT, "--part auto: neither a Slurm job array (SLURM_ARRAY_TASK_ID) nor "
                    "an MPI launcher (OMPI_COMM_WORLD_RANK, PMI_RANK, ...) is in the environment");
}

void shc_part_range(uint64_t n, const shc_part *p, uint64_t *lo, uint64_t *hi)
{
    if (!p || p->count == 0) {
        *lo = 0;
        *hi = n;
        return;
    }
    /* n * I / N without overflow for any n below 2^64 / 2^17 (far past any input list) */
    *lo = (uint64_t)(((unsigned __int128)n * p->index) / p->count);
    *hi = (uint64_t)(((unsigned __int128)n * (p->index + 1)) / p->count);
}

void shc_part_name(const shc_part *p, char name[SHC_PART_NAME_LEN])
{
    snprintf(name, SHC_PART_NAME_LEN, "%05u-of-%05u", p->index % 100000u, p->count % 100000u);
}

int shc_part_name_parse(const char *name, shc_part *p)
{
    if (strlen(name) != SHC_PART_NAME_LEN - 1 || strncmp(name + 5, "-of-", 4) != 0 ||
        strspn(name, "0123456789") != 5 || strspn(name + 9, "0123456789") != 5)
        return EINVAL;
    unsigned i = 0, n = 0;
    for (int k = 0; k < 5; k++) {
        i = i * 10 + (unsigned)(name[k] - '0');
        n = n * 10 + (unsigned)(name[9 + k] - '0');
    }
    if (n == 0 || i >= n)
        return EINVAL;
    p->index = i;
    p->count = n;
    return 0;
}

void shc_inputs_hash_items(void *st, const fmt_inputs *in)
{
    for (size_t i = 0; i < in->nclasses; i++)
        shc_hash_str(st, in->classes[i]);
    for (size_t i = 0; i < in->n; i++) {
        shc_hash_str(st, in->items[i].path);
        XXH3_64bits_update(st, &in->items[i].label, sizeof in->items[i].label);
    }
}

uint64_t shc_inputs_hash(const fmt_inputs *in)
{
    XXH3_state_t *st = shc_hash_begin("shardc-inputs-1");
    if (!st)
        return 0;
    uint64_t counts[3] = {in->nclasses, in->n, in->nskipped};
    XXH3_64bits_update(st, counts, sizeof counts);
    shc_inputs_hash_items(st, in);
    for (size_t i = 0; i < in->nskipped; i++) {
        shc_hash_str(st, in->skipped[i].path);
        shc_hash_str(st, in->skipped[i].reason);
    }
    return shc_hash_end(st);
}

/* ---- OUT for a part ---- */

/* Names a dataset directory may hold at its top (whole builds' files, merged files, parts, and
 * the lock file a whole build takes in OUT, which stays after it ends or is refused). */
static int top_name_ok(const char *name)
{
    static const char *const names[] = {FMT_MANIFEST_NAME, "rejects.tsv", "warnings.tsv",
                                        "inputs.tsv", ".rejects.journal", SHC_PARTS_DIR,
                                        SHC_LOCK_NAME};
    for (size_t i = 0; i < sizeof names / sizeof *names; i++)
        if (strncmp(name, names[i], strlen(names[i])) == 0)
            return 1;
    return strncmp(name, "shard-", 6) == 0;
}

static int mkdir_dir(const char *path, fmt_msg *msg)
{
    if (mkdir(path, 0777) != 0 && errno != EEXIST) {
        int e = errno;
        return fmt_fail(msg, e, "cannot create %s: %s", path, strerror(e));
    }
    struct stat sb;
    if (stat(path, &sb) != 0)
        return fmt_fail(msg, errno, "cannot write to %s: %s", path, strerror(errno));
    if (!S_ISDIR(sb.st_mode))
        return fmt_fail(msg, ENOTDIR, "cannot write to %s: not a directory", path);
    return 0;
}

int shc_part_prepare(const char *out, const shc_part *p, int force, int resume, char **dir,
                     fmt_msg *msg)
{
    *dir = NULL;
    char name[SHC_PART_NAME_LEN];
    shc_part_name(p, name);
    char *parts = NULL, *pdir = NULL, *top = NULL, *own = NULL;
    int rc = mkdir_dir(out, msg);
    if (rc)
        return rc;
    if (asprintf(&parts, "%s/%s", out, SHC_PARTS_DIR) < 0 ||
        asprintf(&pdir, "%s/%s", parts, name) < 0 ||
        asprintf(&top, "%s/%s", out, FMT_MANIFEST_NAME) < 0 ||
        asprintf(&own, "%s/%s", pdir, FMT_MANIFEST_NAME) < 0) {
        rc = ENOMEM;
        goto leave;
    }
    if (!force) {
        DIR *d = opendir(out);
        struct dirent *e;
        while (d && (e = readdir(d)))
            if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..") && !top_name_ok(e->d_name)) {
                rc = fmt_fail(msg, EEXIST, "%s is not empty and holds files that are not a "
                              "shardc dataset (%s; use --force to write into it anyway)", out,
                              e->d_name);
                break;
            }
        if (d)
            closedir(d);
        if (rc)
            goto leave;
    }
    if (access(top, F_OK) == 0) {
        if (!force && !resume) {
            rc = fmt_fail(msg, EEXIST, "%s already holds a dataset (merged or built whole): use "
                          "--force to build a part of it again, --resume to finish one", out);
            goto leave;
        }
        /* the part's shards may change: no manifest may name them meanwhile */
        if ((force || access(own, F_OK) != 0) && unlink(top) != 0 && errno != ENOENT) {
            rc = fmt_fail(msg, errno, "cannot remove %s: %s", top, strerror(errno));
            goto leave;
        }
        fmt_fsync_parent(top);
    }
    if ((rc = mkdir_dir(parts, msg)))
        goto leave;
    *dir = pdir;
    pdir = NULL;
leave:
    free(parts);
    free(pdir);
    free(top);
    free(own);
    return rc;
}

/* ---- the part record ---- */

static json_t *hex(uint64_t v)
{
    char b[17];
    snprintf(b, sizeof b, "%016" PRIx64, v);
    return json_string(b);
}

static int get_hex(json_t *o, const char *key, uint64_t *v)
{
    const char *s = json_string_value(json_object_get(o, key));
    if (!s || strlen(s) != 16 || strspn(s, "0123456789abcdef") != 16)
        return EINVAL;
    *v = strtoull(s, NULL, 16);
    return 0;
}

static int get_int(json_t *o, const char *key, uint64_t *v)
{
    json_t *j = json_object_get(o, key);
    if (!json_is_integer(j) || json_integer_value(j) < 0)
        return EINVAL;
    *v = (uint64_t)json_integer_value(j);
    return 0;
}

int shc_part_record_add(const char *build_json, const shc_part_record *r, char **out)
{
    *out = NULL;
    json_t *b = build_json ? json_loads(build_json, 0, NULL) : json_object();
    if (!json_is_object(b)) {
        json_decref(b);
        return build_json ? EINVAL : ENOMEM;
    }
    json_t *p = json_object(), *sum = json_array(), *sumsq = json_array();
    if (!p || !sum || !sumsq) {
        json_decref(p);
        json_decref(sum);
        json_decref(sumsq);
        json_decref(b);
        return ENOMEM;
    }
    json_object_set_new(p, "index", json_integer(r->part.index));
    json_object_set_new(p, "count", json_integer(r->part.count));
    json_object_set_new(p, "inputs", json_integer((json_int_t)r->inputs));
    json_object_set_new(p, "first_input", json_integer((json_int_t)r->first_input));
    json_object_set_new(p, "end_input", json_integer((json_int_t)r->end_input));
    json_object_set_new(p, "listing_skips", json_integer((json_int_t)r->listing_skips));
    json_object_set_new(p, "rejects", json_integer((json_int_t)r->rejects));
    json_object_set_new(p, "list_hash", hex(r->list_hash));
    json_object_set_new(p, "fingerprint", hex(r->fingerprint));
    json_object_set_new(p, "quality", json_integer(r->quality));
    json_object_set_new(p, "pixels", hex(r->pixels));
    for (int c = 0; c < 3; c++) {
        json_array_append_new(sum, hex(r->sum[c]));
        json_array_append_new(sumsq, hex(r->sumsq[c]));
    }
    json_object_set_new(p, "sum", sum);
    json_object_set_new(p, "sumsq", sumsq);
    json_object_set_new(b, "part", p);
    *out = json_dumps(b, JSON_COMPACT | JSON_PRESERVE_ORDER);
    json_decref(b);
    return *out ? 0 : ENOMEM;
}

int shc_part_record_get(const char *build_json, shc_part_record *r, char **rest)
{
    memset(r, 0, sizeof *r);
    if (rest)
        *rest = NULL;
    json_t *b = build_json ? json_loads(build_json, 0, NULL) : NULL;
    json_t *p = json_object_get(b, "part");
    if (!p) {
        json_decref(b);
        return ENOENT;
    }
    uint64_t idx, cnt, q;
    json_t *sum = json_object_get(p, "sum"), *sumsq = json_object_get(p, "sumsq");
    int rc = json_is_object(p) && json_array_size(sum) == 3 && json_array_size(sumsq) == 3 ? 0
                                                                                          : EINVAL;
    if (!rc)
        rc = get_int(p, "index", &idx) || get_int(p, "count", &cnt) ||
             get_int(p, "inputs", &r->inputs) || get_int(p, "first_input", &r->first_input) ||
             get_int(p, "end_input", &r->end_input) ||
             get_int(p, "listing_skips", &r->listing_skips) ||
             get_int(p, "rejects", &r->rejects) || get_int(p, "quality", &q) ||
             get_hex(p, "list_hash", &r->list_hash) ||
             get_hex(p, "fingerprint", &r->fingerprint) || get_hex(p, "pixels", &r->pixels)
             ? EINVAL : 0;
    for (size_t c = 0; !rc && c < 3; c++) {
        json_t *o = json_object();
        json_object_set(o, "s", json_array_get(sum, c));
        json_object_set(o, "q", json_array_get(sumsq, c));
        rc = get_hex(o, "s", &r->sum[c]) || get_hex(o, "q", &r->sumsq[c]) ? EINVAL : 0;
        json_decref(o);
    }
    if (!rc && (cnt == 0 || cnt > SHC_PART_MAX || idx >= cnt || q > 100 ||
                r->first_input > r->end_input || r->end_input > r->inputs))
        rc = EINVAL;
    if (!rc) {
        r->part.index = (uint32_t)idx;
        r->part.count = (uint32_t)cnt;
        r->quality = (int)q;
    }
    if (!rc && rest) {
        json_object_del(b, "part");
        *rest = json_dumps(b, JSON_COMPACT | JSON_PRESERVE_ORDER);
        if (!*rest)
            rc = ENOMEM;
    }
    json_decref(b);
    return rc;
}

void shc_channel_stats(const uint64_t sum[3], const uint64_t sumsq[3], uint64_t pixels,
                       uint32_t channels, double mean[3], double std[3])
{
    for (uint32_t c = 0; c < channels && c < 3; c++) {
        double m = pixels ? (double)sum[c] / (double)pixels : 0;
        double var = pixels ? (double)sumsq[c] / (double)pixels - m * m : 0;
        mean[c] = m;
        std[c] = var > 0 ? sqrt(var) : 0;
    }
}
