#!/usr/bin/env python3
"""bench-remote-ab.py - cold epochs of Loader("s3://...") with two builds of the module,
alternating, through one link of a fixed rate (docs/BENCHMARKS.md, "Datasets at URLs"):

    /usr/bin/python3 scripts/bench-remote-ab.py BUILD_A,BUILD_B RATE RUNS SAMPLES [half|none]

BUILD_A and BUILD_B are build folders (their python/ holds the module: e.g. a worktree of the
old commit built with `make all`, and this one's build). The data: SAMPLES shardc-mksample
JPEGs of many sizes (96..480 px a side) built by this tree's shardc into raw 96x96 shards of 250;
s3rver (installed into build/npm as the tests install it) behind the throttle proxy of
tests/remote_servers.py (RATE bytes/s for all connections together). Each run reads one epoch
with each build, the order alternating, into a fresh cache: batch 64, 2 threads, order "quasi"
(quasi_window 1), cache_limit half the dataset (at least 8 shards; "none": no limit). Prints each
build's median bytes/s (against the link) and first batch, and the median of the per-run ratio
B/A. RATE 0: no link and no S3, the dataset served by nginx straight over loopback
(Loader("http://...")), for what the reader itself can take. Not a test: nothing is asserted.
"""
import getpass
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "tests"))
import remote_servers  # noqa: E402
import benchlib  # noqa: E402

if len(sys.argv) < 5 or len(sys.argv[1].split(",")) != 2:
    sys.exit(__doc__)
builds = sys.argv[1].split(",")
rate, runs, samples = float(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
limit_mode = sys.argv[5] if len(sys.argv) > 5 else "half"
bins = os.path.join(ROOT, "build", "bin")
root = tempfile.mkdtemp(prefix="bench-remote-ab.")
src, ds = os.path.join(root, "src"), os.path.join(root, "ds")
subprocess.run([os.path.join(bins, "shardc-mksample"), src, "--classes", "10", "--per-class",
                str(samples // 10), "--no-broken", "--quiet", "--min-side", "96",
                "--max-side", "480"], check=True)
subprocess.run([os.path.join(bins, "shardc"), "build", src, "-o", ds, "--size", "96x96",
                "--shard-samples", "250", "--no-progress"], check=True, stderr=subprocess.DEVNULL)
with open(os.path.join(ds, "manifest.json")) as f:
    man = json.load(f)
dsb = sum(s["bytes"] for s in man["shards"])
s3rver = os.path.join(ROOT, "build", "npm", "node_modules", ".bin", "s3rver")
sp = remote_servers.free_port()
if rate:
    procs = [subprocess.Popen([s3rver, "-d", os.path.join(root, "s3"), "-a", "127.0.0.1", "-p",
                               str(sp), "--silent"], stdout=subprocess.DEVNULL,
                              stderr=subprocess.DEVNULL)]
    url = "s3://bench/ds"
else:
    ngx = os.path.join(root, "ngx")
    os.makedirs(ngx)
    conf = os.path.join(root, "nginx.conf")
    with open(conf, "w") as f:
        f.write(f"user {getpass.getuser()}; daemon off; pid {ngx}/nginx.pid; error_log {ngx}/error.log; worker_processes 1;\n"
                f"events {{ worker_connections 64; }}\nhttp {{ access_log off;\n"
                + "".join(f"  {t}_temp_path {ngx}/{t};\n"
                          for t in ("client_body", "proxy", "fastcgi", "uwsgi", "scgi"))
                + f"  server {{ listen 127.0.0.1:{sp}; root {root}; }}\n}}\n")
    procs = [subprocess.Popen([shutil.which("nginx") or "/usr/sbin/nginx", "-p", ngx, "-e",
                               os.path.join(ngx, "error.log"), "-c", conf],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)]
    url = f"http://127.0.0.1:{sp}/ds"
# one epoch in a process of its own, with the module of the build on its path
EPOCH = r"""
import sys, time, shardread
kw = dict(batch_size=64, threads=2, order="quasi", quasi_window=1, cache=sys.argv[1])
if int(sys.argv[2]):
    kw["cache_limit"] = int(sys.argv[2])
t0, first, n = time.perf_counter(), None, 0
loader = shardread.Loader(sys.argv[3], **kw)
for x, y in loader:
    first = time.perf_counter() - t0 if first is None else first
    n += len(x)
print(time.perf_counter() - t0, first, n, loader._cache_info()["retries"])
"""
try:
    remote_servers.wait(sp)
    if rate:
        os.environ.update(AWS_ACCESS_KEY_ID="S3RVER", AWS_SECRET_ACCESS_KEY="S3RVER",
                          AWS_REGION="us-east-1")
        so, sys.stdout = sys.stdout, open(os.devnull, "w")
        remote_servers.upload(f"http://127.0.0.1:{sp}", "bench", "ds", ds)
        sys.stdout = so
        tp = remote_servers.free_port()
        procs.append(subprocess.Popen([sys.executable,
                                       os.path.join(ROOT, "tests", "remote_servers.py"),
                                       "throttle", str(tp), f"127.0.0.1:{sp}", str(rate)]))
        remote_servers.wait(tp)
        os.environ["AWS_ENDPOINT_URL_S3"] = f"http://127.0.0.1:{tp}"
    largest = max(s["bytes"] for s in man["shards"])
    limit = max(dsb // 2, 8 * largest) if limit_mode == "half" else 0
    rates, firsts, pairs, retries = [[], []], [[], []], [], [0, 0]
    for r in range(runs):
        got = [0.0, 0.0]
        for k in ((0, 1) if r % 2 == 0 else (1, 0)):
            cache = os.path.join(root, f"cache-{r}-{k}")
            env = dict(os.environ, PYTHONPATH=os.path.join(builds[k], "python"))
            out = subprocess.run([sys.executable, "-c", EPOCH, cache, str(limit), url], env=env,
                                 capture_output=True, text=True, check=True).stdout.split()
            secs, first, n = float(out[0]), float(out[1]), int(out[2])
            retries[k] += int(out[3])
            assert n == samples // 10 * 10, n
            got[k] = dsb / secs
            rates[k].append(got[k])
            firsts[k].append(first)
            shutil.rmtree(cache, ignore_errors=True)
        pairs.append(got[1] / got[0])
    print(f"dataset {dsb / 1e6:.1f} MB in {len(man['shards'])} shards, link {f'{rate / 1e6:.0f} MB/s' if rate else 'none (nginx)'}, "
          f"cache_limit {limit or 'none'}, {runs} runs")
    for k, b in enumerate(builds):
        m = statistics.median(rates[k])
        print(f"{b}: median {m / 1e6:.1f} MB/s{f' = {m / rate:.2f}x the link' if rate else ''}, first batch "
              f"{statistics.median(firsts[k]):.3f} s (runs: "
              f"{', '.join(f'{x / 1e6:.1f}' for x in rates[k])} MB/s; {retries[k]} retries)")
    print(f"per-run ratio B/A: median {statistics.median(pairs):.3f} "
          f"({min(pairs):.3f} .. {max(pairs):.3f})")
finally:
    benchlib.stop(procs, root)      # (a killed nginx master leaves its worker running)
