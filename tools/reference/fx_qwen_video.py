"""
Qwen3-VL video fixtures (the ref2va reference path): tests/fixtures/qwen_video/{processor/, layouts/<variant>/,
processor.safetensors, ref2va.safetensors, cases.json, sampling.jsonl, timestamp_format.jsonl}.

The conditioner is the `vision` family's (its text_encoder/ and tokenizer/ are read from the output folder: run this
family with `vision`, or with an --out that already holds vision/), so no second copy of the model is written; the
fixture keeps a few of its weights (`model_fingerprint_*`) for the tests to check that they read the same model. The
video processor is the one `Qwen3VLProcessor.from_pretrained` loads from the saved `processor/` folder, called the way
`MiniMaxH3Ref2VATextEncoderStep._gather_vision_features` calls it (`do_sample_frames=False`, uint8 (n, h, w, 3) arrays);
the frame sampling, the presentation and the embeddings are that block's own functions.
"""

import copy
import inspect
import json
import pathlib
import shutil
import tempfile

import numpy as np
import torch

from common import fresh_dir, log, rel_l2, require_finite, save_tensors, summary, write_json, write_jsonl
import fx_vision
import tiny_tokenizer

SEED = 7300
PROMPT = "a robot dancing"
FPS = 24.0  # MiniMax-H3's clock (components.fps)
SAMPLE_FPS = 2.0  # the block's video_sample_fps default
# Pixel bounds small enough for tiny clips: factor 16 (patch 8 x merge 2), t'·h'·w' within [1024, 8192].
VIDEO_PROCESSOR = {
    "patch_size": 8,
    "temporal_patch_size": 2,
    "merge_size": 2,
    "size": {"shortest_edge": 1024, "longest_edge": 8192},
    "image_mean": fx_vision.CLIP_MEAN,
    "image_std": fx_vision.CLIP_STD,
    "resample": 3,
    "rescale_factor": 1 / 255,
}
# (frames, height, width) given to the processor, with what transformers' video smart_resize should make of them:
# unchanged; 8x8 (a side under the factor: the pre-scale step) with an odd count (last frame repeated); 20x24 -> 16x32
# (h down, w up); 12x20 (pre-scale); 5 frames 40x56 -> 32x64 (t' = round(2.5)·2 = 4, exactly at the max: a t' of 6
# would shrink it); 64x80 -> 48x64 (the max-pixels branch); 24x32 -> 32x32; 16x288 -> 16x256 (max branch, h held at
# the factor); 40x4 (pre-scale, aspect 10); 3 frames 32x48 unchanged (odd count).
CLIPS = [(2, 32, 32), (3, 8, 8), (2, 20, 24), (2, 12, 20), (5, 40, 56), (2, 64, 80), (4, 24, 32), (2, 16, 288),
         (2, 40, 4), (3, 32, 48)]
PIXEL_VALUE_CLIPS = 3  # pixel_values_videos kept for the first clips; every clip keeps its FNV-1a hash
BATCH = [(1, 0), (2, 0), (1, 1), (0, 0)]  # one call: (clip, content variant); a repeated shape is grouped
# _sample_video_condition_frames: (fps, sample_fps, temporal_patch, frame counts).
SAMPLING = [
    (24.0, 2.0, 2, list(range(0, 131)) + [300, 361, 362]),
    (30.0, 2.0, 2, list(range(0, 61))),
    (25.0, 2.0, 2, list(range(0, 61))),  # stride 12.5: round() ties to even
    (24.0, 5.0, 2, list(range(0, 41))),  # stride 4.8: the float cursor accumulates
    (24.0, 7.0, 2, list(range(0, 41))),
    (24.0, 2.0, 3, list(range(0, 61))),
    (24.0, 2.0, 1, list(range(0, 30))),
    (24.0, 48.0, 2, list(range(0, 12))),  # stride 0.5: duplicates skipped
]
# f"{ts:.1f}" of these (Python's correctly rounded formatting, ties to even on the binary value).
FORMAT_VALUES = ([k / 4 for k in range(0, 70)] + [k / 8 for k in range(0, 40)] + [k / 20 for k in range(0, 60)]
                 + [0.05, 0.15, 0.25, 0.35, 0.45, 1.05, 2.675, 1e-9, 99.95, 123456.75, 0.95, 9.95, 14.45, 1e6 + 0.25,
                    7.5e-5, 2.0 ** 40 + 0.25])
