#!/usr/bin/env bash
# The GPU check in one command: correctness of the GPU paths, host-to-device transfer rates, and
# ResNet-50 / ResNet-18 training fed by the DataLoader, shardread.Loader, the CUDA feed and
# synthetic data, with a report. Two halves, the first here, the second on the GPU machine:
#
#   scripts/gpu-check.sh --prepare DIR [--no-build]
#                                            build (make all, test_cuda, test_reader, wheel,
#                                            and bench-augment.py's C harness, which the GPU
#                                            machine could not link: it lacks the -dev
#                                            packages), then gather into DIR what must travel,
#                                            < 50 MiB: DIR/bundle.tar.xz (scripts/gpu-bundle.sh
#                                            --no-cuda-libs, the harness in its bin/, packed;
#                                            --run unpacks it)
#                                            and the shardread wheel (or, without one, the
#                                            built module in DIR/python)
#   scripts/gpu-check.sh --run DIR OUT       on the GPU machine, from the repository root
#   scripts/gpu-check.sh --run DIR OUT --cpu the same steps on the CPU paths at tiny sizes
#   scripts/gpu-check.sh --cpu OUT           the same, with this build's binaries and module
#                                            ($BUILD) instead of a prepared DIR
#
# --run generates photo-like JPEGs of many sizes (shardc-mksample --photo), compiles them with
# `shardc build --short-side 256 --max-side 512`, then runs, each step under its own timeout
# and timed:
#   correctness  test_cuda (with SHARDC_REQUIRE_GPU=1; on a GPU it must report "GPU tests run"),
#                the pytest suite tests/python (on a GPU the pinned-memory test must pass, not
#                skip), and gpu-train.py check (is_pinned, async copies, overlap, ring buffers
#                kept under pending copies)
#   transfer     gpu-train.py transfer: H2D GB/s of pinned, pageable and Loader batches, and
#                shardbench train's figures
#   train-MODEL  gpu-train.py train for each model in $MODELS
#   doctor-MODEL python -m shardread.doctor on the shards with the ImageNet recipe
#                (RandomResizedCrop + flip + ColorJitter(0.2, 0.2, 0.2, 0.1) + Normalize, uint8
#                NHWC batches normalised on the device) training MODEL, once per thread setting
#                of $DOCTOR_THREADS (default "auto N", N the cores): the doctor's predicted
#                input stall against the measured one, the rate trained, the workers active at
#                the end; DOCTOR_S seconds each (default 12; 2 with --cpu)
#   cpubench     only when ONLY names it: per-core figures on the machine's otherwise idle CPU
#                cores, each against its baseline in the same run: decode-bench --size 224x224
#                on 600 of the JPEGs (full decode, + resize, region-of-interest decode +
#                resize), scripts/bench-detect.py (DETECT_IMAGES, default 300: torchvision's
#                CocoDetection pipeline against Loader(targets=True)) and scripts/bench-augment.py
#                (read-time augmentations, libshardread against torchvision, one thread each;
#                AUG_REPS runs, default 3 (1 with --cpu), AUG_PER photos per class, default 225
#                (64 with --cpu), AUG_PLAIN=0 skips its SHARDREAD_SIMD=0 rerun; with a prepared
#                DIR it runs the bundle's prebuilt harness): report.tsv rows with step cpubench,
#                and a "CPU benchmarks" section at the end of report.md
# OUT receives report.tsv (step, config, metric, value, unit, note), report.md and logs.txt:
# three files, nothing else. Exit status: 0 when every correctness check passed and every step
# finished, 1 otherwise (the report is written either way), 2 usage error.
#
# Knobs (environment): BUILD (default build), PYTHON (default: the first of python3 and
# /usr/bin/python3 that imports torch), WORK (scratch folder, default a new one under /tmp,
# removed at the end unless KEEP_WORK=1), MODELS, FEEDERS, BATCH, SIZE, STEPS, WARMUP, MAX_S
# (seconds cap per configuration), GEN_JOBS x PER_CLASS x 4 classes = the JPEGs, PYTEST_K
# (a pytest -k expression), ONLY (the steps to run, default "data correctness transfer train
# doctor";
# "cpubench" adds the per-core benchmarks, step 4 below), DETECT_IMAGES, AUG_REPS, AUG_PER,
# AUG_PLAIN, XZ_PRESET (the bundle's compression, default 6: 0 packs much faster and larger, for
# tests), T_CPUBENCH (default 300), T_DATA, T_TEST_CUDA, T_PYTEST, T_CHECK, T_TRANSFER, T_TRAIN,
# T_DOCTOR
# (timeouts in seconds, each cut to what is left of DEADLINE, the whole run's limit: 350 s on
# the GPU, after which the remaining steps are skipped and the report is written).
set -u
ROOT=$(cd "$(dirname "$0")/.." && pwd)
BUILD=${BUILD:-build}
mode='' dir='' out='' cpu=0 nobuild=0
usage() { sed -n '2,61p' "$0" | sed 's/^# \{0,1\}//'; }
die() { echo "gpu-check: $*" >&2; exit 2; }

