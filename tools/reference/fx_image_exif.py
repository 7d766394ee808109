"""
EXIF-orientation fixtures: tests/fixtures/image_exif/ — what diffusers.utils.load_image gives for an image file,
`PIL.ImageOps.exif_transpose(Image.open(path)).convert("RGB")`, which is how the ref2va image references are opened
(references.py MiniMaxH3ImageReference.from_file). Pure Python (Pillow + NumPy, no torch):

    python3 tools/reference/fx_image_exif.py --out tests/fixtures      (or make_fixtures.py --only image_exif)

Needs Pillow >= 12 (the reference machine runs 12.3.0): older ones read orientation differently (Debian 12's 9.4
transposes a TIFF twice, since its TIFF load() already applies the tag, and ignores XMP outside PNG text; 10.2
started joining a JPEG's several EXIF segments). Every picture is 7x5 with a different colour at each pixel, so each
of the eight orientations gives other bytes.

index.json: {pillow, libjpeg_turbo, libwebp, cases: [...]}; a case is
  {file, what, format (Pillow's), error: "Type: message"}                     when load_image raises, or
  {file, what, format, orientation, width, height, rgb, convert_rgb}        where orientation (1..8) is the one
exif_transpose applied — found by matching its result against the eight transposes of the stored picture, not by
reading the tag —, width x height and rgb (raw RGB24) are load_image's result, and convert_rgb is plain
`Image.open(path).convert("RGB")` (null for TIFF, whose load() Pillow already transposes, unlike h3's plain reader).
"""

import argparse
import io
import json
import pathlib
import shutil
import struct
import warnings
import zlib

import numpy as np
import PIL
from PIL import Image, ImageOps, PngImagePlugin, features

W, H = 7, 5
TRANSPOSE = {2: Image.Transpose.FLIP_LEFT_RIGHT, 3: Image.Transpose.ROTATE_180, 4: Image.Transpose.FLIP_TOP_BOTTOM,
             5: Image.Transpose.TRANSPOSE, 6: Image.Transpose.ROTATE_270, 7: Image.Transpose.TRANSVERSE,
             8: Image.Transpose.ROTATE_90}


def picture() -> Image.Image:
    y, x = np.mgrid[0:H, 0:W]
    rgb = np.stack([20 + 35 * x, 20 + 50 * y, (60 * x + 90 * y) % 256], -1).astype(np.uint8)
    return Image.fromarray(rgb)


# ---- EXIF blobs -------------------------------------------------------------------------------------------------

def exif_orientation(value) -> bytes:
    exif = Image.Exif()
    exif[0x0112] = value
    return exif.tobytes()  # b"Exif\0\0" + a little-endian TIFF header + IFD0


def ifd_blob(entries, little=True, tail=b"", announce=None) -> bytes:
    """b"Exif\\0\\0" + a TIFF header + one IFD of (tag, type, count, 4-byte field) entries + `tail` after it.
    With `announce`, the IFD claims that many entries and the blob ends after the real ones."""
    e = "<" if little else ">"
    head = (b"II*\0" if little else b"MM\0*") + struct.pack(e + "L", 8)
    body = struct.pack(e + "H", len(entries) if announce is None else announce) + b"".join(
        struct.pack(e + "HHL", tag, typ, count) + field for tag, typ, count, field in entries)
    if announce is not None:
        return b"Exif\0\0" + head + body
    return b"Exif\0\0" + head + body + struct.pack(e + "L", 0) + tail


def out_of_line(count_entries: int) -> int:
    """Offset of the first byte after a one-IFD blob of n entries (where ifd_blob puts `tail`), from the header."""
    return 8 + 2 + 12 * count_entries + 4


RAW = "Raw profile type exif"
XMP = '<x:xmpmeta xmlns:x="adobe:ns:meta/"><rdf:RDF><rdf:Description tiff:Orientation="{}"/></rdf:RDF></x:xmpmeta>'


