#!/usr/bin/env python3
"""Generates the tokenizer.json goldens of the newer families. Run by hand; commit the outputs.

Reference: Hugging Face `tokenizers` (nothing here is written by us). Small tokenizers are trained
with BpeTrainer on the shared corpus of make_tokenizer_golden.py and saved in the exact shapes the
families' Hugging Face checkpoints ship (transformers' convert_slow_tokenizer.py: Qwen2Converter,
GemmaConverter, LlamaConverter legacy and not, SpmConverter), with each one's ids for the corpus:

  tiny_qwen2_*       Qwen2/2.5/3: NFC normalizer, Split(Qwen regex, Isolated) + ByteLevel(no regex)
  tiny_gemma_*       Gemma 2/3: BPE byte_fallback over characters, normalizer Replace(" ", "▁"),
                     Split(" ", MergedWithPrevious), decoder Replace + ByteFallback + Fuse;
                     "\\t" in place of <0x09>; user-defined added tokens ("<table>", "▁▁▁▁")
  tiny_llama2_*      Llama 2 / Mistral (legacy): normalizer Prepend("▁") + Replace(" ", "▁"),
                     no pre-tokenizer, decoder Replace + ByteFallback + Fuse + Strip(" ", 1, 0)
  tiny_mistral_*     Mistral v0.3 (not legacy): the Llama 2 vocabulary, no normalizer,
                     Metaspace(prepend_scheme "first", split false)
  tiny_spmsplit_*    the Llama 2 vocabulary with Metaspace(prepend_scheme "always", split true),
                     ignore_merges, and no byte tokens for 0xF0-0xF4 (4-byte characters become
                     one fused <unk>, as fuse_unk says)

Each *_ids.jsonl row: {"text", "ids"[, "ids_special"][, "decoded_hex"][, "add_bos"]}, where ids
treat special-token text as plain text, ids_special parse it (only for texts holding an added
token's text), and decoded_hex is tokenizer.decode(ids) when it is not the text.

Usage: python3 make_hf_tokenizer_golden.py   (needs `tokenizers`; tested with 0.23.3)
"""
import json
import os
import sys

from tokenizers import Regex, Tokenizer, decoders, normalizers, pre_tokenizers, processors
from tokenizers.models import BPE
from tokenizers.trainers import BpeTrainer

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from make_tokenizer_golden import HERE, build_corpus, write_jsonl  # noqa: E402

QWEN2_SPLIT_REGEX = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}|"
                     r" ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+")

# Strings that exercise the SentencePiece-style shapes: the space prefix around added tokens,
# literal U+2581, tabs (Gemma has "\t" as a token), and the user-defined added tokens.
EXTRA = [
    "<s>hello", "hello<s>world", " <s> x", "</s>", "<s></s>", "<unk>", "a<unk>b",
    "<bos>hi", "<start_of_turn>user\nhi<end_of_turn>\n<start_of_turn>model\n", "x<eos>",
    "▁", "▁▁▁▁", "x▁▁▁▁y", "▁hello ▁world", " ▁x", "<table>cell</table>", "a<table>",
    "\ttab", "a\tb\t", " leading", "  two leading", "<|im_start|>system\nYou are Qwen.<|im_end|>",
]


def train(corpus, tok, vocab_size, **trainer_args):
    trainer = BpeTrainer(vocab_size=vocab_size, min_frequency=2, show_progress=False,
                         **trainer_args)
    tok.train_from_iterator([t for t in corpus if "<" not in t] * 3, trainer=trainer)
    return json.loads(tok.to_str())


def added(token_id, content, special):
    return {"id": token_id, "content": content, "single_word": False, "lstrip": False,
            "rstrip": False, "normalized": False, "special": special}


def bos_template(bos, bos_id):
    return json.loads(processors.TemplateProcessing(
        single=f"{bos} $A", pair=f"{bos} $A {bos} $B",
        special_tokens=[(bos, bos_id)]).__getstate__())


def spm_json(trained, specials, user_defined, tab_token, skip_bytes=()):
    """A SentencePiece-converted tokenizer.json: specials, <0xHH> bytes, then trained pieces."""
    vocab = {}
    for content in specials:
        vocab[content] = len(vocab)
    first_byte = len(vocab)
    for byte in range(256):
        piece = "\t" if (tab_token and byte == 9) else f"<0x{byte:02X}>"
        if byte not in skip_bytes:
            vocab[piece] = first_byte + byte  # missing bytes leave holes, as edited vocabs can
    next_id = first_byte + 256
    for piece in user_defined:
        vocab[piece] = next_id
        next_id += 1
    for piece, _ in sorted(trained["model"]["vocab"].items(), key=lambda kv: kv[1]):
        if piece not in vocab:
            vocab[piece] = next_id
            next_id += 1
    merges = [m for m in trained["model"]["merges"]
              if all(side in vocab for side in m) and "".join(m) in vocab]
    added_tokens = [added(vocab[c], c, True) for c in specials]
    added_tokens += [added(vocab[c], c, False) for c in user_defined]
    model = {"type": "BPE", "dropout": None, "unk_token": "<unk>",
             "continuing_subword_prefix": None, "end_of_word_suffix": None, "fuse_unk": True,
             "byte_fallback": True, "ignore_merges": False, "vocab": vocab, "merges": merges}
    return {"version": "1.0", "truncation": None, "padding": None, "added_tokens": added_tokens,
            "normalizer": None, "pre_tokenizer": None, "post_processor": None, "decoder": None,
            "model": model}