while [ $# -gt 0 ]; do
  case $1 in
    --prepare) mode=prepare; dir=${2:-}; [ -n "$dir" ] || die "--prepare needs DIR"; shift 2 ;;
    --run) mode=run; dir=${2:-}; out=${3:-}; [ -n "$dir" ] && [ -n "$out" ] || die "--run needs DIR OUT"; shift 3 ;;
    --no-build) nobuild=1; shift ;;
    --cpu) cpu=1; if [ -z "$mode" ]; then mode=run; out=${2:-}; [ -n "$out" ] || die "--cpu needs OUT"; shift; fi; shift ;;
    -h|--help) usage; exit 0 ;;
    *) die "unknown argument '$1' (--help)" ;;
  esac
done
[ -n "$mode" ] || { usage >&2; exit 2; }

# ---- --prepare: here -------------------------------------------------------------------------
if [ "$mode" = prepare ]; then
  set -e
  cd "$ROOT"
  jobs=${JOBS:-$(nproc)}
  if [ $nobuild = 0 ]; then
    echo "gpu-check: building ($BUILD)"
    make --no-print-directory BUILD="$BUILD" -j"$jobs" all "$BUILD/tests/test_cuda" "$BUILD/tests/test_reader" \
      "$BUILD/bin/decode-bench"
  fi
  for so in libshardgpu.so libshardbench-gpu.so; do
    [ -f "$BUILD/lib/$so" ] || { echo "gpu-check: $BUILD/lib/$so missing: nvcc is needed" >&2; exit 1; }
  done
  wheel=
  if [ $nobuild = 0 ] && make -n BUILD="$BUILD" wheel >/dev/null 2>&1; then
    make --no-print-directory BUILD="$BUILD" wheel
  fi
  wheel=$(ls -t "$BUILD"/dist/shardread-*-abi3-*.whl 2>/dev/null | head -1)
  rm -rf "$dir"
  mkdir -p "$dir"
  # bench-augment.py's harness (cpubench), linked here against $BUILD/libshardread.a: gpu-bundle
  # copies it into bin/ and the shared libraries it needs into lib/. Without it only cpubench's
  # bench-augment part fails on the GPU machine, so a failure here is a warning.
  harness=()
  if BUILD=$BUILD python3 scripts/bench-augment.py --build-harness "$dir/bench-augment-harness"; then
    harness=(--add "$dir/bench-augment-harness")
  else
    echo "gpu-check: warning: bench-augment.py's harness did not build: cpubench will lack it" >&2
  fi
  BUILD=$BUILD scripts/gpu-bundle.sh --no-cuda-libs ${harness[@]+"${harness[@]}"} "$dir/bundle"
  rm -f "$dir/bench-augment-harness"
  # the run needs two of the test programs; the others would only add weight
  find "$dir/bundle/tests" -type f ! -name test_cuda ! -name test_reader -delete
  # packed: the shared libraries (libarchive's libicudata above all) compress well, and the
  # folder must travel with the working tree; --run unpacks it with Python's tarfile
  python3 - "$dir" "${XZ_PRESET:-6}" <<'PY'
import os, shutil, sys, tarfile
d = sys.argv[1]
with tarfile.open(os.path.join(d, "bundle.tar.xz"), "w:xz", preset=int(sys.argv[2])) as t:
    t.add(os.path.join(d, "bundle"), arcname="bundle")
shutil.rmtree(os.path.join(d, "bundle"))
PY
  if [ -n "$wheel" ]; then
    cp "$wheel" "$dir/"
    echo "gpu-check: wheel $(basename "$wheel")"
  else
    # no wheel target yet: the built module (it imports only on this Python version)
    mkdir -p "$dir/python"
    cp -a "$BUILD/python/." "$dir/python/"
    find "$dir/python" \( -name '*.o' -o -name '*.d' \) -delete
    echo "gpu-check: no wheel (make wheel): copied $BUILD/python (an interpreter-specific module)" >&2
  fi
  kib=$(du -sk "$dir" | cut -f1)
  echo "gpu-check: $dir is $((kib / 1024)) MiB ($kib KiB)"
  if [ "$kib" -ge $((50 * 1024)) ]; then
    echo "gpu-check: $dir exceeds 50 MiB: it must travel in 64 MiB with the working tree" >&2
    exit 1
  fi
  echo "gpu-check: on the GPU machine (carry $dir): scripts/gpu-check.sh --run $dir \$OUT"
  exit 0
