"""End-to-end: the OpenAI-compatible HTTP front of a real cluster (launcher + worker ranks of
SmolLM2), driven by the official `openai` Python client, curl, and Prometheus' own parser.

The launcher serves HTTP on --http_port and writes the base URL as the ready file's line 2."""

import json
import subprocess
import urllib.error
import urllib.request

import openai
import pytest
from prometheus_client.parser import text_string_to_metric_families

from conftest import ROOT, openai_client

KOREAN_PROMPT = "안녕하세요! 한국어로 짧게 자기소개를 해 주세요."


@pytest.fixture(scope="module")
def client(cluster):
    return openai_client(cluster, timeout=120)


@pytest.fixture(scope="module")
def model(client):
    return client.models.list().data[0].id


def _get(url):
    with urllib.request.urlopen(url, timeout=30) as r:
        return r.status, dict(r.headers), r.read()


def _metrics(http_url):
    """Every sample of /metrics, by sample name and labels."""
    status, headers, body = _get(f"{http_url}/metrics")
    assert status == 200
    assert headers["Content-Type"] == "text/plain; version=0.0.4; charset=utf-8"
    samples = {}
    for family in text_string_to_metric_families(body.decode("utf-8")):
        for s in family.samples:
            samples[(s.name, tuple(sorted(s.labels.items())))] = s.value
    return samples


def test_health_and_models(http_url, client, model):
    status, _, body = _get(f"{http_url}/health")
    assert status == 200 and json.loads(body) == {"status": "ok"}
    models = client.models.list().data
    assert len(models) == 1
    assert models[0].id == model and models[0].owned_by == "tpserve"
    assert models[0].model_extra["context_length"] == 2048


def test_chat_non_streaming_and_streaming_agree(client, model):
    messages = [{"role": "user", "content": "Name three colors."}]
    whole = client.chat.completions.create(model=model, messages=messages, max_tokens=24,
                                           temperature=0)
    assert whole.object == "chat.completion"
    assert whole.id.startswith("chatcmpl-")
    choice = whole.choices[0]
    assert choice.message.role == "assistant"
    assert choice.message.content
    assert choice.finish_reason in ("stop", "length")
    assert 1 <= whole.usage.completion_tokens <= 24
    assert whole.usage.total_tokens == whole.usage.prompt_tokens + whole.usage.completion_tokens

    stream = client.chat.completions.create(model=model, messages=messages, max_tokens=24,
                                            temperature=0, stream=True,
                                            stream_options={"include_usage": True})
    chunks = list(stream)
    assert chunks[0].choices[0].delta.role == "assistant"
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    finishes = [c.choices[0].finish_reason for c in chunks if c.choices and c.choices[0].finish_reason]
    assert text == choice.message.content  # greedy: the same answer either way
    assert finishes == [choice.finish_reason]
    assert chunks[-1].choices == []
    assert chunks[-1].usage.prompt_tokens == whole.usage.prompt_tokens
    assert chunks[-1].usage.completion_tokens == whole.usage.completion_tokens
    assert all(c.id == chunks[0].id for c in chunks)


def test_korean_stream_arrives_as_whole_characters(client, model):
    stream = client.chat.completions.create(
        model=model, messages=[{"role": "user", "content": KOREAN_PROMPT}], max_tokens=48,
        temperature=0, stream=True)
    deltas = [c.choices[0].delta.content for c in stream if c.choices and c.choices[0].delta.content]
    assert len(deltas) > 1
    for d in deltas:
        assert "\ufffd" not in d, f"a delta holds part of a character: {d!r}"


def test_korean_raw_sse_lines_are_valid_utf8_json(http_url, model):
    body = json.dumps({"model": model, "stream": True, "max_tokens": 48, "temperature": 0,
                       "messages": [{"role": "user", "content": KOREAN_PROMPT}]})
    out = subprocess.run(["curl", "-sN", "--max-time", "120", f"{http_url}/v1/chat/completions",
                          "-H", "Content-Type: application/json", "--data-binary", body],
                         capture_output=True, check=True, timeout=150).stdout
    events = [e for e in out.split(b"\n\n") if e.strip()]
    assert events[-1] == b"data: [DONE]"
    for event in events[:-1]:
        assert event.startswith(b"data: "), event
        chunk = json.loads(event[len(b"data: "):].decode("utf-8"))  # strict: raises on bad UTF-8
        content = chunk["choices"][0]["delta"].get("content") or ""
        assert "\ufffd" not in content


