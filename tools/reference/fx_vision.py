"""
Qwen3-VL vision fixtures (the fl2va keyframe path): tests/fixtures/vision/{text_encoder/, tokenizer/, processor/,
processor.safetensors, tower.safetensors, fl2va.safetensors, cases.json}.

The image processor is the one `Qwen3VLProcessor.from_pretrained` loads from the saved `processor/` folder (which
class and backend that is goes into cases.json); the vision tower and the conditioner are a tiny
`Qwen3VLForConditionalGeneration` with a 4-block vision tower, and the fl2va embeddings come from diffusers'
`get_qwen3vl_prompt_embeds` called exactly as `MiniMaxH3FL2VATextEncoderStep` calls it.
"""

import copy
import json
import pathlib
import shutil
import tempfile

import numpy as np
import torch

from common import fresh_dir, log, rel_l2, require_finite, save_tensors, summary, write_json
import qwen_common
import tiny_tokenizer

SEED = 7100
# Narrower than the text_encoder fixture's conditioner (2 heads, 1 kv head, intermediate 12) to keep the files small;
# still 52 layers, since MiniMax-H3 reads hidden_states[50].
TEXT = {"num_attention_heads": 2, "num_key_value_heads": 1, "intermediate_size": 12}
# 4 blocks, deepstack taps after blocks 0 and 2 (the final merger after block 3), head_dim 8 (rotary 2 + 2 frequencies),
# a 6x6 position table (grids both smaller and larger than 6 interpolate), patch 8.
VISION = {
    "depth": 4,
    "hidden_size": 16,
    "hidden_act": "gelu_pytorch_tanh",
    "intermediate_size": 24,
    "num_heads": 2,
    "in_channels": 3,
    "patch_size": 8,
    "spatial_merge_size": 2,
    "temporal_patch_size": 2,
    "out_hidden_size": 16,
    "num_position_embeddings": 36,
    "deepstack_visual_indexes": [0, 2],
}
CLIP_MEAN = [0.48145466, 0.4578275, 0.40821073]
CLIP_STD = [0.26862954, 0.26130258, 0.27577711]
# Small pixel bounds (factor 16: 32x32 .. 64x64 pixels) so that small keyframes exercise both smart_resize branches.
IMAGE_PROCESSOR = {
    "patch_size": 8,
    "temporal_patch_size": 2,
    "merge_size": 2,
    "size": {"shortest_edge": 1024, "longest_edge": 4096},
    "image_mean": CLIP_MEAN,
    "image_std": CLIP_STD,
    "resample": 3,
    "rescale_factor": 1 / 255,
}
VIDEO_PROCESSOR = dict(IMAGE_PROCESSOR, size={"shortest_edge": 1024, "longest_edge": 16384})

# (height, width): smart_resize to 32x64 (h down, w up, 2.5 -> 2 half-even), 48x32 (both up), 64x48 (both down,
# the max-pixels branch), 48x48 (unchanged), 32x48 (width only), 160x16 (the max-pixels branch with beta < 1: h up,
# w down), 16x128 (h down, w up).
PROCESSOR_SIZES = [(40, 56), (24, 20), (80, 70), (48, 48), (32, 50), (150, 24), (17, 123)]
PIXEL_VALUE_CASES = 2  # pixel_values are kept for the first cases only (the rest: the resized uint8 image)
# torchvision's uint8 antialiased bicubic resize alone: (h_in, w_in, h_out, w_out).
RESIZES = [(37, 53, 11, 17), (13, 9, 40, 31), (64, 64, 64, 17), (30, 50, 91, 50), (96, 128, 47, 61), (5, 7, 3, 2),
           (1, 9, 4, 5), (120, 40, 23, 40)]
# torch.linspace(0, end, n) in float32 (end = table side - 1: 47 released, 5 here), the position-embedding
# interpolation's sample points.
LINSPACE = {47: list(range(1, 65)) + [96, 127, 128, 255, 256, 511, 512], 5: list(range(1, 40))}
PROMPT = "a robot dancing"
FL2VA = {"fl2va_1": [(32, 24)], "fl2va_2": [(40, 56), (40, 56)]}  # keyframe sizes (all keyframes share the canvas)


def image(height: int, width: int, seed: int) -> np.ndarray:
    """uint8 RGB: uniform noise over a smooth gradient (noise makes the bicubic overshoot reach the clamps)."""
    rng = np.random.RandomState(seed)
    y, x = np.mgrid[0:height, 0:width]
    smooth = np.stack([255 * y / max(height - 1, 1), 255 * x / max(width - 1, 1), 128 + 0 * x], axis=-1)
    noisy = smooth + rng.randint(-96, 97, size=(height, width, 3))
    return np.clip(noisy, 0, 255).astype(np.uint8)