fi

# ---- --run: the steps ------------------------------------------------------------------------
cd "$ROOT"
mkdir -p "$out" || die "cannot create $out"
out=$(cd "$out" && pwd)
if [ -z "${WORK:-}" ]; then
  WORK=$(mktemp -d /tmp/gpucheck.XXXXXX)
  [ "${KEEP_WORK:-0}" = 1 ] || trap 'rm -rf "$WORK"' EXIT
fi
mkdir -p "$WORK/logs"
TSV=$out/report.tsv
rm -f "$TSV" "$out/report.md" "$out/logs.txt"
printf 'step\tconfig\tmetric\tvalue\tunit\tnote\n' > "$TSV"
row() { local IFS=$'\t'; echo "$*" >> "$TSV"; }
t_script=$(date +%s.%N)

# sizes: the GPU run, or tiny ones on the CPU paths
if [ $cpu = 1 ]; then
  : "${MODELS:=resnet18}" "${BATCH:=8}" "${SIZE:=64}" "${STEPS:=3}" "${WARMUP:=1}" "${MAX_S:=20}"
  : "${GEN_JOBS:=2}" "${PER_CLASS:=8}" "${FEEDERS:=synthetic,shardread:1,shardread:2,cudafeed:1,dataloader:1,dataloader:2}"
  : "${XFER_THREADS:=2}" "${XFER_REPS:=3}" "${FEED_EPOCHS:=2}" "${AMP:=none}"
  : "${PYTEST_K:=pinned or torch_tensors or float_outputs}"
  : "${T_DATA:=60}" "${T_TEST_CUDA:=60}" "${T_PYTEST:=60}" "${T_CHECK:=60}" "${T_TRANSFER:=60}" "${T_TRAIN:=60}" "${DEADLINE:=300}"
  : "${AUG_REPS:=1}" "${AUG_PER:=64}" "${DOCTOR_S:=2}" "${T_DOCTOR:=60}" "${DOCTOR_THREADS:=auto 2}"
else
  : "${MODELS:=resnet50 resnet18}" "${BATCH:=256}" "${SIZE:=224}" "${STEPS:=40}" "${WARMUP:=8}" "${MAX_S:=20}"
  : "${GEN_JOBS:=16}" "${PER_CLASS:=80}" "${FEEDERS:=synthetic,shardread:4,shardread:16,cudafeed:4,dataloader:4,dataloader:16}"
  : "${XFER_THREADS:=16}" "${XFER_REPS:=20}" "${FEED_EPOCHS:=3}" "${AMP:=bf16}"
  : "${PYTEST_K:=not pip_install}"
  : "${T_DATA:=90}" "${T_TEST_CUDA:=90}" "${T_PYTEST:=120}" "${T_CHECK:=60}" "${T_TRANSFER:=60}" "${T_TRAIN:=150}" "${DEADLINE:=350}"
  : "${AUG_REPS:=3}" "${AUG_PER:=225}" "${DOCTOR_S:=12}" "${T_DOCTOR:=120}" "${DOCTOR_THREADS:=auto $(nproc)}"
fi

for py in ${PYTHON:-} python3 /usr/bin/python3; do
  if "$py" -c 'import torch, torchvision' 2>/dev/null; then PY=$py; break; fi
done
[ -n "${PY:-}" ] || die "no python3 with torch and torchvision (PYTHON=...)"