def replace(pattern, content):
    return {"type": "Replace", "pattern": {"String": pattern}, "content": content}


SPM_DECODER = [replace("▁", " "), {"type": "ByteFallback"}, {"type": "Fuse"}]
STRIP = {"type": "Strip", "content": " ", "start": 1, "stop": 0}


def gemma(corpus):
    tok = Tokenizer(BPE(unk_token="<unk>", byte_fallback=True, fuse_unk=True))
    tok.normalizer = normalizers.Replace(" ", "▁")
    trained = train(corpus, tok, 700, limit_alphabet=150)
    data = spm_json(trained, ["<pad>", "<eos>", "<bos>", "<unk>", "<mask>", "<start_of_turn>",
                              "<end_of_turn>"], ["<table>", "</table>", "▁▁▁▁"], tab_token=True)
    data["normalizer"] = replace(" ", "▁")
    data["pre_tokenizer"] = {"type": "Split", "pattern": {"String": " "},
                             "behavior": "MergedWithPrevious", "invert": False}
    data["decoder"] = {"type": "Sequence", "decoders": SPM_DECODER}
    data["post_processor"] = bos_template("<bos>", data["model"]["vocab"]["<bos>"])
    return data


def llama2_family(corpus):
    tok = Tokenizer(BPE(unk_token="<unk>", byte_fallback=True, fuse_unk=True))
    tok.normalizer = normalizers.Sequence([normalizers.Prepend("▁"),
                                           normalizers.Replace(" ", "▁")])
    trained = train(corpus, tok, 700, limit_alphabet=150)
    specials = ["<unk>", "<s>", "</s>"]

    legacy = spm_json(trained, specials, [], tab_token=False)
    legacy["normalizer"] = {"type": "Sequence", "normalizers": [
        {"type": "Prepend", "prepend": "▁"}, replace(" ", "▁")]}
    legacy["decoder"] = {"type": "Sequence", "decoders": SPM_DECODER + [STRIP]}
    legacy["post_processor"] = bos_template("<s>", 1)

    mistral = json.loads(json.dumps(legacy))
    mistral["normalizer"] = None
    mistral["pre_tokenizer"] = {"type": "Metaspace", "replacement": "▁",
                                "prepend_scheme": "first", "split": False}

    split = spm_json(trained, specials, [], tab_token=False, skip_bytes=range(0xF0, 0xF5))
    split["model"]["ignore_merges"] = True
    split["pre_tokenizer"] = {"type": "Metaspace", "replacement": "▁",
                              "prepend_scheme": "always", "split": True}
    split["decoder"] = {"type": "Sequence", "decoders": SPM_DECODER + [STRIP]}
    return {"llama2": legacy, "mistral": mistral, "spmsplit": split}


def qwen2(corpus):
    tok = Tokenizer(BPE())
    tok.normalizer = normalizers.NFC()
    tok.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(QWEN2_SPLIT_REGEX), behavior="isolated", invert=False),
        pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)])
    tok.decoder = decoders.ByteLevel()
    trained = train(corpus, tok, 256 + 3 + 400,
                    special_tokens=["<|endoftext|>", "<|im_start|>", "<|im_end|>"],
                    initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    trained["post_processor"] = json.loads(
        processors.ByteLevel(trim_offsets=False).__getstate__())
    return trained


def golden_rows(tok, data, corpus):
    contents = [a["content"] for a in data["added_tokens"]]
    rows = []
    for text in corpus:
        tok.encode_special_tokens = True
        row = {"text": text, "ids": tok.encode(text, add_special_tokens=False).ids}
        if any(c in text for c in contents):
            tok.encode_special_tokens = False
            row["ids_special"] = tok.encode(text, add_special_tokens=False).ids
        decoded = tok.decode(row["ids"], skip_special_tokens=False)
        if decoded != text:
            row["decoded_hex"] = decoded.encode("utf-8").hex()
        rows.append(row)
    tok.encode_special_tokens = False
    if data.get("post_processor", {}) and data["post_processor"]["type"] == "TemplateProcessing":
        rows.append({"text": "hello world", "ids": tok.encode("hello world").ids,
                     "add_bos": True})
    return rows


def save(name, data, corpus):
    path = os.path.join(HERE, f"tiny_{name}_tokenizer.json")
    text = json.dumps(data, ensure_ascii=False, indent=1)
    tok = Tokenizer.from_str(text)  # HF must accept it exactly as written
    with open(path, "w", encoding="utf-8") as f:
        f.write(text)
    print(f"wrote {path} ({os.path.getsize(path)} bytes)")
    rows = golden_rows(tok, data, corpus)
    write_jsonl(os.path.join(HERE, f"tiny_{name}_ids.jsonl"), rows)
    byte_ids = {v for k, v in data["model"]["vocab"].items() if k.startswith("<0x")}
    fallback = sum(1 for r in rows if byte_ids & set(r["ids"]))
    print(f"  {fallback} rows use byte fallback, "
          f"{sum(1 for r in rows if 'decoded_hex' in r)} decode to other text")


def main():
    corpus = build_corpus()
    corpus += [t for t in EXTRA if t not in corpus]
    print(f"corpus: {len(corpus)} strings")
    save("qwen2", qwen2(corpus), corpus)
    save("gemma", gemma(corpus), corpus)
    for name, data in llama2_family(corpus).items():
        save(name, data, corpus)


if __name__ == "__main__":
    main()
