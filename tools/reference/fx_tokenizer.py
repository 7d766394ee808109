"""
Tokenizer fixtures:
  tests/fixtures/tokenizer/{corpus.jsonl, qwen3_ids.jsonl, tiny_ids.jsonl, summary.json}
  tests/fixtures/tiny_tokenizer/{tokenizer.json, tokenizer_config.json}
Ids come from the `tokenizers` library and are cross-checked equal to transformers' Qwen2TokenizerFast.
"""

import json
import pathlib
import tarfile
import tempfile

from common import log, write_json, write_jsonl
import tiny_tokenizer
from tokenizer_corpus import corpus_texts, spec_vectors


def extract_qwen3(archive: pathlib.Path, dest: pathlib.Path) -> pathlib.Path:
    with tarfile.open(archive, mode="r:xz") as tar:
        for member in tar.getmembers():
            name = pathlib.PurePosixPath(member.name).name
            if member.isfile() and name in ("tokenizer.json", "tokenizer_config.json"):
                (dest / name).write_bytes(tar.extractfile(member).read())
    if not (dest / "tokenizer.json").is_file():
        raise FileNotFoundError(f"{archive} has no tokenizer.json")
    return dest


def encode_both(tokenizer_dir: pathlib.Path, texts: list) -> tuple:
    """ids from `tokenizers` and from transformers' Qwen2TokenizerFast; the list of texts where they differ."""
    from tokenizers import Tokenizer
    from transformers import Qwen2TokenizerFast

    raw = Tokenizer.from_file(str(tokenizer_dir / "tokenizer.json"))
    fast = Qwen2TokenizerFast.from_pretrained(str(tokenizer_dir))
    rows, mismatches = [], []
    for text in texts:
        ids = raw.encode(text, add_special_tokens=False).ids
        ids_fast = fast(text, add_special_tokens=False)["input_ids"]
        if list(ids) != list(ids_fast):
            mismatches.append({"text": text, "tokenizers": list(ids), "transformers": list(ids_fast)})
        rows.append({"text": text, "ids": list(ids)})
    return rows, mismatches, type(fast).__name__


def run(out_root: pathlib.Path, qwen3_archive: pathlib.Path) -> list:
    failures = []
    texts = corpus_texts()
    tok_root = out_root / "tokenizer"
    tok_root.mkdir(parents=True, exist_ok=True)
    write_jsonl(tok_root / "corpus.jsonl", [{"text": text} for text in texts])
    log(f"  tokenizer/corpus.jsonl: {len(texts)} strings")
    summary = {"corpus_size": len(texts)}

    # Qwen3 ids.
    try:
        with tempfile.TemporaryDirectory() as tmp:
            qwen_dir = extract_qwen3(qwen3_archive, pathlib.Path(tmp))
            qwen_json = json.loads((qwen_dir / "tokenizer.json").read_text(encoding="utf-8"))
            regex = qwen_json["pre_tokenizer"]["pretokenizers"][0]["pattern"]["Regex"]
            if regex != tiny_tokenizer.QWEN_SPLIT_REGEX:
                raise ValueError(f"the Qwen3 split regex differs from the tiny tokenizer's: {regex!r}")
            added = [(t["content"], t["special"]) for t in qwen_json["added_tokens"]]
            if tuple(added) != tiny_tokenizer.QWEN_ADDED_TOKENS:
                raise ValueError(f"the Qwen3 added tokens differ from spec section 6: {added}")
            rows, mismatches, cls = encode_both(qwen_dir, texts)
        write_jsonl(tok_root / "qwen3_ids.jsonl", rows)
        spec_diff = []
        by_text = {row["text"]: row["ids"] for row in rows}
        for vector in spec_vectors():
            if by_text[vector["text"]] != vector["ids"]:
                spec_diff.append({"text": vector["text"], "spec": vector["ids"], "tokenizers": by_text[vector["text"]]})
        log(f"  tokenizer/qwen3_ids.jsonl: {len(rows)} rows; transformers ({cls}) mismatches: {len(mismatches)}; "
            f"spec section 8 disagreements: {len(spec_diff)}")
        for item in mismatches + spec_diff:
            log(f"    MISMATCH {json.dumps(item, ensure_ascii=True)}")
        summary["qwen3"] = {"transformers_class": cls, "transformers_mismatches": len(mismatches),
                            "spec_disagreements": len(spec_diff)}
        if mismatches:
            failures.append("qwen3_ids (tokenizers != transformers)")
    except Exception:
        import traceback

        traceback.print_exc()
        failures.append("qwen3_ids")

    # Tiny tokenizer and its ids.
    try:
        tiny_dir = out_root / "tiny_tokenizer"  # built first by the driver (family `tiny_tokenizer`)
        info = tiny_tokenizer.describe(tiny_dir)
        size = (tiny_dir / "tokenizer.json").stat().st_size
        log(f"  tiny_tokenizer: base vocab {info['base_vocab_size']} ({info['merges']} merges), "
            f"added ids {min(info['added'].values())}..{max(info['added'].values())}, tokenizer.json {size} bytes")
        if size > 60_000:
            raise ValueError(f"tiny tokenizer.json is {size} bytes (> 60 KB)")
        rows, mismatches, cls = encode_both(tiny_dir, texts)
        write_jsonl(tok_root / "tiny_ids.jsonl", rows)
        log(f"  tokenizer/tiny_ids.jsonl: {len(rows)} rows; transformers ({cls}) mismatches: {len(mismatches)}")
        for item in mismatches:
            log(f"    MISMATCH {json.dumps(item, ensure_ascii=True)}")
        summary["tiny"] = {"base_vocab_size": info["base_vocab_size"], "merges": info["merges"],
                           "added": info["added"], "transformers_mismatches": len(mismatches)}
        if mismatches:
            failures.append("tiny_ids (tokenizers != transformers)")
    except Exception:
        import traceback

        traceback.print_exc()
        failures.append("tiny_tokenizer")

    write_json(tok_root / "summary.json", summary)
    return failures