# what runs: a prepared DIR (bundle + wheel) or, with --cpu alone, this build. The bundle's
# libraries are for its binaries only, never for Python (torch brings its own libstdc++ and
# CUDA libraries): its binaries run through wrappers that set LD_LIBRARY_PATH, with the CUDA
# runtime and cuBLAS directories of the torch install or /usr/local/cuda after the bundle's.
LIBPATH=${LD_LIBRARY_PATH:-}
if [ -n "$dir" ]; then
  dir=$(cd "$dir" 2>/dev/null && pwd) || die "no prepared folder $dir (scripts/gpu-check.sh --prepare)"
  B=$dir/bundle
  if [ ! -d "$B" ] && [ -f "$dir/bundle.tar.xz" ]; then
    for py in python3 /usr/bin/python3; do
      "$py" -c 'import sys, tarfile; tarfile.open(sys.argv[1]).extractall(sys.argv[2])' \
        "$dir/bundle.tar.xz" "$WORK" 2>/dev/null && break
    done
    B=$WORK/bundle
  fi
  [ -x "$B/bin/shardc" ] || die "$dir/bundle(.tar.xz) is not a gpu-bundle (--prepare first)"
  cuda_dirs=$("$PY" - <<'EOF' 2>/dev/null
import glob, os
dirs = []
try:
    import torch
    base = os.path.dirname(os.path.dirname(torch.__file__))
    for pat in ("nvidia/*/lib", "nvidia/*/lib64", "torch/lib"):
        dirs += sorted(glob.glob(os.path.join(base, pat)))
except Exception:
    pass
dirs += glob.glob("/usr/local/cuda/lib64") + glob.glob("/usr/local/cuda/targets/*/lib")
keep = [d for d in dirs if glob.glob(os.path.join(d, "libcudart.so*"))
        or glob.glob(os.path.join(d, "libcublas*.so*"))]
print(":".join(dict.fromkeys(keep)))
EOF
)
  LIBPATH="$B/lib${cuda_dirs:+:$cuda_dirs}${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
  W=$WORK/wrap
  mkdir -p "$W/bin"
  for b in shardc shardc-mksample shardbench decode-bench bench-augment-harness; do
    [ -x "$B/bin/$b" ] || continue
    printf '#!/bin/sh\nLD_LIBRARY_PATH=%q exec %q "$@"\n' "$LIBPATH" "$B/bin/$b" > "$W/bin/$b"
    chmod +x "$W/bin/$b"
  done
  BIN=$W/bin TESTS=$B/tests PYBUILD=$W
else
  B=$ROOT/$BUILD
  BIN=$B/bin TESTS=$B/tests PYBUILD=$B
fi

