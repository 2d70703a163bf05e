#!/usr/bin/env bash
# End to end: datasets written to s3:// (docs/REMOTE.md, "Writing"), against servers this test
# starts on 127.0.0.1 and stops (trap): s3rver (installed into $BUILD/npm on first use, as
# e2e_remote.sh does), a proxy in front of it that recomputes every request's SigV4 signature
# with botocore's signer and checks each body against its signed hash (every write goes through
# it), and a proxy that answers 503 SlowDown to every upload after the first N. What is asserted:
# build -o s3:// writes objects equal, byte for byte, to the files of a local build with the same
# options (single PUTs, and multipart uploads with a small part size); --part I/N then merge on
# s3:// equals local parts then merge; an upload that fails halfway leaves no manifest, a second
# build without --resume is refused, and --resume completes it to the same bytes; the staging
# folder is empty afterwards; a detection build's summary counts the boxes a local build
# counts, resumed too (its shards leave as they close); lmdb shards (a folder each: its data.mdb
# an object) built, resumed, and as parts merged equal to local ones; several shards uploaded at once, each
# only once the journal object holds its rejects; shardread.build to a URL; wrong
# credentials and http(s):// outputs are clear errors that never show the secret.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/remote_lib.sh"
need_tools node npm || { finish; exit; }
need_s3rver
export ROOT   # the Python snippets below import tests/remote_servers.py

# the dataset: 60 samples in shards of 8, built locally as the reference
"$MKSAMPLE" "$T/src" --classes 3 --per-class 20 --min-side 20 --max-side 40 --no-broken --quiet
OPTS=(--size 16x12 --shard-samples 8 --no-progress)
"$SHARDC" build "$T/src" -o "$T/local" "${OPTS[@]}" 2>/dev/null || { bad "local build failed"; finish; exit; }
for i in 0 1 2; do
  "$SHARDC" build "$T/src" -o "$T/lparts" "${OPTS[@]}" --part $i/3 2>/dev/null || bad "local part $i"
done
"$SHARDC" merge "$T/lparts" 2>/dev/null || bad "local merge failed"

S3P=$($PY "$HELP" port)
start_s3rver "$S3P" || { finish; exit; }
export AWS_ACCESS_KEY_ID=S3RVER AWS_SECRET_ACCESS_KEY=S3RVER AWS_REGION=us-east-1
unset AWS_PROFILE AWS_SESSION_TOKEN AWS_NO_SIGN_REQUEST AWS_ENDPOINT_URL
mkdir -p "$T/empty"
$PY "$HELP" upload "http://127.0.0.1:$S3P" bkt none "$T/empty" >/dev/null || bad "cannot create the bucket"
GP=$($PY "$HELP" port); FP=$($PY "$HELP" port)
$PY "$HELP" sigproxy "$GP" "127.0.0.1:$S3P" S3RVER S3RVER "$T/sig.log" &
pids+=($!)
# the faults sit in front of the checking proxy: what gets through is checked too
$PY "$HELP" writefaults "$FP" "127.0.0.1:$GP" 4 "$T/faults.log" &
pids+=($!)
$PY "$HELP" wait "$GP" && $PY "$HELP" wait "$FP" || bad "the proxies did not start"
export AWS_ENDPOINT_URL_S3=http://127.0.0.1:$GP
export SHARDREAD_CACHE="$T/cache"
keys() { $PY "$HELP" keys "http://127.0.0.1:$S3P" bkt "$1"; }   # PREFIX: its keys, one a line
same() { $PY "$HELP" dump "http://127.0.0.1:$S3P" bkt "$1" "$2" >"$T/dump" 2>&1 || { cat "$T/dump"; false; }; }

# ---- one build ----
expect_exit 0 "shardc build -o s3://bkt/one" "$SHARDC" build "$T/src" -o s3://bkt/one "${OPTS[@]}"
check "it names the URL in its summary" grep -q "in 8 shard(s), .* to s3://bkt/one;" "$T/err"
check "its objects are the local build's files, byte for byte" same one "$T/local"
check "every request carried a signature and body hash botocore reproduces" \
  bash -c "grep -q '^ok PUT ' '$T/sig.log' && ! grep -q '^bad ' '$T/sig.log'"
