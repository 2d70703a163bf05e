#!/usr/bin/env bash
# End to end: a detection dataset whose samples vary in size, at a URL, read as its shards
# arrive through a bounded cache (docs/REMOTE.md "Samples of varying sizes, targets"), against
# nginx on 127.0.0.1 (started and stopped here). Asserted: with cache_limit about half the
# dataset, a Loader epoch (targets, random order; fixed-size batches and natural sizes) equals the
# local one (images, targets, indices, order) and the cache never exceeds the limit; the open
# asks only for each shard's header (256 bytes) and its index and aux records (exactly their
# bytes, Range requests answered 206) before the first whole shard is fetched; a later open takes
# those parts from the shards its cache holds and asks only for the others'; a byte changed in
# one shard's index in the served copy is refused at open naming the object; pair records
# (targets and fields) of varying sizes, and targets on samples of one size, read the same way;
# lmdb shards (1.1) the same way, their open asking only for each shard's index value (the
# manifest's skeleton range), a changed byte in it refused naming the object;
# hdf5 shards the same way, their open asking only for the bytes before and after each shard's
# pixels (its manifest pins), a changed byte among them refused at open naming the object.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/remote_lib.sh"
CHK="$ROOT/tests/remote_cache_check.py"
need_tools "$NGINX" || { finish; exit; }

# the dataset: 48 images of 24..64 pixels a side with COCO boxes, stored at their own sizes, in
# 12 shards of 4
mkdir -p "$T/www"
"$MKSAMPLE" "$T/img" --coco "$T/inst.json" --per-class 48 --min-side 24 --max-side 64 --seed 5 \
  --quiet || { bad "shardc-mksample failed"; finish; exit; }
"$SHARDC" build "$T/img" --coco "$T/inst.json" -o "$T/www/det" --shard-samples 4 --no-progress \
  >/dev/null || { bad "shardc build failed"; finish; exit; }
check "the samples vary in size and carry targets (the manifest records no size)" $PY -c '
import json, sys
m = json.load(open(sys.argv[1]))
assert not m.get("sample_width") and m["targets"] and len(m["shards"]) == 12, m
' "$T/www/det/manifest.json"
total=$(cat "$T"/www/det/shard-*.raw | wc -c)
LIMIT=$((total / 2))
HP=$($PY "$HELP" port)
start_nginx "$HP" || { finish; exit; }
URL=http://127.0.0.1:$HP/det
LOG="$T/ngx/access.log"

# open_report OUT URL CACHE LIMIT: a Loader (targets, 48x48 batches) opened on URL through a
# bounded cache, what it raised in OUT
open_report() {
  py_open_report "$1" \
    'shardread.Loader(sys.argv[1], cache=sys.argv[2], cache_limit=int(sys.argv[3]), targets=True,
                       size=48, pad=True, batch_size=4)' "$2" "$3" "$4"
}

# ---- epochs through a cache of half the dataset, equal to the local ones ----
kw='{"order": "random", "seed": 5, "batch_size": 4, "threads": 1, "targets": true, "size": 48, "pad": true}'
expect_exit 0 "random order with targets, 48x48 batches, a cache of half the dataset: the local epoch" \
  $PY "$CHK" equal "$T/www/det" "$URL" "$T/c1" "$LIMIT" "$kw"
check "... within the limit, shards evicted" grep -Eq "evicted=[1-9]" "$T/out"
cp "$LOG" "$T/first.log"

# what the open asked for: the manifest, then per shard its header and its index with the aux
# records (Range requests, 206, exactly those bytes), all before the first whole shard
check "the open fetched each shard's header and index only, before any whole shard" $PY -c '
import re, struct, sys
root, log = sys.argv[1], sys.argv[2]
want = {}
for k in range(12):
    name = f"shard-{k:05d}.raw"
    head = open(f"{root}/{name}", "rb").read(256)
    index_offset, file_size = struct.unpack_from("<Q", head, 32)[0], struct.unpack_from("<Q", head, 56)[0]
    want[name] = (256, file_size - index_offset, file_size)
