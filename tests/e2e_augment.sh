#!/usr/bin/env bash
# End to end: --augment K writes K audited variants per image: bytes independent of -j and of
# --resume, every variant reproducible from its source and recorded parameters, seeds matter,
# malformed specs refused.
. "$(dirname "$0")/lib.sh"

"$MKSAMPLE" "$T/src" --classes 3 --per-class 8 --seed 2 --quiet || { echo "mksample failed"; exit 1; }
nsrc=$(find "$T/src" -type f -name '[0-9]*' | wc -l)
opts=(--size 40x32 --augment 4 --seed 9 --shard-samples 20 --no-progress)

expect_exit 1 "augmented build -j1 (the broken files are rejected)" "$SHARDC" build "$T/src" -o "$T/a" -j1 "${opts[@]}" --json
check "K variants per valid image" [ "$(json_get "$T/out" samples)" -eq $((nsrc * 4)) ]
expect_exit 1 "augmented build -j4" "$SHARDC" build "$T/src" -o "$T/b" -j4 "${opts[@]}"
same=1; for f in "$T/a"/*; do cmp -s "$f" "$T/b/$(basename "$f")" || same=0; done
check "-j1 and -j4 give byte-identical output" [ $same -eq 1 ]
check "shards hold whole inputs (20 = 5 inputs x 4)" [ "$(json_get "$T/a/manifest.json" shards | grep -o "'samples': 20" | wc -l)" -ge 2 ]
check "the manifest records the spec and seed" grep -q '"spec": "rrc=0.08:1:0.75:1.3333,flip=0.5,brightness=0.4,contrast=0.4,saturation=0.4"' "$T/a/manifest.json"
check "the seed is recorded" grep -q '"seed": "0000000000000009"' "$T/a/manifest.json"

# every variant replays exactly from its source and recorded parameters
fails=0
n=$(json_get "$T/a/manifest.json" samples)
for i in $(seq 0 $((n - 1))); do
  "$SHARDC" cat "$T/a" "$i" --replay > "$T/r.ppm" 2>"$T/err" || { fails=$((fails+1)); cat "$T/err"; }
  "$SHARDC" cat "$T/a" "$i" > "$T/s.ppm"
  cmp -s "$T/r.ppm" "$T/s.ppm" || fails=$((fails+1))
done
check "all $n variants replay byte for byte" [ $fails -eq 0 ]

# a damaged sample does not replay
python3 - "$T/b/shard-00000.raw" <<'PY'
import struct, sys
p = sys.argv[1]; b = bytearray(open(p, "rb").read())
idx = struct.unpack_from("<Q", b, 32)[0]; off = struct.unpack_from("<Q", b, idx + 64 * 3)[0]
b[off + 10] ^= 1; open(p, "wb").write(b)
PY
"$SHARDC" cat "$T/b" 3 --replay > /dev/null 2>"$T/err"
check "replay of a damaged sample exits 1 (got $?)" grep -q "differs from the stored pixels (1 of" "$T/err"

# sample info
expect_exit 0 "info --sample --json" "$SHARDC" info "$T/a" --sample 6 --json
python3 - "$T/out" <<'PY' && ok "sample JSON has source, variant and params within the spec" || bad "sample JSON"
import json, sys
d = json.load(open(sys.argv[1]))
assert d["source"] == 1 and d["variant"] == 2, d
p = d["params"]
x, y, w, h = p["crop"]; sw, sh = p["source_size"]
assert 0 <= x and x + w <= sw and 0 <= y and y + h <= sh
assert 0.08 * 0.95 <= w * h / (sw * sh) <= 1.0
for k in ("brightness", "contrast", "saturation"):
    assert 0.6 <= p[k] <= 1.4, (k, p[k])
assert isinstance(p["flip"], bool)
assert p["hue"] is None and p["grayscale"] is False    # not in the default spec
PY
expect_exit 0 "info --sample (text)" "$SHARDC" info "$T/a" --sample 6
check "text sample info shows the crop" grep -q "^crop: " "$T/out"

# seeds change pixels, the same seed does not
expect_exit 1 "other seed" "$SHARDC" build "$T/src" -o "$T/c" -j2 --size 40x32 --augment 4 --seed 10 --shard-samples 20 --no-progress
check "another seed gives other pixels" sh -c "! cmp -s '$T/a/shard-00000.raw' '$T/c/shard-00000.raw'"

# flip-only spec: variant pixels are the plain sample or its mirror
expect_exit 1 "flip-only augmentation" "$SHARDC" build "$T/src" -o "$T/f" --size 40x32 --augment 2 --aug flip=1 --no-progress
expect_exit 1 "augmentation 'none'" "$SHARDC" build "$T/src" -o "$T/p" --size 40x32 --augment 1 --aug none --no-progress
python3 - "$SHARDC" "$T" <<'PY' && ok "flip=1 variants mirror the unaugmented crops exactly" || bad "flip mirror"
import subprocess, sys
shardc, t = sys.argv[1], sys.argv[2]
def px(d, i):
    out = subprocess.run([shardc, "cat", d, str(i)], capture_output=True, check=True).stdout
    return out.split(b"\n", 3)[3]
for i in range(5):
    plain, v0, v1 = px(t + "/p", i), px(t + "/f", 2 * i), px(t + "/f", 2 * i + 1)
    assert plain != v0
    rows = [plain[r * 120:(r + 1) * 120] for r in range(32)]
    mirror = b"".join(b"".join(row[3 * x:3 * x + 3] for x in range(39, -1, -1)) for row in rows)
    assert v0 == mirror and v1 == mirror, i
PY

# resume of an augmented build gives the same bytes
crash 30 "$SHARDC" build "$T/src" -o "$T/k" -j2 "${opts[@]}"
check "the crash hook killed the build" [ $? -eq 137 ]
"$SHARDC" build "$T/src" -o "$T/k" -j2 "${opts[@]}" --resume >/dev/null 2>&1
same=1; for f in "$T/a"/*; do cmp -s "$f" "$T/k/$(basename "$f")" || same=0; done
check "kill at variant 30 then --resume gives the same bytes" [ $same -eq 1 ]

# dry run projects K-fold
expect_exit 0 "dry run with --augment" "$SHARDC" build "$T/src" -o "$T/dry" --size 64x64 --augment 3 --dry-run --json
check "the projection counts K samples per readable image" [ "$(json_get "$T/out" samples)" -eq $((3 * ($(json_get "$T/out" inputs) - $(json_get "$T/out" unreadable)))) ]

# malformed specs and option combinations are usage errors
expect_exit 2 "unknown operation" "$SHARDC" build "$T/src" -o "$T/u" --size 8x8 --augment 2 --aug blur=1
check "the message says what was expected" grep -q "expected rrc, flip, jitter" "$T/err"
expect_exit 2 "bad rrc range" "$SHARDC" build "$T/src" -o "$T/u" --size 8x8 --augment 2 --aug rrc=0.9:0.1
expect_exit 2 "jitter out of range" "$SHARDC" build "$T/src" -o "$T/u" --size 8x8 --augment 2 --aug jitter=3
expect_exit 2 "--augment without --size" "$SHARDC" build "$T/src" -o "$T/u" --augment 2
expect_exit 2 "--aug without --augment" "$SHARDC" build "$T/src" -o "$T/u" --size 8x8 --aug flip
expect_exit 2 "--augment 0" "$SHARDC" build "$T/src" -o "$T/u" --size 8x8 --augment 0
finish