check "the staging folder is left empty" test -z "$(ls -A "$T/cache/upload" 2>/dev/null)"
expect_exit 2 "a second build into it is refused" "$SHARDC" build "$T/src" -o s3://bkt/one "${OPTS[@]}"
check "saying what to do" grep -q "s3://bkt/one already holds a dataset (use --resume .* or --force" "$T/err"
expect_exit 0 "--force replaces it" "$SHARDC" build "$T/src" -o s3://bkt/one "${OPTS[@]}" --force
check "with the same objects" same one "$T/local"

# ---- multipart: parts of 4000 bytes (shards are 9216 bytes: three parts each) ----
: >"$T/sig.log"
expect_exit 0 "a build with multipart uploads (SHARDC_UPLOAD_PART_SIZE=4000)" \
  env SHARDC_UPLOAD_PART_SIZE=4000 "$SHARDC" build "$T/src" -o s3://bkt/multi "${OPTS[@]}"
check "the shards went up in parts" test "$(grep -c '^ok PUT .*shard-00000.raw?partNumber=' "$T/sig.log")" -eq 3
check "each upload was created and completed" test "$(grep -c '^ok POST .*shard-00000.raw?upload' "$T/sig.log")" -eq 2
check "the objects are the local build's files" same multi "$T/local"
expect_exit 0 "--upload-part-size does the same" \
  "$SHARDC" build "$T/src" -o s3://bkt/multi2 "${OPTS[@]}" --upload-part-size 5000 --staging "$T/stage"
check "its objects are the local files too" same multi2 "$T/local"
check "the staging folder given is left empty" test -z "$(ls -A "$T/stage")"
check "no request failed its check" bash -c "! grep -q '^bad ' '$T/sig.log'"

# ---- parts and merge ----
for i in 0 1 2; do
  expect_exit 0 "part $i of 3 to s3://bkt/parts" "$SHARDC" build "$T/src" -o s3://bkt/parts "${OPTS[@]}" --part $i/3
done
expect_exit 0 "shardc merge s3://bkt/parts" "$SHARDC" merge s3://bkt/parts
check "it reports the merge" grep -q "merged 3 part(s) into s3://bkt/parts: 60 samples" "$T/err"
check "the bucket holds what local parts and merge hold, byte for byte" same parts "$T/lparts"
expect_exit 0 "the merged dataset reads and verifies from the bucket" "$SHARDC" verify s3://bkt/parts
check "all 60 samples" grep -q "all 60 samples in 9 shard(s) verified" "$T/err"
expect_exit 0 "a Loader epoch of the merged dataset equals the one-machine build's" \
  $PY "$HELP" epoch "$T/local" s3://bkt/parts "$T/cache2" '{"batch_size": 7, "shuffle": true, "seed": 4}'

# ---- an upload that fails halfway, then --resume ----
expect_exit 3 "a build whose uploads fail after 4 objects fails" \
  env AWS_ENDPOINT_URL_S3=http://127.0.0.1:$FP "$SHARDC" build "$T/src" -o s3://bkt/cut "${OPTS[@]}"
check "naming the object, endpoint, bucket and the server's code" \
  grep -q "cannot upload s3://bkt/cut/shard-0000[0-9].raw to http://127.0.0.1:$FP (bucket bkt): HTTP 503 SlowDown.*(after 6 tries)" "$T/err"
check "and nothing else about the staging folder" bash -c "! grep -q '$T/cache' '$T/err'"
keys cut/ >"$T/keys"
check "some shards went up" grep -q "cut/shard-00000.raw" "$T/keys"
check "but no manifest" bash -c "! grep -q manifest.json '$T/keys'"
expect_exit 3 "reading it fails: there is no dataset yet" "$SHARDC" info s3://bkt/cut
expect_exit 2 "a build without --resume is refused" "$SHARDC" build "$T/src" -o s3://bkt/cut "${OPTS[@]}"
check "naming the unfinished build" grep -q "s3://bkt/cut holds the objects of an unfinished build (use --resume" "$T/err"
expect_exit 0 "--resume completes it" "$SHARDC" build "$T/src" -o s3://bkt/cut "${OPTS[@]}" --resume
check "keeping the shards that went up" grep -q "resuming: kept [1-9] finished shard(s)" "$T/err"
check "to the local build's bytes (the journal object gone)" same cut "$T/local"
check "no request failed its check" bash -c "! grep -q '^bad ' '$T/sig.log'"