ONLY=${ONLY:-data correctness transfer train doctor}
wants() { case " $ONLY " in *" $1 "*) return 0 ;; esac; return 1; }
log_of() { echo "$WORK/logs/$1.log"; }
failed=0
# step NAME TIMEOUT COMMAND...: run it under its timeout, log it, record exit status and seconds
step() {
  local name=$1 limit=$2; shift 2
  local log; log=$(log_of "$name")
  local t0 t1 rc
  # no step runs past the deadline of the whole run: the report must still be written
  local left; left=$(awk -v a="$t_script" -v b="$(date +%s.%N)" -v d="$DEADLINE" 'BEGIN { printf "%d", d - (b - a) }')
  if [ "$left" -lt 15 ]; then
    echo "gpu-check: $name skipped: the ${DEADLINE}s deadline is near"
    row steps "$name" exit 125 rc "skipped: the ${DEADLINE}s deadline of the run was near"
    failed=1
    return 125
  fi
  [ "$left" -lt "$limit" ] && limit=$left
  echo "gpu-check: $name (timeout ${limit}s)"
  t0=$(date +%s.%N)
  { echo "+ $*"; } > "$log"
  if declare -F "$1" >/dev/null; then   # a function of this script: in a child bash
    timeout -k 10 "$limit" bash -c "$(declare -f "$1"); $(printf '%q ' "$@")" >> "$log" 2>&1
  else
    timeout -k 10 "$limit" "$@" >> "$log" 2>&1
  fi
  rc=$?
  t1=$(date +%s.%N)
  local secs; secs=$(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.1f", b - a }')
  local note=ok
  [ $rc -eq 124 ] || [ $rc -eq 137 ] && note="timed out after ${limit}s"
  [ $rc -ne 0 ] && [ "$note" = ok ] && note=failed
  row steps "$name" exit "$rc" rc "$note"
  row steps "$name" seconds "$secs" s ""
  echo "gpu-check: $name: exit $rc, ${secs}s"
  [ $rc -eq 0 ] || failed=1
  return $rc
}

# the module: the wheel installed into a scratch site, or the module folder
site=
setup_python() {
  local whl=
  [ -n "$dir" ] && whl=$(ls "$dir"/*.whl 2>/dev/null | head -1)
  if [ -n "$whl" ]; then
    site=$WORK/site
    # pip where there is one; a wheel is a zip archive that --target would only unpack
    "$PY" -m pip install --no-index --no-deps --target "$site" "$whl" ||
      "$PY" -m zipfile -e "$whl" "$site"
  elif [ -n "$dir" ] && [ -d "$dir/python" ]; then
    site=$dir/python
  else
    site=$B/python
  fi
  echo "site: $site"
  PYTHONPATH=$site "$PY" -c 'import shardread; print("shardread from", shardread.__file__)'
}
setup_python > "$(log_of 0-setup)" 2>&1 || { cat "$(log_of 0-setup)"; row steps setup exit 1 rc "shardread does not import"; failed=1; }
[ -n "$site" ] || site=$B/python
export PYTHONPATH="$site${PYTHONPATH:+:$PYTHONPATH}"
export PYTHONDONTWRITEBYTECODE=1
GT=("$PY" "$ROOT/scripts/gpu-train.py")
export ROOT WORK BIN TESTS PYBUILD PY GEN_JOBS PER_CLASS PYTEST_K cpu LIBPATH AUG_REPS AUG_PER
export BATCH SIZE DOCTOR_S DOCTOR_THREADS
cpuflag=(); [ $cpu = 1 ] && cpuflag=(--cpu)

# the environment
{
  echo "date: $(date -u +%FT%TZ)  host cores: $(nproc)  mode: $([ $cpu = 1 ] && echo cpu || echo gpu)"
  uname -a
  df -h /dev/shm "$WORK" 2>/dev/null
  command -v nvidia-smi >/dev/null && nvidia-smi --query-gpu=name,driver_version,memory.total,compute_cap --format=csv
  command -v nvidia-smi >/dev/null && row env gpu driver "$(nvidia-smi --query-gpu=driver_version --format=csv,noheader | head -1)" "" ""
  echo "bundle library path: $LIBPATH"
  [ -f "${B}/lib/libshardbench-gpu.so" ] && LD_LIBRARY_PATH=$LIBPATH ldd "$B/lib/libshardbench-gpu.so"
  "${GT[@]}" env --tsv "$TSV"
} > "$(log_of 1-env)" 2>&1

# data: photo-like JPEGs of many sizes, GEN_JOBS generators in parallel, then the shards
gen_data() {
  set -e
  rm -rf "$WORK/gen" "$WORK/jpeg" "$WORK/shards"
  mkdir -p "$WORK/gen" "$WORK/jpeg"
  local k pids=()
  for ((k = 0; k < GEN_JOBS; k++)); do
    "$BIN/shardc-mksample" "$WORK/gen/$k" --photo --classes 4 --per-class "$PER_CLASS" \
      --seed $((k + 1)) --quiet & pids+=($!)
  done
  for p in "${pids[@]}"; do wait "$p"; done
  # one class-folder tree: jpeg/CLASS/GENERATOR/NNNNN.jpg (both readers search recursively)
  for ((k = 0; k < GEN_JOBS; k++)); do
    for c in "$WORK/gen/$k"/*/; do
      c=$(basename "$c"); mkdir -p "$WORK/jpeg/$c"; mv "$WORK/gen/$k/$c" "$WORK/jpeg/$c/g$k"
    done
  done
  echo "jpeg: $(find "$WORK/jpeg" -name '*.jpg' | wc -l) files, $(du -sh "$WORK/jpeg" | cut -f1)"
  "$BIN/shardc" build "$WORK/jpeg" -o "$WORK/shards" --short-side 256 --max-side 512 --no-progress
  echo "shards: $(du -sh "$WORK/shards" | cut -f1)"
}
if ! wants data; then
  echo "gpu-check: data skipped (ONLY=$ONLY): the remaining steps need it" >&2
elif step data "$T_DATA" gen_data; then
  n=$(find "$WORK/jpeg" -name '*.jpg' | wc -l)
  row data jpeg images "$n" files "photo-like JPEGs, $GEN_JOBS generators x 4 classes x $PER_CLASS"
  row data jpeg bytes "$(du -sb "$WORK/jpeg" | cut -f1)" B ""
  row data shards bytes "$(du -sb "$WORK/shards" | cut -f1)" B "--short-side 256 --max-side 512, raw"
else
  echo "gpu-check: no data: the remaining steps cannot run" >&2
fi
have_data=0; [ -f "$WORK/shards/manifest.json" ] && have_data=1

# 1. correctness
run_test_cuda() {
  SHARDC_REQUIRE_GPU=$([ $cpu = 1 ] && echo 0 || echo 1) LD_LIBRARY_PATH=$LIBPATH "$TESTS/test_cuda"
}
if ! wants correctness; then :
elif [ -x "$TESTS/test_cuda" ]; then
  step test_cuda "$T_TEST_CUDA" run_test_cuda
  rc=$?
  log=$(log_of test_cuda)
  summary=$(grep -E '^[0-9]+%: Checks' "$log" | tail -1)
  gpu_ran=0; grep -q 'GPU tests run' "$log" && gpu_ran=1
  if [ $rc -ne 0 ]; then res=fail
  elif [ $cpu = 0 ] && [ $gpu_ran = 0 ]; then res=fail; summary="$summary; the GPU tests did not run: $(grep -m1 'no CUDA device' "$log")"
  elif [ $gpu_ran = 0 ]; then res=pass; summary="$summary (CPU paths; GPU tests skipped)"
  else res=pass; fi
  row correctness test_cuda result "$res" "" "$summary"
else
  row correctness test_cuda result fail "" "$TESTS/test_cuda missing"
fi

# the doctor on MODEL for each thread setting: JSON reports in WORK/doctor-MODEL-THREADS.json
doctor_runs() {
  local m=$1 t rc=0 dev=cuda
  [ "$cpu" = 1 ] && dev=cpu
  for t in $DOCTOR_THREADS; do
    local th=$t; [ "$t" = auto ] && th="'auto'"
    echo "+ shardread.doctor $m threads=$t"
    "$PY" -m shardread.doctor "$WORK/shards" "batch_size=$BATCH" "size=$SIZE" rrc=True \
      flip=True "color_jitter=(0.2,0.2,0.2,0.1)" shuffle=True "threads=$th" \
      --model "$m" --device "$dev" --seconds "$DOCTOR_S" --json \
      > "$WORK/doctor-$m-$t.json" || rc=1
    "$PY" -c 'import json, sys; r = json.load(open(sys.argv[1])); r.pop("stages"); print(r)' \
      "$WORK/doctor-$m-$t.json" || rc=1
  done
  return $rc
}
doctor_rows() {
  local t
  for t in $DOCTOR_THREADS; do
    [ -s "$WORK/doctor-$1-$t.json" ] || continue
    "$PY" - "$WORK/doctor-$1-$t.json" "$1/threads=$t" >> "$TSV" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
cfg = sys.argv[2]
for metric, key, unit in (("predicted_stall", "predicted_stall_pct", "%"),
                          ("measured_stall", "measured_stall_pct", "%"),
                          ("images_per_s", "trained_img_s", "img/s"),
                          ("pipeline_images_per_s", "delivered_img_s", "img/s"),
                          ("step_ms", "step_ms", "ms"), ("active_threads", "active_threads", "")):
    v = r.get(key)
    print("\t".join(["doctor", cfg, metric, "" if v is None else f"{v:.4g}", unit,
                     "; ".join(r.get("recommendations", []))[:300] if metric == "measured_stall"
                     else ""]))
PY
  done
}

run_pytest() {
  cd "$ROOT/tests/python" && BUILD=$PYBUILD "$PY" -m pytest -v -rs -p no:cacheprovider -k "$PYTEST_K"
}
if ! wants correctness; then :
elif "$PY" -c 'import pytest' 2>/dev/null; then
  step pytest "$T_PYTEST" run_pytest
  rc=$?
  log=$(log_of pytest)
  summary=$(grep -E '^=+ .*(passed|failed|error).* =+$' "$log" | tail -1 | tr -d '=' | sed 's/^ *//; s/ *$//')
  row correctness pytest result "$([ $rc -eq 0 ] && echo pass || echo fail)" "" "${summary:-no summary} (-k '$PYTEST_K')"
  pin=$(grep -Eo 'test_pinned_batches_copy_asynchronously (PASSED|FAILED|SKIPPED|ERROR)' "$log" | awk '{print $2}' | head -1)
  case "$pin:$cpu" in
    PASSED:*) res=pass ;;
    SKIPPED:1) res=skip ;;
    *) res=fail ;;
  esac
  row correctness pytest_pinned_test result "$res" "" "test_pinned_batches_copy_asynchronously ${pin:-not run}"
