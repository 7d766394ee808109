"""
Media-input fixtures: tests/fixtures/media/ — how the reference turns a Ref2VA video or audio reference into what its
encoders see (spec/sampling.md §4, spec/audio_vae.md §6.2), for src/media/video_input.h and audio_input.h.

Four parts, each written when the tools it needs are at hand and left as it is otherwise (the machine with torch has
neither FFmpeg nor PyAV, this one has no torch):

    fps.json          the 24 fps resampling and truncation of MiniMaxH3Ref2VASetupStep._normalize_video_condition
                      (NumPy only)
    canvas/           the same function's canvas step: frames that are LANCZOS-resized (Pillow)
    files/ files.json small media files made with the `ffmpeg` command line, and what the reference's own decoders
                      (references.py _decode_video_file, _decode_audio_file) give for them with PyAV (needs `ffmpeg`
                      and PyAV)
    resample/ resample.json
                      torchaudio.transforms.Resample(orig, 32000) of test signals, and the reference's
                      _normalize_audio_condition (needs torch and torchaudio)

    python3 tools/reference/fx_media.py --out tests/fixtures     (or make_fixtures.py --only media)

The reference's functions are taken out of the diffusers sources with `ast` (as fx_image.py does) and run with
stand-ins only where they name a library the part does not need: `torch` in the video normalization (it only tests
`isinstance(frames, torch.Tensor)`) and in the file decoders (`from_numpy`, `cat`, `float32`), and a `rotation`
attribute for PyAV releases older than 14.1, which lack `VideoFrame.rotation` (it is read from the stream's display
matrix, which is where PyAV >= 14.1 on FFmpeg >= 7 finds it). Contract: tools/reference/README.md, family `media`.
"""

import argparse
import ast
import hashlib
import json
import math
import pathlib
import shutil
import subprocess
import sys
import types
from fractions import Fraction

import numpy as np
from PIL import Image

HERE = pathlib.Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from fx_image import diffusers_root, exec_nodes, find, module_ast, strip_annotations  # noqa: E402

TARGET_FPS = 24.0
TARGET_RATE = 32000


