#!/usr/bin/env python3
"""tokenizer.json for the golden models' Hugging Face directories, so that their config.json +
safetensors forms can be served like their GGUFs (tests/e2e/test_families.py).

Each is the GGUF's own vocabulary (read with the `gguf` package) in the layout Hugging Face's
converters write for that family (transformers' convert_slow_tokenizer.py):
  * byte-level BPE files (llama, qwen2, qwen2_yarn, qwen3, qwen3moe, qwen3moe_kv4, glm4moe,
    llama4, deepseek2, deepseek2_lite): vocab + merges as stored, Split with the Llama 3 or the
    Qwen2 regex + ByteLevel, Qwen's NFC normalizer (glm4moe's and the deepseek2 cases' GGUFs
    carry the qwen2 vocabulary and pre-tokenizer, llama4's the Llama 3 ones; deepseek2_fp8_hf,
    which has no GGUF, gets deepseek2's);
  * SentencePiece files (mistral, mixtral, gemma2, gemma3): BPE over characters with byte
    fallback, whose merges are derived from the vocabulary the way transformers'
    SentencePieceExtractor derives them (every split of a piece into two pieces of the
    vocabulary, in the order of the pieces' scores), with Gemma's normalizer (spaces to U+2581)
    or Llama 2 / Mistral's (a U+2581 prepended, spaces replaced) and decoders.
The tests feed token ids, so these tokenizers need to be the models' vocabularies in a shape the
server reads, not trained ones.

    python3 tests/golden/families/make_family_tokenizers.py   # after make_family_goldens.py,
                                                              # which rewrites the directories
"""
import json
import os

from gguf import GGUFReader

HERE = os.path.dirname(os.path.abspath(__file__))
LLAMA3_REGEX = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}|"
                r" ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+")
QWEN2_REGEX = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}|"
               r" ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+")
CASES = ["llama", "qwen2", "qwen2_yarn", "qwen3", "mistral", "gemma2", "gemma3", "mixtral",
         "qwen3moe", "qwen3moe_kv4", "glm4moe", "llama4", "deepseek2", "deepseek2_lite"]
# Hugging Face directories without a GGUF of their own: directory -> the case whose GGUF holds
# their vocabulary
OTHER_DIRS = {"deepseek2_fp8_hf": "deepseek2"}
CONTROL = 3


def field(reader, key):
    f = reader.fields.get(key)
    if f is None:
        return None
    values = [f.parts[i] for i in f.data]
    if f.types[0].name == "STRING" or (len(f.types) > 1 and f.types[1].name == "STRING"):
        values = [bytes(v).decode("utf-8") for v in values]
    else:
        values = [v.tolist()[0] for v in values]
    return values if f.types[0].name == "ARRAY" else values[0]


def added_tokens(tokens, types):
    return [{"id": i, "content": t, "single_word": False, "lstrip": False, "rstrip": False,
             "normalized": False, "special": True}
            for i, (t, ty) in enumerate(zip(tokens, types)) if ty == CONTROL]


def post_processor(reader, tokens):
    bos = field(reader, "tokenizer.ggml.bos_token_id")
    if not field(reader, "tokenizer.ggml.add_bos_token") or bos is None:
        return None
    return {"type": "TemplateProcessing",
            "single": [{"SpecialToken": {"id": tokens[bos], "type_id": 0}},
                       {"Sequence": {"id": "A", "type_id": 0}}],
            "pair": [{"SpecialToken": {"id": tokens[bos], "type_id": 0}},
                     {"Sequence": {"id": "A", "type_id": 0}},
                     {"Sequence": {"id": "B", "type_id": 1}}],
            "special_tokens": {tokens[bos]: {"id": tokens[bos], "ids": [bos],
                                             "tokens": [tokens[bos]]}}}


