"""
The tiny byte-level BPE tokenizer of the tiny models: Qwen's exact pipeline (NFC, Qwen's Split regex, ByteLevel
without prefix space or regex, ByteLevel decoder/post-processor that add nothing) with a ~512-entry vocabulary trained
on a small English corpus, and Qwen's 26 added tokens appended right after the base vocabulary.
"""

import json
import pathlib

from common import write_json

QWEN_SPLIT_REGEX = (
    r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"
)

# (content, special) in Qwen's order (spec/tokenizer.md section 6); ids follow the base vocabulary in this order.
QWEN_ADDED_TOKENS = (
    ("<|endoftext|>", True),
    ("<|im_start|>", True),
    ("<|im_end|>", True),
    ("<|object_ref_start|>", True),
    ("<|object_ref_end|>", True),
    ("<|box_start|>", True),
    ("<|box_end|>", True),
    ("<|quad_start|>", True),
    ("<|quad_end|>", True),
    ("<|vision_start|>", True),
    ("<|vision_end|>", True),
    ("<|vision_pad|>", True),
    ("<|image_pad|>", True),
    ("<|video_pad|>", True),
    ("<tool_call>", False),
    ("</tool_call>", False),
    ("<|fim_prefix|>", False),
    ("<|fim_middle|>", False),
    ("<|fim_suffix|>", False),
    ("<|fim_pad|>", False),
    ("<|repo_name|>", False),
    ("<|file_sep|>", False),
    ("<tool_response>", False),
    ("</tool_response>", False),
    ("<think>", False),
    ("</think>", False),
)

VOCAB_SIZE = 512  # 256 byte symbols + up to 256 merges, before the added tokens