else
  row correctness pytest result fail "" "$PY has no pytest"
fi

if [ $have_data = 1 ]; then
  wants correctness && step check "$T_CHECK" "${GT[@]}" check --tsv "$TSV" --shards "$WORK/shards" --batch "$BATCH" \
    --size "$SIZE" "${cpuflag[@]}"
  # 2. transfer
  wants transfer && step transfer "$T_TRANSFER" "${GT[@]}" transfer --tsv "$TSV" --shards "$WORK/shards" \
    --batch "$BATCH" --size "$SIZE" --threads "$XFER_THREADS" --reps "$XFER_REPS" \
    --shardbench "$BIN/shardbench" "${cpuflag[@]}"
  # 3. training
  DOCTOR_MODELS=${DOCTOR_MODELS-$MODELS}
  wants train || MODELS=
  for m in $MODELS; do
    step "train-$m" "$T_TRAIN" "${GT[@]}" train --tsv "$TSV" --shards "$WORK/shards" \
      --jpeg "$WORK/jpeg" --model "$m" --feeders "$FEEDERS" --batch "$BATCH" --size "$SIZE" \
      --steps "$STEPS" --warmup "$WARMUP" --max-s "$MAX_S" --feed-epochs "$FEED_EPOCHS" \
      --amp "$AMP" --shardbench "$BIN/shardbench" "${cpuflag[@]}"
  done
  # 4. the doctor: predicted against measured stall, threads='auto' against fixed threads
  wants doctor || DOCTOR_MODELS=
  for m in $DOCTOR_MODELS; do
    step "doctor-$m" "$T_DOCTOR" doctor_runs "$m"
    doctor_rows "$m"
  done