reqs = []
for line in open(log):
    m = re.search(r"\"GET /det/(\S+) HTTP/[0-9.]+\" (\d+) (\d+)", line)
    if m:
        reqs.append((m.group(1), int(m.group(2)), int(m.group(3))))
assert reqs[0][:2] == ("manifest.json", 200), reqs[0]
opened = reqs[1:25]
assert all(s == 206 for _, s, _ in opened), opened
assert sorted((f, n) for f, _, n in opened) == sorted(
    [(f, w[0]) for f, w in want.items()] + [(f, w[1]) for f, w in want.items()]), opened
rest = reqs[25:]
# the workers go on into the next epoch, so the last downloads may be cut short by the close
# (nginx logs each transfer as it ends, a cut one when its connection goes: in any order with
# those under way, and at its size when the kernel held all of it)
whole = sum(n == want[f][2] for f, _, n in rest)
assert whole >= 12 and all(s == 200 and n <= want[f][2] for f, s, n in rest), rest
print(len(opened), "ranges at open,", whole, "whole shards after,", len(rest) - whole,
      "cut by the close")
' "$T/www/det" "$T/first.log"

# a second open of the same cache: the shards it holds give their parts, the others are asked for
held=$(ls "$T"/c1/*/shard-*.raw 2>/dev/null | wc -l)
: >"$LOG"                                      # (nginx appends: O_APPEND)
kw2='{"order": "random", "seed": 7, "batch_size": 4, "threads": 1, "targets": true, "size": 48, "pad": true}'
expect_exit 0 "another seed on the same cache: the local epoch" \
  $PY "$CHK" equal "$T/www/det" "$URL" "$T/c1" "$LIMIT" "$kw2"
check "the second open asked for the parts of the $((12 - held)) shards its cache did not hold" $PY -c '
import re, sys
n = sum(1 for l in open(sys.argv[1]) if re.search(r"\"GET /det/shard-\d+\.raw HTTP/[0-9.]+\" 206 ", l))
assert n == 2 * int(sys.argv[2]), (n, sys.argv[2])
' "$LOG" $((12 - held))

# a cache holding shards 0-5, shard 5 with a changed byte in its index: the open takes the
# parts of 0-4 from the cache, asks for 6-11's and for shard 5's index again (its header is
# right), and the damaged file is replaced before it is read
d=$(basename "$(ls -d "$T"/c1/*/)")
mkdir -p "$T/c4/$d"
for k in 0 1 2 3 4 5; do cp "$T/www/det/shard-0000$k.raw" "$T/c4/$d/"; done
$PY -c '
import struct, sys
p = sys.argv[1]
b = bytearray(open(p, "rb").read())
b[struct.unpack_from("<Q", b, 32)[0] + 24] ^= 1
open(p, "wb").write(b)
' "$T/c4/$d/shard-00005.raw"
: >"$LOG"
expect_exit 0 "a cached shard with a changed index byte: the local epoch all the same" \
  $PY "$CHK" equal "$T/www/det" "$URL" "$T/c4" "$LIMIT" "$kw2"
check "the open asked for shards 6-11's parts and shard 5's index, nothing else of 0-5" $PY -c '
import re, struct, sys
got = sorted(m.group(1) for m in (re.search(r"\"GET /det/(shard-\d+\.raw) HTTP/[0-9.]+\" 206 ", l)
                                  for l in open(sys.argv[1])) if m)
want = sorted([f"shard-{k:05d}.raw" for k in range(6, 12)] * 2 + ["shard-00005.raw"])
assert got == want, got
' "$LOG"
check "... and the damaged copy was downloaded again (and is now right, or evicted)" bash -c "
  grep -Eq '\"GET /det/shard-00005.raw HTTP/[0-9.]+\" 200 ' '$LOG' &&
  { [ ! -e '$T/c4/$d/shard-00005.raw' ] || cmp -s '$T/c4/$d/shard-00005.raw' '$T/www/det/shard-00005.raw'; }"

