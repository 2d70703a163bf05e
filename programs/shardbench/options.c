/* options.c - the command line shared by every command: usage errors, the options read, train
 * and compare share (parsed once, sb_common_option) and the choices' parsing, through the
 * library's options table (sb_parse_choice); numbers and sizes go through the CLI's parsers
 * (util.h), the ones shardc uses. */
#include <float.h>
#include <stdarg.h>
#include <strings.h>

#include "bench.h"

/* The message, then the usage's first line and where the rest is. */
int sb_usage_error(const char *usage, const char *fmt, const char *arg)
{
    fprintf(stderr, "shardbench: ");
    fprintf(stderr, fmt, arg);
    const char *eol = strchr(usage, '\n');
    int len = eol ? (int)(eol - usage) : (int)strlen(usage);
    fprintf(stderr, "\n%.*s\n(--help for the options)\n", len, usage);
    return SB_EXIT_USAGE;
}

int sb_no_memory(void)
{
    fprintf(stderr, "shardbench: out of memory\n");
    return ENOMEM;
}

int sb_fail(shr_msg *msg, int rc, const char *fmt, ...)
{
    if (msg) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(msg->text, sizeof msg->text, fmt, ap);
        va_end(ap);
    }
    return rc;
}

const char *sb_reason(const shr_msg *msg, int rc)
{
    return msg && msg->text[0] ? msg->text : shr_strerror(rc);
}

int sb_wants_help(int argc, char **argv)
{
    for (int i = 1; i < argc; i++)
        if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0)
            return 1;
    return 0;
}

const char *sb_order_name(shr_order o)
{
    return o == SHR_ORDER_RANDOM ? "random" : o == SHR_ORDER_QUASI ? "quasi" : "seq";
}

const char *sb_access_name(shr_access a)
{
    return a == SHR_ACCESS_PREAD ? "pread" : a == SHR_ACCESS_DIRECT ? "direct" : "mmap";
}

int sb_parse_row(const char *usage, const char *flag, const char *field, const char *arg,
                 double *out)
{
    const shr_option_info *r = shr_option_find(field);
    char why[512];
    uint64_t u;
    double v;
    if (!r || r->count != 1 || r->form == SHR_OPT_CHOICE) {
        snprintf(why, sizeof why, "%s: no number row %s in the options table", flag, field);
        return sb_usage_error(usage, "%s", why);
    }
    if (r->is_float ? sb_parse_double(arg, -DBL_MAX, DBL_MAX, &v)
                    : shc_parse_uint(arg, 0, UINT64_MAX, &u)) {
        snprintf(why, sizeof why, "bad %s '%s' (%s)", flag, arg,
                 r->is_float ? "a number" : "a whole number");
        return sb_usage_error(usage, "%s", why);
    }
    if (!r->is_float)
        v = (double)u;
    shr_msg refused;
    if (shr_option_check(r, flag, &v, &refused))
        return sb_usage_error(usage, "%s", refused.text);
    *out = v;
    return 0;
}

int sb_parse_choice(const char *usage, const char *flag, const char *field, const char *arg,
                    const char *const *alias, int fold, int *out)
{
    const shr_option_info *r = shr_option_find(field);
    const char *name = arg;
    for (int i = 0; alias && alias[i]; i += 2)
        if (strcmp(arg, alias[i]) == 0)
            name = alias[i + 1];
    for (int i = 0; fold && r && r->choices && r->choices[i]; i++)
        if (r->choices[i][0] && strcasecmp(arg, r->choices[i]) == 0)
            name = r->choices[i];
    shr_msg why;
    char also[128] = "";
    if (r && shr_option_choose(r, flag, name, out, &why) == 0)
        return 0;
    if (!r)
        snprintf(why.text, sizeof why.text, "%s: no row %s in the options table", flag, field);
    for (int i = 0; alias && alias[i]; i += 2)
        snprintf(also + strlen(also), sizeof also - strlen(also), "%s%s", i ? ", " : " (also ",
                 alias[i]);
    if (also[0])
        snprintf(also + strlen(also), sizeof also - strlen(also), ")");
    char all[sizeof why.text + sizeof also];
    snprintf(all, sizeof all, "%s%s", why.text, also);
    return sb_usage_error(usage, fold ? "%s (any case)" : "%s", all);
}

/* Samples a reader replaced or skipped are reported on stderr, never hidden, whatever the output
 * format: the counts and the latest reason, which names the file and the sample. */
