#!/usr/bin/env bash
# End to end: datasets at URLs (docs/REMOTE.md), against servers this test starts on 127.0.0.1
# and stops (trap): nginx over http and https (a certificate made here, given by AWS_CA_BUNDLE),
# s3rver (an S3 API server from npm, installed into $BUILD/npm on first use; it checks SigV4
# signatures with its key S3RVER/S3RVER) and a seeded fault-injecting proxy (503 SlowDown, bodies
# cut off halfway). What is asserted: shardc info/verify/cat on the URL; a Loader epoch from the
# URL equals the local one (bytes, labels, indices, order) over https, s3 and through the faults;
# a second open downloads no shard (nginx's log); two processes sharing a cache download each
# shard once; a truncated cached shard and a stale partial download are repaired; a changed byte
# in the bucket is never delivered (the error names the object); wrong credentials, a missing
# bucket and a closed port are clear errors that name the endpoint, never the secret; a download
# on a terminal shows its progress; lmdb shards (a folder each) read and repaired like shard
# files, and read as they arrive through a bounded cache; per-image sets (png0, jpeg) read through
# the cache, a damaged cached image fetched again, a changed served image refused naming it;
# lmdb shards of varying sizes read as they arrive from their index values; cache_limit= on
# per-image sets and on lmdb manifests without skeleton ranges refused with messages.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/remote_lib.sh"
need_tools "$NGINX" openssl node npm || { finish; exit; }
need_s3rver

# the dataset: 60 samples in shards of 8
serve_ds 20 8 || { finish; exit; }
nshards=$(ls "$T/www/ds" | grep -c '\.raw$')

# nginx: http and https (self-signed for 127.0.0.1)
HP=$($PY "$HELP" port); SP=$($PY "$HELP" port)
openssl req -x509 -newkey rsa:2048 -nodes -keyout "$T/key.pem" -out "$T/cert.pem" -days 1 \
  -subj /CN=127.0.0.1 -addext subjectAltName=IP:127.0.0.1 >/dev/null 2>&1
start_nginx "$HP" "$SP" || { finish; exit; }
HTTP=http://127.0.0.1:$HP/ds
HTTPS=https://127.0.0.1:$SP/ds
gets() { grep -c "GET /ds/$1" "$T/ngx/access.log"; }   # requests nginx served for files like $1

# ---- http: the CLI ----
export SHARDREAD_CACHE="$T/cache1"
"$SHARDC" info "$T/www/ds" >"$T/info.local"
expect_exit 0 "shardc info on an http URL" "$SHARDC" info "$HTTP"
check "it prints what the local info prints, but the path" \
  diff <(grep -v "$T" "$T/info.local") <(grep -v "$T" "$T/out")
check "it reports the $nshards shards downloaded" grep -q "$nshards of $nshards shard(s) downloaded" "$T/err"
expect_exit 0 "shardc verify on the URL" "$SHARDC" verify "$HTTP"
check "verify checked all 60 samples" grep -q "all 60 samples in $nshards shard(s) verified" "$T/err"
check "the second command downloaded no shard (nginx served each once)" \
  test "$(gets 'shard-.*raw')" -eq "$nshards"
"$SHARDC" cat "$T/www/ds" 17 -o "$T/cat.local" 2>/dev/null
expect_exit 0 "shardc cat on the URL" "$SHARDC" cat "$HTTP" 17 -o "$T/cat.remote"
check "cat gives the local bytes" cmp -s "$T/cat.local" "$T/cat.remote"

# ---- https: a Loader epoch, then the cache is used ----
export AWS_CA_BUNDLE="$T/cert.pem"
before=$(gets 'shard-.*raw')
expect_exit 0 "a shuffled Loader epoch over https equals the local one" \
  $PY "$HELP" epoch "$T/www/ds" "$HTTPS" "$T/cache2" '{"batch_size": 7, "shuffle": true, "seed": 5}'
check "it downloaded each shard once" test "$(( $(gets 'shard-.*raw') - before ))" -eq "$nshards"
before=$(gets 'shard-.*raw'); mbefore=$(gets manifest.json)
expect_exit 0 "a second open (rank 1 of 2) equals the local one" \
  $PY "$HELP" epoch "$T/www/ds" "$HTTPS" "$T/cache2" '{"batch_size": 5, "rank": 1, "world": 2}'