# natural sizes: the open sizes the canvas from every sample's size, and checks every sample
# fits it, before any shard is there
kwn='{"order": "random", "seed": 3, "batch_size": 4, "threads": 1, "targets": true}'
expect_exit 0 "natural sizes (a canvas of the largest sample) through a cache of half the dataset: the local epoch" \
  $PY "$CHK" equal "$T/www/det" "$URL" "$T/c3" "$LIMIT" "$kwn"

# pair records (targets and fields in one aux record) of varying sizes: checked at open and
# read the same way (their targets; a Loader's fields= at a URL with cache_limit reads through a
# Dataset read on demand: e2e_remote_dataset.sh)
write_pairs "$T/www/pair" 18 || bad "the pair-record dataset could not be written"
pl=$(half "$T/www/pair")
expect_exit 0 "pair records (targets and fields) of varying sizes through a cache of half the dataset: the local epoch" \
  $PY "$CHK" equal "$T/www/pair" "http://127.0.0.1:$HP/pair" "$T/c5" "$pl" \
  '{"order": "random", "seed": 2, "batch_size": 2, "threads": 1, "targets": true, "size": 32, "pad": true}'

# one size with targets: the same way (the open checks every target before the shards arrive)
"$SHARDC" build "$T/img" --coco "$T/inst.json" -o "$T/www/det32" --size 32 --shard-samples 4 \
  --no-progress >/dev/null || bad "the 32x32 build failed"
fl=$(half "$T/www/det32")
expect_exit 0 "one size with targets through a cache of half the dataset: the local epoch" \
  $PY "$CHK" equal "$T/www/det32" "http://127.0.0.1:$HP/det32" "$T/c6" "$fl" \
  '{"order": "random", "seed": 4, "batch_size": 4, "threads": 1, "targets": true}'

# ---- a changed byte in the bucket is never used ----
cp -r "$T/www/det" "$T/www/bad"
$PY -c '
import struct, sys
p = sys.argv[1]
b = bytearray(open(p, "rb").read())
off = struct.unpack_from("<Q", b, 32)[0]
b[off + 24] ^= 1                     # entry 0: a bit of its label
open(p, "wb").write(b)
' "$T/www/bad/shard-00003.raw"
open_report "$T/bad.out" "http://127.0.0.1:$HP/bad" "$T/c2" "$LIMIT"
check "a byte changed in one shard's index is refused at open, naming the object" \
  grep -q "bad/shard-00003.raw: the object fails its check against the manifest: bad index hash" "$T/bad.out"
check "... and nothing of it is in the cache" bash -c "! ls -a '$T'/c2/*/ | grep -q 'shard-00003'"
[ -n "${VERBOSE:-}" ] && cat "$T/bad.out"

# ---- hdf5 shards: the bytes before and after the pixels, which the manifest's pins locate ----
"$SHARDC" build "$T/img" --coco "$T/inst.json" -o "$T/www/h5" --format hdf5 --shard-samples 4 \
  --no-progress >/dev/null || bad "the hdf5 build failed"
hl=$(( $(cat "$T"/www/h5/shard-*.h5 | wc -c) / 2 ))
: >"$LOG"
expect_exit 0 "hdf5, natural sizes with targets, random order, a cache of half the dataset: the local epoch" \
  $PY "$CHK" equal "$T/www/h5" "http://127.0.0.1:$HP/h5" "$T/c7" "$hl" "$kw"
check "... within the limit, shards evicted" grep -Eq "evicted=[1-9]" "$T/out"
check "the open fetched each shard's bytes before and after its pixels only, before any whole shard" $PY -c '
import json, re, sys
m = json.load(open(sys.argv[1]))
want = {}
for s in m["shards"]:
    pin = s["pin"]
    want[s["file"]] = sorted([pin["skip_offset"], s["bytes"] - pin["skip_offset"] - pin["skip_bytes"]])
reqs = [(m.group(1), int(m.group(2)), int(m.group(3))) for m in
        (re.search(r"\"GET /h5/(\S+) HTTP/[0-9.]+\" (\d+) (\d+)", l) for l in open(sys.argv[2])) if m]
