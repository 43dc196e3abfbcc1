"""End-to-end: every family's tiny golden model (tests/golden/families: Llama, Qwen2 with biases,
Qwen2 with YaRN, Qwen3 with QK-norm, Mistral with its sliding window, Gemma 2 with soft-caps and
alternating windows, Gemma 3 with five local layers to one global, Mixtral and Qwen3-MoE with 8
experts of which each token takes 2, split across the ranks, and placed whole on the ranks with
--expert_parallel) served by real processes from
its GGUF and from its config.json + safetensors (+ tokenizer.json, make_family_tokenizers.py), at
two ranks where its KV heads allow (four for qwen3moe_kv4's four KV heads, one for Gemma 3's
single KV head), and past the KV heads (each KV head then copied to the ranks that read it:
Llama's 2 on 4 ranks, Gemma 3's 1 on 2, Qwen3-MoE's 2 on 4 with whole experts), through gRPC
and the HTTP
API: the greedy tokens of a token-id prompt equal llama.cpp's (goldens.json) up to llama.cpp's
first near-tie. DeepSeek-V3's shape (multi-head latent attention with its latent cache, grouped
experts with a shared one) at four ranks, tensor-parallel by heads with the latent on every
rank, and expert-parallel; with --attention_dp and --expert_parallel at two and four ranks
(each rank caching and attending for its own requests), four concurrent requests. Mistral's GGUF is a Llama to llama.cpp (no window), so its windowed goldens are
for its config.json form only. Llama 4's config.json asks for chunks of 8 and a temperature
floor of 4, which llama.cpp fixes at 8192: its GGUF form is checked against llama.cpp's own
greedy tokens (gguf_prompts), its config.json form against the numpy reference's."""

import json
import subprocess
import urllib.request

import pytest

from conftest import ROOT, Cluster, openai_client, pb

DIR = ROOT / "tests/golden/families"
GOLDENS = json.loads((DIR / "goldens.json").read_text())
NEAR_TIE = 0.5
CASES = [(case, form, False, None) for case in ["llama", "qwen2", "qwen2_yarn", "qwen3", "mistral",
                                           "gemma2", "gemma3", "mixtral", "qwen3moe",
                                           "qwen3moe_kv4", "glm4moe",
                                           "llama4", "deepseek2"]
         for form in ["gguf", "hf_dir"] if (case, form) != ("mistral", "gguf")]
# DeepSeek-V3's shape without the query latent and YaRN (as DeepSeek-V2-Lite), its GGUF form;
# and the FP8 checkpoint form (128x128 tiles with weight_scale_inv) on one rank, whose tiles
# hold whole matrices (goldens: a numpy reference on the same FP8 weights).
CASES += [("deepseek2_lite", "gguf", False, None), ("deepseek2_fp8_hf", "hf_dir", False, 1)]
# --expert_parallel: each of the two ranks holds 4 whole experts (GLM's shared expert on both),
# their outputs brought to the tokens by an all-to-all over shared memory; qwen3moe_kv4's four
# ranks hold 2 each.
CASES += [("mixtral", "gguf", True, None), ("qwen3moe", "hf_dir", True, None),
          ("glm4moe", "gguf", True, None), ("qwen3moe_kv4", "gguf", True, None),
          ("llama4", "hf_dir", True, None), ("deepseek2", "hf_dir", True, None)]
# Past the KV heads: more ranks than KV heads, each KV head copied to the ranks that read it.
CASES += [("llama", "gguf", False, 4), ("gemma3", "hf_dir", False, 2),
          ("qwen3moe", "gguf", True, 4)]


def decidable(gaps):
    n = 0
    while n < len(gaps) and gaps[n] >= NEAR_TIE:
        n += 1
    return n


@pytest.fixture(scope="module", params=CASES,
                ids=lambda p: f"{p[0]}-{p[1]}" + ("-ep" if p[2] else "") +
                (f"-tp{p[3]}" if p[3] else ""))
def family(request, tmp_path_factory):
    name, form, expert_parallel, past_kv_heads = request.param
    case = GOLDENS["cases"][name]
    kv_heads = case["shapes"]["n_kv_head"]
    ranks = past_kv_heads or (4 if kv_heads % 4 == 0 else 2 if kv_heads % 2 == 0 else 1)
    extra = ["--context=128"] + (["--expert_parallel"] if expert_parallel else [])
    c = Cluster(ranks=ranks, tmp=tmp_path_factory.mktemp(f"{name}-{form}"),
                model=DIR / case[form], extra_args=extra)
    prompts = case.get("gguf_prompts", case["prompts"]) if form == "gguf" else case["prompts"]
    yield f"{name} ({form}{', expert-parallel' if expert_parallel else ''})", case, prompts, c
    c.stop()