void sb_report_recovery(const char *dir, shr_reader *r, uint32_t epochs)
{
    shr_recovery rec = shr_get_recovery(r);
    if (rec.replaced || rec.skipped)
        fprintf(stderr, "shardbench: %s: %" PRIu64 " sample(s) replaced, %" PRIu64 " skipped over "
                "%u epoch(s) (latest: %s)\n", dir, rec.replaced, rec.skipped, epochs,
                shr_last_error(r));
}

/* A decimal number in [min, max]. 0 on success, -1 on error. */
int sb_parse_double(const char *s, double min, double max, double *out)
{
    if (!s || !*s)
        return -1;
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (errno || *end || !isfinite(v) || v < min || v > max)
        return -1;
    *out = v;
    return 0;
}

/* Every option of shardbench, once: its getopt_long entry and the commands that take it. */
static const struct {
    struct option opt;
    unsigned cmds;
} sb_options[] = {
    {{"threads", required_argument, 0, 'j'}, SB_CMD_READ | SB_CMD_TRAIN | SB_CMD_COMPARE},
    {{"batch", required_argument, 0, 'b'}, SB_CMD_READ | SB_CMD_TRAIN | SB_CMD_COMPARE},
    {{"epochs", required_argument, 0, 'e'}, SB_CMD_READ | SB_CMD_TRAIN | SB_CMD_COMPARE},
    {{"size", required_argument, 0, OPT_SIZE}, SB_CMD_READ | SB_CMD_TRAIN | SB_CMD_COMPARE},
    {{"json", no_argument, 0, OPT_JSON}, SB_CMD_READ | SB_CMD_TRAIN | SB_CMD_COMPARE},
    {{"order", required_argument, 0, OPT_ORDER}, SB_CMD_READ | SB_CMD_TRAIN},
    {{"seed", required_argument, 0, OPT_SEED}, SB_CMD_READ | SB_CMD_TRAIN},
    {{"cold", no_argument, 0, OPT_COLD}, SB_CMD_READ},
    {{"access", required_argument, 0, OPT_ACCESS}, SB_CMD_READ},
    {{"memcpy", no_argument, 0, OPT_MEMCPY}, SB_CMD_READ},
    {{"checksum", no_argument, 0, OPT_CHECKSUM}, SB_CMD_READ},
    {{"on-error", required_argument, 0, OPT_ON_ERROR}, SB_CMD_READ | SB_CMD_TRAIN},
    {{"verify-samples", no_argument, 0, OPT_VERIFY}, SB_CMD_READ | SB_CMD_TRAIN},
    {{"step-ms", required_argument, 0, OPT_STEP_MS}, SB_CMD_TRAIN | SB_CMD_COMPARE},
    {{"model", required_argument, 0, OPT_MODEL}, SB_CMD_TRAIN},
    {{"side", required_argument, 0, OPT_SIDE}, SB_CMD_TRAIN},
    {{"hidden", required_argument, 0, OPT_HIDDEN}, SB_CMD_TRAIN},
    {{"lr", required_argument, 0, OPT_LR}, SB_CMD_TRAIN},
    {{"device", required_argument, 0, OPT_DEVICE}, SB_CMD_TRAIN},
    {{"prefetch", required_argument, 0, OPT_PREFETCH}, SB_CMD_TRAIN},
    {{"timeline", required_argument, 0, OPT_TIMELINE}, SB_CMD_TRAIN},
    /* the reader's read-time transforms (transform.c) */
    {{"rrc", optional_argument, 0, OPT_RRC}, SB_CMD_READ | SB_CMD_TRAIN},
    {{"flip", optional_argument, 0, OPT_FLIP}, SB_CMD_READ | SB_CMD_TRAIN},
    {{"interpolation", required_argument, 0, OPT_INTERP}, SB_CMD_READ | SB_CMD_TRAIN},
    {{"dtype", required_argument, 0, OPT_DTYPE}, SB_CMD_READ | SB_CMD_TRAIN},
    {{"layout", required_argument, 0, OPT_LAYOUT}, SB_CMD_READ | SB_CMD_TRAIN},
    {{"normalize", optional_argument, 0, OPT_NORMALIZE}, SB_CMD_READ | SB_CMD_TRAIN},
    {{"color-jitter", required_argument, 0, OPT_JITTER}, SB_CMD_READ | SB_CMD_TRAIN},
    {{"grayscale", required_argument, 0, OPT_GRAYSCALE}, SB_CMD_READ | SB_CMD_TRAIN},
    {{"rotation", required_argument, 0, OPT_ROTATION}, SB_CMD_READ | SB_CMD_TRAIN},
    {{"affine", required_argument, 0, OPT_AFFINE}, SB_CMD_READ | SB_CMD_TRAIN},
    {{"auto-augment", required_argument, 0, OPT_AUTO_AUGMENT}, SB_CMD_READ | SB_CMD_TRAIN},
    {{"erase", required_argument, 0, OPT_ERASE}, SB_CMD_READ | SB_CMD_TRAIN},
    {{"mixup", required_argument, 0, OPT_MIXUP}, SB_CMD_READ | SB_CMD_TRAIN},
    {{"cutmix", required_argument, 0, OPT_CUTMIX}, SB_CMD_READ | SB_CMD_TRAIN},
    {{"work", required_argument, 0, 'w'}, SB_CMD_COMPARE},
    {{"plot", required_argument, 0, OPT_PLOT}, SB_CMD_COMPARE},
};
#define SB_NOPTIONS (sizeof sb_options / sizeof *sb_options)

