#!/usr/bin/env python3
"""bench-remote.py - reading a dataset from S3 through a link of a fixed rate, against the usual
ways users read object storage today, on the same images and the same link (docs/BENCHMARKS.md,
"Datasets at URLs").

    BUILD=build /usr/bin/python3 scripts/bench-remote.py [--samples 6000] [--rates 100M,1G]
                                                          [--runs 3] [--mixture]

Everything on 127.0.0.1: s3rver (npm, into $BUILD/npm as the tests install it) behind the
token-bucket proxy of tests/remote_servers.py ("throttle": every connection together gets at
most RATE bytes/s). The data: shardc-mksample images of many sizes (--min-side..--max-side),
built by shardc into raw shards of --size, and the same JPEGs written as WebDataset-style tar
shards (KEY.jpg, KEY.cls) of as many images each. Measured, per rate, medians of --runs runs:

- shardread cold: Loader("s3://...") from an empty cache with cache_limit= half the dataset
  (at least 8 shards; order "quasi", quasi_window=1): the epoch's shard bytes / its time (from the constructor to the last batch)
  against the link rate; time to first batch; the cache's peak against its limit; and the same
  without a limit.
- boto3 + DataLoader (WebDataset style): each of 2 workers GETs its tars with boto3, decodes each
  JPEG with PIL and resizes it to --size (what a training pipeline does per image).
- whole prefix: the dataset's objects downloaded with boto3 (GetObject), 10 at once (as `aws s3 cp
  --recursive`), then a local Loader epoch; the first batch comes after the whole download.

With --mixture, only this, per rate: the cold epoch of the dataset (cache_limit half of it, as
above) against a mixture of two datasets at URLs of the same images, half each (weights by
their sizes: the epoch reads every sample once), through a cache_limit of half the two, runs
alternating; the mixture's bytes/s over the single dataset's.

And, once: the cached epoch (the URL again, every shard in the cache) against a local Loader
of the same files, alternating runs, each a new Loader (its open included); and the later
epochs of one Loader of each (a training loop's epochs), and of one through a cache_limit that
holds the whole dataset, alternating. Not a test: it prints figures; nothing is asserted.
"""
import argparse
import concurrent.futures
import io
import json
import os
import shutil
import statistics
import subprocess
import sys
import tarfile
import tempfile
import time

BUILD = os.environ.get("BUILD", "build")
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(BUILD, "python"))
sys.path.insert(0, os.path.join(ROOT, "tests"))
import benchlib  # noqa: E402
import remote_servers  # noqa: E402
import shardread  # noqa: E402

BUCKET = "bench"


def human(b):
    for u in ("B", "KB", "MB", "GB"):
        if b < 1000 or u == "GB":
            return f"{b:.1f} {u}" if u != "B" else f"{b:.0f} B"
        b /= 1000


def start(cmd, port):
    return benchlib.start(cmd, port, "bench-remote")


def client(endpoint):
    import boto3
    from botocore.config import Config
    return boto3.client("s3", endpoint_url=endpoint, region_name="us-east-1",
                        aws_access_key_id="S3RVER", aws_secret_access_key="S3RVER",
                        config=Config(s3={"addressing_style": "path"},
                                      max_pool_connections=16))


def throttle(sp, rate, procs):
    """the token-bucket proxy at rate bytes/s in front of port sp (in procs), its port"""
    tp = remote_servers.free_port()
    procs.append(start([sys.executable, os.path.join(ROOT, "tests", "remote_servers.py"),
                        "throttle", str(tp), f"127.0.0.1:{sp}", str(rate)], tp))
    return tp


def loader_epoch(path, **kw):
    """(seconds, seconds to the first batch, samples, the loader)"""
    t0 = time.perf_counter()
    ld = shardread.Loader(path, **kw)
    first, n = None, 0
    for images, _ in ld:
        if first is None:
            first = time.perf_counter() - t0
        n += len(images)
    return time.perf_counter() - t0, first, n, ld


def tar_shards(endpoint, keys, size):
    import torch

    class TarShards(torch.utils.data.IterableDataset):
        def __iter__(self):
            return tar_samples(endpoint, keys, size)
    return TarShards()