elif wants data; then
  row correctness check result fail "" "no dataset: the data step failed"
fi

# 5. cpubench (only with ONLY naming it): the build's and the detection pipeline's per-core
# figures on this machine's otherwise idle cores, each against its baseline in the same run:
# decode-bench --size (full decode, + resize, region-of-interest decode + resize),
# scripts/bench-detect.py (torchvision's CocoDetection pipeline against Loader(targets=True)) and
# scripts/bench-augment.py (read-time augmentations against torchvision's, one thread each). The
# three run one after the other whatever each one's exit status; the step fails if one failed.
cpubench() {
  local rc=0
  rm -f "$WORK/decode-bench.json" "$WORK/augment/augment.md"   # a reused WORK's are stale
  if [ -x "$BIN/decode-bench" ]; then
    local files
    mapfile -t files < <(find "$WORK/jpeg" -name '*.jpg' | sort | head -600)
    "$BIN/decode-bench" --reps 5 --size 224x224 "${files[@]}" > "$WORK/decode-bench.json.tmp" || rc=1
    cat "$WORK/decode-bench.json.tmp"
    [ $rc = 0 ] && mv "$WORK/decode-bench.json.tmp" "$WORK/decode-bench.json"
  fi
  echo "+ bench-detect.py"
  BUILD=$(dirname "$BIN") "$PY" "$ROOT/scripts/bench-detect.py" --images "${DETECT_IMAGES:-300}" --reps 5 \
    --work "$WORK/detect" || rc=1
  # the bundle's prebuilt harness where there is one (the GPU machine cannot link it), else
  # bench-augment.py compiles its own against $BUILD
  echo "+ bench-augment.py (REPS=$AUG_REPS PER=$AUG_PER PLAIN=${AUG_PLAIN:-1})"
  local harness=
  [ -x "$BIN/bench-augment-harness" ] && harness=$BIN/bench-augment-harness
  BUILD=$(dirname "$BIN") BIN=$BIN HARNESS=$harness BENCH_DIR=$WORK/augment REPS=$AUG_REPS \
    PER=$AUG_PER PLAIN=${AUG_PLAIN:-1} "$PY" "$ROOT/scripts/bench-augment.py" || rc=1
  return $rc
}
if wants cpubench && [ $have_data = 1 ]; then
  step cpubench "${T_CPUBENCH:-300}" cpubench
  if [ -f "$WORK/decode-bench.json" ]; then
    "$PY" - "$WORK/decode-bench.json" "$TSV" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
with open(sys.argv[2], "a") as t:
    for k in ("decode_per_s", "decode_resize_per_s", "roi_decode_resize_per_s", "roi_speedup",
              "region_fraction", "differ"):
        t.write(f"cpubench\tdecode-bench 224x224, {d['files']} files, 1 thread\t{k}\t{d[k]}\t\t\n")
PY
  fi
  # bench-augment's table: one row per pipeline and column (its plain C column only when it ran)
  if [ -f "$WORK/augment/augment.md" ]; then
    "$PY" - "$WORK/augment/augment.md" "$TSV" "$AUG_REPS" <<'PY'
