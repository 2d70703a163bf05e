/* fuzz_list - a list file ("path label" per line, compiler/inputs.h) from untrusted bytes.
 *
 * The paths resolve against two SRC folders: the first empty, the second holding one empty file,
 * a.jpg (and a folder, d/), so that most lines fail with "no such file" as they would on a real
 * machine, while lines naming a.jpg or d let the fuzzer reach the rest of the parser (several
 * entries, class names up to the largest label). Absolute paths are looked up as they are.
 */
#include "common.h"

#include <stdio.h>
#include <string.h>

#include "inputs.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static char src1[4096], src2[4096];
    if (!src1[0]) {
        char tmp[4096];
        fz_mkdir("src1");
        fz_mkdir("src2");
        fz_mkdir("src2/d");
        fz_write("src2/a.jpg", "", 0, tmp, sizeof tmp);
        fz_path(src1, sizeof src1, "src1");
        fz_path(src2, sizeof src2, "src2");
    }
    char list[4096];
    fmt_msg err = {{0}};
    fz_write("list.txt", data, size, list, sizeof list);
    char *const srcs[] = {src1, src2};
    fmt_inputs in;
    int rc = fmt_inputs_from_list(list, srcs, 2, &in, &err);
    if (rc) {
        FZ_ASSERT(err.text[0] != '\0');
        FZ_ASSERT(in.n == 0 && in.items == NULL && in.classes == NULL);
        return 0;
    }
    for (size_t i = 0; i < in.n; i++) {
        FZ_ASSERT(in.items[i].path != NULL);
        FZ_ASSERT(in.items[i].label >= 0 && (size_t)in.items[i].label < in.nclasses);
    }
    FZ_ASSERT((in.n == 0) == (in.nclasses == 0));
    char want[32];
    for (size_t k = 0; k < in.nclasses; k += 1 + k / 8) {
        snprintf(want, sizeof want, "%zu", k);
        FZ_ASSERT(strcmp(in.classes[k], want) == 0);
    }
    fmt_inputs_free(&in);
    return 0;
}
