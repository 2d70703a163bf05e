"""Checks of a bounded remote cache for tests/e2e_remote_cache.sh (docs/REMOTE.md).

remote_cache_check.py equal LOCAL URL CACHE LIMIT KWARGS_JSON
    one epoch of Loader(URL, cache_limit=LIMIT) equals Loader(LOCAL) (pixels, labels, indices,
    order; with "targets": true in KWARGS every target's arrays too); the cache folder, sampled by a thread after every batch and between them, never
    holds more than LIMIT bytes, nor does the cache's own count (peak_bytes); prints
    'peak=N evicted=E fetched=F'
remote_cache_check.py mixture LOCALS URLS CACHE LIMIT KWARGS_JSON
    a mixture: LOCALS and URLS are JSON lists of [path, weight] streams, the same datasets (some
    of URLS local paths too); one epoch of Loader(URLS, cache_limit=LIMIT) equals
    Loader(LOCALS), every stream's folder in CACHE sampled together within LIMIT, shards
    evicted; its state's dataset fingerprint is the local one's (each stream at a URL found in
    its cache folder); prints 'peak=N evicted=E fetched=F'
remote_cache_check.py resume LOCAL URL CACHE LIMIT KWARGS_JSON CUT
    CUT batches from the URL in a process of their own, state_dict; then a new Loader on the URL
    loads it and reads the rest: together they equal the local epoch (LIMIT 0: no cache_limit)
remote_cache_check.py refuse URL CACHE LIMIT KWARGS_JSON
    the open is refused (ValueError), the message printed
remote_cache_check.py dataset LOCAL URL CACHE LIMIT SEED [shared]
    Dataset(URL, cache=CACHE, cache_limit=LIMIT) (fields=True where the dataset has fields):
    the open leaves no shard in the cache, nor do fields() of every index, equal to the local
    ones (the skeletons answer them); every index, in an order shuffled by SEED, equals
    Dataset(LOCAL)'s item (pixels, label or target, fields), then from four threads at once,
    then sample(i), targets and fields() of every index; the cache folder, sampled by a thread, never holds more than LIMIT
    bytes, and holds fewer shards than the dataset has at the end; prints 'peak=N shards=S'
    (shared: other processes read the same cache at the same time, so the open may find shards)
remote_cache_check.py starved LOCAL URL CACHE LIMIT
    shards 0-5 in the cache folder, held by this process as another reader holds them (a shared
    flock on each lock file), LIMIT their bytes: a sequential Loader reads batches 0-5 (a shard
    each), its worker then waits for room for shard 6 that never comes; load_state_dict back to
    batch 2 replaces the waiting reader (closing it must not wait for that worker) and batch 2
    equals the local one; once the flocks go, the rest of the epoch equals the local one
"""
import fcntl
import json
import os
import shutil
import subprocess
import sys
import threading

import numpy as np
import shardread


def folder_bytes(cache):
    total = 0
    for d, _, files in os.walk(cache):
        for f in files:
            # the shards and their downloads (the limit bounds the shards; the manifest's own
            # download, .manifest.json.PID.part, and the tables are a few KiB on top)
            # (an lmdb shard is a folder: its data.mdb, in place or in its .part folder)
            if f.endswith((".raw", ".raw.part", ".h5", ".h5.part")) or f == "data.mdb":
                try:
                    total += os.stat(os.path.join(d, f)).st_size
                except FileNotFoundError:
                    pass
    return total


class Sampler(threading.Thread):
    """The cache folder's size, as often as it can be read."""

    def __init__(self, cache):
        super().__init__(daemon=True)
        self.cache, self.peak, self.stop = cache, 0, False

    def run(self):
        while not self.stop:
            self.peak = max(self.peak, folder_bytes(self.cache))


def flat(item):
    """A batch as a flat list of arrays: (images, labels, indices), or with targets=True
    (images, [one dict per sample], indices) every target's keys and values in order."""
    if isinstance(item, dict):
        return [a for k in sorted(item) for a in [np.array(k)] + flat(item[k])]
    if isinstance(item, (list, tuple)):
        return [a for v in item for a in flat(v)]
    return [np.array(item)]


def batches(loader, n=None):
    out = []
    for k, item in enumerate(loader):
        out.append(tuple(flat(item)))
        if n is not None and k + 1 == n:
            break
    return out


def same(a, b):
    if len(a) != len(b):
        print(f"{len(b)} batches, the local epoch has {len(a)}", file=sys.stderr)
        return False
    for k, (p, q) in enumerate(zip(a, b)):
        if len(p) != len(q) or not all(np.array_equal(u, v) for u, v in zip(p, q)):
            print(f"batch {k} differs", file=sys.stderr)
            return False
    return True


