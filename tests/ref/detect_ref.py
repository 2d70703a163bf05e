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
scale_boxes), which tests/python/test_detect_scale.py holds the reader to, and the whole
read-time box arithmetic from a sample's Loader(return_params="ops") list (move_boxes: crop,
pad, resize, RandomResizedCrop, flip and the warps of rotation, affine and auto_augment, with
the forward maps rotate_map, affine_map and aa_map), which tests/python/test_detect_warp.py
holds the reader to; rotate_shear, torchvision's rotation and shear matrix, also serves
tests/python/test_segm_warps.py's inverse maps.
"""
import math
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


# ---- the warps (reader/shardread.h "Targets"): forward affine maps in pixel-edge coordinates,
# as 2x3 arrays [[a, b, c], [d, e, f]]: x' = a x + b y + c, y' = d x + e y + f ----

def rotate_map(angle, w, h):
    """F.rotate(img, angle) of a w x h image (Pillow's rotate: counter-clockwise about
    (w / 2, h / 2), expand=False), forward, cos and sin rounded to 15 decimals as Pillow's."""
    a = math.radians(angle % 360.0)
    c, s = round(math.cos(a), 15), round(math.sin(a), 15)
    cx, cy = w / 2.0, h / 2.0
    return np.array([[c, s, cx - c * cx - s * cy], [-s, c, cy + s * cx - c * cy]])


def rotate_shear(angle, shear):
    """torchvision's RotateScaleShear without the scale, as its _get_inverse_affine_matrix
    writes it: (a, b, c, d) of [[a, b], [c, d]], angle and shear in degrees."""
    rot, sx, sy = math.radians(angle), math.radians(shear[0]), math.radians(shear[1])
    a = math.cos(rot - sy) / math.cos(sy)
    b = -math.cos(rot - sy) * math.tan(sx) / math.cos(sy) - math.sin(rot)
    c = math.sin(rot - sy) / math.cos(sy)
    d = -math.sin(rot - sy) * math.tan(sx) / math.cos(sy) + math.cos(rot)
    return a, b, c, d


def affine_map(angle, translate, scale, shear, center):
    """F.affine's forward map: torchvision's T * C * RotateScaleShear * C^-1 (its
    _get_inverse_affine_matrix with inverted=False), center (cx, cy) in pixel edges."""
    cx, cy = center
    tx, ty = translate
    a, b, c, d = rotate_shear(angle, shear)
    m = np.array([[a, b], [c, d]]) * scale
    t = np.array([cx + tx, cy + ty]) - m @ np.array([cx, cy])
    return np.hstack([m, t[:, None]])


def aa_map(op_name, magnitude, w, h):
    """torchvision's _apply_op for a geometric op name, forward; None for the others (colour
    ops: the boxes stay)."""
    if op_name in ("ShearX", "ShearY"):
        s = math.degrees(math.atan(magnitude))
        return affine_map(0.0, (0, 0), 1.0, (s, 0.0) if op_name == "ShearX" else (0.0, s),
                          (0.0, 0.0))
    if op_name in ("TranslateX", "TranslateY"):
        t = int(magnitude)
        return affine_map(0.0, (t, 0) if op_name == "TranslateX" else (0, t), 1.0, (0.0, 0.0),
                          (w / 2.0, h / 2.0))
    if op_name == "Rotate":
        return rotate_map(magnitude, w, h)
    return None


def enclose(m, b):
    """The axis-aligned boxes around the 4 corners of boxes b (n, 4) mapped by m."""
    xs = b[:, [0, 2, 2, 0]]
    ys = b[:, [1, 1, 3, 3]]
    x = m[0, 0] * xs + m[0, 1] * ys + m[0, 2]
    y = m[1, 0] * xs + m[1, 1] * ys + m[1, 2]
    return np.stack([x.min(1), y.min(1), x.max(1), y.max(1)], 1)


