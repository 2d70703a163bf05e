"""NumPy reference of the build geometry's box arithmetic (formats/raw.md "Target record").

usage: detect_ref.py check COCO_JSON MANIFEST TARGETS_JSONL
  Recompute every sample's boxes from the COCO annotations and the manifest's geometry and
  compare them with `shardc info OUT --targets` (boxes to 1e-4 pixel; labels, iscrowd, ids,
  sizes and dropped counts exactly; areas to 1e-5 relative). Exit 1 on the first difference.
usage: detect_ref.py yolo COCO_JSON LABELS_DIR NAMES_FILE
  Write the COCO file's boxes as YOLO labels (class = category id; names line i = id i).
usage: detect_ref.py same A.jsonl B.jsonl
  The two target dumps agree (boxes to 1e-4, everything else exactly).
As a module: the read-time scale ops' arithmetic (multiscale_size, letterbox_params,
scale_boxes), which tests/python/test_detect_scale.py holds the reader to.
"""
import json
import os
import sys

import numpy as np


def tv_resize(w, h, size, max_size=0):
    short, long_ = (w, h) if w <= h else (h, w)
    ns, nl = size, int(size * long_ / short)
    if max_size and nl > max_size:
        ns, nl = int(max_size * ns / nl), max_size
    return (ns, nl) if w <= h else (nl, ns)


def crop_axis(rs, c):
    """CenterCrop of one axis: (dst offset, dst length, window offset)."""
    if c > rs:
        return (c - rs) // 2, rs, 0
    return 0, c, int(round((rs - c) / 2))


def plan(g, w, h):
    """(rs_w, rs_h, dst_x, dst_y, dst_w, dst_h, win_x, win_y) for a w x h source."""
    mode, cw, ch = g["mode"], g.get("crop_width", 0), g.get("crop_height", 0)
    if mode == "size":
        W, H, fit = g["width"], g["height"], g["fit"]
        if fit == "stretch":
            rw, rh = W, H
        else:
            sizes = [tv_resize(w, h, s) for s in range(1, max(W, H) + 1)]
            if fit == "crop":
                rw, rh = next(r for r in sizes if r[0] >= W and r[1] >= H)
            else:
                rw, rh = [r for r in sizes if r[0] <= W and r[1] <= H][-1]
        cw, ch = W, H
    elif mode == "short-side":
        rw, rh = tv_resize(w, h, g["short_side"], g["max_side"])
    else:
        rw, rh, m = w, h, g["max_side"]
        if m and max(w, h) > m:
            if w >= h:
                rw, rh = m, int(np.floor(h * m / w + 0.5))
            else:
                rw, rh = int(np.floor(w * m / h + 0.5)), m
    if cw:
        dx, dw, wx = crop_axis(rw, cw)
        dy, dh, wy = crop_axis(rh, ch)
    else:
        dx, dy, dw, dh, wx, wy = 0, 0, rw, rh, 0, 0
    return rw, rh, dx, dy, dw, dh, wx, wy


def multiscale_size(w, h, s, max_size):
    """RandomShortestSize's resize of a w x h image for shortest side s (shardread.h "Scale"):
    r = min(s / short, max_size / long) in Python floats, each side int(side * r), at least 1."""
    r = min(s / min(w, h), max_size / max(w, h))
    return max(1, int(w * r)), max(1, int(h * r))


def letterbox_params(w, h, out_w, out_h):
    """(scale_w, scale_h, crop_x, crop_y, pad_x, pad_y, image_w, image_h) of the read-time
    letterbox: the build's --size out_w out_h --fit pad plan."""
    rw, rh, dx, dy, dw, dh, wx, wy = plan({"mode": "size", "width": out_w, "height": out_h,
                                          "fit": "pad"}, w, h)
    return rw, rh, wx, wy, dx, dy, dw, dh


def scale_boxes(boxes, area, p, out_w, multi, min_fraction=0.0):
    """Stored boxes (n, 4) through a read-time scale op (shardread.h "Scale"), p a return_params
    row (x, y, w, h, flip, scale_w, scale_h, crop_x, crop_y, pad_x, pad_y, image_w, image_h):
    x' = x * scale_w / W - crop_x + pad_x (likewise y), clipped to the image, mirrored about the
    image's width (multi) or the output's, rounded to float32, empty boxes (and those keeping
    less than min_fraction of their area) dropped. Returns (boxes, area, keep)."""
    _, _, W, H, flip, sw, sh, cx, cy, px, py, iw, ih = (int(v) for v in p)
    b = np.asarray(boxes, np.float64).reshape(-1, 4)
    sx, sy = sw / W, sh / H
    u = np.empty_like(b)
    u[:, [0, 2]] = b[:, [0, 2]] * sx + (px - cx)
    u[:, [1, 3]] = b[:, [1, 3]] * sy + (py - cy)
    c = u.copy()
    c[:, [0, 2]] = c[:, [0, 2]].clip(px, px + iw)
    c[:, [1, 3]] = c[:, [1, 3]].clip(py, py + ih)
    if flip:
        fw = iw if multi else out_w
        c[:, [0, 2]] = fw - c[:, [2, 0]]
    f = c.astype(np.float32)
    keep = (f[:, 0] < f[:, 2]) & (f[:, 1] < f[:, 3])
    if min_fraction > 0:
        kept = (c[:, 2] - c[:, 0]) * (c[:, 3] - c[:, 1])
        whole = (u[:, 2] - u[:, 0]) * (u[:, 3] - u[:, 1])
        keep &= kept >= min_fraction * whole
    a = (np.asarray(area, np.float64) * sx * sy).astype(np.float32)
    return f[keep], a[keep], keep