# ---- a detection build: its summary counts the boxes of shards that left with their upload ----
"$MKSAMPLE" "$T/det" --coco "$T/det.json" --per-class 6 --min-side 40 --max-side 64 --seed 7 \
  --quiet || bad "mksample --coco failed"
DOPTS=(--coco "$T/det.json" --size 32x24 --shard-samples 4 --no-progress)
"$SHARDC" build "$T/det" -o "$T/dlocal" "${DOPTS[@]}" 2>"$T/dlocal.err" || bad "local detection build failed"
grep "boxes stored" "$T/dlocal.err" >"$T/dboxes"
check "the local detection build stores boxes" grep -q "shardc: [1-9][0-9]* boxes stored" "$T/dboxes"
expect_exit 0 "shardc build --coco -o s3://bkt/det" "$SHARDC" build "$T/det" -o s3://bkt/det "${DOPTS[@]}"
check "its summary counts the boxes the local build counts" bash -c "grep 'boxes stored' '$T/err' | cmp -s - '$T/dboxes'"
check "its objects are the local build's files" same det "$T/dlocal"
faults_proxy() {   # N LOG: another proxy refusing every upload after N, on port $FPN
  FPN=$($PY "$HELP" port)
  $PY "$HELP" writefaults "$FPN" "127.0.0.1:$GP" "$1" "$2" &
  pids+=($!)
  $PY "$HELP" wait "$FPN" || bad "the fault proxy of $2 did not start"
}
faults_proxy 2 "$T/faults2.log"
# one shard at a time, so that the 2 PUTs that go through are the first shard's journal and the
# shard itself: each shard's journal differs (it counts the boxes) and goes up before it, and
# with several lanes a second lane's journal can reach the proxy before the first lane's shard
expect_exit 3 "a detection build whose uploads fail after 2 objects fails" \
  env AWS_ENDPOINT_URL_S3=http://127.0.0.1:$FPN "$SHARDC" build "$T/det" -o s3://bkt/dcut \
  "${DOPTS[@]}" --upload-threads 1
expect_exit 0 "--resume completes it" "$SHARDC" build "$T/det" -o s3://bkt/dcut "${DOPTS[@]}" --resume
check "keeping the shards that went up" grep -q "resuming: kept [1-9] finished shard(s)" "$T/err"
check "and counting their boxes with the new ones'" bash -c "grep 'boxes stored' '$T/err' | cmp -s - '$T/dboxes'"
check "to the local build's bytes" same dcut "$T/dlocal"

# ---- lmdb: each shard a folder, its data.mdb one object ----
LOPTS=(--size 16x12 --shard-samples 8 --format lmdb --no-progress)
"$SHARDC" build "$T/src" -o "$T/lmlocal" "${LOPTS[@]}" 2>/dev/null || bad "local lmdb build failed"
for i in 0 1; do
  "$SHARDC" build "$T/src" -o "$T/lmparts" "${LOPTS[@]}" --part $i/2 2>/dev/null || bad "local lmdb part $i"
done
"$SHARDC" merge "$T/lmparts" 2>/dev/null || bad "local lmdb merge failed"
expect_exit 0 "shardc build --format lmdb -o s3://bkt/lm" "$SHARDC" build "$T/src" -o s3://bkt/lm "${LOPTS[@]}"
check "its objects (NAME.lmdb/data.mdb) are the local build's files, byte for byte" same lm "$T/lmlocal"
check "the staging folder is left empty" test -z "$(ls -A "$T/cache/upload" 2>/dev/null)"
expect_exit 0 "a Loader epoch of it equals the local lmdb build's" \
  $PY "$HELP" epoch "$T/lmlocal" s3://bkt/lm "$T/cache3" '{"batch_size": 7, "shuffle": true, "seed": 2}'