def test_completions_with_logprobs(client, model):
    r = client.completions.create(model=model, prompt="The capital of France is", max_tokens=6,
                                  temperature=0, logprobs=2)
    assert r.object == "text_completion"
    assert r.id.startswith("cmpl-")
    c = r.choices[0]
    assert c.text
    assert len(c.logprobs.tokens) == len(c.logprobs.token_logprobs) == len(c.logprobs.top_logprobs)
    assert 1 <= len(c.logprobs.tokens) <= 6
    assert all(lp <= 0 for lp in c.logprobs.token_logprobs)
    assert all(1 <= len(top) <= 2 for top in c.logprobs.top_logprobs)
    assert r.usage.prompt_tokens > 0


def test_metrics_move_by_what_the_requests_used(http_url, client, model):
    before = _metrics(http_url)
    prompt_tokens = completion_tokens = 0
    # ignore_eos: both end by length, so every generated token was also sent (no EOS).
    for prompt in ("One, two, three,", "하나, 둘, 셋,"):
        r = client.completions.create(model=model, prompt=prompt, max_tokens=5, temperature=0,
                                      extra_body={"ignore_eos": True})
        assert r.choices[0].finish_reason == "length"
        prompt_tokens += r.usage.prompt_tokens
        completion_tokens += r.usage.completion_tokens
    chat = client.chat.completions.create(model=model, max_tokens=3, temperature=0,
                                          messages=[{"role": "user", "content": "Hi"}],
                                          extra_body={"ignore_eos": True})
    prompt_tokens += chat.usage.prompt_tokens
    completion_tokens += chat.usage.completion_tokens
    assert completion_tokens == 5 + 5 + 3
    after = _metrics(http_url)

    def moved(name, **labels):
        key = (name, tuple(sorted(labels.items())))
        return after.get(key, 0.0) - before.get(key, 0.0)

    assert moved("tpserve_prompt_tokens_total") == prompt_tokens
    assert moved("tpserve_generation_tokens_total") == completion_tokens
    assert moved("tpserve_requests_total", finish_reason="length") == 3
    assert moved("tpserve_request_duration_seconds_count") == 3


def test_max_tokens_zero_is_a_400_naming_max_tokens(client, model, http_url):
    before = _metrics(http_url)
    with pytest.raises(openai.BadRequestError) as e:
        client.chat.completions.create(model=model, max_tokens=0,
                                       messages=[{"role": "user", "content": "Hi"}])
    assert e.value.status_code == 400
    assert e.value.body["param"] == "max_tokens"
    assert e.value.body["type"] == "invalid_request_error"
    assert e.value.body["message"].startswith("max_tokens = 0")
    after = _metrics(http_url)
    key = ("tpserve_request_errors_total", (("code", "INVALID_ARGUMENT"),))
    assert after.get(key, 0) - before.get(key, 0) == 1


def test_request_id_is_echoed(http_url, model):
    req = urllib.request.Request(
        f"{http_url}/v1/completions", method="POST",
        data=json.dumps({"model": model, "prompt": "Hello", "max_tokens": 2}).encode(),
        headers={"Content-Type": "application/json", "X-Request-Id": "e2e-abc"})
    with urllib.request.urlopen(req, timeout=60) as r:
        assert r.headers["X-Request-Id"] == "e2e-abc"
        assert json.loads(r.read())["id"] == "cmpl-e2e-abc"


def test_unknown_model_is_404(http_url):
    req = urllib.request.Request(
        f"{http_url}/v1/completions", method="POST",
        data=json.dumps({"model": "gpt-4", "prompt": "Hello"}).encode(),
        headers={"Content-Type": "application/json"})
    with pytest.raises(urllib.error.HTTPError) as e:
        urllib.request.urlopen(req, timeout=30)
    assert e.value.code == 404
    assert json.loads(e.value.read())["error"]["code"] == "model_not_found"


