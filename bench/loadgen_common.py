"""What //deploy:loadgen computes, repeated in Python for the peers it is compared with
(bench/llama_cpp_loadgen.py): the workload of deploy/loadgen_workload.h, the records and
statistics of deploy/loadgen.h, and the table and JSON of deploy/loadgen_report.h, step for
step, so that the two sides send the same requests and their outputs can be diffed.
Definitions of TTFT, ITL, E2E and goodput: deploy/loadgen.h and docs/PERFORMANCE.md.

    w = Workload(parse_length_mix("200", "--prompt_tokens"), parse_length_mix("64", "o"), 0.0, 1)
    rec = new_record(w.next());  record_message(0.2, 1, rec);  ...
    summary = summarize(records, window_s, {"ttft_ms": 2000, "itl_ms": 200, "itl_stat": "mean"})
"""
import math

# deploy/loadgen_workload.h: kPromptWords.
PROMPT_WORDS = (
    "the of and to in is was for on that with as by at from it an be this which or are his had "
    "not but were have one all their they has been its also new more after who first two other "
    "time when into some would there can over people only most made year between during under "
    "three such world many these").split()
assert len(PROMPT_WORDS) == 64
MASK64 = (1 << 64) - 1


class SplitMix64:
    def __init__(self, seed):
        self.state = seed & MASK64

    def next(self):
        self.state = (self.state + 0x9E3779B97F4A7C15) & MASK64
        z = self.state
        z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & MASK64
        z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & MASK64
        return z ^ (z >> 31)

    def next_unit(self):
        return (self.next() >> 11) * 2.0 ** -53


def parse_length_mix(spec, flag_name):
    def bad(why):
        raise ValueError(f'{flag_name} = "{spec}": {why} (want TOKENS or TOKENS:WEIGHT,TOKENS:WEIGHT,...)')
    if not spec:
        bad("is empty")
    buckets = []
    for item in spec.split(","):
        tokens_text, _, weight_text = item.partition(":")
        try:
            tokens = int(tokens_text.strip())
        except ValueError:
            tokens = 0
        if tokens <= 0:
            bad(f'token count "{tokens_text}" is not an integer > 0')
        weight = 1.0
        if ":" in item:
            try:
                weight = float(weight_text.strip())
            except ValueError:
                weight = -1.0
            if not (weight > 0) or not math.isfinite(weight):
                bad(f'weight "{weight_text}" is not a number > 0')
        buckets.append((tokens, weight))
    return buckets


def pick(buckets, unit):
    total = 0.0
    for _, w in buckets:
        total += w
    cumulative = 0.0
    for tokens, w in buckets:
        cumulative += w
        if unit < cumulative / total:
            return tokens
    return buckets[-1][0]


class Workload:
    def __init__(self, prompt_mix, output_mix, rate, seed):
        self.prompt_mix, self.output_mix, self.rate = prompt_mix, output_mix, rate
        self.rng = SplitMix64(seed)
        self.index = 0

    def next(self):
        r = {"index": self.index}
        self.index += 1
        r["prompt_tokens"] = pick(self.prompt_mix, self.rng.next_unit())
        r["output_tokens"] = pick(self.output_mix, self.rng.next_unit())
        u = self.rng.next_unit()
        r["arrival_gap_s"] = -math.log1p(-u) / self.rate if self.rate > 0 else 0.0
        r["prompt"] = " ".join(PROMPT_WORDS[self.rng.next() % 64] for _ in range(r["prompt_tokens"]))
        return r


# ---- deploy/loadgen.h: records and statistics ----

def new_record(w):
    return {"index": w["index"], "wanted_prompt_tokens": w["prompt_tokens"],
            "wanted_output_tokens": w["output_tokens"], "prompt_tokens": 0, "output_tokens": 0,
            "send_s": 0.0, "ttft_s": -1.0, "last_token_s": -1.0, "e2e_s": 0.0, "itl_s": [],
            "multi_token_messages": 0, "status": "OK", "error": ""}


def record_message(t_s, num_tokens, rec):
    if num_tokens <= 0:
        return
    if num_tokens > 1:
        rec["multi_token_messages"] += 1
    if rec["ttft_s"] < 0:
        rec["ttft_s"] = t_s
    else:
        gap = (t_s - rec["last_token_s"]) / num_tokens
        rec["itl_s"].extend([gap] * num_tokens)
    rec["last_token_s"] = t_s
    rec["output_tokens"] += num_tokens


def percentile(values, p):
    if not values:
        return math.nan
    v = sorted(values)
    rank = p / 100.0 * (len(v) - 1)
    lo = math.floor(rank)
    hi = min(lo + 1, len(v) - 1)
    return v[lo] + (rank - lo) * (v[hi] - v[lo])


def distribute(values):
    return {"count": len(values), "mean": sum(values) / len(values) if values else math.nan,
            "p50": percentile(values, 50), "p90": percentile(values, 90), "p99": percentile(values, 99)}


def request_itl(rec, stat):
    if not rec["itl_s"]:
        return math.nan
    if stat == "p90":
        return percentile(rec["itl_s"], 90)
    return sum(rec["itl_s"]) / len(rec["itl_s"])


def is_good(rec, slo):
    if rec["status"] != "OK" or rec["ttft_s"] < 0:
        return False
    if slo["ttft_ms"] > 0 and rec["ttft_s"] * 1000.0 > slo["ttft_ms"]:
        return False
    itl = request_itl(rec, slo["itl_stat"])
    if slo["itl_ms"] > 0 and not math.isnan(itl) and itl * 1000.0 > slo["itl_ms"]:
        return False
    return True