PRESENTATIONS = {
    # references: ("image", tokens) | ("video", has_audio, block tokens, frame count) | ("audio",)
    "mix": [("image", 4), ("video", True, 6, 25), ("audio",)],
    "silent_video": [("video", False, 4, 13)],
    "two_videos": [("video", False, 4, 49), ("audio",), ("video", True, 2, 30), ("image", 8), ("image", 2), ("audio",)],
    "ten_pictures": [("image", 1)] * 10 + [("video", True, 1, 37), ("audio",), ("audio",)],
}
# The conditioner on full requests: ("image", h, w) | ("video", has_audio, frames, h, w) | ("audio",).
REF2VA = {
    "video_image_audio": [("video", True, 25, 32, 48), ("image", 40, 56), ("audio",)],
    "image_two_videos": [("image", 32, 32), ("video", False, 13, 32, 32), ("video", True, 30, 24, 40)],
}


def frames(count: int, height: int, width: int, seed: int) -> np.ndarray:
    """uint8 (count, h, w, 3): fx_vision's noisy gradient, a different draw per frame."""
    return np.stack([fx_vision.image(height, width, seed + 1000 * f) for f in range(count)])


def fnv1a64(tensor: torch.Tensor) -> str:
    """FNV-1a (64 bit) of the tensor's little-endian bytes, as 16 hex digits."""
    data = tensor.detach().cpu().contiguous().numpy().astype("<f4", copy=False).tobytes()
    h = 0xCBF29CE484222325
    for byte in data:
        h = ((h ^ byte) * 0x100000001B3) & 0xFFFFFFFFFFFFFFFF
    return f"{h:016x}"


def build_processor(tokenizer, folder: pathlib.Path, tokenizer_dir: pathlib.Path):
    from transformers import Qwen3VLProcessor
    from transformers.models.qwen3_vl.video_processing_qwen3_vl import Qwen3VLVideoProcessor

    try:
        from transformers import Qwen2VLImageProcessor as ImageProcessor
    except ImportError:
        from transformers import Qwen2VLImageProcessorFast as ImageProcessor
    built = Qwen3VLProcessor(image_processor=ImageProcessor(**fx_vision.IMAGE_PROCESSOR), tokenizer=tokenizer,
                             video_processor=Qwen3VLVideoProcessor(**VIDEO_PROCESSOR))
    built.save_pretrained(str(folder))
    tiny_tokenizer.copy_to(tokenizer_dir, folder)  # byte-identical copies, as the release keeps them
    return Qwen3VLProcessor.from_pretrained(str(folder))


def plain(value):
    """JSON-able form of a processor attribute (SizeDict, enums, tuples)."""
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if isinstance(value, (list, tuple)):
        return [plain(v) for v in value]
    if isinstance(value, dict):
        return {str(k): plain(v) for k, v in value.items()}
    if hasattr(value, "__dict__") and not callable(value):
        items = {k: plain(v) for k, v in vars(value).items() if not k.startswith("_") and v is not None}
        if items:
            return items
    if hasattr(value, "value"):
        return plain(value.value)
    return str(value)


VIDEO_ATTRIBUTES = ("patch_size", "temporal_patch_size", "merge_size", "size", "min_pixels", "max_pixels",
                    "image_mean", "image_std", "rescale_factor", "resample", "do_resize", "do_rescale", "do_normalize",
                    "do_convert_rgb", "do_sample_frames", "fps", "cap_pixels_per_frame", "max_video_tokens",
                    "min_frames", "max_frames", "backend")


def describe_video_processor(video) -> dict:
    out = {"class": type(video).__name__, "module": inspect.getmodule(type(video)).__name__}
    for name in VIDEO_ATTRIBUTES:
        out[name] = plain(getattr(video, name, None))
    return out