def byte_level(reader, tokens, types):
    pre = field(reader, "tokenizer.ggml.pre")
    qwen = pre == "qwen2"
    return {
        "version": "1.0", "truncation": None, "padding": None,
        "added_tokens": added_tokens(tokens, types),
        "normalizer": {"type": "NFC"} if qwen else None,
        "pre_tokenizer": {"type": "Sequence", "pretokenizers": [
            {"type": "Split", "pattern": {"Regex": QWEN2_REGEX if qwen else LLAMA3_REGEX},
             "behavior": "Isolated", "invert": False},
            {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": False,
             "use_regex": False}]},
        "post_processor": post_processor(reader, tokens),
        "decoder": {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": True,
                    "use_regex": True},
        "model": {"type": "BPE", "dropout": None, "unk_token": None,
                  "continuing_subword_prefix": None, "end_of_word_suffix": None,
                  "fuse_unk": False, "byte_fallback": False, "ignore_merges": not qwen,
                  "vocab": {t: i for i, t in enumerate(tokens)},
                  "merges": field(reader, "tokenizer.ggml.merges")},
    }


def spm_merges(tokens, scores, types):
    """transformers' SentencePieceExtractor: (left, right) splits of each piece into two vocab
    pieces, pieces in descending score order, splits of one piece by their pieces' ids."""
    vocab = {t: i for i, t in enumerate(tokens) if types[i] == 1}
    merges = []
    for piece in sorted(vocab, key=lambda p: -scores[vocab[p]]):
        local = [(piece[:k], piece[k:]) for k in range(1, len(piece))
                 if piece[:k] in vocab and piece[k:] in vocab]
        merges += sorted(local, key=lambda lr: (vocab[lr[0]], vocab[lr[1]]))
    return [f"{a} {b}" for a, b in merges]


def sentencepiece(reader, tokens, types, gemma):
    scores = field(reader, "tokenizer.ggml.scores")
    unk = field(reader, "tokenizer.ggml.unknown_token_id")
    replace = {"type": "Replace", "pattern": {"String": " "}, "content": "\u2581"}
    normalizer = replace if gemma else {"type": "Sequence", "normalizers": [
        {"type": "Prepend", "prepend": "\u2581"}, replace]}
    decoders = [{"type": "Replace", "pattern": {"String": "\u2581"}, "content": " "},
                {"type": "ByteFallback"}, {"type": "Fuse"}]
    if not gemma:
        decoders.append({"type": "Strip", "content": " ", "start": 1, "stop": 0})
    return {
        "version": "1.0", "truncation": None, "padding": None,
        "added_tokens": added_tokens(tokens, types),
        "normalizer": normalizer,
        "pre_tokenizer": None,
        "post_processor": post_processor(reader, tokens),
        "decoder": {"type": "Sequence", "decoders": decoders},
        "model": {"type": "BPE", "dropout": None,
                  "unk_token": tokens[unk] if unk is not None else None,
                  "continuing_subword_prefix": None, "end_of_word_suffix": None,
                  "fuse_unk": True, "byte_fallback": True, "ignore_merges": False,
                  "vocab": {t: i for i, t in enumerate(tokens)},
                  "merges": spm_merges(tokens, scores, types)},
    }


def main():
    for case, hf_dir in [(c, f"{c}_hf") for c in CASES] + [
            (c, d) for d, c in OTHER_DIRS.items()]:
        reader = GGUFReader(os.path.join(HERE, f"{case}.gguf"))
        tokens = field(reader, "tokenizer.ggml.tokens")
        types = field(reader, "tokenizer.ggml.token_type")
        if field(reader, "tokenizer.ggml.model") == "gpt2":
            tok = byte_level(reader, tokens, types)
        else:
            tok = sentencepiece(reader, tokens, types, gemma=case.startswith("gemma"))
        with open(os.path.join(HERE, hf_dir, "tokenizer.json"), "w",
                  encoding="utf-8") as f:
            json.dump(tok, f, ensure_ascii=False, indent=1)
            f.write("\n")


if __name__ == "__main__":
    main()
