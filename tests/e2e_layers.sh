#!/usr/bin/env bash
# End to end: the layering the build enforces. Each folder is compiled with the include paths of
# what it may use (Makefile, INC_*): pixels/ (geometry, resampler, warps, colour) sees itself and
# two base headers of formats/ (fmt.h, image.h), none of its containers; formats/ sees itself and
# pixels/; the compiler and reader
# libraries see formats/, remote/ (datasets at URLs, which sees formats/ alone) and themselves,
# never each other's internals (both also include/, where their public headers are); the
# programs (programs/, programs/shardbench/) and the Python extensions see the public headers
# (include/), their own folder and, until the libraries offer what they need publicly, the
# internals on their INTERNAL_ list, which scripts/check-includes.sh enforces before each of their
# compiles; the tests and the test tools see everything. So a wrong-way #include stops the build,
# shown here on probe files run through the very commands make runs.
. "$(dirname "$0")/lib.sh"

# the commands make would run for OBJ (-B: as if out of date; -n: print only)
cmds() { make --no-print-directory -C "$ROOT" -n -B BUILD="$BUILD" "$BUILD/$1" 2>/dev/null; }
cmdline() { cmds "$1" | grep -E -- "-c -o $BUILD/$1|-o $BUILD/$1 " | head -1; }
# the project's include paths of a command line (the build folder written BUILD; absolute ones,
# Python's and the packages', left out)
incs() { grep -oE -- '-I[^ ]+' <<<"$1" | sed "s|^-I$BUILD/|-IBUILD/|" | grep -v '^-I/' | sort -u |
           tr '\n' ' '; }

check_layer() {  # OBJ WANTED-INCLUDES
  local c got
  c=$(cmdline "$1")
  got=$(incs "$c")
  if [ -z "$c" ]; then bad "$1: no compile command found"; return; fi
  if [ "$got" = "$2" ]; then ok "$1 is compiled with: $got"; else bad "$1: includes '$got', expected '$2'"; fi
}

check_layer pixels/geometry.o "-IBUILD/include/pixbase -Ipixels "
check_layer pixels/resample_simd.o "-IBUILD/include/pixbase -Ipixels "
check_layer formats/raw.o "-Iformats -Ipixels "
check_layer formats/png.o "-Iformats -Ipixels "
check_layer remote/cache.o "-Iformats -Ipixels -Iremote "
check_layer compiler/build.o "-Icompiler -Iformats -Iinclude -Ipixels -Iremote "
check_layer reader/shardread.o "-Iformats -Iinclude -Ipixels -Ireader -Iremote "
check_layer programs/shardc.o "-Iinclude -Iprograms "
check_layer programs/shardbench/train.o "-IBUILD/include/bench -Iinclude -Iprograms/shardbench "
check_layer tests/test_reader.o "-Icompiler -Iformats -Iinclude -Ipixels -Iprograms -Iprograms/shardbench -Ireader -Iremote -Itests/tools "
check_layer tests/tools/mksample.o "-Icompiler -Iformats -Iinclude -Ipixels -Iprograms -Iprograms/shardbench -Ireader -Iremote -Itests/tools "
# the Python extensions: the reader's sees the public headers alone; the writer's is a program
check_layer python/_shardread.o "-Iinclude "
# the writer's: the public headers and its folder (its items go through shardc.h's streamed build)
check_layer python/_shardwrite.o "-Icompiler/python -Iinclude "

probe() {  # FILE HEADER...: a C file that includes each HEADER
  { for h in "${@:2}"; do printf '#include "%s"\n' "$h"; done
    printf 'int probe_layer(void);\nint probe_layer(void) { return 0; }\n'; } >"$1"
}
compiles() {  # OBJ FILE: FILE compiles with OBJ's flags
  local flags
  flags=$(cmdline "$1" | sed -e 's/ -c -o .*//' -e 's/-MMD -MP//')
  (cd "$ROOT" && eval "$flags -fsyntax-only $2") >"$T/out" 2>&1
}

# refused OBJ FILE PATTERN WHO WHAT: FILE does not compile with OBJ's flags, the error naming
# PATTERN ("WHO cannot include WHAT"); a FILE that compiles fails ("a WHO file could include WHAT")
refused() {
  if compiles "$1" "$2"; then
    bad "a $4 file could include $5"
  else
    grep -q "$3" "$T/out" && ok "$4 cannot include $5 (a compile error)" ||
      bad "the probe failed for another reason: $(head -2 "$T/out")"
  fi
}