/* The getopt_long table of one command (SB_CMD_*): the entries of sb_options it takes. Static
 * storage, one table per command, filled on first use (the CLI is single-threaded). */
const struct option *sb_longopts(unsigned cmd)
{
    static struct option tables[3][SB_NOPTIONS + 1];
    unsigned t = cmd == SB_CMD_READ ? 0 : cmd == SB_CMD_TRAIN ? 1 : 2;
    if (!tables[t][0].name) {
        size_t n = 0;
        for (size_t i = 0; i < SB_NOPTIONS; i++)
            if (sb_options[i].cmds & cmd)
                tables[t][n++] = sb_options[i].opt;
    }
    return tables[t];
}

uint32_t sb_default_threads(void)
{
    long nproc = sysconf(_SC_NPROCESSORS_ONLN);
    return nproc > 0 ? (uint32_t)nproc : 1;
}

int sb_common_option(int c, int argc, char **argv, const char *usage, const sb_common *co)
{
    uint64_t v;
    switch (c) {
    case OPT_RRC: case OPT_FLIP: case OPT_INTERP: case OPT_DTYPE: case OPT_LAYOUT:
    case OPT_NORMALIZE: case OPT_JITTER: case OPT_GRAYSCALE: case OPT_ROTATION:
    case OPT_AFFINE: case OPT_AUTO_AUGMENT: case OPT_ERASE: case OPT_MIXUP: case OPT_CUTMIX:
        if (!co->tf)
            break;
        return sb_tf_option(co->tf, c, argc, argv, usage);
    case 'j': {                 /* the library's range (its options table) */
        double n;
        int rc = sb_parse_row(usage, "--threads", "threads", optarg, &n);
        if (rc)
            return rc;
        *co->threads = (uint32_t)n;
        return 0;
    }
    case 'b':
        if (shc_parse_uint(optarg, 1, 1u << 20, &v))
            return sb_usage_error(usage, "bad --batch '%s' (1..1048576)", optarg);
        *co->batch = (uint32_t)v;
        return 0;
    case 'e':
        if (shc_parse_uint(optarg, 1, 1000000, &v))
            return sb_usage_error(usage, "bad --epochs '%s' (1..1000000)", optarg);
        *co->epochs = (uint32_t)v;
        return 0;
    case OPT_SIZE:
        if (shc_parse_wxh(optarg, co->width, co->height))
            return sb_usage_error(usage, "bad --size '%s' (expected WxH or N, e.g. 224x224 or "
                                  "224)", optarg);
        if (co->have_size)
            *co->have_size = 1;
        return 0;
    case OPT_JSON:
        *co->json = 1;
        return 0;
    case OPT_ORDER:
        if (!co->order)
            break;
    {
        static const char *const alias[] = {"seq", "sequential", NULL};
        int k, rc = sb_parse_choice(usage, "--order", "order", optarg, alias, 0, &k);
        if (rc)
            return rc;
        *co->order = (shr_order)k;
        return 0;
    }
    case OPT_SEED:
        if (!co->seed)
            break;
        if (shc_parse_uint(optarg, 0, UINT64_MAX, co->seed))
            return sb_usage_error(usage, "bad --seed '%s'", optarg);
        return 0;
    case OPT_ON_ERROR:
        if (!co->on_error)
            break;
    {
        int k, rc = sb_parse_choice(usage, "--on-error", "on_error", optarg, NULL, 0, &k);
        if (rc)
            return rc;
        *co->on_error = (shr_on_error)k;
        return 0;
    }
    case OPT_VERIFY:
        if (!co->verify_samples)
            break;
        *co->verify_samples = 1;
        return 0;
    case ':':
        return sb_usage_error(usage, "option '%s' needs a value", argv[optind - 1]);
    default:
        break;
    }
    return sb_usage_error(usage, "unknown option '%s'", argv[optind - 1]);
}