check "it downloaded no shard, only the manifest" \
  test "$(gets 'shard-.*raw')" -eq "$before" -a "$(gets manifest.json)" -eq $((mbefore + 1))
# a mixture with one stream at the URL equals the same mixture of local streams
expect_exit 0 "a mixture of a local and an https stream equals the all-local mixture" \
  $PY - "$T/www/ds" "$HTTPS" "$T/cache2" <<'PYM'
import sys, numpy as np, shardread
local, url, cache = sys.argv[1:4]
def epoch(streams):
    out = []
    for b in shardread.Loader(streams, batch_size=6, shuffle=True, seed=3, cache=cache,
                              return_streams=True):
        out.append([np.asarray(x).copy() for x in b])
    return out
a = epoch([(local, 0.7), (url, 0.3)])
b = epoch([(local, 0.7), (local, 0.3)])
assert len(a) == len(b) > 0
for x, y in zip(a, b):
    assert len(x) == len(y) and all(np.array_equal(p, q) for p, q in zip(x, y))
PYM
# transform= on a URL reads its channel count through the caller's cache, not the default one
mkdir -p "$T/home"
expect_exit 0 "Loader(URL, transform=, cache=) opens" env -u SHARDREAD_CACHE HOME="$T/home" \
  $PY - "$HTTPS" "$T/cache_tf" <<'PYT'
import sys, shardread
import torchvision.transforms as T
n = sum(1 for _ in shardread.Loader(sys.argv[1], batch_size=8, cache=sys.argv[2],
                                    transform=T.Compose([T.RandomHorizontalFlip(), T.ToTensor()])))
assert n > 0, n
PYT
check "... and downloaded into that cache alone" \
  bash -c "[ ! -e '$T/home/.cache/shardread' ] && [ -n \"\$(ls -A '$T/cache_tf')\" ]"
# $SHARDREAD_CACHE is the package's and the programs' default; the library reads no
# environment (given no cache, it takes ~/.cache/shardread)
mkdir -p "$T/home2"
expect_exit 0 "the library without a cache: ~/.cache/shardread, whatever \$SHARDREAD_CACHE says" \
  env SHARDREAD_CACHE="$T/cache_env" HOME="$T/home2" $PY -c '
import sys, shardread
from shardread import _shardread
d = _shardread._fetch(sys.argv[1], None)
assert d.startswith(sys.argv[2] + "/.cache/shardread/"), d
d = shardread.Dataset(sys.argv[1]).info        # the package: $SHARDREAD_CACHE
' "$HTTPS" "$T/home2"
check "... and the package's Dataset downloaded into \$SHARDREAD_CACHE" \
  bash -c "[ -n \"\$(ls -A '$T/cache_env' 2>/dev/null)\" ]"
unset AWS_CA_BUNDLE
expect_exit 3 "https without the test's CA is refused" \
  env SHARDREAD_CACHE="$T/cache3" "$SHARDC" info "$HTTPS"
check "naming the certificate problem" grep -qi "certificate" "$T/err"

