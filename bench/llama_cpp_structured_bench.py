#!/usr/bin/env python3
"""llama.cpp peer: greedy decode tok/s with and without a JSON-schema grammar (SmolLM2 GGUF).

For every json_schema case of tests/structured/corpus.json: the case's prompt in SmolLM2's
ChatML template (with the GGUF template's default system message, as tpserve renders it),
greedy decoding of at most --max_tokens tokens on --threads threads, once unconstrained and
once with LlamaGrammar.from_json_schema(schema) (llama-cpp-python's schema -> GBNF converter
and llama.cpp's grammar sampler). Reports decode tok/s both ways (tokens after the first,
over the time after the first token, so prefill is excluded), the grammar build time, and
whether the constrained output parses and validates (jsonschema, with format checking).

It also checks that tests/structured/walks.json (our BPE of each example) equals llama.cpp's
own tokenization of the example.

  ~/.cache/tpserve/venv-structured/bin/python bench/llama_cpp_structured_bench.py --out /tmp/l.json
"""

import argparse
import json
import os
import platform
import re
import statistics
import sys
import time

DEFAULT_GGUF = os.path.expanduser("~/.cache/tpserve/SmolLM2-135M-Instruct.Q4_1.gguf")
REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DEFAULT_CORPUS = os.path.join(REPO_ROOT, "tests", "structured", "corpus.json")
DEFAULT_WALKS = os.path.join(REPO_ROOT, "tests", "structured", "walks.json")


def default_system_message(template):
    m = re.search(r"<\|im_start\|>system\n(.*?)<\|im_end\|>", template or "", re.S)
    return m.group(1) if m else None


def render_chatml(user, system):
    s = ""
    if system is not None:
        s += f"<|im_start|>system\n{system}<|im_end|>\n"
    return s + f"<|im_start|>user\n{user}<|im_end|>\n<|im_start|>assistant\n"


def run_once(llm, prompt_ids, max_tokens, grammar):
    llm.reset()
    eos = llm.token_eos()
    out, times = [], []
    t0 = time.perf_counter()
    for tok in llm.generate(prompt_ids, temp=0.0, top_k=1, repeat_penalty=1.0, reset=True,
                            grammar=grammar):
        times.append(time.perf_counter())
        if tok == eos:
            break
        out.append(tok)
        if len(out) >= max_tokens:
            break
    n = len(times)  # sampled tokens, EOS included
    decode_s = times[-1] - times[0] if n > 1 else 0.0
    return {
        "text": llm.detokenize(out).decode("utf-8", "replace"),
        "n_tokens": len(out),
        "hit_eos": len(out) < max_tokens,
        "first_token_ms": round((times[0] - t0) * 1e3, 2) if times else None,
        "decode_tok_s": round((n - 1) / decode_s, 1) if decode_s > 0 else None,
        "decode_ms_per_tok": round(decode_s / (n - 1) * 1e3, 3) if n > 1 else None,
    }


