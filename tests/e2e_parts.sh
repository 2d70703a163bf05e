#!/usr/bin/env bash
# End to end: a build in parts (--part I/N, then shardc merge) gives the dataset a one-machine
# build gives: the same sample stream (reader checksum in sequential order), labels, sources,
# counts, statistics, rejects.tsv and inputs.tsv, for every N from 1 to more parts than inputs and
# every storage format; killed parts resume; merge refuses missing, unfinished and inconsistent
# parts, naming them, and leaves no manifest; --part auto reads Slurm and MPI variables.
. "$(dirname "$0")/lib.sh"
SHARDBENCH="$ROOT/$BUILD/bin/shardbench"

"$MKSAMPLE" "$T/src" --classes 3 --per-class 12 --seed 11 --quiet || { echo "mksample failed"; exit 1; }
opts=(--size 40x30 --shard-samples 7 --no-progress -j2)
"$SHARDC" build "$T/src" -o "$T/ref" "${opts[@]}" >/dev/null 2>&1
check "reference build finished with rejects (exit 1)" [ $? -eq 1 ]
ninputs=$(tail -n +2 "$T/ref/inputs.tsv" | wc -l)
nrej=$(json_get "$T/ref/manifest.json" rejects)
check "the inputs hold bad files ($nrej of $ninputs)" [ "$nrej" -ge 6 ]

checksum() {
  "$SHARDBENCH" read "$1" --threads 2 --batch 4 --order seq --epochs 1 --checksum --json 2>/dev/null |
    python3 -c 'import json,sys; print(json.loads(sys.stdin.readline())["checksum"])'
}
ref_sum=$(checksum "$T/ref")
check "the reference has a checksum ($ref_sum)" [ -n "$ref_sum" ]

# every sample's label, source, shape and hash, in order (shardc info --sample)
samples_of() {
  local d=$1 n i
  n=$(json_get "$d/manifest.json" samples)
  for ((i = 0; i < n; i++)); do
    "$SHARDC" info "$d" --sample "$i" --json |
      python3 -c 'import json,sys; s=json.load(sys.stdin); print(s["label"], s["source"], s["path"], s["width"], s["height"], s["hash"])'
  done
}
samples_of "$T/ref" >"$T/ref.samples"

# the manifest without its shard list (counts, classes, geometry, stats to the last digit written,
# fingerprint, build options)
manifest_rest() {
  python3 -c 'import json,sys; m=json.load(open(sys.argv[1])); m.pop("shards"); print(json.dumps(m, sort_keys=True))' "$1/manifest.json"
}

# same_as_ref DIR [REF]: the merged DIR behaves like the one-machine REF
same_as_ref() {
  local d=$1 r=${2:-$T/ref} f
  [ -e "$d/manifest.json" ] || { echo "    no manifest in $d"; return 1; }
  [ "$(checksum "$d")" = "$(checksum "$r")" ] || { echo "    checksum differs"; return 1; }
  [ "$(manifest_rest "$d")" = "$(manifest_rest "$r")" ] || { echo "    manifest differs"; return 1; }
  for f in rejects.tsv inputs.tsv; do cmp -s "$r/$f" "$d/$f" || { echo "    $f differs"; return 1; }; done
  "$SHARDC" verify "$d" >/dev/null 2>&1 || { echo "    verify fails"; return 1; }
  [ "$("$SHARDC" info "$d" | grep -v -e '^dataset' -e '^shards')" = \
    "$("$SHARDC" info "$r" | grep -v -e '^dataset' -e '^shards')" ] || { echo "    info differs"; return 1; }
}

# build_parts OUT N [extra options]: every part, last first (any order works)
build_parts() {
  local out=$1 n=$2 i; shift 2
  for ((i = n - 1; i >= 0; i--)); do
    "$SHARDC" build "$T/src" -o "$out" "${opts[@]}" --part "$i/$n" "$@" >/dev/null 2>"$T/err.part"
    local rc=$?
    [ $rc -le 1 ] || { echo "    part $i/$n: exit $rc"; cat "$T/err.part"; return 1; }
  done
}