# ---- the cache repairs itself ----
c1=$(ls -d "$T"/cache1/*/)
truncate -s 1000 "$c1/shard-00002.raw"
rm "$c1/shard-00004.raw"; head -c 5000 /dev/urandom >"$c1/.shard-00004.raw.part"
b2=$(gets shard-00002.raw); b4=$(gets shard-00004.raw)
expect_exit 0 "info after a cached shard was truncated and a partial download is junk" \
  "$SHARDC" verify "$HTTP"
check "the truncated shard was fetched again" test "$(gets shard-00002.raw)" -eq $((b2 + 1))
check "the junk partial was resumed, failed its check, and was fetched whole" \
  test "$(gets shard-00004.raw)" -eq $((b4 + 2))
check "no partial file is left" test -z "$(ls -A "$c1" | grep '\.part$')"

# ---- two processes on one cache: each shard downloaded once ----
export SHARDREAD_CACHE="$T/cache4"
b=$(gets 'shard-.*raw')
"$SHARDC" info "$HTTP" >"$T/p1" 2>&1 & p1=$!
"$SHARDC" info "$HTTP" >"$T/p2" 2>&1 & p2=$!
wait $p1; r1=$?; wait $p2; r2=$?
check "two concurrent opens of one cache both succeed" test $r1 -eq 0 -a $r2 -eq 0
check "each shard was downloaded once between them" test "$(( $(gets 'shard-.*raw') - b ))" -eq "$nshards"

# ---- faults: 503 SlowDown and bodies cut off, seeded ----
FP=$($PY "$HELP" port)
$PY "$HELP" faultproxy "$FP" "127.0.0.1:$HP" 7 0.2 "$T/faults.log" &
pids+=($!)
$PY "$HELP" wait "$FP"
expect_exit 0 "an epoch through 20% 503s and 20% cut bodies equals the local one" \
  $PY "$HELP" epoch "$T/www/ds" "http://127.0.0.1:$FP/ds" "$T/cache5" '{"batch_size": 8, "shuffle": true, "seed": 9}'
expect_exit 0 "shardc verify through the same faults" \
  env SHARDREAD_CACHE="$T/cache5b" "$SHARDC" verify "http://127.0.0.1:$FP/ds"
check "the proxy answered 503 at least once" grep -q '^503 ' "$T/faults.log"
check "the proxy cut a body at least once" grep -q '^cut ' "$T/faults.log"
check "a cut body was resumed with a Range request" grep -Eq '^206 .* bytes=[1-9][0-9]*-' "$T/faults.log"

# ---- progress of a download on a terminal (script(1) gives shardc one) ----
script -qec "env SHARDREAD_CACHE='$T/cache13' '$SHARDC' verify '$HTTP'" /dev/null >"$T/tty" 2>&1
check "a download on a terminal shows its progress: bytes of the total, rate, ETA" \
  grep -Eq 'shardc: downloaded ([0-9.]+ [KMG]?i?B) of \1 \(100%\), [0-9.]+ [KMG]?i?B/s, ETA 0:00' "$T/tty"
check "piped, no progress line" bash -c "! grep -q 'downloaded .* of ' '$T/err'"

# ---- lmdb shards: a folder each, its data.mdb fetched and checked as a shard file ----
"$SHARDC" build "$T/src" -o "$T/www/lm" --size 16x12 --shard-samples 8 --format lmdb \
  --no-progress >/dev/null || bad "shardc build --format lmdb failed"
LM=http://127.0.0.1:$HP/lm
export SHARDREAD_CACHE="$T/cache14"
expect_exit 0 "shardc verify on an lmdb dataset at a URL" "$SHARDC" verify "$LM"
check "it verified all 60 samples of the $nshards shards" \
  grep -q "all 60 samples in $nshards shard(s) verified" "$T/err"
"$SHARDC" cat "$T/www/lm" 33 -o "$T/lmcat.local" 2>/dev/null
expect_exit 0 "shardc cat on it" "$SHARDC" cat "$LM" 33 -o "$T/lmcat.remote"
check "cat gives the local bytes" cmp -s "$T/lmcat.local" "$T/lmcat.remote"
expect_exit 0 "a shuffled Loader epoch of the lmdb URL equals the local one" \
  $PY "$HELP" epoch "$T/www/lm" "$LM" "$T/cache15" '{"batch_size": 7, "shuffle": true, "seed": 4}'
lc=$(ls -d "$T"/cache14/*/)
check "the cache holds each shard as a folder with its data.mdb, no partial left" \
  bash -c "test \$(ls '$lc'/*.lmdb/data.mdb | wc -l) -eq $nshards && ! ls -A '$lc' | grep -q part"
truncate -s 4096 "$lc/shard-00001.lmdb/data.mdb"
rm -r "$lc/shard-00002.lmdb"; mkdir "$lc/.shard-00002.lmdb.part"
head -c 3000 /dev/urandom >"$lc/.shard-00002.lmdb.part/data.mdb"
lmgets() { grep -c 'GET /lm/.*lmdb/data.mdb' "$T/ngx/access.log"; }
b1=$(lmgets)
expect_exit 0 "verify after a cached data.mdb was truncated and a partial one is junk" \
  "$SHARDC" verify "$LM"
check "the truncated one was fetched again; the junk resumed, failed, and was fetched whole" \
  test "$(lmgets)" -eq $((b1 + 3))
