#!/usr/bin/env python3
"""JSONSchemaBench with the structured-output peers: XGrammar 0.2.8 and llguidance 1.9.1 wheels.

Measures, over the 9,557 real-world schemas of JSONSchemaBench (../shared/jsonschemabench/, ten
sets; see SOURCES.md there):
  coverage  which schemas each peer accepts. XGrammar: Grammar.from_json_schema(text,
            any_whitespace=False, strict_mode=True) returns (the schema -> EBNF conversion; no
            token-mask compilation); the "Warning: ..." lines its C++ core logs (what it relaxed,
            e.g. oneOf read as anyOf) are counted per schema. llguidance:
            LLMatcher.validate_grammar_with_warnings() of LLMatcher.grammar_from_json_schema(text)
            over SmolLM2's tokenizer reports no error (default options but the layout, i.e.
            lenient=false and coerce_one_of=false: unimplemented keywords, unknown formats and
            oneOf are errors; --ll_options '{"lenient": true, "coerce_one_of": true}' turns them
            into warnings, counted apart). Every (schema, peer) check runs in a worker process
            with a 10 s limit: a hang is "timeout", a dead worker "crash".
  sample    a deterministic per-set sample and the exact ChatML prompt SmolLM2 gets for each
            (the C++ side feeds the same text as a raw prompt).
  generate  greedy decoding of the sample with SmolLM2-135M-Instruct (llama-cpp-python, driven
            token by token: eval, read the last logits, mask them with the engine's bitmask,
            argmax) under each peer's grammar, or unconstrained ("none"). Both peers use the
            layout tpserve uses: ", " and ": " separators and no other whitespace (XGrammar
            any_whitespace=False; llguidance whitespace_flexible=false with those separators).
  validate  checks the finished outputs of any engines (this script's and the C++ side's, same
            JSONL format) against their schemas with Python jsonschema (validator class of the
            schema's $schema, Draft 2020-12 by default, FormatChecker), per engine and set, and
            compares cut rates on the schemas every engine accepted.

Run it in the venv bench/structured_venv.sh makes (xgrammar, llguidance, llama-cpp-python,
jsonschema, gguf, numpy, regex); the tokenizers are rebuilt from the GGUF by
bench/structured_peer_bench.py (which also stands in for torch/transformers, which xgrammar
imports but does not need here):
  PY=~/.cache/tpserve/venv-structured/bin/python
  $PY bench/jsonschemabench_peers.py coverage --out /tmp/jsb_peers_cov.jsonl
  $PY bench/jsonschemabench_peers.py sample --per_set 20 --out /tmp/jsb_sample.jsonl
  $PY bench/jsonschemabench_peers.py generate --engine xgrammar \
      --sample /tmp/jsb_sample.jsonl --out /tmp/jsb_out_xgrammar.jsonl
  $PY bench/jsonschemabench_peers.py generate --engine llguidance \
      --sample /tmp/jsb_sample.jsonl --out /tmp/jsb_out_llguidance.jsonl
  $PY bench/jsonschemabench_peers.py validate --sample /tmp/jsb_sample.jsonl \
      /tmp/jsb_out_xgrammar.jsonl /tmp/jsb_out_llguidance.jsonl [tpserve outputs ...]
"""

import argparse
import json
import multiprocessing
import os
import re
import sys
import time
from collections import Counter, defaultdict

BENCH_DIR = os.path.dirname(os.path.abspath(__file__))
REPO_ROOT = os.path.dirname(BENCH_DIR)
sys.path.insert(0, BENCH_DIR)  # structured_peer_bench (imported lazily: it needs numpy)

DEFAULT_DATA = os.path.normpath(os.path.join(REPO_ROOT, "..", "shared", "jsonschemabench"))
DEFAULT_GGUF = os.path.expanduser("~/.cache/tpserve/SmolLM2-135M-Instruct.Q4_1.gguf")

# llguidance layout options equal to XGrammar's any_whitespace=False (and tpserve's).
LL_COMPACT = {"whitespace_flexible": False, "item_separator": ", ", "key_separator": ": "}