def layout_variants(saved: dict) -> dict:
    """The processor folder's config files for each layout the loader is asked about (tokenizer files not included)."""
    image = dict(saved["image_processor"], processor_class="Qwen3VLProcessor")
    video = dict(saved["video_processor"], processor_class="Qwen3VLProcessor")
    bare = {k: v for k, v in saved.items() if k not in ("image_processor", "video_processor")}
    changed_video = dict(video, size={"shortest_edge": 512, "longest_edge": 4096}, patch_size=4)
    legacy = {k: v for k, v in video.items() if k != "size"}
    legacy.update(min_pixels=2048, max_pixels=6144)
    legacy_and_size = dict(video, min_pixels=2048, max_pixels=6144)
    return {
        "nested": {"processor_config.json": saved},
        "flat": {"processor_config.json": bare, "preprocessor_config.json": image,
                 "video_preprocessor_config.json": video},
        "flat_image_only": {"processor_config.json": bare, "preprocessor_config.json": image},
        "nested_and_flat_video": {"processor_config.json": saved, "video_preprocessor_config.json": changed_video},
        "nested_and_flat_image": {"processor_config.json": saved,
                                  "preprocessor_config.json": dict(image, patch_size=4)},
        "video_defaults": {"processor_config.json": dict(saved, video_processor={
            "video_processor_type": "Qwen3VLVideoProcessor"})},
        "video_legacy_keys": {"processor_config.json": dict(saved, video_processor=legacy)},
        "video_legacy_keys_and_size": {"processor_config.json": dict(saved, video_processor=legacy_and_size)},
    }


def loader_cases(root: pathlib.Path, tokenizer_dir: pathlib.Path) -> dict:
    """What Qwen3VLProcessor.from_pretrained gives as the video processor for each layout variant; the variants'
    config files are kept under layouts/<variant>/."""
    from transformers import Qwen3VLProcessor

    saved = json.loads((root / "processor" / "processor_config.json").read_text())
    found = {}
    with tempfile.TemporaryDirectory() as tmp:
        for variant, files in layout_variants(saved).items():
            keep = root / "layouts" / variant
            keep.mkdir(parents=True)
            work = pathlib.Path(tmp) / variant
            tiny_tokenizer.copy_to(tokenizer_dir, work)
            for name, content in files.items():
                (keep / name).write_text(json.dumps(content, indent=2, sort_keys=True) + "\n")
                (work / name).write_text(json.dumps(content))
            try:
                loaded = Qwen3VLProcessor.from_pretrained(str(work))
                found[variant] = {"video": describe_video_processor(loaded.video_processor),
                                  "image_patch_size": loaded.image_processor.patch_size}
            except Exception as error:
                found[variant] = {"error": repr(error)}
            log(f"    layout {variant}: {found[variant]}")
    return found