check "no partial folder is left" bash -c "! ls -A '$lc' | grep -q part"
# read as they arrive, through a cache of half the dataset (its shards of one size)
lmhalf=$(( $(cat "$T"/www/lm/shard-*.lmdb/data.mdb | wc -c) / 2 ))
expect_exit 0 "a quasi epoch of the lmdb URL through a cache of half its shards equals the local one" \
  $PY "$ROOT/tests/remote_cache_check.py" equal "$T/www/lm" "$LM" "$T/cache16" "$lmhalf" \
  '{"order": "quasi", "seed": 3, "quasi_window": 1, "batch_size": 4, "threads": 1}'
check "... the folder's data.mdb files within the limit, shards evicted" \
  grep -Eq "evicted=[1-9]" "$T/out"
check "... each shard a folder with its data.mdb, no partial folder left" \
  bash -c "ls '$T'/cache16/*/*.lmdb/data.mdb >/dev/null && ! ls -A '$T'/cache16/*/ | grep -q part"
# samples of varying sizes: each shard's index value first (the manifest's skeleton range), a
# manifest without those ranges (a build before lmdb 1.1) refused with a limit
"$SHARDC" build "$T/src" -o "$T/www/lmv" --shard-samples 8 --format lmdb --no-progress \
  >/dev/null || bad "shardc build --format lmdb (natural sizes) failed"
expect_exit 0 "lmdb shards of varying sizes through a cache of half the dataset equal the local epoch" \
  $PY "$ROOT/tests/remote_cache_check.py" equal "$T/www/lmv" "http://127.0.0.1:$HP/lmv" \
  "$T/cache17" $(( $(cat "$T"/www/lmv/shard-*.lmdb/data.mdb | wc -c) / 2 )) \
  '{"order": "random", "seed": 6, "batch_size": 2, "threads": 1, "size": 16}'
cp -r "$T/www/lmv" "$T/www/lmold"
$PY -c '
import json, sys
p = sys.argv[1] + "/manifest.json"
m = json.load(open(p))
for s in m["shards"]:
    del s["skeleton"]
json.dump(m, open(p, "w"))' "$T/www/lmold"
expect_exit 1 "cache_limit= on lmdb shards of varying sizes without skeleton ranges is refused" $PY -c "
import shardread, sys
try:
    shardread.Loader('http://127.0.0.1:$HP/lmold', batch_size=4, size=16, cache='$T/cache18',
                     cache_limit='1GiB')
except shardread.Error as e:
    print(e, file=sys.stderr); sys.exit(1)"
check "saying why" grep -q "shards opened as they arrive need samples of one size and no targets.*(needed by cache_limit)" "$T/err"

# ---- per-image sets: each shard's index and the image files it names ----
for f in png0 jpeg; do
  "$SHARDC" build "$T/src" -o "$T/www/$f" --size 16x12 --shard-samples 8 --format $f \
    --no-progress >/dev/null || bad "shardc build --format $f failed"
  export SHARDREAD_CACHE="$T/cache-$f"
  "$SHARDC" info "$T/www/$f" >"$T/info.$f"
  expect_exit 0 "shardc info on a $f set at a URL" "$SHARDC" info "http://127.0.0.1:$HP/$f"
  check "it prints what the local info prints, but the path" \
    diff <(grep -v "$T" "$T/info.$f") <(grep -v "$T" "$T/out")
  imgs=$(grep -c "GET /$f/.*/[0-9]*\.\(png\|jpg\) " "$T/ngx/access.log")
  check "it fetched each of the 60 images once" test "$imgs" -eq 60
  expect_exit 0 "shardc verify on it (a second command: nothing fetched again)" \
    "$SHARDC" verify "http://127.0.0.1:$HP/$f"
  check "all 60 samples verified" grep -q "all 60 samples in $nshards shard(s) verified" "$T/err"
  check "no image fetched again" \
    test "$(grep -c "GET /$f/.*/[0-9]*\.\(png\|jpg\) " "$T/ngx/access.log")" -eq 60
  expect_exit 0 "a shuffled Loader epoch of the $f URL equals the local one" \
    $PY "$HELP" epoch "$T/www/$f" "http://127.0.0.1:$HP/$f" "$T/cache-$f" \
    '{"batch_size": 7, "shuffle": true, "seed": 4}'