SYSTEM_PROMPT = "You are a helpful assistant that answers in JSON."
USER_PREFIX = "Give an example JSON document that is valid against this JSON Schema:\n"
SCHEMA_CHARS_IN_PROMPT = 1500
SAMPLE_MAX_BYTES = 20000


# ---------------------------------------------------------------------------------------
# The data
# ---------------------------------------------------------------------------------------

def list_sets(data_dir, only=None):
    sets = sorted(d for d in os.listdir(data_dir) if os.path.isdir(os.path.join(data_dir, d)))
    if only:
        want = [s.strip() for s in only.split(",") if s.strip()]
        missing = [s for s in want if s not in sets]
        if missing:
            sys.exit(f"unknown set(s) {missing}; have {sets}")
        sets = [s for s in sets if s in want]
    return sets


def list_files(data_dir, set_name):
    d = os.path.join(data_dir, set_name)
    return sorted(f for f in os.listdir(d) if f.endswith(".json"))


def load_schema(path):
    """(schema text, schema object). Each file is the schema itself; a benchmark wrapper object
    ({"json_schema": {...}} / {"schema": {...}} with no schema keywords beside it) is unwrapped."""
    with open(path, encoding="utf-8") as f:
        text = f.read()
    obj = json.loads(text)
    if isinstance(obj, dict) and not ({"$schema", "type", "properties", "$ref", "anyOf", "oneOf",
                                       "allOf", "definitions", "$defs", "enum"} & obj.keys()):
        for key in ("json_schema", "schema"):
            if isinstance(obj.get(key), dict):
                obj = obj[key]
                text = json.dumps(obj)
                break
    return text, obj


def compact(obj):
    return json.dumps(obj, separators=(",", ":"), ensure_ascii=False)


def chatml_prompt(schema_obj):
    s = compact(schema_obj)[:SCHEMA_CHARS_IN_PROMPT]
    return (f"<|im_start|>system\n{SYSTEM_PROMPT}<|im_end|>\n"
            f"<|im_start|>user\n{USER_PREFIX}{s}<|im_end|>\n"
            f"<|im_start|>assistant\n")