def pil(array: np.ndarray):
    from PIL import Image

    return Image.fromarray(array, "RGB")


def hwc(chw: torch.Tensor) -> torch.Tensor:
    return chw.permute(1, 2, 0).contiguous()


def build_processor(tokenizer, folder: pathlib.Path):
    """Build with the reference classes, save_pretrained, and reload the way diffusers does (from_pretrained)."""
    from transformers import Qwen3VLProcessor
    from transformers.models.qwen3_vl.video_processing_qwen3_vl import Qwen3VLVideoProcessor

    try:
        from transformers import Qwen2VLImageProcessor as ImageProcessor
    except ImportError:
        from transformers import Qwen2VLImageProcessorFast as ImageProcessor
    try:
        video = Qwen3VLVideoProcessor(**VIDEO_PROCESSOR)
    except Exception as error:  # H3 never runs the video processor here; it only has to be saved
        log(f"    note: video processor rejected {VIDEO_PROCESSOR} ({error!r}); using its defaults")
        video = Qwen3VLVideoProcessor()
    built = Qwen3VLProcessor(image_processor=ImageProcessor(**IMAGE_PROCESSOR), tokenizer=tokenizer,
                             video_processor=video)
    built.save_pretrained(str(folder))
    return Qwen3VLProcessor.from_pretrained(str(folder))


def describe_processor(processor) -> dict:
    import inspect

    image_processor = processor.image_processor
    return {
        "class": type(image_processor).__name__,
        "module": inspect.getmodule(type(image_processor)).__name__,
        "backend": str(getattr(image_processor, "backend", "unknown")),
    }


def loader_choices(folder: pathlib.Path) -> dict:
    """What from_pretrained loads for the saved folder, for the release's "Qwen2VLImageProcessorFast" type name, and
    for the older flat preprocessor_config.json layout."""
    from transformers import Qwen3VLProcessor

    found = {}
    with tempfile.TemporaryDirectory() as tmp:
        for variant in ("fast_type_name", "flat_files"):
            copy_dir = pathlib.Path(tmp) / variant
            shutil.copytree(folder, copy_dir)
            config_path = copy_dir / "processor_config.json"
            config = json.loads(config_path.read_text())
            if variant == "fast_type_name":
                config["image_processor"]["image_processor_type"] = "Qwen2VLImageProcessorFast"
                config_path.write_text(json.dumps(config))
            else:
                image_config = dict(config.pop("image_processor"), processor_class="Qwen3VLProcessor")
                video_config = dict(config.pop("video_processor"), processor_class="Qwen3VLProcessor")
                (copy_dir / "preprocessor_config.json").write_text(json.dumps(image_config))
                (copy_dir / "video_preprocessor_config.json").write_text(json.dumps(video_config))
                config_path.write_text(json.dumps(config))
            try:
                found[variant] = describe_processor(Qwen3VLProcessor.from_pretrained(str(copy_dir)))
            except Exception as error:
                found[variant] = {"error": repr(error)}
    return found


