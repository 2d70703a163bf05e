/* test_single.c - shardc.h's single inputs (compiler/single.c): a folder's listing is the
 * build's (every stored sample's source and label), and shc_render_file gives each input the
 * bytes a build stores for it, or fails where the build rejects it; the sizes and refusals. */
#include "shardc.h"
#include "shardread.h"
#include "mksample.h"
#include "testutil.h"

#include <check.h>
#include <inttypes.h>
#include <sys/stat.h>

START_TEST(test_render_as_the_build)
{
    char src[700], out[700];
    tu_path(out, sizeof out, "ds");
    mks_report rep = tu_mks_src(src, sizeof src, 3, 4, 20, 50, 1);
    ck_assert_uint_gt(rep.broken, 0);
    char *srcs[] = {src};

    shc_build_opts *o = shc_build_opts_new();
    ck_assert_ptr_nonnull(o);
    shc_msg why = {{0}};
    shc_build_sources(o, srcs, 1);
    ck_assert_msg(shc_build_set(o, "output", out, &why) == 0 &&
                  shc_build_set(o, "size", "16x12", &why) == 0 &&
                  shc_build_set(o, "gray", NULL, &why) == 0 &&
                  shc_build_check(o, &why) == 0, "%s", why.text);
    int rc = shc_build(o, NULL);
    ck_assert_msg(rc == 0 || rc == SHC_EREJECTS, "%s", shc_strerror(rc));

    shc_input_list *l = NULL;
    ck_assert_int_eq(shc_input_list_dirs(srcs, 1, &l, &why), 0);
    size_t n = shc_input_list_count(l);
    ck_assert_uint_eq(n, rep.images + rep.broken);
    ck_assert_uint_eq(shc_input_list_classes(l), 3);
    shr_dataset *d = NULL;
    shr_msg msg = {""};
    ck_assert_msg(shr_dataset_open(&d, out, SHR_ACCESS_MMAP, &msg) == 0, "%s", msg.text);
    shr_dataset_info info;
    shr_dataset_get_info(d, &info);
    ck_assert_uint_eq(info.inputs, n);

    shc_renderer *r = shc_renderer_new(o);
    shc_build_opts_free(o);             /* the renderer keeps what it needs */
    ck_assert_ptr_nonnull(r);
    uint8_t *stored = malloc(16 * 12), *px = malloc(16 * 12);
    ck_assert(stored && px);
    uint8_t *rendered = calloc(n, 1);   /* inputs rendered without error */
    ck_assert_ptr_nonnull(rendered);
    size_t failed = 0;
    for (size_t i = 0; i < n; i++) {
        uint32_t w = 0, h = 0, c = 0;
        shc_msg m = {{0}};
        rc = shc_render_file(r, shc_input_list_path(l, i), i, px, 16 * 12, &w, &h, &c, &m);
        if (rc) {
            ck_assert_msg(m.text[0] != '\0', "no reason for %s", shc_input_list_path(l, i));
            failed++;
            continue;
        }
        ck_assert(w == 16 && h == 12 && c == 1);
        rendered[i] = 1;
    }
    ck_assert_uint_eq(failed, info.rejects);
    ck_assert_uint_eq(n - failed, info.samples);
    /* every stored sample is its source input rendered, byte for byte, with its label */
    for (uint64_t k = 0; k < info.samples; k++) {
        shr_sample s;
        ck_assert_int_eq(shr_dataset_read(d, k, stored, 16 * 12, &s, &msg), 0);
        ck_assert_uint_lt(s.source, n);
        ck_assert(rendered[s.source]);
        ck_assert_int_eq(s.label, shc_input_list_label(l, s.source));
        ck_assert_int_eq(shc_render_file(r, shc_input_list_path(l, s.source), s.source, px,
                                         16 * 12, NULL, NULL, NULL, NULL), 0);
        ck_assert_msg(memcmp(px, stored, 16 * 12) == 0, "sample %" PRIu64 " (%s)", k,
                      shc_input_list_path(l, s.source));
    }
    /* no room: told, nothing written */
    size_t first = 0;
    while (!rendered[first])
        first++;
    memset(px, 0xab, 16 * 12);
    shc_msg m = {{0}};
    ck_assert_int_eq(shc_render_file(r, shc_input_list_path(l, first), first, px, 16 * 12 - 1,
                                     NULL, NULL, NULL, &m), EMSGSIZE);
    ck_assert_msg(strstr(m.text, "rendered to 16x12x1, 192 bytes: room for 191") != NULL, "%s",
                  m.text);
    ck_assert_uint_eq(px[0], 0xab);
    shc_renderer_free(r);
    shc_renderer_free(NULL);
    shr_dataset_close(d);
    shc_input_list_free(l);
    free(rendered);
    free(stored);
    free(px);
}
END_TEST

START_TEST(test_list_errors)
{
    char missing[700], empty[700];
    tu_path(missing, sizeof missing, "missing");
    tu_path(empty, sizeof empty, "empty");
    ck_assert_int_eq(mkdir(empty, 0755), 0);
    shc_input_list *l = (shc_input_list *)1;
    char *srcs[] = {missing};
    ck_assert_int_eq(shc_input_list_dirs(srcs, 1, &l, NULL), ENOENT);
    ck_assert_ptr_null(l);
    srcs[0] = empty;
    ck_assert_int_eq(shc_input_list_dirs(srcs, 1, &l, NULL), 0);
    ck_assert_uint_eq(shc_input_list_count(l), 0);
    shc_input_list_free(l);
    shc_input_list_free(NULL);
}
END_TEST

int main(void)
{
    return tu_run(TU_TEMP_SUITE("single", "single", 120,
                                test_render_as_the_build, test_list_errors));
}