def processor_cases(processor, tensors: dict) -> tuple:
    import torchvision.transforms.v2.functional as tvF

    video = processor.video_processor
    patch = VIDEO_PROCESSOR["patch_size"]
    cases = []
    for k, (count, height, width) in enumerate(CLIPS):
        clip = frames(count, height, width, SEED + 10 + k)
        out = video(videos=[clip], do_sample_frames=False, return_tensors="pt")
        pixels, grid = out["pixel_values_videos"].float(), out["video_grid_thw"][0]
        resized_h, resized_w = int(grid[1]) * patch, int(grid[2]) * patch
        tchw = torch.from_numpy(clip).permute(0, 3, 1, 2).contiguous()
        resized = tvF.resize(tchw, [resized_h, resized_w], interpolation=tvF.InterpolationMode.BICUBIC, antialias=True)
        tensors[f"clip_{k}"] = torch.from_numpy(clip)
        tensors[f"resized_{k}"] = resized.permute(0, 2, 3, 1).contiguous()
        tensors[f"grid_{k}"] = grid.long()
        if k < PIXEL_VALUE_CLIPS:
            tensors[f"pixel_values_{k}"] = pixels
        case = {"k": k, "frames": count, "size": [height, width], "resized": [resized_h, resized_w],
                "grid": grid.tolist(), "rows": int(pixels.shape[0]), "pixel_values_fnv1a64": fnv1a64(pixels)}
        cases.append(case)
        log(f"    video processor {k}: {count}x{height}x{width} -> {resized_h}x{resized_w}, grid {grid.tolist()}")
    # One call with several videos (diffusers batches a request's videos): each video's rows, concatenated in order.
    clips = [frames(*CLIPS[k], SEED + 10 + k + 500 * variant) for k, variant in BATCH]
    out = video(videos=clips, do_sample_frames=False, return_tensors="pt")
    alone = [video(videos=[c], do_sample_frames=False, return_tensors="pt") for c in clips]
    if not torch.equal(out["pixel_values_videos"], torch.cat([a["pixel_values_videos"] for a in alone])):
        raise ValueError("a batched video processor call differs from the videos processed one by one")
    for i, clip in enumerate(clips):
        tensors[f"batch_clip_{i}"] = torch.from_numpy(clip)
    batch = {"clips": [list(b) for b in BATCH], "grids": out["video_grid_thw"].tolist(),
             "pixel_values_fnv1a64": fnv1a64(out["pixel_values_videos"].float())}
    # Settings a released processor config could carry that the fixture's does not (what they change, if anything).
    from transformers.models.qwen3_vl.video_processing_qwen3_vl import Qwen3VLVideoProcessor

    batch["other_settings"] = {}
    for label, extra in (("max_video_tokens_2", {"max_video_tokens": 2}), ("cap_pixels_per_frame", {
            "cap_pixels_per_frame": True}), ("cap_pixels_per_frame_false", {"cap_pixels_per_frame": False})):
        try:
            other = Qwen3VLVideoProcessor(**VIDEO_PROCESSOR, **extra)
            found = {}
            for k in (0, 4, 5):
                result = other(videos=[frames(*CLIPS[k], SEED + 10 + k)], do_sample_frames=False, return_tensors="pt")
                found[str(k)] = {"grid": result["video_grid_thw"][0].tolist(),
                                 "pixel_values_fnv1a64": fnv1a64(result["pixel_values_videos"].float())}
        except Exception as error:
            found = {"error": repr(error)}
        batch["other_settings"][label] = found
        log(f"    video processor with {extra}: {found}")
    return cases, batch


def sampling_cases() -> list:
    from diffusers.modular_pipelines.minimax_h3.encoders import MiniMaxH3Ref2VATextEncoderStep

    sample = MiniMaxH3Ref2VATextEncoderStep._sample_video_condition_frames
    cases = []
    for fps, sample_fps, temporal_patch, counts in SAMPLING:
        for n in counts:
            dummy = np.arange(n, dtype=np.int64).reshape(n, 1, 1, 1)  # frame f holds f
            case = {"num_frames": n, "fps": fps, "sample_fps": sample_fps, "temporal_patch": temporal_patch}
            try:
                picked, timestamps = sample(dummy, fps, sample_fps, temporal_patch)
                case["indices"] = [int(np.asarray(f).reshape(-1)[0]) for f in picked]
                case["block_timestamps"] = [float(t) for t in timestamps]
                case["labels"] = [f"<{t:.1f} seconds>" for t in timestamps]
            except ValueError as error:
                case["error"] = str(error)
            cases.append(case)
    return cases