def tar_samples(endpoint, keys, size):
    """WebDataset style: the tar objects split among the DataLoader's workers, each GET with
    boto3, each JPEG decoded with PIL and resized to size x size."""
    import numpy as np
    import torch
    from PIL import Image
    info = torch.utils.data.get_worker_info()
    keys = keys[info.id::info.num_workers] if info else keys
    s3 = client(endpoint)
    for k in keys:
        body = s3.get_object(Bucket=BUCKET, Key=k)["Body"].read()
        with tarfile.open(fileobj=io.BytesIO(body)) as tf:
            members = {m.name: m for m in tf.getmembers()}
            for name in sorted(members):
                if not name.endswith(".jpg"):
                    continue
                img = Image.open(tf.extractfile(members[name])).convert("RGB")
                img = img.resize((size, size), Image.BILINEAR)
                label = int(tf.extractfile(members[name[:-4] + ".cls"]).read())
                yield torch.from_numpy(np.asarray(img).copy()).permute(2, 0, 1), label


def webdataset_epoch(endpoint, keys, size, batch):
    import torch
    t0 = time.perf_counter()
    dl = torch.utils.data.DataLoader(tar_shards(endpoint, keys, size), batch_size=batch,
                                     num_workers=2)
    first, n = None, 0
    for images, _ in dl:
        if first is None:
            first = time.perf_counter() - t0
        n += len(images)
    return time.perf_counter() - t0, first, n


def prefix_epoch(endpoint, prefix, dest, **kw):
    t0 = time.perf_counter()
    s3 = client(endpoint)
    keys = []
    for page in s3.get_paginator("list_objects_v2").paginate(Bucket=BUCKET, Prefix=prefix + "/"):
        keys += [o["Key"] for o in page.get("Contents", [])]

    def get(k):
        p = os.path.join(dest, k[len(prefix) + 1:])
        os.makedirs(os.path.dirname(p), exist_ok=True)
        body = s3.get_object(Bucket=BUCKET, Key=k)["Body"]
        with open(p, "wb") as f:
            shutil.copyfileobj(body, f, 1 << 20)
    with concurrent.futures.ThreadPoolExecutor(10) as ex:
        list(ex.map(get, keys))
    down = time.perf_counter() - t0
    secs, first, n, _ = loader_epoch(dest, **kw)
    return down + secs, down + first, n


