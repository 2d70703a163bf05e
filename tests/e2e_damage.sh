#!/usr/bin/env bash
# End to end: damaged datasets never kill a run. Shards are checked against what the manifest
# pins before liblmdb or libhdf5 parses them (a flipped byte in an LMDB page header or an HDF5
# object header is exit 1 naming the shard, never a signal); verify cross-checks every manifest
# field against the shards; a lock keeps a second build out of OUT; seeded byte flips in every
# format end in exit 0 or 1, never a signal. Also: missing shards, JSON escaping of filename
# bytes, list files with a BOM or a symlink loop, PNG palettes and 16-bit BMPs against Pillow.
. "$(dirname "$0")/lib.sh"

SHARDBENCH="$ROOT/$BUILD/bin/shardbench"
# The flips drawn depend on this seed only. FLIP_SEED=n explores other draws; FLIPS per format.
FLIP_SEED=${FLIP_SEED:-20261124}
FLIPS=${FLIPS:-25}

"$MKSAMPLE" "$T/src" --classes 3 --per-class 10 --seed 5 --no-broken --quiet || { echo "mksample failed"; exit 1; }

# no_signal DESCRIPTION COMMAND...: the command exits 0 or 1 (a signal or sanitizer abort fails)
no_signal() {
  local d=$1; shift
  "$@" >"$T/out" 2>"$T/err"
  local rc=$?
  if [ $rc -le 1 ]; then ok "$d (exit $rc)"; else bad "$d: exit $rc"; head -5 "$T/err" | sed 's/^/       /'; fi
}

