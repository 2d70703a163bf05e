#!/usr/bin/env bash
# End to end: decoder parity with Pillow on crafted odd files. The rule: a file is stored if and
# only if Pillow's Image.open(p).convert("RGB") succeeds (default settings), and then with exactly
# Pillow's pixels (and convert("L")'s with --gray; for JPEG, djpeg -grayscale's). Files libjpeg
# warns about, and PNG/BMP pixels past their palette, are stored and listed in warnings.tsv; with
# --strict they are rejects. Classes: JPEG junk before markers, bad Exif/Adobe segments, cut
# scans; BMP RLE8/RLE4 (each escape code, top-down, row overflow), OS/2 headers, bfOffBits gaps,
# missing and short palettes, bad planes, DIB files, bitfield layouts and palette sizes Pillow
# refuses; PNG 16-bit gray (clipped) and palettes too short for their indices, APNG sequence
# numbers, text chunks inflating past Pillow's limits, compression methods; JPEG Photoshop and MPF
# segments Pillow cannot read.
. "$(dirname "$0")/lib.sh"

PY=${SHARDC_PYTHON:-$PYPIL}
if [ -z "$PY" ] || ! "$PY" -c 'import PIL' 2>/dev/null; then
  echo "SKIPPED: no python3 with Pillow (python3-pil)"; exit 77
fi
command -v cjpeg >/dev/null && command -v djpeg >/dev/null || { echo "SKIPPED: no cjpeg/djpeg"; exit 77; }
echo "  Pillow $("$PY" -c 'import PIL; print(PIL.__version__)')"
mkdir -p "$T/src/jpeg" "$T/src/bmp" "$T/src/png"
cat >"$T/gen.py" <<'PY'
import io, os, struct, subprocess, sys, zlib
from PIL import Image
top = sys.argv[1]
out = None
def put(name, data):
    with open(os.path.join(top, out, name), "wb") as f: f.write(data)

# ---- JPEG ----
out = "jpeg"
def base(w=64, h=48):
    im = Image.new("RGB", (w, h))
    im.putdata([((x * 4) & 255, (y * 5) & 255, ((x + y) * 3) & 255) for y in range(h) for x in range(w)])
    b = io.BytesIO(); im.save(b, "JPEG", quality=90); return b.getvalue()