# ---- n, best_of and echo with logprobs (the rest of OpenAI's sampling surface) -------------

def test_n_choices_are_the_requests_seeded_seed_plus_index(client, model):
    messages = [{"role": "user", "content": "Write one sentence about the sea."}]
    together = client.chat.completions.create(model=model, messages=messages, n=3, seed=5,
                                              temperature=0.9, max_tokens=12)
    assert [c.index for c in together.choices] == [0, 1, 2]
    for i, choice in enumerate(together.choices):
        alone = client.chat.completions.create(model=model, messages=messages, seed=5 + i,
                                               temperature=0.9, max_tokens=12)
        assert choice.message.content == alone.choices[0].message.content, i
        assert choice.finish_reason == alone.choices[0].finish_reason
    assert len({c.message.content for c in together.choices}) > 1
    # The prompt once, every choice's tokens.
    assert together.usage.prompt_tokens == alone.usage.prompt_tokens
    assert together.usage.completion_tokens >= 3

    streamed = client.chat.completions.create(model=model, messages=messages, n=2, seed=5,
                                              temperature=0.9, max_tokens=12, stream=True)
    text, finishes = {0: "", 1: ""}, {0: 0, 1: 0}
    for chunk in streamed:
        for c in chunk.choices:
            text[c.index] += c.delta.content or ""
            finishes[c.index] += c.finish_reason is not None
    assert finishes == {0: 1, 1: 1}
    assert text == {i: together.choices[i].message.content for i in (0, 1)}


def test_best_of_returns_the_candidate_with_the_highest_mean_logprob(client, model):
    prompt = "My favourite animal is the"
    common = dict(model=model, prompt=prompt, temperature=1.0, max_tokens=6,
                  extra_body={"ignore_eos": True})  # every candidate has all 6 tokens reported
    candidates = []
    for i in range(3):
        r = client.completions.create(seed=21 + i, logprobs=0, **common)
        lps = r.choices[0].logprobs.token_logprobs
        assert len(lps) == 6
        candidates.append((sum(lps) / len(lps), r.choices[0].text))
    best = client.completions.create(seed=21, best_of=3, **common)
    assert len(best.choices) == 1
    assert best.choices[0].text == max(candidates)[1], candidates
    with pytest.raises(openai.BadRequestError) as e:
        client.completions.create(seed=21, best_of=3, stream=True, **common)
    assert e.value.body["param"] == "best_of"
    with pytest.raises(openai.BadRequestError) as e:
        client.completions.create(n=3, best_of=2, **common)
    assert e.value.body["param"] == "best_of"
    assert e.value.body["message"] == "best_of = 2 is invalid: must be in [n = 3, 16]"


def test_echo_with_logprobs_scores_the_prompt_as_llama_cpp_does(client, model):
    golden = json.loads((ROOT / "tests/golden/model/prompt_logprobs.json").read_text())
    english = next(p for p in golden["prompts"] if p["name"] == "english")
    r = client.completions.create(model=model, prompt=english["token_ids"], echo=True, logprobs=1,
                                  max_tokens=2, temperature=0)
    c = r.choices[0]
    assert c.text.startswith(english["text"])
    n = len(english["token_ids"])
    lp = c.logprobs
    assert len(lp.tokens) == n + 2
    assert "".join(lp.tokens[:n]) == english["text"]
    assert lp.token_logprobs[0] is None and lp.top_logprobs[0] is None
    # Within what llama.cpp's own variants differ by (tests/engine/sampling_surface_test.cc).
    for ours, theirs in zip(lp.token_logprobs[1:n], english["prompt_logprobs"]):
        assert abs(ours - theirs) < 0.5, (ours, theirs)
    assert lp.text_offset[:3] == [0, len(lp.tokens[0].encode()), len((lp.tokens[0] + lp.tokens[1]).encode())]
    assert all(len(top) == 1 for top in lp.top_logprobs[1:])