def processor_cases(processor, tensors: dict) -> list:
    import torchvision.transforms.v2.functional as tvF

    cases = []
    for k, (height, width) in enumerate(PROCESSOR_SIZES):
        array = image(height, width, SEED + 10 + k)
        out = processor.image_processor(images=[pil(array)], return_tensors="pt")
        grid = out["image_grid_thw"][0]
        resized_h, resized_w = int(grid[1]) * IMAGE_PROCESSOR["patch_size"], int(grid[2]) * IMAGE_PROCESSOR["patch_size"]
        chw = torch.from_numpy(array).permute(2, 0, 1).contiguous()
        resized = tvF.resize(chw, [resized_h, resized_w], interpolation=tvF.InterpolationMode.BICUBIC, antialias=True)
        tensors[f"image_{k}"] = torch.from_numpy(array)
        tensors[f"resized_{k}"] = hwc(resized)
        if k < PIXEL_VALUE_CASES:
            tensors[f"pixel_values_{k}"] = out["pixel_values"].float()
        tensors[f"grid_{k}"] = out["image_grid_thw"][0].long()
        cases.append({"k": k, "size": [height, width], "resized": [resized_h, resized_w], "grid": grid.tolist()})
        log(f"    processor {k}: {height}x{width} -> {resized_h}x{resized_w}, grid {grid.tolist()}")
    # Several images in one call (the keyframes' batched call) give each image's rows, concatenated in order.
    arrays = [image(h, w, SEED + 10 + k) for k, (h, w) in enumerate(PROCESSOR_SIZES[:PIXEL_VALUE_CASES])]
    out = processor.image_processor(images=[pil(a) for a in arrays], return_tensors="pt")
    alone = torch.cat([tensors[f"pixel_values_{k}"] for k in range(PIXEL_VALUE_CASES)])
    if not torch.equal(out["pixel_values"].float(), alone):
        raise ValueError("a batched processor call differs from the images processed one by one")
    for k, (h_in, w_in, h_out, w_out) in enumerate(RESIZES):
        array = image(h_in, w_in, SEED + 40 + k)
        chw = torch.from_numpy(array).permute(2, 0, 1).contiguous()
        out = tvF.resize(chw, [h_out, w_out], interpolation=tvF.InterpolationMode.BICUBIC, antialias=True)
        tensors[f"resize_in_{k}"] = torch.from_numpy(array)
        tensors[f"resize_out_{k}"] = hwc(out)
    for side, counts in LINSPACE.items():
        tensors[f"linspace_{side}"] = torch.cat([torch.linspace(0, side, n, dtype=torch.float32) for n in counts])
        tensors[f"linspace_{side}_counts"] = torch.tensor(counts, dtype=torch.int64)
    return cases


class Recorder:
    """Forward hooks on the vision tower and the text model that keep what each stage produced (version-proof: the
    tower's return type changed across transformers releases, its modules did not)."""

    def __init__(self, model):
        visual = model.model.visual
        self.stages = {}
        self.handles = []

        def keep(name):
            def hook(module, args, output):
                self.stages[name] = output[0] if isinstance(output, tuple) else output

            return hook

        self.handles.append(visual.patch_embed.register_forward_hook(keep("patch_embed")))
        for i, block in enumerate(visual.blocks):
            self.handles.append(block.register_forward_hook(keep(f"block_{i}")))
        self.handles.append(visual.merger.register_forward_hook(keep("merger")))
        for i, merger in enumerate(visual.deepstack_merger_list):
            self.handles.append(merger.register_forward_hook(keep(f"deepstack_{i}")))

        def block0_inputs(module, args, kwargs):
            self.stages["block_0_input"] = args[0] if args else kwargs["hidden_states"]
            if "position_embeddings" in kwargs:
                self.stages["rotary_cos"], self.stages["rotary_sin"] = kwargs["position_embeddings"]

        self.handles.append(visual.blocks[0].register_forward_pre_hook(block0_inputs, with_kwargs=True))

        def positions(module, args, kwargs):
            position_ids = args[1] if len(args) > 1 else kwargs["position_ids"]
            self.stages["position_ids"] = position_ids

        rotary = model.model.language_model.rotary_emb
        self.handles.append(rotary.register_forward_pre_hook(positions, with_kwargs=True))

    def close(self):
        for handle in self.handles:
            handle.remove()