QWEN_PIPELINE = {
    "normalizer": {"type": "NFC"},
    "pre_tokenizer": {
        "type": "Sequence",
        "pretokenizers": [
            {"type": "Split", "pattern": {"Regex": QWEN_SPLIT_REGEX}, "behavior": "Isolated", "invert": False},
            {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": False, "use_regex": False},
        ],
    },
    "post_processor": {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": False, "use_regex": False},
    "decoder": {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": False, "use_regex": False},
}

_SUBJECTS = (
    "a robot", "the old man", "a small red fox", "two children", "a golden retriever", "the city skyline",
    "a sailing boat", "an astronaut", "the chef", "a herd of horses", "a young woman", "the street musician",
    "a hummingbird", "the orchestra", "a vintage car", "the lighthouse", "a paper lantern", "the dancer",
)
_ACTIONS = (
    "is dancing in the rain", "walks slowly through the forest", "runs across a snowy field at sunrise",
    "plays the guitar on a busy street", "looks up at the stars", "is cooking dinner in a warm kitchen",
    "drifts across the calm water", "jumps over a wooden fence", "smiles at the camera", "turns around and waves",
    "sings a quiet song", "glows softly in the evening light", "flies between the flowers",
    "stands still while the wind blows", "laughs loudly with friends", "spins faster and faster",
)
_DETAILS = (
    "The camera slowly pans to the left.", "Soft music plays in the background.",
    "It is a cold winter morning.", "The scene is shot in slow motion.", "Birds are singing nearby.",
    "Rain falls on the wet pavement.", "The sun sets behind the mountains.", "A gentle breeze moves the leaves.",
    "People are talking and laughing.", "The lights of the city sparkle.", "Thunder rumbles in the distance.",
    "Waves crash against the rocks.", "The crowd cheers with excitement.", "Footsteps echo in the hallway.",
)
_EXTRA = (
    "It's 3 o'clock and we're late, aren't we? I'll call you at 10:45.",
    "She said: \"Don't worry, it'll be fine!\" (really) -- 100% sure.",
    "Numbers: 0 1 2 3 4 5 6 7 8 9, 12.5, 2024-06-01, #42, $19.99, 3/4.",
    "CamelCaseNames and snake_case_names and kebab-case-names.",
    "Question? Answer! Ellipsis... Semicolon; colon: comma, period.",
)


def training_corpus() -> list:
    """A deterministic English-ish corpus: every subject x action pairing plus a rotating detail sentence."""
    lines = []
    for i, subject in enumerate(_SUBJECTS):
        for j, action in enumerate(_ACTIONS):
            detail = _DETAILS[(i * len(_ACTIONS) + j) % len(_DETAILS)]
            lines.append(f"{subject[0].upper()}{subject[1:]} {action}. {detail}")
    lines.extend(_EXTRA * 4)
    return lines


def build(out_dir) -> dict:
    """Train, write tokenizer.json + tokenizer_config.json into out_dir, return the ids of the added tokens."""
    from tokenizers import Regex, Tokenizer, decoders, models, normalizers, pre_tokenizers, processors, trainers

    tokenizer = Tokenizer(models.BPE())
    tokenizer.normalizer = normalizers.NFC()
    tokenizer.pre_tokenizer = pre_tokenizers.Sequence(
        [
            pre_tokenizers.Split(Regex(QWEN_SPLIT_REGEX), behavior="isolated", invert=False),
            pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
        ]
    )
    tokenizer.decoder = decoders.ByteLevel()
    tokenizer.post_processor = processors.ByteLevel(trim_offsets=False)
    trainer = trainers.BpeTrainer(
        vocab_size=VOCAB_SIZE,
        min_frequency=2,
        show_progress=False,
        special_tokens=[],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
    )
    tokenizer.train_from_iterator(training_corpus(), trainer=trainer)

    data = json.loads(tokenizer.to_str())
    vocab = data["model"]["vocab"]
    base_size = len(vocab)
    if sorted(vocab.values()) != list(range(base_size)):
        raise ValueError("trained vocabulary ids are not contiguous")
    data.update(QWEN_PIPELINE)
    data["model"].update(
        {
            "type": "BPE",
            "dropout": None,
            "unk_token": None,
            "continuing_subword_prefix": "",
            "end_of_word_suffix": "",
            "fuse_unk": False,
            "byte_fallback": False,
            "ignore_merges": False,
        }
    )
    data["truncation"] = None
    data["padding"] = None
    data["added_tokens"] = [
        {
            "id": base_size + index,
            "content": content,
            "single_word": False,
            "lstrip": False,
            "rstrip": False,
            "normalized": False,
            "special": special,
        }
        for index, (content, special) in enumerate(QWEN_ADDED_TOKENS)
    ]
    final = Tokenizer.from_str(json.dumps(data))
    if final.get_vocab_size(with_added_tokens=True) != base_size + len(QWEN_ADDED_TOKENS):
        raise ValueError("added tokens did not land right after the base vocabulary")

    out_dir = pathlib.Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    final.save(str(out_dir / "tokenizer.json"), pretty=True)
    added = {content: base_size + index for index, (content, _) in enumerate(QWEN_ADDED_TOKENS)}
    write_json(out_dir / "tokenizer_config.json", tokenizer_config(base_size))
    return {"base_vocab_size": base_size, "merges": len(data["model"]["merges"]), "added": added}


def describe(tokenizer_dir) -> dict:
    """Base vocabulary size, merge count and added-token ids of a tokenizer.json written by `build`."""
    data = json.loads((pathlib.Path(tokenizer_dir) / "tokenizer.json").read_text(encoding="utf-8"))
    added = {token["content"]: token["id"] for token in data["added_tokens"]}
    return {"base_vocab_size": len(data["model"]["vocab"]), "merges": len(data["model"]["merges"]), "added": added}


def tokenizer_config(base_size: int) -> dict:
    """Qwen2Tokenizer config in the layout of the Qwen3 release (no BOS, eos <|im_end|>, pad <|endoftext|>)."""
    added = {
        str(base_size + index): {
            "content": content,
            "lstrip": False,
            "normalized": False,
            "rstrip": False,
            "single_word": False,
            "special": special,
        }
        for index, (content, special) in enumerate(QWEN_ADDED_TOKENS)
    }
    return {
        "add_bos_token": False,
        "add_prefix_space": False,
        "added_tokens_decoder": added,
        "additional_special_tokens": [content for content, special in QWEN_ADDED_TOKENS[1:14]],
        "bos_token": None,
        "clean_up_tokenization_spaces": False,
        "eos_token": "<|im_end|>",
        "errors": "replace",
        "model_max_length": 262144,
        "pad_token": "<|endoftext|>",
        "split_special_tokens": False,
        "tokenizer_class": "Qwen2Tokenizer",
        "unk_token": None,
    }


def copy_to(src_dir, dst_dir) -> None:
    """Copy the two tokenizer files (byte-identical copies, as the release keeps them)."""
    import shutil

    dst_dir = pathlib.Path(dst_dir)
    dst_dir.mkdir(parents=True, exist_ok=True)
    for name in ("tokenizer.json", "tokenizer_config.json"):
        shutil.copyfile(pathlib.Path(src_dir) / name, dst_dir / name)