# a formats/ file that includes the compiler's header does not compile with formats/'s flags, and
# a reader file that includes it does not compile with the reader's
probe "$T/probe.c" build.h
for obj in formats/raw.o reader/shardread.o; do
  refused $obj "$T/probe.c" build.h "${obj%%/*}/" compiler/build.h
done

# pixels/ sees itself and formats/'s fmt.h and image.h: no container (raw.h, backend.h, the
# pre-augmentation's augment.h), nor the compiler's or the reader's headers
probe "$T/pix_ok.c" fmt.h image.h geometry.h resample.h warp.h hsv.h
compiles pixels/geometry.o "$T/pix_ok.c" && ok "pixels/ can include fmt.h, image.h and its own headers" ||
  bad "pixels/ cannot include its own headers and formats/'s base: $(head -2 "$T/out")"
for h in raw.h backend.h augment.h build.h shardread.h; do
  probe "$T/pix_$h.c" "$h"
  refused pixels/geometry.o "$T/pix_$h.c" "$h" pixels/ "$h"
done
# and formats/ sees pixels/ (the pre-augmentation and the codecs use it)
probe "$T/fmt_pix.c" geometry.h warp.h
compiles formats/raw.o "$T/fmt_pix.c" && ok "formats/ can include pixels/'s headers" ||
  bad "formats/ cannot include pixels/'s headers: $(head -2 "$T/out")"

# remote/ (datasets at URLs) sees formats/ and itself: neither the compiler's nor the reader's
probe "$T/probe3.c" shardread.h
for p in probe.c:build.h probe3.c:shardread.h; do
  refused remote/cache.o "$T/${p%%:*}" "${p#*:}" remote/ "${p#*:}"
done

# the reader's Python extension: the public header compiles, an internal one of reader/ does not
probe "$T/py_ok.c" shardread.h
probe "$T/py_bad.c" reader.h
compiles python/_shardread.o "$T/py_ok.c" && ok "reader/python/ can include shardread.h" ||
  bad "reader/python/ cannot include shardread.h: $(head -2 "$T/out")"
if compiles python/_shardread.o "$T/py_bad.c"; then
  bad "reader/python/ could include reader/reader.h"
else
  grep -q "reader.h" "$T/out" && ok "reader/python/ cannot include reader/reader.h (a compile error)" ||
    bad "the probe failed for another reason: $(head -2 "$T/out")"
fi

# the programs: the include check make runs before compiling each of their files, run on probes
# in place of the file (its own folder is then the probe's)
check_cmd() {  # OBJ: make's check-includes command for OBJ, its file replaced by FILE
  cmds "$1" | grep -m1 'scripts/check-includes.sh'
}
run_check() {  # OBJ FILE: the check of OBJ on FILE
  local c
  c=$(check_cmd "$1")
  [ -n "$c" ] || { echo "no check-includes command for $1" >"$T/out"; return 2; }
  read -r -a w <<<"$c"
  w[2]=$2            # scripts/check-includes.sh PROGRAM FILE HEADER...
  (cd "$ROOT" && "${w[@]}") >"$T/out" 2>&1
}
refused() {  # OBJ HEADER WHAT: a file of OBJ's program including HEADER stops the build
  probe "$T/prog_$2.c" "$2"
  if run_check "$1" "$T/prog_$2.c"; then
    bad "$3 could include $2"
  elif grep -q "prog_$2.c:1: #include \"$2\": not a public header" "$T/out"; then
    ok "$3 cannot include $2: $(cut -c1-150 "$T/out" | head -1)"
  else
    bad "the check of $3 failed for another reason: $(head -2 "$T/out")"
  fi
}
probe "$T/prog_ok.c" shardread.h cuda_feed.h shardc.h
if run_check programs/shardc.o "$T/prog_ok.c"; then
  ok "programs/ may include the public headers"
else
  bad "programs/ is refused what the Makefile allows: $(head -2 "$T/out")"
fi
refused programs/shardc.o stream.h "programs/ (shardc)"
# a build, its parts and their merge go through shardc.h: the internals behind it are refused
refused programs/shardc.o build.h "programs/ (shardc)"
refused programs/shardc.o part.h "programs/ (shardc)"
refused programs/shardc.o merge.h "programs/ (shardc)"
refused programs/shardc.o util.h "programs/ (shardc)"
refused programs/shardc.o reader.h "programs/ (shardc)"
# info, verify and cat go through shardread.h and shardc.h (INTERNAL_shardc is empty): the
# formats' and the compiler's headers they once reached for are refused
for h in remote.h json.h dataset.h augment.h backend.h raw.h inspect.h; do
  refused programs/shardc.o $h "programs/ (shardc)"