def test_greedy_tokens_match_llama_cpp_over_grpc_and_http(family):
    name, case, prompts, cluster = family
    # The prompt whose greedy run stays decidable longer (Gemma 3's long one starts at a tie).
    long = max(prompts.values(), key=lambda p: decidable(p["greedy_gaps"]))
    n = decidable(long["greedy_gaps"])
    assert n > 0, f"{name}: both goldens' first steps are near-ties"
    req = pb.GenerateRequest(max_new_tokens=n, ignore_eos=True)
    req.token_ids.ids.extend(long["ids"])
    req.sampling.temperature = 0.0
    msgs = list(cluster.stub.Generate(req, timeout=120))
    ids = [t for m in msgs for t in m.token_ids]
    assert ids == long["greedy_ids"][:n], name
    client = openai_client(cluster)
    model = client.models.list().data[0].id
    r = client.completions.create(model=model, prompt=long["ids"], max_tokens=n, temperature=0,
                                  logprobs=1, extra_body={"ignore_eos": True})
    assert r.choices[0].text == "".join(m.text for m in msgs), name
    if "n_experts" not in case["shapes"]:
        return
    # The routing reaches /metrics and the request log from TP rank 0, over the step channel.
    metrics = urllib.request.urlopen(cluster.http_url + "/metrics", timeout=10).read().decode()
    routed = [float(line.split()[-1]) for line in metrics.splitlines()
              if line.startswith("tpserve_expert_routed_tokens_total{")]
    assert len(routed) == case["shapes"]["n_experts"], name
    assert sum(routed) > 0, name
    assert "tpserve_expert_imbalance_ratio_count" in metrics, name
    log = cluster.output()
    assert '"expert_imbalance":' in log, name
    assert ("with whole experts each" in log) == ("expert-parallel" in name), name


@pytest.mark.parametrize("form,ranks", [("hf_dir", 4), ("gguf", 2)])
def test_attention_data_parallel_with_experts_serves_concurrent_requests(form, ranks, tmp_path):
    """--attention_dp --expert_parallel (DeepSeek-V3's serving layout past one rank's latent
    cache): four requests at once, spread over the ranks' caches, each attended for by its own
    rank; every one's greedy tokens equal llama.cpp's, over gRPC and HTTP."""
    import concurrent.futures
    case = GOLDENS["cases"]["deepseek2"]
    c = Cluster(ranks=ranks, tmp=tmp_path, model=DIR / case[form],
                extra_args=["--context=128", "--max_seqs=4", "--expert_parallel",
                            "--attention_dp"])
    try:
        prompts = list(case["prompts"].values()) * 2

        def grpc_generate(p):
            n = decidable(p["greedy_gaps"])
            req = pb.GenerateRequest(max_new_tokens=n, ignore_eos=True)
            req.token_ids.ids.extend(p["ids"])
            req.sampling.temperature = 0.0
            return [t for m in c.stub.Generate(req, timeout=120) for t in m.token_ids], n

        with concurrent.futures.ThreadPoolExecutor(len(prompts)) as pool:
            results = list(pool.map(grpc_generate, prompts))
        for p, (ids, n) in zip(prompts, results):
            assert n > 0
            assert ids == p["greedy_ids"][:n]
        client = openai_client(c)
        model = client.models.list().data[0].id

        def http_generate(p):
            n = decidable(p["greedy_gaps"])
            r = client.completions.create(model=model, prompt=p["ids"], max_tokens=n,
                                          temperature=0, extra_body={"ignore_eos": True})
            return r.choices[0].text

        with concurrent.futures.ThreadPoolExecutor(len(prompts)) as pool:
            texts = list(pool.map(http_generate, prompts))
        assert texts[:2] == texts[2:]  # the same prompt, whichever rank attended for it
        log = c.output()
        assert "data-parallel attention (each caches its own sequences)" in log, log[-2000:]
        assert "with whole experts each" in log
    finally:
        c.stop()


