"""
End-to-end ref2va fixtures: the e2e family's tiny snapshot (same weights; its index asks for a small canvas rule and a
small `reference_image_short_edge`, so that every reference stays tiny) run through the reference modular pipeline's
ref2va workflow on the CPU in float32, with image, video (own soundtrack, silent, replaced soundtrack) and audio
references. Contract: tools/reference/README.md, family `e2e_ref2va`.

Two parts, each run when the tools it needs are at hand and left as it is otherwise (the machine with torch has
neither FFmpeg nor PyAV, this one has no torch), as fx_media.py does:

  media     (the `ffmpeg` command line and PyAV) the media files of every case, written by the command line from
            frames and samples made here (deterministic: gradients, a moving disc and bar, sines and a chirp, a
            little noise), and what the reference's own decoders give for them — references.py `_decode_video_file`
            and `_decode_audio_file`, taken out of the diffusers sources with `ast` and run under PyAV as
            fx_media.py runs them — in `<case>/decoded.safetensors` + `<case>/decoded.json`. A rerun that writes
            the same bytes leaves the folder alone; one that changes a case's media deletes that case's pipeline
            outputs, which were made from the old media.
  pipeline  (torch, torchvision, torchaudio, transformers) the snapshot copied to `model/`, and per case the
            references built from the decoded media exactly as `MiniMaxH3*Reference.from_file` would build them
            (images through diffusers' `load_image`), the ref2va workflow run on them, and the request, noises and
            expected outputs written. The media come from `<out>/e2e_ref2va/<case>/` when the media part wrote them
            there, else from the repository's tests/fixtures/e2e_ref2va/<case>/ (committed), and are copied along.

    tests/fixtures/e2e_ref2va/model/                  tests/fixtures/e2e/model's files; index canvas 16 / 384,
                                                      reference_image_short_edge 24
    tests/fixtures/e2e_ref2va/<case>/*.png *.mkv ...  the media as a user passes them
    tests/fixtures/e2e_ref2va/<case>/decoded.*        the reference decoders' frames / waveforms and rates
    tests/fixtures/e2e_ref2va/<case>/request.json     the `h3 tool generate` request (paths relative to the folder)
    tests/fixtures/e2e_ref2va/<case>/noise.safetensors     latents, audio_latents, condition_noise_<i>, encode_noise_<i>
    tests/fixtures/e2e_ref2va/<case>/expected.safetensors  video, audio and the stages
    tests/fixtures/e2e_ref2va/<case>/case.json        canvas, references, row counts

    python3 tools/reference/fx_e2e_ref2va.py --out tests/fixtures          (or make_fixtures.py --only e2e_ref2va)
    python3 tools/reference/fx_e2e_ref2va.py --out tests/fixtures --part media

The noises: `latents` / `audio_latents` are injected; the augmentation noise of every visual reference (image or
video) is drawn by the pipeline from the request's generator and the posterior draw of every visual encode from a
generator seeded 42 — both are recorded as they are drawn (the pipeline's randn_tensor calls), so that an engine
without PyTorch's generator can be given the same values.
"""

import argparse
import hashlib
import importlib.util
import json
import math
import pathlib
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass

import numpy as np
from PIL import Image

HERE = pathlib.Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
REPO = HERE.parent.parent
FAMILY = "e2e_ref2va"
COMMITTED = REPO / "tests" / "fixtures" / FAMILY  # where the pipeline part finds media the media part committed

PROMPT = "The dancer from the clip walks into the pictured room while the tune plays."
NUM_FRAMES = 124  # 5.17 s at 24 fps: the reference pipeline's minimum duration is 5 s
NUM_INFERENCE_STEPS = 4  # 3 transformer passes
SEED = 7500
CANVAS_SHORT_EDGE = 16  # the tiny snapshot's canvas rule (canvas multiple 8: VAE ratio 4 x patch 2)
CANVAS_MAX_PIXELS = 16 * 24
REFERENCE_IMAGE_SHORT_EDGE = 24  # the release's is 2048; a snapshot constant the engine has to read
INDEX_PATH = "tests/fixtures/e2e_ref2va/model"
MIN_SOUNDTRACK_SECONDS = 2.0  # h3's rule (src/pipeline/references.h): every reference sound keeps at least 2 s

# A normalized waveform (32 kHz stereo) is 256 KB a second: only excerpts are stored unless FULL_WAVEFORMS — the
# first and the last WAVEFORM_EDGE samples, every WAVEFORM_STRIDE-th sample, and per-channel float64 sums.
FULL_WAVEFORMS = False
WAVEFORM_EDGE = 1024
WAVEFORM_STRIDE = 61

MEDIA_OUTPUTS = ("decoded.safetensors", "decoded.json")
PIPELINE_OUTPUTS = ("request.json", "noise.safetensors", "expected.safetensors", "case.json")


# ---------------------------------------------------------------------------------------------------------------
# The cases.

@dataclass(frozen=True)
class Picture:
    """An RGB PNG."""
    width: int
    height: int
    seed: int


