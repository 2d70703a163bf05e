"""NumPy reference of instance masks and keypoints through the build geometry (compiler/segm.h,
formats/raw.md "Target record, version 2").

usage: segm_ref.py make COCO_IN COCO_OUT
  Add segmentation to every annotation of COCO_IN (a shardc-mksample --coco file), in turn:
  one polygon, two polygons (one concave), uncompressed RLE, COCO's compressed RLE string
  (iscrowd 1), none (the box); and 3 keypoints (names, skeleton) to category 1's annotations.
usage: segm_ref.py yolo COCO_SEG OUT
  From a `make` file, YOLO label files: OUT/seg/S.txt (a normalised polygon line per instance:
  its first polygon, or its box's 4 corners; an RLE instance as a "class cx cy w h" box line),
  OUT/pose/S.txt ("class cx cy w h" and category 1's 3 keypoints x y v; other categories' all 0),
  OUT/names.txt, and OUT/seg.json, OUT/pose.json: the same instances as COCO in pixels (the
  normalised text times the size, the box the polygon's extent), for `check`.
usage: segm_ref.py maps COCO OUT_DIR
  A label map PNG per image of COCO (palette, grey 8-bit and grey 16-bit in turn) at
  OUT_DIR/S.png: blocks of labels 0..20 and a 255 border.
usage: segm_ref.py mapcheck COCO MAP_DIR MANIFEST TARGETS_JSONL
  Each map read with Pillow, moved with torch's nearest arithmetic, the padding the manifest's
  ignore index; the stored label maps equal it value for value.
usage: segm_ref.py check COCO_JSON MANIFEST TARGETS_JSONL
  Rasterise the polygons (even-odd at pixel centres), decode the RLE (written here from COCO's
  definition), move masks with torch's nearest arithmetic and keypoints with the boxes' affine
  map, and compare with `shardc info OUT --targets`: masks byte-exact, keypoints to 1e-4 pixel,
  boxes to 1e-4, labels, drops exactly. Exit 1 on the first difference.
"""
import json
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(__file__))
from detect_ref import plan  # noqa: E402

KP_NAMES = ["left", "right", "top"]


def rle_string(counts):
    """COCO's compressed counts (maskApi.c rleToString): 5 bits a character plus 48, a
    continuation bit 0x20, sign bit 0x10 of the last group, counts from the third on as the
    difference to the count two before."""
    out = []
    for i, x in enumerate(counts):
        if i > 2:
            x -= counts[i - 2]
        more = True
        while more:
            c = x & 0x1f
            x >>= 5
            more = (x != -1) if (c & 0x10) else (x != 0)
            if more:
                c |= 0x20
            out.append(chr(c + 48))
    return "".join(out)


def rle_unstring(s):
    counts, p = [], 0
    while p < len(s):
        x, k, more = 0, 0, True
        while more:
            c = ord(s[p]) - 48
            x |= (c & 0x1f) << (5 * k)
            more = bool(c & 0x20)
            p += 1
            k += 1
            if not more and (c & 0x10):
                x |= -1 << (5 * k)
        if len(counts) > 2:
            x += counts[-2]
        counts.append(x)
    return counts


def rle_decode(counts, h, w):
    """COCO RLE: runs down the columns (Fortran order), 0s first."""
    flat = np.zeros(h * w, np.uint8)
    at = 0
    for i, c in enumerate(counts):
        if i % 2:
            flat[at:at + c] = 1
        at += c
    assert at == h * w
    return flat.reshape(w, h).T.copy()


def rle_encode_cols(mask):
    """COCO's RLE counts: the runs of MASK in column-major order, zeros first."""
    return runs(mask.T)