faults_proxy 4 "$T/faults4.log"
expect_exit 3 "an lmdb build whose uploads fail after 4 objects fails" \
  env AWS_ENDPOINT_URL_S3=http://127.0.0.1:$FPN "$SHARDC" build "$T/src" -o s3://bkt/lmcut \
  "${LOPTS[@]}" --upload-threads 1
check "some shards went up, no manifest" \
  bash -c "keys() { $PY '$HELP' keys http://127.0.0.1:$S3P bkt \$1; }; keys lmcut/ | grep -q 'lmcut/shard-00000.lmdb/data.mdb' && ! keys lmcut/ | grep -q manifest.json"
expect_exit 0 "--resume completes it" "$SHARDC" build "$T/src" -o s3://bkt/lmcut "${LOPTS[@]}" --resume
check "keeping the shards that went up" grep -q "resuming: kept [1-9] finished shard(s)" "$T/err"
check "to the local build's bytes" same lmcut "$T/lmlocal"
for i in 0 1; do
  expect_exit 0 "lmdb part $i of 2 to s3://bkt/lmparts" \
    "$SHARDC" build "$T/src" -o s3://bkt/lmparts "${LOPTS[@]}" --part $i/2
done
expect_exit 0 "shardc merge s3://bkt/lmparts" "$SHARDC" merge s3://bkt/lmparts
check "the bucket holds what local lmdb parts and merge hold" same lmparts "$T/lmparts"
expect_exit 0 "the merged lmdb dataset verifies from the bucket" "$SHARDC" verify s3://bkt/lmparts
check "all 60 samples" grep -q "all 60 samples in .* shard(s) verified" "$T/err"

# ---- several uploads at once; each shard's rejects reach the bucket before the shard ----
"$MKSAMPLE" "$T/rsrc" --classes 3 --per-class 20 --min-side 20 --max-side 40 --seed 3 --quiet
"$SHARDC" build "$T/rsrc" -o "$T/rlocal" "${OPTS[@]}" 2>/dev/null
test $? -eq 1 || bad "the local build with rejects did not finish with rejects"
order_proxy() {
  OP=$($PY "$HELP" port)
  $PY "$HELP" uploadorder "$OP" "127.0.0.1:$GP" "$1" &
  pids+=($!)
  $PY "$HELP" wait "$OP" || bad "the upload-order proxy did not start"
}
order() {   # order.json EXPR: EXPR holds of its record (most, shards, final)
  $PY - "$1" "$2" <<'EOF'
import json, sys
r = json.load(open(sys.argv[1]))
final = set(r["journals"][-1]) if r["journals"] else set()
ok = eval(sys.argv[2], {"most": r["most"], "shards": r["shards"], "final": final})
ok or print(r["most"], r["shards"], sorted(final), file=sys.stderr)
sys.exit(0 if ok else 1)
EOF
}
order_proxy "$T/order3.json"
expect_exit 1 "a build with rejects, 3 shards uploaded at once (--upload-threads 3)" \
  env AWS_ENDPOINT_URL_S3=http://127.0.0.1:$OP "$SHARDC" build "$T/rsrc" -o s3://bkt/rej "${OPTS[@]}" \
  --upload-threads 3
check "its objects are the local build's files, rejects.tsv too" same rej "$T/rlocal"
check "more than one shard was under way at once" order "$T/order3.json" "most >= 2"
check "its rejects are in the journals" order "$T/order3.json" "len(final) > 0 and len(shards) == 8"
check "every shard's PUT began with the rejects of its inputs in the journal object" \
  order "$T/order3.json" "all({p for p in final if p < s['input_end']} <= set(s['journal']) for s in shards)"
order_proxy "$T/order1.json"
expect_exit 1 "the same with --upload-threads 1" \
  env AWS_ENDPOINT_URL_S3=http://127.0.0.1:$OP "$SHARDC" build "$T/rsrc" -o s3://bkt/rej1 "${OPTS[@]}" \
  --upload-threads 1
