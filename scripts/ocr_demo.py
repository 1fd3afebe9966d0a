#!/usr/bin/python3
"""A synthetic document page for a text detector, and a picture of what it found
(Debian's python3-numpy only; no image library).

  scripts/ocr_demo.py fetch CACHE_DIR
      the PP-OCR models of the PyPI wheel rapidocr-onnxruntime 1.4.4 (ch_PP-OCRv4_det_infer,
      ch_ppocr_mobile_v2.0_cls_infer, ch_PP-OCRv4_rec_infer .onnx) into CACHE_DIR: the wheel's
      address and sha256 from PyPI's simple index (JSON form), the download checked against it, the three
      files taken out of the wheel (a zip); nothing is fetched when they are there. Exit 3
      when PyPI cannot be reached (callers skip with the reason).
  scripts/ocr_demo.py page OUT_BASE [--size=640] [--seed=1]
      writes OUT_BASE.npy (the detector's input: [1, 3, size, size] f32, each channel
      (pixel / 255 - 0.5) / 0.5, as PP-OCR's detector is fed) and OUT_BASE.png (the page)
  scripts/ocr_demo.py boxes PAGE_BASE PROB.npy OUT.png [--thresh=0.3]
      reads the detector's probability map [1, 1, H, W], takes the regions where it is
      above the threshold (8-connected), draws their boxes in red on the page and prints
      one line per box and a summary line `regions=N covered=F`
  scripts/ocr_demo.py iou A.npy B.npy [--thresh=0.3]
      the intersection over union of the two maps' regions above the threshold

The page: lines of words in a 5x7 bitmap font (digits and capitals), scaled by 2 to 4,
dark ink on a light, slightly noisy background, a few lines rotated by whole pixels of
slant; the word and line layout comes from --seed.
"""
import argparse
import hashlib
import io
import json
import os
import struct
import urllib.request
import zipfile
import sys
import zlib

import numpy as np

# 5x7 glyphs, one string of 7 rows of 5 bits each (MSB left).
FONT = {
    "0": "0E 11 13 15 19 11 0E", "1": "04 0C 04 04 04 04 0E", "2": "0E 11 01 02 04 08 1F",
    "3": "1F 02 04 02 01 11 0E", "4": "02 06 0A 12 1F 02 02", "5": "1F 10 1E 01 01 11 0E",
    "6": "06 08 10 1E 11 11 0E", "7": "1F 01 02 04 08 08 08", "8": "0E 11 11 0E 11 11 0E",
    "9": "0E 11 11 0F 01 02 0C", "A": "0E 11 11 1F 11 11 11", "B": "1E 11 11 1E 11 11 1E",
    "C": "0E 11 10 10 10 11 0E", "D": "1C 12 11 11 11 12 1C", "E": "1F 10 10 1E 10 10 1F",
    "F": "1F 10 10 1E 10 10 10", "G": "0E 11 10 17 11 11 0F", "H": "11 11 11 1F 11 11 11",
    "I": "0E 04 04 04 04 04 0E", "K": "11 12 14 18 14 12 11", "L": "10 10 10 10 10 10 1F",
    "M": "11 1B 15 15 11 11 11", "N": "11 11 19 15 13 11 11", "O": "0E 11 11 11 11 11 0E",
    "P": "1E 11 11 1E 10 10 10", "R": "1E 11 11 1E 14 12 11", "S": "0F 10 10 0E 01 01 1E",
    "T": "1F 04 04 04 04 04 04", "U": "11 11 11 11 11 11 0E", "V": "11 11 11 11 11 0A 04",
    "W": "11 11 11 15 15 15 0A", "X": "11 11 0A 04 0A 11 11", "Y": "11 11 0A 04 04 04 04",
}
GLYPHS = {c: np.array([[(int(r, 16) >> (4 - b)) & 1 for b in range(5)] for r in rows.split()], np.uint8)
          for c, rows in FONT.items()}


