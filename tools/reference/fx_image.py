"""
Image fixtures: tests/fixtures/image/ — still-image decoding as `Image.open(path).convert("RGB")` gives it, Pillow's
resampling filters, the reference's canvas rule and its fl2va keyframe placement. Pure Python (Pillow + NumPy, no
torch), so it runs on any machine with Pillow:

    python3 tools/reference/fx_image.py --out tests/fixtures      (or make_fixtures.py --only image)
    python3 tools/reference/fx_image.py --verify tests/fixtures/image   (recompute with this Pillow and compare)

Every pixel file is raw interleaved RGB24 (`*.rgb`, rows top to bottom, no padding); `index.json` lists the cases
(contract: tools/reference/README.md, family `image`).

The canvas rule and the placement are the reference's own code: `resolve_canvas_size` (modular_pipeline.py),
`MiniMaxH3ResizeStep.__call__` (before_encoder.py) and `VaeImageProcessor.resize` (image_processor.py) are taken out
of the diffusers sources with `ast` and executed here, with stand-ins only for the pipeline plumbing they are called
through (block state, components), because importing those modules needs torch.
"""

import argparse
import ast
import io
import json
import os
import pathlib
import shutil
import struct
import sys
import types
import warnings
import zlib

import numpy as np
import PIL
from PIL import Image, features

HERE = pathlib.Path(__file__).resolve().parent
SOURCE_W, SOURCE_H = 29, 21  # odd on both axes: partial JPEG MCUs, odd chroma samples, PNG rows not byte-aligned


# ---------------------------------------------------------------------------------------------------------------
# The reference's code, out of the diffusers sources.

def diffusers_root() -> pathlib.Path:
    for entry in os.environ.get("PYTHONPATH", "").split(os.pathsep) + [str(HERE.parent.parent / ".ref"),
                                                                        "/work/main/.ref"]:
        candidate = pathlib.Path(entry or ".") / "diffusers"
        if (candidate / "modular_pipelines" / "minimax_h3" / "modular_pipeline.py").is_file():
            return candidate
    raise FileNotFoundError("the diffusers sources (.ref/diffusers) are not on PYTHONPATH")


def module_ast(path: pathlib.Path) -> ast.Module:
    return ast.parse(path.read_text(), filename=str(path))


def strip_annotations(function: ast.FunctionDef) -> ast.FunctionDef:
    """Drops decorators and annotations, which name torch and pipeline classes this script does not import."""
    function.decorator_list = []
    function.returns = None
    for arg in function.args.args + function.args.kwonlyargs + function.args.posonlyargs:
        arg.annotation = None
    return function


def exec_nodes(nodes: list, namespace: dict, filename: str) -> dict:
    module = ast.Module(body=nodes, type_ignores=[])
    ast.fix_missing_locations(module)
    exec(compile(module, filename, "exec"), namespace)
    return namespace


def find(nodes, kind, name):
    for node in nodes:
        if isinstance(node, kind) and getattr(node, "name", None) == name:
            return node
    raise LookupError(f"{name} not found")


def reference_functions() -> dict:
    root = diffusers_root()
    pipeline_py = root / "modular_pipelines" / "minimax_h3" / "modular_pipeline.py"
    tree = module_ast(pipeline_py)
    constants = [node for node in tree.body if isinstance(node, ast.Assign) and any(
        isinstance(t, ast.Name) and t.id.startswith("MINIMAX_H3_") and "ASPECT" in t.id for t in node.targets)]
    canvas = exec_nodes(constants + [strip_annotations(find(tree.body, ast.FunctionDef, "resolve_canvas_size"))],
                        {}, str(pipeline_py))

    # PIL_INTERPOLATION: the Pillow >= 9.1 branch of utils/pil_utils.py (this script asserts that version).
    pil_utils_py = root / "utils" / "pil_utils.py"
    branch = next(node for node in module_ast(pil_utils_py).body if isinstance(node, ast.If))
    interpolation = exec_nodes(branch.body, {"PIL": PIL}, str(pil_utils_py))["PIL_INTERPOLATION"]

    processor_py = root / "image_processor.py"
    processor_class = find(module_ast(processor_py).body, ast.ClassDef, "VaeImageProcessor")
    processor_resize = exec_nodes([strip_annotations(find(processor_class.body, ast.FunctionDef, "resize"))],
                                  {"PIL": PIL, "PIL_INTERPOLATION": interpolation, "np": np}, str(processor_py))

    encoder_py = root / "modular_pipelines" / "minimax_h3" / "before_encoder.py"
    step_class = find(module_ast(encoder_py).body, ast.ClassDef, "MiniMaxH3ResizeStep")
    step_call = exec_nodes([strip_annotations(find(step_class.body, ast.FunctionDef, "__call__"))],
                           {"Image": Image, "resolve_canvas_size": canvas["resolve_canvas_size"]}, str(encoder_py))
    return {"resolve_canvas_size": canvas["resolve_canvas_size"], "processor_resize": processor_resize["resize"],
            "resize_step_call": step_call["__call__"]}


