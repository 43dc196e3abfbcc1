"""End-to-end: Gemma 3 270M, the second bundled model (--model=gemma3-270m: SentencePiece
vocabulary, five sliding-window layers to one global, GeGLU, no chat template in its file), served
through gRPC and the OpenAI-compatible HTTP API, against llama.cpp on the same chat: the prompt
its built-in "gemma" format renders and tokenizes, and its greedy answer up to its first near-tie
(tests/golden/model/gemma3/chat_golden.json, from make_chat_golden.py)."""

import json
import pathlib

import pytest

from conftest import MODEL_DIR, ROOT, Cluster, openai_client, pb

GOLDEN = json.loads((ROOT / "tests/golden/model/gemma3/chat_golden.json").read_text())
NEAR_TIE = 0.5  # logits: below this top-2 gap either token is a right greedy pick


@pytest.fixture(scope="module")
def gemma(tmp_path_factory):
    if not (MODEL_DIR / GOLDEN["model_file"]).exists():
        pytest.fail(f"{MODEL_DIR / GOLDEN['model_file']} is missing: run scripts/setup.sh")
    # One rank: the model has one KV head (TP past the KV heads is the pipeline issue's).
    c = Cluster(ranks=1, tmp=tmp_path_factory.mktemp("gemma3"), model="gemma3-270m")
    yield c
    c.stop()


def chat_request(text, max_new_tokens):
    req = pb.GenerateRequest(max_new_tokens=max_new_tokens)
    req.chat.messages.add(role="user", content=text)
    req.sampling.temperature = 0.0
    return req


def decidable(gaps):
    n = 0
    while n < len(gaps) and gaps[n] >= NEAR_TIE:
        n += 1
    return n


@pytest.mark.parametrize("i", range(len(GOLDEN["questions"])))
def test_prompt_and_greedy_answer_match_llama_cpp(gemma, i):
    q = GOLDEN["questions"][i]
    req = chat_request(q["question"], len(q["greedy_ids"]))
    tok = gemma.stub.Tokenize(pb.TokenizeRequest(chat=req.chat))
    assert tok.prompt_text == "<bos>" + q["prompt_text"]
    assert list(tok.ids) == q["prompt_ids"]
    msgs = list(gemma.stub.Generate(req, timeout=120))
    assert len(msgs) >= 2, "expected a stream"
    ids = [t for m in msgs for t in m.token_ids]
    n = decidable(q["greedy_gaps"])
    assert n > 0, "the golden's first step is a near-tie: nothing to compare"
    assert ids[:n] == q["greedy_ids"][:n], f"first near-tie of llama.cpp at step {n}"
    assert msgs[-1].usage.prompt_tokens == len(q["prompt_ids"])


def test_http_chat_streams_whole_characters_and_agrees_with_grpc(gemma):
    q = GOLDEN["questions"][1]  # Korean: byte-fallback tokens must not split a character
    msgs = list(gemma.stub.Generate(chat_request(q["question"], 24), timeout=120))
    grpc_text = "".join(m.text for m in msgs)
    client = openai_client(gemma)
    model = client.models.list().data[0].id
    whole = client.chat.completions.create(
        model=model, messages=[{"role": "user", "content": q["question"]}], temperature=0,
        max_tokens=24)
    assert whole.choices[0].message.content == grpc_text
    pieces = [c.choices[0].delta.content or ""
              for c in client.chat.completions.create(
                  model=model, messages=[{"role": "user", "content": q["question"]}],
                  temperature=0, max_tokens=24, stream=True) if c.choices]
    assert "".join(pieces) == grpc_text
    assert all("\ufffd" not in p for p in pieces)


def test_echo_with_logprobs_scores_the_prompt_as_llama_cpp_does(gemma):
    golden = json.loads((ROOT / "tests/golden/model/gemma3/prompt_logprobs.json").read_text())
    client = openai_client(gemma)
    model = client.models.list().data[0].id
    for p in golden["prompts"]:
        r = client.completions.create(model=model, prompt=p["token_ids"], echo=True, logprobs=1,
                                      max_tokens=1, temperature=0)
        lp = r.choices[0].logprobs
        n = len(p["token_ids"])
        assert lp.token_logprobs[0] is None
        diffs = [abs(ours - theirs)
                 for ours, theirs in zip(lp.token_logprobs[1:n], p["prompt_logprobs"])]
        assert len(diffs) == n - 1
        # As SmolLM2's (test_http_api.py): within what llama.cpp's own variants differ by.
        assert max(diffs) < 0.5, (p["name"], max(diffs))
        assert sum(diffs) / len(diffs) < 0.1, (p["name"], sum(diffs) / len(diffs))