import sys
lines = [l.strip() for l in open(sys.argv[1]) if l.strip().startswith("|")]
cells = lambda l: [c.strip() for c in l.strip("|").split("|")]
head = cells(lines[0])
def metric(h):
    if h.startswith("torchvision"):
        return "torchvision_per_s", "img/s", h
    return {"libshardread": ("shardread_per_s", "img/s", "vector kernels where the CPU has them"),
            "plain C paths": ("plain_c_per_s", "img/s", "SHARDREAD_SIMD=0"),
            "ratio": ("ratio", "x", "libshardread / torchvision")}.get(h, (h, "", ""))
with open(sys.argv[2], "a") as t:
    for l in lines[2:]:
        c = cells(l)
        for h, v in zip(head[1:], c[1:]):
            m, unit, note = metric(h)
            v = v.replace(",", "").rstrip("x")
            t.write(f"cpubench\taugment: {c[0]}\t{m}\t{v}\t{unit}\t"
                    f"{note}; bench-augment.py, 1 thread, REPS={sys.argv[3]}\n")
PY
  fi
fi
# the report
total=$(awk -v a="$t_script" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }')
row steps total seconds "$total" s "the whole --run"
"${GT[@]}" report --tsv "$TSV" --md "$out/report.md" \
  --title "$([ $cpu = 1 ] && echo 'CPU paths, tiny sizes: no GPU figure' || echo GPU)" > /dev/null
# gpu-train.py's report has no section for the cpubench rows: one table per set of metrics
if grep -q '^cpubench' "$TSV" && ! grep -q '^## CPU benchmarks' "$out/report.md" 2>/dev/null; then
  "$PY" - "$TSV" "$out/report.md" <<'PY'
import sys
def fmt(v):
    try:
        x = float(v)
    except ValueError:
        return v
    return f"{x:,.0f}" if abs(x) >= 100 else f"{x:.1f}" if abs(x) >= 10 else f"{x:.3g}"
table, order = {}, []
for line in open(sys.argv[1]):
    p = line.rstrip("\n").split("\t")
    if len(p) >= 6 and p[0] == "cpubench":
        if p[1] not in table:
            table[p[1]] = {}
            order.append(p[1])
        try:
            v = f"{float(p[3]):.1f}x" if p[4] == "x" else fmt(p[3])
        except ValueError:
            v = p[3]
        table[p[1]][p[2]] = v
groups = {}
for c in order:
    groups.setdefault(tuple(table[c]), []).append(c)
out = ["", "## CPU benchmarks (per core)", ""]
for metrics, configs in groups.items():
    out += ["| config | " + " | ".join(metrics) + " |", "|---" + "|---:" * len(metrics) + "|"]
    out += [f"| {c} | " + " | ".join(table[c][m] for m in metrics) + " |" for c in configs]
    out.append("")
with open(sys.argv[2], "a") as f:
    f.write("\n".join(out))
PY
fi
# nor for the doctor's: one row per model and thread setting
if grep -q '^doctor' "$TSV"; then
  "$PY" - "$TSV" "$out/report.md" <<'PY'
import sys
rows, order, notes = {}, [], {}
for line in open(sys.argv[1]):
    p = line.rstrip("\n").split("\t")
    if len(p) >= 6 and p[0] == "doctor":
        if p[1] not in rows:
            rows[p[1]] = {}
            order.append(p[1])
        rows[p[1]][p[2]] = p[3]
        if p[5]:
            notes[p[1]] = p[5]
cols = ["predicted_stall", "measured_stall", "images_per_s", "pipeline_images_per_s",
        "step_ms", "active_threads"]
out = ["", "## The doctor (python -m shardread.doctor --model)", "",
       "| model/threads | " + " | ".join(cols) + " |", "|---" + "|---:" * len(cols) + "|"]
out += [f"| {c} | " + " | ".join(rows[c].get(m, "") for m in cols) + " |" for c in order]
out += [""] + [f"- {c}: {notes[c]}" for c in order if c in notes] + [""]
with open(sys.argv[2], "a") as f:
    f.write("\n".join(out))
PY
fi
for f in "$WORK"/logs/*.log; do
  printf '\n######## %s\n' "$(basename "$f" .log)"
  cat "$f"
done > "$out/logs.txt"
cat "$out/report.md"
nfail=$(awk -F'\t' '$1 == "correctness" && $4 == "fail"' "$TSV" | wc -l)
echo
echo "gpu-check: $nfail correctness check(s) failed; steps $([ $failed = 0 ] && echo 'all finished' || echo 'not all finished'); ${total}s; report in $out"
[ "$nfail" -eq 0 ] && [ $failed = 0 ]