def raw_profile(exif: bytes) -> str:
    """ImageMagick's "Raw profile type exif" text: "\\nexif\\n<length>\\n" then the hex, 72 digits a line."""
    digits = exif.hex()
    return "\nexif\n" + f"{len(exif):8d}\n" + "\n".join(digits[i:i + 72] for i in range(0, len(digits), 72)) + "\n"


# ---- files ------------------------------------------------------------------------------------------------------

def save(image, fmt, **options) -> bytes:
    buffer = io.BytesIO()
    image.save(buffer, fmt, **options)
    return buffer.getvalue()


def jpeg(**options) -> bytes:
    return save(picture(), "JPEG", quality=95, subsampling=0, **options)


def jpeg_segments(segments, after_sof=False, **options) -> bytes:
    """A Pillow JPEG with extra marker segments (marker byte, payload) right after SOI, or after its SOF0."""
    data = jpeg(**options)
    extra = b"".join(b"\xff" + bytes([m]) + struct.pack(">H", len(p) + 2) + p for m, p in segments)
    at = 2
    if after_sof:
        at = data.index(b"\xff\xc0")
        at += 2 + struct.unpack(">H", data[at + 2:at + 4])[0]
    return data[:at] + extra + data[at:]


def png_chunk(cid: bytes, payload: bytes) -> bytes:
    return struct.pack(">L", len(payload)) + cid + payload + struct.pack(">L", zlib.crc32(cid + payload))


def png(**options) -> bytes:
    return save(picture(), "PNG", **options)


def png_with(chunk: bytes, after_idat=False) -> bytes:
    """A plain Pillow PNG with one more chunk, before its first IDAT or just before IEND."""
    data = png()
    at = data.rindex(b"IEND") - 4 if after_idat else data.index(b"IDAT") - 4
    return data[:at] + chunk + data[at:]


def png_text(key, kind, value, exif=None) -> bytes:
    """A Pillow PNG with one text chunk (kind: "text" tEXt, "ztxt" zTXt, "itxt" iTXt), and eXIf when `exif`."""
    info = PngImagePlugin.PngInfo()
    if kind == "itxt":
        info.add_itxt(key, value)
    else:
        info.add_text(key, value, zip=kind == "ztxt")
    return png(pnginfo=info, **({"exif": exif} if exif else {}))


def webp(**options) -> bytes:
    return save(picture(), "WEBP", lossless=True, **options)


def tiff(**options) -> bytes:
    return save(picture(), "TIFF", **options)