def presentation_cases(tokenizer) -> list:
    from diffusers.modular_pipelines.minimax_h3.encoders import MiniMaxH3Ref2VATextEncoderStep
    from types import SimpleNamespace

    step = MiniMaxH3Ref2VATextEncoderStep
    cases = []
    for name, refs in PRESENTATIONS.items():
        references, images, blocks, stamps, described = [], [], [], [], []
        for ref in refs:
            if ref[0] == "image":
                references.append(SimpleNamespace(kind="image", has_audio=False))
                images.append(ref[1])
                described.append({"kind": "image", "has_audio": False, "tokens": ref[1]})
            elif ref[0] == "video":
                _, stamp = step._sample_video_condition_frames(np.zeros((ref[3], 1, 1, 3), np.uint8), FPS, SAMPLE_FPS,
                                                               VIDEO_PROCESSOR["temporal_patch_size"])
                references.append(SimpleNamespace(kind="video", has_audio=ref[1]))
                blocks.append(ref[2])
                stamps.append(stamp)
                described.append({"kind": "video", "has_audio": ref[1], "block_tokens": ref[2],
                                  "block_timestamps": [float(t) for t in stamp]})
            else:
                references.append(SimpleNamespace(kind="audio", has_audio=True))
                described.append({"kind": "audio", "has_audio": True})
        ids, tags = step._build_presentation(tokenizer, PROMPT, references, images, blocks, stamps)
        cases.append({"name": name, "references": described, "ids": list(ids), "tags": list(tags)})
        log(f"    presentation {name}: {len(ids)} tokens")
    return cases


class Recorder:
    """Forward hooks that keep every call's outputs (the tower runs once for the images, once for the videos)."""

    def __init__(self, model):
        visual = model.model.visual
        self.calls = {"merger": [], "deepstack": [], "position_ids": []}
        self.handles = []

        def merger_hook(module, args, output):
            self.calls["merger"].append(output[0] if isinstance(output, tuple) else output)

        self.handles.append(visual.merger.register_forward_hook(merger_hook))
        for i, merger in enumerate(visual.deepstack_merger_list):
            def deepstack_hook(module, args, output, i=i):
                self.calls["deepstack"].append((i, output[0] if isinstance(output, tuple) else output))

            self.handles.append(merger.register_forward_hook(deepstack_hook))

        def positions(module, args, kwargs):
            self.calls["position_ids"].append(args[1] if len(args) > 1 else kwargs["position_ids"])

        rotary = model.model.language_model.rotary_emb
        self.handles.append(rotary.register_forward_pre_hook(positions, with_kwargs=True))

    def close(self):
        for handle in self.handles:
            handle.remove()


def make_references(refs: list, case_seed: int, tensors: dict, name: str) -> tuple:
    """The normalized references of one request (real diffusers dataclasses) and their description. A video's frames
    are zero except at the indices the conditioner samples, which are all the fixture stores."""
    from diffusers.modular_pipelines.minimax_h3.encoders import MiniMaxH3Ref2VATextEncoderStep
    from diffusers.modular_pipelines.minimax_h3.references import (MiniMaxH3AudioReference, MiniMaxH3ImageReference,
                                                                     MiniMaxH3VideoReference)

    references, described = [], []
    sound = torch.zeros(2, 64)
    images = videos = 0
    for r, ref in enumerate(refs):
        seed = case_seed + 100 * r
        if ref[0] == "image":
            array = fx_vision.image(ref[1], ref[2], seed)
            tensors[f"{name}_image_{images}"] = torch.from_numpy(array)
            references.append(MiniMaxH3ImageReference(image=fx_vision.pil(array)))
            described.append({"kind": "image", "has_audio": False, "tensor": f"{name}_image_{images}"})
            images += 1
        elif ref[0] == "video":
            _, has_audio, count, height, width = ref
            indices, _ = MiniMaxH3Ref2VATextEncoderStep._sample_video_condition_frames(
                np.arange(count).reshape(count, 1, 1, 1), FPS, SAMPLE_FPS, VIDEO_PROCESSOR["temporal_patch_size"])
            indices = [int(np.asarray(i).reshape(-1)[0]) for i in indices]
            clip = np.zeros((count, height, width, 3), np.uint8)
            for j, index in enumerate(indices):
                clip[index] = fx_vision.image(height, width, seed + j)
                tensors[f"{name}_video_{videos}_frame_{j}"] = torch.from_numpy(clip[index].copy())
            references.append(MiniMaxH3VideoReference(frames=clip, fps=FPS, audio=sound if has_audio else None))
            described.append({"kind": "video", "has_audio": has_audio, "num_frames": count, "size": [height, width],
                              "sampled_indices": indices, "frames": f"{name}_video_{videos}_frame_<j>"})
            videos += 1
        else:
            references.append(MiniMaxH3AudioReference(audio=sound))
            described.append({"kind": "audio", "has_audio": True})
    return references, described