# flip FILE OFFSET: xor one byte of FILE with 0x5a
flip() { python3 -c 'import sys
p, o = sys.argv[1], int(sys.argv[2])
with open(p, "r+b") as f:
    f.seek(o); b = f.read(1); f.seek(o); f.write(bytes([b[0] ^ 0x5a]))' "$1" "$2"; }

for f in raw hdf5 lmdb png0 bmp jpeg; do
  "$SHARDC" build "$T/src" -o "$T/$f" --format "$f" --size 32x24 --shard-samples 12 --no-progress >/dev/null 2>&1
  [ -e "$T/$f/manifest.json" ] || { bad "$f: reference build"; }
done

# ---- LMDB: the header of page 2 of data.mdb (the case that crashed inside mdb_cursor_get) ----
for off in 12 14 16 4096; do   # lower, upper, first node pointer of page 2; a page of the tree
  d="$T/lm-$off"; cp -r "$T/lmdb" "$d"
  flip "$d/shard-00000.lmdb/data.mdb" $((2 * 4096 + off % 4096 + (off / 4096) * 4096))
  for cmd in "verify $d" "info $d" "cat $d 0"; do
    expect_exit 1 "lmdb page damage (+$off): shardc ${cmd%% *}" "$SHARDC" $cmd
    check "lmdb page damage (+$off): ${cmd%% *} names the shard" grep -q "shard-00000.lmdb" "$T/err" "$T/out"
  done
  expect_exit 1 "lmdb page damage (+$off): shardbench read" "$SHARDBENCH" read "$d" -j1 -b 4 -e 1
done

# ---- HDF5: object headers (bytes HDF5 parses: everything outside the pixel range) ----
python3 - "$T/hdf5/manifest.json" >"$T/h5offs" <<'PY'
import json, sys
m = json.load(open(sys.argv[1]))
s = m["shards"][0]
skip = (s["pin"]["skip_offset"], s["pin"]["skip_offset"] + s["pin"]["skip_bytes"])
# the superblock, the root object header and the first dataset headers lie in the first KiB
offs = [o for o in (9, 60, 100, 200, 400, 700, 1000) if not skip[0] <= o < skip[1]]
print(" ".join(map(str, offs)))
PY
for off in $(cat "$T/h5offs"); do
  d="$T/h5-$off"; cp -r "$T/hdf5" "$d"; flip "$d/shard-00000.h5" "$off"
  for cmd in "verify $d" "info $d" "cat $d 0"; do
    expect_exit 1 "hdf5 header damage (+$off): shardc ${cmd%% *}" "$SHARDC" $cmd
    check "hdf5 header damage (+$off): ${cmd%% *} names the shard" grep -q "shard-00000.h5" "$T/err" "$T/out"
  done
done

# ---- missing shards: exit 1 everywhere (2 is for usage errors) ----
for f in raw hdf5 lmdb; do
  d="$T/miss-$f"; cp -r "$T/$f" "$d"; rm -rf "$d"/shard-00001.*
  for cmd in "verify $d" "info $d" "cat $d 0"; do
    expect_exit 1 "$f: a missing shard, shardc ${cmd%% *}" "$SHARDC" $cmd
  done
done
expect_exit 2 "no dataset at all is a usage error" "$SHARDC" info "$T/nothing-here"

# ---- verify cross-checks every manifest field ----
# edit DATASET PYTHON-STATEMENT: a copy of DATASET with the manifest edited ("m" is the JSON)
edit() {
  local src=$1 stmt=$2 d="$T/edit"
  rm -rf "$d"; cp -r "$src" "$d"
  python3 - "$d/manifest.json" "$stmt" <<'PY'
import json, sys
p = sys.argv[1]
m = json.load(open(p))
exec(sys.argv[2])
json.dump(m, open(p, "w"), indent=2)
PY
}
expect_exit 0 "raw: verify passes the dataset as built" "$SHARDC" verify "$T/raw"
for f in raw hdf5 lmdb png0; do
  while IFS='|' read -r what stmt; do
    [ -n "$what" ] || continue
    edit "$T/$f" "$stmt"
    expect_exit 1 "$f: verify catches an edited $what" "$SHARDC" verify "$T/edit"
    check "$f: ... and names it" grep -Eq "^(mismatch|damaged): " "$T/out"
  done <<'EOF'
sample_height|m["geometry"]["sample_height"] = 1
sample_width|m["geometry"]["sample_width"] = 16
geometry size|m["geometry"]["width"] = 31
geometry mode|m["geometry"]["mode"] = "keep"
geometry fit|m["geometry"]["fit"] = "pad"
short_side|m["geometry"]["short_side"] = 7
max_side|m["geometry"]["max_side"] = 99
channels|m["geometry"]["channels"] = 1; m["stats"]["mean"] = m["stats"]["mean"][:1]; m["stats"]["std"] = m["stats"]["std"][:1]
classes (none)|m["classes"] = []
classes (100,000)|m["classes"] = ["c%d" % i for i in range(100000)]
class name|m["classes"][1] = "renamed"
stats mean|m["stats"]["mean"][0] += 0.5
stats std|m["stats"]["std"][2] *= 1.01
stats pixels|m["stats"]["pixels"] += 1
inputs|m["inputs"] += 1
rejects|m["rejects"] += 1
fingerprint|m["fingerprint"] = "0123456789abcdef"
augment variants|m["augment"]["variants"] = 2; m["augment"]["spec"] = "flip=0.5"
seed|m["augment"]["seed"] = "00000000000000ff"
shard bytes|m["shards"][0]["bytes"] += 4096
shard hash|m["shards"][1]["hash"] = "00000000000000aa"
build options|m["build"]["shard_samples"] = 13
EOF
done
for f in hdf5 lmdb; do
  edit "$T/$f" 'm["shards"][0]["file_hash"] = "00000000000000bb"'
  expect_exit 1 "$f: verify catches an edited file_hash" "$SHARDC" verify "$T/edit"
  edit "$T/$f" 'm["shards"][0]["pin"]["hash"] = "00000000000000cc"'
  expect_exit 1 "$f: verify catches an edited pin" "$SHARDC" verify "$T/edit"
  check "$f: ... named as a pin mismatch" grep -q "pin" "$T/out"
done
# the reader refuses the same edit in every access mode, alike
edit "$T/raw" 'm["geometry"]["sample_height"] = 1'
for a in mmap pread direct; do
  expect_exit 1 "an edited sample_height: shardbench read --access $a refuses" "$SHARDBENCH" read "$T/edit" --access $a -j1 -b 4 -e 1
  check "... with the manifest field named ($a)" grep -q "sample_height" "$T/err"
done

# ---- the build lock ----
"$MKSAMPLE" "$T/big" --classes 2 --per-class 150 --seed 9 --no-broken --min-side 300 --max-side 600 --quiet
opts=(--format raw --size 96x96 --shard-samples 40 --no-progress -j1)
"$SHARDC" build "$T/big" -o "$T/locked" "${opts[@]}" >/dev/null 2>&1
"$SHARDC" build "$T/big" -o "$T/locked" "${opts[@]}" --force >"$T/a.out" 2>"$T/a.err" &
apid=$!
# stop the first writer while it holds the lock (its pid in the lock file), so the second one
# meets it whatever the speed of the machine
for _ in $(seq 1 2000); do
  [ "$(cat "$T/locked/.shardc.lock" 2>/dev/null)" = "$apid" ] && break
  sleep 0.005
done
if kill -STOP $apid 2>/dev/null && [ "$(cat "$T/locked/.shardc.lock")" = "$apid" ]; then
  expect_exit 2 "a second --force build into OUT while one runs" "$SHARDC" build "$T/big" -o "$T/locked" "${opts[@]}" --force
  check "... names the holder's pid" grep -q "is being written by another shardc, pid $apid" "$T/err"
  expect_exit 2 "a --resume into OUT while a build runs" "$SHARDC" build "$T/big" -o "$T/locked" "${opts[@]}" --resume
  kill -CONT $apid
  wait $apid; rc=$?
  check "the first build proceeds and finishes (exit $rc)" [ $rc -eq 0 ]
  expect_exit 0 "the dataset it wrote verifies" "$SHARDC" verify "$T/locked"
else
  wait $apid
  bad "could not catch the first build holding the lock"
fi
# a lock held by another process (pid written as shardc writes it); readers do not look at it
python3 - "$T/raw/.shardc.lock" "$T/held" <<'PY' &
import fcntl, os, sys, time
f = open(sys.argv[1], "w"); fcntl.flock(f, fcntl.LOCK_EX); f.write("4242\n"); f.flush()
open(sys.argv[2], "w").close()
time.sleep(30)
PY
hpid=$!
for _ in $(seq 1 500); do [ -e "$T/held" ] && break; sleep 0.01; done
expect_exit 2 "a build into a dataset locked by another writer" "$SHARDC" build "$T/src" -o "$T/raw" --format raw --size 32x24 --shard-samples 12 --no-progress --force
check "... names that writer's pid" grep -q "$T/raw is being written by another shardc, pid 4242" "$T/err"
expect_exit 0 "verify reads a locked dataset" "$SHARDC" verify "$T/raw"
expect_exit 0 "info reads a locked dataset" "$SHARDC" info "$T/raw"
kill $hpid; wait $hpid 2>/dev/null
# two --force builds started together: exactly one proceeds, the other exits 2, verify passes
for trial in 1 2 3; do
  "$SHARDC" build "$T/big" -o "$T/locked" "${opts[@]}" --force >/dev/null 2>"$T/r1.err" & p1=$!
  "$SHARDC" build "$T/big" -o "$T/locked" "${opts[@]}" --force >/dev/null 2>"$T/r2.err" & p2=$!
  wait $p1; r1=$?; wait $p2; r2=$?
  if { [ $r1 -eq 0 ] && [ $r2 -eq 2 ]; } || { [ $r1 -eq 2 ] && [ $r2 -eq 0 ]; }; then
    ok "racing --force builds, trial $trial: one proceeds, the other exits 2 ($r1, $r2)"
  elif [ $r1 -eq 0 ] && [ $r2 -eq 0 ]; then
    ok "racing --force builds, trial $trial: they did not overlap, both finished in turn"
  else
    bad "racing --force builds, trial $trial: exits $r1 and $r2"; cat "$T/r1.err" "$T/r2.err" | head -5
  fi
  expect_exit 0 "racing --force builds, trial $trial: the dataset verifies" "$SHARDC" verify "$T/locked"
done

# ---- JSON escapes any filename bytes ----
mkdir -p "$T/odd/cls"
cp "$(ls "$T"/src/*/*.png | head -1)" "$T/odd/cls/$(printf 'caf\xe9-\x01"q.png')"
"$SHARDC" build "$T/odd" -o "$T/oddout" --no-progress >/dev/null 2>&1
"$SHARDC" info "$T/oddout" --sample 0 --json >"$T/odd.json"
check "info --sample --json with a non-UTF-8 file name is valid JSON that gives the bytes back" \
  python3 -c 'import json, os, sys
j = json.loads(open(sys.argv[1], "rb").read().decode("utf-8"))
assert os.fsencode(j["path"]).endswith(b"caf\xe9-\x01\"q.png"), j["path"]' "$T/odd.json"

# ---- list files: a UTF-8 BOM, a symlink loop ----
"$MKSAMPLE" "$T/lsrc" --classes 2 --per-class 3 --seed 3 --no-broken --list "$T/list.txt" --quiet
printf '\xef\xbb\xbf' | cat - "$T/list.txt" >"$T/bom.txt"
expect_exit 0 "a list file starting with a UTF-8 BOM" "$SHARDC" build "$T/lsrc" --list "$T/bom.txt" -o "$T/bomout" --no-progress
ln -s loop-b "$T/lsrc/loop-a"; ln -s loop-a "$T/lsrc/loop-b"
printf 'loop-a 0\n' >>"$T/list.txt"
expect_exit 2 "a list naming a symlink loop" "$SHARDC" build "$T/lsrc" --list "$T/list.txt" -o "$T/loopout" --no-progress
check "... calls it a loop" grep -q "symbolic link loop: loop-a" "$T/err"

# ---- PNG palettes and 16-bit BMPs against Pillow ----
if [ -n "$PYPIL" ]; then
  mkdir -p "$T/pal/a" "$T/pal/b"
  "$PYPIL" - "$T/pal" <<'PY'
import struct, zlib, sys
d = sys.argv[1]
def chunk(t, b): return struct.pack(">I", len(b)) + t + b + struct.pack(">I", zlib.crc32(t + b) & 0xffffffff)
def png(path, w, h, depth, plte, idx):
    per = 8 // depth
    rows = b""
    for y in range(h):
        r = bytearray((w * depth + 7) // 8)
        for x in range(w):
            r[x // per] |= idx[y * w + x] << (8 - depth * (x % per + 1))
        rows += b"\0" + bytes(r)
    open(path, "wb").write(b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", w, h, depth, 3, 0, 0, 0))
        + chunk(b"PLTE", bytes(plte)) + chunk(b"IDAT", zlib.compress(rows)) + chunk(b"IEND", b""))
for depth in (1, 2, 4, 8):
    n = max(1, (1 << depth) - 1)                        # one entry short of what the depth addresses
    plte = [(17 * i + 3 * c) % 256 for i in range(n) for c in range(3)]
    png(f"{d}/a/short{depth}.png", 13, 5, depth, plte, [(x * 7 + y) % n for y in range(5) for x in range(13)])
    png(f"{d}/b/bad{depth}.png", 13, 5, depth, plte, [n if (x, y) == (3, 2) else 0 for y in range(5) for x in range(13)])
def bmp16(path, w, h, px, masks=None, top_down=False):
    row = (w * 2 + 3) // 4 * 4
    order = range(h) if top_down else reversed(range(h))
    data = b"".join(b"".join(struct.pack("<H", px[y * w + x]) for x in range(w)).ljust(row, b"\0") for y in order)
    extra = struct.pack("<III", *masks) if masks else b""
    off = 54 + len(extra)
    open(path, "wb").write(struct.pack("<2sIHHI", b"BM", off + len(data), 0, 0, off)
        + struct.pack("<IiiHHIIiiII", 40, w, -h if top_down else h, 1, 16, 3 if masks else 0, len(data), 2835, 2835, 0, 0)
        + extra + data)
px = [(y * 64 + x) * 97 & 0xffff for y in range(64) for x in range(64)]
bmp16(f"{d}/a/rgb555.bmp", 64, 64, px)
bmp16(f"{d}/a/bf565.bmp", 64, 64, px, (0xF800, 0x07E0, 0x001F))
bmp16(f"{d}/a/bf555td.bmp", 64, 64, px, (0x7C00, 0x03E0, 0x001F), top_down=True)
bmp16(f"{d}/b/bf444.bmp", 8, 8, px[:64], (0x0F00, 0x00F0, 0x000F))
PY
  expect_exit 1 "palette and 16-bit BMP images (the BMP Pillow refuses rejected)" "$SHARDC" build "$T/pal" -o "$T/palout" --no-progress
  # Pillow opens a PNG whose pixels index past its palette (grey ramp there): stored, with a warning
  check "every out-of-range palette index is stored with a warning naming it" [ "$(grep -c 'warning: .*PNG palette index .* out of range' "$T/err")" -eq 4 ]
  check "... and listed in warnings.tsv" [ "$(grep -c 'PNG palette index' "$T/palout/warnings.tsv")" -eq 4 ]
  check "16-bit BMP masks other than 5-5-5 / 5-6-5 are rejected with a reason" grep -q "BMP bitfields layout f00/f0/f with 16 bits per pixel not supported" "$T/err"
  n=$("$SHARDC" info "$T/palout" --json | python3 -c 'import json,sys; print(json.load(sys.stdin)["samples"])')
  for i in $(seq 0 $((n - 1))); do "$SHARDC" cat "$T/palout" "$i" >"$T/pal-$i.ppm"; done
  check "short palettes and 16-bit BMPs: every pixel equals Pillow's" env SHARDC="$SHARDC" "$PYPIL" - "$T/palout" "$n" <<'PY'
import json, subprocess, sys
from PIL import Image
d, n = sys.argv[1], int(sys.argv[2])
import os
src_of = {}
for i in range(n):
    out = subprocess.check_output([os.environ["SHARDC"], "info", d, "--sample", str(i), "--json"])
    src_of[i] = json.loads(out)["path"]
for i in range(n):
    want = Image.open(src_of[i]).convert("RGB")
    got = Image.open(f"{os.path.dirname(d)}/pal-{i}.ppm").convert("RGB")
    assert want.size == got.size and want.tobytes() == got.tobytes(), src_of[i]
print(n, "images equal")
PY
else
  echo "  skip palette / 16-bit BMP comparisons (no python3 with Pillow)"
fi

# ---- seeded byte flips in every format: exit 0 or 1, never a signal ----
for f in raw hdf5 lmdb png0 bmp jpeg; do
  python3 - "$T/$f" "$FLIP_SEED" "$FLIPS" >"$T/flips-$f" <<'PY'
import os, random, sys
d, seed, n = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
files = []
for root, _, names in os.walk(d):
    for x in sorted(names):
        if x not in ("manifest.json", "rejects.tsv", "warnings.tsv", "inputs.tsv", ".shardc.lock"):
            files.append(os.path.join(root, x))
files.sort()
rng = random.Random(seed)
for _ in range(n):
    p = rng.choice(files)
    size = os.path.getsize(p)
    # half the flips in the first 16 KiB of a file (headers, indexes, B-tree), half anywhere
    o = rng.randrange(min(size, 16384)) if rng.random() < 0.5 else rng.randrange(size)
    print(os.path.relpath(p, d), o)
PY
  signals=0; exits1=0; exits0=0; trials=0
  while read -r rel off; do
    d="$T/flip"; rm -rf "$d"; cp -r "$T/$f" "$d"; flip "$d/$rel" "$off"
    trials=$((trials + 1))
    for cmd in verify info cat read; do
      case $cmd in
        cat) "$SHARDC" cat "$d" 5 >/dev/null 2>&1 ;;
        read) "$SHARDBENCH" read "$d" -j2 -b 4 -e 1 >/dev/null 2>&1 ;;
        *) "$SHARDC" $cmd "$d" >/dev/null 2>&1 ;;
      esac
      rc=$?
      if [ $rc -gt 1 ]; then signals=$((signals + 1)); echo "       $f: flip $rel+$off: $cmd exit $rc"
      elif [ $rc -eq 1 ]; then exits1=$((exits1 + 1)); else exits0=$((exits0 + 1)); fi
    done
  done <"$T/flips-$f"
  check "$f: $trials seeded byte flips x verify/info/cat/read: no signal, no crash ($exits1 exit 1, $exits0 exit 0)" [ $signals -eq 0 ]
done
finish
