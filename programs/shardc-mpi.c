/* shardc-mpi - `shardc build` under mpirun: rank r of N builds part r of N (shardc build --part
 * r/N, with its own -j worker threads) into OUT/parts/, then rank 0 merges the parts (shardc
 * merge) once every rank has finished its part.
 *
 * Each rank runs its build in a thread while its main thread (the only one calling MPI) takes
 * part, every ~0.2 s, in a non-blocking all-reduce of four sums: ranks failed, ranks finished,
 * inputs done, inputs in all. When a rank's build fails (its part has no manifest when the build
 * returns: an I/O error, --strict, an unwritable part folder...), the next round tells every rank,
 * and each stops its own build at the next input (the part stays resumable: shardc build --part
 * r/N --resume, or shardc-mpi build --resume). The rounds go on until every build has returned, so
 * every rank leaves the loop in the same round and knows the same outcome; then the ranks' exit
 * codes are gathered, rank 0 merges only if every part is complete, and broadcasts the result, so
 * every rank exits with the same status: a one-machine build's (0, or 1 with rejects) on success;
 * the failing ranks' worst code, or the merge's, otherwise. No manifest is written unless every
 * part is complete and the merge succeeds.
 *
 * Output: each build prints its own rejects and errors (every rank's stderr reaches mpirun's);
 * the progress line (when stderr is a terminal, or --progress) and the summary come from rank 0.
 */
#include <errno.h>
#include <inttypes.h>
#include <mpi.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cli.h"
#include "shardc.h"

static const char usage[] =
    "usage: mpirun -n N shardc-mpi build SRC... -o OUT [shardc build options]\n"
    "\n"
    "Rank r of N builds part r of N (shardc build --part r/N, with its -j worker threads) into\n"
    "OUT/parts/, then rank 0 merges the parts into OUT (shardc merge). One failing rank stops\n"
    "every rank, and no manifest is written. --resume finishes the parts of an interrupted run.\n"
    "The options are those of shardc build (shardc-mpi build --help lists them), without --part\n"
    "and --dry-run. OUT must be on a filesystem every rank sees.\n"
    "\n"
    "exit status: as shardc build: 0 success, 1 finished with rejects, 2 usage error (or parts\n"
    "that cannot be merged), 3 fatal I/O error or a failed rank (no manifest is left)\n";

typedef struct {
    shc_build_opts *o;
    shc_build_view v;           /* what o holds, as the program reads it */
    shc_build_ctl ctl;
    int rc;
    atomic_int finished;
    double seconds;
} job;

static void *run_build(void *arg)
{
    job *j = arg;
    double t0 = shc_cli_now();
    /* shardc's lines for this rank's part, without its summary: rank 0 sums the parts up */
    shc_cli_out out = {.strict = j->v.strict};
    shc_build_cb cb;
    shc_cli_callbacks(&cb, &out);
    cb.summary = NULL;
    j->rc = shc_build_exit(shc_build(j->o, &cb));
    j->seconds = shc_cli_now() - t0;
    atomic_store(&j->finished, 1);
    return NULL;
}