def block_check(model, tokenizer, processor, references, ids, tags, hidden) -> str:
    """Runs the real MiniMaxH3Ref2VATextEncoderStep and compares it with the step-by-step call."""
    try:
        from diffusers.modular_pipelines.minimax_h3.encoders import MiniMaxH3Ref2VATextEncoderStep

        pipe = MiniMaxH3Ref2VATextEncoderStep().init_pipeline()
        pipe.update_components(text_encoder=model, tokenizer=tokenizer, processor=processor)
        embeds, block_tags = pipe(prompt=PROMPT, normalized_references=references,
                                  output=["prompt_embeds", "text_token_tags"]).values()
        same_tags = block_tags.tolist() == tags
        error = rel_l2(embeds.float(), hidden.float())
        return f"block ran: tags {'equal' if same_tags else 'DIFFER'}, embeds rel_l2 {error:.1e}"
    except Exception as error:
        return f"block did not run: {error!r}"


def ref2va_cases(model, model64, tokenizer, processor, tensors: dict) -> list:
    from diffusers.modular_pipelines.minimax_h3.encoders import (MiniMaxH3Ref2VATextEncoderStep,
                                                                 get_qwen3vl_prompt_embeds)

    step = MiniMaxH3Ref2VATextEncoderStep()
    cases = []
    for c, (name, refs) in enumerate(REF2VA.items()):
        references, described = make_references(refs, SEED + 200 + 1000 * c, tensors, name)
        vision, image_counts, block_counts, stamps = step._gather_vision_features(processor, references, FPS)
        ids, tags = step._build_presentation(tokenizer, PROMPT, references, image_counts, block_counts, stamps)
        tensors[f"{name}_input_ids"] = torch.tensor(ids, dtype=torch.int64)
        tensors[f"{name}_tags"] = torch.tensor(tags, dtype=torch.int64)
        if "image_grid_thw" in vision:
            tensors[f"{name}_image_grids"] = vision["image_grid_thw"].long()
        tensors[f"{name}_video_grids"] = vision["video_grid_thw"].long()
        case = {"name": name, "references": described, "image_token_counts": image_counts,
                "video_block_token_counts": block_counts, "video_block_timestamps": stamps,
                "pixel_values_videos_fnv1a64": fnv1a64(vision["pixel_values_videos"].float())}
        for tag, net, dtype in (("f32", model, torch.float32), ("f64", model64, torch.float64)):
            if net is None:
                continue
            recorder = Recorder(net)
            try:
                hidden = get_qwen3vl_prompt_embeds(net, processor, ids, vision, text_encoder_layer=50, device="cpu",
                                                   dtype=dtype)
            finally:
                recorder.close()
            require_finite(f"{name}_hidden_{tag}", hidden)
            tensors[f"{name}_hidden_{tag}"] = hidden[0]
            if tag == "f32":
                calls = recorder.calls
                tensors[f"{name}_position_ids"] = calls["position_ids"][0].reshape(3, -1).long()
                # The tower runs on the images first, then on the videos (Qwen3VLModel.forward's order).
                order = (["image"] if "pixel_values" in vision else []) + ["video"]
                case["tower_calls"] = order
                taps = len(net.model.visual.deepstack_merger_list)
                for call, modality in enumerate(order):
                    tensors[f"{name}_{modality}_merged_f32"] = calls["merger"][call].float()
                    for i in range(taps):
                        tensors[f"{name}_{modality}_deepstack_{i}_f32"] = calls["deepstack"][call * taps + i][1].float()
        case["block_check"] = block_check(model, tokenizer, processor, references, ids, tags,
                                          tensors[f"{name}_hidden_f32"])
        message = (f"    {name}: {len(ids)} tokens, video grids {vision['video_grid_thw'].tolist()}, "
                   f"hidden {summary(tensors[f'{name}_hidden_f32'])}")
        if model64 is not None:
            message += f", f32 vs f64 rel_l2 {rel_l2(tensors[f'{name}_hidden_f32'], tensors[f'{name}_hidden_f64']):.2e}"
        log(f"{message}; {case['block_check']}")
        case["ids"], case["tags"] = ids, tags
        cases.append(case)
    return cases