def tower_cases(model, model64, processor_tensors: dict, tensors: dict) -> list:
    """The vision tower alone: (a) the rows of processor cases 0 and 1 (pixel_values_0, pixel_values_1 of
    processor.safetensors, concatenated), (b) random rows of a 2-block video-like grid and a 2x2 image (windows of
    unequal length, t > 1, the smallest grid)."""
    images = [k for k in range(PIXEL_VALUE_CASES)]
    gen = torch.Generator("cpu").manual_seed(SEED + 62)
    dim = 3 * IMAGE_PROCESSOR["temporal_patch_size"] * IMAGE_PROCESSOR["patch_size"] ** 2
    video_grid = torch.tensor([[2, 2, 4], [1, 2, 2]], dtype=torch.long)
    rows = int(video_grid.prod(-1).sum())
    inputs = {
        "images": (torch.cat([processor_tensors[f"pixel_values_{k}"] for k in images]),
                   torch.stack([processor_tensors[f"grid_{k}"] for k in images])),
        "video": (torch.randn(rows, dim, generator=gen), video_grid),
    }
    cases = []
    for name, (pixels, grid) in inputs.items():
        if name == "video":
            tensors["video_pixel_values"] = pixels
        tensors[f"{name}_grid"] = grid
        for tag, net, dtype in (("f32", model, torch.float32), ("f64", model64, torch.float64)):
            if net is None:
                continue
            recorder = Recorder(net)
            try:
                net.model.visual(pixels.to(dtype), grid_thw=grid)
            finally:
                recorder.close()
            stages = recorder.stages
            tensors[f"{name}_merged_{tag}"] = stages["merger"].to(dtype)
            for i in range(len(VISION["deepstack_visual_indexes"])):
                tensors[f"{name}_deepstack_{i}_{tag}"] = stages[f"deepstack_{i}"].to(dtype)
            if tag == "f32":
                tensors[f"{name}_patch_embed_f32"] = stages["patch_embed"].float()
                tensors[f"{name}_block_0_input_f32"] = stages["block_0_input"].float()
                if "rotary_cos" in stages:
                    tensors[f"{name}_rotary_cos_f32"] = stages["rotary_cos"].float()
                    tensors[f"{name}_rotary_sin_f32"] = stages["rotary_sin"].float()
                for i in range(VISION["depth"]):
                    tensors[f"{name}_block_{i}_f32"] = stages[f"block_{i}"].float()
                try:  # the interpolated position table on its own (the tower adds it to the patch embedding)
                    tensors[f"{name}_pos_embed_f32"] = net.model.visual.fast_pos_embed_interpolate(grid).float()
                except Exception as error:
                    log(f"    note: no fast_pos_embed_interpolate ({error!r}); no {name}_pos_embed_f32")
            require_finite(f"{name}_merged_{tag}", stages["merger"])
        message = f"    tower {name}: grids {grid.tolist()}, merged {summary(tensors[f'{name}_merged_f32'])}"
        if model64 is not None:
            message += f", f32 vs f64 rel_l2 {rel_l2(tensors[f'{name}_merged_f32'], tensors[f'{name}_merged_f64']):.2e}"
        log(message)
        cases.append({"name": name, "grids": grid.tolist(), "rows": int(pixels.shape[0]),
                      "pixel_values": "video_pixel_values" if name == "video" else
                      [f"processor.safetensors:pixel_values_{k}" for k in images]})
    return cases