j = base()
i = j.index(b"\xff\xdb")
put("junk_dqt.jpg", j[:i] + b"\x00\x01\x02" + j[i:])
e0 = 4 + struct.unpack(">H", j[4:6])[0]
app1 = b"\xff\xe1" + struct.pack(">H", 2 + 6) + b"abcdef"
put("junk_app1.jpg", j[:e0] + b"\x00\x00" + app1 + j[e0:])
ppm = io.BytesIO(); Image.open(io.BytesIO(j)).save(ppm, "PPM")
r = subprocess.run(["cjpeg", "-restart", "1", "-quality", "90"], input=ppm.getvalue(), capture_output=True, check=True).stdout
k = r.index(b"\xff\xd1")
put("rst.jpg", r)
put("junk_rst.jpg", r[:k] + b"\x12\x34\x56" + r[k:])
put("rst_order.jpg", r[:k] + b"\xff\xd5" + r[k + 2:])
s0 = j.index(b"\xff\xda")
put("cut_scan.jpg", j[:s0 + (len(j) - s0) // 2] + b"\xff\xd9")
tiff = b"II*\x00" + struct.pack("<I", 5000)
put("bad_exif_ifd.jpg", j[:2] + b"\xff\xe1" + struct.pack(">H", 8 + len(tiff)) + b"Exif\x00\x00" + tiff + j[2:])
tiff = b"II*\x00\x08"
put("exif_short_tiff.jpg", j[:2] + b"\xff\xe1" + struct.pack(">H", 8 + len(tiff)) + b"Exif\x00\x00" + tiff + j[2:])
put("exif_bigtiff.jpg", j[:2] + b"\xff\xe1" + struct.pack(">H", 16) + b"Exif\x00\x00II+\x00\x08\x00\x00\x00" + j[2:])
put("adobe_short.jpg", j[:2] + b"\xff\xee" + struct.pack(">H", 7) + b"Adobe" + j[2:])
put("adobe_9.jpg", j[:2] + b"\xff\xee" + struct.pack(">H", 11) + b"Adobe\x00\x64\x00\x00" + j[2:])
put("trunc.jpg", j[:len(j) * 2 // 3])
put("no_eoi.jpg", j[:-2])
# Photoshop APP13 and MPF APP2 segments as Pillow's APP handler and _getmp read them
def seg(m, payload): return b"\xff" + bytes((m,)) + struct.pack(">H", len(payload) + 2) + payload
PS = b"Photoshop 3.0\0"
res = b"8BIM\x03\xed\0\0" + struct.pack(">I", 16) + b"\0" * 16
put("ps_ok.jpg", j[:2] + seg(0xED, PS + res + b"8BIM\x04\x04\0\0" + struct.pack(">I", 3) + b"abc\0") + j[2:])
put("ps_cut_after_id.jpg", j[:2] + seg(0xED, PS + res + b"8BIM\x04\x04") + j[2:])
put("ps_cut_in_size.jpg", j[:2] + seg(0xED, PS + b"8BIM\x04\x04\0\0\0") + j[2:])
def mpf(n, entries, typ=7, head=b"MM\0\x2a"):
    e = ">" if head[:2] == b"MM" else "<"
    off = 8 + 2 + 24 + 4
    ifd = struct.pack(e + "H", 2) + struct.pack(e + "HHLL", 0xB001, 4, 1, n) + struct.pack(e + "HHLL", 0xB002, typ, len(entries), off) + b"\0" * 4
    return j[:2] + seg(0xE2, b"MPF\0" + head + struct.pack(e + "L", 8) + ifd + entries) + j[2:]
put("mpf_ok.jpg", mpf(2, b"\0" * 32))
put("mpf_short_entries.jpg", mpf(3, b"\0" * 32))
put("mpf_short_entries_le.jpg", mpf(3, b"\0" * 40, head=b"II\x2a\0"))
put("mpf_short_long_entries.jpg", mpf(3, b"\0" * 32, typ=4))
put("mpf_bad_format_first.jpg", mpf(3, struct.pack(">L", 1 << 24) + b"\0" * 28))
# ---- BMP ----
out = "bmp"
def info(w, h, bits, comp=0, colors=0, planes=1, hsz=40, extra=b""):
    b = struct.pack("<IiiHHIIiiII", hsz, w, h, planes, bits, comp, 0, 2835, 2835, colors, 0)
    return b + extra + b"\0" * (hsz - len(b) - len(extra))
def bmp(dib, pal=b"", pix=b"", off=None, gap=b""):
    if off is None: off = 14 + len(dib) + len(pal) + len(gap)
    body = dib + pal + gap + pix
    return b"BM" + struct.pack("<IHHI", 14 + len(body), 0, 0, off) + body
def pal4(n, f=lambda i: (i * 37 % 256, i * 91 % 256, i * 53 % 256)):
    return b"".join(bytes((f(i)[2], f(i)[1], f(i)[0], 0)) for i in range(n))
def rows(w, h, bits, f):
    stride = (w * bits + 31) // 32 * 4
    out = b""
    for y in range(h):
        r = bytearray(stride)
        for x in range(w):
            v = f(x, y)
            if bits == 8: r[x] = v
            elif bits == 4: r[x // 2] |= v << (4 * (1 - x % 2))
            elif bits == 1: r[x // 8] |= v << (7 - x % 8)
            elif bits == 24: r[3*x:3*x+3] = bytes(v)
            elif bits == 32: r[4*x:4*x+4] = bytes(v)
            elif bits == 16: r[2*x:2*x+2] = struct.pack("<H", v)
        out += bytes(r)
    return out
W, H = 13, 7
i8 = lambda x, y: (x * 7 + y * 3) % 16
# plain
put("p8.bmp", bmp(info(W, H, 8, colors=16), pal4(16), rows(W, H, 8, i8)))
put("p8_topdown.bmp", bmp(info(W, -H, 8, colors=16), pal4(16), rows(W, H, 8, i8)))
put("p4.bmp", bmp(info(W, H, 4), pal4(16), rows(W, H, 4, i8)))
put("p1.bmp", bmp(info(W, H, 1), pal4(2), rows(W, H, 1, lambda x, y: (x + y) % 2)))
put("bw1.bmp", bmp(info(W, H, 1), pal4(2, lambda i: (255 * i,) * 3), rows(W, H, 1, lambda x, y: (x ^ y) & 1)))
put("rgb24.bmp", bmp(info(W, H, 24), b"", rows(W, H, 24, lambda x, y: (x * 9, y * 30, x * y))))
put("rgb32.bmp", bmp(info(W, H, 32), b"", rows(W, H, 32, lambda x, y: (x * 9, y * 30, x * y, 77))))
put("rgb16.bmp", bmp(info(W, H, 16), b"", rows(W, H, 16, lambda x, y: (x * 2311 + y * 977) & 0x7fff)))
# bad planes, ignored
put("planes0.bmp", bmp(info(W, H, 24, planes=0), b"", rows(W, H, 24, lambda x, y: (x * 9, y * 30, 5))))
put("planes7_p8.bmp", bmp(info(W, H, 8, colors=16, planes=7), pal4(16), rows(W, H, 8, i8)))
# bfOffBits gap between palette and pixels
put("gap_p8.bmp", bmp(info(W, H, 8, colors=16), pal4(16), rows(W, H, 8, i8), gap=b"\xee" * 1100))
put("gap_rgb24.bmp", bmp(info(W, H, 24), b"", rows(W, H, 24, lambda x, y: (x, y, 3)), gap=b"\x11" * 37))
# bfOffBits 0: pixels after the palette; bfOffBits pointing at the palette
put("off0_p8.bmp", bmp(info(W, H, 8, colors=16), pal4(16), rows(W, H, 8, i8), off=0))
put("offpal_p8.bmp", bmp(info(W, H, 8, colors=16), pal4(16), b"\0" * 0 + rows(W, H, 8, i8), off=54))
# no palette at all: 8-bit, pixels right after the header
put("nopal_p8.bmp", bmp(info(W, H, 8), b"", rows(W, H, 8, lambda x, y: x * 19 + y), off=54))
put("nopal_short_p8.bmp", bmp(info(W, H, 8), b"", rows(W, H, 8, lambda x, y: x * 19 + y)))
# index past the palette
put("warn_past_p8.bmp", bmp(info(W, H, 8, colors=4), pal4(4), rows(W, H, 8, lambda x, y: (x * 5 + y) % 40)))
put("warn_past_p4.bmp", bmp(info(W, H, 4, colors=3), pal4(3), rows(W, H, 4, i8)))
# grey ramp palettes
put("grey8.bmp", bmp(info(W, H, 8), pal4(256, lambda i: (i, i, i)), rows(W, H, 8, lambda x, y: x * 19 + y)))
put("grey8_16.bmp", bmp(info(W, H, 8, colors=16), pal4(16, lambda i: (i, i, i)), rows(W, H, 8, lambda x, y: x * 19 + y)))
put("grey4.bmp", bmp(info(W, H, 4), pal4(16, lambda i: (i, i, i)), rows(W, H, 4, i8) + b"\0" * 200))
put("grey4_short.bmp", bmp(info(W, H, 4), pal4(16, lambda i: (i, i, i)), rows(W, H, 4, i8)))
put("bw8.bmp", bmp(info(W, H, 8, colors=2), pal4(2, lambda i: (255 * i,) * 3), rows(W, H, 8, lambda x, y: x * 19 + y)))
# palette sizes
put("pal300.bmp", bmp(info(W, H, 8, colors=300), pal4(300), rows(W, H, 8, i8)))
put("pal2e31.bmp", bmp(info(W, H, 8, colors=2**31), pal4(256), rows(W, H, 8, i8)))
put("pal65537.bmp", bmp(info(W, H, 8, colors=65537), pal4(256), rows(W, H, 8, i8)))
put("pal300_grey.bmp", bmp(info(W, H, 8, colors=300), pal4(300, lambda i: (i & 255,) * 3), rows(W, H, 8, i8)))
# bitfields
def bf(w, h, bits, masks, pix, hsz=40):
    if hsz == 40:
        return bmp(info(w, h, bits, comp=3), struct.pack("<III", *masks[:3]), pix)
    extra = struct.pack("<IIII", *masks)
    return bmp(info(w, h, bits, comp=3, hsz=hsz, extra=b""[:0]) [:40] + extra + b"\0" * (hsz - 56), b"", pix)
px32 = rows(W, H, 32, lambda x, y: (x * 9, y * 30, x * y, 200))
put("bf32_bgrx.bmp", bf(W, H, 32, (0xFF0000, 0xFF00, 0xFF, 0), px32))
put("bf32_xbgr.bmp", bf(W, H, 32, (0xFF000000, 0xFF0000, 0xFF00, 0), px32))
put("bf32_rgba_v5.bmp", bf(W, H, 32, (0xFF, 0xFF00, 0xFF0000, 0xFF000000), px32, hsz=124))
put("bf32_bgra_v4.bmp", bf(W, H, 32, (0xFF0000, 0xFF00, 0xFF, 0xFF000000), px32, hsz=108))
put("bf32_abgr_v4.bmp", bf(W, H, 32, (0xFF000000, 0xFF0000, 0xFF00, 0xFF), px32, hsz=108))
put("bf32_zero_v4.bmp", bf(W, H, 32, (0, 0, 0, 0), px32, hsz=108))
put("bf32_odd.bmp", bf(W, H, 32, (0x3FF00000, 0xFFC00, 0x3FF, 0), px32))
put("bf32_rgba40.bmp", bf(W, H, 32, (0xFF, 0xFF00, 0xFF0000, 0xFF000000), px32))
put("bf32_rgba_noalpha_v4.bmp", bf(W, H, 32, (0xFF, 0xFF00, 0xFF0000, 0), px32, hsz=108))
put("bf24.bmp", bf(W, H, 24, (0xFF0000, 0xFF00, 0xFF), rows(W, H, 24, lambda x, y: (x, y, 9))))
put("bf24_rgb.bmp", bf(W, H, 24, (0xFF, 0xFF00, 0xFF0000), rows(W, H, 24, lambda x, y: (x, y, 9))))
px16 = rows(W, H, 16, lambda x, y: (x * 4111 + y * 977) & 0xffff)
put("bf16_565.bmp", bf(W, H, 16, (0xF800, 0x7E0, 0x1F), px16))
put("bf16_555.bmp", bf(W, H, 16, (0x7C00, 0x3E0, 0x1F), px16))
put("bf16_444.bmp", bf(W, H, 16, (0xF00, 0xF0, 0xF), px16))
put("bf8.bmp", bf(W, H, 8, (0xE0, 0x1C, 0x3), rows(W, H, 8, i8)))
# OS/2 1.x: 12-byte header, 3-byte palette entries
def core(w, h, bits): return struct.pack("<IHHHH", 12, w, h, 1, bits)
def pal3(n, f=lambda i: (i * 37 % 256, i * 91 % 256, i * 53 % 256)):
    return b"".join(bytes((f(i)[2], f(i)[1], f(i)[0])) for i in range(n))
put("os2_p8.bmp", bmp(core(W, H, 8), pal3(256), rows(W, H, 8, lambda x, y: x * 19 + y)))
put("os2_p4.bmp", bmp(core(W, H, 4), pal3(16), rows(W, H, 4, i8)))
put("os2_p1.bmp", bmp(core(W, H, 1), pal3(2), rows(W, H, 1, lambda x, y: (x + y) % 2)))
put("os2_rgb24.bmp", bmp(core(W, H, 24), b"", rows(W, H, 24, lambda x, y: (x * 9, y * 30, 1))))
put("os2_off0_p8.bmp", bmp(core(W, H, 8), pal3(256), rows(W, H, 8, lambda x, y: x * 19 + y), off=0))
put("os2v2_p8.bmp", bmp(info(W, H, 8, hsz=64), pal4(256), rows(W, H, 8, lambda x, y: x * 19 + y)))
put("os2v2_rgb24.bmp", bmp(info(W, H, 24, hsz=64), b"", rows(W, H, 24, lambda x, y: (x, y, 1))))
# other header sizes and depths Pillow refuses
put("hdr56.bmp", bmp(info(W, H, 24, hsz=56), b"", rows(W, H, 24, lambda x, y: (x, y, 1))))
put("bits2.bmp", bmp(info(W, H, 2), pal4(4), rows(W, H, 8, i8)))
put("comp4.bmp", bmp(info(W, H, 24, comp=4), b"", rows(W, H, 24, lambda x, y: (x, y, 1))))
# truncated pixels; the last row's padding missing
full = bmp(info(W, H, 24), b"", rows(W, H, 24, lambda x, y: (x, y, 1)))
put("trunc_rgb24.bmp", full[:-5])
put("nopad_rgb24.bmp", full[:-1])
# top-down with a large negative height; width 0
put("w0.bmp", bmp(info(0, H, 24), b"", b""))
# RLE8: runs, end of line, delta, absolute (odd length: padded), end of bitmap
def rle(w, h, bits, comp, data, colors=16, topdown=False, pal=None):
    return bmp(info(w, -h if topdown else h, bits, comp=comp, colors=colors), pal if pal is not None else pal4(colors), data)
r8 = b"".join([b"\x05\x03", b"\x00\x03\x01\x02\x03\x00", b"\x04\x07", b"\x00\x00",   # row 0: 5x3, abs 1 2 3, 4x7 -> 12 pixels, EOL
               b"\x00\x04\x09\x0a\x0b\x0c", b"\x00\x02", b"\x00\x00", b"\x03\x01", b"\x00\x02\x02\x01\x20\x05", b"\x00\x00",
               b"\x0d\x02", b"\x00\x00", b"\x02\x0e", b"\x00\x01"])
put("rle8.bmp", rle(W, H, 8, 1, r8 + b"\x00" * 0))
put("rle8_full.bmp", rle(W, H, 8, 1, b"".join(bytes((W, (y * 3) % 16)) + b"\x00\x00" for y in range(H)) + b"\x00\x01"))
put("rle8_topdown.bmp", rle(W, H, 8, 1, b"".join(bytes((W, (y * 3) % 16)) + b"\x00\x00" for y in range(H)) + b"\x00\x01", topdown=True))
put("rle8_overflow.bmp", rle(W, H, 8, 1, b"".join(bytes((W + 9, (y * 3) % 16)) + b"\x00\x00" for y in range(H))))
put("warn_rle8_absoverflow.bmp", rle(W, H, 8, 1, b"".join(b"\x00\x11" + bytes(range(17)) + b"\x00" + b"\x00\x00" for y in range(H))))
put("rle8_delta.bmp", rle(W, H, 8, 1, b"\x02\x05\x00\x02\x09\x09\x03\x01" + b"\x04\x06" + b"\x00\x02\x00\x00\x00\x05" + b"\x00\x03\x01\x02\x03\x00" * 40))
put("rle8_short.bmp", rle(W, H, 8, 1, b"\x05\x03\x00\x00\x00\x01"))
put("rle8_trunc.bmp", rle(W, H, 8, 1, b"".join(bytes((W, 3)) + b"\x00\x00" for y in range(H - 1))))
put("rle8_grey.bmp", rle(W, H, 8, 1, b"".join(bytes((W, y * 30)) + b"\x00\x00" for y in range(H)), colors=256, pal=pal4(256, lambda i: (i, i, i))))
put("warn_rle8_past.bmp", rle(W, H, 8, 1, b"".join(bytes((W, 3 + y * 20)) + b"\x00\x00" for y in range(H)), colors=16))
r4 = b"".join(bytes((W, 0x1e)) + b"\x00\x00" for y in range(H - 2)) + b"\x00\x05\x12\x34\x50\x00" + b"\x03\x9a" + b"\x00\x00" + b"\x00\x06\xab\xcd\xef" + b"\x00\x00" + b"\x00\x01"
put("rle4.bmp", rle(W, H, 4, 2, r4))
put("rle4_full.bmp", rle(W, H, 4, 2, b"".join(bytes((W, 0x1e + y)) + b"\x00\x00" for y in range(H))))
put("rle4_topdown.bmp", rle(W, H, 4, 2, b"".join(bytes((W, 0x2c + y)) + b"\x00\x00" for y in range(H)), topdown=True))
put("rle4_overflow.bmp", rle(W, H, 4, 2, b"".join(b"\x00\x15" + bytes(range(10, 21)) + b"\x00" for y in range(H))))
put("rle4_delta.bmp", rle(W, H, 4, 2, b"\x02\x05\x00\x02\x09\x09\x03\x01" + b"\x00\x02\x00\x00\x00\x05" + b"\x00\x04\x12\x34" * 40))
put("rle8_on4bit.bmp", rle(W, H, 4, 1, b"".join(bytes((W, y)) + b"\x00\x00" for y in range(H))))
put("rle4_on8bit.bmp", rle(W, H, 8, 2, b"".join(bytes((W, 0x35)) + b"\x00\x00" for y in range(H))))
put("rle8_24bit.bmp", rle(W, H, 24, 1, b"".join(bytes((W, y)) + b"\x00\x00" for y in range(H)), colors=0, pal=b""))
put("rle8_bw.bmp", rle(W, H, 8, 1, b"".join(bytes((W, y % 2)) + b"\x00\x00" for y in range(H)), colors=2, pal=pal4(2, lambda i: (255 * i,) * 3)))
# odd pixel offset: RLE absolute alignment is on file offsets
d = info(W, H, 8, comp=1, colors=16); p = pal4(16)
data = b"".join(b"\x00\x03\x01\x02\x03" + b"\x00" + bytes((W - 3, 4)) + b"\x00\x00" for y in range(H))
put("rle8_oddoff.bmp", bmp(d, p, data, gap=b"\x00"))
# DIB: no file header
put("dib_p8.dib", info(W, H, 8, colors=16) + pal4(16) + rows(W, H, 8, i8))
put("dib_rgb24.dib", info(W, H, 24) + rows(W, H, 24, lambda x, y: (x * 9, y * 30, 2)))
put("dib_bf32.dib", info(W, H, 32, comp=3) + struct.pack("<III", 0xFF0000, 0xFF00, 0xFF) + px32)
put("dib_os2_p4.dib", core(W, H, 4) + pal3(16) + rows(W, H, 4, i8))
put("dib_rle8.bmp", info(W, H, 8, comp=1, colors=16) + pal4(16) + b"".join(bytes((W, y)) + b"\x00\x00" for y in range(H)))
# bfOffBits inside the palette: the palette read runs on into the pixels (44 entries), the rest
# of the indices fall back to the grey ramp
put("warn_offinpal_p8.bmp", bmp(info(W, H, 8), pal4(16), rows(W, H, 8, lambda x, y: (x * 19 + y * 7) % 256), off=54 + 64))

# ---- PNG ----
out = "png"
def chunk(t, d): return struct.pack(">I", len(d)) + t + d + struct.pack(">I", zlib.crc32(t + d) & 0xffffffff)
def png(w, h, depth, ct, raw, extra=b"", interlace=0):
    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", w, h, depth, ct, 0, 0, interlace))
            + extra + chunk(b"IDAT", zlib.compress(raw)) + chunk(b"IEND", b""))
raw16 = b"".join(b"\0" + b"".join(struct.pack(">H", (x * 4099 + y * 77) & 0xffff) for x in range(W)) for y in range(H))
put("gray16.png", png(W, H, 16, 0, raw16))
put("gray16_trns.png", png(W, H, 16, 0, raw16, chunk(b"tRNS", struct.pack(">H", 300))))
put("rgb16.png", png(W, H, 16, 2, b"".join(b"\0" + b"".join(struct.pack(">HHH", x * 5000, y * 9000, 300 * x) for x in range(W)) for y in range(H))))
plte = chunk(b"PLTE", bytes([10, 20, 30, 40, 50, 60, 70, 80, 90]))
put("warn_past_p8.png", png(W, H, 8, 3, b"".join(b"\0" + bytes((x + y) % 6 for x in range(W)) for y in range(H)), plte))
put("warn_past_p4.png", png(4, 2, 4, 3, b"\0\x01\x23\0\xff\x02", plte))
put("p8.png", png(W, H, 8, 3, b"".join(b"\0" + bytes((x + y) % 3 for x in range(W)) for y in range(H)), plte))
# APNG chunks as Pillow checks them: sequence numbers over fcTL/fdAT (in an animated file only up
# to the fcTL after the image data), lengths, frame regions
raw8 = b"".join(b"\0" + bytes((x * 19 + y * 3) % 256 for x in range(W * 3)) for y in range(H))
def img(extra_before=b"", extra_after=b"", **k):
    h = chunk(b"IHDR", struct.pack(">IIBBBBB", W, H, 8, 2, k.get("comp", 0), 0, k.get("inter", 0)))
    return b"\x89PNG\r\n\x1a\n" + h + extra_before + chunk(b"IDAT", zlib.compress(k.get("raw", raw8))) + extra_after + chunk(b"IEND", b"")
def actl(n): return chunk(b"acTL", struct.pack(">II", n, 0))
def fctl(seq, w=W, h=H, x=0, y=0): return chunk(b"fcTL", struct.pack(">IIIIIHHBB", seq, w, h, x, y, 1, 10, 0, 0))
def fdat(seq): return chunk(b"fdAT", struct.pack(">I", seq) + zlib.compress(raw8))
put("apng_ok.png", img(actl(2) + fctl(0), fctl(1) + fdat(2)))
put("apng_default_ok.png", img(actl(1), fctl(0) + fdat(1)))
put("apng_later_frame_bad.png", img(actl(2) + fctl(0), fctl(5) + fdat(6)))
put("apng_fctl_seq1.png", img(actl(2) + fctl(1)))
put("apng_1frame_fdat_bad.png", img(actl(1) + fctl(0), fdat(4)))
put("apng_noactl_fctl_after.png", img(b"", fctl(3) + fdat(4)))
put("apng_noactl_fdat_after.png", img(b"", fdat(1)))
put("apng_fctl_short.png", img(actl(2) + chunk(b"fcTL", b"\0" * 10)))
put("apng_actl_short.png", img(chunk(b"acTL", b"\0" * 4)))
put("apng_frame_outside.png", img(actl(1) + fctl(0), fctl(1, w=W + 1) + fdat(2)))
put("apng_actl_twice.png", img(actl(2) + actl(2) + fctl(0), fctl(1) + fdat(5)))
# text chunks: a field inflating past 1 MiB, past 64 MiB of text in all, compression methods
bomb = zlib.compress(b"a" * (1024 * 1024 + 1), 9)
mib = zlib.compress(b"a" * (1024 * 1024), 9)
put("ztxt_bomb.png", img(chunk(b"zTXt", b"k\0\0" + bomb)))
put("ztxt_bomb_after.png", img(b"", chunk(b"zTXt", b"k\0\0" + bomb)))
put("ztxt_1mib.png", img(chunk(b"zTXt", b"k\0\0" + mib)))
put("itxt_bomb.png", img(chunk(b"iTXt", b"k\0\1\0\0\0" + bomb)))
put("itxt_bomb_method1.png", img(chunk(b"iTXt", b"k\0\1\1\0\0" + bomb)))
put("iccp_bomb.png", img(chunk(b"iCCP", b"p\0\0" + bomb)))
put("anim_bomb_next_frame.png", img(actl(2) + fctl(0), fctl(1) + chunk(b"zTXt", b"k\0\0" + bomb) + fdat(2)))
put("ztxt_65mib.png", img(b"".join(chunk(b"zTXt", b"k%d\0\0" % i + mib) for i in range(65))))
put("ztxt_65mib_nokey.png", img(b"".join(chunk(b"zTXt", b"\0\0" + mib) for i in range(65))))
put("ztxt_method1.png", img(chunk(b"zTXt", b"k\0\1" + zlib.compress(b"hi"))))
put("ztxt_badzlib.png", img(chunk(b"zTXt", b"k\0\0garbage")))
put("iccp_method1.png", img(chunk(b"iCCP", b"p\0\1" + zlib.compress(b"hi"))))
put("iccp_nonul.png", img(chunk(b"iCCP", b"pppp")))
put("ihdr_comp1.png", img(comp=1))
put("ihdr_filter1.png", img()[:8] + chunk(b"IHDR", struct.pack(">IIBBBBB", W, H, 8, 2, 0, 1, 0)) + img()[33:])
PY
"$PY" "$T/gen.py" "$T/src" || { echo "generator failed"; exit 1; }

expect_exit 1 "RGB build (the files Pillow refuses rejected)" "$SHARDC" build "$T/src" -o "$T/rgb" --no-progress --json
check "--json counts the warnings" grep -q '"warnings": [1-9]' "$T/out"
check "the summary counts the warnings" grep -q "with warnings (see warnings.tsv)" "$T/err"
check "each warning is printed with its file" grep -q "warning: .*junk_dqt.jpg: corrupt JPEG data: 3 extraneous bytes before marker 0xdb" "$T/err"
expect_exit 1 "gray build" "$SHARDC" build "$T/src" -o "$T/gray" --gray --no-progress

"$PY" - "$SHARDC" "$T" <<'PY'
import os, subprocess, sys, warnings
from PIL import Image
warnings.simplefilter("ignore")
shardc, t = sys.argv[1], sys.argv[2]
def tsv(p): return {l.split("\t")[0]: l.split("\t")[1].rstrip("\n") for l in open(p).readlines()[1:]}
fails = 0
counts = {}
# every file the generator wrote must be listed, then stored or rejected: none left unchecked
made = sorted(os.path.join(dp, f) for dp, _, fs in os.walk(os.path.join(t, "src")) for f in fs)
for mode, d in (("RGB", "rgb"), ("L", "gray")):
    o = os.path.join(t, d)
    inputs = [l.split("\t")[2].rstrip("\n") for l in open(os.path.join(o, "inputs.tsv")).readlines()[1:]]
    rej, warn = tsv(os.path.join(o, "rejects.tsv")), tsv(os.path.join(o, "warnings.tsv"))
    k = 0
    for p in inputs:
        name = os.path.relpath(p, os.path.join(t, "src"))
        try:
            im = Image.open(p)
            if mode == "L" and im.format in ("JPEG", "MPO"):  # MPO: a JPEG with an MPF segment
                # the decoder's own luma, as for every gray JPEG (djpeg exits 2 after a warning)
                im.convert("RGB")
                ref = subprocess.run(["djpeg", "-grayscale", "-pnm", p], capture_output=True).stdout.split(b"\n", 3)[3]
            else:
                ref = im.convert(mode).tobytes()
        except Exception as e:
            ref, why = None, f"{type(e).__name__}: {e}"
        if p in rej:
            if ref is not None:
                print(f"  FAIL {name} ({mode}): Pillow opens it, shardc rejects it: {rej[p]}"); fails += 1
            continue
        px = subprocess.run([shardc, "cat", o, str(k)], capture_output=True, check=True).stdout.split(b"\n", 3)[3]
        k += 1
        if ref is None:
            print(f"  FAIL {name} ({mode}): Pillow refuses it ({why}), shardc stores it"); fails += 1
        elif px != ref:
            print(f"  FAIL {name} ({mode}): pixels differ from Pillow's"); fails += 1
        # warnings: what libjpeg warns about, and pixels past a palette
        if name.endswith(".jpg"):
            want = b"Corrupt JPEG data" in subprocess.run(["djpeg", "-pnm", p], capture_output=True).stderr
        else:
            want = os.path.basename(name).startswith("warn_")
        if want != (p in warn):
            print(f"  FAIL {name} ({mode}): warning expected {want}, warnings.tsv says {warn.get(p)}"); fails += 1
        counts[mode] = counts.get(mode, 0) + 1
    print(f"  {mode}: {len(inputs)} files, {k} stored, {len(rej)} rejected as Pillow does, {len(warn)} with warnings")
    if sorted(inputs) != made or counts.get(mode, 0) + len(rej) != len(made):
        print(f"  FAIL ({mode}): {len(made)} files made, {len(inputs)} listed, "
              f"{counts.get(mode, 0)} stored + {len(rej)} rejected"); fails += 1
if len(made) < 100:
    print(f"  FAIL: the generator made {len(made)} files"); fails += 1
sys.exit(1 if fails else 0)
PY
check "every file is stored iff Pillow opens it, with Pillow's pixels, warnings where expected" [ $? -eq 0 ]

mkdir -p "$T/warn/a"
cp "$T/src/jpeg/junk_dqt.jpg" "$T/src/bmp/warn_past_p8.bmp" "$T/src/jpeg/rst.jpg" "$T/warn/a/"
expect_exit 0 "files with warnings alone build with exit 0" "$SHARDC" build "$T/warn" -o "$T/w1" --no-progress
check "... two of them listed in warnings.tsv" [ "$(($(wc -l < "$T/w1/warnings.tsv") - 1))" -eq 2 ]
expect_exit 1 "--strict refuses a file with a warning" "$SHARDC" build "$T/warn" -o "$T/w2" --no-progress --strict
check "... naming the warning" grep -q "junk_dqt.jpg: corrupt JPEG data.*--strict" "$T/err"
finish