done
refused programs/shardbench/train.o transform.h "programs/shardbench/"
refused programs/shardbench/train.o resume.h "programs/shardbench/"
# the reader's ring, sampler and pinned buffers: the folder feed has its own queue, the order and
# the buffers are public (shr_epoch_order, shr_host_alloc)
refused programs/shardbench/train.o ring.h "programs/shardbench/"
refused programs/shardbench/train.o sampler.h "programs/shardbench/"
refused programs/shardbench/train.o pinned.h "programs/shardbench/"
# nor the compiler's build and parsers, the formats' base and JSON writer: compare builds through
# shardc.h (shc_build_formats, shc_parse_wxh), messages are shr_msg, its JSON quoting its own,
# a dataset's size and format come from shr_manifest_peek
refused programs/shardbench/train.o build.h "programs/shardbench/"
refused programs/shardbench/train.o util.h "programs/shardbench/"
refused programs/shardbench/train.o fmt.h "programs/shardbench/"
refused programs/shardbench/train.o json.h "programs/shardbench/"
refused programs/shardbench/train.o manifest.h "programs/shardbench/"
# the folder baselines list and decode their inputs through shardc.h (shc_render_file)
refused programs/shardbench/train.o render.h "programs/shardbench/"
refused programs/shardbench/train.o inputs.h "programs/shardbench/"
refused programs/shardbench/train.o geometry.h "programs/shardbench/"
refused programs/shardbench/train.o image.h "programs/shardbench/"
# the memcpy baseline maps samples through shardread.h (shr_dataset_pixels)
refused programs/shardbench/train.o dataset.h "programs/shardbench/"
refused python/_shardwrite.o ring.h "compiler/python/ (_shardwrite)"
# the writer's items, their fields schema, targets and categories go through shardc.h
# (INTERNAL_shardwrite is empty): the compiler's stream and the formats' headers are refused by
# the check, and are not even on its include path
for h in stream.h target.h fields.h manifest.h build.h; do
  refused python/_shardwrite.o $h "compiler/python/ (_shardwrite)"
done
probe "$T/pyw_ok.c" shardc.h
compiles python/_shardwrite.o "$T/pyw_ok.c" && ok "compiler/python/ can include shardc.h" ||
  bad "compiler/python/ cannot include shardc.h: $(head -2 "$T/out")"
probe "$T/pyw_stream.c" stream.h
if compiles python/_shardwrite.o "$T/pyw_stream.c"; then
  bad "compiler/python/ could include compiler/stream.h"
else
  grep -q "stream.h" "$T/out" && ok "compiler/python/ cannot include compiler/stream.h (a compile error)" ||
    bad "the probe failed for another reason: $(head -2 "$T/out")"
fi
# an own header of the folder is checked too: an internal include inside it is found
mkdir -p "$T/own"
probe "$T/own/own.h" journal.h
probe "$T/own/main.c" own.h
if run_check programs/shardc.o "$T/own/main.c"; then
  bad "an own header of a program could include compiler/journal.h"
else
  grep -q "own.h:1: #include \"journal.h\"" "$T/out" &&
    ok "an own header that includes compiler/journal.h is refused, named with its line" ||
    bad "the own-header check failed for another reason: $(head -2 "$T/out")"
fi

# and through make itself: a program file with a bad include stops the build of that object
# (a copy of shardc.c with one line more, built in place of the real one by a rule of this test's
# own Makefile that includes the project's)
sed '1a #include "stream.h"' "$ROOT/programs/shardc.c" >"$T/shardc_bad.c"
cp "$ROOT/programs/cli.h" "$T/"
cat >"$T/Makefile" <<EOF
include $ROOT/Makefile
probe: \$(BUILD)/probe/shardc_bad.o
\$(BUILD)/probe/shardc_bad.o: $T/shardc_bad.c
	\$(call check_includes,shardc)
	\$(CC) \$(CPPFLAGS) \$(INC_shardc) \$(filter-out -MMD -MP,\$(CFLAGS)) -fsyntax-only \$<
EOF
if (cd "$ROOT" && make --no-print-directory -f "$T/Makefile" BUILD="$T/b" probe) >"$T/out" 2>&1; then
  bad "make built a copy of programs/shardc.c that includes compiler/stream.h"
elif grep -q 'shardc_bad.c:2: #include "stream.h": not a public header' "$T/out"; then
  ok "make refuses programs/shardc.c with #include \"stream.h\" added, naming file and line"
else
  bad "make failed on the bad copy for another reason: $(grep -v '^make' "$T/out" | head -2)"
fi

finish
