#!/usr/bin/env bash
# End to end: the installed library stands alone. `make install` into a temporary PREFIX, then a
# program that knows nothing but the installed shardread.h and shardread.pc is compiled, linked
# against the installed libshardread.so and run on a dataset; and the shared object exports
# exactly the functions shardread.h declares. The compiler library's shardc.h is installed
# beside it and stands alone.
. "$(dirname "$0")/lib.sh"

P="$T/prefix"
make --no-print-directory -C "$ROOT" BUILD="$BUILD" PREFIX="$P" PY_SITE="$T/python" install >"$T/install.log" 2>&1
check "make install PREFIX=$P" test -f "$P/include/shardread.h" -a -f "$P/lib/pkgconfig/shardread.pc"

export PKG_CONFIG_PATH="$P/lib/pkgconfig"
check "pkg-config finds shardread in PREFIX" bash -c "pkg-config --cflags shardread | grep -q -- '-I$P/include'"

# a sanitizer build's library needs the program built with the same runtime
case "$BUILD" in
  *address*) SAN="-fsanitize=address,undefined" ;;
  *thread*) SAN="-fsanitize=thread" ;;
  *) SAN= ;;
esac

cat >"$T/prog.c" <<'C'
#include <shardread.h>
#include <stdio.h>

/* every sample of one random epoch, "index label" per line, then a few documented helpers */
int main(int argc, char **argv)
{
    shr_options o;
    shr_options_init(&o);
    o.batch_size = 3;
    o.threads = 2;
    o.order = SHR_ORDER_RANDOM;
    o.seed = 7;
    if (argc != 2)
        return 2;
    shr_reader *r;
    shr_msg why;
    int rc = shr_open(&r, argv[1], &o, &why);
    if (rc) {
        fprintf(stderr, "prog: %s\n", why.text);
        return 1;
    }
    const shr_batch *b;
    while ((rc = shr_next(r, &b)) == 0) {
        for (uint32_t i = 0; i < b->n; i++)
            printf("%lld %lld\n", (long long)b->indices[i], (long long)b->labels[i]);
        shr_release(r, b);
    }
    shr_close(r);
    if (rc != SHR_EEND)
        return 1;
    fprintf(stderr, "mix %llu\n", (unsigned long long)shr_mix(7, 0, 5, SHR_SALT_FLIP));
    fprintf(stderr, "etrunc %s\n", shr_strerror(SHR_ETRUNC));
    shr_reader *none;
    fprintf(stderr, "missing %d\n", shr_open(&none, "/nonexistent-dataset", NULL, &why));
    fprintf(stderr, "why %s\n", why.text);
    return 0;
}
C
check "a program compiles against the installed header alone" \
  cc -std=c11 -Wall -Wextra -Werror $SAN -o "$T/prog" "$T/prog.c" $(pkg-config --cflags --libs shardread)

"$MKSAMPLE" "$T/src" --classes 3 --per-class 5 --seed 2 --quiet --no-broken || { echo "mksample failed"; exit 1; }
"$SHARDC" build "$T/src" -o "$T/ds" --size 16x16 --no-progress 2>/dev/null \
  || { echo "shardc build failed"; exit 1; }
LD_LIBRARY_PATH="$P/lib" "$T/prog" "$T/ds" >"$T/out" 2>"$T/err"
check "it runs on the installed libshardread.so" test $? -eq 0
check "every sample once (a permutation of 0..14)" \
  bash -c "cut -d' ' -f1 '$T/out' | sort -n | tr '\n' ' ' | grep -qx '0 1 2 3 4 5 6 7 8 9 10 11 12 13 14 '"
check "in a shuffled order" bash -c "! cut -d' ' -f1 '$T/out' | sort -nc 2>/dev/null"
check "labels as the folders give them (5 per class)" \
  bash -c "[ \"\$(cut -d' ' -f2 '$T/out' | sort | uniq -c | awk '{print \$1}' | tr '\n' ' ')\" = '5 5 5 ' ]"