assert reqs[0][:2] == ("manifest.json", 200), reqs[0]
opened, rest = reqs[1:1 + 2 * len(want)], reqs[1 + 2 * len(want):]
assert all(s == 206 for _, s, _ in opened), opened
got = {}
for f, _, n in opened:
    got.setdefault(f, []).append(n)
assert {f: sorted(v) for f, v in got.items()} == want, (got, want)
assert rest and rest[0][1] == 200, rest[:3]
print(len(opened), "ranges at open, then", len(rest), "whole shards")
' "$T/www/h5/manifest.json" "$LOG"
cp -r "$T/www/h5" "$T/www/h5bad"
$PY -c '
import json, sys
m = json.load(open(sys.argv[1] + "/manifest.json"))
s = m["shards"][2]
p = sys.argv[1] + "/" + s["file"]
b = bytearray(open(p, "rb").read())
b[s["bytes"] - 1] ^= 1               # the last byte after the pixels
open(p, "wb").write(b)
' "$T/www/h5bad"
open_report "$T/h5bad.out" "http://127.0.0.1:$HP/h5bad" "$T/c8" "$hl"
check "a byte changed after one hdf5 shard's pixels is refused at open, naming the object" \
  grep -q "h5bad/shard-00002.h5: the object fails its check against the manifest: .*pin" "$T/h5bad.out"
[ -n "${VERBOSE:-}" ] && cat "$T/h5bad.out"

# ---- lmdb shards: the index value each manifest entry's skeleton range locates ----
"$SHARDC" build "$T/img" --coco "$T/inst.json" -o "$T/www/lm" --format lmdb --shard-samples 4 \
  --no-progress >/dev/null || bad "the lmdb build failed"
ll=$(( $(cat "$T"/www/lm/shard-*.lmdb/data.mdb | wc -c) / 2 ))
: >"$LOG"
expect_exit 0 "lmdb, natural sizes with targets, random order, a cache of half the dataset: the local epoch" \
  $PY "$CHK" equal "$T/www/lm" "http://127.0.0.1:$HP/lm" "$T/c9" "$ll" "$kw"
check "... within the limit, shards evicted" grep -Eq "evicted=[1-9]" "$T/out"
check "the open fetched each shard's index value only (one range), before any whole shard" $PY -c '
import json, re, sys
m = json.load(open(sys.argv[1]))
want = {s["file"] + "/data.mdb": s["skeleton"]["bytes"] for s in m["shards"]}
reqs = [(m.group(1), int(m.group(2)), int(m.group(3))) for m in
        (re.search(r"\"GET /lm/(\S+) HTTP/[0-9.]+\" (\d+) (\d+)", l) for l in open(sys.argv[2])) if m]
assert reqs[0][:2] == ("manifest.json", 200), reqs[0]
opened, rest = reqs[1:1 + len(want)], reqs[1 + len(want):]
assert all(s == 206 for _, s, _ in opened), opened
assert {f: n for f, _, n in opened} == want, (opened, want)
assert rest and rest[0][1] == 200, rest[:3]
print(len(opened), "ranges at open, then", len(rest), "whole shards")
' "$T/www/lm/manifest.json" "$LOG"
cp -r "$T/www/lm" "$T/www/lmbad"
$PY -c '
import json, sys
m = json.load(open(sys.argv[1] + "/manifest.json"))
s = m["shards"][2]
p = sys.argv[1] + "/" + s["file"] + "/data.mdb"
b = bytearray(open(p, "rb").read())
b[s["skeleton"]["offset"] + s["skeleton"]["bytes"] - 1] ^= 1    # the last record of its index
open(p, "wb").write(b)
' "$T/www/lmbad"
open_report "$T/lmbad.out" "http://127.0.0.1:$HP/lmbad" "$T/c10" "$ll"
check "a byte changed in one lmdb shard's index value is refused at open, naming the object" \
  grep -q "lmbad/shard-00002.lmdb: the object fails its check against the manifest: .*index" "$T/lmbad.out"
[ -n "${VERBOSE:-}" ] && cat "$T/lmbad.out"
finish
