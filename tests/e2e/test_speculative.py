"""End-to-end: speculative decoding through a real launcher and three worker ranks, on SmolLM2.

The target is the Q4_1 file widened to bf16 on load (--weights=bf16); the draft model is the
Q4_1 file as stored, loaded by every rank beside the target (--speculative=draft). K is fixed
(--speculative_adaptive=false): on a small CPU the adaptive policy rightly stops drafting once
it has measured the costs, and these tests need drafts to check. Greedy
tokens must be the same as a cluster without speculation gives, alone and four at once, with the
draft model and with prompt lookup; the usage, the request log and the Prometheus counters
must say what was drafted and accepted; a request can turn it off; bad flags are refused.
"""

import json
import re
import subprocess
import urllib.request
from concurrent.futures import ThreadPoolExecutor

import pytest

from conftest import MODEL, ROOT, Cluster, openai_client, pb

PROMPTS = [
    "Repeat this sentence exactly: the quick brown fox jumps over the lazy dog.",
    "Rename x to total in: def f(x):\n    x = x + 1\n    return x",
    "Tell me about the sea.",
    "서울에 대해 한 문장으로 말해 주세요.",
]
COMMON = ["--weights=bf16", "--max_seqs=4"]


@pytest.fixture(scope="module")
def clusters(tmp_path_factory):
    made = {}
    try:
        made["off"] = Cluster(ranks=3, tmp=tmp_path_factory.mktemp("spec_off"), extra_args=COMMON)
        made["draft"] = Cluster(
            ranks=3, tmp=tmp_path_factory.mktemp("spec_draft"),
            extra_args=COMMON + ["--speculative=draft", f"--draft_model={MODEL}",
                                 "--num_speculative_tokens=4", "--speculative_max_batch=0",
                                 "--speculative_adaptive=false"])
        made["ngram"] = Cluster(
            ranks=3, tmp=tmp_path_factory.mktemp("spec_ngram"),
            extra_args=COMMON + ["--speculative=ngram", "--num_speculative_tokens=6",
                                 "--speculative_max_batch=0", "--speculative_adaptive=false"])
        yield made
    finally:
        for c in made.values():
            c.stop()


def generate(cluster, prompt, max_new_tokens=40, **fields):
    req = pb.GenerateRequest(chat=pb.Chat(messages=[pb.ChatMessage(role="user", content=prompt)]),
                             max_new_tokens=max_new_tokens, **fields)
    req.sampling.temperature = 0.0
    ids, text, last, request_id = [], "", None, ""
    for r in cluster.stub.Generate(req, timeout=300):
        ids.extend(r.token_ids)
        text += r.text
        request_id = request_id or r.request_id  # set on the first message
        last = r
    last.request_id = request_id
    return ids, text, last


def metrics(cluster):
    with urllib.request.urlopen(f"{cluster.http_url.rstrip('/')}/metrics", timeout=30) as r:
        body = r.read().decode()
    out = {}
    for line in body.splitlines():
        m = re.match(r"^(tpserve_spec_decode_\w+) (\S+)$", line)
        if m:
            out[m.group(1)] = float(m.group(2))
    return out


def test_greedy_tokens_are_the_same_alone_and_together(clusters):
    expected = [generate(clusters["off"], p)[0] for p in PROMPTS]
    for name in ("draft", "ngram"):
        c = clusters[name]
        alone = [generate(c, p)[0] for p in PROMPTS]
        assert alone == expected, name
        with ThreadPoolExecutor(len(PROMPTS)) as pool:
            together = list(pool.map(lambda p: generate(c, p)[0], PROMPTS))
        assert together == expected, name


def test_usage_log_and_counters_say_what_was_drafted(clusters):
    c = clusters["draft"]
    before = metrics(c)
    ids, _, last = generate(c, PROMPTS[0])
    u = last.usage
    assert u.completion_tokens == len(ids) or last.finish_reason == pb.FINISH_REASON_EOS
    assert u.draft_tokens > 0 and u.speculative_steps > 0
    assert 0 < u.accepted_draft_tokens <= u.draft_tokens
    after = metrics(c)
    assert (after["tpserve_spec_decode_num_draft_tokens_total"]
            - before["tpserve_spec_decode_num_draft_tokens_total"]) == u.draft_tokens
    assert (after["tpserve_spec_decode_num_accepted_tokens_total"]
            - before["tpserve_spec_decode_num_accepted_tokens_total"]) == u.accepted_draft_tokens
    assert (after["tpserve_spec_decode_num_drafts_total"]
            - before["tpserve_spec_decode_num_drafts_total"]) == u.speculative_steps
    emitted = (after["tpserve_spec_decode_num_emitted_tokens_total"]
               - before["tpserve_spec_decode_num_emitted_tokens_total"])
    assert u.accepted_draft_tokens < emitted <= u.accepted_draft_tokens + u.speculative_steps
    # The request log line (stderr of the launcher) carries the same figures.
    lines = [json.loads(l) for l in c.output().splitlines() if l.startswith('{"')]
    mine = [l for l in lines if l.get("request_id") == last.request_id]
    assert len(mine) == 1, c.output()[-2000:]
    line = mine[-1]
    assert line["draft_tokens"] == u.draft_tokens
    assert line["accepted_draft_tokens"] == u.accepted_draft_tokens
    assert line["draft_acceptance_rate"] == pytest.approx(u.accepted_draft_tokens / u.draft_tokens)
    assert line["mean_accepted_length"] == pytest.approx(
        1 + u.accepted_draft_tokens / u.speculative_steps)


def test_http_usage_and_the_per_request_switch(clusters):
    client = openai_client(clusters["ngram"])
    model = client.models.list().data[0].id
    kwargs = dict(model=model, messages=[{"role": "user", "content": PROMPTS[0]}],
                  max_tokens=40, temperature=0)
    on = client.chat.completions.create(**kwargs)
    off = client.chat.completions.create(**kwargs, extra_body={"speculative": False})
    assert on.choices[0].message.content == off.choices[0].message.content
    spec = on.usage.model_extra["speculative"]
    details = on.usage.completion_tokens_details
    assert spec["draft_tokens"] > 0
    assert details.accepted_prediction_tokens == spec["accepted_draft_tokens"]
    assert details.rejected_prediction_tokens == spec["draft_tokens"] - spec["accepted_draft_tokens"]
    assert spec["mean_accepted_length"] == pytest.approx(
        1 + spec["accepted_draft_tokens"] / spec["steps"])
    assert "speculative" not in (off.usage.model_extra or {})


@pytest.mark.parametrize("flags, message", [
    (["--speculative=draft"], "--draft_model=: a draft model is given exactly with --speculative=draft"),
    (["--speculative=ngram", f"--draft_model={MODEL}"], "a draft model is given exactly with"),
    (["--speculative=eagle"], "--speculative=eagle: must be off, ngram, draft or mtp"),
    (["--speculative=mtp"], "has no multi-token-prediction layer (its num_nextn_predict_layers "
     "is 0)"),
    (["--speculative=mtp", "--num_speculative_tokens=2"],
     "--num_speculative_tokens=2: --speculative=mtp drafts 1 token per step"),
    (["--speculative=ngram", "--num_speculative_tokens=0"],
     "--num_speculative_tokens=0: must be in [1, 16]"),
])
def test_bad_flags_are_refused_before_anything_starts(flags, message):
    out = subprocess.run([str(ROOT / "bazel-bin/deploy/launch"), f"--model={MODEL}", *flags],
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 2, out.stderr
    assert message in out.stderr, out.stderr
