#!/usr/bin/env bash
# Throughput of two builds of shardc, base and head (scripts/benchcmp-pack.sh fills DIR/base/ and
# DIR/head/), on the same data in the same run, as ratios of medians:
#
#   scripts/benchcmp-run.sh DIR OUTDIR   (SMALL=1: a small dataset and 2 rounds, to check it works)
#
# Data: photo-like JPEGs from base's shardc-mksample --photo (quality 90, every image its own
# size, long side 360..640, aspect 1..1.5, a third portrait), 16 classes x PER (default 300 per
# class: 4,800 images), generated once by parallel mksample runs with different seeds.
# Measurements, each images/s as the program reports it (shardc build --json images_per_s;
# shardbench read --json images_per_s, the steady state, epochs 2..E):
#   build j1 / jN        shardc build --short-side 256 --crop 224x224 (torchvision's ImageNet
#                        eval geometry, CenterCrop(224)(Resize(256)(img))) into raw shards,
#                        -j1 and -j$CORES
#   read seq t1 / tN     shardbench read of that dataset, --order seq, 1 and $CORES threads
#   read rrc t1 / tN     the same, --order random --rrc --flip (RandomResizedCrop(224) + flip)
#   read rrc+cj t1 / tN  ... --color-jitter 0.2,0.2,0.2,0.1, only where base has the option
# Every side reads the dataset it built itself (built once, before the rounds). ROUNDS rounds
# (default 5); in each, every measurement runs base and head back to back, base first in odd
# rounds and head first in even ones, so drift in the machine hits both alike. A round is not
# started once TIME_BUDGET seconds (default 300) have passed; at least 2 are always run.
# Also checked once: whether the two builds wrote identical shard files, and whether the two
# readers deliver identical batches (shardbench --checksum, seq and rrc+flip).
# Output: the table on stdout and in OUTDIR/benchcmp.txt; every run in OUTDIR/runs.tsv and
# OUTDIR/raw.jsonl. Work files go to /dev/shm when it has room (no disk: shardc fsyncs its
# shards), else $TMPDIR; BENCH_TMP=dir chooses. CORES=n overrides nproc.
set -euo pipefail
t_start=$(date +%s)
here=$(cd "${1:?usage: benchcmp-run.sh DIR OUTDIR}" && pwd)
out=${2:?usage: benchcmp-run.sh DIR OUTDIR}
mkdir -p "$out"
out=$(cd "$out" && pwd)
SMALL=${SMALL:-0}
if [ "$SMALL" = 1 ]; then
  PER=${PER:-25}; ROUNDS=${ROUNDS:-2}
else
  PER=${PER:-300}; ROUNDS=${ROUNDS:-5}
fi
CLASSES=16
N=$((CLASSES * PER))
CORES=${CORES:-$(nproc)}
TIME_BUDGET=${TIME_BUDGET:-300}
PY=${PYTHON:-python3}
# epochs per read run: measured epochs take ~0.5..1 s each run on 16 cores at N=4,800
E_SEQ1=${E_SEQ1:-8}; E_SEQN=${E_SEQN:-30}; E_RRC1=${E_RRC1:-3}; E_RRCN=${E_RRCN:-20}
E_CJ1=${E_CJ1:-2}; E_CJN=${E_CJN:-10}
[ "$SMALL" = 1 ] && { E_SEQ1=4; E_SEQN=6; E_RRC1=3; E_RRCN=4; E_CJ1=2; E_CJN=3; }

log() { echo "benchcmp: $*" >&2; }
elapsed() { echo $(( $(date +%s) - t_start )); }

# work dir: /dev/shm if it has room for the photos, two datasets and one build in flight
need=$(( N * (70000 + 3 * 151000) + (256 << 20) ))
tmpbase=${BENCH_TMP:-}
if [ -z "$tmpbase" ]; then
  tmpbase=${TMPDIR:-/tmp}
  if [ -d /dev/shm ] && [ -w /dev/shm ]; then
    free=$(df -P -B1 /dev/shm | awk 'NR==2 {print $4}')
    [ "${free:-0}" -gt "$need" ] && tmpbase=/dev/shm
  fi