def raster_polygon(xy, w, h):
    """Even-odd rule at pixel centres: pixel inside when the crossings of its row at x <= its
    centre are odd in number."""
    pts = np.asarray(xy, np.float64).reshape(-1, 2)
    x0, y0 = pts[:, 0], pts[:, 1]
    x1, y1 = np.roll(x0, -1), np.roll(y0, -1)
    yc = np.arange(h)[:, None] + 0.5
    cross = (y0[None, :] <= yc) != (y1[None, :] <= yc)
    with np.errstate(divide="ignore", invalid="ignore"):
        xe = x0[None, :] + (yc - y0[None, :]) * (x1 - x0)[None, :] / (y1 - y0)[None, :]
    xc = np.arange(w)[:, None, None] + 0.5     # (w, 1, 1)
    n = (cross[None, :, :] & (xe[None, :, :] <= xc)).sum(2)     # (w, h)
    return (n.T % 2).astype(np.uint8)


def source_mask(a, w, h):
    sg = a.get("segmentation")
    if isinstance(sg, dict):
        c = sg["counts"]
        return rle_decode(rle_unstring(c) if isinstance(c, str) else c, h, w)
    m = np.zeros((h, w), np.uint8)
    if sg:
        for poly in sg:
            m |= raster_polygon(poly, w, h)
        return m
    x, y, bw, bh = a["bbox"]
    x1, y1, x2, y2 = max(x, 0), max(y, 0), min(x + bw, w), min(y + bh, h)
    cx = np.arange(w) + 0.5
    cy = np.arange(h) + 0.5
    return ((cy[:, None] >= y1) & (cy[:, None] < y2) & (cx[None, :] >= x1) &
            (cx[None, :] < x2)).astype(np.uint8)


def nearest_index(n_out, n_in):
    """torch.nn.functional.interpolate(mode='nearest'): floor(i * (in / out)) in float32."""
    if n_in == n_out:
        return np.arange(n_out)
    scale = np.float32(np.float32(n_in) / np.float32(n_out))
    i = np.floor(np.arange(n_out, dtype=np.float32) * scale).astype(np.int64)
    return np.minimum(i, n_in - 1)


def out_size(g, rw, rh):
    """The stored (width, height) under the manifest's geometry G for an image resized to RW x RH."""
    if g["mode"] == "size":
        return g["width"], g["height"]
    return (g["crop_width"], g["crop_height"]) if g.get("crop_width") else (rw, rh)


def move_mask(m, w, h, p, out_w, out_h, fill=0):
    """M (H x W) moved by the plan P with torch's nearest arithmetic, FILL outside the image."""
    rw, rh, dx, dy, dw, dh, wx, wy = p
    ix = nearest_index(rw, w)[wx:wx + dw]
    iy = nearest_index(rh, h)[wy:wy + dh]
    out = np.full((out_h, out_w), fill, m.dtype)
    out[dy:dy + dh, dx:dx + dw] = m[np.ix_(iy, ix)]
    return out


def runs(mask):
    flat = mask.reshape(-1)
    out, cur, run = [], 0, 0
    for v in flat:
        if v == cur:
            run += 1
        else:
            out.append(run)
            cur, run = v, 1
    out.append(run)
    return out


def make(src, dst):
    coco = json.load(open(src))
    rng = np.random.default_rng(7)
    ims = {im["id"]: im for im in coco["images"]}
    for c in coco["categories"]:
        if c["id"] == 1:
            c["keypoints"] = KP_NAMES
            c["skeleton"] = [[1, 2], [2, 3]]
    for i, a in enumerate(coco["annotations"]):
        im = ims[a["image_id"]]
        w, h = im["width"], im["height"]
        x, y, bw, bh = a["bbox"]
        kind = i % 5
        poly = [x, y, x + bw, y + bh * 0.3, x + bw * 0.4, y + bh]
        if kind == 0:
            a["segmentation"] = [[float(v) for v in poly]]
        elif kind == 1:
            concave = [x + bw, y, x + bw, y + bh, x + bw * 0.5, y + bh * 0.5,
                       x + bw * 0.2, y + bh]
            a["segmentation"] = [poly, [float(min(v, w if j % 2 == 0 else h))
                                        for j, v in enumerate(concave)]]
        elif kind in (2, 3):
            m = np.zeros((h, w), np.uint8)
            m[int(y):int(y + bh), int(x):int(x + bw)] = 1
            m[int(y):int(y + bh):3, int(x):int(x + bw):2] = 0
            c = rle_encode_cols(m)
            a["segmentation"] = {"size": [h, w], "counts": c if kind == 2 else rle_string(c)}
            assert rle_unstring(rle_string(c)) == c
            a["iscrowd"] = 1 if kind == 3 else 0
        else:
            a.pop("segmentation", None)
        if a["category_id"] == 1:
            kp = []
            for k in range(3):
                v = int(rng.integers(0, 3))
                px, py = (x + bw * rng.random(), y + bh * rng.random()) if v else (0, 0)
                kp += [float(px), float(py), v]
            a["keypoints"] = kp
            a["num_keypoints"] = sum(1 for k in kp[2::3] if k > 0)
    json.dump(coco, open(dst, "w"))


