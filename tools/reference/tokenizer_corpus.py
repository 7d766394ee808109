"""
Tokenizer test corpus: the 100 verified vectors of spec/tokenizer.md section 8 (spec_tokenizer_vectors.jsonl, texts and
the ids the spec expects from the Qwen3 tokenizer) followed by our own strings.
"""

import pathlib

from common import read_jsonl

HERE = pathlib.Path(__file__).resolve().parent

EXTRA_TEXTS = (
    # ASCII prose and prompts
    "a robot dancing in the rain",
    "A cinematic shot of a lighthouse at dusk, waves crashing below, seagulls circling overhead.",
    "The quick brown fox jumps over the lazy dog.",
    "In the year 2049, a lone explorer walks across the red dunes of Mars; her suit is dusty.",
    # whitespace runs, tabs, CR/LF
    "word1    word2\t\tword3",
    "\tindented line\n\t\tdouble indented\n",
    "windows\r\nline\r\nendings\r\n",
    "old mac\rline\rendings",
    "    leading four spaces",
    "trailing tab\t",
    "mixed \t \n \r\n whitespace \n\n\n",
    "\n\n\n\n",
    # digits and numbers
    "3.141592653589793 2.718281828 -42 +7 1e-5 6.02e23",
    "Call 555-0199 or +1 (800) 123-4567 before 23:59:59.",
    "v1.2.3-rc.4 build #0007",
    # contractions in both cases
    "I'm you're he's she'd we've they'll it's",
    "I'M YOU'RE HE'S SHE'D WE'VE THEY'LL IT'S",
    "o'clock rock'n'roll 'twas y'all",
    # CJK, Korean, Thai
    "\u6771\u4eac\u306e\u591c\u666f\u306f\u3068\u3066\u3082\u7f8e\u3057\u3044\u3002",
    "\u673a\u5668\u4eba\u5728\u96e8\u4e2d\u8df3\u821e\uff0c\u955c\u5934\u7f13\u7f13\u62c9\u8fd1\u3002",
    "\ud55c\uad6d\uc5b4 \ubb38\uc7a5\uacfc English \ud63c\ud569",
    "\u0e2a\u0e27\u0e31\u0e2a\u0e14\u0e35\u0e04\u0e23\u0e31\u0e1a",
    # emoji: ZWJ sequences, skin tones, flags, keycaps, variation selectors
    "\U0001F469\u200d\U0001F4bb\U0001F468\U0001F3FF\u200d\U0001F680 \U0001F3F3\ufe0f\u200d\U0001F308",
    "\U0001F1EF\U0001F1F5\U0001F1FA\U0001F1F8\U0001F1E9\U0001F1EA flags",
    "1\ufe0f\u20e3 #\ufe0f\u20e3 \u2764\ufe0f \u263a\ufe0e",
    "robot \U0001F916 dances \U0001F483\U0001F3FD in the rain \U0001F327\ufe0f",
    # NFD input (decomposed), canonical reordering
    "Cafe\u0301 re\u0301sume\u0301 na\u0308ive",
    "\u1100\u1161\u11a8 \u1102\u1165",
    "o\u0323\u0302 vs \u1ed9",
    # RTL scripts
    "\u05e9\u05dc\u05d5\u05dd \u05e2\u05d5\u05dc\u05dd",
    "\u0627\u0644\u0633\u0644\u0627\u0645 \u0639\u0644\u064a\u0643\u0645 123",
    "mixed \u05e2\u05d1\u05e8\u05d9\u05ea and English",
    # special / added tokens in text
    "<|im_start|>user\nhello<|im_end|>\n<|im_start|>assistant\n",
    "<think>\nreasoning here\n</think>\n\nanswer",
    "<|vision_start|><|image_pad|><|vision_end|>describe",
    "<|video_pad|> <|vision_pad|> <|object_ref_start|>x<|object_ref_end|>",
    "<|box_start|>(1,2),(3,4)<|box_end|><|quad_start|><|quad_end|>",
    "<tool_call>{\"a\": 1}</tool_call><tool_response>ok</tool_response>",
    "<|fim_prefix|>def f():<|fim_suffix|>\n<|fim_middle|>pass<|fim_pad|>",
    "<|repo_name|>h3<|file_sep|>main.cpp",
    "<|endoftext|><|endoftext|>",
    "<|im_start|<|im_end|>>",
    "<think",
    # labels
    "<Picture 3>: ",
    "<Video 2>: ",
    "<Audio 3>: ",
    "<13.2 seconds>",
    "<Picture 1>: <|vision_start|><|image_pad|><|vision_end|>a robot",
    # very long words and digit runs
    "supercalifragilistic" * 15,
    "1234567890" * 10,
    "x" * 300,
    "\u6f22" * 120,
    # empty, control characters, odd spaces
    "",
    "\u0000",
    "bell\u0007 escape\u001b[0m delete\u007f",
    "thin\u2009space hair\u200aspace nnbsp\u202fend",
    "ogham\u1680space math\u205fspace ideographic\u3000space",
    "zero\u200bwidth joiner\u200dnon\u200cjoiner",
    "line\u2028separator paragraph\u2029separator",
    "soft\u00adhyphen",
    "\ufeffBOM at start and middle\ufeff",
)


def spec_vectors() -> list:
    return read_jsonl(HERE / "spec_tokenizer_vectors.jsonl")


def corpus_texts() -> list:
    """Spec texts first, then ours; duplicates dropped, order kept."""
    seen, texts = set(), []
    for text in [row["text"] for row in spec_vectors()] + list(EXTRA_TEXTS):
        if text not in seen:
            seen.add(text)
            texts.append(text)
    return texts