def write_json(path: pathlib.Path, obj) -> None:
    """Top-level keys one per line, each case on one line of its own (the lists stay compact)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    lines = []
    for key in sorted(obj):
        value = obj[key]
        if isinstance(value, list):
            body = ",\n".join("  " + json.dumps(item, sort_keys=True) for item in value)
            lines.append(f"{json.dumps(key)}: [\n{body}\n]")
        else:
            lines.append(f"{json.dumps(key)}: {json.dumps(value, sort_keys=True)}")
    path.write_text("{\n" + ",\n".join(lines) + "\n}\n")


def fresh(path: pathlib.Path) -> pathlib.Path:
    if path.exists():
        shutil.rmtree(path)
    path.mkdir(parents=True)
    return path


# ---------------------------------------------------------------------------------------------------------------
# The reference's code, out of the diffusers sources.

def reference_setup_function(name: str, namespace: dict):
    """A static method of MiniMaxH3Ref2VASetupStep (before_encoder.py), executed in `namespace`."""
    encoder_py = diffusers_root() / "modular_pipelines" / "minimax_h3" / "before_encoder.py"
    step = find(module_ast(encoder_py).body, ast.ClassDef, "MiniMaxH3Ref2VASetupStep")
    return exec_nodes([strip_annotations(find(step.body, ast.FunctionDef, name))], namespace, str(encoder_py))[name]


def reference_canvas_function():
    pipeline_py = diffusers_root() / "modular_pipelines" / "minimax_h3" / "modular_pipeline.py"
    tree = module_ast(pipeline_py)
    constants = [node for node in tree.body if isinstance(node, ast.Assign) and any(
        isinstance(t, ast.Name) and t.id.startswith("MINIMAX_H3_") and "ASPECT" in t.id for t in node.targets)]
    nodes = constants + [strip_annotations(find(tree.body, ast.FunctionDef, "resolve_canvas_size"))]
    return exec_nodes(nodes, {}, str(pipeline_py))["resolve_canvas_size"]


def reference_video_normalization():
    """_normalize_video_condition with a stand-in torch (NumPy frames never are a torch.Tensor)."""
    torch_stub = types.SimpleNamespace(Tensor=type("Tensor", (), {}))
    return reference_setup_function("_normalize_video_condition", {
        "np": np, "math": math, "torch": torch_stub, "Image": Image,
        "resolve_canvas_size": reference_canvas_function()})


# ---------------------------------------------------------------------------------------------------------------
# fps.json: which source frame each output frame is, for (source frames, fps, generated frames) triples.

FPS_RATES = (  # (label, numerator, denominator): the rate a container reports, as PyAV's Fraction
    ("30", 30, 1), ("29.97", 30000, 1001), ("25", 25, 1), ("60", 60, 1), ("12", 12, 1), ("24", 24, 1),
    ("23.976", 24000, 1001), ("59.94", 60000, 1001), ("50", 50, 1), ("15", 15, 1), ("120", 120, 1), ("7.5", 15, 2),
    ("240", 240, 1), ("1", 1, 1), ("48", 48, 1), ("30.5", 61, 2))
FPS_TARGETS = (1, 22, 124, 362)


def index_frames(count: int) -> np.ndarray:
    """(count, 32, 32, 3) frames that carry their own index (R = low byte, G = high byte): the canvas rule puts a
    square 32-pixel frame on itself (multiple 32, short edge 32, area 1024), so the canvas step leaves them alone."""
    frames = np.zeros((count, 32, 32, 3), np.uint8)
    frames[:, :, :, 0] = (np.arange(count) & 255)[:, None, None]
    frames[:, :, :, 1] = (np.arange(count) >> 8)[:, None, None]
    return frames


def fps_part(root: pathlib.Path) -> None:
    normalize = reference_video_normalization()
    cases = []
    for label, numerator, denominator in FPS_RATES:
        fps = float(Fraction(numerator, denominator))  # what float(stream.average_rate) gives
        for target in FPS_TARGETS:
            needed = math.ceil(target * fps / TARGET_FPS) + 2
            for count in sorted({1, needed, needed + 5}):
                out = normalize(index_frames(count), fps, target, 32, 32, 32 * 32, TARGET_FPS)
                indices = out[:, 0, 0, 0].astype(np.int64) | (out[:, 0, 0, 1].astype(np.int64) << 8)
                assert np.all(np.diff(indices) >= 0)
                # The output is source frame 0 repeats[0] times, then frame 1 repeats[1] times, ...: one base-36
                # digit per source frame up to the last one used.
                repeats = "".join(np.base_repr(r, 36).lower() for r in np.bincount(indices)) if indices.size else ""
                cases.append({"fps_label": label, "fps_num": numerator, "fps_den": denominator, "fps": fps,
                              "source_frames": count, "num_frames": target, "repeats": repeats})
    write_json(root / "fps.json", {"target_fps": TARGET_FPS, "cases": cases})
    print(f"  media/fps.json: {len(cases)} cases")


# ---------------------------------------------------------------------------------------------------------------
# canvas/: frames the canvas step resizes with LANCZOS (and one it leaves alone).

CANVAS_CASES = (  # name, source width, height, frames, fps, num_frames, multiple, short edge, max pixels
    ("wide_30fps", 40, 24, 4, 30.0, 3, 16, 32, 32 * 64),
    ("tall_12fps", 18, 30, 2, 12.0, 4, 16, 32, 32 * 64),
    ("on_canvas", 16, 16, 4, 24.0, 3, 16, 16, 16 * 16))


def canvas_part(root: pathlib.Path) -> None:
    normalize = reference_video_normalization()
    folder = fresh(root / "canvas")
    cases = []
    for name, width, height, count, fps, target, multiple, short_edge, max_pixels in CANVAS_CASES:
        rng = np.random.default_rng(len(cases) + 11)
        y, x = np.mgrid[0:height, 0:width]
        frames = np.stack([np.clip(np.stack([x * 255 // (width - 1), y * 255 // (height - 1), (x * y + 40 * i) % 256],
                                            -1) + rng.integers(-60, 61, (height, width, 3)), 0, 255)
                           for i in range(count)]).astype(np.uint8)
        out = normalize(frames, fps, target, multiple, short_edge, max_pixels, TARGET_FPS)
        (folder / f"{name}_in.rgb").write_bytes(frames.tobytes())
        (folder / f"{name}_out.rgb").write_bytes(np.ascontiguousarray(out).tobytes())
        cases.append({"name": name, "width": width, "height": height, "frames": count, "fps": fps,
                      "num_frames": target, "multiple": multiple, "short_edge": short_edge,
                      "max_pixels": max_pixels, "out_frames": int(out.shape[0]), "out_height": int(out.shape[1]),
                      "out_width": int(out.shape[2]), "input": f"canvas/{name}_in.rgb",
                      "expected": f"canvas/{name}_out.rgb"})
    write_json(root / "canvas.json", {"target_fps": TARGET_FPS, "cases": cases})
    print(f"  media/canvas: {len(cases)} cases")


# ---------------------------------------------------------------------------------------------------------------
# files/: media made with the ffmpeg command line, decoded with the reference's own from_file machinery.

def ffmpeg(*args: str) -> None:
    """The command line with its last argument the output file, written bit-exact (no date, random stream serial
    or ids), so a rerun writes the same bytes."""
    subprocess.run(["ffmpeg", "-v", "error", "-y", "-nostdin", *args[:-1], "-fflags", "+bitexact", args[-1]],
                   check=True)


def testsrc(width: int, height: int, rate: str, seconds: str) -> list:
    return ["-f", "lavfi", "-i", f"testsrc2=size={width}x{height}:rate={rate}:duration={seconds}"]


def sine(frequency: int, rate: int, seconds: str) -> list:
    return ["-f", "lavfi", "-i", f"sine=frequency={frequency}:sample_rate={rate}:duration={seconds}"]


X264 = ["-c:v", "libx264", "-preset", "veryfast", "-pix_fmt", "yuv420p", "-bf", "2", "-g", "12"]


def make_media(folder: pathlib.Path) -> list:
    """(file name, what) of every file written; all small (a few KB each)."""
    made = []

    def out(name, what):
        made.append((name, what))
        return str(folder / name)

    # 30 fps H.264 + a stereo 44.1 kHz AAC soundtrack (two sines, one per channel).
    ffmpeg(*testsrc(32, 16, "30", "0.5"), *sine(440, 44100, "0.05"), *sine(660, 44100, "0.05"),
           "-filter_complex", "[1:a][2:a]join=inputs=2:channel_layout=stereo[a]", "-map", "0:v", "-map", "[a]",
           *X264, "-c:a", "aac", "-b:a", "64k", out("clip30_aac44k.mp4", "30 fps H.264 with stereo AAC 44.1 kHz"))
    # 29.97 fps with a mono 48 kHz soundtrack.
    ffmpeg(*testsrc(16, 16, "30000/1001", "0.6"), *sine(300, 48000, "0.1"), "-map", "0:v", "-map", "1:a",
           *X264, "-c:a", "aac", "-b:a", "32k", out("clip2997_mono48k.mp4", "29.97 fps H.264 with mono AAC 48 kHz"))
    # The 30 fps clip rotated by the container's display matrix (the mov muxer's `rotate` tag), no soundtrack.
    for degrees in (90, 180, 270):
        ffmpeg("-i", str(folder / "clip30_aac44k.mp4"), "-map", "0:v", "-c", "copy", "-t", "0.1",
               "-metadata:s:v:0", f"rotate={degrees}",
               out(f"clip30_rot{degrees}.mp4", f"the 30 fps clip, silent, display matrix rotate={degrees}"))
    # 12 fps MPEG-4 part 2 in Matroska with a 22.05 kHz MP3 soundtrack; a 25 fps VP9 WebM with Opus.
    ffmpeg(*testsrc(24, 16, "12", "1"), *sine(500, 22050, "0.1"), "-map", "0:v", "-map", "1:a", "-c:v", "mpeg4",
           "-q:v", "5", "-c:a", "libmp3lame", "-b:a", "32k", out("clip12_mp3.mkv", "12 fps MPEG-4 Part 2 in Matroska, "
                                                                                  "mono MP3 22.05 kHz"))
    ffmpeg(*testsrc(16, 16, "25", "0.4"), *sine(700, 48000, "0.1"), "-map", "0:v", "-map", "1:a", "-c:v", "libvpx-vp9",
           "-deadline", "realtime", "-b:v", "50k", "-c:a", "libopus", "-b:a", "24k",
           out("clip25_vp9_opus.webm", "25 fps VP9 WebM with Opus 48 kHz"))
    # A BT.709-tagged full-range clip (the conversion follows the frame's tags).
    ffmpeg(*testsrc(16, 16, "24", "0.25"), "-c:v", "libx264", "-preset", "veryfast", "-pix_fmt", "yuv420p",
           "-color_range", "pc", "-colorspace", "bt709", "-color_primaries", "bt709", "-color_trc", "bt709",
           out("clip24_bt709_full.mp4", "24 fps H.264 tagged BT.709 full range, silent"))
    # Audio files.
    ffmpeg(*sine(440, 44100, "0.05"), *sine(880, 44100, "0.05"), "-filter_complex",
           "[0:a][1:a]join=inputs=2:channel_layout=stereo[a]", "-map", "[a]", "-c:a", "pcm_s16le",
           out("tone44k_stereo.wav", "WAV s16 stereo 44.1 kHz"))
    ffmpeg(*sine(1000, 8000, "0.1"), "-c:a", "pcm_u8", out("tone8k_u8.wav", "WAV u8 mono 8 kHz"))
    ffmpeg(*sine(330, 44100, "0.05"), "-c:a", "libmp3lame", "-b:a", "64k", out("tone44k.mp3", "MP3 mono 44.1 kHz"))
    ffmpeg(*sine(550, 16000, "0.1"), "-c:a", "flac", "-sample_fmt", "s32", out("tone16k_s32.flac",
                                                                                "FLAC 24-bit mono 16 kHz"))
    ffmpeg(*sine(600, 48000, "0.05"), "-c:a", "libopus", "-b:a", "24k", out("tone48k.opus", "Opus mono 48 kHz"))
    ffmpeg(*sine(440, 32000, "0.05"), "-c:a", "pcm_f32le", out("tone32k_f32.wav", "WAV float mono 32 kHz"))
    ffmpeg(*sine(440, 44100, "0.05"), "-c:a", "aac", "-b:a", "32k", out("tone44k.m4a", "AAC mono 44.1 kHz in MP4"))
    return made


class RotatedFrame:
    """A PyAV frame with the `rotation` PyAV >= 14.1 reports: the stream's display matrix, as FFmpeg >= 7 hands it
    to every decoded frame."""

    def __init__(self, frame, rotation):
        self._frame, self.rotation = frame, rotation

    def to_ndarray(self, **kwargs):
        return self._frame.to_ndarray(**kwargs)


def display_rotation(path: str) -> int:
    """int(av_display_rotation_get(matrix)) of the first video stream, through ffprobe (0 without a matrix)."""
    probe = subprocess.run(["ffprobe", "-v", "error", "-select_streams", "v:0", "-show_streams", "-of", "json",
                            path], check=True, capture_output=True, text=True)
    for entry in json.loads(probe.stdout)["streams"][0].get("side_data_list", []):
        if "rotation" in entry:
            return int(entry["rotation"])
    return 0


def av_with_rotation(av, path: str):
    """PyAV itself when it has VideoFrame.rotation; otherwise a module whose containers' decoded video frames carry
    the stream's rotation."""
    if hasattr(av.VideoFrame, "rotation"):
        return av
    rotation = display_rotation(path)

    class Container:
        def __init__(self, inner):
            self._inner = inner

        def __enter__(self):
            return self

        def __exit__(self, *exc):
            self._inner.close()

        def __getattr__(self, name):
            return getattr(self._inner, name)

        def decode(self, stream):
            for frame in self._inner.decode(stream):
                yield RotatedFrame(frame, rotation) if stream.type == "video" else frame

    return types.SimpleNamespace(open=lambda p: Container(av.open(p)), audio=av.audio, VideoFrame=av.VideoFrame)