def yolo(src, out):
    coco = json.load(open(src))
    ims = {im["id"]: im for im in coco["images"]}
    cls = {c["id"]: i for i, c in enumerate(sorted(coco["categories"], key=lambda c: c["id"]))}
    os.makedirs(out + "/seg", exist_ok=True)
    os.makedirs(out + "/pose", exist_ok=True)
    with open(out + "/names.txt", "w") as f:
        for c in sorted(coco["categories"], key=lambda c: c["id"]):
            f.write(c["name"] + "\n")
    seg, pose = {}, {}
    eq_seg = {"images": coco["images"], "annotations": [], "categories": []}
    eq_pose = {"images": coco["images"], "annotations": [], "categories": []}
    for c in coco["categories"]:
        eq_seg["categories"].append({"id": cls[c["id"]], "name": c["name"]})
        e = {"id": cls[c["id"]], "name": c["name"], "keypoints": KP_NAMES}
        eq_pose["categories"].append(e)
    for a in coco["annotations"]:
        im = ims[a["image_id"]]
        w, h = im["width"], im["height"]
        stem = os.path.splitext(im["file_name"])[0]
        c = cls[a["category_id"]]
        x, y, bw, bh = a["bbox"]
        sg = a.get("segmentation")
        e = {"id": len(eq_seg["annotations"]) + 1, "image_id": im["id"], "category_id": c,
             "area": a["area"], "iscrowd": 0}
        if isinstance(sg, dict):
            text = ["%.6f" % v for v in (min(x + bw / 2, w) / w, min(y + bh / 2, h) / h,
                                         bw / w, bh / h)]
            v = [float(t) for t in text]
            e["bbox"] = [v[0] * w - v[2] * w / 2, v[1] * h - v[3] * h / 2, v[2] * w, v[3] * h]
        else:
            poly = sg[0] if sg else [x, y, x + bw, y, x + bw, y + bh, x, y + bh]
            text = ["%.6f" % (min(max(v, 0), w if j % 2 == 0 else h) / (w if j % 2 == 0 else h))
                    for j, v in enumerate(poly)]
            pts = [float(t) * (w if j % 2 == 0 else h) for j, t in enumerate(text)]
            xs, ys = pts[0::2], pts[1::2]
            e["bbox"] = [min(xs), min(ys), max(xs) - min(xs), max(ys) - min(ys)]
            e["segmentation"] = [pts]
        seg.setdefault(stem, []).append("%d %s" % (c, " ".join(text)))
        eq_seg["annotations"].append(e)
        # pose: the box line and 3 keypoints
        bt = ["%.6f" % v for v in ((x + bw / 2) / w, (y + bh / 2) / h, bw / w, bh / h)]
        bv = [float(t) for t in bt]
        kp = a.get("keypoints") or [0] * 9
        kt = []
        for k in range(3):
            px, py, vis = kp[3 * k:3 * k + 3]
            kt += ["%.6f" % (px / w), "%.6f" % (py / h), "%d" % vis]
        pose.setdefault(stem, []).append("%d %s %s" % (c, " ".join(bt), " ".join(kt)))
        eq_pose["annotations"].append({
            "id": e["id"], "image_id": im["id"], "category_id": c, "area": a["area"],
            "iscrowd": 0,
            "bbox": [bv[0] * w - bv[2] * w / 2, bv[1] * h - bv[3] * h / 2, bv[2] * w, bv[3] * h],
            "keypoints": [float(kt[j]) * (w if j % 3 == 0 else h) if j % 3 < 2
                          else int(kt[j]) for j in range(9)]})
    for d, lines in (("seg", seg), ("pose", pose)):
        for stem, ls in lines.items():
            os.makedirs(os.path.dirname(os.path.join(out, d, stem)), exist_ok=True)
            with open(os.path.join(out, d, stem + ".txt"), "w") as f:
                f.write("\n".join(ls) + "\n")
    json.dump(eq_seg, open(out + "/seg.json", "w"))
    json.dump(eq_pose, open(out + "/pose.json", "w"))