static void nap(long ms)
{
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

/* Did this rank's part finish (its manifest written)? */
static int part_complete(const char *out, const shc_part *p)
{
    char name[SHC_PART_NAME_LEN], *path;
    shc_part_name(p, name);
    if (asprintf(&path, "%s/%s/%s/manifest.json", out, SHC_PARTS_DIR, name) < 0)
        return 0;
    int ok = access(path, F_OK) == 0;
    free(path);
    return ok;
}

/* Parse like shardc build; ranks other than 0 keep quiet about usage errors (every rank finds
 * the same ones). */
static int parse(int argc, char **argv, int rank, shc_build_opts **o)
{
    int saved = -1;
    if (rank != 0) {
        fflush(stderr);
        saved = dup(STDERR_FILENO);
        FILE *null = fopen("/dev/null", "w");
        if (null) {
            dup2(fileno(null), STDERR_FILENO);
            fclose(null);
        }
    }
    int rc = shc_build_args(argc, argv, o);
    if (saved >= 0) {
        fflush(stderr);
        dup2(saved, STDERR_FILENO);
        close(saved);
    }
    return rc;
}

static int has_arg(int argc, char **argv, const char *prefix)
{
    for (int i = 1; i < argc; i++)
        if (strncmp(argv[i], prefix, strlen(prefix)) == 0)
            return 1;
    return 0;
}

int main(int argc, char **argv)
{
    int provided, rank = 0, size = 1;
    shc_simd_from_env(getenv);          /* the environment's switch: the program applies it */
    if (MPI_Init_thread(&argc, &argv, MPI_THREAD_FUNNELED, &provided) != MPI_SUCCESS) {
        fprintf(stderr, "shardc-mpi: cannot initialise MPI\n");
        return SHC_EXIT_IO;
    }
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    int code = SHC_EXIT_USAGE;
    if (argc >= 2 && (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0)) {
        if (rank == 0)
            fputs(usage, stdout);
        code = 0;
        goto leave;
    }
    if (argc >= 2 && strcmp(argv[1], "--version") == 0) {
        if (rank == 0)
            printf("shardc-mpi %s\n", SHARDC_VERSION);
        code = 0;
        goto leave;
    }
    if (argc < 2 || strcmp(argv[1], "build") != 0) {
        if (rank == 0)
            fputs(usage, stderr);
        goto leave;
    }
    if (has_arg(argc - 1, argv + 1, "--help") || has_arg(argc - 1, argv + 1, "-h")) {
        if (rank == 0) {
            fputs(usage, stdout);
            printf("\n");
            fputs(shc_usage_build, stdout);
        }
        code = 0;
        goto leave;
    }
    if (has_arg(argc - 1, argv + 1, "--part") || has_arg(argc - 1, argv + 1, "--dry-run")) {
        if (rank == 0)
            fprintf(stderr, "shardc-mpi: --part and --dry-run are not for shardc-mpi (rank r "
                    "builds part r of N; use shardc build for a dry run)\n");
        goto leave;
    }
    job *j = calloc(1, sizeof *j);
    if (!j || parse(argc - 1, argv + 1, rank, &j->o) != 0) {
        free(j);
        goto leave;
    }
    shc_build_view_get(j->o, &j->v);
    if (j->v.jpeg_fraction > 0) {       /* see shardc's check: every rank builds a part */
        if (rank == 0)
            fprintf(stderr, "shardc-mpi: --jpeg-fraction cannot be combined with parts\n");
        shc_build_opts_free(j->o);
        free(j);
        goto leave;
    }
    const int progress = j->v.progress && rank == 0, json = j->v.json;
    j->v.part = (shc_part){(uint32_t)rank, (uint32_t)size};
    shc_build_set_part(j->o, &j->v.part);
    shc_build_set(j->o, "no-progress", NULL, NULL);
    shc_build_set_ctl(j->o, &j->ctl);
    double t0 = shc_cli_now();
    pthread_t tid;
    if (pthread_create(&tid, NULL, run_build, j) != 0) {
        fprintf(stderr, "shardc-mpi: rank %d: cannot start the build thread\n", rank);
        j->rc = SHC_EXIT_IO;
        atomic_store(&j->finished, 1);
        tid = pthread_self();
    }

    /* rounds: {failed ranks, finished ranks, inputs done, inputs in all} summed over the ranks */
    uint64_t sums[4] = {0}, last_done = 0;
    int stopped = 0;
    double last_print = 0;
    for (;;) {
        int fin = atomic_load(&j->finished);
        /* a build we stopped is not a failure of its own */
        int failed = fin && !stopped && !part_complete(j->v.out, &j->v.part);
        uint64_t mine[4] = {(uint64_t)failed, (uint64_t)fin, atomic_load(&j->ctl.done),
                            atomic_load(&j->ctl.total)};
        MPI_Request req;
        MPI_Iallreduce(mine, sums, 4, MPI_UINT64_T, MPI_SUM, MPI_COMM_WORLD, &req);
        int done = 0;
        while (!done) {
            MPI_Test(&req, &done, MPI_STATUS_IGNORE);
            if (!done)
                nap(5);
        }
        if (sums[1] == (uint64_t)size)
            break;
        if (sums[0] && !stopped && !fin) {
            fprintf(stderr, "shardc-mpi: rank %d: stopping: %" PRIu64 " other rank(s) failed\n",
                    rank, sums[0]);
            atomic_store(&j->ctl.stop, 1);
            stopped = 1;
        }
        if (progress && shc_cli_now() - last_print > 0.5 && sums[2] != last_done) {
            last_print = shc_cli_now();
            last_done = sums[2];
            double dt = shc_cli_now() - t0;
            fprintf(stderr, "\r\033[Kshardc-mpi: %" PRIu64 "/%" PRIu64 " images (%.0f%%), %.0f "
                    "img/s, %" PRIu64 " of %d parts finished", sums[2], sums[3],
                    sums[3] ? 100.0 * (double)sums[2] / (double)sums[3] : 0.0,
                    dt > 0 ? (double)sums[2] / dt : 0.0, sums[1], size);
        }
        nap(200);
    }
    if (!pthread_equal(tid, pthread_self()))
        pthread_join(tid, NULL);
    if (progress)
        fprintf(stderr, "\r\033[K");
    double build_s = shc_cli_now() - t0;

    /* every rank's outcome to rank 0, which merges when all parts are complete */
    int mine[3] = {j->rc, part_complete(j->v.out, &j->v.part), stopped};
    double secs = j->seconds, *all_secs = NULL;
    int *all = NULL;
    if (rank == 0) {
        all = calloc((size_t)size * 3, sizeof *all);
        all_secs = calloc((size_t)size, sizeof *all_secs);
    }
    MPI_Gather(mine, 3, MPI_INT, all, 3, MPI_INT, 0, MPI_COMM_WORLD);
    MPI_Gather(&secs, 1, MPI_DOUBLE, all_secs, 1, MPI_DOUBLE, 0, MPI_COMM_WORLD);
    if (rank == 0) {
        int bad = 0, nstopped = 0, worst = 0;
        for (int r = 0; all && r < size; r++) {
            int rc = all[3 * r], ok = all[3 * r + 1], was_stopped = all[3 * r + 2];
            if (!ok && !was_stopped) {
                /* this rank failed on its own (its build said why above) */
                fprintf(stderr, "shardc-mpi: rank %d (part %d of %d) failed (exit %d)\n", r, r,
                        size, rc);
                bad++;
                worst = rc > worst ? rc : worst;
            }
            nstopped += was_stopped && !ok;
        }
        if (!all || !all_secs) {
            fprintf(stderr, "shardc-mpi: out of memory\n");
            code = SHC_EXIT_IO;
        } else if (bad) {
            fprintf(stderr, "shardc-mpi: %d of %d rank(s) failed, %d stopped; no manifest written "
                    "(after fixing the cause, mpirun -n %d shardc-mpi build ... --resume finishes "
                    "the parts)\n", bad, size, nstopped, size);
            code = worst ? worst : SHC_EXIT_IO;
        } else {
            shc_msg why = {{0}};
            shc_merge_result mr;
            double m0 = shc_cli_now();
            int rc = shc_merge(j->v.out, &j->v.merge, &mr, &why);
            double merge_s = shc_cli_now() - m0;
            if (rc) {
                fprintf(stderr, "shardc-mpi: cannot merge %s: %s\n", j->v.out,
                        why.text[0] ? why.text : shc_strerror(rc));
                code = shc_merge_exit(rc);
            } else {
                double lo = all_secs[0], hi = all_secs[0], sum = 0;
                for (int r = 0; r < size; r++) {
                    lo = all_secs[r] < lo ? all_secs[r] : lo;
                    hi = all_secs[r] > hi ? all_secs[r] : hi;
                    sum += all_secs[r];
                }
                char hb[32];
                double total = shc_cli_now() - t0;
                fprintf(stderr, "shardc-mpi: wrote %" PRIu64 " samples in %" PRIu64 " shard(s), "
                        "%s, to %s from %d parts; %" PRIu64 " rejected%s; %.2f s (parts %.2f-%.2f "
                        "s, merge %.3f s), %.0f images/s\n", mr.samples, mr.shards,
                        shc_human_size(mr.bytes, hb, sizeof hb), j->v.out, size, mr.rejects,
                        mr.rejects ? " (see rejects.tsv)" : "", total, lo, hi, merge_s,
                        total > 0 ? (double)sums[3] / total : 0.0);
                if (json) {
                    printf("{\"samples\": %" PRIu64 ", \"shards\": %" PRIu64 ", \"bytes\": %" PRIu64
                           ", \"inputs\": %" PRIu64 ", \"rejects\": %" PRIu64 ", \"ranks\": %d, "
                           "\"seconds\": %.3f, \"build_seconds\": %.3f, \"merge_seconds\": %.3f, "
                           "\"part_seconds_min\": %.3f, \"part_seconds_max\": %.3f, "
                           "\"part_seconds_mean\": %.3f, \"images_per_s\": %.1f, \"out\": \"%s\"}\n",
                           mr.samples, mr.shards, mr.bytes, mr.inputs, mr.rejects, size, total,
                           build_s, merge_s, lo, hi, sum / size,
                           total > 0 ? (double)sums[3] / total : 0.0, j->v.out);
                    fflush(stdout);
                }
                code = mr.rejects ? SHC_EXIT_REJECTS : SHC_EXIT_OK;
            }
        }
    }
    free(all);
    free(all_secs);
    MPI_Bcast(&code, 1, MPI_INT, 0, MPI_COMM_WORLD);
    shc_build_opts_free(j->o);
    free(j);
leave:
    MPI_Finalize();
    return code;
}
