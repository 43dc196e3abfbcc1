#!/usr/bin/env python3
"""Peer benchmark: constrained-decoding overhead of XGrammar and llguidance on SmolLM2's vocab.

For every case of tests/structured/corpus.json this measures, per engine:
  * compile_ms: cold grammar compilation (a fresh compiler, no cache) for the case;
  * the per-token cost of walking the case's `example` token by token: mask fill
    (xgrammar GrammarMatcher.fill_next_token_bitmask / llguidance fill_next_token_bitmask
    into a (1, ceil(49152/32)) int32 bitmask) and accept (accept_token / consume_token),
    then the final mask (must allow EOS) and the EOS accept.
Timings are wall-clock around the Python binding calls (perf_counter_ns), so every
number includes ~0.1-1 us of Python/FFI call overhead.

The tokenizer is rebuilt from the GGUF (tokenizer.ggml.tokens / token_type / merges); no
HF hub access. The walk is the byte-level BPE tokenization of `example` (SmolLM2's
pre-tokenizer: single digits, then the GPT-2 split regex); it is written to --walk_out so
the C++ benchmark replays exactly the same ids.

Run it in the venv that has xgrammar, llguidance, gguf, numpy (and optionally regex):
  ~/.cache/tpserve/venv-structured/bin/python bench/structured_peer_bench.py \
      --out /tmp/peer.json --walk_out tests/structured/walks.json

xgrammar 0.2.8's Python package imports torch and transformers at import time but the
matcher itself only needs a DLPack array. When they are not installed this script puts
minimal stand-in modules for them in sys.modules (after importing tvm_ffi, which must see
the real, absent torch) and uses numpy bitmasks. That is reported in the output's meta.
"""

import argparse
import importlib.machinery
import json
import math
import os
import platform
import statistics
import sys
import time
import types

import numpy as np

DEFAULT_GGUF = os.path.expanduser("~/.cache/tpserve/SmolLM2-135M-Instruct.Q4_1.gguf")
REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DEFAULT_CORPUS = os.path.join(REPO_ROOT, "tests", "structured", "corpus.json")

TOKEN_TYPE_CONTROL = 3  # llama.cpp LLAMA_TOKEN_TYPE_CONTROL
TOKEN_TYPE_USER_DEFINED = 4


# ---------------------------------------------------------------------------------------
# GGUF vocabulary and a byte-level BPE encoder
# ---------------------------------------------------------------------------------------

def bytes_to_unicode():
    """GPT-2's byte -> printable unicode char table."""
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) + \
        list(range(ord("®"), ord("ÿ") + 1))
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return dict(zip(bs, (chr(c) for c in cs)))


BYTE_TO_UNICODE = bytes_to_unicode()
UNICODE_TO_BYTE = {v: k for k, v in BYTE_TO_UNICODE.items()}


class GgufVocab:
    def __init__(self, path):
        import gguf
        r = gguf.GGUFReader(path)
        f = r.fields
        self.path = path
        self.tokens = list(f["tokenizer.ggml.tokens"].contents())
        self.token_types = [int(t) for t in f["tokenizer.ggml.token_type"].contents()]
        self.merges = list(f["tokenizer.ggml.merges"].contents())
        self.eos_id = int(f["tokenizer.ggml.eos_token_id"].contents())
        self.bos_id = int(f["tokenizer.ggml.bos_token_id"].contents()) \
            if "tokenizer.ggml.bos_token_id" in f else None
        self.pre = f["tokenizer.ggml.pre"].contents() if "tokenizer.ggml.pre" in f else None
        self.model = f["tokenizer.ggml.model"].contents()
        self.vocab_size = len(self.tokens)
        self.special_ids = [i for i, t in enumerate(self.token_types)
                            if t in (TOKEN_TYPE_CONTROL, TOKEN_TYPE_USER_DEFINED)]

    def token_bytes(self, i):
        """Decoded bytes of a normal token (GPT-2 byte-to-unicode undone)."""
        return bytes(UNICODE_TO_BYTE[c] for c in self.tokens[i])


