#!/usr/bin/env python3
"""Writes gemma3_llamacpp.jsonl: llama.cpp's ids and detokenized text on the real Gemma 3 270M GGUF
(a SentencePiece vocabulary, tokenizer.ggml.model = "llama"), for
//coordinator/tokenizer:gemma3_parity_test. Run by hand; commit the output.

Reference, not written here: llama.cpp through llama-cpp-python (vocab_only), i.e.
llama_tokenize(add_special=False, parse_special=...) and llama_detokenize(remove_special=False,
unparse_special=True), which is what Tokenizer::Encode / Tokenizer::Decode promise to match.

Corpus: make_tokenizer_golden.py's curated strings, Gemma's own markers (control, user-defined,
byte-token look-alikes, runs of spaces and newlines that are user-defined tokens), then 3,000
seeded random mixtures of ASCII, whitespace runs, Korean, CJK, emoji, accented Latin, and (one
string in eight) raw bytes that are not UTF-8.

Rows: {"text" | "text_hex", "ids", "ids_special"?, "decoded"?}: text_hex (hex of the bytes)
replaces text when the bytes are not valid UTF-8; ids_special (special tokens parsed) only for
strings with marker text; decoded only where llama_detokenize(ids) differs from the input.

Usage: ~/.cache/tpserve/venv-structured/bin/python make_gemma3_tokenizer_golden.py
  [--model-dir DIR]   (default $TPSERVE_MODEL_DIR or ~/.cache/tpserve; scripts/setup.sh puts the
  GGUF there). Needs llama-cpp-python (0.3.36 made the committed file).
"""
import argparse
import ctypes
import json
import os
import random
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from make_tokenizer_golden import HAND_WRITTEN, programmatic_corpus  # noqa: E402

MODEL_FILE = "gemma-3-270m-q4_k_m.gguf"
OUT_FILE = "gemma3_llamacpp.jsonl"
RANDOM_STRINGS = 3000

GEMMA_MARKERS = [
    "<bos>", "<eos>", "<pad>", "<unk>", "<mask>", "[multimodal]", "<start_of_turn>",
    "<end_of_turn>", "<start_of_image>", "<end_of_image>", "<unused0>", "<unused98>",
    "<start_of_turn>user\nHi<end_of_turn>\n<start_of_turn>model\n", "a<end_of_turn>b",
    "<start_of_turn", "end_of_turn>", "<<bos>>", "<eos><eos>", "<table><tr><td>x</td></tr></table>",
    "<b>bold</b> and <i>it</i>", "<0x41>", "<0xEC><0x95><0x88>", "\u2581", "\u2581\u2581x",
    "a\u2581b", " ", "  ", "   ", " " * 31, " " * 40, "\n" * 31, "\n" * 40, "\t\t\t",
    "x \n  \n   y",
    "trailing\n", "\nleading", " \n", "\r\n\r\n",
]
SPECIAL_MARKERS = ("<bos>", "<eos>", "<pad>", "<unk>", "<mask>", "[multimodal]", "<start_of",
                   "<end_of", "<unused", "<|")

POOLS = [
    "abcdefghijklmnopqrstuvwxyz", "ABCDEFGHIJKLMNOPQRSTUVWXYZ", "0123456789", " ", "  ", "\n",
    "\t", ".,;:!?'\"()-_/<>[]{}#@*", "가나다라마바사아자차카타파하한글읽기쓰기", "뷁똠얗",
    "あいうえおかきくけこアイウエオ", "的一是不了人我在有他这中漢字龍", "😀😂🥲👍🏽🎉🔥🇰🇷👨‍👩‍👧",
    "éèêëàâäôöûüçñßøåÆŒ", "αβγδεζ", "абвгде", "\u0301\u0308", "\u00a0\u3000\u200b",
]
INVALID_PIECES = [b"\xff", b"\xfe", b"\x80", b"\xbf", b"\xc3", b"\xec\x95", b"\xf0\x9f\x98",
                  b"\xed\xa0\x80", b"\xc0\xaf", b"\xf4\x90\x80\x80", b"\xe4a"]


def random_corpus():
    rng = random.Random(20250301)
    corpus = []
    for i in range(RANDOM_STRINGS):
        parts = []
        for _ in range(rng.randint(1, 5)):
            pool = rng.choice(POOLS)
            parts.append("".join(rng.choice(pool) for _ in range(rng.randint(1, 5))).encode())
        if i % 8 == 7:
            for _ in range(rng.randint(1, 3)):
                parts.insert(rng.randint(0, len(parts)), rng.choice(INVALID_PIECES))
        corpus.append(b"".join(parts))
    return corpus


def build_corpus():
    seen, corpus = set(), []
    texts = [t.encode("utf-8") for t in HAND_WRITTEN + programmatic_corpus() + GEMMA_MARKERS]
    for data in texts + random_corpus():
        if data not in seen:
            seen.add(data)
            corpus.append(data)
    return corpus


def detokenize(llama_cpp, vocab, ids):
    arr = (llama_cpp.llama_token * max(1, len(ids)))(*ids)
    size = 64 + 64 * len(ids)
    buf = ctypes.create_string_buffer(size)
    n = llama_cpp.llama_detokenize(vocab, arr, len(ids), buf, size, False, True)
    assert 0 <= n <= size, n
    return buf.raw[:n]


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--model-dir", default=os.environ.get(
        "TPSERVE_MODEL_DIR", os.path.expanduser("~/.cache/tpserve")))
    args = parser.parse_args()
    model_path = os.path.join(args.model_dir, MODEL_FILE)
    if not os.path.exists(model_path):
        sys.exit(f"{model_path} not found; run scripts/setup.sh first")
    import llama_cpp
    llm = llama_cpp.Llama(model_path=model_path, vocab_only=True, verbose=False)
    vocab = llm._model.vocab
    rows, differing = [], 0
    for data in build_corpus():
        try:
            row = {"text": data.decode("utf-8")}
        except UnicodeDecodeError:
            row = {"text_hex": data.hex()}
        row["ids"] = llm.tokenize(data, add_bos=False, special=False)
        text = row.get("text", "")
        if any(marker in text for marker in SPECIAL_MARKERS):
            row["ids_special"] = llm.tokenize(data, add_bos=False, special=True)
        decoded = detokenize(llama_cpp, vocab, row["ids"])
        if decoded != data:
            differing += 1
            row["decoded_hex"] = decoded.hex()
        rows.append(row)
    path = os.path.join(HERE, OUT_FILE)
    with open(path, "w", encoding="utf-8") as f:
        for row in rows:
            f.write(json.dumps(row, ensure_ascii=False) + "\n")
    print(f"wrote {path} ({len(rows)} rows, {os.path.getsize(path)} bytes; "
          f"{sum('text_hex' in r for r in rows)} not UTF-8; {differing} decode differently)")


if __name__ == "__main__":
    main()