def move_boxes(boxes, area, src_size, ops, min_fraction=0.0):
    """Stored boxes (n, 4) of a src_size = (w, h) sample through its read-time ops (one
    sample's Loader(return_params="ops") list) as reader/shardread.h "Targets" documents:
    crop / pad / resize / resized_crop place the box (its image rectangle tracked, the box
    clipped to it before the flip or the first warp), hflip mirrors about the canvas, each warp
    (rotate, affine, a geometric auto_augment_op) maps the 4 corners forward, takes the box
    around them and clips it to the canvas (a box left without area there is gone); the area
    scales with the resizes and |det| of the warps. Returns (boxes float32, area float32,
    keep) with keep the stored boxes kept."""
    u = np.asarray(boxes, np.float64).reshape(-1, 4).copy()
    fac = 1.0
    W, H = src_size
    img = [0.0, 0.0, float(W), float(H)]       # the image's rectangle in the canvas
    c = None
    alive = np.ones(len(u), bool)

    def clip(b, r):
        return np.stack([b[:, 0].clip(r[0], r[2]), b[:, 1].clip(r[1], r[3]),
                         b[:, 2].clip(r[0], r[2]), b[:, 3].clip(r[1], r[3])], 1)

    for name, kw in ops:
        if name in ("resized_crop", "resize", "crop", "pad"):
            assert c is None, "placement after a flip or warp"
            if name == "resized_crop":
                h, w = kw["size"]
                sx, sy = w / kw["width"], h / kw["height"]
                u = (u - [kw["left"], kw["top"]] * 2) * [sx, sy, sx, sy]
                img, fac, W, H = [0.0, 0.0, w, h], fac * sx * sy, w, h
            elif name == "resize":
                h, w = kw["size"]
                sx, sy = w / W, h / H
                u = u * [sx, sy, sx, sy]
                img, fac, W, H = [0.0, 0.0, w, h], fac * sx * sy, w, h
            elif name == "crop":
                x, y, W, H = kw["left"], kw["top"], kw["width"], kw["height"]
                u = u - [x, y, x, y]
                img = [max(img[0] - x, 0), max(img[1] - y, 0), min(img[2] - x, W),
                       min(img[3] - y, H)]
            else:
                l, t, r, b = kw["padding"]
                u = u + [l, t, l, t]
                img = [img[0] + l, img[1] + t, img[2] + l, img[3] + t]
                W, H = W + l + r, H + t + b
            continue
        if c is None:
            c = clip(u, img)
        if name == "hflip":
            c = np.stack([W - c[:, 2], c[:, 1], W - c[:, 0], c[:, 3]], 1)
            u = np.stack([W - u[:, 2], u[:, 1], W - u[:, 0], u[:, 3]], 1)
            continue
        if name == "rotate":
            m = rotate_map(kw["angle"], W, H)
        elif name == "affine":
            m = affine_map(kw["angle"], kw["translate"], kw["scale"], kw["shear"],
                           (W / 2.0, H / 2.0))
        elif name == "auto_augment_op":
            m = aa_map(kw["op_name"], kw["magnitude"], W, H)
            if m is None:
                continue
        else:
            continue                            # colour ops, grayscale, erase
        alive &= (c[:, 0] < c[:, 2]) & (c[:, 1] < c[:, 3])
        c = clip(enclose(m, c), [0.0, 0.0, W, H])
        u = enclose(m, u)
        fac *= abs(np.linalg.det(m[:, :2]))
    if c is None:
        c = clip(u, img)
    f = c.astype(np.float32)
    keep = alive & (f[:, 0] < f[:, 2]) & (f[:, 1] < f[:, 3])
    if min_fraction > 0:
        kept = (c[:, 2] - c[:, 0]) * (c[:, 3] - c[:, 1])
        whole = (u[:, 2] - u[:, 0]) * (u[:, 3] - u[:, 1])
        keep &= kept >= min_fraction * whole
    a = (np.asarray(area, np.float64) * fac).astype(np.float32)
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
        out.append({"image_id": im["id"], "orig_size": [h, w], "dropped": int((~keep).sum()),
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