check "one shard at a time" order "$T/order1.json" "most == 1 and len(shards) == 8"
check "to the same objects" same rej1 "$T/rlocal"
expect_exit 2 "--upload-threads 17 is refused" "$SHARDC" build "$T/rsrc" -o s3://bkt/x "${OPTS[@]}" \
  --upload-threads 17
check "stating the range" grep -q "upload-threads: expected 1..16, not '17'" "$T/err"

# ---- the Python writer ----
expect_exit 0 "shardread.build to an s3:// URL" $PY - "$T/src" "$T/pylocal" <<'EOF'
import os, sys, shardread
sys.path.insert(0, os.path.join(os.environ["ROOT"], "tests"))
import remote_servers
src, local = sys.argv[1:3]
items = remote_servers.folder_items(src)
for out in (local, "s3://bkt/py"):
    shardread.build(items, out, size=(16, 12), shard_samples=8)
EOF
check "it writes the objects a local shardread.build writes" same py "$T/pylocal"
expect_exit 0 "a shardread.build stopped by its iterable after shards went up" \
  $PY - "$T/src" "http://127.0.0.1:$S3P" <<'EOF'
import os, sys, time, shardread
sys.path.insert(0, os.path.join(os.environ["ROOT"], "tests"))
import remote_servers
src, endpoint = sys.argv[1:3]
def listing():
    return [k[len("pystop/"):] for k in remote_servers.keys(endpoint, "bkt", "pystop/")]
items = remote_servers.folder_items(src)
def some():
    yield from items[:40]
    for _ in range(400):    # until a shard is in the bucket (uploads run beside the build)
        if any(f.startswith("shard-") for f in listing()):
            break
        time.sleep(0.05)
    raise KeyError("the iterable failed")
try:
    shardread.build(some(), "s3://bkt/pystop", size=(16, 12), shard_samples=8)
except KeyError as e:
    print("raised", e)
else:
    sys.exit("no exception")
EOF
check "its exception came through" grep -q "raised 'the iterable failed'" "$T/out"
check "after shards went up" grep -q "^ok PUT .*/bkt/pystop/shard-" "$T/sig.log"
check "and it left nothing in the bucket (a stream cannot be resumed)" test -z "$(keys pystop/)"
faults_proxy 3 "$T/faults3.log"
expect_exit 0 "a shardread.build whose uploads fail after 3 objects" \
  env AWS_ENDPOINT_URL_S3=http://127.0.0.1:$FPN $PY - "$T/src" <<'EOF'
import os, sys, shardread
sys.path.insert(0, os.path.join(os.environ["ROOT"], "tests"))
import remote_servers
src = sys.argv[1]
items = remote_servers.folder_items(src)
try:
    shardread.build(items, "s3://bkt/pyfail", size=(16, 12), shard_samples=8)
except OSError as e:
    print("raised", e)
else:
    sys.exit("no exception")
EOF
check "raises, naming the server's code" grep -q "raised .*HTTP 503 SlowDown" "$T/out"
check "after objects went up" grep -q "^200 PUT /bkt/pyfail/shard-" "$T/faults3.log"
check "and leaves nothing in the bucket" test -z "$(keys pyfail/)"


# ---- errors ----
SECRET=Zq7wrongSecretValue
expect_exit 3 "a wrong secret is refused" \
  env AWS_SECRET_ACCESS_KEY=$SECRET "$SHARDC" build "$T/src" -o s3://bkt/bad "${OPTS[@]}"
check "naming the server's code, the endpoint and the bucket" \
  grep -q "at http://127.0.0.1:$GP (bucket bkt): HTTP 403 SignatureDoesNotMatch" "$T/err"
check "the secret is in no message" bash -c "! grep -q $SECRET '$T/err' '$T/out'"
expect_exit 2 "an https:// output is refused" "$SHARDC" build "$T/src" -o https://127.0.0.1:9/ds "${OPTS[@]}"
check "saying it is read-only" grep -q "https://127.0.0.1:9/ds: http(s):// datasets are read-only" "$T/err"
expect_exit 2 "so is merge into http://" "$SHARDC" merge http://127.0.0.1:9/ds
check "with the same reason" grep -q "http(s):// datasets are read-only" "$T/err"

finish