# parts + merge == one machine, for every N from 1 to more parts than inputs
for n in 1 2 3 4 5 8 13 $ninputs $((ninputs + 5)); do
  out="$T/p$n"
  build_parts "$out" "$n"
  "$SHARDC" merge "$out" >/dev/null 2>"$T/err"
  rc=$?
  check "merge of $n part(s) exits like the whole build (rejects: 1, got $rc)" [ $rc -eq 1 ]
  check "$n part(s) + merge == one-machine build" same_as_ref "$out"
done
check "labels, sources, shapes and hashes of every sample match (4 parts)" \
  cmp -s "$T/ref.samples" <(samples_of "$T/p4")
check "and with more parts than inputs" cmp -s "$T/ref.samples" <(samples_of "$T/p$((ninputs + 5))")
empty=$(for d in "$T/p$((ninputs + 5))"/parts/*; do json_get "$d/manifest.json" samples; done | grep -c '^0$')
check "more parts than inputs leaves empty parts ($empty)" [ "$empty" -ge 5 ]
withrej=$(for d in "$T/p4"/parts/*; do [ "$(json_get "$d/manifest.json" rejects)" -gt 0 ] && echo x; done | wc -l)
check "the bad files fall in several parts ($withrej of 4)" [ "$withrej" -ge 3 ]

# the manifest names the parts' shards in place, relative to OUT, and copies no pixels
python3 - "$T/p4" <<'PY' || bad "merged manifest names shards outside parts/"
import json, os, sys
d = sys.argv[1]
m = json.load(open(os.path.join(d, "manifest.json")))
for s in m["shards"]:
    f = s["file"]
    assert f.startswith("parts/0000") and "/shard-" in f and ".." not in f and not f.startswith("/"), f
    assert os.path.isfile(os.path.join(d, f)), f
assert not any(n.startswith("shard-") for n in os.listdir(d))
PY
check "a part verifies on its own" "$SHARDC" verify "$T/p4/parts/00002-of-00004"
check "a sample reads the same through shardc cat" \
  cmp -s <("$SHARDC" cat "$T/ref" 17) <("$SHARDC" cat "$T/p4" 17)
check "and replays from its source" "$SHARDC" cat "$T/p4" 17 --replay -o "$T/s17.ppm" 2>/dev/null

# parts built at the same time
out="$T/conc"
pids=()
for i in 0 1 2 3 4 5; do
  "$SHARDC" build "$T/src" -o "$out" "${opts[@]}" --part "$i/6" >/dev/null 2>&1 &
  pids+=($!)
done
codes=
for p in "${pids[@]}"; do wait "$p"; codes+="$? "; done
check "6 parts built concurrently all finish (exits: $codes)" \
  [ "$(tr -d '01 ' <<<"$codes")" = "" ]
"$SHARDC" merge "$out" >/dev/null 2>&1
check "6 parts built concurrently + merge == one-machine build" same_as_ref "$out"

# merging again gives the same files
cp "$T/p4/manifest.json" "$T/m1.json"
"$SHARDC" merge "$T/p4" >/dev/null 2>&1
check "a second merge writes the same manifest" cmp -s "$T/m1.json" "$T/p4/manifest.json"

# --part auto from a Slurm array (--array=1-4) and from Open MPI / PMI variables
for id in 1 2 3 4; do
  env SLURM_ARRAY_TASK_ID=$id SLURM_ARRAY_TASK_MIN=1 SLURM_ARRAY_TASK_MAX=4 SLURM_ARRAY_TASK_COUNT=4 \
    "$SHARDC" build "$T/src" -o "$T/slurm" "${opts[@]}" --part auto >/dev/null 2>&1
done
check "--part auto under a Slurm array makes parts 0..3 of 4" \
  [ "$(ls "$T/slurm/parts" | tr '\n' ' ')" = "00000-of-00004 00001-of-00004 00002-of-00004 00003-of-00004 " ]
"$SHARDC" merge "$T/slurm" >/dev/null 2>&1
check "Slurm array parts + merge == one-machine build" same_as_ref "$T/slurm"
for r in 0 1 2; do
  env OMPI_COMM_WORLD_RANK=$r OMPI_COMM_WORLD_SIZE=3 \
    "$SHARDC" build "$T/src" -o "$T/ompi" "${opts[@]}" --part auto >/dev/null 2>&1
done
"$SHARDC" merge "$T/ompi" >/dev/null 2>&1
check "--part auto from OMPI_COMM_WORLD_RANK/SIZE + merge == one-machine build" same_as_ref "$T/ompi"
expect_exit 2 "--part auto without Slurm or MPI variables" \
  env -u SLURM_ARRAY_TASK_ID -u OMPI_COMM_WORLD_RANK -u OMPI_COMM_WORLD_SIZE -u PMI_RANK -u PMI_SIZE \
  -u SLURM_PROCID -u SLURM_NTASKS -u MV2_COMM_WORLD_RANK -u MV2_COMM_WORLD_SIZE \
  "$SHARDC" build "$T/src" -o "$T/noenv" "${opts[@]}" --part auto
check "it says what it looked for" grep -q "SLURM_ARRAY_TASK_ID" "$T/err"
expect_exit 2 "--jpeg-fraction with --part (picked by index within the part)" \
    "$SHARDC" build "$T/src" -o "$T/x" "${opts[@]}" --part 0/2 --jpeg-fraction 0.5
expect_exit 2 "--part 4/4 (parts count from 0)" "$SHARDC" build "$T/src" -o "$T/x" "${opts[@]}" --part 4/4
expect_exit 2 "--part for a list array --array=1,3,7" env SLURM_ARRAY_TASK_ID=3 SLURM_ARRAY_TASK_MIN=1 \
  SLURM_ARRAY_TASK_MAX=7 SLURM_ARRAY_TASK_COUNT=3 "$SHARDC" build "$T/src" -o "$T/x" "${opts[@]}" --part auto

# a part killed mid-way: merge refuses it by name; --resume finishes it; the merge is exact
out="$T/kill"
build_parts "$out" 4
rm -rf "$out/parts/00002-of-00004"
crash 8 "$SHARDC" build "$T/src" -o "$out" "${opts[@]}" --part 2/4
check "part 2/4 was killed (exit $?)" [ ! -e "$out/parts/00002-of-00004/manifest.json" ]
expect_exit 2 "merge with an unfinished part" "$SHARDC" merge "$out"
check "it names the unfinished part" grep -q "part 00002-of-00004 is unfinished" "$T/err"
check "and writes no manifest" [ ! -e "$out/manifest.json" ]
"$SHARDC" build "$T/src" -o "$out" "${opts[@]}" --part 2/4 --resume >/dev/null 2>"$T/err"
check "the resumed part kept its finished shard" grep -q "kept 1 finished shard" "$T/err"
"$SHARDC" merge "$out" >/dev/null 2>&1
check "killed + resumed part + merge == one-machine build" same_as_ref "$out"
expect_exit 1 "resuming a finished part does nothing" \
  "$SHARDC" build "$T/src" -o "$out" "${opts[@]}" --part 2/4 --resume
check "it says so" grep -q "nothing to do" "$T/err"
check "and the merged manifest stays" [ -e "$out/manifest.json" ]

# a missing part
out="$T/miss"
build_parts "$out" 4
rm -rf "$out/parts/00001-of-00004" "$out/parts/00003-of-00004"
expect_exit 2 "merge with missing parts" "$SHARDC" merge "$out"
check "it names both missing parts" \
  grep -q "part 00001-of-00004 is missing; part 00003-of-00004 is missing" "$T/err"
check "no manifest" [ ! -e "$out/manifest.json" ]
expect_exit 2 "merge of a folder without parts" "$SHARDC" merge "$T/src"

# a part built with other options
out="$T/opt"
build_parts "$out" 4
"$SHARDC" merge "$out" >/dev/null 2>&1
expect_exit 2 "rebuilding a part of a merged dataset needs --force" \
  "$SHARDC" build "$T/src" -o "$out" --size 40x32 --shard-samples 7 --no-progress --part 1/4
"$SHARDC" build "$T/src" -o "$out" --size 40x32 --shard-samples 7 --no-progress --part 1/4 --force >/dev/null 2>&1
check "a part rebuilt with --force removes the merged manifest" [ ! -e "$out/manifest.json" ]
expect_exit 2 "merge with a part of other options" "$SHARDC" merge "$out"
check "it names the part built with other options" \
  grep -q "part 00001-of-00004 was built with other options" "$T/err"
check "no manifest" [ ! -e "$out/manifest.json" ]
"$SHARDC" build "$T/src" -o "$out" "${opts[@]}" --format hdf5 --part 3/4 --force >/dev/null 2>&1
"$SHARDC" build "$T/src" -o "$out" "${opts[@]}" --part 1/4 --force >/dev/null 2>&1
expect_exit 2 "merge with a part of another format" "$SHARDC" merge "$out"
check "it names the part of another format" grep -q "part 00003-of-00004 was built with other options.*hdf5" "$T/err"

# a part from another input list
out="$T/list"
build_parts "$out" 4
cp -r "$T/src" "$T/src2"
cp "$T/src2/circle/00000.jpg" "$T/src2/circle/00000b.jpg"
"$SHARDC" build "$T/src2" -o "$out" "${opts[@]}" --part 0/4 --force >/dev/null 2>&1
expect_exit 2 "merge with a part from another input list" "$SHARDC" merge "$out"
check "it names the part from another input list" \
  grep -q "part 00000-of-00004 was built from another input list" "$T/err"
check "no manifest" [ ! -e "$out/manifest.json" ]

# parts of two different splits in one folder
out="$T/split"
build_parts "$out" 2
"$SHARDC" build "$T/src" -o "$out" "${opts[@]}" --part 0/3 >/dev/null 2>&1
expect_exit 2 "merge with parts of 2 and of 3" "$SHARDC" merge "$out"
check "it names both splits" grep -q "parts of different splits: 0000.-of-0000. and 0000.-of-0000." "$T/err"

# a damaged or lost shard of a part (merge opens every shard; payload hashes are verify's job)
out="$T/dmg"
build_parts "$out" 3
printf 'Z' | dd of="$out/parts/00001-of-00003/shard-00000.raw" bs=1 seek=100 conv=notrunc status=none
expect_exit 2 "merge with a damaged shard header" "$SHARDC" merge "$out"
check "it names the shard" grep -q "part 00001-of-00003: .*parts/00001-of-00003/shard-00000.raw" "$T/err"
rm "$out/parts/00001-of-00003/shard-00000.raw"
expect_exit 2 "merge with a lost shard" "$SHARDC" merge "$out"
check "it names the shard" grep -q "part 00001-of-00003: .*parts/00001-of-00003/shard-00000.raw" "$T/err"

# a whole build never takes a folder of parts for its own, and --force replaces them
expect_exit 2 "a whole build into a folder of parts" "$SHARDC" build "$T/src" -o "$T/miss" "${opts[@]}"
# the lock file the refused whole build leaves in OUT does not bar the parts (a task run again)
"$SHARDC" build "$T/src" -o "$T/miss" "${opts[@]}" --part 1/4 >/dev/null 2>"$T/err"
check "a part still builds into it" [ -e "$T/miss/parts/00001-of-00004/manifest.json" ]
"$SHARDC" build "$T/src" -o "$T/miss" "${opts[@]}" --resume >/dev/null 2>&1
check "a whole build --resume keeps the parts" [ -d "$T/miss/parts/00000-of-00004" ]

# scripts/slurm: the array script and the merge job, under a stand-in for sbatch that runs each
# array task in turn with the variables Slurm sets (and the merge after them)
mkdir -p "$T/bin"
cat >"$T/bin/sbatch" <<'SB'
#!/usr/bin/env bash
array= exports= dep=
while [ $# -gt 0 ]; do
  case "$1" in
    --parsable) ;;
    --array=*) array=${1#--array=} ;;
    --export=*) exports=${1#--export=} ;;
    --dependency=*) dep=${1#--dependency=} ;;
    -*) echo "sbatch stand-in: unknown option $1" >&2; exit 2 ;;
    *) break ;;
  esac
  shift
done
script=$1; shift
extra=()
IFS=, read -ra kv <<<"$exports"
for e in "${kv[@]}"; do [ "$e" = ALL ] || extra+=("$e"); done
echo "$dep" >>"$SBATCH_LOG"
if [ -n "$array" ]; then
  lo=${array%-*} hi=${array#*-}
  for ((id = lo; id <= hi; id++)); do
    env "${extra[@]}" SLURM_ARRAY_JOB_ID=42 SLURM_ARRAY_TASK_ID=$id SLURM_ARRAY_TASK_MIN=$lo \
      SLURM_ARRAY_TASK_MAX=$hi SLURM_ARRAY_TASK_COUNT=$((hi - lo + 1)) SLURM_CPUS_PER_TASK=2 \
      bash "$script" "$@" >>"$SBATCH_LOG" 2>&1 || echo "task $id: exit $?" >>"$SBATCH_LOG"
  done
  echo 42
else
  env "${extra[@]}" bash "$script" "$@" >>"$SBATCH_LOG" 2>&1 || echo "job: exit $?" >>"$SBATCH_LOG"
  echo 43
fi
SB
chmod +x "$T/bin/sbatch"
export SBATCH_LOG="$T/sbatch.log" SHARDC
PATH="$T/bin:$PATH" bash "$ROOT/scripts/slurm/submit.sh" 5 "$T/src" "$T/slurm-sub" --size 40x30 --shard-samples 7 >"$T/out" 2>&1
check "scripts/slurm/submit.sh submits the array and the merge" grep -q "parts: job array 42 (0-4); merge: job 43" "$T/out"
check "the merge waits for the array (afterok:42)" grep -qx "afterok:42" "$SBATCH_LOG"
check "no task and no merge failed (rejects are not failures for afterok)" [ "$(grep -c 'exit' "$SBATCH_LOG")" -eq 0 ]
check "Slurm scripts: 5 parts + merge == one-machine build" same_as_ref "$T/slurm-sub"
# a task killed mid-way fails the array (no merge); run again on its own (--array=3 with
# PARTS=5) it is part 3 of 5 and finishes the part
rm -rf "$T/slurm-sub/parts/00003-of-00005" "$T/slurm-sub/manifest.json"
PATH="$T/bin:$PATH" sbatch --array=3-3 --export=ALL,PARTS=5,SHARDC_CRASH_AFTER=5 \
  "$ROOT/scripts/slurm/build-parts.sbatch" "$T/src" "$T/slurm-sub" --size 40x30 --shard-samples 7 >/dev/null
check "a killed task fails" grep -q "task 3: exit 137" "$SBATCH_LOG"
check "and leaves its part unfinished" [ ! -e "$T/slurm-sub/parts/00003-of-00005/manifest.json" ]
PATH="$T/bin:$PATH" sbatch --array=3-3 --export=ALL,PARTS=5 "$ROOT/scripts/slurm/build-parts.sbatch" \
  "$T/src" "$T/slurm-sub" --size 40x30 --shard-samples 7 >/dev/null
check "run again alone, the task finishes its part" [ -e "$T/slurm-sub/parts/00003-of-00005/manifest.json" ]
check "and nothing else" [ "$(ls "$T/slurm-sub/parts" | wc -l)" -eq 5 ]
PATH="$T/bin:$PATH" sbatch --dependency=afterok:42 "$ROOT/scripts/slurm/merge.sbatch" "$T/slurm-sub" >/dev/null
check "merged again == one-machine build" same_as_ref "$T/slurm-sub"

# every storage format that writes shards is split and merged the same way
for f in hdf5 lmdb png0 bmp jpeg; do
  "$SHARDC" build "$T/src" -o "$T/ref-$f" "${opts[@]}" --format "$f" >/dev/null 2>&1
  build_parts "$T/fmt-$f" 3 --format "$f"
  "$SHARDC" merge "$T/fmt-$f" >/dev/null 2>&1
  check "$f: 3 parts + merge == one-machine build" same_as_ref "$T/fmt-$f" "$T/ref-$f"
done
"$SHARDC" build "$T/src" -o "$T/ref-zstd" "${opts[@]}" --compress zstd >/dev/null 2>&1
build_parts "$T/fmt-zstd" 3 --compress zstd
"$SHARDC" merge "$T/fmt-zstd" >/dev/null 2>&1
check "raw --compress zstd: 3 parts + merge == one-machine build" same_as_ref "$T/fmt-zstd" "$T/ref-zstd"
finish