fi
work=$(mktemp -d "$tmpbase/benchcmp.XXXXXX")
cleanup() { rm -rf "$work"; }
trap cleanup EXIT
trap 'exit 130' INT TERM

# libraries: lib/ as shipped, the xz-compressed ones unpacked into the work dir
mkdir -p "$work/lib"
for z in "$here"/lib/*.xz; do
  [ -e "$z" ] || continue
  dst=$work/lib/$(basename "$z" .xz)
  if command -v xz >/dev/null; then
    xz -dc "$z" > "$dst"
  else
    "$PY" -c 'import lzma, shutil, sys; shutil.copyfileobj(lzma.open(sys.argv[1]), open(sys.argv[2], "wb"))' "$z" "$dst"
  fi
done
# EXTRA_LIBS: more folders to search (e.g. an unpacked scripts/gpu-bundle.sh lib/ standing in
# for lib/ when the folder travels without it)
LIBS="$work/lib:$here/lib${EXTRA_LIBS:+:$EXTRA_LIBS}"
# only our programs get the bundled libraries (python3 must keep the system's own)
prog() { local side=$1 p=$2; shift 2
  env LD_LIBRARY_PATH="$LIBS${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" "$here/$side/bin/$p" "$@"; }

for side in base head; do
  for p in shardc shardc-mksample shardbench; do
    if ! prog "$side" "$p" --help >/dev/null 2>&1; then
      log "$side/bin/$p does not start here:"
      env LD_LIBRARY_PATH="$LIBS" ldd "$here/$side/bin/$p" | grep -v '=> /' >&2 || true
      prog "$side" "$p" --help 2>&1 | head -3 >&2 || true
      exit 1
    fi
  done
done
cj=0
prog base shardbench read --help 2>&1 | grep -q -- '--color-jitter' && cj=1

{
  echo "machine: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//'), nproc $(nproc), CORES=$CORES"
  fs=$(stat -f -c %T "$work")
  echo "load average at start: $(cut -d' ' -f1-3 /proc/loadavg); work dir: $work ($fs)"
  [ "$fs" = tmpfs ] || echo "note: the work dir is not tmpfs: shardc fsyncs its shards, so the builds include disk writes"
  [ -f "$here/BUILDINFO.txt" ] && sed -n '1,2p' "$here/BUILDINFO.txt"
} > "$out/context.txt"
cat "$out/context.txt" >&2

# the photos, once: J mksample processes with seeds 1..J, merged into one class tree
log "generating $N photo-like JPEGs ($CLASSES classes x $PER) ..."
J=$(( CORES < 16 ? CORES : 16 ))
[ "$J" -lt 1 ] && J=1
pids=()
for i in $(seq "$J"); do
  per=$(( PER / J + (i <= PER % J ? 1 : 0) ))
  [ "$per" -gt 0 ] || continue
  timeout 300 env LD_LIBRARY_PATH="$LIBS" "$here/base/bin/shardc-mksample" "$work/gen$i" --photo \
    --classes "$CLASSES" --per-class "$per" --seed "$i" --quiet &
  pids+=($!)
done
for p in "${pids[@]}"; do wait "$p" || { log "shardc-mksample failed"; exit 1; }; done
mkdir -p "$work/photos"
for g in "$work"/gen*; do
  i=${g##*/gen}
  for c in "$g"/*/; do
    c=$(basename "$c"); mkdir -p "$work/photos/$c"
    for f in "$g/$c"/*; do mv "$f" "$work/photos/$c/s${i}_$(basename "$f")"; done
  done
  rm -rf "$g"
done
nfiles=$(find "$work/photos" -type f | wc -l)
nsizes=$(find "$work/photos" -type f -name '*.jpg' | "$PY" -c '
import struct, sys
sizes = set()
for path in sys.stdin.read().split("\n"):
    if not path:
        continue
    d = open(path, "rb").read(65536)
    i = 2
    while i + 9 < len(d):
        m, n = d[i + 1], struct.unpack(">H", d[i + 2:i + 4])[0]
        if m in (0xC0, 0xC1, 0xC2):
            sizes.add(struct.unpack(">HH", d[i + 5:i + 9]))
            break
        i += 2 + n
print(len(sizes))')
log "$nfiles files, $(du -sh "$work/photos" | cut -f1), $nsizes distinct sizes ($(elapsed) s)"
[ "$nfiles" -eq "$N" ] || { log "expected $N files"; exit 1; }

GEOM=(--short-side 256 --crop 224x224)
build() { # side dir threads -> images/s on stdout; the JSON line appended to raw.jsonl
  local side=$1 dir=$2 j=$3 line
  rm -rf "$dir"
  line=$(timeout 300 env LD_LIBRARY_PATH="$LIBS" "$here/$side/bin/shardc" build "$work/photos" \
           -o "$dir" "${GEOM[@]}" -j "$j" --no-progress --json 2>"$work/err") ||
    { log "$side shardc build -j$j failed: $(tail -3 "$work/err")"; exit 1; }
  echo "{\"side\": \"$side\", \"cmd\": \"build -j$j\", \"out\": $line}" >> "$out/raw.jsonl"
  sed 's/.*"images_per_s": \([0-9.e+]*\).*/\1/' <<<"$line"
}
read_ds() { # side threads epochs [shardbench options] -> images/s
  local side=$1 t=$2 e=$3 line; shift 3
  line=$(timeout 120 env LD_LIBRARY_PATH="$LIBS" "$here/$side/bin/shardbench" read "$work/ds-$side" \
           --threads "$t" --epochs "$e" --size 224x224 --json "$@" 2>"$work/err" | head -1) ||
    { log "$side shardbench read $* failed: $(tail -3 "$work/err")"; exit 1; }
  echo "{\"side\": \"$side\", \"cmd\": \"read -j$t -e$e $*\", \"out\": $line}" >> "$out/raw.jsonl"
  sed 's/.*"images_per_s": \([0-9.e+]*\).*/\1/' <<<"$line"
}