def fingerprint(model, tensors: dict) -> list:
    names = ["model.visual.patch_embed.proj.weight", "model.visual.merger.linear_fc2.weight",
             "model.language_model.layers.49.mlp.down_proj.weight", "model.language_model.embed_tokens.weight"]
    state = model.state_dict()
    for i, key in enumerate(names):
        tensors[f"model_fingerprint_{i}"] = state[key].reshape(-1)[:64].float().clone()
    return names


def run(out_root: pathlib.Path) -> list:
    from transformers import Qwen2TokenizerFast, Qwen3VLForConditionalGeneration

    vision_root = out_root / "vision"
    if not (vision_root / "text_encoder" / "config.json").is_file():
        raise FileNotFoundError(f"{vision_root}/text_encoder is missing: run qwen_video with the vision family")
    root = fresh_dir(out_root / "qwen_video")
    tokenizer_dir = vision_root / "tokenizer"
    tokenizer = Qwen2TokenizerFast.from_pretrained(str(tokenizer_dir))
    model = Qwen3VLForConditionalGeneration.from_pretrained(str(vision_root / "text_encoder"),
                                                            dtype=torch.float32).eval()
    model64 = copy.deepcopy(model).double()
    try:  # the float64 runs are optional in the contract (as in fx_vision.py)
        dim = 3 * VIDEO_PROCESSOR["temporal_patch_size"] * VIDEO_PROCESSOR["patch_size"] ** 2
        model64.model.visual(torch.zeros(32, dim, dtype=torch.float64), grid_thw=torch.tensor([[2, 4, 4]]))
    except Exception as error:
        log(f"    float64 vision tower failed, no *_f64 tensors: {error!r}")
        model64 = None

    failures = []

    def stage(label, function, *args, default=None):
        """One part of the fixture; a failure is logged and reported, and the other parts still run."""
        import traceback

        try:
            return function(*args)
        except Exception:
            log(f"    {label} FAILED:\n{traceback.format_exc()}")
            failures.append(label)
            return default

    processor = build_processor(tokenizer, root / "processor", tokenizer_dir)
    loaded = describe_video_processor(processor.video_processor)
    log(f"    video processor loaded: {loaded}")
    layouts = stage("layouts", loader_cases, root, tokenizer_dir, default={})

    tensors = {}
    processor_list, batch = stage("processor", processor_cases, processor, tensors, default=([], {}))
    save_tensors(root / "processor.safetensors", tensors)
    write_jsonl(root / "sampling.jsonl", stage("sampling", sampling_cases, default=[]))
    write_jsonl(root / "timestamp_format.jsonl", [{"value": v, "text": f"{v:.1f}"} for v in FORMAT_VALUES])
    presentations = stage("presentations", presentation_cases, tokenizer, default=[])
    tensors = {}
    fingerprint_names = fingerprint(model, tensors)
    ref2va = stage("ref2va", ref2va_cases, model, model64, tokenizer, processor, tensors, default=[])
    save_tensors(root / "ref2va.safetensors", tensors)

    write_json(root / "cases.json", {
        "video_processor_loaded": loaded,
        "layouts": layouts,
        "processor": processor_list,
        "batch": batch,
        "presentations": presentations,
        "ref2va": ref2va,
        "model_fingerprint": fingerprint_names,
        "prompt": PROMPT,
        "fps": FPS,
        "sample_fps": SAMPLE_FPS,
        "call": "MiniMaxH3Ref2VATextEncoderStep: _gather_vision_features(processor, refs, 24), _build_presentation, "
                "get_qwen3vl_prompt_embeds(text_encoder, processor, ids, vision_inputs, text_encoder_layer=50, "
                "dtype=f32|f64)[0]",
    })
    return failures