class ByteLevelBpe:
    """Minimal GPT-2-style BPE encoder driven by the GGUF merges (SmolLM2 pre-tokenizer)."""

    def __init__(self, vocab: GgufVocab):
        self.vocab = vocab
        self.ranks = {tuple(m.split(" ", 1)): i for i, m in enumerate(vocab.merges)}
        self.ids = {t: i for i, t in enumerate(vocab.tokens)
                    if vocab.token_types[i] not in (TOKEN_TYPE_CONTROL,)}
        self.cache = {}
        try:
            import regex  # \p{L} / \p{N} as in the HF / llama.cpp pre-tokenizer
            self.digits = regex.compile(r"\p{N}")
            self.split = regex.compile(
                r"""'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+""")
            self.pretok = "regex"
        except ImportError:  # close ASCII approximation with the stdlib
            import re
            self.digits = re.compile(r"\d")
            self.split = re.compile(
                r"""'s|'t|'re|'ve|'m|'ll|'d| ?[^\W\d_]+| ?\d+| ?[^\s\w]+|\s+(?!\S)|\s+|_+""")
            self.pretok = "re-approx"

    def _pieces(self, text):
        # smollm: Digits(individual_digits=True) then ByteLevel(use_regex=True)
        out, pos = [], 0
        for m in self.digits.finditer(text):
            if m.start() > pos:
                out.append(text[pos:m.start()])
            out.append(m.group(0))
            pos = m.end()
        if pos < len(text):
            out.append(text[pos:])
        words = []
        for chunk in out:
            words.extend(self.split.findall(chunk))
        return words

    def _bpe(self, word):
        if word in self.cache:
            return self.cache[word]
        parts = list(word)
        while len(parts) > 1:
            best, best_rank = None, None
            for i in range(len(parts) - 1):
                r = self.ranks.get((parts[i], parts[i + 1]))
                if r is not None and (best_rank is None or r < best_rank):
                    best, best_rank = i, r
            if best is None:
                break
            parts[best:best + 2] = [parts[best] + parts[best + 1]]
        ids = [self.ids[p] for p in parts]
        self.cache[word] = ids
        return ids

    def encode(self, text):
        ids = []
        for w in self._pieces(text):
            mapped = "".join(BYTE_TO_UNICODE[b] for b in w.encode("utf-8"))
            ids.extend(self._bpe(mapped))
        return ids

    def decode(self, ids):
        return b"".join(self.vocab.token_bytes(i) for i in ids).decode("utf-8", "replace")


# ---------------------------------------------------------------------------------------
# Engines
# ---------------------------------------------------------------------------------------

def _stub_module(name):
    m = types.ModuleType(name)
    m.__spec__ = importlib.machinery.ModuleSpec(name, None)
    m.__tpserve_stub__ = True

    class _Dummy:
        def __init__(self, *a, **k):
            pass

    def __getattr__(attr):
        if attr.startswith("__"):
            raise AttributeError(attr)
        return type(attr, (_Dummy,), {})

    m.__getattr__ = __getattr__
    sys.modules[name] = m


def import_xgrammar():
    """Import xgrammar; stand in for torch/transformers if they are absent. Returns (mod, stubs)."""
    stubs = []
    import tvm_ffi  # noqa: F401  must import before any torch stand-in exists
    for name in ("torch", "transformers"):
        try:
            __import__(name)
        except ImportError:
            _stub_module(name)
            stubs.append(name)
    import xgrammar
    return xgrammar, stubs


def choice_to_ebnf(choices):
    # json.dumps gives a double-quoted literal with \" and \\ escapes, which the EBNF accepts.
    return "root ::= " + " | ".join(json.dumps(c) for c in choices) + "\n"


