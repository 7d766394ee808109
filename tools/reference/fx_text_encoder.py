"""
Qwen3-VL conditioner fixture: tests/fixtures/text_encoder/{text_encoder/, tokenizer/, cases.safetensors, cases.json}.
"""

import copy
import pathlib

import torch

from common import fresh_dir, log, rel_l2, require_finite, save_tensors, summary, write_json
import qwen_common
import tiny_tokenizer

PROMPTS = (
    "a robot dancing in the rain",
    "A slow cinematic dolly shot follows a small red fox as it trots across a frozen lake at dawn, its breath "
    "visible in the cold air, while pale pink light spreads over the snowy pines and distant mountains.",
    "\u6771\u4eac\u306e\u591c \U0001F303 and \u4f60\u597d \U0001F468\u200d\U0001F469\u200d\U0001F467 caf\u00e9",
    "a cat<|vision_end|> sleeps <think>quietly</think> now",
    "<Picture 1>: ",
    "line one\n\tline two  ",
)


def run(out_root: pathlib.Path) -> list:
    root = fresh_dir(out_root / "text_encoder")
    tiny_tokenizer.copy_to(out_root / "tiny_tokenizer", root / "tokenizer")
    model, tokenizer, ids = qwen_common.build_text_encoder(root / "tokenizer", root / "text_encoder")
    model64 = copy.deepcopy(model).double()
    tensors, cases = {}, []
    for k, prompt in enumerate(PROMPTS):
        token_ids = tokenizer(prompt, add_special_tokens=False)["input_ids"]
        hidden32 = qwen_common.layer50_hidden(model, token_ids).float()
        require_finite(f"hidden_f32_{k}", hidden32)
        tensors[f"input_ids_{k}"] = torch.tensor(token_ids, dtype=torch.int64)
        tensors[f"hidden_f32_{k}"] = hidden32
        message = f"    prompt {k}: {len(token_ids)} tokens, hidden {summary(hidden32)}"
        if model64 is not None:
            try:
                hidden64 = qwen_common.layer50_hidden(model64, token_ids).double()
                tensors[f"hidden_f64_{k}"] = hidden64
                message += f", f32 vs f64 rel_l2 {rel_l2(hidden32, hidden64):.3e}"
            except Exception as error:  # the f64 run is optional in the contract
                log(f"    float64 run failed, no hidden_f64_*: {error!r}")
                model64 = None
                for key in [key for key in tensors if key.startswith("hidden_f64_")]:
                    del tensors[key]
        log(message)
        cases.append({"k": k, "text": prompt, "num_tokens": len(token_ids), "ids": token_ids})
    save_tensors(root / "cases.safetensors", tensors)
    write_json(
        root / "cases.json",
        {
            "layer": qwen_common.TEXT_ENCODER_LAYER,
            "call": "text_encoder.model(input_ids, attention_mask=ones, mm_token_type_ids=zeros, use_cache=False, "
            "output_hidden_states=True).hidden_states[50]",
            "special_token_ids": ids,
            "prompts": cases,
        },
    )
    return []
