"""Helpers the Python benchmarks share: the generated photo folder bench-augment.py and
bench-rrc.py measure on, and a dataset's stored samples as PIL images; the COCO annotation index
and the shardread.Loader timing of bench-detect.py and bench-segm.py, and their COCO folder
as torchvision's CocoDetection reads it; the local object store of
bench-remote.py and bench-upload.py (s3rver and the servers of tests/remote_servers.py, which
they put on sys.path)."""
import io
import json
import os
import shutil
import subprocess
import sys
import time


def photos(work, bin_dir, per, name="photos"):
    """WORK/NAME: shardc-mksample's photo-like images, 4 classes of PER (seed 1), made once and
    kept while its stamp file names the same PER."""
    d, stamp = os.path.join(work, name), os.path.join(work, name + ".stamp")
    if not (os.path.isdir(d) and os.path.isfile(stamp) and open(stamp).read().strip() == str(per)):
        subprocess.run(["rm", "-rf", d], check=True)
        subprocess.run([f"{bin_dir}/shardc-mksample", d, "--photo", "--classes", "4",
                        "--per-class", str(per), "--seed", "1", "--quiet"], check=True)
        with open(stamp, "w") as f:
            f.write(f"{per}\n")
    return d


def stored_images(ds, bin_dir):
    """The stored samples as PIL images (decoded, in memory), as shardc cat writes them."""
    from PIL import Image
    n = json.load(open(os.path.join(ds, "manifest.json")))["samples"]
    imgs = []
    for i in range(n):
        ppm = subprocess.run([f"{bin_dir}/shardc", "cat", ds, str(i)], check=True,
                             stdout=subprocess.PIPE).stdout
        im = Image.open(io.BytesIO(ppm))
        im.load()
        imgs.append(im)
    return imgs


def coco_index(ann):
    """The COCO annotation file ANN as CocoDetection reads it, without pycocotools: its images,
    and its annotations listed per image id."""
    with open(ann) as f:
        doc = json.load(f)
    anns = {}
    for a in doc["annotations"]:
        anns.setdefault(a["image_id"], []).append(a)
    return doc["images"], anns


class CocoImages:
    """torchvision's CocoDetection without pycocotools' index: the images the COCO file ann lists
    under root, each read as Image.open(path).convert("RGB"), with its annotations."""

    def __init__(self, root, ann):
        self.root = root
        self.images, self.anns = coco_index(ann)

    def __len__(self):
        return len(self.images)

    def coco_item(self, i):
        """Image i in RGB and its annotations (a list, empty for an image without any)."""
        from PIL import Image
        info = self.images[i]
        img = Image.open(os.path.join(self.root, info["file_name"])).convert("RGB")
        return img, self.anns.get(info["id"], [])


def loader_rate(loader, who, check=None):
    """Images per second of the shardread.Loader LOADER's second epoch (the first warms it);
    CHECK, when given, is called on the warm-up's last batch. Batches delivered as copies in the
    timed epoch are reported on stderr, WHO naming the benchmark."""
    for batch in loader:  # warm-up epoch
        pass
    if check:
        check(batch)
    # a training loop holds one batch while the next is delivered; a batch held besides that
    # (the warm-up's last, kept by its loop variable) would make every batch a copy
    del batch
    copies = loader.copies
    t0, n = time.perf_counter(), 0
    for images, _ in loader:
        n += len(images)
    rate = n / (time.perf_counter() - t0)
    if loader.copies != copies:
        print(f"{who}: {loader.copies - copies} batches were copies", file=sys.stderr)
    return rate


def rate_arg(s):
    """A rate in bytes/s as given: a number, or one with K, M or G (10^3, 10^6, 10^9)."""
    mult = {"K": 1e3, "M": 1e6, "G": 1e9}
    return float(s[:-1]) * mult[s[-1]] if s[-1] in mult else float(s)


def start(cmd, port, who):
    """cmd started quietly and waited for on port; exits naming who when it does not listen."""
    import remote_servers
    p = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    if remote_servers.wait(port):
        p.kill()
        sys.exit(f"{who}: {cmd[0]} did not start")
    return p


def stop(procs, work, kill=False):
    """The servers stopped (terminated, or killed with kill) and waited for; work removed."""
    for p in procs:
        if kill:
            p.kill()
        else:
            p.terminate()
        p.wait()
    shutil.rmtree(work, ignore_errors=True)


def s3rver(root, build):
    """The s3rver program, npm-installed into build/npm (as the tests install it) when absent."""
    path = os.path.join(root, build, "npm", "node_modules", ".bin", "s3rver")
    if not os.path.exists(path):
        subprocess.run(["npm", "install", "--silent", "--no-audit", "--no-fund", "--prefix",
                        os.path.join(root, build, "npm"), "s3rver@3"], check=True)
    return path


def start_s3rver(program, data, who):
    """s3rver on a free loopback port, keeping its buckets in data: (its process, its port)."""
    import remote_servers
    port = remote_servers.free_port()
    return start([program, "-d", data, "-a", "127.0.0.1", "-p", str(port), "--silent"], port,
                 who), port