: > "$out/raw.jsonl"
log "building each side's dataset for the reads ..."
for side in base head; do build "$side" "$work/ds-$side" "$CORES" >/dev/null; done
same_shards=yes
for f in "$work/ds-base"/shard-*; do
  cmp -s "$f" "$work/ds-head/$(basename "$f")" || same_shards=no
done
[ "$(ls "$work/ds-base" | grep -c '^shard-')" = "$(ls "$work/ds-head" | grep -c '^shard-')" ] || same_shards=no
checksum() { # side [options] -> the batches' digest
  timeout 120 env LD_LIBRARY_PATH="$LIBS" "$here/$1/bin/shardbench" read "$work/ds-$1" --threads "$CORES" \
    --epochs 1 --size 224x224 --checksum --json "${@:2}" 2>/dev/null | head -1 |
    sed -n 's/.*"checksum": "\{0,1\}\([0-9a-fA-Fx]*\).*/\1/p'
}
ck_seq=differ; ck_rrc=differ
[ -n "$(checksum base --order seq)" ] && [ "$(checksum base --order seq)" = "$(checksum head --order seq)" ] && ck_seq=equal
[ -n "$(checksum base --order random --rrc --flip)" ] &&
  [ "$(checksum base --order random --rrc --flip)" = "$(checksum head --order random --rrc --flip)" ] && ck_rrc=equal
log "shards identical: $same_shards; delivered batches: seq $ck_seq, rrc+flip $ck_rrc ($(elapsed) s)"