def read_jsonl(path):
    with open(path, encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


def error_text(e):
    """'Type: message', without the "[hh:mm:ss] /project/cpp/file.cc:line: " XGrammar puts first."""
    msg = re.sub(r"^\[[0-9:]+\] \S+:\d+: ", "", str(e)).strip()
    return f"{type(e).__name__}: {msg}"


def pct(a, b):
    return f"{100.0 * a / b:.1f}" if b else "-"


# ---------------------------------------------------------------------------------------
# Peers (shared by coverage workers and generate)
# ---------------------------------------------------------------------------------------

def ll_options(args):
    """llguidance JsonCompileOptions overrides: the compact layout, then --ll_options."""
    opts = dict(LL_COMPACT)
    opts.update(json.loads(args.ll_options))
    return opts


def gguf_vocab(gguf_path):
    import structured_peer_bench as spb
    vocab = spb.GgufVocab(gguf_path)
    return spb, vocab, spb.ByteLevelBpe(vocab)


def llguidance_tokenizer(gguf_path):
    """(llguidance.LLTokenizer, vocab size), from the GGUF as structured_peer_bench builds it."""
    import llguidance
    spb, vocab, bpe = gguf_vocab(gguf_path)
    tok = llguidance.LLTokenizer(
        llguidance.TokenizerWrapper(spb.GgufTokenizerForLl(vocab, bpe)),
        n_vocab=vocab.vocab_size, eos_token=vocab.eos_id)
    return tok, vocab.vocab_size


class StderrCapture:
    """Sends this process's fd 2 to a temporary file, to collect what the native code logs
    (XGrammar's C++ core writes its "Warning: ..." lines there) call by call."""

    def __init__(self):
        import tempfile
        self.real = os.fdopen(os.dup(2), "w")
        self.file = tempfile.TemporaryFile(mode="w+b")
        sys.stderr.flush()
        os.dup2(self.file.fileno(), 2)
        self.pos = 0

    def take(self):
        """Lines written since the last call; those that are not warnings go to the real stderr."""
        sys.stderr.flush()
        self.file.seek(self.pos)
        data = self.file.read()
        self.pos += len(data)
        warnings = []
        for line in data.decode("utf-8", "replace").splitlines():
            if "Warning: " in line:
                warnings.append(line.split("Warning: ", 1)[1].strip())
            elif line.strip():
                print(line, file=self.real, flush=True)
        return warnings


def _coverage_worker(peer, gguf_path, ll_options, conn):
    """Worker process: answers ('ok'|'error', message, warnings) for each schema text sent."""
    if peer == "xgrammar":
        import structured_peer_bench as spb
        xgr, _ = spb.import_xgrammar()
        capture = StderrCapture()

        def check(text):
            capture.take()
            try:
                xgr.Grammar.from_json_schema(text, any_whitespace=False, strict_mode=True)
            finally:
                warnings = capture.take()
            return list(dict.fromkeys(warnings))  # distinct, in order
    else:
        import llguidance
        tok, _ = llguidance_tokenizer(gguf_path)
        M = llguidance.LLMatcher

        def check(text):
            is_error, msgs = M.validate_grammar_with_warnings(
                M.grammar_from_json_schema(text, overrides=ll_options), tok)
            if is_error:
                raise RuntimeError(msgs[0] if msgs else "validate_grammar: error")
            return list(msgs)
    conn.send("ready")
    while True:
        try:
            text = conn.recv()
        except EOFError:
            return
        try:
            warnings = check(text)
            conn.send(("ok", "", warnings))
        except Exception as e:  # noqa: BLE001  a refusal is a result
            conn.send(("error", error_text(e), []))


class PeerWorker:
    """One worker process for one peer, restarted after a timeout or a crash."""

    def __init__(self, peer, gguf_path, ll_options, ctx):
        self.peer, self.gguf_path, self.ll_options, self.ctx = peer, gguf_path, ll_options, ctx
        self.proc = self.conn = None
        self.restarts = 0

    def _start(self):
        parent, child = self.ctx.Pipe()
        self.proc = self.ctx.Process(target=_coverage_worker,
                                     args=(self.peer, self.gguf_path, self.ll_options, child),
                                     daemon=True)
        self.proc.start()
        child.close()
        self.conn = parent
        if not parent.poll(300) or parent.recv() != "ready":
            raise RuntimeError(f"{self.peer} worker did not start")

    def _kill(self):
        if self.proc is not None:
            self.proc.kill()
            self.proc.join()
            self.conn.close()
        self.proc = self.conn = None
        self.restarts += 1

    def check(self, text, timeout):
        """Returns (status, message, warnings, seconds)."""
        if self.proc is None:
            self._start()
        t0 = time.perf_counter()
        try:
            self.conn.send(text)
            if self.conn.poll(timeout):
                status, msg, warns = self.conn.recv()
                return status, msg, warns, time.perf_counter() - t0
        except (EOFError, OSError):  # the worker died
            pass
        dt = time.perf_counter() - t0
        self.proc.join(0.5)
        code = self.proc.exitcode
        self._kill()
        if code is None:
            return "timeout", f"no answer in {timeout:g} s", [], dt
        return "crash", f"worker died (exit code {code})", [], dt

    def close(self):
        if self.proc is not None:
            self.conn.close()
            self.proc.join(5)
            if self.proc.is_alive():
                self.proc.kill()


PEERS = ("xgrammar", "llguidance")
STATUSES = ("ok", "error", "timeout", "crash")


def coverage_table(rows):
    by_set = defaultdict(list)
    for r in rows:
        by_set[r["set"]].append(r)
    out = ["| set | schemas | XGrammar compiled % | llguidance compiled % | XGrammar error / "
           "timeout / crash | llguidance error / timeout / crash | XGrammar ok with warnings | "
           "llguidance ok with warnings |",
           "|---|---:|---:|---:|---:|---:|---:|---:|"]

    def row(label, rs):
        c = {p: Counter(r[p] for r in rs) for p in PEERS}
        warned = [sum(1 for r in rs if r[p] == "ok" and r.get(f"{p}_warnings")) for p in PEERS]
        return (f"| {label} | {len(rs)} | {pct(c['xgrammar']['ok'], len(rs))} | "
                f"{pct(c['llguidance']['ok'], len(rs))} | "
                + " | ".join(f"{c[p]['error']} / {c[p]['timeout']} / {c[p]['crash']}"
                             for p in PEERS)
                + f" | {warned[0]} | {warned[1]} |")

    for s in sorted(by_set):
        out.append(row(s, by_set[s]))
    out.append(row("**total**", rows))
    return "\n".join(out)


def cmd_coverage(args):
    if args.report_only:
        print(coverage_table(read_jsonl(args.out)))
        return
    ctx = multiprocessing.get_context("spawn")  # no fork after xgrammar/tvm threads exist
    workers = {p: PeerWorker(p, args.gguf, ll_options(args), ctx) for p in PEERS}
    rows, t_start = [], time.perf_counter()
    slow = []
    with open(args.out, "w", encoding="utf-8") as out:
        for s in list_sets(args.data, args.sets):
            files = list_files(args.data, s)
            if args.limit:
                files = files[:args.limit]
            t_set = time.perf_counter()
            for name in files:
                path = os.path.join(args.data, s, name)
                rec = {"set": s, "name": name}
                try:
                    text, _ = load_schema(path)
                except Exception as e:  # noqa: BLE001
                    text, err = None, f"unreadable: {type(e).__name__}: {e}"[:200]
                for p in PEERS:
                    if text is None:
                        status, msg, warns, dt = "error", err, [], 0.0
                    else:
                        status, msg, warns, dt = workers[p].check(text, args.timeout)
                    rec[p] = status
                    rec[f"{p}_error"] = msg[:200]
                    rec[f"{p}_s"] = round(dt, 4)
                    rec[f"{p}_warnings"] = len(warns)
                    rec[f"{p}_warning"] = warns[0][:200] if warns else ""
                    if status in ("timeout", "crash") or dt > 2.0:
                        slow.append(f"{s}/{name} {p}: {status} {dt:.1f} s {msg[:120]}")
                        print(f"[coverage] {slow[-1]}", file=sys.stderr)
                out.write(json.dumps(rec) + "\n")
                out.flush()
                rows.append(rec)
            print(f"[coverage] {s}: {len(files)} schemas, {time.perf_counter() - t_set:.1f} s",
                  file=sys.stderr)
    for w in workers.values():
        w.close()
    print(f"[coverage] {len(rows)} schemas in {time.perf_counter() - t_start:.1f} s; worker "
          f"restarts: " + ", ".join(f"{p} {w.restarts}" for p, w in workers.items()),
          file=sys.stderr)
    print(coverage_table(rows))


# ---------------------------------------------------------------------------------------
# sample
# ---------------------------------------------------------------------------------------

def cmd_sample(args):
    """Per set: the files whose compact schema text is at most 20,000 bytes, sorted by name;
    of those n, every (n // K)-th from the first, K in all (all of them if n < K)."""
    k = args.per_set
    total = 0
    with open(args.out, "w", encoding="utf-8") as out:
        for s in list_sets(args.data, args.sets):
            eligible = []
            for name in list_files(args.data, s):
                path = os.path.join(args.data, s, name)
                try:
                    _, obj = load_schema(path)
                except Exception as e:  # noqa: BLE001
                    print(f"[sample] {s}/{name}: skipped, {type(e).__name__}: {e}", file=sys.stderr)
                    continue
                if len(compact(obj).encode("utf-8")) <= SAMPLE_MAX_BYTES:
                    eligible.append((name, path, obj))
            step = max(1, len(eligible) // k)
            picked = eligible[::step][:k]
            for name, path, obj in picked:
                out.write(json.dumps({"set": s, "name": name, "path": os.path.abspath(path),
                                      "prompt": chatml_prompt(obj)}, ensure_ascii=False) + "\n")
            total += len(picked)
            print(f"[sample] {s}: {len(picked)} of {len(eligible)} eligible (step {step})",
                  file=sys.stderr)
    print(f"[sample] {total} schemas -> {args.out}", file=sys.stderr)


# ---------------------------------------------------------------------------------------
# generate
# ---------------------------------------------------------------------------------------

class XGrammarGen:
    def __init__(self, gguf_path, threads):
        spb, vocab, _ = gguf_vocab(gguf_path)
        self.eng = spb.XGrammarEngine(vocab, threads)  # TokenizerInfo from the GGUF
        self.xgr, self.threads = self.eng.xgr, threads
        self.bitmask = self.eng.bitmask
        self.vocab_size = vocab.vocab_size

    def matcher(self, schema_text):
        compiler = self.xgr.GrammarCompiler(self.eng.info, max_threads=self.threads,
                                            cache_enabled=False)
        cg = compiler.compile_json_schema(schema_text, any_whitespace=False, strict_mode=True)
        return self.xgr.GrammarMatcher(cg)

    def fill(self, m):
        m.fill_next_token_bitmask(self.bitmask, 0)
        return self.bitmask[0]

    def accept(self, m, tok):
        return m.accept_token(tok)


class LlguidanceGen:
    def __init__(self, gguf_path, options):
        import llguidance
        import llguidance.numpy as llnp
        self.ll, self.llnp = llguidance, llnp
        self.tok, self.vocab_size = llguidance_tokenizer(gguf_path)
        self.bitmask = llnp.allocate_token_bitmask(1, self.vocab_size)
        self.options = options

    def matcher(self, schema_text):
        M = self.ll.LLMatcher
        m = M(self.tok, M.grammar_from_json_schema(schema_text, overrides=self.options),
              log_level=0)
        if m.is_error():
            raise RuntimeError(m.get_error())
        return m

    def fill(self, m):
        self.llnp.fill_next_token_bitmask(m, self.bitmask, 0)
        return self.bitmask[0]

    def accept(self, m, tok):
        return m.consume_token(tok)


def cmd_generate(args):
    import numpy as np
    import llama_cpp

    engine = None
    if args.engine == "xgrammar":
        engine = XGrammarGen(args.gguf, args.threads)
    elif args.engine == "llguidance":
        engine = LlguidanceGen(args.gguf, ll_options(args))
    llm = llama_cpp.Llama(model_path=args.gguf, n_ctx=args.n_ctx, n_threads=args.threads,
                          logits_all=False, verbose=False)
    n_vocab = llm.n_vocab()
    eos = args.eos
    if engine is not None and engine.vocab_size != n_vocab:
        sys.exit(f"vocab size mismatch: GGUF tokenizer {engine.vocab_size}, llama.cpp {n_vocab}")

    samples = read_jsonl(args.sample)
    if args.limit:
        samples = samples[:args.limit]
    mode = "w"
    if args.resume and os.path.exists(args.out):
        done = {(r["set"], r["name"]) for r in read_jsonl(args.out)}
        samples = [s for s in samples if (s["set"], s["name"]) not in done]
        mode = "a"
        print(f"[generate {args.engine}] resuming: {len(done)} done, {len(samples)} to go",
              file=sys.stderr)
    counts, t_all = Counter(), time.perf_counter()
    with open(args.out, mode, encoding="utf-8") as out:
        for smp in samples:
            t0 = time.perf_counter()
            rec = {"set": smp["set"], "name": smp["name"], "engine": args.engine}
            m, compile_ms = None, 0.0
            if engine is not None:
                schema_text, _ = load_schema(smp["path"])
                try:
                    m = engine.matcher(schema_text)
                except Exception as e:  # noqa: BLE001  the engine refused the schema
                    rec.update(status="refused", tokens=0, text="",
                               error=error_text(e)[:500])
                compile_ms = (time.perf_counter() - t0) * 1e3
            if rec.get("status") != "refused":
                prompt = llm.tokenize(smp["prompt"].encode("utf-8"), add_bos=True, special=True)
                if len(prompt) + args.max_tokens > args.n_ctx:
                    sys.exit(f"{smp['set']}/{smp['name']}: prompt of {len(prompt)} tokens "
                             f"does not fit n_ctx {args.n_ctx}")
                llm.reset()
                llm.eval(prompt)
                out_ids, status, err, mask_ns = [], "cut", None, 0
                for _ in range(args.max_tokens):
                    logits = np.ctypeslib.as_array(
                        llama_cpp.llama_get_logits_ith(llm._ctx.ctx, -1), shape=(n_vocab,)).copy()
                    if m is not None:
                        t_mask = time.perf_counter_ns()
                        row = engine.fill(m)
                        mask_ns += time.perf_counter_ns() - t_mask
                        allowed = np.unpackbits(row.view(np.uint8), bitorder="little")[:n_vocab]
                        logits[allowed == 0] = -np.inf
                    tok = int(np.argmax(logits))
                    if not np.isfinite(logits[tok]):
                        err = "the mask allows no token"
                        break
                    if tok == eos:
                        status = "finished"
                        break
                    if m is not None:
                        t_mask = time.perf_counter_ns()
                        accepted = engine.accept(m, tok)
                        mask_ns += time.perf_counter_ns() - t_mask
                        if not accepted:
                            err = f"matcher rejected token {tok} it allowed"
                            break
                    out_ids.append(tok)
                    llm.eval([tok])
                text = llm.detokenize(out_ids).decode("utf-8", errors="replace")
                rec.update(status=status, tokens=len(out_ids), text=text,
                           prompt_tokens=len(prompt), matcher_ms=round(mask_ns / 1e6, 1))
                if err:
                    rec["error"] = err
            dt = time.perf_counter() - t0
            rec["compile_ms"] = round(compile_ms, 2)
            rec["seconds"] = round(dt, 3)
            counts[rec["status"]] += 1
            out.write(json.dumps(rec, ensure_ascii=False) + "\n")
            out.flush()
            print(f"[generate {args.engine}] {smp['set']}/{smp['name']}: {rec['status']}, "
                  f"{rec['tokens']} tokens, compile {compile_ms:.0f} ms, "
                  f"mask+accept {rec.get('matcher_ms', 0):.0f} ms, {dt:.2f} s"
                  + (f" ({rec['error'][:150]})" if rec.get("error") else ""), file=sys.stderr)
    print(f"[generate {args.engine}] {len(samples)} schemas in {time.perf_counter() - t_all:.1f} s: "
          + ", ".join(f"{k} {v}" for k, v in sorted(counts.items())), file=sys.stderr)


# ---------------------------------------------------------------------------------------
# validate
# ---------------------------------------------------------------------------------------

def check_output(schema, text, jsonschema):
    """(verdict, message): verdict 'valid', 'invalid' or 'unchecked' (the validator itself
    failed on the schema: an unresolvable $ref, a pattern Python's re cannot compile, ...)."""
    try:
        doc = json.loads(text)
    except ValueError as e:
        return "invalid", f"not JSON: {e}"
    try:
        cls = jsonschema.validators.validator_for(schema, default=jsonschema.Draft202012Validator)
        v = cls(schema, format_checker=jsonschema.FormatChecker())
        err = jsonschema.exceptions.best_match(v.iter_errors(doc))
    except Exception as e:  # noqa: BLE001
        return "unchecked", f"{type(e).__name__}: {e}"
    if err is None:
        return "valid", ""
    where = "/" + "/".join(str(p) for p in err.absolute_path)
    return "invalid", f"at {where}: {err.message}"


def cmd_validate(args):
    import warnings
    import jsonschema
    warnings.simplefilter("ignore", DeprecationWarning)  # validator_for on unknown $schema URIs

    samples = read_jsonl(args.sample)
    keys = [(s["set"], s["name"]) for s in samples]
    schema_of = {}
    for s in samples:
        schema_of[(s["set"], s["name"])] = load_schema(s["path"])[1]
    sets = sorted({k[0] for k in keys})
    outputs = defaultdict(dict)  # engine -> (set, name) -> record
    for path in args.outputs:
        for r in read_jsonl(path):
            outputs[r["engine"]][(r["set"], r["name"])] = r
    engines = list(outputs)
    from importlib.metadata import version
    print(f"jsonschema {version('jsonschema')}; "
          f"formats checked: {', '.join(sorted(jsonschema.FormatChecker().checkers))}\n")

    verdict = {}
    for e in engines:
        for k, r in outputs[e].items():
            if r["status"] == "finished" and k in schema_of:
                verdict[(e, k)] = check_output(schema_of[k], r["text"], jsonschema)

    invalid_lines = []
    for e in engines:
        print(f"### {e}\n")
        print("| set | sampled | refused | finished | cut | missing | finished valid | "
              "finished invalid | unchecked | valid % of sampled |")
        print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
        for s in sets + ["**total**"]:
            ks = [k for k in keys if k[0] == s] if s in sets else keys
            c = Counter()
            for k in ks:
                r = outputs[e].get(k)
                c["sampled"] += 1
                if r is None:
                    c["missing"] += 1
                    continue
                c[r["status"]] += 1
                if r["status"] == "finished":
                    v, msg = verdict[(e, k)]
                    c[v] += 1
                    if v == "invalid" and s in sets:
                        invalid_lines.append(f"- {e} {k[0]}/{k[1]}: {msg[:200]}")
                    if v == "unchecked" and s in sets:
                        invalid_lines.append(f"- {e} {k[0]}/{k[1]}: (unchecked) {msg[:200]}")
            print(f"| {s} | {c['sampled']} | {c['refused']} | {c['finished']} | {c['cut']} | "
                  f"{c['missing']} | {c['valid']} | {c['invalid']} | {c['unchecked']} | "
                  f"{pct(c['valid'], c['sampled'])} |")
        print()
    if invalid_lines:
        print("### Finished outputs that do not validate\n")
        print("\n".join(invalid_lines))
        print()

    common = [k for k in keys
              if all(k in outputs[e] and outputs[e][k]["status"] != "refused" for e in engines)]
    print(f"### On the {len(common)} schemas all of {', '.join(engines)} accepted\n")
    print("| engine | finished | cut | cut % | finished valid | valid % |")
    print("|---|---:|---:|---:|---:|---:|")
    for e in engines:
        c = Counter(outputs[e][k]["status"] for k in common)
        valid = sum(1 for k in common if verdict.get((e, k), ("",))[0] == "valid")
        print(f"| {e} | {c['finished']} | {c['cut']} | {pct(c['cut'], len(common))} | {valid} | "
              f"{pct(valid, len(common))} |")


# ---------------------------------------------------------------------------------------

def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--data", default=DEFAULT_DATA, help="JSONSchemaBench folder (default %(default)s)")
    ap.add_argument("--gguf", default=DEFAULT_GGUF)
    ap.add_argument("--ll_options", default="{}",
                    help="JSON object of llguidance JsonCompileOptions applied over the compact "
                         "layout, e.g. '{\"coerce_one_of\": true, \"lenient\": true}'")
    sub = ap.add_subparsers(dest="cmd", required=True)

    p = sub.add_parser("coverage", help="which schemas each peer accepts")
    p.add_argument("--out", required=True, help="JSONL, one line per schema")
    p.add_argument("--sets", default="", help="comma-separated set names (default all)")
    p.add_argument("--limit", type=int, default=0, help="at most N schemas per set (sorted)")
    p.add_argument("--timeout", type=float, default=10.0, help="seconds per schema and peer")
    p.add_argument("--report_only", action="store_true", help="print the table of --out only")
    p.set_defaults(fn=cmd_coverage)

    p = sub.add_parser("sample", help="the deterministic sample and its prompts")
    p.add_argument("--out", required=True)
    p.add_argument("--per_set", type=int, default=20)
    p.add_argument("--sets", default="")
    p.set_defaults(fn=cmd_sample)

    p = sub.add_parser("generate", help="greedy SmolLM2 decoding under a peer's grammar")
    p.add_argument("--engine", required=True, choices=["xgrammar", "llguidance", "none"])
    p.add_argument("--sample", required=True)
    p.add_argument("--out", required=True)
    p.add_argument("--max_tokens", type=int, default=160)
    p.add_argument("--limit", type=int, default=0, help="the first N sample lines only")
    p.add_argument("--resume", action="store_true",
                   help="append to --out, skipping the schemas it already has")
    p.add_argument("--threads", type=int, default=2,
                   help="llama.cpp threads and XGrammar compiler threads")
    p.add_argument("--n_ctx", type=int, default=4096)
    p.add_argument("--eos", type=int, default=2, help="<|im_end|>")
    p.set_defaults(fn=cmd_generate)

    p = sub.add_parser("validate", help="validate outputs of any engines against their schemas")
    p.add_argument("--sample", required=True)
    p.add_argument("outputs", nargs="+")
    p.set_defaults(fn=cmd_validate)

    args = ap.parse_args()
    args.fn(args)


if __name__ == "__main__":
    main()
