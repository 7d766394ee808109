"""The tiny Qwen3-VL conditioner (transformers' own classes) shared by the text-encoder and end-to-end fixtures."""

import math
import pathlib

import torch

from common import generator, log

TEXT_ENCODER_SEED = 7000
TEXT_ENCODER_LAYER = 50  # MiniMax-H3 reads hidden_states[50]
HEAD_DIM = 8
MROPE_SECTION = [2, 1, 1]  # sums to head_dim / 2, interleaved as in the release
VISION_PATCH = 8  # the release uses 16; 8 keeps the tiny patch embedding small (processor set to match)


def tiny_config(tokenizer, text_overrides=None, vision_overrides=None):
    """The tiny conditioner's config; the overrides replace keys of its text / vision config (fx_vision.py)."""
    from transformers import Qwen3VLConfig

    ids = {name: tokenizer.convert_tokens_to_ids(token) for name, token in (
        ("image_token_id", "<|image_pad|>"),
        ("video_token_id", "<|video_pad|>"),
        ("vision_start_token_id", "<|vision_start|>"),
        ("vision_end_token_id", "<|vision_end|>"),
    )}
    text_config = {
        "vocab_size": len(tokenizer),
        "hidden_size": 16,
        "intermediate_size": 20,
        "num_hidden_layers": 52,
        "num_attention_heads": 4,
        "num_key_value_heads": 2,
        "head_dim": HEAD_DIM,
        "hidden_act": "silu",
        "max_position_embeddings": 262144,
        "rms_norm_eps": 1e-6,
        "attention_bias": False,
        "tie_word_embeddings": False,
        "rope_parameters": {
            "rope_type": "default",
            "rope_theta": 5000000.0,
            "mrope_section": list(MROPE_SECTION),
            "mrope_interleaved": True,
        },
        "bos_token_id": None,
        "eos_token_id": tokenizer.convert_tokens_to_ids("<|im_end|>"),
        "pad_token_id": tokenizer.convert_tokens_to_ids("<|endoftext|>"),
    }
    vision_config = {
        "depth": 1,
        "hidden_size": 16,
        "hidden_act": "gelu_pytorch_tanh",
        "intermediate_size": 32,
        "num_heads": 2,
        "in_channels": 3,
        "patch_size": VISION_PATCH,
        "spatial_merge_size": 2,
        "temporal_patch_size": 2,
        "out_hidden_size": 16,
        "num_position_embeddings": 64,
        "deepstack_visual_indexes": [0],
    }
    text_config.update(text_overrides or {})
    vision_config.update(vision_overrides or {})
    return Qwen3VLConfig(text_config=text_config, vision_config=vision_config, tie_word_embeddings=False, **ids), ids


def init_weights(model: torch.nn.Module, seed: int) -> None:
    """
    Deterministic init with magnitudes that keep every path visible through 52 layers: norm weights 1 + 0.1 N, biases
    0.02 N, embeddings N(0, 1), every other matrix / conv kernel N(0, 1 / fan_in).
    """
    gen = generator(seed)
    for name, param in model.named_parameters():
        noise = torch.randn(tuple(param.shape), generator=gen, dtype=torch.float32)
        leaf = name.rsplit(".", 1)[-1]
        if param.ndim == 1 and "norm" in name and leaf == "weight":
            value = 1.0 + 0.1 * noise
        elif leaf == "bias" or param.ndim == 1:
            value = 0.02 * noise
        elif "embed_tokens" in name:
            value = noise
        elif "pos_embed" in name:
            value = 0.5 * noise
        else:
            fan_in = param[0].numel()
            value = noise / math.sqrt(fan_in)
        param.copy_(value.to(param.dtype))


def build_text_encoder(tokenizer_dir: pathlib.Path, save_dir: pathlib.Path):
    """Build, save (float32) and reload the tiny conditioner; returns (model, tokenizer, special ids)."""
    from transformers import Qwen2TokenizerFast, Qwen3VLForConditionalGeneration

    tokenizer = Qwen2TokenizerFast.from_pretrained(str(tokenizer_dir))
    config, ids = tiny_config(tokenizer)
    torch.manual_seed(TEXT_ENCODER_SEED)
    model = Qwen3VLForConditionalGeneration(config).float().eval()
    init_weights(model, TEXT_ENCODER_SEED + 1)
    model.save_pretrained(str(save_dir))
    model = Qwen3VLForConditionalGeneration.from_pretrained(str(save_dir), dtype=torch.float32).eval()
    rotary = model.model.language_model.rotary_emb
    section = getattr(rotary, "mrope_section", None)
    if section is None:
        log("    note: the text rotary embedding has no `mrope_section` attribute to check")
    elif list(section) != MROPE_SECTION:
        raise ValueError(f"mrope_section not taken from the config: {section}")
    log(f"    text encoder: {sum(p.numel() for p in model.parameters())} params, vocab {len(tokenizer)}, "
        f"rope {model.config.text_config.rope_parameters}, attn {model.config._attn_implementation}, ids {ids}")
    return model, tokenizer, ids


def build_processor(tokenizer):
    """
    Qwen3VLProcessor with the Qwen3-VL release constants (spec/conditioner.md section 5) except the patch size, which
    follows the tiny vision tower (8), and the given tokenizer.
    """
    from transformers import Qwen3VLProcessor
    from transformers.models.qwen3_vl.video_processing_qwen3_vl import Qwen3VLVideoProcessor

    try:
        from transformers import Qwen2VLImageProcessorFast as ImageProcessor
    except ImportError:
        from transformers import Qwen2VLImageProcessor as ImageProcessor
    common = {"patch_size": VISION_PATCH, "temporal_patch_size": 2, "merge_size": 2, "image_mean": [0.5] * 3,
              "image_std": [0.5] * 3}
    try:
        image = ImageProcessor(**common, size={"shortest_edge": 65536, "longest_edge": 16777216})
    except Exception as error:
        log(f"    note: image processor rejected the release constants ({error!r}); using its defaults")
        image = ImageProcessor()
    try:
        video = Qwen3VLVideoProcessor(**common, size={"shortest_edge": 4096, "longest_edge": 25165824})
    except Exception as error:
        log(f"    note: video processor rejected the release constants ({error!r}); using its defaults")
        video = Qwen3VLVideoProcessor()
    return Qwen3VLProcessor(image_processor=image, tokenizer=tokenizer, video_processor=video)


def layer50_hidden(model, token_ids: list) -> torch.Tensor:
    """`hidden_states[50]` exactly as diffusers' get_qwen3vl_prompt_embeds calls the conditioner (text only)."""
    input_ids = torch.tensor([token_ids], dtype=torch.long)
    kwargs = dict(
        input_ids=input_ids,
        attention_mask=torch.ones_like(input_ids),
        use_cache=False,
        output_hidden_states=True,
    )
    try:
        # The processor's create_mm_token_type_ids gives all zeros for a presentation without vision pads.
        outputs = model.model(mm_token_type_ids=torch.zeros_like(input_ids), **kwargs)
    except TypeError as error:
        log(f"    note: conditioner rejected mm_token_type_ids ({error}); calling without it")
        outputs = model.model(**kwargs)
    return outputs.hidden_states[TEXT_ENCODER_LAYER]