# measurement name | how
measure() { # side name
  case $2 in
    "build j1")        build "$1" "$work/out" 1 ;;
    "build jN")        build "$1" "$work/out" "$CORES" ;;
    "read seq t1")     read_ds "$1" 1 "$E_SEQ1" --order seq ;;
    "read seq tN")     read_ds "$1" "$CORES" "$E_SEQN" --order seq ;;
    "read rrc t1")     read_ds "$1" 1 "$E_RRC1" --order random --rrc --flip ;;
    "read rrc tN")     read_ds "$1" "$CORES" "$E_RRCN" --order random --rrc --flip ;;
    "read rrc+cj t1")  read_ds "$1" 1 "$E_CJ1" --order random --rrc --flip --color-jitter 0.2,0.2,0.2,0.1 ;;
    "read rrc+cj tN")  read_ds "$1" "$CORES" "$E_CJN" --order random --rrc --flip --color-jitter 0.2,0.2,0.2,0.1 ;;
  esac
}
names=("build j1" "build jN" "read seq t1" "read seq tN" "read rrc t1" "read rrc tN")
[ "$cj" = 1 ] && names+=("read rrc+cj t1" "read rrc+cj tN")
# MEAS="read rrc t1,read seq t1": only those measurements
if [ -n "${MEAS:-}" ]; then
  IFS=, read -r -a names <<< "$MEAS"
fi

printf 'side\tround\tmeasurement\timages_per_s\n' > "$out/runs.tsv"
done_rounds=0
for r in $(seq "$ROUNDS"); do
  if [ "$r" -gt 2 ] && [ "$(elapsed)" -gt "$TIME_BUDGET" ]; then
    log "time budget ${TIME_BUDGET}s spent: stopping after $done_rounds rounds"
    break
  fi
  if [ $((r % 2)) = 1 ]; then order=(base head); else order=(head base); fi
  for m in "${names[@]}"; do
    for side in "${order[@]}"; do
      v=$(measure "$side" "$m")
      printf '%s\t%s\t%s\t%s\n' "$side" "$r" "$m" "$v" >> "$out/runs.tsv"
    done
  done
  rm -rf "$work/out"
  done_rounds=$r
  log "round $r/$ROUNDS done ($(elapsed) s)"
done

{
  cat "$out/context.txt"
  echo "data: $N photo-like JPEGs (shardc-mksample --photo), $nsizes distinct sizes;" \
       "build: shardc build ${GEOM[*]} (raw); reads: shardbench read of that dataset, --size 224x224"
  echo "rounds: $done_rounds (order alternating base/head); N = $CORES threads"
  [ "$cj" = 1 ] || echo "colour jitter: skipped (base's shardbench read has no --color-jitter)"
  echo "shard files identical (base build vs head build): $same_shards;" \
       "delivered batches identical (--checksum): seq $ck_seq, rrc+flip $ck_rrc"
  "$PY" - "$out/runs.tsv" "${names[@]}" <<'PY'
import csv, statistics, sys
rows = list(csv.DictReader(open(sys.argv[1]), delimiter="\t"))
print()
print(f"{'measurement':<16} {'base img/s':>11} {'head img/s':>11} {'head/base':>9}"
      f" {'base spread':>11} {'head spread':>11}  runs")
for name in sys.argv[2:]:
    v = {s: [float(r["images_per_s"]) for r in rows if r["side"] == s and r["measurement"] == name]
         for s in ("base", "head")}
    if not v["base"] or not v["head"]:
        continue
    mb, mh = statistics.median(v["base"]), statistics.median(v["head"])
    spread = lambda xs, m: f"{100 * (max(xs) - min(xs)) / m:.1f}%" if m else "-"
    print(f"{name:<16} {mb:>11.1f} {mh:>11.1f} {mh / mb if mb else float('nan'):>9.3f}"
          f" {spread(v['base'], mb):>11} {spread(v['head'], mh):>11}  {len(v['base'])}+{len(v['head'])}")
print()
print("img/s: medians over rounds; head/base > 1: head faster; spread: (max - min) / median")
PY
  echo "load average at end: $(cut -d' ' -f1-3 /proc/loadavg); elapsed: $(elapsed) s"
} | tee "$out/benchcmp.txt"