@dataclass(frozen=True)
class Tone:
    """Mono or stereo 16-bit samples: two sines and a chirp per channel plus a little noise."""
    rate: int
    channels: int
    seconds: float
    seed: int
    codec: str = "flac"  # "flac" or "pcm_s16le"


@dataclass(frozen=True)
class Clip:
    """FFV1 frames (a gradient, a moving disc and bar, noise) at `rate`, with an optional soundtrack (in the
    container of the file name: MKV or AVI; NUT is out, the reference cannot decode a soundtrack after seeking there)."""
    width: int
    height: int
    rate: int
    frames: int
    seed: int
    pix_fmt: str = "gbrp"  # gbrp: lossless RGB; yuv420p: the decoder's YUV -> RGB conversion takes part
    soundtrack: Tone | None = None


@dataclass(frozen=True)
class Case:
    canvas: tuple  # (width, height) of the generated video, explicit (h3's ref2va default canvas is not the
    # reference's 16:9 one)
    media: dict  # file name -> Picture | Clip | Tone
    references: list  # request.json's "references", in order


CASES = {
    # One image, downscaled to its own 24-pixel short edge (64x40 -> 40x24), not at the target's aspect.
    "one_image": Case(
        canvas=(16, 8),
        media={"subject.png": Picture(64, 40, 1)},
        references=[{"image": "subject.png"}],
    ),
    # The ordered clock: a portrait image upscaled (20x28 -> 24x32), a 24 fps video (32x20 -> 24x16, YUV 4:2:0)
    # with its own 16 kHz mono soundtrack, and a standalone 8 kHz stereo audio reference.
    "image_video_audio": Case(
        canvas=(8, 16),
        media={"subject.png": Picture(20, 28, 2),
               "clip.mkv": Clip(32, 20, 24, 54, 3, "yuv420p", Tone(16000, 1, 2.05, 4)),
               "voice.flac": Tone(8000, 2, 2.05, 5)},
        references=[{"image": "subject.png"}, {"video": "clip.mkv"}, {"audio": "voice.flac"}],
    ),
    # A 25 fps video longer than the request (135 frames -> 124 at 24 fps, 12x12 -> 16x16) whose soundtrack the
    # request turns off, then an image (36x20 -> 40x24).
    "silent_video": Case(
        canvas=(16, 8),
        media={"motion.avi": Clip(12, 12, 25, 135, 6, "gbrp", Tone(8000, 1, 0.5, 7, "pcm_s16le")),
               "scene.png": Picture(36, 20, 8)},
        references=[{"video": "motion.avi", "audio": False}, {"image": "scene.png"}],
    ),
    # A 12 fps video (40x24 -> 24x16) whose own soundtrack is replaced by an 11.025 kHz WAV file: the reference
    # has no such class, so it is a MiniMaxH3VideoReference whose audio comes from _decode_audio_file(music.wav).
    "replaced_soundtrack": Case(
        canvas=(16, 8),
        media={"dance.mkv": Clip(40, 24, 12, 30, 9, "gbrp", Tone(8000, 1, 1.0, 10)),
               "music.wav": Tone(11025, 1, 2.05, 11, "pcm_s16le")},
        references=[{"video": "dance.mkv", "audio": "music.wav"}],
    ),
    # Resampled by torchaudio inside the setup step: a standalone 48 kHz audio reference first, then a 30 fps
    # video (20x12 -> 24x16, YUV 4:2:0) with its 44.1 kHz soundtrack.
    "resampling": Case(
        canvas=(16, 8),
        media={"speech.flac": Tone(48000, 1, 2.05, 12),
               "walk.mkv": Clip(20, 12, 30, 69, 13, "yuv420p", Tone(44100, 1, 2.05, 14))},
        references=[{"audio": "speech.flac"}, {"video": "walk.mkv"}],
    ),
}


def soundtrack_mode(reference: dict) -> str:
    """A video reference's soundtrack: 'own', 'none' or 'replaced'."""
    audio = reference.get("audio", True)
    return "none" if audio is False else ("replaced" if isinstance(audio, str) else "own")


# ---------------------------------------------------------------------------------------------------------------
# Small helpers that need neither torch nor safetensors.

SAFETENSORS_DTYPES = {np.dtype(np.uint8): "U8", np.dtype(np.float32): "F32", np.dtype(np.float64): "F64",
                      np.dtype(np.int64): "I64"}


def write_safetensors_numpy(path: pathlib.Path, tensors: dict) -> None:
    """safetensors of little-endian NumPy arrays (U8, F32, F64, I64), tensors in name order."""
    header, offset, blobs = {}, 0, []
    for name in sorted(tensors):
        array = np.ascontiguousarray(tensors[name])
        blob = array.astype(array.dtype.newbyteorder("<"), copy=False).tobytes()
        header[name] = {"dtype": SAFETENSORS_DTYPES[array.dtype], "shape": list(array.shape),
                        "data_offsets": [offset, offset + len(blob)]}
        offset += len(blob)
        blobs.append(blob)
    header["__metadata__"] = {"producer": "h3 tools/reference"}
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * (-len(text) % 8)
    path.write_bytes(len(text).to_bytes(8, "little") + text + b"".join(blobs))