def maps(src, out):
    from PIL import Image
    coco = json.load(open(src))
    rng = np.random.default_rng(11)
    for n, im in enumerate(sorted(coco["images"], key=lambda i: i["file_name"].encode())):
        w, h = im["width"], im["height"]
        m = rng.integers(0, 21, size=(h // 5 + 1, w // 7 + 1))
        m = np.kron(m, np.ones((5, 7), np.int64))[:h, :w]
        m[0, :] = 255
        m[:, -1] = 255
        path = os.path.join(out, os.path.splitext(im["file_name"])[0] + ".png")
        os.makedirs(os.path.dirname(path), exist_ok=True)
        if n % 3 == 0:
            p = Image.fromarray(m.astype(np.uint8), "P")
            p.putpalette([v for i in range(256) for v in (i, 255 - i, i * 7 % 256)])
            p.save(path)
        elif n % 3 == 1:
            Image.fromarray(m.astype(np.uint8), "L").save(path)
        else:
            Image.fromarray((m + 300 * (m < 255)).astype(np.uint16)).save(path)


def mapcheck(coco_path, map_dir, manifest_path, got_path):
    from PIL import Image
    coco = json.load(open(coco_path))
    man = json.load(open(manifest_path))
    g, ignore = man["geometry"], man["targets"]["label_map"]["ignore_index"]
    got = [json.loads(line) for line in open(got_path) if line.strip()]
    imgs = sorted(coco["images"], key=lambda i: i["file_name"].encode())
    if len(got) != len(imgs):
        print("%d samples, expected %d" % (len(got), len(imgs)))
        return 1
    for n, (im, t) in enumerate(zip(imgs, got)):
        path = os.path.join(map_dir, os.path.splitext(im["file_name"])[0] + ".png")
        m = np.array(Image.open(path)).astype(np.int64)
        h, w = m.shape
        p = plan(g, w, h)
        out_w, out_h = out_size(g, p[0], p[1])
        out = move_mask(m, w, h, p, out_w, out_h, ignore)
        flat = out.reshape(-1)
        cut = np.flatnonzero(np.diff(flat)) + 1
        starts = np.concatenate([[0], cut])
        ends = np.concatenate([cut, [flat.size]])
        want = [[int(flat[a]), int(b - a)] for a, b in zip(starts, ends)]
        if t["size"] != [out_h, out_w] or t["label_map"] != want or t["boxes"]:
            print("sample %d (%s): size %r, map %r..., expected %r, %r..." %
                  (n, path, t["size"], t.get("label_map", [])[:8], [out_h, out_w], want[:8]))
            return 1
    return 0


def check(coco_path, manifest_path, got_path):
    coco = json.load(open(coco_path))
    man = json.load(open(manifest_path))
    g = man["geometry"]
    has_masks = man["targets"].get("masks", False)
    has_kp = "keypoints" in man["targets"]
    got = [json.loads(line) for line in open(got_path) if line.strip()]
    imgs = sorted(coco["images"], key=lambda i: i["file_name"].encode())
    by_img = {}
    for a in coco["annotations"]:
        by_img.setdefault(a["image_id"], []).append(a)
    if len(got) != len(imgs):
        print("%d samples, expected %d" % (len(got), len(imgs)))
        return 1
    checked = 0
    for n, (im, t) in enumerate(zip(imgs, got)):
        w, h = im["width"], im["height"]
        p = plan(g, w, h)
        rw, rh, dx, dy, dw, dh, wx, wy = p
        out_w, out_h = out_size(g, rw, rh)
        sx, sy, ox, oy = rw / w, rh / h, dx - wx, dy - wy
        boxes, masks, kps, labels, dropped = [], [], [], [], 0
        for a in by_img.get(im["id"], []):
            x, y, bw, bh = a["bbox"]
            b = np.clip([x, y, x + bw, y + bh], 0, [w, h, w, h])
            m = b * [sx, sy, sx, sy] + [ox, oy, ox, oy]
            m = np.clip(m, [dx, dy, dx, dy], [dx + dw, dy + dh, dx + dw, dy + dh])
            m = m.astype(np.float32)
            if not (m[0] < m[2] and m[1] < m[3]):
                dropped += 1
                continue
            if has_masks:
                mk = move_mask(source_mask(a, w, h), w, h, p, out_w, out_h)
                if not mk.any():
                    dropped += 1
                    continue
                masks.append(runs(mk))
            boxes.append(m)
            labels.append(a["category_id"])
            k3 = []
            src = a.get("keypoints") or [0] * 9
            for k in range(3):
                px, py, v = src[3 * k:3 * k + 3]
                qx, qy = px * sx + ox, py * sy + oy
                if v == 0 or not (dx <= qx <= dx + dw and dy <= qy <= dy + dh):
                    k3.append([0, 0, 0])
                else:
                    k3.append([qx, qy, v])
            kps.append(k3)
        if t["size"] != [out_h, out_w]:
            print("sample %d: size %r, expected %r" % (n, t["size"], [out_h, out_w]))
            return 1
        if t["labels"] != labels or t["dropped"] != dropped:
            print("sample %d: labels %r dropped %d, expected %r and %d" %
                  (n, t["labels"], t["dropped"], labels, dropped))
            return 1
        tb = np.array(t["boxes"], np.float64).reshape(-1, 4)
        if tb.shape[0] != len(boxes) or (boxes and np.abs(tb - np.array(boxes)).max() > 1e-4):
            print("sample %d: boxes %r, expected %r" % (n, tb.tolist(), boxes))
            return 1
        if has_masks and len(t["masks"]) != len(masks):
            print("sample %d: %d masks, expected %d" % (n, len(t["masks"]), len(masks)))
            return 1
        for k, (gm, em) in enumerate(zip(t.get("masks", []), masks)):
            if gm != em:
                print("sample %d instance %d: mask runs %r, expected %r" % (n, k, gm, em))
                return 1
        if not has_kp:
            checked += len(masks)
            continue
        tk = np.array(t["keypoints"], np.float64).reshape(-1, 3, 3)
        ek = np.array(kps, np.float64).reshape(-1, 3, 3)
        if tk.shape != ek.shape or (ek.size and np.abs(tk - ek).max() > 1e-4):
            print("sample %d: keypoints %r, expected %r" % (n, tk.tolist(), ek.tolist()))
            return 1
        checked += len(masks) + int(ek.size)
    if checked == 0:
        print("no instance checked")
        return 1
    return 0


def main():
    if sys.argv[1] == "make":
        make(sys.argv[2], sys.argv[3])
        return 0
    if sys.argv[1] == "yolo":
        yolo(sys.argv[2], sys.argv[3])
        return 0
    if sys.argv[1] == "maps":
        maps(sys.argv[2], sys.argv[3])
        return 0
    if sys.argv[1] == "mapcheck":
        return mapcheck(*sys.argv[2:6])
    if sys.argv[1] == "check":
        return check(sys.argv[2], sys.argv[3], sys.argv[4])
    print(__doc__)
    return 2


if __name__ == "__main__":
    sys.exit(main())
