# The servers of the remote e2e tests (e2e_remote.sh, e2e_remote_cache.sh, e2e_remote_write.sh),
# sourced after lib.sh: the Python helpers ($PY $HELP, tests/remote_servers.py), nginx and s3rver
# started on 127.0.0.1 and stopped when the test exits (every pid in pids is killed and waited).
PY=$(py_module)
HELP="$ROOT/tests/remote_servers.py"
export PYTHONPATH="$ROOT/$BUILD/python"
NGINX=$(command -v nginx || echo /usr/sbin/nginx)
S3RVER="$ROOT/$BUILD/npm/node_modules/.bin/s3rver"
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null; done
  for p in "${pids[@]}"; do wait "$p" 2>/dev/null; done
  rm -rf "$T"
}
trap cleanup EXIT

# need_tools TOOL...: 1 (with a failure said) when one is missing
need_tools() {
  local tool
  for tool in "$@"; do
    command -v "$tool" >/dev/null || { bad "$tool is missing: scripts/deps.sh installs it"; return 1; }
  done
}

# need_s3rver: s3rver installed into $BUILD/npm on first use; a registry that cannot be reached
# skips the test (exit 77, a failure under SHARDC_NO_SKIP=1)
need_s3rver() {
  [ -x "$S3RVER" ] && return 0
  # one quick look at the registry first: npm install's own retries take over a minute to give up
  { timeout 20 npm ping --fetch-retries=0 >"$T/npm" 2>&1 &&
    timeout 180 npm install --silent --no-audit --no-fund --prefix "$ROOT/$BUILD/npm" s3rver@3 \
      >"$T/npm" 2>&1; } ||
    { echo "SKIPPED: s3rver could not be fetched from the npm registry (a machine without it, such as"
      echo "  the fresh Debian root of scripts/fresh-debian.sh; SHARDC_NO_SKIP=1 makes this a failure):"
      tail -3 "$T/npm"; exit 77; }
}

# start_nginx HTTP_PORT [HTTPS_PORT]: nginx serving $T/www over http (and https with $T/cert.pem,
# $T/key.pem), logging requests to $T/ngx/access.log; 1 (with a failure said) when it does not start
start_nginx() {
  local hp=$1 sp=${2:-} tls=
  [ -n "$sp" ] && tls="server { listen 127.0.0.1:$sp ssl; root $T/www;
           ssl_certificate $T/cert.pem; ssl_certificate_key $T/key.pem; }"
  mkdir -p "$T/ngx"
  cat >"$T/nginx.conf" <<EOF
user $(id -un);
daemon off;
pid $T/ngx/nginx.pid;
error_log $T/ngx/error.log;
worker_processes 1;
events { worker_connections 64; }
http {
  access_log $T/ngx/access.log;
  client_body_temp_path $T/ngx/body; proxy_temp_path $T/ngx/proxy;
  fastcgi_temp_path $T/ngx/fcgi; uwsgi_temp_path $T/ngx/uwsgi; scgi_temp_path $T/ngx/scgi;
  server { listen 127.0.0.1:$hp; root $T/www; }
  $tls
}
EOF
  "$NGINX" -p "$T/ngx" -e "$T/ngx/error.log" -c "$T/nginx.conf" 2>"$T/ngx/start.err" &
  pids+=($!)
  $PY "$HELP" wait "$hp" && { [ -z "$sp" ] || $PY "$HELP" wait "$sp"; } ||
    { bad "nginx did not start: $(head -3 "$T/ngx/start.err" "$T/ngx/error.log")"; return 1; }
}

# start_s3rver PORT: s3rver (key S3RVER/S3RVER) storing in $T/s3; 1 (with a failure said) when it
# does not start
start_s3rver() {
  "$S3RVER" -d "$T/s3" -a 127.0.0.1 -p "$1" --silent >"$T/s3rver.log" 2>&1 &
  pids+=($!)
  $PY "$HELP" wait "$1" || { bad "s3rver did not start: $(head -3 "$T/s3rver.log")"; return 1; }
}

# serve_ds PER SHARD: the served dataset $T/www/ds, 3 classes of PER samples each (20 to 40
# pixels, from $T/src) at 16x12 in shards of SHARD samples; 1 (after a FAIL line) when the
# build fails.
serve_ds() {
  mkdir -p "$T/www"
  "$MKSAMPLE" "$T/src" --classes 3 --per-class "$1" --min-side 20 --max-side 40 --no-broken --quiet
  "$SHARDC" build "$T/src" -o "$T/www/ds" --size 16x12 --shard-samples "$2" --no-progress >/dev/null ||
    { bad "shardc build failed"; return 1; }
}

# half DIR: half the bytes of DIR's raw shards (a cache_limit that makes the shards take turns)
half() { echo $(( $(cat "$1"/shard-*.raw | wc -c) / 2 )); }

# write_pairs DIR N: a dataset of N samples of varying sizes, each with a detection target and
# fields (pair records), 3 to a shard, written by shardread.Writer
write_pairs() {
  $PY -c '
import sys
import numpy as np, shardread
rng = np.random.default_rng(1)
with shardread.Writer(sys.argv[1], shard_samples=3) as w:
    for i in range(int(sys.argv[2])):
        h, wd = int(rng.integers(16, 40)), int(rng.integers(16, 40))
        w.add(rng.integers(0, 256, (h, wd, 3), dtype=np.uint8),
              {"boxes": np.array([[1, 2, 10, 12]], np.float32), "labels": np.array([i % 3])},
              {"score": i * 0.5, "name": f"n{i}"})
' "$1" "$2"
}

# py_open_report OUT CALL ARG...: the shardread call CALL (Python, with sys and shardread
# imported, the ARGs its sys.argv[1:]) made, and into the file OUT "opened", or the
# shardread.Error it raised as its class name and message
py_open_report() {
  local out=$1 call=$2
  shift 2
  $PY - "$@" >"$out" 2>&1 <<EOF
import sys, shardread
try:
    $call
    print("opened")
except shardread.Error as e:
    print(type(e).__name__, e)
EOF
}