class Waveform(np.ndarray):
    """The slice of torch.Tensor the reference's soundtrack decoder uses: `.to(dtype)`."""

    def to(self, dtype):
        return self.astype(dtype).view(Waveform)


def reference_decoders(av, path: str) -> dict:
    references_py = diffusers_root() / "modular_pipelines" / "minimax_h3" / "references.py"
    tree = module_ast(references_py)
    torch_stub = types.SimpleNamespace(float32=np.float32, from_numpy=lambda a: np.asarray(a).view(Waveform),
                                       cat=lambda xs, dim: np.concatenate(xs, axis=dim).view(Waveform))
    namespace = {"np": np, "torch": torch_stub, "os": __import__("os"), "contextlib": __import__("contextlib"),
                 "_import_av": lambda: av_with_rotation(av, path)}
    nodes = [strip_annotations(find(tree.body, ast.FunctionDef, name)) for name in
             ("_local_media_file", "_decode_reference_soundtrack", "_decode_video_file", "_decode_audio_file")]
    nodes[0].decorator_list = [ast.parse("contextlib.contextmanager").body[0].value]
    return exec_nodes(nodes, namespace, str(references_py))


def command_line_frames(path: str, width: int, height: int) -> np.ndarray:
    """The frames `ffmpeg -i PATH -f rawvideo -pix_fmt rgb24` gives: FFmpeg's decoder, the display matrix applied
    (autorotate), swscale's conversion following the frame's colour tags; every frame as decoded (passthrough)."""
    raw = subprocess.run(["ffmpeg", "-v", "error", "-nostdin", "-i", path, "-map", "0:v:0", "-fps_mode", "passthrough",
                          "-f", "rawvideo", "-pix_fmt", "rgb24", "-"], check=True, capture_output=True).stdout
    return np.frombuffer(raw, np.uint8).reshape(-1, height, width, 3)