def main(argv):
    cmd = argv[1]
    if cmd == "refuse":
        url, cache, limit, kw = argv[2], argv[3], argv[4], json.loads(argv[5])
        try:
            shardread.Loader(url, cache=cache, cache_limit=limit, **kw)
        except ValueError as e:
            print(e)
            return 0
        print("the open was not refused", file=sys.stderr)
        return 1
    if cmd == "first":
        url, cache, limit, kw, cut, out = (argv[2], argv[3], int(argv[4]), json.loads(argv[5]),
                                           int(argv[6]), argv[7])
        b = shardread.Loader(url, return_indices=True, cache=cache, cache_limit=limit or None, **kw)
        got = batches(b, cut)
        arrays = {f"b{k}_{j}": a for k, t in enumerate(got) for j, a in enumerate(t)}
        np.savez(out, n=len(got), **arrays)
        print(json.dumps(b.state_dict()))
        return 0
    if cmd == "starved":
        return starved(*argv[2:6])
    if cmd == "dataset":
        return dataset(*argv[2:8])
    if cmd == "mixture":
        return mixture(json.loads(argv[2]), json.loads(argv[3]), argv[4], int(argv[5]),
                       json.loads(argv[6]))
    local, url, cache, limit, kw = argv[2], argv[3], argv[4], int(argv[5]), json.loads(argv[6])
    want = batches(shardread.Loader(local, return_indices=True, **kw))
    s = Sampler(cache)
    s.start()
    if cmd == "equal":
        b = shardread.Loader(url, return_indices=True, cache=cache, cache_limit=limit or None, **kw)
        got = batches(b)
        info = b._cache_info()
    else:
        # the first CUT batches in a process of their own, which ends (a job stopped), then
        # this process resumes from its state: one reader at a time on the bounded cache
        out = os.path.join(cache, "first.npz")
        r = subprocess.run([sys.executable, __file__, "first", url, cache, str(limit),
                            json.dumps(kw), argv[7], out], capture_output=True, text=True)
        if r.returncode != 0:
            print(f"the first part failed: {r.stderr}", file=sys.stderr)
            return 1
        state = json.loads(r.stdout)
        with np.load(out) as z:
            got = [tuple(z[f"b{k}_{j}"] for j in range(3)) for k in range(int(z["n"]))]
        os.unlink(out)
        c = shardread.Loader(url, return_indices=True, cache=cache, cache_limit=limit or None, **kw)
        c.load_state_dict(state)
        got += batches(c)
        info = c._cache_info()
    s.stop = True
    s.join()
    if not same(want, got):
        return 1
    peak = max(s.peak, info["peak_bytes"])
    own = limit
    if limit and kw.get("fields"):
        # the Loader's own downloads keep the room of one shard for its fields' Dataset
        with open(os.path.join(local, "manifest.json"), "rb") as f:
            own = limit - max(sh["bytes"] for sh in json.load(f)["shards"])
    if limit and (peak > limit or info["limit"] != own):
        print(f"the cache held {peak} bytes (sampled {s.peak}, counted "
              f"{info['peak_bytes']}), over its limit {limit}", file=sys.stderr)
        return 1
    print(f"peak={peak} evicted={info['evicted']} fetched={info['fetched']}")
    return 0


def starved(local, url, cache, limit):
    kw = dict(order="sequential", batch_size=8, threads=1, return_indices=True)
    want = batches(shardread.Loader(local, **kw))
    probe = shardread.Loader(url, cache=cache, cache_limit=int(limit), **kw)
    folder = probe._cache_info()["dir"]
    del probe
    for f in os.listdir(folder):
        if f.endswith(".raw"):
            os.unlink(os.path.join(folder, f))
    held = []
    for k in range(6):
        name = f"shard-{k:05d}.raw"
        shutil.copyfile(os.path.join(local, name), os.path.join(folder, name))
        fd = os.open(os.path.join(folder, f".{name}.lock"), os.O_RDWR | os.O_CREAT)
        fcntl.flock(fd, fcntl.LOCK_SH)
        held.append(fd)
    b = shardread.Loader(url, cache=cache, cache_limit=int(limit), **kw)
    it = iter(b)
    got = [tuple(np.array(a) for a in next(it)) for _ in range(2)]
    state = b.state_dict()
    got += [tuple(np.array(a) for a in next(it)) for _ in range(4)]
    if not same(want[:6], got):
        return 1
    b.load_state_dict(state)
    it = iter(b)
    again = tuple(np.array(a) for a in next(it))
    if not same(want[2:3], [again]):
        return 1
    for fd in held:
        os.close(fd)
    rest = [again] + [tuple(np.array(a) for a in x) for x in it]
    if not same(want[2:], rest):
        return 1
    print(f"read {len(rest)} batches after the reader waiting for room was replaced")
    return 0




