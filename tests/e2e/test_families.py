"""End-to-end: every family's tiny golden model (tests/golden/families: Llama, Qwen2 with biases,
Qwen2 with YaRN, Qwen3 with QK-norm, Mistral with its sliding window, Gemma 2 with soft-caps and
alternating windows, Gemma 3 with five local layers to one global, Mixtral and Qwen3-MoE with 8
experts of which each token takes 2, split across the ranks) served by real processes from
its GGUF and from its config.json + safetensors (+ tokenizer.json, make_family_tokenizers.py), at
two ranks where its KV heads allow (one for Gemma 3's single KV head), through gRPC and the HTTP
API: the greedy tokens of a token-id prompt equal llama.cpp's (goldens.json) up to llama.cpp's
first near-tie. Mistral's GGUF is a Llama to llama.cpp (no window), so its windowed goldens are
for its config.json form only."""

import json

import pytest

from conftest import ROOT, Cluster, openai_client, pb

DIR = ROOT / "tests/golden/families"
GOLDENS = json.loads((DIR / "goldens.json").read_text())
NEAR_TIE = 0.5
CASES = [(case, form) for case in ["llama", "qwen2", "qwen2_yarn", "qwen3", "mistral", "gemma2",
                                    "gemma3", "mixtral", "qwen3moe", "glm4moe"]
         for form in ["gguf", "hf_dir"] if (case, form) != ("mistral", "gguf")]


def decidable(gaps):
    n = 0
    while n < len(gaps) and gaps[n] >= NEAR_TIE:
        n += 1
    return n


@pytest.fixture(scope="module", params=CASES, ids=lambda p: f"{p[0]}-{p[1]}")
def family(request, tmp_path_factory):
    name, form = request.param
    case = GOLDENS["cases"][name]
    ranks = 2 if case["shapes"]["n_kv_head"] % 2 == 0 else 1
    c = Cluster(ranks=ranks, tmp=tmp_path_factory.mktemp(f"{name}-{form}"),
                model=DIR / case[form], extra_args=["--context=128"])
    yield f"{name} ({form})", case, c
    c.stop()


def test_greedy_tokens_match_llama_cpp_over_grpc_and_http(family):
    name, case, cluster = family
    # The prompt whose greedy run stays decidable longer (Gemma 3's long one starts at a tie).
    long = max(case["prompts"].values(), key=lambda p: decidable(p["greedy_gaps"]))
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