@pytest.mark.parametrize("ranks", [1, 2])
def test_mtp_speculation_is_exact_and_reports_its_acceptance(ranks, tmp_path):
    """--speculative=mtp on the tiny DeepSeek-V3 with an MTP layer (deepseek2_mtp_hf,
    make_mtp_golden.py): every decode step drafts one token with the checkpoint's MTP layer
    (K fixed, no batch limit). Greedy tokens equal llama.cpp's without speculation, a seeded
    sampled request gives the same tokens as a cluster without it, and the request log and
    counters report exactly the drafts and acceptances the numpy reference's MTP argmaxes
    predict (deepseek2_mtp_goldens.json: 13 drafts, 1 accepted, per prompt)."""
    case = GOLDENS["cases"]["deepseek2"]
    mtp = json.loads((DIR / "deepseek2_mtp_goldens.json").read_text())["prompts"]
    common = ["--context=128"]
    (tmp_path / "mtp").mkdir()
    (tmp_path / "off").mkdir()
    spec = Cluster(ranks=ranks, tmp=tmp_path / "mtp", model=DIR / "deepseek2_mtp_hf",
                   extra_args=common + ["--speculative=mtp", "--speculative_max_batch=0",
                                        "--speculative_adaptive=false"])
    off = Cluster(ranks=ranks, tmp=tmp_path / "off", model=DIR / "deepseek2_mtp_hf",
                  extra_args=common)
    try:
        for name, p in case["prompts"].items():
            req = pb.GenerateRequest(max_new_tokens=16, ignore_eos=True)
            req.token_ids.ids.extend(p["ids"])
            req.sampling.temperature = 0.0
            ids = [t for m in spec.stub.Generate(req, timeout=120) for t in m.token_ids]
            assert ids == p["greedy_ids"][:16], name
            # The reference's drafts: at each decode step the MTP argmax of the last known
            # token's row; an accepted one emits two tokens (the last step drafts nothing).
            g = mtp[name]["greedy"]
            produced, drafts, accepted = 1, 0, 0
            while produced < 16:
                last = len(p["ids"]) + produced - 1
                if 16 - produced > 1:
                    drafts += 1
                    if g["mtp_argmax"][last - 1] == p["greedy_ids"][produced]:
                        accepted += 1
                        produced += 2
                        continue
                produced += 1
            line = [json.loads(l) for l in spec.output().splitlines()
                    if l.startswith("{") and '"event":"request"' in l][-1]
            assert (line["draft_tokens"], line["accepted_draft_tokens"]) == (drafts, accepted), name
            assert line["draft_acceptance_rate"] == pytest.approx(accepted / drafts)
        metrics = urllib.request.urlopen(spec.http_url + "/metrics", timeout=10).read().decode()
        assert "tpserve_spec_decode_num_accepted_tokens_total 2" in metrics
        assert "launch: speculative decoding: mtp, K up to 1" in spec.output()
        # Sampling: a seeded request draws the same tokens with and without the draft.
        prompt = case["prompts"]["long"]["ids"]
        sampled = []
        for c in (spec, off):
            req = pb.GenerateRequest(max_new_tokens=24, ignore_eos=True)
            req.token_ids.ids.extend(prompt)
            req.sampling.temperature = 0.9
            req.sampling.seed = 1234
            sampled.append([t for m in c.stub.Generate(req, timeout=120) for t in m.token_ids])
        assert sampled[0] == sampled[1]
    finally:
        spec.stop()
        off.stop()


def test_a_deterministic_chunk_count_the_ranks_do_not_divide_is_refused():
    """--deterministic_tp_chunks must be a multiple of --ranks: refused before any rank starts."""
    out = subprocess.run(
        [str(ROOT / "bazel-bin/deploy/launch"), f"--model={DIR / 'llama.gguf'}", "--ranks=4",
         "--deterministic_tp", "--deterministic_tp_chunks=2", "--context=128"],
        capture_output=True, text=True, timeout=60)
    assert out.returncode == 2, out.stderr
    assert "deterministic_tp_chunks = 2 must be a positive multiple of the 4 tensor-parallel " \
        "ranks" in out.stderr, out.stderr


def test_expert_routing_metrics_cover_every_pipeline_stage(tmp_path):
    """Qwen3-MoE's two layers in two stages of two ranks (--ranks=2 --pp=2): /metrics counts
    the routing of both layers once, as one rank does (it used to count stage 0's layer only:
    half the slots). --deterministic_tp: the same routing at both degrees."""
    case = GOLDENS["cases"]["qwen3moe"]
    prompt = case["gguf_prompts"]["short"] if "gguf_prompts" in case else case["prompts"]["short"]
    routed = {}
    for pp in (1, 2):
        (tmp_path / f"pp{pp}").mkdir()
        c = Cluster(ranks=pp, tmp=tmp_path / f"pp{pp}", model=DIR / case["gguf"],
                    extra_args=["--context=128", f"--pp={pp}", "--deterministic_tp"])
        try:
            req = pb.GenerateRequest(max_new_tokens=4, ignore_eos=True)
            req.token_ids.ids.extend(prompt["ids"])
            req.sampling.temperature = 0.0
            assert sum(len(m.token_ids) for m in c.stub.Generate(req, timeout=120)) == 4
            metrics = urllib.request.urlopen(c.http_url + "/metrics", timeout=10).read().decode()
            routed[pp] = [float(line.split()[-1]) for line in metrics.splitlines()
                          if line.startswith("tpserve_expert_routed_tokens_total{")]
        finally:
            c.stop()
    # Every computed token (the prompt, then 3 generated ones fed back) x 2 layers x top 2.
    assert sum(routed[1]) == (len(prompt["ids"]) + 3) * 2 * 2
    assert routed[2] == routed[1]