def read_safetensors_numpy(path: pathlib.Path) -> dict:
    data = path.read_bytes()
    size = int.from_bytes(data[:8], "little")
    header = json.loads(data[8:8 + size])
    kinds = {v: k for k, v in SAFETENSORS_DTYPES.items()}
    out = {}
    for name, entry in header.items():
        if name == "__metadata__":
            continue
        begin, end = entry["data_offsets"]
        out[name] = np.frombuffer(data[8 + size + begin:8 + size + end], dtype=kinds[entry["dtype"]].newbyteorder(
            "<")).reshape(entry["shape"]).copy()
    return out


def write_json(path: pathlib.Path, obj) -> None:
    path.write_text(json.dumps(obj, indent=2, sort_keys=True, ensure_ascii=True) + "\n", encoding="utf-8")


def sha256(path: pathlib.Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def log(*parts) -> None:
    print(*parts, flush=True)


# ---------------------------------------------------------------------------------------------------------------
# The media part.

def picture_pixels(p: Picture) -> np.ndarray:
    """Structure at every scale (gradients, a disc, noise), so resampling errors show."""
    rng = np.random.default_rng(SEED + p.seed)
    y, x = np.mgrid[0:p.height, 0:p.width].astype(np.float64)
    r = 255 * x / max(p.width - 1, 1)
    g = 255 * y / max(p.height - 1, 1)
    b = 255 * ((x - p.width / 2) ** 2 + (y - p.height / 2) ** 2 < (min(p.width, p.height) / 3) ** 2)
    rgb = np.stack([r, g, b], axis=-1) + rng.normal(0, 24, (p.height, p.width, 3))
    return np.clip(np.rint(rgb), 0, 255).astype(np.uint8)


def clip_pixels(c: Clip) -> np.ndarray:
    """(frames, height, width, 3) uint8: every frame different (a disc and a bar move, the green wave drifts)."""
    rng = np.random.default_rng(SEED + c.seed)
    y, x = np.mgrid[0:c.height, 0:c.width].astype(np.float64)
    frames = []
    for i in range(c.frames):
        phase = i / c.frames
        r = 255 * x / (c.width - 1)
        g = 127.5 + 127.5 * np.sin(2 * math.pi * (y / c.height + 3 * phase))
        cx, cy = c.width * (0.15 + 0.7 * phase), c.height * (0.5 + 0.3 * math.sin(2 * math.pi * phase))
        b = np.where((x - cx) ** 2 + (y - cy) ** 2 < (min(c.width, c.height) / 3.5) ** 2, 235.0, 30.0)
        bar = np.abs(x - c.width * ((2.5 * phase) % 1.0)) < 1.0
        rgb = np.stack([np.where(bar, 255.0, r), np.where(bar, 255.0, g), b], axis=-1)
        frames.append(rgb + rng.normal(0, 4, rgb.shape))
    return np.clip(np.rint(np.stack(frames)), 0, 255).astype(np.uint8)


def tone_samples(t: Tone) -> np.ndarray:
    """(channels, samples) int16: per channel two sines and a chirp up to 0.45 x the rate (past 16 kHz for 44.1 and
    48 kHz, so the resampler's low-pass shows), plus noise of a few LSB."""
    rng = np.random.default_rng(SEED + t.seed)
    count = round(t.seconds * t.rate)
    time = np.arange(count) / t.rate
    rows = []
    for channel in range(t.channels):
        f1 = 220.0 + 110.0 * channel + 7.0 * t.seed
        f2 = min(1250.0 + 97.0 * t.seed, 0.3 * t.rate)
        f_end = 0.45 * t.rate
        chirp_phase = 2 * math.pi * (100.0 * time + (f_end - 100.0) * time ** 2 / (2 * t.seconds))
        x = (0.35 * np.sin(2 * math.pi * f1 * time) + 0.2 * np.sin(2 * math.pi * f2 * time + 0.7 * channel)
             + 0.12 * np.sin(chirp_phase) + 0.0004 * rng.normal(size=count))
        rows.append(np.clip(np.rint(x * 32767), -32768, 32767).astype(np.int16))
    return np.stack(rows)


def ffmpeg(*args: str) -> None:
    """The command line, one thread, with its last argument the output file written bit-exact (no date, random
    stream serial or version tag), so a rerun writes the same bytes."""
    subprocess.run(["ffmpeg", "-v", "error", "-y", "-nostdin", *args[:-1], "-threads", "1", "-fflags", "+bitexact",
                    "-flags:v", "+bitexact", "-flags:a", "+bitexact", args[-1]], check=True)


def codec_options(codec: str) -> list:
    return ["-compression_level", "12"] if codec == "flac" else []


def raw_audio_input(tone: Tone, samples: np.ndarray, tmp: pathlib.Path, name: str) -> list:
    path = tmp / f"{name}.s16"
    path.write_bytes(np.ascontiguousarray(samples.T).astype("<i2").tobytes())  # interleaved
    return ["-f", "s16le", "-ar", str(tone.rate), "-ac", str(tone.channels), "-i", str(path)]


def write_media(name: str, spec, folder: pathlib.Path, tmp: pathlib.Path) -> dict:
    """Writes one file; returns what it holds (for decoded.json and the checks)."""
    out = folder / name
    if isinstance(spec, Picture):
        Image.fromarray(picture_pixels(spec), "RGB").save(out)
        return {"what": f"RGB PNG {spec.width}x{spec.height}", "source": picture_pixels(spec)}
    if isinstance(spec, Tone):
        samples = tone_samples(spec)
        ffmpeg(*raw_audio_input(spec, samples, tmp, name), "-c:a", spec.codec, *codec_options(spec.codec), str(out))
        return {"what": f"{spec.codec} {spec.channels} ch {spec.rate} Hz {samples.shape[1]} samples",
                "source": samples}
    frames = clip_pixels(spec)
    video = tmp / f"{name}.rgb"
    video.write_bytes(frames.tobytes())
    args = ["-f", "rawvideo", "-pix_fmt", "rgb24", "-s", f"{spec.width}x{spec.height}", "-framerate",
            str(spec.rate), "-i", str(video)]
    what = f"FFV1 {spec.pix_fmt} {spec.width}x{spec.height} {spec.rate} fps {spec.frames} frames"
    soundtrack = None
    if spec.soundtrack is not None:
        soundtrack = tone_samples(spec.soundtrack)
        args += raw_audio_input(spec.soundtrack, soundtrack, tmp, name) + [
            "-map", "0:v", "-map", "1:a", "-c:a", spec.soundtrack.codec, *codec_options(spec.soundtrack.codec)]
        what += (f", {spec.soundtrack.codec} {spec.soundtrack.channels} ch {spec.soundtrack.rate} Hz "
                 f"{soundtrack.shape[1]} samples")
    # FFV1 version 1 (no slices), one keyframe: the contexts carry over from frame to frame, which is what keeps
    # frames this small from costing more than raw RGB.
    ffmpeg(*args, "-c:v", "ffv1", "-level", "1", "-pix_fmt", spec.pix_fmt, str(out))
    return {"what": what, "source": frames, "soundtrack_source": soundtrack}


def suffix_offset(decoded: np.ndarray, source: np.ndarray):
    """Where `decoded` (float32, C x S) starts in `source` (int16, C x N) when it is an exact run of it, else None."""
    reference = (source.astype(np.float32) / np.float32(32768)).astype(np.float32)
    if decoded.shape[0] != reference.shape[0] or decoded.shape[1] == 0 or decoded.shape[1] > reference.shape[1]:
        return None
    count = decoded.shape[1]
    for start in np.flatnonzero(reference[0, :reference.shape[1] - count + 1] == decoded[0, 0]):
        if np.array_equal(reference[:, start:start + count], decoded):
            return int(start)
    return None


def decode_case(case: Case, folder: pathlib.Path, made: dict) -> tuple:
    """Runs the reference's decoders over the case's media: (tensors, decoded.json's `files`)."""
    import av
    import av.audio.resampler  # noqa: F401  (the reference reaches it as av.audio.resampler)

    from fx_media import command_line_frames, reference_decoders

    used_soundtracks = {r["video"]: soundtrack_mode(r) for r in case.references if "video" in r}
    replacements = {r["audio"] for r in case.references if "video" in r and soundtrack_mode(r) == "replaced"}
    tensors, files = {}, {}
    for name, spec in case.media.items():
        path = folder / name
        stem = path.stem
        entry = {"what": made[name]["what"], "bytes": path.stat().st_size, "sha256": sha256(path)}
        if isinstance(spec, Picture):
            with Image.open(path) as image:
                entry.update({"width": image.size[0], "height": image.size[1], "mode": image.mode})
            files[name] = entry
            continue
        functions = reference_decoders(av, str(path))
        if isinstance(spec, Clip):
            frames, fps, audio, sample_rate = functions["_decode_video_file"](str(path))
            with av.open(str(path)) as container:
                rate = container.streams.video[0].average_rate or container.streams.video[0].guessed_rate
            if fps != float(spec.rate) or frames.shape != (spec.frames, spec.height, spec.width, 3):
                raise AssertionError(f"{name}: decoded {frames.shape} at {fps} fps, made {spec.frames} frames of "
                                     f"{spec.width}x{spec.height} at {spec.rate} fps")
            if spec.pix_fmt == "gbrp":
                relation = "equal to the frames written" if np.array_equal(frames, made[name]["source"]) else None
            else:
                relation = ("equal to the ffmpeg command line's rgb24"
                            if np.array_equal(frames, command_line_frames(str(path), spec.width, spec.height))
                            else None)
            if relation is None:
                raise AssertionError(f"{name}: the reference's decode differs from what was written / the command line")
            tensors[f"{stem}_frames"] = np.ascontiguousarray(frames, dtype=np.uint8)
            entry.update({"decoder": "_decode_video_file", "frames_key": f"{stem}_frames", "frames": frames.shape[0],
                          "height": frames.shape[1], "width": frames.shape[2], "fps": fps,
                          "fps_num": rate.numerator, "fps_den": rate.denominator, "frames_check": relation,
                          "soundtrack_present": audio is not None,
                          "soundtrack_use": used_soundtracks.get(name, "none")})
            if audio is not None and used_soundtracks.get(name) == "own":
                audio = np.ascontiguousarray(audio, dtype=np.float32)
                offset = suffix_offset(audio, made[name]["soundtrack_source"])
                entry["soundtrack"] = {"audio_key": f"{stem}_audio", "sample_rate": int(sample_rate),
                                       "channels": audio.shape[0], "samples": audio.shape[1],
                                       "starts_at_source_sample": offset}
                tensors[f"{stem}_audio"] = audio
        else:
            functions["_import_av"] = lambda: av
            audio, sample_rate = functions["_decode_audio_file"](str(path))
            audio = np.ascontiguousarray(audio, dtype=np.float32)
            offset = suffix_offset(audio, made[name]["source"])
            entry.update({"decoder": "_decode_audio_file", "audio_key": f"{stem}_audio",
                          "sample_rate": int(sample_rate), "channels": audio.shape[0], "samples": audio.shape[1],
                          "starts_at_source_sample": offset,
                          "use": "replacement soundtrack" if name in replacements else "audio reference"})
            tensors[f"{stem}_audio"] = audio
        for sound in (entry.get("soundtrack"), entry if "audio_key" in entry else None):
            if sound is not None:
                if sound["starts_at_source_sample"] is None:
                    raise AssertionError(f"{name}: the decoded samples are not a run of the samples written")
                if sound["samples"] / sound["sample_rate"] < MIN_SOUNDTRACK_SECONDS:
                    raise AssertionError(f"{name}: {sound['samples']} samples at {sound['sample_rate']} Hz are "
                                         f"under h3's {MIN_SOUNDTRACK_SECONDS} s")
        files[name] = entry
    return tensors, files


def media_part(root: pathlib.Path) -> None:
    import av

    version = subprocess.run(["ffmpeg", "-version"], check=True, capture_output=True, text=True).stdout.split("\n")[0]
    tools = {"pyav": av.__version__, "ffmpeg": version,
             "ffmpeg_libraries": {k: ".".join(map(str, v)) for k, v in av.library_versions.items()}}
    total = 0
    for case_name, case in CASES.items():
        with tempfile.TemporaryDirectory() as tmp_name:
            tmp = pathlib.Path(tmp_name)
            staged = tmp / "case"
            staged.mkdir()
            made = {name: write_media(name, spec, staged, tmp) for name, spec in case.media.items()}
            tensors, files = decode_case(case, staged, made)
            write_safetensors_numpy(staged / "decoded.safetensors", tensors)
            write_json(staged / "decoded.json", {**tools, "case": case_name, "files": files})
            folder = root / case_name
            names = list(case.media) + list(MEDIA_OUTPUTS)
            same = folder.is_dir() and all((folder / n).is_file() and (folder / n).read_bytes() ==
                                           (staged / n).read_bytes() for n in names)
            if not same:
                if folder.is_dir():
                    for stale in [p for p in folder.iterdir() if p.name not in names]:
                        log(f"    {case_name}: removing {stale.name} (made from other media)")
                        shutil.rmtree(stale) if stale.is_dir() else stale.unlink()
                folder.mkdir(parents=True, exist_ok=True)
                for n in names:
                    shutil.copyfile(staged / n, folder / n)
            size = sum((folder / n).stat().st_size for n in names)
            total += size
            log(f"  {FAMILY}/{case_name}: media {'unchanged' if same else 'written'}, {size} bytes: " + ", ".join(
                f"{n} ({files[n]['what']})" for n in case.media))
    log(f"  {FAMILY}: media part {total} bytes")


# ---------------------------------------------------------------------------------------------------------------
# The pipeline part.

def copy_snapshot(src: pathlib.Path, dst: pathlib.Path) -> None:
    if dst.exists():
        shutil.rmtree(dst)
    shutil.copytree(src, dst)
    for name in ("modular_model_index.json", "model_index.json"):
        index = json.loads((dst / name).read_text())
        index["canvas_short_edge"] = CANVAS_SHORT_EDGE
        index["canvas_max_pixels"] = CANVAS_MAX_PIXELS
        index["reference_image_short_edge"] = REFERENCE_IMAGE_SHORT_EDGE
        for entry in index.values():
            if isinstance(entry, list) and len(entry) == 3 and isinstance(entry[2], dict):
                entry[2]["pretrained_model_name_or_path"] = INDEX_PATH
        (dst / name).write_text(json.dumps(index, indent=2, sort_keys=True) + "\n")


def media_folder(root: pathlib.Path, case_name: str) -> pathlib.Path:
    for candidate in (root / case_name, COMMITTED / case_name):
        if (candidate / "decoded.safetensors").is_file() and (candidate / "decoded.json").is_file():
            return candidate
    raise FileNotFoundError(f"{case_name}: no decoded.safetensors in {root / case_name} or {COMMITTED / case_name}; "
                            "run the media part first (needs the ffmpeg command line and PyAV)")


def stage_case(root: pathlib.Path, case_name: str, case: Case) -> tuple:
    """The case folder with its media and decoded.* (copied from the committed fixtures where needed) and no old
    pipeline outputs: (folder, decoded tensors, decoded.json)."""
    source = media_folder(root, case_name)
    folder = root / case_name
    folder.mkdir(parents=True, exist_ok=True)
    for name in list(case.media) + list(MEDIA_OUTPUTS):
        if source != folder:
            shutil.copyfile(source / name, folder / name)
    for name in PIPELINE_OUTPUTS:
        if (folder / name).exists():
            (folder / name).unlink()
    info = json.loads((folder / "decoded.json").read_text())
    for name in case.media:
        if info["files"][name]["sha256"] != sha256(folder / name):
            raise ValueError(f"{case_name}/{name} is not the file decoded.json describes; rerun the media part")
    return folder, read_safetensors_numpy(folder / "decoded.safetensors"), info


def build_references(case: Case, folder: pathlib.Path, decoded: dict, info: dict) -> list:
    """The references as MiniMaxH3*Reference.from_file builds them (its decoders' output, recorded by the media
    part); a replaced soundtrack is a MiniMaxH3VideoReference whose audio is _decode_audio_file's."""
    import torch
    from diffusers.modular_pipelines.minimax_h3 import (
        MiniMaxH3AudioReference,
        MiniMaxH3ImageReference,
        MiniMaxH3VideoReference,
    )
    from diffusers.utils import load_image

    def waveform(entry):
        return torch.from_numpy(decoded[entry["audio_key"]].copy()), int(entry["sample_rate"])

    references = []
    for reference in case.references:
        if "image" in reference:
            references.append(MiniMaxH3ImageReference(image=load_image(str(folder / reference["image"]))))
        elif "video" in reference:
            entry = info["files"][reference["video"]]
            mode = soundtrack_mode(reference)
            audio, sample_rate = None, None
            if mode == "own" and "soundtrack" in entry:
                audio, sample_rate = waveform(entry["soundtrack"])
            elif mode == "replaced":
                audio, sample_rate = waveform(info["files"][reference["audio"]])
            references.append(MiniMaxH3VideoReference(frames=decoded[entry["frames_key"]].copy(),
                                                      fps=float(entry["fps"]), audio=audio, sample_rate=sample_rate))
        else:
            audio, sample_rate = waveform(info["files"][reference["audio"]])
            references.append(MiniMaxH3AudioReference(audio=audio, sample_rate=sample_rate))
    return references


def waveform_tensors(prefix: str, wave) -> dict:
    import torch

    wave = wave.detach().float().contiguous()
    if FULL_WAVEFORMS:
        return {prefix: wave}
    as64 = wave.double()
    return {
        f"{prefix}_head": wave[:, :WAVEFORM_EDGE].clone(),
        f"{prefix}_tail": wave[:, -WAVEFORM_EDGE:].clone(),
        f"{prefix}_strided": wave[:, ::WAVEFORM_STRIDE].clone(),
        f"{prefix}_sums_f64": torch.stack([as64.sum(dim=1), (as64 * as64).sum(dim=1)], dim=1),  # (2, 2)
    }


def pipeline_part(out_root: pathlib.Path) -> list:
    import common  # noqa: F401  (CPU only, one thread, no autograd: before torch)
    import torch
    from common import log as clog, randn, require_finite, save_tensors, summary
    from fx_e2e import load_pipeline
    from fx_e2e_fl2va import DrawRecorder

    import diffusers.models.autoencoders.vae as vae_module
    import diffusers.modular_pipelines.minimax_h3.before_denoise as before_denoise
    from diffusers.modular_pipelines.minimax_h3.modular_pipeline import (
        audio_latent_num_frames,
        video_latent_num_frames,
    )

    root = out_root / FAMILY
    root.mkdir(parents=True, exist_ok=True)
    e2e_model = out_root / "e2e" / "model"
    if not e2e_model.is_dir():
        e2e_model = REPO / "tests" / "fixtures" / "e2e" / "model"
    copy_snapshot(e2e_model, root / "model")
    pipe, loaded_via = load_pipeline(root / "model", workflow="ref2va")
    wanted = {"canvas_short_edge": CANVAS_SHORT_EDGE, "canvas_max_pixels": CANVAS_MAX_PIXELS,
              "reference_image_short_edge": REFERENCE_IMAGE_SHORT_EDGE}
    got = {key: getattr(pipe.config, key, None) for key in wanted}
    if got != wanted:  # the fallback loader does not read the index's settings
        clog(f"    the loaded pipeline has {got}; setting {wanted}")
        pipe.update_components(**wanted)
        loaded_via += f"; update_components({wanted})"
        got = {key: getattr(pipe.config, key, None) for key in wanted}
        if got != wanted:
            raise RuntimeError(f"the pipeline's settings are {got}, not {wanted}")
    clog(f"    pipeline loaded via {loaded_via} (snapshot from {e2e_model}); settings {got}")
    ratio = pipe.vae.spatial_compression_ratio
    num_latent_frames = video_latent_num_frames(NUM_FRAMES, pipe.vae.config.clip_length, pipe.vae.tokens_chunk_size)
    num_audio_latents = audio_latent_num_frames(NUM_FRAMES)

    for index, (case_name, case) in enumerate(CASES.items()):
        folder, decoded, info = stage_case(root, case_name, case)
        width, height = case.canvas
        references = build_references(case, folder, decoded, info)
        latents = randn((1, pipe.vae.config.latent_channels, num_latent_frames, height // ratio, width // ratio),
                        SEED + 100 + index)
        audio_latents = randn((2, pipe.audio_vae.config.latent_channels, num_audio_latents), SEED + 200 + index)
        generator_seed = SEED + 300 + index
        with DrawRecorder(before_denoise) as condition_draws, DrawRecorder(vae_module) as encode_draws:
            state = pipe(
                prompt=PROMPT,
                references=references,
                height=height,
                width=width,
                num_frames=NUM_FRAMES,
                num_inference_steps=NUM_INFERENCE_STEPS,
                latents=latents.clone(),
                audio_latents=audio_latents.clone(),
                generator=torch.Generator("cpu").manual_seed(generator_seed),
                output_type="pt",
            )

        normalized = state.get("normalized_references")
        conditions = state.get("condition_latents")
        audio_conditions = state.get("audio_condition_latents")
        visual = [r for r in normalized if r.kind in ("image", "video")]
        sounding = [r for r in normalized if r.has_audio]
        kinds = ["image" if "image" in r else ("video" if "video" in r else "audio") for r in case.references]
        if [r.kind for r in normalized] != kinds:
            raise RuntimeError(f"{case_name}: normalized kinds {[r.kind for r in normalized]}, requested {kinds}")
        if not (len(conditions) == len(visual) == len(condition_draws.draws) == len(encode_draws.draws)):
            raise RuntimeError(f"{case_name}: {len(condition_draws.draws)} condition and {len(encode_draws.draws)} "
                               f"encode draws, {len(conditions)} condition latents, {len(visual)} visual references")
        if len(audio_conditions) != len(sounding):
            raise RuntimeError(f"{case_name}: {len(audio_conditions)} audio conditions, {len(sounding)} sounding "
                               "references")
        for i, (c, draw_c, draw_e) in enumerate(zip(conditions, condition_draws.draws, encode_draws.draws)):
            if draw_c.shape != c.shape or draw_e.shape != c.shape:
                raise RuntimeError(f"{case_name}: condition {i} {tuple(c.shape)}, draws {tuple(draw_c.shape)} / "
                                   f"{tuple(draw_e.shape)}")
        resolved = (state.get("height"), state.get("width"), state.get("num_frames"))
        if resolved != (height, width, NUM_FRAMES):
            raise RuntimeError(f"{case_name}: the pipeline resolved {resolved}")

        noise = {"latents": latents, "audio_latents": audio_latents}
        for i, (c, e) in enumerate(zip(condition_draws.draws, encode_draws.draws)):
            noise[f"condition_noise_{i}"] = c
            noise[f"encode_noise_{i}"] = e
        video = state.get("videos").permute(0, 2, 1, 3, 4).contiguous().float()[0]  # (3, frames, H, W)
        expected = {
            "video": video,
            "audio": state.get("audio")[0].contiguous().float(),
            "prompt_embeds": state.get("prompt_embeds").float()[0],
            "text_token_tags": state.get("text_token_tags").to(torch.int64),
            "latents": state.get("latents").float(),
            "audio_latents": state.get("audio_latents").float(),
        }
        for i, latent in enumerate(conditions):
            expected[f"condition_latents_{i}"] = latent.float()
        for j, rows in enumerate(audio_conditions):
            expected[f"audio_condition_latents_{j}"] = rows.float()

        described, visual_index, audio_index = [], 0, 0
        frames_per_chunk, latents_per_chunk = pipe.vae_frames_per_chunk, pipe.vae_latents_per_chunk
        for r, (request_entry, reference) in enumerate(zip(case.references, normalized)):
            entry = {"request": request_entry, "kind": reference.kind, "visual_index": None, "audio_index": None}
            if reference.kind == "image":
                pixels = np.array(reference.image.convert("RGB"))
                expected[f"normalized_{r}_image"] = torch.from_numpy(pixels)  # (H, W, 3) uint8
                with Image.open(folder / request_entry["image"]) as source:
                    entry["source"] = {"width": source.size[0], "height": source.size[1]}
                entry["normalized"] = {"width": pixels.shape[1], "height": pixels.shape[0]}
            elif reference.kind == "video":
                frames = np.ascontiguousarray(reference.frames)
                expected[f"normalized_{r}_frames"] = torch.from_numpy(frames)  # (N, H, W, 3) uint8
                source = info["files"][request_entry["video"]]
                entry["source"] = {"frames": source["frames"], "width": source["width"], "height": source["height"],
                                   "fps": source["fps"], "fps_num": source["fps_num"], "fps_den": source["fps_den"]}
                entry["soundtrack"] = soundtrack_mode(request_entry)
                entry["normalized"] = {"frames": frames.shape[0], "width": frames.shape[2], "height": frames.shape[1],
                                       "fps": float(reference.fps)}
                entry["encoded_frames"] = (max(1, (frames.shape[0] - latents_per_chunk) // frames_per_chunk)
                                           * frames_per_chunk + latents_per_chunk)
            if reference.kind in ("image", "video"):
                entry["visual_index"] = visual_index
                entry["condition_latents_shape"] = list(conditions[visual_index].shape)
                visual_index += 1
            if reference.has_audio:
                wave = reference.audio
                if tuple(wave.shape[:1]) != (2,) or reference.sample_rate != pipe.audio_sampling_rate:
                    raise RuntimeError(f"{case_name}: reference {r}'s waveform is {tuple(wave.shape)} at "
                                       f"{reference.sample_rate} Hz")
                expected.update(waveform_tensors(f"normalized_{r}_audio", wave))
                name = request_entry["audio"] if isinstance(request_entry.get("audio"), str) else (
                    request_entry["video"])
                sound = info["files"][name]
                sound = sound.get("soundtrack", sound)
                entry["audio"] = {"source_file": name, "source_rate": sound["sample_rate"],
                                  "source_channels": sound["channels"], "source_samples": sound["samples"],
                                  "normalized_samples": int(wave.shape[1]),
                                  "normalized_rate": int(reference.sample_rate)}
                entry["audio_index"] = audio_index
                entry["audio_condition_rows"] = int(audio_conditions[audio_index].shape[0])
                audio_index += 1
            described.append(entry)

        for key, value in {**noise, **expected}.items():
            if value.is_floating_point():
                require_finite(f"{case_name}/{key}", value)
        request = {"prompt": PROMPT, "frames": NUM_FRAMES, "steps": NUM_INFERENCE_STEPS - 1, "width": width,
                   "height": height, "references": case.references}
        save_tensors(folder / "noise.safetensors", noise)
        save_tensors(folder / "expected.safetensors", expected)
        write_json(folder / "request.json", request)
        write_json(folder / "case.json", {
            "canvas": [width, height],
            "num_frames": NUM_FRAMES,
            "num_inference_steps": NUM_INFERENCE_STEPS,
            "num_latent_frames": num_latent_frames,
            "num_audio_latents": num_audio_latents,
            "num_text_tokens": int(expected["prompt_embeds"].shape[0]),
            "num_condition_video_rows": int(state.get("num_condition_video_rows")),
            "num_condition_audio_rows": int(state.get("num_condition_audio_rows")),
            "sequence_length": int(state.get("token_tags").shape[0]),
            "references": described,
            "waveforms": {"full": FULL_WAVEFORMS, "edge": WAVEFORM_EDGE, "stride": WAVEFORM_STRIDE},
            "settings": got,
            "generator_seed": generator_seed,
            "encode_seed": int(pipe.keyframe_encode_seed),
            "pipeline_loaded_via": loaded_via,
            "dtype": "float32 on the CPU",
        })
        clog(f"    {case_name}: canvas {width}x{height}, references {kinds}, Nt {expected['prompt_embeds'].shape[0]}, "
             f"L {state.get('token_tags').shape[0]}, condition rows {state.get('num_condition_video_rows')} video / "
             f"{state.get('num_condition_audio_rows')} audio, draws {len(condition_draws.draws)}+"
             f"{len(encode_draws.draws)}")
        for key in sorted(expected):
            clog(f"      {key}: {summary(expected[key])}")
    return []


# ---------------------------------------------------------------------------------------------------------------

def available(module: str) -> bool:
    return importlib.util.find_spec(module) is not None


def run(out_root: pathlib.Path, parts=("media", "pipeline")) -> list:
    root = out_root / FAMILY
    root.mkdir(parents=True, exist_ok=True)
    failed, skipped = [], []
    if "media" in parts:
        if shutil.which("ffmpeg") and shutil.which("ffprobe") and available("av"):
            media_part(root)
        else:
            skipped.append("media (needs the ffmpeg command line and PyAV)")
    if "pipeline" in parts:
        if available("torch") and available("diffusers"):
            failed += pipeline_part(out_root)
        else:
            skipped.append("pipeline (needs torch and the diffusers sources on PYTHONPATH)")
    for part in skipped:
        log(f"  {FAMILY}: left as it was: {part}")
    return failed


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", default="tests/fixtures", help=f"the fixtures root ({FAMILY}/ is written under it)")
    parser.add_argument("--part", choices=("media", "pipeline", "both"), default="both")
    args = parser.parse_args()
    chosen = ("media", "pipeline") if args.part == "both" else (args.part,)
    sys.exit(1 if run(pathlib.Path(args.out).resolve(), chosen) else 0)