def expected(coco, g):
    imgs = sorted(coco["images"], key=lambda i: i["file_name"].encode())
    by_img = {}
    for a in coco["annotations"]:
        by_img.setdefault(a["image_id"], []).append(a)
    out = []
    for im in imgs:
        w, h = im["width"], im["height"]
        rw, rh, dx, dy, dw, dh, wx, wy = plan(g, w, h)
        sx, sy = rw / w, rh / h
        anns = by_img.get(im["id"], [])
        if anns:
            b = np.array([a["bbox"] for a in anns], dtype=np.float64)
            xyxy = np.stack([b[:, 0], b[:, 1], b[:, 0] + b[:, 2], b[:, 1] + b[:, 3]], 1)
            xyxy = np.clip(xyxy, 0, [w, h, w, h])
            m = xyxy * [sx, sy, sx, sy] + [dx - wx, dy - wy, dx - wx, dy - wy]
            m = np.clip(m, [dx, dy, dx, dy], [dx + dw, dy + dh, dx + dw, dy + dh]).astype(np.float32)
            keep = (m[:, 0] < m[:, 2]) & (m[:, 1] < m[:, 3])
        else:
            m, keep = np.zeros((0, 4), np.float32), np.zeros(0, bool)
        area = np.array([a.get("area", a["bbox"][2] * a["bbox"][3]) for a in anns]) * sx * sy
        out.append({"image_id": im["id"], "orig_size": [w, h], "dropped": int((~keep).sum()),
                    "boxes": m[keep], "labels": [a["category_id"] for a, k in zip(anns, keep) if k],
                    "iscrowd": [a.get("iscrowd", 0) for a, k in zip(anns, keep) if k],
                    "area": area[keep] if anns else area})
    return out


def compare(i, e, t):
    for k in ("image_id", "orig_size", "dropped", "labels", "iscrowd"):
        if e[k] != t[k]:
            return "sample %d: %s %r, expected %r" % (i, k, t[k], e[k])
    tb = np.array(t["boxes"], dtype=np.float64).reshape(-1, 4)
    eb = np.asarray(e["boxes"], dtype=np.float64).reshape(-1, 4)
    if tb.shape != eb.shape or (tb.size and np.abs(tb - eb).max() > 1e-4):
        return "sample %d: boxes %r, expected %r" % (i, tb.tolist(), eb.tolist())
    ta, ea = np.array(t["area"], np.float64), np.asarray(e["area"], np.float64)
    if ta.shape != ea.shape or (ta.size and (np.abs(ta - ea) > 1e-5 * (1 + np.abs(ea))).any()):
        return "sample %d: areas %r, expected %r" % (i, ta.tolist(), ea.tolist())
    return None


def load_jsonl(p):
    with open(p) as f:
        return [json.loads(line) for line in f if line.strip()]


def main():
    cmd = sys.argv[1]
    if cmd == "check":
        coco = json.load(open(sys.argv[2]))
        g = json.load(open(sys.argv[3]))["geometry"]
        got = load_jsonl(sys.argv[4])
        exp = expected(coco, g)
        if len(got) != len(exp):
            print("%d samples, expected %d" % (len(got), len(exp)))
            return 1
        for i, (e, t) in enumerate(zip(exp, got)):
            why = compare(i, e, t)
            if why:
                print(why)
                return 1
        print("%d samples, %d boxes as the reference" % (len(got), sum(len(t["labels"]) for t in got)))
        return 0
    if cmd == "yolo":
        coco = json.load(open(sys.argv[2]))
        labels, names = sys.argv[3], sys.argv[4]
        os.makedirs(labels, exist_ok=True)
        cats = {c["id"]: c["name"] for c in coco["categories"]}
        with open(names, "w") as f:
            for i in range(max(cats) + 1):
                f.write(cats.get(i, "__unused%d" % i) + "\n")
        by_img = {}
        for a in coco["annotations"]:
            by_img.setdefault(a["image_id"], []).append(a)
        for im in coco["images"]:
            w, h = im["width"], im["height"]
            stem = os.path.splitext(im["file_name"])[0]
            anns = by_img.get(im["id"], [])
            if not anns:
                continue
            with open(os.path.join(labels, stem + ".txt"), "w") as f:
                for a in anns:
                    x, y, bw, bh = a["bbox"]
                    f.write("%d %.17g %.17g %.17g %.17g\n" % (a["category_id"], (x + bw / 2) / w,
                                                             (y + bh / 2) / h, bw / w, bh / h))
        return 0
    if cmd == "same":
        a, b = load_jsonl(sys.argv[2]), load_jsonl(sys.argv[3])
        if len(a) != len(b):
            print("%d and %d samples" % (len(a), len(b)))
            return 1
        for i, (x, y) in enumerate(zip(a, b)):
            y = dict(y, boxes=np.array(y["boxes"]).reshape(-1, 4))
            why = compare(i, y, x)
            if why:
                print(why)
                return 1
        return 0
    print(__doc__)
    return 2


if __name__ == "__main__":
    sys.exit(main())
