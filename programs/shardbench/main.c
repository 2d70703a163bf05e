/* main.c - shardbench: measure the work shards remove. The commands and what they measure; the
 * files of programs/shardbench/ hold one concern each (see bench.h).
 *
 *   shardbench read DATASET... [options]
 *
 * Each DATASET is measured on its own, in command-line order, and gives one row:
 *
 *   raw (or the backend the manifest names)   a directory holding manifest.json, read through the
 *       public libshardread API exactly as a training loop would: shr_open, shr_next / touch /
 *       shr_release over E epochs. The consumer touches one byte per 4 KiB page of each batch, so
 *       the delivery cannot be optimised away but costs next to nothing.
 *   memcpy (--memcpy)   the physical limit for the same bytes: every shard mapped, every sample's
 *       payload memcpy'd into per-thread batch buffers, in the order the reader delivered (its
 *       batch indices are recorded during the reader run and replayed), with the same thread count
 *       and batch size.
 *   folder   any other directory: class folders of JPEG/PNG/BMP files, decoded per epoch the way a
 *       training-time loader does (read file, decode with the shrink-on-load hint, resize and
 *       center-crop to the output size, write into a batch buffer), with the same codecs shardc
 *       uses, the same threads, batch size and order. This is the decode work shards remove.
 *
 * The baselines' threads claim whole batches from a shared counter, each filling its own batch
 * buffer, which is the reader's worker model without the ring; there is no consumer thread.
 *
 * What a row reports: with E > 1 epochs, the steady state, i.e. epochs 2..E, after the first has
 * paid for opening the dataset and warming caches; the first epoch is reported separately in the
 * JSON output. With E = 1 the single epoch. CPU time is getrusage(RUSAGE_SELF) user + system, so it
 * counts every thread of the process, the reader's workers included.
 *
 * Cold runs (--cold) evict every file of the dataset from the page cache (fdatasync, then
 * posix_fadvise DONTNEED) before every epoch, so every epoch reads from storage. Pages that a live
 * mapping holds cannot be evicted, and the reader maps its shards, so in a cold run the reader (and
 * the memcpy baseline's mapping) is closed and reopened around every epoch, starting at that epoch:
 * the same batches as one continuous run. After each eviction the fraction of the dataset's pages
 * still resident is checked with mincore and reported, so a filesystem that ignores the advice is
 * noticed instead of passing for cold.
 *
 *   shardbench train DATASET [options]
 *
 * The consumer side: batches from libshardread (or, for an image folder, from a ring that decoding
 * threads fill, presented as the same shr_batch) go through sb_step_run (step.h: an emulated step
 * of a given time, or a small model learning) and back with shr_release. Per epoch: wall time,
 * time the consumer waited for batches (input stall), the step's own busy time, loss, accuracy,
 * and the host-to-device rate where the step runs on a GPU.
 *
 *   shardbench compare SRC --work DIR [options]
 *
 * Builds every format from one image folder with the shardc installed next to shardbench, reads
 * each (and the folder itself) exactly as `read` does, and turns the figures into what a training
 * run pays: cores needed to keep a step of a given time fed, CPU-seconds of decoding removed per
 * epoch, and the step's utilisation.
 */
#include "bench.h"

static const char usage_main[] =
    "usage: shardbench COMMAND [options]\n"
    "\n"
    "commands:\n"
    "  read DATASET... [options]   images/s, MB/s and CPU-seconds per image of each DATASET:\n"
    "                              shardc datasets through libshardread, image folders through\n"
    "                              the decode path they replace\n"
    "  train DATASET [options]     a training step fed by the reader (or by decoding a folder):\n"
    "                              images/s, input stall %, step busy %, loss per epoch\n"
    "  compare SRC --work DIR      build every format from the folder SRC, read each and SRC:\n"
    "                              one table of speed, CPU per image, cores needed, decode work\n"
    "                              removed and step utilisation\n"
    "\n"
    "  shardbench COMMAND --help for a command's options; shardbench --version\n";

int main(int argc, char **argv)
{
    if (shr_simd_env_plain(getenv))     /* the environment's switch: the program applies it */
        shr_set_simd(0);
    if (argc < 2) {
        fputs(usage_main, stderr);
        return SB_EXIT_USAGE;
    }
    const char *cmd = argv[1];
    if (strcmp(cmd, "--help") == 0 || strcmp(cmd, "-h") == 0 || strcmp(cmd, "help") == 0) {
        fputs(usage_main, stdout);
        return SB_EXIT_OK;
    }
    if (strcmp(cmd, "--version") == 0 || strcmp(cmd, "-V") == 0) {
        printf("shardbench %s (libshardread %d.%d)\n", SHARDC_VERSION, SHR_VERSION_MAJOR,
               SHR_VERSION_MINOR);
        return SB_EXIT_OK;
    }
    static const struct {
        const char *name;
        int (*fn)(int, char **);
        const char *usage;
    } cmds[] = {{"read", sb_cmd_read, sb_usage_read},
                 {"train", sb_cmd_train, sb_usage_train},
                 {"compare", sb_cmd_compare, sb_usage_compare}};
    for (size_t i = 0; i < sizeof cmds / sizeof *cmds; i++) {
        if (strcmp(cmd, cmds[i].name) == 0) {
            if (sb_wants_help(argc - 1, argv + 1)) {
                fputs(cmds[i].usage, stdout);
                return SB_EXIT_OK;
            }
            return cmds[i].fn(argc - 1, argv + 1);
        }
    }
    fprintf(stderr, "shardbench: unknown command '%s'\n%s", cmd, usage_main);
    return SB_EXIT_USAGE;
}
