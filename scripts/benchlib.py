"""Helpers the Python benchmarks (bench-augment.py, bench-rrc.py) share: the generated photo
folder they measure on, and a dataset's stored samples as PIL images."""
import io
import json
import os
import subprocess


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