def presentation(tokenizer, processor, keyframes: list):
    """MiniMaxH3FL2VATextEncoderStep's steps 1 and 2: the keyframes' vision inputs, the token ids and the tags."""
    vision = processor.image_processor(images=keyframes, return_tensors="pt")
    grids = vision["image_grid_thw"]
    merge = processor.image_processor.merge_size ** 2
    ids, tags = [], []
    for index in range(len(keyframes)):
        label = tokenizer(f"<Picture {index + 1}>: ", add_special_tokens=False)["input_ids"]
        block = ([tokenizer.convert_tokens_to_ids("<|vision_start|>")]
                 + [tokenizer.convert_tokens_to_ids("<|image_pad|>")] * (int(grids[index].prod()) // merge)
                 + [tokenizer.convert_tokens_to_ids("<|vision_end|>")])
        ids += label + block
        tags += [1] * len(label) + [0] * len(block)
    prompt = tokenizer(PROMPT, add_special_tokens=False)["input_ids"]
    return ids + prompt, tags + [1] * len(prompt), {"pixel_values": vision["pixel_values"], "image_grid_thw": grids}


def block_check(model, tokenizer, processor, keyframes, ids, tags, hidden) -> str:
    """Runs the real MiniMaxH3FL2VATextEncoderStep and compares it with the replica above."""
    try:
        from diffusers.modular_pipelines.minimax_h3.encoders import MiniMaxH3FL2VATextEncoderStep

        pipe = MiniMaxH3FL2VATextEncoderStep().init_pipeline()
        pipe.update_components(text_encoder=model, tokenizer=tokenizer, processor=processor)
        embeds, block_tags = pipe(prompt=PROMPT, keyframes=keyframes, output=["prompt_embeds", "text_token_tags"]).values()
        same_tags = block_tags.tolist() == tags
        error = rel_l2(embeds.float(), hidden.float())
        return f"block ran: tags {'equal' if same_tags else 'DIFFER'}, embeds rel_l2 {error:.1e} vs replica"
    except Exception as error:
        return f"block did not run: {error!r}"


def fl2va_cases(model, model64, tokenizer, processor, tensors: dict) -> list:
    from diffusers.modular_pipelines.minimax_h3.encoders import get_qwen3vl_prompt_embeds

    cases = []
    for c, (name, sizes) in enumerate(FL2VA.items()):
        arrays = [image(h, w, SEED + 80 + 5 * c + k) for k, (h, w) in enumerate(sizes)]
        keyframes = [pil(a) for a in arrays]
        ids, tags, vision = presentation(tokenizer, processor, keyframes)
        for k, array in enumerate(arrays):
            tensors[f"{name}_keyframe_{k}"] = torch.from_numpy(array)
        tensors[f"{name}_input_ids"] = torch.tensor(ids, dtype=torch.int64)
        tensors[f"{name}_tags"] = torch.tensor(tags, dtype=torch.int64)
        tensors[f"{name}_grids"] = vision["image_grid_thw"].long()
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
                tensors[f"{name}_position_ids"] = recorder.stages["position_ids"].reshape(3, -1).long()
                tensors[f"{name}_merged_f32"] = recorder.stages["merger"].float()
                for i in range(len(VISION["deepstack_visual_indexes"])):
                    tensors[f"{name}_deepstack_{i}_f32"] = recorder.stages[f"deepstack_{i}"].float()
        check = block_check(model, tokenizer, processor, keyframes, ids, tags, tensors[f"{name}_hidden_f32"])
        message = (f"    {name}: {len(ids)} tokens, grids {vision['image_grid_thw'].tolist()}, "
                   f"hidden {summary(tensors[f'{name}_hidden_f32'])}")
        if model64 is not None:
            message += f", f32 vs f64 rel_l2 {rel_l2(tensors[f'{name}_hidden_f32'], tensors[f'{name}_hidden_f64']):.2e}"
        log(f"{message}; {check}")
        cases.append({"name": name, "keyframe_sizes": [list(s) for s in sizes], "ids": ids, "tags": tags,
                      "grids": vision["image_grid_thw"].tolist(), "block_check": check})
    return cases


def run(out_root: pathlib.Path) -> list:
    from transformers import Qwen2TokenizerFast, Qwen3VLForConditionalGeneration

    root = fresh_dir(out_root / "vision")
    tiny_tokenizer.copy_to(out_root / "tiny_tokenizer", root / "tokenizer")
    tokenizer = Qwen2TokenizerFast.from_pretrained(str(root / "tokenizer"))
    config, ids = qwen_common.tiny_config(tokenizer, TEXT, VISION)
    torch.manual_seed(SEED)
    model = Qwen3VLForConditionalGeneration(config).float().eval()
    qwen_common.init_weights(model, SEED + 1)
    model.save_pretrained(str(root / "text_encoder"))
    model = Qwen3VLForConditionalGeneration.from_pretrained(str(root / "text_encoder"), dtype=torch.float32).eval()
    model64 = copy.deepcopy(model).double()
    try:  # the float64 runs are optional in the contract (as in fx_text_encoder.py)
        dim = 3 * IMAGE_PROCESSOR["temporal_patch_size"] * IMAGE_PROCESSOR["patch_size"] ** 2
        model64.model.visual(torch.zeros(16, dim, dtype=torch.float64), grid_thw=torch.tensor([[1, 4, 4]]))
    except Exception as error:
        log(f"    float64 vision tower failed, no *_f64 tensors: {error!r}")
        model64 = None
    log(f"    conditioner: {sum(p.numel() for p in model.parameters())} params, attn {model.config._attn_implementation}")

    processor = build_processor(tokenizer, root / "processor")
    # The release keeps byte-identical tokenizer copies next to the processor config (as fx_e2e.py does).
    tiny_tokenizer.copy_to(out_root / "tiny_tokenizer", root / "processor")
    loaded = describe_processor(processor)
    choices = loader_choices(root / "processor")
    log(f"    image processor loaded: {loaded}; other layouts: {choices}")

    processor_tensors = {}
    processor_list = processor_cases(processor, processor_tensors)
    save_tensors(root / "processor.safetensors", processor_tensors)
    tensors = {}
    tower_list = tower_cases(model, model64, processor_tensors, tensors)
    save_tensors(root / "tower.safetensors", tensors)
    tensors = {}
    fl2va_list = fl2va_cases(model, model64, tokenizer, processor, tensors)
    save_tensors(root / "fl2va.safetensors", tensors)

    write_json(root / "cases.json", {
        "image_processor_loaded": loaded,
        "image_processor_other_layouts": choices,
        "special_token_ids": ids,
        "processor": processor_list,
        "resizes": [list(r) for r in RESIZES],
        "linspace": {str(side): counts for side, counts in LINSPACE.items()},
        "tower": tower_list,
        "fl2va": fl2va_list,
        "prompt": PROMPT,
        "call": "get_qwen3vl_prompt_embeds(text_encoder, processor, ids, {pixel_values, image_grid_thw}, "
                "text_encoder_layer=50, dtype=f32|f64)[0]",
    })
    return []
