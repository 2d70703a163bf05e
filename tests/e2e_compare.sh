#!/usr/bin/env bash
# End to end: shardbench train (a shardc dataset and a plain image folder feeding the CPU step:
# JSON keys, per-epoch loss, the timeline) and shardbench compare (every format built from one
# folder, one row each plus the source's, with the derived columns consistent), and the exit
# codes of bad arguments. Speeds are never asserted.
. "$(dirname "$0")/lib.sh"
BENCH="$ROOT/$BUILD/bin/shardbench"

"$MKSAMPLE" "$T/src" --classes 3 --per-class 8 --seed 6 --quiet --no-broken || { echo "mksample failed"; exit 1; }
"$SHARDC" build "$T/src" -o "$T/ds" --size 24x24 --no-progress >/dev/null 2>&1 \
  || { echo "shardc build failed"; exit 1; }
n=24

# train_keys FILE STEP EPOCHS: the JSON object of a CPU train run, with exact image counts
train_keys() {
  python3 - "$@" "$n" <<'PY'
import json, sys
path, step, epochs, n = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
r = json.loads(open(path).read())
for k in ["images_per_s", "stall_pct", "busy_pct", "device", "loss", "accuracy", "h2d_gb_per_s",
          "per_epoch", "step", "step_ms", "batch", "threads", "epochs", "measured_images"]:
    assert k in r, k
assert r["device"] == "cpu" and r["h2d_gb_per_s"] is None, r
assert r["step"] == step and r["epochs"] == epochs, r
assert len(r["per_epoch"]) == epochs and all(e["images"] == n for e in r["per_epoch"]), r
assert r["measured_images"] == n * (epochs - 1 if epochs > 1 else 1), r
assert r["images_per_s"] > 0 and 0 <= r["stall_pct"] <= 100 and 0 <= r["busy_pct"] <= 100, r
if step == "emulated":
    assert r["loss"] == [] and r["accuracy"] == [] and r["step_ms"] > 0, r
    # a sleep per batch: the step is busy for a good part of the wall time, and at least
    # batches x step_ms in all (a bound that holds however slow the machine)
    assert all(e["step_call_s"] >= r["step_ms"] / 1000 * -(-n // r["batch"]) for e in r["per_epoch"]), r
else:
    assert r["step_ms"] is None and len(r["loss"]) == epochs and len(r["accuracy"]) == epochs, r
    assert all(l > 0 for l in r["loss"]) and all(0 <= a <= 1 for a in r["accuracy"]), r
PY
}

expect_exit 0 "train an emulated step (--json)" "$BENCH" train "$T/ds" --step-ms 3 --batch 8 \
  --threads 2 --epochs 2 --device cpu --json --timeline "$T/tl.tsv"
cp "$T/out" "$T/emu.json"
check "train --step-ms: keys, CPU device, no loss, exact counts" train_keys "$T/emu.json" emulated 2
check "the timeline has a header and one line per batch (2 epochs x 3 batches)" \
  bash -c "[ \"\$(grep -vc '^#' '$T/tl.tsv')\" -eq 6 ] && head -1 '$T/tl.tsv' | grep -q wait_ms"

expect_exit 0 "train softmax on the CPU" "$BENCH" train "$T/ds" --model softmax --batch 4 \
  --threads 2 --epochs 4 --device cpu --json
cp "$T/out" "$T/softmax.json"
check "train --model softmax: a loss per epoch" train_keys "$T/softmax.json" softmax 4
check "the loss falls (deterministic: same seed, same batches)" python3 -c '
import json,sys; l = json.load(open(sys.argv[1]))["loss"]; assert l[-1] < l[0], l' "$T/softmax.json"
expect_exit 0 "the same run again" "$BENCH" train "$T/ds" --model softmax --batch 4 \
  --threads 1 --epochs 4 --device cpu --json
check "gives the same losses with another thread count" python3 -c '
import json,sys; a, b = (json.load(open(p))["loss"] for p in sys.argv[1:]); assert a == b, (a, b)' \
  "$T/softmax.json" "$T/out"

expect_exit 0 "train mlp from the plain image folder" "$BENCH" train "$T/src" --model mlp \
  --size 24x24 --batch 8 --threads 2 --epochs 2 --device cpu --json
cp "$T/out" "$T/folder.json"
check "folder train: keys and counts" train_keys "$T/folder.json" mlp 2
check "folder train: format folder, 3 classes, 24x24" python3 -c '
import json,sys; r = json.load(open(sys.argv[1]))
assert r["format"] == "folder" and r["classes"] == 3 and (r["width"], r["height"]) == (24, 24), r' \
  "$T/folder.json"
expect_exit 0 "folder train, table output, seq order, prefetch 2" "$BENCH" train "$T/src" \
  --step-ms 0 --size 16x16 --batch 5 --threads 2 --prefetch 2 --order seq --epochs 2
check "the table names the folder and the steady state" \
  bash -c "grep -q '(folder)' '$T/out' && grep -q 'steady state' '$T/out' && grep -q 'stall' '$T/out'"

# broken files in a folder are skipped and counted
"$MKSAMPLE" "$T/broken" --classes 2 --per-class 3 --seed 4 --quiet || { echo "mksample failed"; exit 1; }
expect_exit 0 "train from a folder with broken files" "$BENCH" train "$T/broken" --step-ms 0 \
  --size 16x16 --batch 4 --epochs 1 --json
check "only the 6 valid images reach the step" python3 -c '
import json,sys; r = json.load(open(sys.argv[1])); assert r["measured_images"] == 6 and r["errors"] > 0, r' "$T/out"
check "the skipped files are reported" grep -q "decodes failed" "$T/err"

# compare: every format, plus the source, plus raw read with the reader's CPU-side
# RandomResizedCrop + flip + float32 NCHW normalisation (raw+rrc)
expect_exit 0 "compare (--json)" "$BENCH" compare "$T/src" --work "$T/work" --size 16x16 \
  --threads 2 --batch 8 --epochs 2 --step-ms 5 --json
cp "$T/out" "$T/cmp.json"
check "compare: a row per format and the source, with every key, consistent" python3 - "$T/cmp.json" "$n" <<'PY'
import json, sys
r = json.load(open(sys.argv[1])); n = int(sys.argv[2])
rows = {f["format"]: f for f in r["formats"]}
assert sorted(rows) == sorted(["source", "raw", "hdf5", "lmdb", "png0", "bmp", "jpeg", "raw+rrc",
                              "raw+lz4", "raw+zstd", "raw+jpeg50"]), list(rows)
assert rows["raw+rrc"]["dir"] == rows["raw"]["dir"] and rows["raw+rrc"]["bytes"] == rows["raw"]["bytes"]
demand = 8 / 0.005
assert abs(r["demand_images_per_s"] - demand) < 0.1, r
src = rows["source"]
for name, f in rows.items():
    for k in ["images_per_s", "bytes", "cpu_s_per_image", "cores_needed",
              "decode_cpu_s_saved_per_epoch", "step_util", "cold_images_per_s",
              "bytes_per_sample", "ram_gib_at_imagenet"]:
        assert k in f, (name, k)
    assert f["images_per_epoch"] == n and f["bytes"] > 0 and f["images_per_s"] > 0, f
    assert f["cold_images_per_s"] > 0, f
    assert abs(f["bytes_per_sample"] - f["bytes"] / n) <= 0.06, f
    assert abs(f["ram_gib_at_imagenet"] - f["bytes_per_sample"] * 1281167 / 2**30) <= 0.006, f
    assert abs(f["cores_needed"] - demand * f["cpu_s_per_image"]) <= 1e-3 * f["cores_needed"] + 1e-9, f
    want = (src["cpu_s_per_image"] - f["cpu_s_per_image"]) * n
    assert abs(f["decode_cpu_s_saved_per_epoch"] - want) <= 1e-3 * abs(want) + 1e-6, (f, want)
    assert abs(f["step_util"] - min(1, f["images_per_s"] / demand)) < 1e-3, f
assert src["decode_cpu_s_saved_per_epoch"] == 0
# raw's stored forms are what they say: compressed ones smaller than raw (the generated images
# compress), the JPEG mix smaller still than raw
assert rows["raw+lz4"]["bytes"] < rows["raw"]["bytes"], rows
assert rows["raw+zstd"]["bytes"] < rows["raw"]["bytes"], rows
assert rows["raw+jpeg50"]["bytes"] < rows["raw"]["bytes"], rows
PY
check "raw's forms were built with their options" bash -c "grep -q '\"compress\": \"lz4\"' '$T/work/raw+lz4/manifest.json' && grep -q '\"compress\": \"zstd\"' '$T/work/raw+zstd/manifest.json' && grep -q '\"jpeg_fraction\": 0.5' '$T/work/raw+jpeg50/manifest.json'"
check "compare built every format in --work" bash -c "for f in raw hdf5 lmdb png0 bmp jpeg raw+lz4 raw+zstd raw+jpeg50; do [ -f '$T/work/'\$f/manifest.json ] || exit 1; done"

expect_exit 0 "compare again into the same --work, table output" "$BENCH" compare "$T/src" \
  --work "$T/work" --size 16x16 --threads 2 --batch 8 --epochs 1
check "the table has every row" bash -c "for f in source raw hdf5 lmdb png0 bmp jpeg raw+rrc; do grep -q \"^\$f \" '$T/out' || exit 1; done"

if command -v gnuplot >/dev/null; then
  expect_exit 0 "compare --plot" "$BENCH" compare "$T/src" --work "$T/work" --size 16x16 \
    --threads 2 --batch 8 --epochs 1 --plot "$T/cmp.png"
  check "the plot is a PNG" python3 -c '
import sys; assert open(sys.argv[1], "rb").read(8) == b"\x89PNG\r\n\x1a\n"' "$T/cmp.png"
fi
# without gnuplot the plot is skipped, not failed
mkdir -p "$T/nognuplot"
for tool in bash sed printf env; do ln -sf "$(command -v $tool)" "$T/nognuplot/$tool"; done
expect_exit 0 "compare --plot without gnuplot on PATH" env PATH="$T/nognuplot" "$BENCH" compare \
  "$T/src" --work "$T/work" --size 16x16 --threads 2 --batch 8 --epochs 1 --plot "$T/none.png"
check "says the plot was skipped" grep -q "plot skipped" "$T/err"
check "and writes no PNG" [ ! -e "$T/none.png" ]

# failures
expect_exit 1 "train a missing dataset" "$BENCH" train "$T/nope" --json
check "the message names it" grep -q "cannot open $T/nope" "$T/err"
mkdir -p "$T/empty/class"
expect_exit 1 "train a folder without images" "$BENCH" train "$T/empty"
expect_exit 1 "compare a shardc dataset (not an image folder)" "$BENCH" compare "$T/ds" --work "$T/w2"
expect_exit 1 "compare with --work inside SRC" "$BENCH" compare "$T/src" --work "$T/src/work"
check "and leaves nothing inside SRC" [ ! -e "$T/src/work" ]
expect_exit 2 "train: --model and --step-ms together" "$BENCH" train "$T/ds" --model mlp --step-ms 3
expect_exit 2 "train: a bad --model" "$BENCH" train "$T/ds" --model resnet
expect_exit 2 "train: a bad --device" "$BENCH" train "$T/ds" --device tpu
expect_exit 2 "train: a negative --step-ms" "$BENCH" train "$T/ds" --step-ms -1
expect_exit 2 "train: --prefetch 1" "$BENCH" train "$T/ds" --prefetch 1
expect_exit 2 "train: an unknown option" "$BENCH" train "$T/ds" --bogus
check "the message names the option" grep -q "unknown option '--bogus'" "$T/err"
expect_exit 2 "train: no dataset" "$BENCH" train --json
expect_exit 2 "train: two datasets" "$BENCH" train "$T/ds" "$T/src"
expect_exit 2 "compare: no --work" "$BENCH" compare "$T/src"
expect_exit 2 "compare: no SRC" "$BENCH" compare --work "$T/w3"
expect_exit 2 "compare: --step-ms 0" "$BENCH" compare "$T/src" --work "$T/w3" --step-ms 0
expect_exit 2 "compare: a bad --size" "$BENCH" compare "$T/src" --work "$T/w3" --size 16x
check "nothing was built for a usage error" [ ! -e "$T/w3" ]
expect_exit 0 "train --help" "$BENCH" train --help
check "documents --step-ms and --model" bash -c "grep -q -- --step-ms '$T/out' && grep -q -- --model '$T/out'"
expect_exit 0 "compare --help" "$BENCH" compare --help
check "documents --work and --plot" bash -c "grep -q -- --work '$T/out' && grep -q -- --plot '$T/out'"
expect_exit 0 "--help lists train and compare" "$BENCH" --help
check "both are listed" bash -c "grep -q '^  train' '$T/out' && grep -q '^  compare' '$T/out'"

finish
