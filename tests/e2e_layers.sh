#!/usr/bin/env bash
# End to end: the layering the build enforces. Each folder is compiled with the include paths of
# what it may use (Makefile, INC_*): formats/ sees only formats/; the compiler and reader
# libraries see formats/ and themselves, never each other; shardbench sees its own folder,
# compiler/, formats/ and only the reader headers the Makefile lists (BENCH_READER_H); the tests
# and the GPU code see everything. So a wrong-way #include is a compile error, shown here on probe
# files.
. "$(dirname "$0")/lib.sh"

# the command make would run for OBJ (-B: as if out of date; -n: print only)
cmdline() { make --no-print-directory -C "$ROOT" -n -B BUILD="$BUILD" "$BUILD/$1" 2>/dev/null |
              grep -E -- "-c -o $BUILD/$1|-o $BUILD/$1 " | head -1; }
incs() { grep -oE -- '-I(formats|remote|compiler|reader/bench|reader)( |$)' <<<"$1" | tr -d ' ' | sort -u |
           tr '\n' ' '; }

check_layer() {  # OBJ WANTED-INCLUDES
  local c got
  c=$(cmdline "$1")
  got=$(incs "$c")
  if [ -z "$c" ]; then bad "$1: no compile command found"; return; fi
  if [ "$got" = "$2" ]; then ok "$1 is compiled with: $got"; else bad "$1: includes '$got', expected '$2'"; fi
}

check_layer formats/raw.o "-Iformats "
check_layer formats/png.o "-Iformats "
check_layer remote/cache.o "-Iformats -Iremote "
check_layer compiler/build.o "-Icompiler -Iformats -Iremote "
check_layer reader/shardread.o "-Iformats -Ireader -Iremote "
check_layer reader/bench/train.o "-Icompiler -Iformats -Ireader/bench "
check_layer tests/test_reader.o "-Icompiler -Iformats -Ireader -Ireader/bench -Iremote "
# the writer's Python extension (compiler/python/): formats/, remote/ and compiler/ headers only
check_layer python/_shardwrite.o "-Icompiler -Iformats -Iremote "

# the probe: a formats/ file that includes the compiler's header does not compile with formats/'s
# flags, and a reader file that includes it does not compile with the reader's
flags=$(cmdline formats/raw.o | sed -e 's/ -c -o .*//' -e 's/-MMD -MP//')
printf '#include "build.h"\nint probe_layer(void);\nint probe_layer(void) { return 0; }\n' >"$T/probe.c"
if (cd "$ROOT" && eval "$flags -fsyntax-only $T/probe.c") >"$T/out" 2>&1; then
  bad "a formats/ file could include compiler/build.h"
else
  grep -q "build.h" "$T/out" && ok "formats/ cannot include compiler/build.h (a compile error)" ||
    bad "the probe failed for another reason: $(head -2 "$T/out")"
fi
# remote/ (datasets at URLs) sees formats/ and itself: neither the compiler's nor the reader's
flags=$(cmdline remote/cache.o | sed -e 's/ -c -o .*//' -e 's/-MMD -MP//')
printf '#include "shardread.h"\nint probe_layer(void);\nint probe_layer(void) { return 0; }\n' >"$T/probe3.c"
for p in probe.c:build.h probe3.c:shardread.h; do
  if (cd "$ROOT" && eval "$flags -fsyntax-only $T/${p%%:*}") >"$T/out" 2>&1; then
    bad "a remote/ file could include ${p#*:}"
  else
    grep -q "${p#*:}" "$T/out" && ok "remote/ cannot include ${p#*:} (a compile error)" ||
      bad "the probe failed for another reason: $(head -2 "$T/out")"
  fi
done
flags=$(cmdline reader/shardread.o | sed -e 's/ -c -o .*//' -e 's/-MMD -MP//')
if (cd "$ROOT" && eval "$flags -fsyntax-only $T/probe.c") >"$T/out" 2>&1; then
  bad "a reader/ file could include compiler/build.h"
else
  grep -q "build.h" "$T/out" && ok "reader/ cannot include compiler/build.h (a compile error)" ||
    bad "the probe failed for another reason: $(head -2 "$T/out")"
fi

# shardbench: the public header and the listed internals compile, any other reader header does not
flags=$(cmdline reader/bench/train.o | sed -e 's/ -c -o .*//' -e 's/-MMD -MP//')
make --no-print-directory -C "$ROOT" BUILD="$BUILD" "$BUILD/reader/bench/train.o" >/dev/null 2>&1
cat >"$T/bench_ok.c" <<'EOF'
#include "shardread.h"
#include "ring.h"
#include "sampler.h"
#include "pinned.h"
#include "build.h"
int probe_layer(void);
int probe_layer(void) { return 0; }
EOF
if (cd "$ROOT" && eval "$flags -fsyntax-only $T/bench_ok.c") >"$T/out" 2>&1; then
  ok "reader/bench/ can include shardread.h, the listed reader internals and compiler/build.h"
else
  bad "reader/bench/ cannot include what the Makefile allows: $(head -2 "$T/out")"
fi
printf '#include "transform.h"\nint probe_layer(void);\nint probe_layer(void) { return 0; }\n' >"$T/bench_bad.c"
if (cd "$ROOT" && eval "$flags -fsyntax-only $T/bench_bad.c") >"$T/out" 2>&1; then
  bad "a reader/bench/ file could include reader/transform.h"
else
  grep -q "transform.h" "$T/out" && ok "reader/bench/ cannot include reader/transform.h (a compile error)" ||
    bad "the probe failed for another reason: $(head -2 "$T/out")"
fi

# and it cannot reach the reader: its header does not compile there
flags=$(cmdline python/_shardwrite.o | sed -e 's/ -c -o .*//' -e 's/-MMD -MP//')
printf '#include "shardread.h"\nint probe_layer(void);\nint probe_layer(void) { return 0; }\n' >"$T/probe2.c"
if (cd "$ROOT" && eval "$flags -fsyntax-only $T/probe2.c") >"$T/out" 2>&1; then
  bad "compiler/python/_shardwrite.c could include reader/shardread.h"
else
  grep -q "shardread.h" "$T/out" && ok "compiler/python/ cannot include reader/shardread.h (a compile error)" ||
    bad "the probe failed for another reason: $(head -2 "$T/out")"
fi

finish