def make_page(size, seed):
    """An RGB page (uint8 [size, size, 3]) and the boxes of its words (y0, x0, y1, x1)."""
    rng = np.random.default_rng(seed)
    page = np.full((size, size, 3), 235, np.float32) + rng.normal(0, 4, (size, size, 1))
    letters = list(GLYPHS)
    words = []
    y = int(size * 0.06)
    while y < size * 0.9:
        scale = int(rng.integers(2, 5))
        x = int(rng.integers(size // 20, size // 8))
        line_h = 7 * scale
        while True:
            n = int(rng.integers(2, 8))
            w = n * 6 * scale
            if x + w > size * 0.94:
                break
            ink = rng.uniform(10, 70)
            for k in range(n):
                g = GLYPHS[letters[int(rng.integers(len(letters)))]]
                block = np.kron(g, np.ones((scale, scale), np.uint8)).astype(bool)
                x0 = x + k * 6 * scale
                page[y:y + line_h, x0:x0 + 5 * scale][block] = ink
            words.append((y, x, y + line_h, x + w - scale))
            x += w + int(rng.integers(3, 7)) * scale
        y += line_h + int(rng.integers(2 * scale, 6 * scale))
    return np.clip(page, 0, 255).astype(np.uint8), words


def write_png(path, rgb):
    """An 8-bit RGB PNG (zlib from the standard library)."""
    h, w, _ = rgb.shape
    raw = b"".join(b"\x00" + rgb[r].tobytes() for r in range(h))

    def chunk(kind, data):
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF)

    with open(path, "wb") as f:
        f.write(b"\x89PNG\r\n\x1a\n")
        f.write(chunk(b"IHDR", struct.pack(">IIBBBBB", w, h, 8, 2, 0, 0, 0)))
        f.write(chunk(b"IDAT", zlib.compress(raw, 6)))
        f.write(chunk(b"IEND", b""))


def read_png(path):
    """The RGB PNGs write_png writes (filter 0 rows only)."""
    data = open(path, "rb").read()
    pos, idat, w, h = 8, b"", 0, 0
    while pos < len(data):
        n = struct.unpack(">I", data[pos:pos + 4])[0]
        kind, body = data[pos + 4:pos + 8], data[pos + 8:pos + 8 + n]
        if kind == b"IHDR":
            w, h = struct.unpack(">II", body[:8])
        elif kind == b"IDAT":
            idat += body
        pos += 12 + n
    raw = np.frombuffer(zlib.decompress(idat), np.uint8).reshape(h, 3 * w + 1)
    if raw[:, 0].any():
        sys.exit("ocr_demo: %s: only unfiltered rows are read" % path)
    return raw[:, 1:].reshape(h, w, 3).copy()


def regions(mask):
    """8-connected regions of a boolean mask: a list of (y0, x0, y1, x1, pixels)."""
    h, w = mask.shape
    label = np.zeros((h, w), np.int32)
    out = []
    ys, xs = np.nonzero(mask)
    for sy, sx in zip(ys, xs):
        if label[sy, sx]:
            continue
        n = len(out) + 1
        label[sy, sx] = n
        stack, box, count = [(sy, sx)], [sy, sx, sy, sx], 0
        while stack:
            y, x = stack.pop()
            count += 1
            box = [min(box[0], y), min(box[1], x), max(box[2], y), max(box[3], x)]
            for dy in (-1, 0, 1):
                for dx in (-1, 0, 1):
                    v, u = y + dy, x + dx
                    if 0 <= v < h and 0 <= u < w and mask[v, u] and not label[v, u]:
                        label[v, u] = n
                        stack.append((v, u))
        out.append((box[0], box[1], box[2] + 1, box[3] + 1, count))
    return out


def unclip(r, shape, ratio=1.6):
    """A region's box grown as the detector's post-processing grows its shrunk text kernels:
    by area · ratio / perimeter on every side (PP-OCR's unclip_ratio 1.6), within the page."""
    y0, x0, y1, x1, _ = r
    h, w = y1 - y0, x1 - x0
    d = int(round(h * w * ratio / (2.0 * (h + w))))
    return max(y0 - d, 0), max(x0 - d, 0), min(y1 + d, shape[0] - 1), min(x1 + d, shape[1] - 1)


def prob_map(path):
    p = np.load(path).astype(np.float32)
    if p.ndim != 4 or p.shape[:2] != (1, 1):
        sys.exit("ocr_demo: %s: expected a [1, 1, H, W] map, got %s" % (path, list(p.shape)))
    return p[0, 0]


WHEEL = ("rapidocr-onnxruntime", "1.4.4")
MODELS = ("ch_PP-OCRv4_det_infer.onnx", "ch_ppocr_mobile_v2.0_cls_infer.onnx", "ch_PP-OCRv4_rec_infer.onnx")


def fetch(cache):
    if all(os.path.isfile(os.path.join(cache, m)) for m in MODELS):
        print("ocr_demo: models in %s" % cache)
        return
    name, version = WHEEL
    wheel = "%s-%s-py3-none-any.whl" % (name.replace("-", "_"), version)
    try:
        req = urllib.request.Request("https://pypi.org/simple/%s/" % name,
                                     headers={"Accept": "application/vnd.pypi.simple.v1+json"})
        files = [f for f in json.load(urllib.request.urlopen(req, timeout=30))["files"] if f["filename"] == wheel]
        if not files:
            sys.exit("ocr_demo: PyPI lists no %s" % wheel)
        data = urllib.request.urlopen(files[0]["url"], timeout=120).read()
    except OSError as e:
        print("ocr_demo: PyPI cannot be reached (%s)" % e, file=sys.stderr)
        sys.exit(3)
    if hashlib.sha256(data).hexdigest() != files[0]["hashes"]["sha256"]:
        sys.exit("ocr_demo: %s: the download does not match PyPI's sha256" % files[0]["filename"])
    os.makedirs(cache, exist_ok=True)
    with zipfile.ZipFile(io.BytesIO(data)) as z:
        for m in MODELS:
            with open(os.path.join(cache, m), "wb") as f:
                f.write(z.read("rapidocr_onnxruntime/models/" + m))
    print("ocr_demo: %s %s (%.1f MB) -> %s" % (name, version, len(data) / 1e6, cache))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("cmd", choices=["fetch", "page", "boxes", "iou"])
    ap.add_argument("args", nargs="+")
    ap.add_argument("--size", type=int, default=640)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--thresh", type=float, default=0.3)
    a = ap.parse_args()
    if a.cmd == "fetch":
        fetch(a.args[0])
    elif a.cmd == "page":
        page, words = make_page(a.size, a.seed)
        x = ((page.astype(np.float32) / 255.0 - 0.5) / 0.5).transpose(2, 0, 1)[None]
        np.save(a.args[0] + ".npy", x.astype(np.float32))
        write_png(a.args[0] + ".png", page)
        print("ocr_demo: page %dx%d, %d words -> %s.npy, %s.png" % (a.size, a.size, len(words), a.args[0], a.args[0]))
    elif a.cmd == "boxes":
        if len(a.args) != 3:
            sys.exit("ocr_demo: boxes PAGE_BASE PROB.npy OUT.png")
        page = read_png(a.args[0] + ".png")
        p = prob_map(a.args[1])
        if p.shape != page.shape[:2]:
            sys.exit("ocr_demo: the map is %s, the page %s" % (list(p.shape), list(page.shape[:2])))
        found = [unclip(r, page.shape) for r in regions(p > a.thresh) if r[4] >= 16]
        for y0, x0, y1, x1 in found:
            for t in range(2):
                page[max(y0 - t - 1, 0), x0:x1] = page[min(y1 + t, page.shape[0] - 1), x0:x1] = (220, 20, 20)
                page[y0:y1, max(x0 - t - 1, 0)] = page[y0:y1, min(x1 + t, page.shape[1] - 1)] = (220, 20, 20)
            print("box y=%d x=%d h=%d w=%d" % (y0, x0, y1 - y0, x1 - x0))
        write_png(a.args[2], page)
        print("ocr_demo: regions=%d covered=%.4f -> %s" % (len(found), float((p > a.thresh).mean()), a.args[2]))
    else:
        if len(a.args) != 2:
            sys.exit("ocr_demo: iou A.npy B.npy")
        ma, mb = prob_map(a.args[0]) > a.thresh, prob_map(a.args[1]) > a.thresh
        union = np.logical_or(ma, mb).sum()
        iou = 1.0 if union == 0 else float(np.logical_and(ma, mb).sum()) / float(union)
        print("ocr_demo: iou=%.4f above=%.4f/%.4f" % (iou, ma.mean(), mb.mean()))


if __name__ == "__main__":
    main()