def shard_files(cache):
    return sum(1 for _, _, files in os.walk(cache) for f in files if f.endswith(".raw"))


def dataset(local, url, cache, limit, seed, shared=None):
    limit = int(limit)
    want = shardread.Dataset(local)
    kw = dict(fields=True) if want.field_schema else {}
    want = shardread.Dataset(local, **kw)
    s = Sampler(cache)
    s.start()
    got = shardread.Dataset(url, cache=cache, cache_limit=limit, **kw)
    if not shared and shard_files(cache):
        print(f"the open left {shard_files(cache)} shards in the cache", file=sys.stderr)
        return 1
    n = len(want)
    if len(got) != n:
        print(f"{len(got)} samples, the local dataset has {n}", file=sys.stderr)
        return 1
    order = np.random.default_rng(int(seed)).permutation(n)
    if kw and not shared:
        # fields from the skeletons the open read: every index's, and no shard downloaded
        a, b = flat(want.fields([int(i) for i in order])), flat(got.fields([int(i) for i in order]))
        if len(a) != len(b) or not all(np.array_equal(u, v) for u, v in zip(a, b)):
            print("fields() before any item differ", file=sys.stderr)
            return 1
        if shard_files(cache):
            print(f"fields() downloaded {shard_files(cache)} shards", file=sys.stderr)
            return 1
    for i in order:
        a, b = flat(want[int(i)]), flat(got[int(i)])
        if len(a) != len(b) or not all(np.array_equal(u, v) for u, v in zip(a, b)):
            print(f"item {i} differs", file=sys.stderr)
            return 1
    for i in order[::-1]:
        if want.sample(int(i)) != got.sample(int(i)):
            print(f"sample({i}) differs", file=sys.stderr)
            return 1
    if want.targets != got.targets:
        print("targets differ", file=sys.stderr)
        return 1
    # four threads at once, each its own shuffled pass (reads release the GIL; each holds the
    # shard of its item while the others' downloads evict what none holds)
    from concurrent.futures import ThreadPoolExecutor

    def pass_of(t):
        for i in np.random.default_rng(int(seed) * 10 + t).permutation(n):
            a, b = flat(want[int(i)]), flat(got[int(i)])
            if len(a) != len(b) or not all(np.array_equal(u, v) for u, v in zip(a, b)):
                return f"item {i} differs (thread {t})"
        return None
    with ThreadPoolExecutor(4) as pool:
        for why in pool.map(pass_of, range(4)):
            if why:
                print(why, file=sys.stderr)
                return 1
    if kw:
        a, b = flat(want.fields([int(i) for i in order])), flat(got.fields([int(i) for i in order]))
        if len(a) != len(b) or not all(np.array_equal(u, v) for u, v in zip(a, b)):
            print("fields() differ", file=sys.stderr)
            return 1
    s.stop = True
    s.join()
    held = shard_files(cache)
    nshards = len(json.load(open(os.path.join(local, "manifest.json")))["shards"])
    if s.peak > limit or held >= nshards:
        print(f"the cache held {s.peak} bytes (limit {limit}), {held} of {nshards} shards at the "
              "end", file=sys.stderr)
        return 1
    print(f"peak={s.peak} shards={held}")
    return 0


def mixture(locals_, urls, cache, limit, kw):
    mine = shardread.Loader([tuple(x) for x in locals_], return_indices=True, **kw)
    want = batches(mine)
    s = Sampler(cache)
    s.start()
    b = shardread.Loader([tuple(x) for x in urls], return_indices=True, cache=cache,
                         cache_limit=limit, **kw)
    got = batches(b)
    info = b._cache_info()
    s.stop = True
    s.join()
    if not same(want, got):
        return 1
    if s.peak > limit or info["peak_bytes"] > limit or info["evicted"] == 0:
        print(f"the cache held {s.peak} bytes (its count {info['peak_bytes']}, limit {limit}), "
              f"{info['evicted']} evicted", file=sys.stderr)
        return 1
    if b.dataset_fingerprint() != mine.dataset_fingerprint():
        print("the fingerprints differ", file=sys.stderr)
        return 1
    print(f"peak={s.peak} evicted={info['evicted']} fetched={info['fetched']}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
