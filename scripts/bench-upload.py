#!/usr/bin/env python3
"""bench-upload.py - `shardc build -o s3://` with one shard uploaded at a time against several at
once, through a store that takes each connection's uploads at a fixed rate (docs/BENCHMARKS.md,
"Writing to a URL").

    BUILD=build /usr/bin/python3 scripts/bench-upload.py [--images 3000] [--rate 20M]
                                                          [--threads 1,4] [--runs 3]

Everything on 127.0.0.1: s3rver (npm, into $BUILD/npm as the tests install it) behind the
"putthrottle" proxy of tests/remote_servers.py, which reads each PUT's body at most RATE
bytes/s, each connection on its own (an object store's per-connection rate; S3 gives a single
stream tens of MB/s and scales with connections). The data: shardc-mksample JPEGs of many sizes
(--min-side..--max-side) built into raw shards of --size. Measured, alternating, medians of
--runs: the wall time of the build to the bucket for each --threads value, and of the same build
into a local folder (the floor: no upload). Not a test: it prints figures; nothing is asserted.
"""
import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

BUILD = os.environ.get("BUILD", "build")
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "tests"))
import benchlib  # noqa: E402
import remote_servers  # noqa: E402

BUCKET = "bench"


def start(cmd, port):
    return benchlib.start(cmd, port, "bench-upload")


def timed(cmd):
    t0 = time.monotonic()
    r = subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    dt = time.monotonic() - t0
    if r.returncode != 0:
        sys.exit(f"bench-upload: {' '.join(cmd)} failed: {r.stderr.strip()}")
    return dt


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--images", type=int, default=3000)
    ap.add_argument("--size", type=int, default=160)
    ap.add_argument("--min-side", type=int, default=160)
    ap.add_argument("--max-side", type=int, default=480)
    ap.add_argument("--shard-size", default="8MiB")
    ap.add_argument("--rate", default="20M", help="bytes/s per connection (K, M, G: 10^3..)")
    ap.add_argument("--threads", default="1,4", help="--upload-threads values to compare")
    ap.add_argument("--build-threads", type=int, default=2)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--json", help="also write the figures here")
    args = ap.parse_args()
    bins = os.path.join(BUILD, "bin")
    shardc = os.path.join(bins, "shardc")
    s3rver = benchlib.s3rver(ROOT, BUILD)
    root = tempfile.mkdtemp(prefix="bench-upload.")
    procs = []
    try:
        src = os.path.join(root, "src")
        subprocess.run([os.path.join(bins, "shardc-mksample"), src, "--classes", "10",
                        "--per-class", str(-(-args.images // 10)), "--no-broken", "--quiet",
                        "--min-side", str(args.min_side), "--max-side", str(args.max_side)],
                       check=True)
        opts = ["--size", f"{args.size}x{args.size}", "--shard-size", args.shard_size,
                "--no-progress", "-j", str(args.build_threads)]
        local = os.path.join(root, "local")
        timed([shardc, "build", src, "-o", local] + opts)
        with open(os.path.join(local, "manifest.json")) as f:
            man = json.load(f)
        ds_bytes = sum(s["bytes"] for s in man["shards"])
        p, sp = benchlib.start_s3rver(s3rver, os.path.join(root, "s3"), "bench-upload")
        procs.append(p)
        os.environ.update(AWS_ACCESS_KEY_ID="S3RVER", AWS_SECRET_ACCESS_KEY="S3RVER",
                          AWS_REGION="us-east-1", SHARDREAD_CACHE=os.path.join(root, "cache"))
        for k in ("AWS_PROFILE", "AWS_SESSION_TOKEN", "AWS_NO_SIGN_REQUEST", "AWS_ENDPOINT_URL"):
            os.environ.pop(k, None)
        empty = os.path.join(root, "empty")
        os.makedirs(empty)
        with open(os.devnull, "w") as null:
            so, sys.stdout = sys.stdout, null
            remote_servers.upload(f"http://127.0.0.1:{sp}", BUCKET, "none", empty)
            sys.stdout = so
        tp = remote_servers.free_port()
        procs.append(start([sys.executable, os.path.join(ROOT, "tests", "remote_servers.py"),
                            "putthrottle", str(tp), f"127.0.0.1:{sp}",
                            str(benchlib.rate_arg(args.rate))], tp))
        os.environ["AWS_ENDPOINT_URL_S3"] = f"http://127.0.0.1:{tp}"
        lanes = [int(t) for t in args.threads.split(",")]
        times = {t: [] for t in lanes}
        times["local"] = []
        for run in range(args.runs):
            for t in lanes:
                times[t].append(timed([shardc, "build", src, "-o", f"s3://{BUCKET}/ds{t}",
                                       "--upload-threads", str(t), "--force"] + opts))
            shutil.rmtree(local)
            times["local"].append(timed([shardc, "build", src, "-o", local] + opts))
        print(f"data: {args.images} JPEGs, {args.min_side}..{args.max_side} px a side; shardc "
              f"raw {args.size}x{args.size}: {len(man['shards'])} shards, {ds_bytes / 1e6:.1f} MB;"
              f" store: {benchlib.rate_arg(args.rate) / 1e6:.0f} MB/s per connection; medians of "
              f"{args.runs}, alternating; load {os.getloadavg()[0]:.2f}")
        print("| build | wall s | MB/s | against --upload-threads "
              f"{lanes[0]} |\n|---|---:|---:|---:|")
        base = statistics.median(times[lanes[0]])
        res = {}
        for t in lanes + ["local"]:
            m = statistics.median(times[t])
            name = f"-o s3:// --upload-threads {t}" if t != "local" else "-o local folder"
            print(f"| {name} | {m:.2f} | {ds_bytes / m / 1e6:.1f} | {base / m:.2f}x |")
            res[str(t)] = {"runs": times[t], "median_s": m, "mb_s": ds_bytes / m / 1e6}
        if args.json:
            with open(args.json, "w") as f:
                json.dump({"bytes": ds_bytes, "rate": benchlib.rate_arg(args.rate),
                           "results": res}, f, indent=1)
    finally:
        benchlib.stop(procs, root, kill=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