def reference_place(functions: dict, first, last, height, width, multiple, short_edge, max_pixels):
    """Runs MiniMaxH3ResizeStep.__call__ with stand-ins for its block state and components."""
    block_state = types.SimpleNamespace(image=first, last_image=last, height=height, width=width)
    step = types.SimpleNamespace(get_block_state=lambda state: block_state,
                                 set_block_state=lambda state, value: None)
    processor = types.SimpleNamespace(config=types.SimpleNamespace(resample="lanczos", reducing_gap=None))
    processor.resize = lambda image, height, width: functions["processor_resize"](processor, image, height, width)
    components = types.SimpleNamespace(
        canvas_multiple=multiple, image_processor=processor,
        config=types.SimpleNamespace(canvas_short_edge=short_edge, canvas_max_pixels=max_pixels))
    functions["resize_step_call"](step, components, None)
    return block_state


# ---------------------------------------------------------------------------------------------------------------
# Pictures.

def picture(width: int, height: int, seed: int) -> np.ndarray:
    """Gradients + noise + a white and a black block (sharp edges make LANCZOS ring past 0 and 255)."""
    rng = np.random.default_rng(seed)
    y, x = np.mgrid[0:height, 0:width]
    base = np.stack([x * 255 // max(width - 1, 1), y * 255 // max(height - 1, 1), (x + y) * 37 % 256], -1)
    rgb = np.clip(base + rng.integers(-40, 41, (height, width, 3)), 0, 255)
    rgb[height // 4: height // 2, width // 4: width // 2] = 255
    rgb[height // 2: 3 * height // 4, width // 4: width // 2] = 0
    return rgb.astype(np.uint8)


def alpha_plane(width: int, height: int) -> np.ndarray:
    y, x = np.mgrid[0:height, 0:width]
    alpha = (x * 255 // max(width - 1, 1)).astype(np.uint8)
    alpha[: height // 3, : width // 3] = 0  # fully transparent corner with non-zero colour underneath
    return alpha


# ---------------------------------------------------------------------------------------------------------------
# Hand-written PNG and BMP files, for what Pillow cannot write (sub-byte grey, 16-bit colour, tRNS on truecolour,
# Adam7 interlacing, 16-bit BMP, top-down BMP). The PNG rows cycle through all five filter types.

def png_chunk(kind: bytes, data: bytes) -> bytes:
    return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF)


def pack_row(samples: np.ndarray, depth: int) -> bytes:
    """One row of samples (width x channels) at `depth` bits, MSB first, big-endian for 16 bits."""
    flat = samples.reshape(-1).astype(np.uint32)
    if depth == 16:
        return flat.astype(">u2").tobytes()
    if depth == 8:
        return flat.astype(np.uint8).tobytes()
    per_byte = 8 // depth
    out = bytearray((len(flat) + per_byte - 1) // per_byte)
    for i, value in enumerate(flat):
        out[i // per_byte] |= int(value) << (8 - depth * (i % per_byte + 1))
    return bytes(out)


def paeth(a: int, b: int, c: int) -> int:
    p = a + b - c
    pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
    return a if pa <= pb and pa <= pc else (b if pb <= pc else c)


def filter_rows(rows: list, bpp: int, first_filter: int) -> bytes:
    out, previous = bytearray(), bytes(len(rows[0])) if rows else b""
    for index, row in enumerate(rows):
        kind = (first_filter + index) % 5
        line = bytearray([kind])
        for i, value in enumerate(row):
            left = row[i - bpp] if i >= bpp else 0
            up = previous[i]
            up_left = previous[i - bpp] if i >= bpp else 0
            predictor = (0, left, up, (left + up) // 2, paeth(left, up, up_left))[kind]
            line.append((value - predictor) & 0xFF)
        out += line
        previous = row
    return bytes(out)


ADAM7 = ((0, 0, 8, 8), (4, 0, 8, 8), (0, 4, 4, 8), (2, 0, 4, 4), (0, 2, 2, 4), (1, 0, 2, 2), (0, 1, 1, 2))


def png_file(samples: np.ndarray, color_type: int, depth: int, palette=None, trns=None, interlace=False) -> bytes:
    """samples: (height, width, channels) integers in [0, 2^depth)."""
    height, width, channels = samples.shape
    bpp = max(1, channels * depth // 8)
    if interlace:
        raw = b""
        for number, (x0, y0, dx, dy) in enumerate(ADAM7):
            sub = samples[y0::dy, x0::dx]
            if sub.shape[0] and sub.shape[1]:
                raw += filter_rows([pack_row(r, depth) for r in sub], bpp, number)
    else:
        raw = filter_rows([pack_row(r, depth) for r in samples], bpp, 0)
    out = b"\x89PNG\r\n\x1a\n" + png_chunk(b"IHDR", struct.pack(">IIBBBBB", width, height, depth, color_type, 0, 0,
                                                                   1 if interlace else 0))
    if palette is not None:
        out += png_chunk(b"PLTE", bytes(np.asarray(palette, np.uint8).reshape(-1)))
    if trns is not None:
        out += png_chunk(b"tRNS", trns)
    return out + png_chunk(b"IDAT", zlib.compress(raw, 9)) + png_chunk(b"IEND", b"")


def bmp_file(rgb: np.ndarray, bits: int, top_down: bool) -> bytes:
    """BI_RGB BMP, 24-bit or 16-bit (X1R5G5B5), bottom-up unless top_down."""
    height, width, _ = rgb.shape
    stride = (width * bits // 8 + 3) // 4 * 4
    rows = []
    for row in rgb:
        if bits == 24:
            data = row[:, ::-1].astype(np.uint8).tobytes()
        else:
            r, g, b = (row[:, 0].astype(np.uint16) >> 3, row[:, 1].astype(np.uint16) >> 3,
                       row[:, 2].astype(np.uint16) >> 3)
            data = ((r << 10) | (g << 5) | b).astype("<u2").tobytes()
        rows.append(data + bytes(stride - len(data)))
    pixels = b"".join(rows if top_down else rows[::-1])
    info = struct.pack("<IiiHHIIiiII", 40, width, -height if top_down else height, 1, bits, 0, len(pixels),
                       2835, 2835, 0, 0)
    return b"BM" + struct.pack("<IHHI", 14 + len(info) + len(pixels), 0, 0, 14 + len(info)) + info + pixels


# ---------------------------------------------------------------------------------------------------------------
# Decode cases: (file name, what it covers, writer(path)).

def source_cases() -> list:
    w, h = SOURCE_W, SOURCE_H
    rgb = picture(w, h, 1)
    rgba = np.dstack([rgb, alpha_plane(w, h)])
    gray = rgb[..., 0] // 2 + rgb[..., 1] // 2
    y, x = np.mgrid[0:h, 0:w]
    gray16 = ((x * 613 + y * 1031) * 37 % 1400).astype(np.uint16)  # below and above 255: both sides of the clip
    im_rgb, im_rgba = Image.fromarray(rgb), Image.fromarray(rgba, "RGBA")
    im_p64 = im_rgb.quantize(colors=64)
    im_p16 = im_rgb.quantize(colors=16)
    im_p2 = im_rgb.quantize(colors=2)
    p64_alpha = bytes((i * 37) % 256 for i in range(64))

    def pil(image, fmt, **options):
        return lambda path: image.save(path, fmt, **options)

    def raw(data):
        return lambda path: pathlib.Path(path).write_bytes(data)

    def exif_jpeg(path):
        exif = Image.Exif()
        exif[0x0112] = 6  # orientation: rotate 90 CW to display — convert("RGB") must not apply it
        Image.fromarray(picture(40, 24, 7)).save(path, "JPEG", quality=90, exif=exif.tobytes())

    palette8 = np.array([[255, 0, 0], [0, 255, 0], [0, 0, 255], [250, 250, 250], [10, 10, 10], [128, 64, 32],
                         [32, 64, 128], [200, 150, 100]], np.uint8)
    return [
        ("rgb.png", "PNG RGB 8-bit (Pillow)", pil(im_rgb, "PNG")),
        ("rgba.png", "PNG RGBA 8-bit, transparent pixels with colour: alpha dropped, not composited",
         pil(im_rgba, "PNG")),
        ("p_trns.png", "PNG palette, 64 colours, per-entry tRNS alpha", pil(im_p64, "PNG", transparency=p64_alpha)),
        ("p_bits4.png", "PNG palette at 4 bits per pixel", pil(im_p16, "PNG", bits=4)),
        ("p_bits1.png", "PNG palette at 1 bit per pixel (two colours, not grey)", pil(im_p2, "PNG", bits=1)),
        ("l.png", "PNG grey 8-bit", pil(Image.fromarray(gray), "PNG")),
        ("bilevel.png", "PNG grey 1-bit (mode 1)", pil(Image.fromarray(gray).convert("1"), "PNG")),
        ("la.png", "PNG grey + alpha 8-bit", pil(Image.fromarray(np.dstack([gray, alpha_plane(w, h)]), "LA"), "PNG")),
        ("i16.png", "PNG grey 16-bit: Pillow opens it as I / I;16 and convert('RGB') clips to 255",
         pil(Image.fromarray(gray16), "PNG")),
        ("gray2.png", "PNG grey 2-bit (x 0x55)", raw(png_file((gray >> 6)[..., None], 0, 2))),
        ("gray4.png", "PNG grey 4-bit (x 0x11)", raw(png_file((gray >> 4)[..., None], 0, 4))),
        ("gray16_trns.png", "PNG grey 16-bit with tRNS: still clipped, not the high byte",
         raw(png_file(gray16[..., None], 0, 16, trns=struct.pack(">H", int(gray16[0, 0]))))),
        ("la16.png", "PNG grey + alpha 16-bit: the high byte", raw(png_file(
            np.dstack([gray16 * 40, alpha_plane(w, h).astype(np.uint16) * 257]), 4, 16))),
        ("rgb16.png", "PNG RGB 16-bit: the high byte", raw(png_file(
            rgb.astype(np.uint16) * 257 + np.arange(w, dtype=np.uint16)[None, :, None], 2, 16))),
        ("rgba16.png", "PNG RGBA 16-bit: the high byte", raw(png_file(
            rgba.astype(np.uint16) * 250 + 3, 6, 16))),
        ("rgb_trns.png", "PNG RGB 8-bit with a tRNS colour key", raw(png_file(
            rgb, 2, 8, trns=struct.pack(">HHH", *[int(v) for v in rgb[0, 0]])))),
        ("p2_short_palette.png", "PNG palette 2-bit, 3-entry palette (indices in range)", raw(png_file(
            (gray % 3)[..., None], 3, 2, palette=palette8[:3]))),
        ("interlaced_rgb.png", "PNG Adam7-interlaced RGB 8-bit", raw(png_file(rgb, 2, 8, interlace=True))),
        ("interlaced_gray1.png", "PNG Adam7-interlaced grey 1-bit", raw(png_file((gray >> 7)[..., None], 0, 1,
                                                                                 interlace=True))),
        ("interlaced_p4.png", "PNG Adam7-interlaced palette 4-bit", raw(png_file(
            (gray % 8)[..., None], 3, 4, palette=palette8, interlace=True))),
        ("j420.jpg", "JPEG baseline 4:2:0, quality 90", pil(im_rgb, "JPEG", quality=90)),
        ("j422.jpg", "JPEG baseline 4:2:2", pil(im_rgb, "JPEG", quality=90, subsampling=1)),
        ("j444.jpg", "JPEG baseline 4:4:4", pil(im_rgb, "JPEG", quality=90, subsampling=0)),
        ("progressive.jpg", "JPEG progressive 4:2:0", pil(im_rgb, "JPEG", quality=85, progressive=True)),
        ("optimized.jpg", "JPEG optimized Huffman tables, quality 60", pil(im_rgb, "JPEG", quality=60,
                                                                          optimize=True)),
        ("gray.jpg", "JPEG greyscale", pil(Image.fromarray(gray), "JPEG", quality=90)),
        ("cmyk.jpg", "JPEG CMYK (Adobe, inverted): Pillow's CMYK -> RGB", pil(im_rgb.convert("CMYK"), "JPEG",
                                                                              quality=90)),
        ("exif_orientation.jpg", "JPEG 40x24 with EXIF orientation 6: pixels as stored, no rotation", exif_jpeg),
        ("tiny.jpg", "JPEG 3x2 (less than one MCU)", pil(Image.fromarray(picture(3, 2, 3)), "JPEG", quality=95)),
        ("lossless_rgb.webp", "WebP lossless RGB", pil(im_rgb, "WEBP", lossless=True)),
        ("lossless_rgba.webp", "WebP lossless RGBA", pil(im_rgba, "WEBP", lossless=True)),
        ("lossy_rgb.webp", "WebP lossy RGB (libwebp's fancy upsampling)", pil(im_rgb, "WEBP", quality=80)),
        ("lossy_rgba.webp", "WebP lossy RGBA (ALPH chunk)", pil(im_rgba, "WEBP", quality=80)),
        ("rgb.bmp", "BMP 24-bit", pil(im_rgb, "BMP")),
        ("p.bmp", "BMP 8-bit palette", pil(im_p64, "BMP")),
        ("l.bmp", "BMP 8-bit grey", pil(Image.fromarray(gray), "BMP")),
        ("bilevel.bmp", "BMP 1-bit", pil(Image.fromarray(gray).convert("1"), "BMP")),
        ("rgb555.bmp", "BMP 16-bit X1R5G5B5 (x 255 / 31)", raw(bmp_file(rgb, 16, False))),
        ("top_down.bmp", "BMP 24-bit top-down (negative height)", raw(bmp_file(rgb, 24, True))),
        ("rgb.tif", "TIFF RGB uncompressed", pil(im_rgb, "TIFF")),
        ("rgb_lzw.tif", "TIFF RGB LZW", pil(im_rgb, "TIFF", compression="tiff_lzw")),
        ("rgb_deflate.tif", "TIFF RGB Deflate", pil(im_rgb, "TIFF", compression="tiff_adobe_deflate")),
        ("rgb_packbits.tif", "TIFF RGB PackBits", pil(im_rgb, "TIFF", compression="packbits")),
        ("rgba.tif", "TIFF RGBA (unassociated alpha)", pil(im_rgba, "TIFF")),
        ("l.tif", "TIFF grey 8-bit", pil(Image.fromarray(gray), "TIFF")),
        ("bilevel.tif", "TIFF 1-bit", pil(Image.fromarray(gray).convert("1"), "TIFF")),
        ("p.tif", "TIFF palette", pil(im_p64, "TIFF")),
        ("i16.tif", "TIFF grey 16-bit: clipped like the PNG", pil(Image.fromarray(gray16), "TIFF")),
        ("rgb.ppm", "PPM (P6, maxval 255)", pil(im_rgb, "PPM")),
        ("l.pgm", "PGM (P5, maxval 255)", pil(Image.fromarray(gray), "PPM")),
    ]


# ---------------------------------------------------------------------------------------------------------------
# Resize cases: (name, input (width, height, seed), output (width, height), filter).

FILTERS = {"lanczos": Image.Resampling.LANCZOS, "bicubic": Image.Resampling.BICUBIC,
           "bilinear": Image.Resampling.BILINEAR, "hamming": Image.Resampling.HAMMING, "box": Image.Resampling.BOX}
RESIZE_CASES = (
    ("down", (48, 36, 11), (17, 13), "lanczos"),
    ("up", (13, 9, 12), (64, 40), "lanczos"),
    ("down_up", (40, 30, 13), (23, 57), "lanczos"),
    ("vertical_only", (37, 23, 14), (37, 11), "lanczos"),
    ("horizontal_only", (37, 23, 14), (12, 23), "lanczos"),
    ("identity", (37, 23, 14), (37, 23), "lanczos"),
    ("from_1x1", (1, 1, 15), (7, 5), "lanczos"),
    ("to_1x1", (9, 7, 16), (1, 1), "lanczos"),
    ("to_one_column", (40, 30, 13), (1, 30), "lanczos"),
    ("extreme_down", (240, 3, 17), (7, 2), "lanczos"),
    ("extreme_tall", (3, 150, 18), (2, 9), "lanczos"),
    ("extreme_up", (5, 4, 19), (200, 3), "lanczos"),
    ("ratio_2_exact", (48, 32, 20), (24, 16), "lanczos"),
    ("bicubic_down", (61, 47, 21), (33, 29), "bicubic"),
    ("bicubic_up", (23, 17, 22), (50, 41), "bicubic"),
    ("bilinear_down", (61, 47, 21), (33, 29), "bilinear"),
    ("hamming_down", (61, 47, 21), (33, 29), "hamming"),
    ("box_down", (61, 47, 21), (33, 29), "box"),
)

# Canvas rule cases: (aspect width, aspect height, multiple, short edge, max pixels).
CANVAS_CASES = [
    (16, 9, 32, 768, 768 * 1344), (9, 16, 32, 768, 768 * 1344), (1, 1, 32, 768, 768 * 1344),
    (1920, 1080, 32, 768, 768 * 1344), (1080, 1920, 32, 768, 768 * 1344), (4, 1, 32, 768, 768 * 1344),
    (1, 4, 32, 768, 768 * 1344), (3000, 2000, 32, 768, 768 * 1344), (1000, 251, 32, 768, 768 * 1344),
    (48, 32, 32, 48, 10 ** 9),    # height 48 / 32 = 1.5: ties to even -> 64
    (80, 32, 32, 80, 10 ** 9),    # 80 / 32 = 2.5: ties to even -> 64 (half-up would give 96)
    (3, 2, 32, 80, 10 ** 9),      # width 120 / 32 = 3.75, height 80 / 32 = 2.5
    (1, 1, 32, 10, 10 ** 9),      # rounds to 0 multiples: the floor of one multiple
    (16, 9, 16, 48, 48 * 80), (7, 3, 8, 24, 24 * 40), (2048, 2048, 32, 2048, 10 ** 12),
    (4.0001, 1, 32, 768, 768 * 1344), (1, 4.0001, 32, 768, 768 * 1344), (5, 1, 32, 768, 768 * 1344),
    (0, 1, 32, 768, 768 * 1344), (1, -2, 32, 768, 768 * 1344),
]


def random_canvas_cases(count: int) -> list:
    rng = np.random.default_rng(4242)
    cases = []
    for _ in range(count):
        # Keyframe-like sizes whose aspect ratio is log-uniform over 1:4.5 .. 4.5:1 (some outside 1:4 .. 4:1).
        aspect_w = int(rng.integers(16, 5000))
        aspect_h = max(1, round(aspect_w / float(np.exp(rng.uniform(-np.log(4.5), np.log(4.5))))))
        multiple = int(rng.choice([8, 16, 32, 64]))
        short_edge = int(rng.integers(16, 2049))
        max_pixels = int(short_edge * short_edge * rng.uniform(0.5, 3.0))
        cases.append((aspect_w, aspect_h, multiple, short_edge, max_pixels))
    return cases


# Placement cases: (name, first source, last source, explicit (width, height) or None, multiple, short edge,
# max pixels, what). Sources name PLACEMENT_SOURCES entries or decode cases' files.
PLACEMENT_SOURCES = {"wide60x20": (60, 20, 31), "tall20x60": (20, 60, 32), "square30": (30, 30, 33),
                     "wide80x21": (80, 21, 34), "odd50x33": (50, 33, 35), "canvas32x24": (32, 24, 36),
                     "wide100x20": (100, 20, 37)}
SMALL = (8, 24, 24 * 40)
PLACEMENT_CASES = (
    ("first_only", "odd50x33", None, None, *SMALL, "first keyframe alone: canvas from its aspect, stretched"),
    ("first_and_last", "odd50x33", "tall20x60", None, *SMALL, "the follower is cover-cropped (tall onto wide)"),
    ("last_only", None, "wide60x20", None, *SMALL, "last keyframe alone: it is the anchor, stretched"),
    ("explicit_canvas", "square30", "wide80x21", (32, 24), *SMALL, "explicit 32x24 canvas for both"),
    ("first_at_canvas", "canvas32x24", "wide60x20", (32, 24), *SMALL, "the anchor already at the canvas: as is"),
    ("last_at_canvas", "wide60x20", "canvas32x24", (32, 24), *SMALL, "the follower already at the canvas: as is"),
    ("portrait_then_wide", "tall20x60", "wide60x20", None, *SMALL, "portrait canvas, wide follower cropped"),
    ("near_4_to_1", "wide80x21", "square30", None, 16, 32, 32 * 48, "aspect 3.8: near the 4:1 limit"),
    ("jpeg_keyframes", "j420.jpg", "exif_orientation.jpg", None, 16, 32, 32 * 48, "decoded files as keyframes"),
    ("wider_than_4_to_1", "wide100x20", None, None, *SMALL, "aspect 5 with no explicit canvas: rejected"),
    ("explicit_5_to_1", "wide100x20", "square30", (48, 16), *SMALL, "an explicit canvas needs no aspect check"),
    ("height_without_width", "square30", None, (None, 24), *SMALL, "height without width: rejected"),
)


# ---------------------------------------------------------------------------------------------------------------

def write_rgb(path: pathlib.Path, image: Image.Image) -> None:
    assert image.mode == "RGB", image.mode
    path.write_bytes(image.tobytes())


def compact_json(index: dict) -> str:
    """One line per case, so the index stays small and diffs stay readable."""
    lines = ["{"]
    for number, (key, value) in enumerate(index.items()):
        comma = "," if number + 1 < len(index) else ""
        if isinstance(value, list):
            entries = [json.dumps(entry, separators=(",", ":")) for entry in value]
            lines.append(f' "{key}": [\n  ' + ",\n  ".join(entries) + f"\n ]{comma}")
        else:
            lines.append(f" {json.dumps(key)}: {json.dumps(value)}{comma}")
    return "\n".join(lines) + "\n}\n"


def run(out_root: pathlib.Path) -> list:
    if tuple(int(v) for v in PIL.__version__.split(".")[:2]) < (9, 1):
        raise RuntimeError(f"Pillow {PIL.__version__} is older than 9.1 (Image.Resampling)")
    root = out_root / "image"
    if root.exists():
        shutil.rmtree(root)
    for sub in ("sources", "decoded", "resize", "placement"):
        (root / sub).mkdir(parents=True)
    functions = reference_functions()
    index = {
        "pillow": PIL.__version__,
        "libjpeg_turbo": features.version("libjpeg_turbo"),
        "libwebp": features.version("webp"),
        "decode": [], "resize": [], "canvas": [], "placement": [],
    }

    decoded = {}
    for name, what, writer in source_cases():
        path = root / "sources" / name
        writer(str(path))
        with Image.open(path) as opened, warnings.catch_warnings():
            # Pillow suggests RGBA for a palette with per-entry alpha; convert("RGB") is what the reference does.
            warnings.simplefilter("ignore")
            mode, fmt, size = opened.mode, opened.format, opened.size
            rgb = opened.convert("RGB")
        write_rgb(root / "decoded" / f"{name}.rgb", rgb)
        decoded[name] = rgb
        index["decode"].append({"file": f"sources/{name}", "what": what, "pil_format": fmt, "pil_mode": mode,
                                "width": size[0], "height": size[1], "rgb": f"decoded/{name}.rgb"})

    inputs = {}
    for name, (in_w, in_h, seed), (out_w, out_h), filter_name in RESIZE_CASES:
        key = f"in_{in_w}x{in_h}_{seed}.rgb"
        if key not in inputs:
            inputs[key] = Image.fromarray(picture(in_w, in_h, seed))
            write_rgb(root / "resize" / key, inputs[key])
        result = inputs[key].resize((out_w, out_h), FILTERS[filter_name])
        write_rgb(root / "resize" / f"{name}.rgb", result)
        index["resize"].append({"name": name, "filter": filter_name, "input": f"resize/{key}", "in_width": in_w,
                                "in_height": in_h, "out_width": out_w, "out_height": out_h,
                                "expected": f"resize/{name}.rgb"})

    for aspect_w, aspect_h, multiple, short_edge, max_pixels in CANVAS_CASES + random_canvas_cases(200):
        case = {"aspect_width": aspect_w, "aspect_height": aspect_h, "multiple": multiple, "short_edge": short_edge,
                "max_pixels": max_pixels}
        try:
            case["height"], case["width"] = functions["resolve_canvas_size"](aspect_w, aspect_h, multiple,
                                                                             short_edge, max_pixels)
        except ValueError as error:
            case["error"] = str(error)
        index["canvas"].append(case)

    sources = dict(decoded)
    for key, (src_w, src_h, seed) in PLACEMENT_SOURCES.items():
        sources[key] = Image.fromarray(picture(src_w, src_h, seed))
        write_rgb(root / "placement" / f"{key}.rgb", sources[key])
    for name, first, last, explicit, multiple, short_edge, max_pixels, what in PLACEMENT_CASES:
        width, height = explicit if explicit else (None, None)
        case = {"name": name, "what": what, "multiple": multiple, "short_edge": short_edge,
                "max_pixels": max_pixels, "width": width, "height": height}
        for role, key in (("first", first), ("last", last)):
            case[role] = None if key is None else (
                f"decoded/{key}.rgb" if key in decoded else f"placement/{key}.rgb")
            case[f"{role}_size"] = None if key is None else list(sources[key].size)
        try:
            state = reference_place(functions, sources.get(first), sources.get(last), height, width, multiple,
                                    short_edge, max_pixels)
            case["canvas_height"], case["canvas_width"] = state.height, state.width
            case["anchors"] = list(state.keyframe_anchors)
            case["keyframes"] = []
            for anchor, keyframe in zip(state.keyframe_anchors, state.keyframes):
                file = f"placement/{name}_{anchor}.rgb"
                write_rgb(root / file, keyframe)
                case["keyframes"].append(file)
        except ValueError as error:
            case["error"] = str(error)
        index["placement"].append(case)

    (root / "index.json").write_text(compact_json(index))
    total = sum(p.stat().st_size for p in root.rglob("*") if p.is_file())
    print(f"  image: {len(index['decode'])} decode, {len(index['resize'])} resize, {len(index['canvas'])} canvas, "
          f"{len(index['placement'])} placement cases; {total} bytes; Pillow {PIL.__version__}, libjpeg-turbo "
          f"{index['libjpeg_turbo']}, libwebp {index['libwebp']}")
    return []


def read_rgb(path: pathlib.Path, width: int, height: int) -> Image.Image:
    return Image.frombytes("RGB", (width, height), path.read_bytes())


def verify(root: pathlib.Path) -> list:
    """Recomputes every expected file of an existing image/ folder from its committed sources with this Pillow and
    the diffusers sources on PYTHONPATH; returns the cases that differ. This checks whether another Pillow (another
    libjpeg-turbo, libwebp, libm) gives the same bytes without re-encoding the sources."""
    index = json.loads((root / "index.json").read_text())
    functions = reference_functions()
    failures = []
    for case in index["decode"]:
        with Image.open(root / case["file"]) as opened, warnings.catch_warnings():
            warnings.simplefilter("ignore")
            if opened.convert("RGB").tobytes() != (root / case["rgb"]).read_bytes():
                failures.append(f"decode {case['file']}")
    for case in index["resize"]:
        source = read_rgb(root / case["input"], case["in_width"], case["in_height"])
        result = source.resize((case["out_width"], case["out_height"]), FILTERS[case["filter"]])
        if result.tobytes() != (root / case["expected"]).read_bytes():
            failures.append(f"resize {case['name']}")
    for case in index["canvas"]:
        try:
            got = list(functions["resolve_canvas_size"](case["aspect_width"], case["aspect_height"], case["multiple"],
                                                        case["short_edge"], case["max_pixels"]))
        except ValueError as error:
            got = str(error)
        if got != (case["error"] if "error" in case else [case["height"], case["width"]]):
            failures.append(f"canvas {case}")
    for case in index["placement"]:
        images = {role: None if case[role] is None else read_rgb(root / case[role], *case[f"{role}_size"])
                  for role in ("first", "last")}
        try:
            state = reference_place(functions, images["first"], images["last"], case["height"], case["width"],
                                    case["multiple"], case["short_edge"], case["max_pixels"])
            same = [state.height, state.width] == [case.get("canvas_height"), case.get("canvas_width")] and all(
                keyframe.tobytes() == (root / file).read_bytes()
                for keyframe, file in zip(state.keyframes, case.get("keyframes", [None])))
        except ValueError as error:
            same = str(error) == case.get("error")
        if not same:
            failures.append(f"placement {case['name']}")
    print(f"  image verify: Pillow {PIL.__version__}, libjpeg-turbo {features.version('libjpeg_turbo')}, libwebp "
          f"{features.version('webp')} against fixtures of Pillow {index['pillow']}, libjpeg-turbo "
          f"{index['libjpeg_turbo']}, libwebp {index['libwebp']}: {len(failures)} of "
          f"{sum(len(index[k]) for k in ('decode', 'resize', 'canvas', 'placement'))} cases differ")
    for failure in failures:
        print(f"    differs: {failure}")
    return failures


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", default="tests/fixtures", help="the fixtures root (image/ is written under it)")
    parser.add_argument("--verify", default="", help="an existing image/ folder to recompute and compare instead")
    args = parser.parse_args()
    sys.exit(1 if (verify(pathlib.Path(args.verify)) if args.verify else run(pathlib.Path(args.out))) else 0)