def colour_tagged(path: str) -> bool:
    """Whether the first video stream names a matrix or range other than what swscale assumes untagged (BT.601,
    limited range unless the pixel format is a full-range yuvj one)."""
    probe = subprocess.run(["ffprobe", "-v", "error", "-select_streams", "v:0", "-show_entries",
                            "stream=color_space,color_range,pix_fmt", "-of", "json", path],
                           check=True, capture_output=True, text=True)
    stream = json.loads(probe.stdout)["streams"][0]
    matrix_default = stream.get("color_space", "unknown") in ("unknown", "bt470bg", "smpte170m")
    range_default = stream.get("color_range", "unknown") in ("unknown", "tv") or stream["pix_fmt"].startswith("yuvj")
    return not (matrix_default and range_default)


def files_part(root: pathlib.Path) -> None:
    import av
    import av.audio.resampler  # noqa: F401  (the reference reaches it as av.audio.resampler)

    folder = fresh(root / "files")
    decoded = fresh(root / "decoded")
    made = make_media(folder)
    cases = []
    for name, what in made:
        path = str(folder / name)
        functions = reference_decoders(av, path)
        with av.open(path) as container:
            has_video = bool(container.streams.video)
        if not has_video:
            functions["_import_av"] = lambda: av
        case = {"file": f"files/{name}", "what": what, "bytes": (folder / name).stat().st_size}
        if has_video:
            frames, fps, audio, sample_rate = functions["_decode_video_file"](path)
            command_line = command_line_frames(path, frames.shape[2], frames.shape[1])
            # PyAV < 17 converts to RGB with swscale's untagged defaults whatever the stream says; PyAV >= 17 (through
            # sws_scale_frame) and the command line follow the frame's colour tags. Where the two agree (untagged
            # streams) the command line is checked against the reference's decode; a tagged stream's expected frames
            # are the command line's.
            # The command line turns a quarter-turn display matrix the other way round from the reference (whose
            # np.rot90(k=-turns) undoes the counterclockwise angle av_display_rotation_get reports, where FFmpeg's
            # autorotate applies it), so there the two agree up to a half turn; this records which.
            source, relation = "reference", None
            if colour_tagged(path) and tuple(int(v) for v in av.__version__.split(".")[:1]) < (17,):
                frames, source = command_line, "ffmpeg command line"
            elif np.array_equal(command_line, frames):
                relation = "equal"
            elif np.array_equal(command_line, np.rot90(frames, 2, axes=(1, 2))):
                relation = "a half turn apart"
            else:
                raise AssertionError(f"{name}: the ffmpeg command line and the reference's decode differ")
            case.update({"frames_from": source, "command_line_vs_reference": relation})
            (decoded / f"{name}.rgb").write_bytes(frames.tobytes())
            case.update({"frames": int(frames.shape[0]), "height": int(frames.shape[1]), "width": int(frames.shape[2]),
                         "fps": fps, "rotation": display_rotation(path), "rgb": f"decoded/{name}.rgb"})
        else:
            audio, sample_rate = functions["_decode_audio_file"](path)
        if audio is not None:
            audio = np.ascontiguousarray(audio, dtype=np.float32)
            (decoded / f"{name}.f32").write_bytes(audio.tobytes())
            case.update({"sample_rate": int(sample_rate), "channels": int(audio.shape[0]),
                         "samples": int(audio.shape[1]), "audio": f"decoded/{name}.f32"})
        cases.append(case)
    version = subprocess.run(["ffmpeg", "-version"], check=True, capture_output=True, text=True).stdout.split("\n")[0]
    write_json(root / "files.json", {"pyav": av.__version__, "ffmpeg": version,
                                     "ffmpeg_libraries": {k: ".".join(map(str, v))
                                                          for k, v in av.library_versions.items()},
                                     "cases": cases})
    print(f"  media/files: {len(cases)} files, {sum(c['bytes'] for c in cases)} bytes")