def cases():
    out = []
    for k in range(1, 9):
        out.append((f"jpeg_{k}.jpg", f"JPEG, EXIF orientation {k}", jpeg(exif=exif_orientation(k))))
    for k in range(1, 9):
        out.append((f"png_{k}.png", f"PNG eXIf chunk, orientation {k}", png(exif=exif_orientation(k))))
    for k in range(1, 9):
        out.append((f"webp_{k}.webp", f"WebP EXIF chunk, orientation {k}", webp(exif=exif_orientation(k))))
    for k in range(1, 9):
        out.append((f"tiff_{k}.tif", f"TIFF, Orientation tag {k} in its own first directory",
                    tiff(exif=Image.Exif() if k == 1 else exif_orientation(k))))
    out += [
        # values Pillow ignores
        ("jpeg_9.jpg", "JPEG, orientation 9: out of range, no rotation", jpeg(exif=exif_orientation(9))),
        ("png_0.png", "PNG, orientation 0: out of range, no rotation", png(exif=exif_orientation(0))),
        ("tiff_9.tif", "TIFF, Orientation tag 9: no rotation", tiff(tiffinfo={0x0112: 9})),
        # how the tag's value is read
        ("jpeg_be_8.jpg", "JPEG, big-endian (MM) EXIF, orientation 8",
         jpeg(exif=ifd_blob([(0x0112, 3, 1, struct.pack(">HH", 8, 0))], little=False))),
        ("jpeg_long_5.jpg", "JPEG, orientation 5 as a LONG", jpeg(exif=ifd_blob([(0x0112, 4, 1, struct.pack("<L", 5))]))),
        ("jpeg_rational_6.jpg", "JPEG, orientation as the RATIONAL 12/2: its Fraction equals 6",
         jpeg(exif=ifd_blob([(0x0112, 5, 1, struct.pack("<L", out_of_line(1)))], tail=struct.pack("<LL", 12, 2)))),
        ("jpeg_rational_7_2.jpg", "JPEG, orientation as the RATIONAL 7/2: not an integer, no rotation",
         jpeg(exif=ifd_blob([(0x0112, 5, 1, struct.pack("<L", out_of_line(1)))], tail=struct.pack("<LL", 7, 2)))),
        ("jpeg_float_3.jpg", "JPEG, orientation as the FLOAT 3.0", jpeg(exif=ifd_blob([(0x0112, 11, 1, struct.pack("<f", 3.0))]))),
        ("jpeg_byte_6.jpg", "JPEG, orientation as a BYTE: bytes to Pillow, no rotation",
         jpeg(exif=ifd_blob([(0x0112, 1, 1, b"\x06\0\0\0")]))),
        ("jpeg_short_pair.jpg", "JPEG, orientation SHORT with two values 6, 1: the first counts",
         jpeg(exif=ifd_blob([(0x0112, 3, 2, struct.pack("<HH", 6, 1))]))),
        ("jpeg_duplicate.jpg", "JPEG, the tag twice, 6 then 3: the later entry wins",
         jpeg(exif=ifd_blob([(0x0112, 3, 1, struct.pack("<HH", 6, 0)), (0x0112, 3, 1, struct.pack("<HH", 3, 0))]))),
        ("jpeg_unknown_type.jpg", "JPEG, orientation of type 14 (unknown: skipped), then XMP 8: XMP counts",
         jpeg(exif=ifd_blob([(0x0112, 14, 1, struct.pack("<HH", 6, 0))]), xmp=XMP.format(8).encode())),
        # truncated and garbage EXIF
        ("jpeg_cut_before.jpg", "JPEG, an entry whose value lies past the blob's end, then orientation 6: the walk "
         "stops there, no rotation",
         jpeg(exif=ifd_blob([(0x010E, 2, 100, struct.pack("<L", 5000)), (0x0112, 3, 1, struct.pack("<HH", 6, 0))]))),
        ("jpeg_cut_after.jpg", "JPEG, orientation 6, then an entry past the blob's end: 6",
         jpeg(exif=ifd_blob([(0x0112, 3, 1, struct.pack("<HH", 6, 0)), (0x010E, 2, 100, struct.pack("<L", 5000))]))),
        ("jpeg_cut_entries.jpg", "JPEG, an IFD announcing 3 entries that holds 1 (orientation 2): the cut keeps it",
         jpeg(exif=ifd_blob([(0x0112, 3, 1, struct.pack("<HH", 2, 0))], announce=3))),
        ("jpeg_garbage.jpg", "JPEG, EXIF that is no TIFF, no JFIF density: open() swallowed the error, no rotation",
         jpeg(exif=b"Exif\0\0garbage, not a TIFF header")),
        ("jpeg_garbage_xmp.jpg", "JPEG, EXIF that is no TIFF and XMP 6, no JFIF density: the swallowed error left an "
         "empty EXIF cached, so the XMP is not read either: no rotation",
         jpeg(exif=b"Exif\0\0garbage, not a TIFF header", xmp=XMP.format(6).encode())),
        ("jpeg_garbage_dpi.jpg", "JPEG, EXIF that is no TIFF with a JFIF density (dpi): exif_transpose raises",
         jpeg(exif=b"Exif\0\0garbage, not a TIFF header", dpi=(72, 72))),
        ("jpeg_short_dpi.jpg", "JPEG, EXIF of 5 bytes after its header, with a JFIF density: raises",
         jpeg(exif=b"Exif\0\0II*\0\x08", dpi=(96, 96))),
        # where JPEG's EXIF and XMP are found
        ("jpeg_two_app1.jpg", "JPEG, one EXIF blob split over two APP1 segments (Pillow joins them): 6",
         jpeg_segments([(0xE1, b"Exif\0\0" + exif_orientation(6)[6:20]), (0xE1, b"Exif\0\0" + exif_orientation(6)[20:])])),
        ("jpeg_app1_after_sof.jpg", "JPEG, the EXIF APP1 after the frame header, before the scan: 3",
         jpeg_segments([(0xE1, exif_orientation(3))], after_sof=True)),
        ("jpeg_xmp_6.jpg", "JPEG, XMP tiff:Orientation=\"6\" and no EXIF", jpeg(xmp=XMP.format(6).encode())),
        ("jpeg_xmp_element_7.jpg", "JPEG, XMP <tiff:Orientation>7</tiff:Orientation>",
         jpeg(xmp=b'<rdf:Description><tiff:Orientation>7</tiff:Orientation></rdf:Description>')),
        ("jpeg_exif_1_xmp_6.jpg", "JPEG, EXIF orientation 1 and XMP 6: the EXIF tag wins, no rotation",
         jpeg(exif=exif_orientation(1), xmp=XMP.format(6).encode())),
        ("jpeg_exif_no_tag_xmp_8.jpg", "JPEG, EXIF without an orientation tag and XMP 8: 8",
         jpeg(exif=ifd_blob([(0x0131, 2, 4, b"h3\0\0")]), xmp=XMP.format(8).encode())),
        # PNG
        ("png_exif_after_idat.png", "PNG, the eXIf chunk after the image data: 6 (exif_transpose loads first)",
         png_with(png_chunk(b"eXIf", exif_orientation(6)[6:]), after_idat=True)),
        ("png_raw_profile.png", "PNG, ImageMagick's tEXt \"Raw profile type exif\": 6",
         png_text(RAW, "text", raw_profile(exif_orientation(6)))),
        ("png_raw_profile_ztxt.png", "PNG, the raw profile in a zTXt chunk: 8",
         png_text(RAW, "ztxt", raw_profile(exif_orientation(8)))),
        ("png_raw_profile_bad_hex.png", "PNG, a raw profile that is not hex: raises",
         png_text(RAW, "text", "\nexif\n      12\nnot hex at all\n")),
        ("png_exif_and_raw_profile.png", "PNG, eXIf 3 and a raw profile 6: eXIf wins",
         png_text(RAW, "text", raw_profile(exif_orientation(6)), exif=exif_orientation(3))),
        ("png_xmp_itxt_5.png", "PNG, iTXt XML:com.adobe.xmp with tiff:Orientation 5",
         png_text("XML:com.adobe.xmp", "itxt", XMP.format(5))),
        ("png_xmp_ztxt_7.png", "PNG, compressed text XML:com.adobe.xmp with tiff:Orientation 7",
         png_text("XML:com.adobe.xmp", "ztxt", XMP.format(7))),
        ("png_garbage.png", "PNG, an eXIf chunk that is no TIFF: raises", png(exif=b"garbage, not a TIFF header")),
        ("png_exif_cut_after_idat.png", "PNG, the eXIf chunk after the image data, cut: raises",
         png_with(png_chunk(b"eXIf", exif_orientation(6)[6:]), after_idat=True)[:-20]),
        # WebP, TIFF, others
        ("webp_xmp_7.webp", "WebP, XMP chunk with tiff:Orientation 7 and no EXIF", webp(xmp=XMP.format(7).encode())),
        ("webp_garbage.webp", "WebP, an EXIF chunk that is no TIFF: raises", webp(exif=b"garbage, not a TIFF header")),
        ("tiff_xmp_6.tif", "TIFF, no Orientation tag, XMP (tag 700) with tiff:Orientation 6",
         tiff(tiffinfo={700: XMP.format(6).encode()})),
        ("bmp.bmp", "BMP: no EXIF, no rotation", save(picture(), "BMP")),
    ]
    return out