def mixture_bench(args, root, src, ds, ds_bytes, limit, sp, direct, procs, kw):
    """The cold epoch of ds against a mixture of its images in two datasets, per rate."""
    bins = os.path.join(BUILD, "bin")
    classes = sorted(os.listdir(src))
    halves, sizes = [], []
    for h, part in enumerate((classes[0::2], classes[1::2])):
        hsrc, hds = os.path.join(root, f"src{h}"), os.path.join(root, f"half{h}")
        os.makedirs(hsrc)
        for c in part:
            os.symlink(os.path.join(src, c), os.path.join(hsrc, c))
        subprocess.run([os.path.join(bins, "shardc"), "build", hsrc, "-o", hds, "--size",
                        f"{args.size}x{args.size}", "--shard-samples", str(args.shard_samples),
                        "--no-progress"], check=True, stderr=subprocess.DEVNULL)
        with open(os.path.join(hds, "manifest.json")) as f:
            m = json.load(f)
        halves.append(hds)
        sizes.append((m["samples"], sum(s["bytes"] for s in m["shards"])))
        with open(os.devnull, "w") as null:
            so, sys.stdout = sys.stdout, null
            remote_servers.upload(direct, BUCKET, f"half{h}", hds)
            sys.stdout = so
    mix_bytes = sum(b for _, b in sizes)
    # what the mixture holds at once: each stream's shards of both threads' batches (4 each in
    # quasi order with a window of 1, a wrap of the stream's pass allowed for), or half the two
    largest = max(s["bytes"] for h in halves for s in json.load(open(h + "/manifest.json"))["shards"])
    mix_limit = max(mix_bytes // 2, 2 * 4 * args.threads * largest)
    streams = [(f"s3://{BUCKET}/half{h}", float(n)) for h, (n, _) in enumerate(sizes)]
    print(f"mixture: two datasets of {sizes[0][0]} and {sizes[1][0]} images, "
          f"{human(mix_bytes)} together, cache_limit {human(mix_limit)}; the single dataset "
          f"{human(ds_bytes)}, cache_limit {human(limit)}")
    res = {}
    for rs in args.rates.split(","):
        rate = benchlib.rate_arg(rs)
        tp = throttle(sp, rate, procs)
        px = procs[-1]
        os.environ["AWS_ENDPOINT_URL_S3"] = f"http://127.0.0.1:{tp}"
        one, mix, peaks = [], [], []
        for run in range(args.runs):
            cache = os.path.join(root, f"mcache-{rs}-{run}")
            secs, _, n, ld = loader_epoch(f"s3://{BUCKET}/ds", cache=cache, cache_limit=limit,
                                          order="quasi", quasi_window=1, **kw)
            one.append(ds_bytes / secs)
            del ld
            shutil.rmtree(cache)
            secs, _, n, ld = loader_epoch(streams, cache=cache, cache_limit=mix_limit,
                                          order="quasi", quasi_window=1, **kw)
            assert n == sum(c for c, _ in sizes), n
            mix.append(mix_bytes / secs)
            peaks.append(ld._cache_info()["peak_bytes"])
            del ld
            shutil.rmtree(cache)
        px.terminate()
        px.wait()
        procs.remove(px)
        o, m = statistics.median(one), statistics.median(mix)
        ratios = sorted(b / a for a, b in zip(one, mix))
        res[rs] = {"one_Bps": o, "mix_Bps": m, "one_ratio": o / rate, "mix_ratio": m / rate,
                   "mix_over_one": statistics.median(ratios), "ratios": ratios,
                   "mix_peak": max(peaks), "mix_limit": mix_limit, "one": one, "mix": mix}
        print(f"link {rs}B/s: one dataset {human(o)}/s ({o / rate:.2f}x the link), mixture of "
              f"two {human(m)}/s ({m / rate:.2f}x); per-run mixture/one "
              f"{statistics.median(ratios):.3f} ({ratios[0]:.3f}..{ratios[-1]:.3f}); the "
              f"mixture's cache peak {human(max(peaks))} of {human(mix_limit)}", flush=True)
    return res


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--samples", type=int, default=6000)
    ap.add_argument("--size", type=int, default=96)
    ap.add_argument("--min-side", type=int, default=96)
    ap.add_argument("--max-side", type=int, default=480)
    ap.add_argument("--shard-samples", type=int, default=250)
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--rates", default="100M,1G", help="link rates, bytes/s (K, M, G: 10^3..)")
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--json", help="also write the figures here")
    ap.add_argument("--mixture", action="store_true",
                    help="only the cold epoch of one dataset against a mixture of two halves")
    args = ap.parse_args()
    bins = os.path.join(BUILD, "bin")
    s3rver = benchlib.s3rver(ROOT, BUILD)
    root = tempfile.mkdtemp(prefix="bench-remote.")
    procs = []
    out = {"samples": args.samples, "size": args.size, "runs": args.runs, "rates": {}}
    try:
        src, ds = os.path.join(root, "src"), os.path.join(root, "ds")
        subprocess.run([os.path.join(bins, "shardc-mksample"), src, "--classes", "10",
                        "--per-class", str(-(-args.samples // 10)), "--no-broken", "--quiet",
                        "--min-side", str(args.min_side), "--max-side", str(args.max_side)],
                       check=True)
        subprocess.run([os.path.join(bins, "shardc"), "build", src, "-o", ds, "--size",
                        f"{args.size}x{args.size}", "--shard-samples", str(args.shard_samples),
                        "--no-progress"], check=True, stderr=subprocess.DEVNULL)
        with open(os.path.join(ds, "manifest.json")) as f:
            man = json.load(f)
        ds_bytes = sum(s["bytes"] for s in man["shards"])
        # the same JPEGs as tar shards of as many images
        tars = os.path.join(root, "tars")
        os.makedirs(tars)
        files = sorted((c, f) for c in sorted(os.listdir(src)) for f in
                       sorted(os.listdir(os.path.join(src, c))))
        labels = {c: i for i, c in enumerate(sorted(os.listdir(src)))}
        for t in range(0, len(files), args.shard_samples):
            with tarfile.open(os.path.join(tars, f"shard-{t // args.shard_samples:05d}.tar"),
                              "w") as tf:
                for i, (c, f) in enumerate(files[t:t + args.shard_samples]):
                    key = f"{t + i:07d}"
                    tf.add(os.path.join(src, c, f), arcname=key + ".jpg")
                    lab = str(labels[c]).encode()
                    ti = tarfile.TarInfo(key + ".cls")
                    ti.size = len(lab)
                    tf.addfile(ti, io.BytesIO(lab))
        tar_keys = [f"tars/{n}" for n in sorted(os.listdir(tars))]
        tar_bytes = sum(os.path.getsize(os.path.join(tars, n)) for n in os.listdir(tars))
        jpeg_px = []
        from PIL import Image
        for c, f in files[::50]:
            with Image.open(os.path.join(src, c, f)) as im:
                jpeg_px.append(im.size)
        print(f"data: {len(files)} JPEGs ({len(set(jpeg_px))} distinct sizes in a sample of "
              f"{len(jpeg_px)}, {args.min_side}..{args.max_side} px a side), "
              f"{len(tar_keys)} tars of {human(tar_bytes)}; shardc raw {args.size}x{args.size}: "
              f"{len(man['shards'])} shards of {human(ds_bytes)}")
        out.update(dataset_bytes=ds_bytes, tar_bytes=tar_bytes, images=len(files))

        p, sp = benchlib.start_s3rver(s3rver, os.path.join(root, "s3"), "bench-remote")
        procs.append(p)
        direct = f"http://127.0.0.1:{sp}"
        os.environ.update(AWS_ACCESS_KEY_ID="S3RVER", AWS_SECRET_ACCESS_KEY="S3RVER",
                          AWS_REGION="us-east-1")
        with open(os.devnull, "w") as null:
            so, sys.stdout = sys.stdout, null
            remote_servers.upload(direct, BUCKET, "ds", ds)
            remote_servers.upload(direct, BUCKET, "tars", tars)
            sys.stdout = so
        kw = dict(batch_size=args.batch, threads=args.threads)
        limit = max(ds_bytes // 2, 8 * max(s["bytes"] for s in man["shards"]))
        if args.mixture:
            out["mixture"] = mixture_bench(args, root, src, ds, ds_bytes, limit, sp, direct,
                                           procs, kw)
            if args.json:
                with open(args.json, "w") as f:
                    json.dump(out, f, indent=1)
            return 0

        for rs in args.rates.split(","):
            rate = benchlib.rate_arg(rs)
            tp = throttle(sp, rate, procs)
            px = procs[-1]
            ep = f"http://127.0.0.1:{tp}"
            os.environ["AWS_ENDPOINT_URL_S3"] = ep
            r = {"ours": [], "ours_first": [], "peak": [], "free": [], "wds": [], "wds_first": [],
                 "prefix": [], "prefix_first": []}
            for run in range(args.runs):
                cache = os.path.join(root, f"cache-{rs}-{run}")
                secs, first, n, ld = loader_epoch(f"s3://{BUCKET}/ds", cache=cache,
                                                  cache_limit=limit, order="quasi", quasi_window=1, **kw)
                assert n == len(files), (n, len(files))
                r["ours"].append(ds_bytes / secs)
                r["ours_first"].append(first)
                r["peak"].append(ld._cache_info()["peak_bytes"])
                del ld
                shutil.rmtree(cache)
                secs, _, n, ld = loader_epoch(f"s3://{BUCKET}/ds", cache=cache, order="quasi",
                                              quasi_window=1, **kw)
                r["free"].append(ds_bytes / secs)
                del ld
                shutil.rmtree(cache)
                secs, first, n = webdataset_epoch(ep, tar_keys, args.size, args.batch)
                assert n == len(files), (n, len(files))
                r["wds"].append((n / secs, tar_bytes / secs))
                r["wds_first"].append(first)
                dest = os.path.join(root, f"copy-{rs}-{run}")
                secs, first, n = prefix_epoch(ep, "ds", dest, **kw)
                assert n == len(files), (n, len(files))
                r["prefix"].append(n / secs)
                r["prefix_first"].append(first)
                shutil.rmtree(dest)
            px.terminate()
            px.wait()
            procs.remove(px)
            med = statistics.median
            ours = med(r["ours"])
            res = {
                "ours_Bps": ours, "ours_ratio": ours / rate,
                "ours_img_s": ours / ds_bytes * len(files),
                "ours_first_s": med(r["ours_first"]), "peak": max(r["peak"]), "limit": limit,
                "free_Bps": med(r["free"]),
                "wds_img_s": med(x[0] for x in r["wds"]),
                "wds_Bps": med(x[1] for x in r["wds"]),
                "wds_first_s": med(r["wds_first"]),
                "prefix_img_s": med(r["prefix"]), "prefix_first_s": med(r["prefix_first"]),
                "runs": r,
            }
            out["rates"][rs] = res
            print(f"link {rs}B/s: shardread cold {human(ours)}/s ({res['ours_ratio']:.2f}x the "
                  f"link, {res['ours_img_s']:.0f} img/s), first batch {res['ours_first_s']:.3f} s, "
                  f"cache peak {human(res['peak'])} of limit {human(limit)}, without a limit "
                  f"{human(res['free_Bps'])}/s; boto3+DataLoader "
                  f"{res['wds_img_s']:.0f} img/s ({human(res['wds_Bps'])}/s of tars), first "
                  f"batch {res['wds_first_s']:.3f} s; whole prefix then local "
                  f"{res['prefix_img_s']:.0f} img/s, first batch {res['prefix_first_s']:.3f} s",
                  flush=True)

        # the cached epoch against a local read of the same files (no link in the way)
        os.environ["AWS_ENDPOINT_URL_S3"] = direct
        cache = os.path.join(root, "cache-full")
        loader_epoch(f"s3://{BUCKET}/ds", cache=cache, **kw)
        cached, local = [], []
        for _ in range(max(11, args.runs)):
            secs, _, n, _ = loader_epoch(f"s3://{BUCKET}/ds", cache=cache, **kw)
            cached.append(n / secs)
            secs, _, n, _ = loader_epoch(ds, **kw)
            local.append(n / secs)
        c, l = statistics.median(cached), statistics.median(local)
        out.update(cached_img_s=c, local_img_s=l, cached_ratio=c / l,
                   cached_runs=cached, local_runs=local)
        print(f"cached epoch {c:.0f} img/s, local Loader {l:.0f} img/s: {c / l:.3f}x "
              f"(runs: cached {[round(x) for x in cached]}, local {[round(x) for x in local]})")
        # a training loop's later epochs: one Loader each, opened once, epochs alternating
        lc = shardread.Loader(f"s3://{BUCKET}/ds", cache=cache, **kw)
        ll = shardread.Loader(ds, **kw)
        # and through a bounded cache that holds the whole dataset (a cache of its own)
        lb = shardread.Loader(f"s3://{BUCKET}/ds", cache=os.path.join(root, "cache-bounded"),
                              cache_limit=2 * ds_bytes, **kw)

        def rate(ld):
            t0, n = time.perf_counter(), 0
            for images, _ in ld:
                n += len(images)
            return n / (time.perf_counter() - t0)
        rate(lc), rate(ll), rate(lb)
        again_c, again_l, again_b = [], [], []
        for _ in range(max(11, args.runs)):
            again_c.append(rate(lc))
            again_l.append(rate(ll))
            again_b.append(rate(lb))
        c2, l2 = statistics.median(again_c), statistics.median(again_l)
        b2 = statistics.median(again_b)
        out.update(later_cached_img_s=c2, later_local_img_s=l2, later_ratio=c2 / l2,
                   later_bounded_img_s=b2, later_bounded_ratio=b2 / l2)
        print(f"later epochs of one open: cached {c2:.0f} img/s, local {l2:.0f} img/s: "
              f"{c2 / l2:.3f}x; with a cache_limit that holds the dataset {b2:.0f} img/s: "
              f"{b2 / l2:.3f}x")
        if args.json:
            with open(args.json, "w") as f:
                json.dump(out, f, indent=1)
    finally:
        benchlib.stop(procs, root)
    return 0


if __name__ == "__main__":
    sys.exit(main())