# ---------------------------------------------------------------------------------------------------------------
# resample/: torchaudio's resampling and the reference's audio normalization. The test signals are made from a
# formula the C++ test evaluates too (sines in float64, a counter hash for the noise), so only outputs are stored.

def hash_noise(count: int, seed: int) -> np.ndarray:
    """Noise in [-0.5, 0.5): a 32-bit counter hash of (index + seed·2^20), its top 24 bits over 2^24, minus 0.5
    (exact in float32)."""
    k = (np.arange(count, dtype=np.uint64) + np.uint64(seed) * np.uint64(1 << 20)) & np.uint64(0xFFFFFFFF)
    h = (k * np.uint64(0x9E3779B1)) & np.uint64(0xFFFFFFFF)
    h ^= h >> np.uint64(16)
    h = (h * np.uint64(0x85EBCA6B)) & np.uint64(0xFFFFFFFF)
    h ^= h >> np.uint64(13)
    return ((h >> np.uint64(8)).astype(np.float64) / float(1 << 24) - 0.5).astype(np.float32)


def test_signal(channels: int, count: int, rate: int, seed: int) -> np.ndarray:
    """(channels, count) float32: 0.4·sin(2π·f·n/rate) with f = 440·(c + 1) + 37·seed Hz (the sine in float64, cast
    to float32), plus 0.2 × hash_noise(count, seed·8 + c) (float32 arithmetic)."""
    n = np.arange(count, dtype=np.float64)
    rows = []
    for c in range(channels):
        frequency = 440.0 * (c + 1) + 37.0 * seed
        tone = (0.4 * np.sin(2.0 * math.pi * frequency * n / rate)).astype(np.float32)
        rows.append(tone + np.float32(0.2) * hash_noise(count, seed * 8 + c))
    return np.stack(rows)