check "SHR_ETRUNC is named" bash -c "grep -q '^etrunc ' '$T/err' && ! grep -qi 'unknown' '$T/err'"
check "a missing dataset is ENOENT (2)" grep -qx 'missing 2' "$T/err"
check "... its message in the caller's shr_msg, naming the directory" \
  grep -Eq '^why cannot open dataset /nonexistent-dataset: .*manifest' "$T/err"

# the exported symbols: exactly the functions shardread.h declares
so="$P/lib/libshardread.so"
nm -D --defined-only "$so" | awk '$2 ~ /^[TtWDdBbRrVv]$/ {print $3}' | sort -u >"$T/exported"
# (shardread.h and the parts it includes, installed in include/shardread/)
check "shardread.h's parts are installed beside it" \
  test -f "$P/include/shardread/options.h" -a -f "$P/include/shardread/dataset.h"
sed -n 's/^SHR_API[^(]*[^a-z_0-9]\([a-z_0-9]*\)(.*/\1/p' "$P/include/shardread.h" \
  "$P"/include/shardread/*.h | sort -u >"$T/declared"
check "shardread.h declares functions" test -s "$T/declared"
if diff "$T/declared" "$T/exported" >"$T/diff"; then ok "libshardread.so exports exactly shardread.h's functions ($(wc -l <"$T/declared"))"
else bad "libshardread.so exports differ from shardread.h (< declared, > exported)"; sed 's/^/       /' "$T/diff" | head -20; fi

# the soname carries the interface's version (SHR_VERSION_MAJOR.MINOR: a 0.x minor changes it),
# so a program built against another 0.x header is not loaded against this library; the
# program above was linked to that name
maj=$(sed -n 's/^#define SHR_VERSION_MAJOR \([0-9]*\).*/\1/p' "$P/include/shardread.h")
min=$(sed -n 's/^#define SHR_VERSION_MINOR \([0-9]*\).*/\1/p' "$P/include/shardread.h")
soname=$(objdump -p "$so" | awk '$1 == "SONAME" {print $2}')
check "the soname is libshardread.so.$maj.$min (the header's version), installed as a link" \
  bash -c "[ '$soname' = 'libshardread.so.$maj.$min' ] && [ -L '$P/lib/$soname' ]"
check "... and the program needs that name" \
  bash -c "objdump -p '$T/prog' | awk '\$1 == \"NEEDED\" {print \$2}' | grep -qx '$soname'"

# the installed headers name only what they declare: no code, file or folder of the sources they
# do not ship (formats/fmt.h's FMT_E*, internal headers, source files, the options' table)
for h in shardread.h shardread/options.h shardread/dataset.h shardc.h; do
  if sed -e 's|shardread/[a-z]*\.h||g' -e 's/shardread\.h//g' -e 's/shardc\.h//g' -e '/#include </d' \
      "$P/include/$h" |
      grep -nE '\bFMT_|\bfmt_[a-z]|\b[A-Za-z_0-9]{2,}\.(c|h|cu|md|def)\b|\b(formats|compiler|reader|tests|scripts)/' \
      >"$T/names"; then
    bad "the installed $h names what it does not declare:"; sed 's/^/       /' "$T/names" | head
  else ok "the installed $h names nothing outside itself"; fi
done

# the compiler library's header is installed beside the reader's, stands alone (system headers
# only) and goes with it in one file: both name the one message type, struct shardc_msg
cat >"$T/both.c" <<'C'
#include <shardc.h>
#include <shardread.h>

int main(void)
{
    shc_msg a = {{0}};
    shr_msg *b = &a;                    /* the same struct */
    shc_part p = {0, 2};
    return b->text[0] + (int)p.index + SHC_EXIT_OK + (SHC_EINPUT < 0 ? 0 : 1);
}
C
check "shardc.h is installed and compiles alone, and with shardread.h" \
  bash -c "test -f '$P/include/shardc.h' &&
    cc -std=c11 -Wall -Wextra -Werror -fsyntax-only -I'$P/include' -include shardc.h -x c /dev/null &&
    cc -std=c11 -Wall -Wextra -Werror -fsyntax-only -I'$P/include' '$T/both.c'"

finish