def summarize(records, window_s, slo):
    s = {"requests": len(records), "requests_ok": 0, "requests_failed": 0, "failures": {},
         "prompt_tokens": 0, "output_tokens": 0, "short_requests": 0, "multi_token_messages": 0,
         "window_s": window_s, "good_requests": 0}
    ttft, itl, e2e = [], [], []
    for r in records:
        if r["status"] != "OK":
            s["requests_failed"] += 1
            s["failures"][r["status"]] = s["failures"].get(r["status"], 0) + 1
            continue
        s["requests_ok"] += 1
        s["prompt_tokens"] += r["prompt_tokens"]
        s["output_tokens"] += r["output_tokens"]
        s["multi_token_messages"] += r["multi_token_messages"]
        if r["output_tokens"] < r["wanted_output_tokens"]:
            s["short_requests"] += 1
        if r["ttft_s"] >= 0:
            ttft.append(r["ttft_s"] * 1000.0)
        itl.extend(x * 1000.0 for x in r["itl_s"])
        e2e.append(r["e2e_s"] * 1000.0)
        if is_good(r, slo):
            s["good_requests"] += 1
    s["failures"] = dict(sorted(s["failures"].items()))
    s["ttft_ms"], s["itl_ms"], s["e2e_ms"] = distribute(ttft), distribute(itl), distribute(e2e)
    per_s = (lambda n: n / window_s) if window_s > 0 else (lambda n: 0.0)
    s["requests_per_s"] = per_s(s["requests_ok"])
    s["output_tokens_per_s"] = per_s(s["output_tokens"])
    s["goodput_requests_per_s"] = per_s(s["good_requests"])
    return s


# ---- deploy/loadgen_report.h: table and JSON ----

def render_table(info, s, slo):
    def cell(v):
        return f"{'-':>9}" if math.isnan(v) else f"{v:9.1f}"

    def row(name, d):
        return f"{name:<6} {cell(d['mean'])} {cell(d['p50'])} {cell(d['p90'])} {cell(d['p99'])} {d['count']:9d}\n"

    def per_request(total):
        return f"{total / s['requests_ok']:.1f}" if s["requests_ok"] > 0 else "-"

    def limit(ms):
        return "%g ms" % ms if ms > 0 else "any"

    rate = "Poisson arrivals at %g requests/s" % info["rate"] if info["rate"] > 0 else "closed loop"
    out = f"{info['tool']} -> {info['target']}\n"
    out += (f"concurrency {info['concurrency']}, {rate}, prompt tokens {info['prompt_tokens']}, "
            f"output tokens {info['output_tokens']}, temperature {'%g' % info['temperature']}, "
            f"seed {info['seed']}\n")
    out += (f"requests {s['requests']}: {s['requests_ok']} ok, {s['requests_failed']} failed; "
            f"window {s['window_s']:.3f} s\n")
    out += f"throughput: {s['requests_per_s']:.3f} requests/s, {s['output_tokens_per_s']:.1f} output tokens/s\n"
    out += (f"tokens: prompt {s['prompt_tokens']} ({per_request(s['prompt_tokens'])}/request, as counted "
            f"by the server), output {s['output_tokens']} ({per_request(s['output_tokens'])}/request); "
            f"{s['short_requests']} short, {s['multi_token_messages']} multi-token messages\n")
    out += f"{'ms':<6} {'mean':>9} {'p50':>9} {'p90':>9} {'p99':>9} {'count':>9}\n"
    out += row("TTFT", s["ttft_ms"]) + row("ITL", s["itl_ms"]) + row("E2E", s["e2e_ms"])
    out += (f"goodput: {s['good_requests']} of {s['requests']} requests good, "
            f"{s['goodput_requests_per_s']:.3f} requests/s (TTFT <= {limit(slo['ttft_ms'])} and "
            f"per-request {slo['itl_stat']} ITL <= {limit(slo['itl_ms'])})\n")
    failures = ", ".join(f"{code} {n}" for code, n in s["failures"].items())
    out += f"failures: {failures or 'none'}\n"
    return out


def _num(v):
    return None if isinstance(v, float) and math.isnan(v) else v


def run_to_json(info, s, slo, records):
    config = {k: info[k] for k in ("concurrency", "requests", "duration_s", "rate", "prompt_tokens",
                                   "output_tokens", "temperature", "seed", "ignore_eos",
                                   "warmup_requests")}
    config.update(slo_ttft_ms=slo["ttft_ms"], slo_itl_ms=slo["itl_ms"], slo_itl_stat=slo["itl_stat"])
    summary = {k: s[k] for k in ("requests", "requests_ok", "requests_failed", "failures", "window_s",
                                 "requests_per_s", "output_tokens_per_s", "prompt_tokens",
                                 "output_tokens", "short_requests", "multi_token_messages")}
    for k in ("ttft_ms", "itl_ms", "e2e_ms"):
        summary[k] = {key: _num(v) for key, v in s[k].items()}
    summary["good_requests"] = s["good_requests"]
    summary["goodput_requests_per_s"] = s["goodput_requests_per_s"]
    rows = [{"index": r["index"], "status": r["status"], "error": r["error"],
             "wanted_prompt_tokens": r["wanted_prompt_tokens"],
             "wanted_output_tokens": r["wanted_output_tokens"], "prompt_tokens": r["prompt_tokens"],
             "output_tokens": r["output_tokens"], "send_s": r["send_s"],
             "ttft_ms": r["ttft_s"] * 1000 if r["ttft_s"] >= 0 else None, "e2e_ms": r["e2e_s"] * 1000,
             "itl_mean_ms": _num(request_itl(r, "mean") * 1000),
             "itl_p90_ms": _num(request_itl(r, "p90") * 1000), "good": is_good(r, slo)} for r in records]
    return {"tool": info["tool"], "target": info["target"], "config": config, "summary": summary,
            "requests": rows}