def stored_picture(path: pathlib.Path, fmt: str) -> Image.Image:
    """The picture as stored in the file, unrotated: Pillow's plain convert for every format but TIFF, whose load()
    applies the Orientation tag itself; the TIFFs here are uncompressed, so their stored pixels are the source's."""
    if fmt == "TIFF":
        return picture()
    with Image.open(path) as opened:
        return opened.convert("RGB")


def run(out_root: pathlib.Path) -> list:
    if int(PIL.__version__.split(".")[0]) < 12:
        raise RuntimeError(f"Pillow {PIL.__version__} reads EXIF orientation differently from the reference's 12.x")
    root = out_root / "image_exif"
    if root.exists():
        shutil.rmtree(root)
    (root / "sources").mkdir(parents=True)
    (root / "upright").mkdir()
    (root / "convert").mkdir()
    index = {"pillow": PIL.__version__, "libjpeg_turbo": features.version("libjpeg_turbo"),
             "libwebp": features.version("webp"), "cases": []}
    failures = []
    raw = {}
    for name, what, data in cases():
        path = root / "sources" / name
        path.write_bytes(data)
        raw[name] = data
        case = {"file": f"sources/{name}", "what": what}
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            try:
                with Image.open(path) as opened:
                    case["format"] = opened.format
                    upright = ImageOps.exif_transpose(opened).convert("RGB")
            except Exception as error:  # noqa: BLE001 — what load_image raises is the fixture
                case["error"] = f"{type(error).__name__}: {error}"
                index["cases"].append(case)
                continue
            stored = stored_picture(path, case["format"])
        candidates = {1: stored.tobytes(), **{k: stored.transpose(m).tobytes() for k, m in TRANSPOSE.items()}}
        if len(set(candidates.values())) != 8:
            failures.append(f"{name}: the stored picture has symmetric transposes")
        matches = [k for k, v in candidates.items() if v == upright.tobytes()]
        if len(matches) != 1:
            failures.append(f"{name}: load_image's result is none of the eight transposes")
            continue
        case.update(orientation=matches[0], width=upright.width, height=upright.height,
                    rgb=f"upright/{name}.rgb", convert_rgb=None)
        (root / case["rgb"]).write_bytes(upright.tobytes())
        if case["format"] != "TIFF":
            case["convert_rgb"] = f"convert/{name}.rgb"
            (root / case["convert_rgb"]).write_bytes(stored.tobytes())
        index["cases"].append(case)
    lines = ",\n  ".join(json.dumps(c, separators=(",", ":")) for c in index["cases"])
    header = ", ".join(f"{json.dumps(k)}: {json.dumps(index[k])}" for k in ("pillow", "libjpeg_turbo", "libwebp"))
    (root / "index.json").write_text("{" + header + ",\n \"cases\": [\n  " + lines + "\n ]\n}\n")
    total = sum(p.stat().st_size for p in root.rglob("*") if p.is_file())
    errors = sum("error" in c for c in index["cases"])
    print(f"  image_exif: {len(index['cases'])} cases ({errors} raise); {total} bytes; Pillow {PIL.__version__}, "
          f"libjpeg-turbo {index['libjpeg_turbo']}, libwebp {index['libwebp']}")
    return failures


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", default="tests/fixtures", help="the fixtures root (image_exif/ is written under it)")
    args = parser.parse_args()
    problems = run(pathlib.Path(args.out))
    for problem in problems:
        print(f"    {problem}")
    raise SystemExit(1 if problems else 0)