def validate(text, schema):
    import jsonschema
    try:
        value = json.loads(text)
    except ValueError as e:
        return False, f"not JSON: {e}"
    v = jsonschema.Draft202012Validator(schema, format_checker=jsonschema.FormatChecker())
    errs = [f"{list(e.path)}: {e.message}" for e in v.iter_errors(value)]
    return (not errs), ("; ".join(errs)[:300] if errs else None)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--gguf", default=DEFAULT_GGUF)
    ap.add_argument("--corpus", default=DEFAULT_CORPUS)
    ap.add_argument("--walks", default=DEFAULT_WALKS)
    ap.add_argument("--out", default="-")
    ap.add_argument("--cases", default="")
    ap.add_argument("--max_tokens", type=int, default=64)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--n_ctx", type=int, default=1024)
    ap.add_argument("--reps", type=int, default=1, help="runs per mode; the best tok/s is kept")
    args = ap.parse_args()

    import llama_cpp
    from llama_cpp import Llama, LlamaGrammar

    with open(args.corpus) as f:
        corpus = json.load(f)
    llm = Llama(model_path=args.gguf, n_ctx=args.n_ctx, n_threads=args.threads,
                n_threads_batch=args.threads, seed=0, verbose=False)
    system = default_system_message(llm.metadata.get("tokenizer.chat_template"))

    # --- our walks vs llama.cpp's tokenizer
    walk_check = {"checked": 0, "mismatches": []}
    if os.path.exists(args.walks):
        with open(args.walks) as f:
            walks = {w["name"]: w["tokens"] for w in json.load(f)["cases"]}
        for c in corpus:
            if c["name"] in walks:
                ref = llm.tokenize(c["example"].encode(), add_bos=False, special=False)
                walk_check["checked"] += 1
                if ref != walks[c["name"]]:
                    walk_check["mismatches"].append(
                        {"name": c["name"], "ours": walks[c["name"]], "llama_cpp": ref})

    cases = [c for c in corpus if c["kind"] == "json_schema"]
    if args.cases:
        want = set(args.cases.split(","))
        cases = [c for c in cases if c["name"] in want]

    results = {}
    for c in cases:
        prompt_ids = llm.tokenize(render_chatml(c["prompt"], system).encode(), add_bos=False,
                                  special=True)
        rec = {"prompt_tokens": len(prompt_ids)}
        try:
            t0 = time.perf_counter()
            grammar = LlamaGrammar.from_json_schema(json.dumps(c["constraint"]), verbose=False)
            rec["grammar_build_ms"] = round((time.perf_counter() - t0) * 1e3, 2)
        except Exception as e:
            rec["grammar_error"] = f"{type(e).__name__}: {e}"[:300]
            grammar = None
        for mode, g in (("unconstrained", None), ("constrained", grammar)):
            if mode == "constrained" and g is None:
                continue
            best = None
            for _ in range(args.reps):
                try:
                    r = run_once(llm, prompt_ids, args.max_tokens, g)
                except Exception as e:
                    r = {"error": f"{type(e).__name__}: {e}"[:300]}
                if best is None or (r.get("decode_tok_s") or 0) > (best.get("decode_tok_s") or 0):
                    best = r
            if "text" in best:
                ok, why = validate(best["text"], c["constraint"])
                best["valid"] = ok
                if why:
                    best["invalid_reason"] = why
            rec[mode] = best
        u, k = rec.get("unconstrained", {}), rec.get("constrained", {})
        if u.get("decode_ms_per_tok") and k.get("decode_ms_per_tok"):
            rec["overhead_ms_per_tok"] = round(k["decode_ms_per_tok"] - u["decode_ms_per_tok"], 3)
            rec["slowdown"] = round(k["decode_ms_per_tok"] / u["decode_ms_per_tok"], 2)
        results[c["name"]] = rec
        print(f"[llama.cpp] {c['name']}: unconstrained {u.get('decode_tok_s')} tok/s, "
              f"constrained {k.get('decode_tok_s')} tok/s, valid={k.get('valid')}",
              file=sys.stderr)

    def med(key, mode):
        xs = [r[mode][key] for r in results.values() if r.get(mode, {}).get(key)]
        return round(statistics.median(xs), 1) if xs else None

    out = {
        "meta": {"gguf": os.path.basename(args.gguf), "llama_cpp_python": llama_cpp.__version__,
                 "threads": args.threads, "max_tokens": args.max_tokens, "n_ctx": args.n_ctx,
                 "sampling": "greedy (temp=0)", "system_message": system,
                 "python": platform.python_version(), "cpu_count": os.cpu_count()},
        "walk_tokenization_check": walk_check,
        "cases": results,
        "overall": {
            "unconstrained_tok_s_median": med("decode_tok_s", "unconstrained"),
            "constrained_tok_s_median": med("decode_tok_s", "constrained"),
            "constrained_valid": sum(1 for r in results.values()
                                     if r.get("constrained", {}).get("valid")),
            "unconstrained_valid": sum(1 for r in results.values()
                                       if r.get("unconstrained", {}).get("valid")),
            "cases": len(results),
            "slowdown_median": (round(statistics.median(xs), 2) if (xs := [
                r["slowdown"] for r in results.values() if r.get("slowdown")]) else None),
            "overhead_ms_per_tok_median": (round(statistics.median(ys), 3) if (ys := [
                r["overhead_ms_per_tok"] for r in results.values()
                if r.get("overhead_ms_per_tok") is not None]) else None),
        },
    }
    text = json.dumps(out, indent=1)
    if args.out == "-":
        print(text)
    else:
        with open(args.out, "w") as f:
            f.write(text + "\n")

    lines = ["| case | grammar ms | unconstr tok/s | constr tok/s | slowdown | constr tokens | valid |",
             "|---|---:|---:|---:|---:|---:|---|"]
    for n, r in results.items():
        u, k = r.get("unconstrained", {}), r.get("constrained", {})
        valid = k.get("valid")
        if valid is False and not k.get("hit_eos", True):
            valid = "no (truncated)"
        lines.append(f"| {n} | {r.get('grammar_build_ms', 'ERR')} | {u.get('decode_tok_s')} | "
                     f"{k.get('decode_tok_s')} | {r.get('slowdown')} | {k.get('n_tokens')} | {valid} |")
    o = out["overall"]
    lines.append(f"| **median** | | {o['unconstrained_tok_s_median']} | "
                 f"{o['constrained_tok_s_median']} | | | {o['constrained_valid']}/{o['cases']} |")
    print("\n".join(lines), file=sys.stderr)
    print(f"median slowdown {o['slowdown_median']}x, median grammar overhead "
          f"{o['overhead_ms_per_tok_median']} ms/token", file=sys.stderr)
    print(f"walks vs llama.cpp tokenizer: {walk_check['checked']} checked, "
          f"{len(walk_check['mismatches'])} mismatches", file=sys.stderr)


if __name__ == "__main__":
    main()