done
pc=$(ls -d "$T"/cache-png0/*/)
check "the cache holds each index and image, no partial file left" bash -c \
  "test \$(ls '$pc'/*.idx | wc -l) -eq $nshards -a \$(find '$pc' -name '*.png' | wc -l) -eq 60 &&
   ! find '$pc' -name '*.part' | grep -q ."
# a shard whose index is gone from the cache, one of its images damaged (same size): its index
# is fetched again, that image again, the others kept
rm "$pc/shard-00001.idx"
img=$(find "$pc" -name '00000009.png')
printf '\x01' | dd of="$img" bs=1 seek=100 conv=notrunc 2>/dev/null
b1=$(grep -c "GET /png0/.*/[0-9]*\.png " "$T/ngx/access.log")
export SHARDREAD_CACHE="$T/cache-png0"
expect_exit 0 "verify after a cached index went and an image was damaged" \
  "$SHARDC" verify "http://127.0.0.1:$HP/png0"
check "only the damaged image was fetched again" \
  test "$(grep -c "GET /png0/.*/[0-9]*\.png " "$T/ngx/access.log")" -eq $((b1 + 1))
# a byte changed in a served image: refused, naming the image object
cp -r "$T/www/png0" "$T/www/pbad"
img=$(find "$T/www/pbad" -name '00000020.png')
printf '\x01' | dd of="$img" bs=1 seek=100 conv=notrunc 2>/dev/null
rel=${img#"$T/www/"}
expect_exit 1 "a changed byte in a served image is refused" \
  "$SHARDC" info "http://127.0.0.1:$HP/pbad"
check "naming the image object" \
  grep -q "http://127.0.0.1:$HP/$rel: the object fails its check against its shard's index: file hash mismatch" "$T/err"
check "and its shard's index is not in the cache" \
  bash -c "! ls '$T'/cache-png0/*/shard-00002.idx 2>/dev/null | grep -q pbad"
expect_exit 1 "cache_limit= on a per-image set is refused" $PY -c "
import shardread, sys
try:
    shardread.Loader('http://127.0.0.1:$HP/png0', batch_size=4, cache='$T/cache-pl',
                     cache_limit='1GiB')
except shardread.Error as e:
    print(e, file=sys.stderr); sys.exit(1)"
check "saying why" grep -q "shards read as they arrive must be raw, hdf5 or lmdb (this dataset's are png0) (needed by cache_limit)" "$T/err"

# ---- s3rver ----
S3P=$($PY "$HELP" port)
start_s3rver "$S3P" || { finish; exit; }
export AWS_ACCESS_KEY_ID=S3RVER AWS_SECRET_ACCESS_KEY=S3RVER AWS_REGION=us-east-1
export AWS_ENDPOINT_URL_S3=http://127.0.0.1:$S3P
unset AWS_PROFILE AWS_SESSION_TOKEN AWS_NO_SIGN_REQUEST
$PY "$HELP" upload "$AWS_ENDPOINT_URL_S3" bkt data/ds "$T/www/ds" >/dev/null ||
  bad "upload to s3rver failed"
# reads go through proxies that check every signature with botocore's signer (s3rver's own
# check lets unsigned-looking requests through)
GP=$($PY "$HELP" port); TP=$($PY "$HELP" port)
$PY "$HELP" sigproxy "$GP" "127.0.0.1:$S3P" S3RVER S3RVER "$T/sig.log" &
pids+=($!)
$PY "$HELP" sigproxy "$TP" "127.0.0.1:$S3P" S3RVER S3RVER "$T/sigt.log" tok-123 &
pids+=($!)
$PY "$HELP" wait "$GP" && $PY "$HELP" wait "$TP" || bad "the signature proxies did not start"
export AWS_ENDPOINT_URL_S3=http://127.0.0.1:$GP
export SHARDREAD_CACHE="$T/cache6"
expect_exit 0 "shardc verify on s3://bkt/data/ds" "$SHARDC" verify s3://bkt/data/ds
check "verify checked all 60 samples" grep -q "all 60 samples in $nshards shard(s) verified" "$T/err"
expect_exit 0 "a quasi-random Loader epoch from s3 equals the local one" \
  $PY "$HELP" epoch "$T/www/ds" s3://bkt/data/ds "$T/cache7" '{"batch_size": 6, "order": "quasi", "seed": 2}'

check "every request carried a signature botocore reproduces" \
  bash -c "grep -q '^ok ' '$T/sig.log' && ! grep -q '^bad ' '$T/sig.log'"
expect_exit 0 "a session token is sent, and signed" env AWS_SESSION_TOKEN=tok-123 \
  AWS_ENDPOINT_URL_S3=http://127.0.0.1:$TP SHARDREAD_CACHE="$T/cache11" "$SHARDC" info s3://bkt/data/ds
expect_exit 3 "without it that endpoint refuses" \
  env AWS_ENDPOINT_URL_S3=http://127.0.0.1:$TP SHARDREAD_CACHE="$T/cache12" "$SHARDC" info s3://bkt/data/ds
check "naming the server's code" grep -q "403 InvalidToken" "$T/err"

# credentials from a profile in a credentials file of the test's own
cat >"$T/creds" <<'EOF'
[other]
aws_access_key_id = S3RVER
aws_secret_access_key = S3RVER
EOF
expect_exit 0 "credentials from AWS_PROFILE's section of the shared credentials file" \
  env -u AWS_ACCESS_KEY_ID -u AWS_SECRET_ACCESS_KEY AWS_PROFILE=other \
  AWS_SHARED_CREDENTIALS_FILE="$T/creds" SHARDREAD_CACHE="$T/cache8" "$SHARDC" info s3://bkt/data/ds

SECRET=Zq7wrongSecretValue
expect_exit 3 "a wrong secret is refused" \
  env AWS_SECRET_ACCESS_KEY=$SECRET SHARDREAD_CACHE="$T/cache9" "$SHARDC" info s3://bkt/data/ds
check "the message names the server's code" grep -q "HTTP 403 SignatureDoesNotMatch" "$T/err"
check "... the object, the endpoint and the bucket" \
  grep -q "s3://bkt/data/ds/manifest.json from http://127.0.0.1:$GP (bucket bkt)" "$T/err"
check "the secret is in no message" bash -c "! grep -q $SECRET '$T/err' '$T/out'"
expect_exit 3 "a missing bucket" "$SHARDC" info s3://nobucket/ds
check "names NoSuchBucket" grep -q "404 NoSuchBucket" "$T/err"
DEAD=$($PY "$HELP" port)
expect_exit 3 "a closed port" env AWS_ENDPOINT_URL_S3=http://127.0.0.1:$DEAD "$SHARDC" info s3://bkt/data/ds
check "names the endpoint and the refused connection (after retries)" \
  grep -q "127.0.0.1:$DEAD.*after [0-9]* tries" "$T/err"
expect_exit 3 "no credentials at all is a clear error" \
  env -u AWS_ACCESS_KEY_ID -u AWS_SECRET_ACCESS_KEY HOME="$T" "$SHARDC" info s3://bkt/data/ds
check "naming what to set" grep -q "no AWS credentials: set AWS_ACCESS_KEY_ID" "$T/err"

# a byte changed in the bucket is never delivered
cp -r "$T/www/ds" "$T/bad"
f="$T/bad/shard-00003.raw"; sz=$(stat -c %s "$f")
printf '\x5a' | dd of="$f" bs=1 seek=$((sz / 2)) conv=notrunc 2>/dev/null
cmp -s "$f" "$T/www/ds/shard-00003.raw" && printf '\xa5' | dd of="$f" bs=1 seek=$((sz / 2)) conv=notrunc 2>/dev/null
$PY "$HELP" upload "http://127.0.0.1:$S3P" bkt bad/ds "$T/bad" >/dev/null
export SHARDREAD_CACHE="$T/cache10"
expect_exit 1 "shardc info on a bucket with a damaged shard fails" "$SHARDC" info s3://bkt/bad/ds
check "naming the object and the check" \
  grep -q "s3://bkt/bad/ds/shard-00003.raw: the object fails its check against the manifest" "$T/err"
check "the damaged shard is not in the cache" bash -c "! ls '$T'/cache10/*/shard-00003.raw 2>/dev/null"
$PY - "$T/err2" <<EOF
import sys, shardread
try:
    for _ in shardread.Loader("s3://bkt/bad/ds", batch_size=4):   # shards arrive as read
        pass
except shardread.Error as e:
    open(sys.argv[1], "w").write(type(e).__name__ + ": " + str(e))
EOF
check "the Loader raises, naming the object" grep -q "shard-00003.raw: the object fails its check" "$T/err2"

finish