RESAMPLE_CASES = (  # rate, channels, samples
    (44100, 1, 1103), (44100, 2, 551), (48000, 2, 1201), (48000, 1, 600), (16000, 1, 401), (16000, 2, 200),
    (22050, 2, 553), (22050, 1, 1103), (8000, 1, 201), (8000, 2, 100), (96000, 1, 997), (11025, 1, 277))
# Lengths whose output length ceil(b·N/a) the reference rounds through float32 (torch.as_tensor of a Python float):
# found below; only the length and the edges of the output are stored.
LONG_RATES = (44100, 22050)
NORMALIZE_CASES = (  # rate, channels, samples in, num_frames (the truncation is int(num_frames / 24 · rate))
    (44100, 1, 3000, 1), (48000, 2, 1000, 1), (32000, 1, 2000, 1), (16000, 2, 300, 3), (32000, 2, 500, 1))
KERNEL_STORED_MAX = 4096  # kernels up to this many taps are stored whole (debugging aid)


def float32_rounded_length(b: int, n: int, a: int) -> int:
    return math.ceil(float(np.float32(b * n / a)))


def long_lengths(rate: int) -> list:
    """The first two lengths above 8 s whose float32-rounded output length is one below the exact ceil(b·N/a)."""
    g = math.gcd(rate, TARGET_RATE)
    a, b = rate // g, TARGET_RATE // g
    found, n = [], 8 * rate
    while len(found) < 2:
        if float32_rounded_length(b, n, a) != -(-b * n // a):
            found.append(n)
        n += 1
    return found


def resample_part(root: pathlib.Path) -> None:
    import common  # noqa: F401  (CPU only, one thread)
    import torch
    import torchaudio

    folder = fresh(root / "resample")
    cases, kernels = [], {}
    for seed, (rate, channels, count) in enumerate(RESAMPLE_CASES):
        signal = torch.from_numpy(test_signal(channels, count, rate, seed))
        transform = torchaudio.transforms.Resample(rate, TARGET_RATE)
        out = transform(signal)
        name = f"r{rate}_c{channels}_n{count}"
        (folder / f"{name}.f32").write_bytes(out.contiguous().numpy().tobytes())
        kernel = transform.kernel.contiguous().numpy()
        if rate not in kernels:
            kernels[rate] = {"shape": list(kernel.shape), "width": transform.width,
                             "sha256": hashlib.sha256(kernel.tobytes()).hexdigest(),
                             "file": f"resample/kernel_{rate}.f32" if kernel.size <= KERNEL_STORED_MAX else None,
                             "row0_head": kernel[0, 0, :8].tolist(), "row_last_head": kernel[-1, 0, :8].tolist()}
            if kernel.size <= KERNEL_STORED_MAX:
                (folder / f"kernel_{rate}.f32").write_bytes(kernel.tobytes())
        cases.append({"name": name, "rate": rate, "channels": channels, "samples": count, "seed": seed,
                      "out_samples": int(out.shape[-1]), "expected": f"resample/{name}.f32",
                      "input_head": signal[0, :4].tolist()})
    long_cases = []
    for rate in LONG_RATES:
        for count in long_lengths(rate):
            seed = len(cases) + len(long_cases)
            signal = torch.from_numpy(test_signal(1, count, rate, seed))
            out = torchaudio.transforms.Resample(rate, TARGET_RATE)(signal)
            g = math.gcd(rate, TARGET_RATE)
            long_cases.append({"rate": rate, "samples": count, "seed": seed, "out_samples": int(out.shape[-1]),
                               "exact_ceil": -(-(TARGET_RATE // g) * count // (rate // g)),
                               "head": out[0, :64].tolist(), "tail": out[0, -64:].tolist()})
    normalize = reference_setup_function("_normalize_audio_condition", {"torch": torch})
    normalized = []
    for index, (rate, channels, count, frames) in enumerate(NORMALIZE_CASES):
        seed = 100 + index
        signal = torch.from_numpy(test_signal(channels, count, rate, seed))
        out = normalize(signal, rate, TARGET_RATE, max_duration=frames / TARGET_FPS)
        name = f"normalize_r{rate}_c{channels}_f{frames}"
        (folder / f"{name}.f32").write_bytes(out.contiguous().numpy().tobytes())
        normalized.append({"name": name, "rate": rate, "channels": channels, "samples": count, "seed": seed,
                           "num_frames": frames, "out_channels": int(out.shape[0]), "out_samples": int(out.shape[1]),
                           "expected": f"resample/{name}.f32"})
    write_json(root / "resample.json", {
        "torch": torch.__version__, "torchaudio": torchaudio.__version__, "target_rate": TARGET_RATE,
        "fps": TARGET_FPS, "cases": cases, "kernels": {str(k): v for k, v in kernels.items()},
        "long": long_cases, "normalize": normalized})
    print(f"  media/resample: {len(cases)} cases, {len(long_cases)} long ones, {len(normalized)} normalizations")


# ---------------------------------------------------------------------------------------------------------------

def available(module: str) -> bool:
    import importlib.util

    return importlib.util.find_spec(module) is not None


def run(out_root: pathlib.Path) -> list:
    root = out_root / "media"
    root.mkdir(parents=True, exist_ok=True)
    fps_part(root)
    canvas_part(root)
    skipped = []
    if shutil.which("ffmpeg") and shutil.which("ffprobe") and available("av"):
        files_part(root)
    else:
        skipped.append("files (needs the ffmpeg command line and PyAV)")
    if available("torch") and available("torchaudio"):
        resample_part(root)
    else:
        skipped.append("resample (needs torch and torchaudio)")
    for part in skipped:
        print(f"  media: left as it was: {part}")
    return []


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", default="tests/fixtures", help="the fixtures root (media/ is written under it)")
    args = parser.parse_args()
    sys.exit(1 if run(pathlib.Path(args.out)) else 0)