class XGrammarEngine:
    name = "xgrammar"

    def __init__(self, vocab: GgufVocab, threads: int):
        self.xgr, self.stubs = import_xgrammar()
        try:
            from importlib.metadata import version
            self.version = version("xgrammar")
        except Exception:
            self.version = getattr(self.xgr, "__version__", "?")
        self.threads = threads
        # Control tokens other than EOS are passed as "" so that XGrammar treats them as special
        # (it only recognises empty strings as special; "<|im_start|>" would otherwise be matched
        # as the literal text and be allowed inside e.g. JSON strings).
        enc = [("" if (vocab.token_types[i] == TOKEN_TYPE_CONTROL and i != vocab.eos_id) else t)
               for i, t in enumerate(vocab.tokens)]
        t0 = time.perf_counter()
        self.info = self.xgr.TokenizerInfo(enc, vocab_type=self.xgr.VocabType.BYTE_LEVEL,
                                           vocab_size=vocab.vocab_size,
                                           stop_token_ids=[vocab.eos_id])
        self.tokenizer_info_ms = (time.perf_counter() - t0) * 1e3
        self.vocab_size = vocab.vocab_size
        self.bitmask = np.full((1, (vocab.vocab_size + 31) // 32), -1, dtype=np.int32)

    def compile(self, case):
        """Cold compile; returns (handle, ms)."""
        compiler = self.xgr.GrammarCompiler(self.info, max_threads=self.threads,
                                            cache_enabled=False)
        kind, c = case["kind"], case["constraint"]
        t0 = time.perf_counter_ns()
        if kind == "json_schema":
            g = compiler.compile_json_schema(json.dumps(c))  # any_whitespace, strict_mode: defaults
        elif kind == "json_object":
            g = compiler.compile_builtin_json_grammar()
        elif kind == "regex":
            g = compiler.compile_regex(c)
        elif kind == "grammar":
            g = compiler.compile_grammar(c)
        elif kind == "choice":
            g = compiler.compile_grammar(choice_to_ebnf(c))
        else:
            raise ValueError(kind)
        ms = (time.perf_counter_ns() - t0) / 1e6
        return g, ms

    def matcher(self, compiled):
        return XGrammarMatcher(self.xgr.GrammarMatcher(compiled), self.bitmask)


class XGrammarMatcher:
    def __init__(self, m, bitmask):
        self.m, self.bm = m, bitmask

    def fill(self):
        self.m.fill_next_token_bitmask(self.bm, 0)
        return self.bm[0]

    def accept(self, tok):
        return self.m.accept_token(tok)

    def is_terminated(self):
        return self.m.is_terminated()


class GgufTokenizerForLl:
    """The object llguidance.TokenizerWrapper expects (tokens as bytes; 0xFF marks special)."""

    def __init__(self, vocab: GgufVocab, bpe: ByteLevelBpe):
        self.eos_token_id = vocab.eos_id
        self.bos_token_id = vocab.bos_id
        toks = []
        for i, t in enumerate(vocab.tokens):
            if vocab.token_types[i] in (TOKEN_TYPE_CONTROL, TOKEN_TYPE_USER_DEFINED):
                toks.append(b"\xff" + t.encode("utf-8"))
            else:
                toks.append(vocab.token_bytes(i))
        self.tokens = toks
        self.special_token_ids = vocab.special_ids
        self._bpe = bpe

    def __call__(self, s):
        if isinstance(s, bytes):
            s = s.decode("utf-8", errors="replace")
        return self._bpe.encode(s)


class LlguidanceEngine:
    name = "llguidance"

    def __init__(self, vocab: GgufVocab, bpe: ByteLevelBpe):
        import llguidance
        import llguidance.numpy as llnp
        self.ll, self.llnp = llguidance, llnp
        self.version = "?"
        try:
            from importlib.metadata import version
            self.version = version("llguidance")
        except Exception:
            pass
        self.stubs = []
        t0 = time.perf_counter()
        self.tok = llguidance.LLTokenizer(llguidance.TokenizerWrapper(GgufTokenizerForLl(vocab, bpe)),
                                          n_vocab=vocab.vocab_size, eos_token=vocab.eos_id)
        self.tokenizer_info_ms = (time.perf_counter() - t0) * 1e3
        self.bitmask = llnp.allocate_token_bitmask(1, vocab.vocab_size)

    def grammar_text(self, case):
        kind, c = case["kind"], case["constraint"]
        M = self.ll.LLMatcher
        if kind == "json_schema":
            return M.grammar_from_json_schema(json.dumps(c))
        if kind == "json_object":
            return M.grammar_from_json_schema('{"type": "object"}')
        if kind == "regex":
            return M.grammar_from_regex(c)
        if kind == "grammar":
            return self.ll.grammar_from("gbnf", c)
        if kind == "choice":
            return self.ll.grammar_from("choice", json.dumps(c))
        raise ValueError(kind)

    def compile(self, case):
        # llguidance has no separate compile step: grammar construction happens in the LLMatcher
        # constructor (lexer/token-trie work is lazy and shows up in the first masks).
        t0 = time.perf_counter_ns()
        g = self.grammar_text(case)
        m = self.ll.LLMatcher(self.tok, g, log_level=0)
        ms = (time.perf_counter_ns() - t0) / 1e6
        if m.is_error():
            raise RuntimeError(m.get_error())
        return [g, m], ms

    def matcher(self, compiled):
        # The first walk uses the matcher built (and timed) by compile(); later walks of the
        # same compiled case build a fresh one from the grammar text.
        g, m = compiled
        compiled[1] = None
        if m is None:
            m = self.ll.LLMatcher(self.tok, g, log_level=0)
        return LlguidanceMatcher(m, self.llnp, self.bitmask)


class LlguidanceMatcher:
    def __init__(self, m, llnp, bitmask):
        self.m, self.llnp, self.bm = m, llnp, bitmask

    def fill(self):
        self.llnp.fill_next_token_bitmask(self.m, self.bm, 0)
        return self.bm[0]

    def accept(self, tok):
        return self.m.consume_token(tok)

    def is_terminated(self):
        return self.m.is_stopped() or self.m.is_accepting()

    def error(self):
        return self.m.get_error() if self.m.is_error() else None


def bit_allowed(row, tok):
    return bool((int(row[tok >> 5]) >> (tok & 31)) & 1)


# ---------------------------------------------------------------------------------------
# Walks
# ---------------------------------------------------------------------------------------

def greedy_walk(engine, compiled, vocab, text):
    """Longest vocab token that prefixes the remaining bytes and that the matcher allows."""
    data = text.encode("utf-8")
    by_first = {}
    for i in range(vocab.vocab_size):
        if vocab.token_types[i] == TOKEN_TYPE_CONTROL:
            continue
        b = vocab.token_bytes(i)
        if b:
            by_first.setdefault(b[0], []).append((len(b), b, i))
    for lst in by_first.values():
        lst.sort(reverse=True)
    m = engine.matcher(compiled)
    ids, pos = [], 0
    while pos < len(data):
        row = m.fill()
        for _, b, i in by_first.get(data[pos], []):
            if data.startswith(b, pos) and bit_allowed(row, i):
                break
        else:
            raise RuntimeError(f"greedy walk stuck at byte {pos} of {text!r}")
        if not m.accept(i):
            raise RuntimeError(f"greedy walk: token {i} rejected")
        ids.append(i)
        pos += len(b)
    return ids


def walk(engine, compiled, tokens, eos_id, timings=True):
    """Walk tokens then EOS. Returns dict with per-step mask/accept ns and any failure."""
    m = engine.matcher(compiled)
    mask_ns, accept_ns = [], []
    pc = time.perf_counter_ns
    for step, tok in enumerate(tokens + [eos_id]):
        t0 = pc()
        row = m.fill()
        t1 = pc()
        if not bit_allowed(row, tok):
            what = "EOS" if step == len(tokens) else f"token {tok}"
            return {"ok": False, "error": f"step {step}: mask forbids {what}",
                    "mask_ns": mask_ns, "accept_ns": accept_ns}
        t2 = pc()
        ok = m.accept(tok)
        t3 = pc()
        mask_ns.append(t1 - t0)
        accept_ns.append(t3 - t2)
        if not ok:
            return {"ok": False, "error": f"step {step}: accept({tok}) failed",
                    "mask_ns": mask_ns, "accept_ns": accept_ns}
    return {"ok": True, "terminated": bool(m.is_terminated()), "mask_ns": mask_ns,
            "accept_ns": accept_ns}


def pct(values, q):
    if not values:
        return None
    s = sorted(values)
    k = max(0, min(len(s) - 1, int(math.ceil(q / 100.0 * len(s))) - 1))
    return s[k]


def summarize_ns(values):
    if not values:
        return {"n": 0}
    return {"n": len(values), "p50_us": round(pct(values, 50) / 1e3, 2),
            "p99_us": round(pct(values, 99) / 1e3, 2),
            "mean_us": round(statistics.fmean(values) / 1e3, 2),
            "max_us": round(max(values) / 1e3, 2)}


# ---------------------------------------------------------------------------------------

def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--gguf", default=DEFAULT_GGUF)
    ap.add_argument("--corpus", default=DEFAULT_CORPUS)
    ap.add_argument("--out", default="-", help="JSON results (default stdout)")
    ap.add_argument("--walk_out", default=None, help="write the token walks here (JSON)")
    ap.add_argument("--engines", default="xgrammar,llguidance")
    ap.add_argument("--cases", default="", help="comma-separated case names (default all)")
    ap.add_argument("--reps", type=int, default=3,
                    help="walks per case (masks of all walks are pooled; compile is timed once "
                         "per rep with a fresh compiler and the min is also reported)")
    ap.add_argument("--threads", type=int, default=1,
                    help="xgrammar GrammarCompiler max_threads (default 1: cold single-core)")
    args = ap.parse_args()

    with open(args.corpus) as f:
        corpus = json.load(f)
    if args.cases:
        want = set(args.cases.split(","))
        corpus = [c for c in corpus if c["name"] in want]

    vocab = GgufVocab(args.gguf)
    bpe = ByteLevelBpe(vocab)

    engines = []
    for name in args.engines.split(","):
        name = name.strip()
        if name == "xgrammar":
            engines.append(XGrammarEngine(vocab, args.threads))
        elif name == "llguidance":
            engines.append(LlguidanceEngine(vocab, bpe))
        elif name:
            sys.exit(f"unknown engine {name}")

    # ---- token walks: BPE of the example, checked against every engine (greedy fallback).
    walks = []
    for case in corpus:
        ids = bpe.encode(case["example"])
        method = "bpe"
        assert bpe.decode(ids) == case["example"], case["name"]
        for e in engines:
            try:
                g, _ = e.compile(case)
                r = walk(e, g, ids, vocab.eos_id)
                if not r["ok"]:
                    print(f"[walk] {case['name']}: BPE walk rejected by {e.name} ({r['error']}); "
                          "trying a greedy walk", file=sys.stderr)
                    ids = greedy_walk(e, g, vocab, case["example"])
                    method = "greedy"
            except Exception as ex:  # reported again, per engine, in the measurements
                print(f"[walk] {case['name']}: {e.name}: {type(ex).__name__}: {ex}; "
                      "keeping the BPE walk", file=sys.stderr)
                ids, method = bpe.encode(case["example"]), "bpe-rejected"
        walks.append({"name": case["name"], "kind": case["kind"], "tokenization": method,
                      "tokens": ids})
    walk_by_name = {w["name"]: w for w in walks}

    # ---- measurements
    results = {}
    for e in engines:
        per_case, all_mask, all_accept, all_compile = {}, [], [], []
        for case in corpus:
            ids = walk_by_name[case["name"]]["tokens"]
            rec = {"kind": case["kind"], "n_steps": len(ids) + 1}
            try:
                compile_ms, mask_ns, accept_ns, first_mask = [], [], [], None
                ok, err, term = True, None, True
                for rep in range(args.reps):
                    g, ms = e.compile(case)
                    compile_ms.append(ms)
                    r = walk(e, g, ids, vocab.eos_id)
                    if rep == 0 and r["mask_ns"]:
                        first_mask = r["mask_ns"][0]
                    mask_ns += r["mask_ns"]
                    accept_ns += r["accept_ns"]
                    ok = ok and r["ok"]
                    term = term and r.get("terminated", False)
                    err = err or r.get("error")
                rec.update({
                    "ok": ok, "terminated_after_eos": term,
                    "compile_ms": round(compile_ms[0], 3),
                    "compile_ms_min": round(min(compile_ms), 3),
                    "first_mask_us": round(first_mask / 1e3, 2) if first_mask else None,
                    "mask": summarize_ns(mask_ns), "accept": summarize_ns(accept_ns)})
                if err:
                    rec["error"] = err
                all_mask += mask_ns
                all_accept += accept_ns
                all_compile.append(compile_ms[0])
            except Exception as ex:  # a compile error is a result, not a crash
                rec.update({"ok": False, "error": f"{type(ex).__name__}: {ex}".strip()[:500]})
            per_case[case["name"]] = rec
        results[e.name] = {
            "version": e.version,
            "tokenizer_setup_ms": round(e.tokenizer_info_ms, 1),
            "stand_in_modules": e.stubs,
            "cases": per_case,
            "overall": {
                "cases_ok": sum(1 for r in per_case.values() if r.get("ok")),
                "cases": len(per_case),
                "compile_ms_p50": round(statistics.median(all_compile), 3) if all_compile else None,
                "compile_ms_max": round(max(all_compile), 3) if all_compile else None,
                "compile_ms_sum": round(sum(all_compile), 3) if all_compile else None,
                "mask": summarize_ns(all_mask), "accept": summarize_ns(all_accept)},
        }

    out = {
        "meta": {
            "gguf": os.path.basename(args.gguf), "vocab_size": vocab.vocab_size,
            "eos_id": vocab.eos_id, "pre_tokenizer": vocab.pre, "bpe_pretok_impl": bpe.pretok,
            "reps": args.reps, "xgrammar_max_threads": args.threads,
            "python": platform.python_version(), "machine": platform.machine(),
            "cpu_count": os.cpu_count(), "timer": "perf_counter_ns around Python binding calls",
            "xgrammar_options": "compile_json_schema defaults: any_whitespace=True, "
                                "strict_mode=True, any_order=False",
            "llguidance_options": "grammar_from_json_schema defaults (whitespace_flexible=True)",
        },
        "engines": results,
    }
    if args.walk_out:
        with open(args.walk_out, "w") as f:
            json.dump({"gguf": os.path.basename(args.gguf), "vocab_size": vocab.vocab_size,
                       "eos_id": vocab.eos_id,
                       "note": "tokens = byte-level BPE of each corpus example (GGUF merges, "
                               "smollm pre-tokenizer); after them the matcher must allow and "
                               "accept eos_id",
                       "cases": walks}, f, separators=(",", ":"))
            f.write("\n")
    text = json.dumps(out, indent=1)
    if args.out == "-":
        print(text)
    else:
        with open(args.out, "w") as f:
            f.write(text + "\n")

    # ---- markdown summary on stderr
    names = [c["name"] for c in corpus]
    hdr = "| case | kind | steps |"
    sep = "|---|---|---:|"
    for e in engines:
        hdr += f" {e.name} compile ms | {e.name} mask p50/p99 us |"
        sep += "---:|---:|"
    lines = [hdr, sep]
    for n in names:
        c0 = results[engines[0].name]["cases"][n]
        row = f"| {n} | {c0['kind']} | {c0['n_steps']} |"
        for e in engines:
            r = results[e.name]["cases"][n]
            if "mask" in r:
                flag = "" if r["ok"] else " FAIL"
                row += f" {r['compile_ms']:.2f}{flag} | {r['mask']['p50_us']:.1f} / {r['mask']['p99_us']:.1f} |"
            else:
                row += " ERR | - |"
        lines.append(row)
    row = "| **overall** | | |"
    for e in engines:
        o = results[e.name]["overall"]
        row += (f" p50 {o['compile_ms_p50']} / max {o['compile_ms_max']} |"
                f" {o['mask'].get('p50_us')} / {o['mask'].get('p99_us')} |")
    lines.append(row)
    print("\n".join(lines), file=sys.stderr)
    for e in engines:
        o = results[e.name]["overall"]
        print(f"{e.name} {results[e.name]['version']}: {o['cases_ok']}/{o['cases']} cases ok; "
              f"accept p50 {o['accept'].get('p50_us')} us p99 {o['accept'].get('p99_us')} us; "
              f"tokenizer setup {results[e.name]['tokenizer_setup_ms']} ms", file=sys.stderr)
        for n in names:
            r = results[e.name]["cases"][n]
            if not r.get("ok"):
                print(f"  {e.name} {n}: {r.get('error')}", file=sys.stderr)


if __name__ == "__main__":
    main()
