"""End-to-end: launch real processes (coordinator + 3 worker ranks of SmolLM2) and drive the
public API from Python gRPC, as an internal service would."""

import os
import signal
import time

import grpc
import pytest
from gguf import GGUFReader

from conftest import MODEL, Cluster, pb


def _byte_decoder():
    """GPT-2's byte <-> unicode table, written from its definition."""
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) + \
        list(range(ord("®"), ord("ÿ") + 1))
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return {chr(c): b for b, c in zip(bs, cs)}


_VOCAB = None


def detokenize(ids):
    """Independent detokenizer: token strings from the GGUF (via the gguf package)."""
    global _VOCAB
    if _VOCAB is None:
        field = GGUFReader(str(MODEL)).fields["tokenizer.ggml.tokens"]
        _VOCAB = [bytes(field.parts[i]).decode("utf-8") for i in field.data]
    dec = _byte_decoder()
    return b"".join(bytes(dec[ch] for ch in _VOCAB[i]) for i in ids).decode("utf-8")


def chat_request(text, max_new_tokens=24, **kw):
    req = pb.GenerateRequest(max_new_tokens=max_new_tokens, **kw)
    req.chat.messages.add(role="user", content=text)
    req.sampling.temperature = 0.0
    return req


def collect(stub, req, timeout=120):
    msgs = list(stub.Generate(req, timeout=timeout))
    ids = [i for m in msgs for i in m.token_ids]
    return msgs, ids, "".join(m.text for m in msgs)


@pytest.mark.parametrize("question", ["What is the capital of France?", "안녕하세요! 자기소개를 해 주세요."])
def test_streamed_answer_is_whole_characters_and_matches_its_ids(cluster, question):
    req = chat_request(question)
    msgs, ids, text = collect(cluster.stub, req)
    assert len(msgs) >= 2, "expected a stream, got one message"
    assert ids, "no tokens generated"
    for m in msgs:
        m.text.encode("utf-8")  # every delta is whole characters (protobuf would refuse else)
    assert text == detokenize(ids)
    last = msgs[-1]
    assert last.finish_reason in (pb.FINISH_REASON_EOS, pb.FINISH_REASON_LENGTH)
    count = cluster.stub.CountTokens(pb.TokenizeRequest(chat=req.chat))
    assert last.usage.prompt_tokens == count.count
    eos = 1 if last.finish_reason == pb.FINISH_REASON_EOS else 0
    assert last.usage.completion_tokens == len(ids) + eos
    if last.finish_reason == pb.FINISH_REASON_LENGTH:
        assert len(ids) == 24
    assert last.usage.time_to_first_token_s > 0
    for m in msgs[:-1]:
        assert m.finish_reason == pb.FINISH_REASON_UNSPECIFIED


def test_greedy_is_deterministic_and_seeded_sampling_repeats(cluster):
    _, ids_a, _ = collect(cluster.stub, chat_request("Name three colors.", 16))
    _, ids_b, _ = collect(cluster.stub, chat_request("Name three colors.", 16))
    assert ids_a == ids_b
    req = chat_request("Tell me a story.", 16)
    req.sampling.temperature = 0.9
    req.sampling.seed = 1234
    _, s1, _ = collect(cluster.stub, req)
    _, s2, _ = collect(cluster.stub, req)
    assert s1 == s2


def test_model_info(cluster):
    info = cluster.stub.GetModelInfo(pb.GetModelInfoRequest())
    assert info.tensor_parallel_degree == int(os.environ.get("TPSERVE_E2E_RANKS", "3"))
    assert info.vocab_size == 49152
    assert info.context_length == 2048
    assert info.weight_format == "gguf:Q4_1"


INVALID = [
    (dict(text="hi", sampling=pb.SamplingParams(temperature=-1)),
     "sampling.temperature = -1 is out of range"),
    (dict(text="hi", sampling=pb.SamplingParams(top_p=1.5)), "sampling.top_p = 1.5"),
    (dict(text="hi", sampling=pb.SamplingParams(top_k=-2)), "sampling.top_k = -2"),
    (dict(text="hi", sampling=pb.SamplingParams(min_p=2.0)), "sampling.min_p = 2"),
    (dict(text="hi", sampling=pb.SamplingParams(temperature=float("nan"))), "sampling.temperature = nan"),
    (dict(text="hi", max_new_tokens=0), "max_new_tokens = 0 is invalid: must be at least 1"),
    (dict(text="hi", top_logprobs=21), "top_logprobs = 21"),
    (dict(token_ids=pb.TokenIds(ids=[1, 49152])), "token_ids.ids[1] = 49152 is invalid: token ids must be in [0, 49152)"),
    (dict(text=""), "text = \"\" is invalid"),
    (dict(), "input is missing"),
    (dict(text="hi", stop_sequences=[""]), "stop_sequences[0] = \"\""),
    (dict(text="hi " * 1500, max_new_tokens=1000), "context_length_exceeded: prompt has"),
]


@pytest.mark.parametrize("fields,message", INVALID)
def test_invalid_requests_are_refused_with_the_field_value_and_bound(cluster, fields, message):
    with pytest.raises(grpc.RpcError) as err:
        list(cluster.stub.Generate(pb.GenerateRequest(**fields), timeout=30))
    assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert message in err.value.details()


def test_context_length_error_gives_both_numbers(cluster):
    with pytest.raises(grpc.RpcError) as err:
        list(cluster.stub.Generate(pb.GenerateRequest(text="hi " * 1500, max_new_tokens=1000), timeout=30))
    details = err.value.details()
    assert "max_new_tokens is 1000" in details and "context length of 2048 tokens" in details


def test_stop_sequence_ends_the_stream_without_sending_it(cluster):
    _, _, full = collect(cluster.stub, chat_request("Count from 1 to 10.", 40))
    assert len(full) > 4
    stop = full[len(full) // 2: len(full) // 2 + 2]
    req = chat_request("Count from 1 to 10.", 40, stop_sequences=[stop])
    msgs, _, text = collect(cluster.stub, req)
    assert msgs[-1].finish_reason == pb.FINISH_REASON_STOP_SEQUENCE
    assert msgs[-1].matched_stop_sequence == stop
    assert text == full[:full.index(stop)]


def test_cancel_mid_stream_then_the_cluster_keeps_serving(cluster):
    call = cluster.stub.Generate(chat_request("Write a long essay about the sea.", 400), timeout=120)
    got = 0
    for _ in call:
        got += 1
        if got == 3:
            call.cancel()
            break
    assert call.code() == grpc.StatusCode.CANCELLED
    _, ids, _ = collect(cluster.stub, chat_request("Say hi.", 8))
    assert ids
    assert cluster.health() == 1


def test_deadline_ends_a_long_generation(cluster):
    start = time.time()
    with pytest.raises(grpc.RpcError) as err:
        list(cluster.stub.Generate(chat_request("Write a long essay about mountains.", 1000), timeout=1.0))
    assert err.value.code() == grpc.StatusCode.DEADLINE_EXCEEDED
    assert time.time() - start < 5
    _, ids, _ = collect(cluster.stub, chat_request("Say hi.", 8))
    assert ids


@pytest.mark.parametrize("sig,how", [(signal.SIGKILL, "was killed by signal 9"),
                                     (signal.SIGSTOP, "was stopped by signal 19")])
def test_a_dead_or_stalled_rank_is_named_and_the_launcher_exits_1(tmp_path, sig, how):
    """With replacement off (--rank_replace_timeout_s=0: today's behaviour without it)."""
    ranks = int(os.environ.get("TPSERVE_E2E_RANKS", "3"))
    if ranks < 2:
        pytest.skip("needs at least 2 ranks")
    c = Cluster(ranks=ranks, tmp=tmp_path, extra_args=["--rank_replace_timeout_s=0"])
    victim = c.worker_pids()[1]
    try:
        assert c.health() == 1
        call = c.stub.Generate(chat_request("Write a long essay about rivers.", 1500), timeout=120)
        it = iter(call)
        next(it)
        os.kill(victim, sig)
        hit_at = time.time()
        with pytest.raises(grpc.RpcError) as err:
            for _ in it:
                pass
        assert err.value.code() == grpc.StatusCode.UNAVAILABLE
        assert "rank 1" in err.value.details(), err.value.details()
        assert time.time() - hit_at < 10
        # No zombie: the launcher names the rank and how, and exits 1 for a supervisor.
        assert c.proc.wait(timeout=20) == 1, c.output()
        assert f"rank 1 (pid {victim}) {how}" in c.output(), c.output()
        assert "exiting 1" in c.output(), c.output()
    finally:
        if sig == signal.SIGSTOP:
            try:
                os.kill(victim, signal.SIGKILL)
            except ProcessLookupError:
                pass
        c.stop()
    for pid in c.worker_pids():
        with pytest.raises(ProcessLookupError):
            os.kill(pid, 0)


def test_nine_ranks_give_one_ranks_tokens_and_logprobs_bit_for_bit(tmp_path):
    """SmolLM2 at --ranks=9 (issue 40): one query head a rank, each of the 3 KV heads copied to 3
    ranks, the MLP's 48 blocks of 32 split 6 or 5 a rank. With --deterministic_tp at 9 chunks on
    both, the greedy tokens, their logprobs and the prompt's are one rank's, bit for bit."""
    got = {}
    for ranks, extra in ((1, ["--deterministic_tp", "--deterministic_tp_chunks=9"]),
                         (9, ["--deterministic_tp"])):
        tmp = tmp_path / f"ranks{ranks}"
        tmp.mkdir()
        c = Cluster(ranks=ranks, tmp=tmp, extra_args=extra + ["--context=256"])
        try:
            req = chat_request("What is the capital of France?", max_new_tokens=12,
                               logprobs=True, top_logprobs=2, prompt_logprobs=True)
            msgs = list(c.stub.Generate(req, timeout=300))
            got[ranks] = (
                [i for m in msgs for i in m.token_ids],
                [(lp.token_id, lp.logprob, [(t.token_id, t.logprob) for t in lp.top])
                 for m in msgs for lp in list(m.prompt_logprobs) + list(m.logprobs)])
        finally:
            c.stop()
    assert len(got[1][0]) == 12
    assert len(got[1][1]) > 12  # the prompt's and the answer's
    assert got[9] == got[1]


def test_pipeline_stages_give_one_ranks_tokens_and_logprobs_bit_for_bit(tmp_path):
    """SmolLM2 in two pipeline stages (issue 40): --pp=2 (stages of 15 layers, one rank each)
    and --pp=2 --ranks=3 (six ranks, each stage tensor-parallel inside), under
    --deterministic_tp at 3 chunks. Three concurrent gRPC streams (a step's sequences go stage to
    stage in two micro-batches) and greedy HTTP completions give one rank's tokens, their
    logprobs and the prompts' bit for bit; the launcher started ranks x pp workers."""
    import concurrent.futures
    from conftest import openai_client
    questions = ["What is the capital of France?", "Name three primary colors.",
                 "안녕하세요! 자기소개를 해 주세요."]
    got = {}
    layouts = (("one", 1, ["--deterministic_tp_chunks=3"]), ("pp2", 1, ["--pp=2",
               "--deterministic_tp_chunks=3"]), ("pp2xtp3", 3, ["--pp=2"]))
    for name, ranks, extra in layouts:
        tmp = tmp_path / name
        tmp.mkdir()
        c = Cluster(ranks=ranks, tmp=tmp,
                    extra_args=extra + ["--deterministic_tp", "--context=256", "--max_seqs=4"])
        try:
            def generate(q):
                req = chat_request(q, max_new_tokens=10, logprobs=True, top_logprobs=2,
                                   prompt_logprobs=True)
                msgs = list(c.stub.Generate(req, timeout=300))
                return ([i for m in msgs for i in m.token_ids],
                        [(lp.token_id, lp.logprob, [(t.token_id, t.logprob) for t in lp.top])
                         for m in msgs for lp in list(m.prompt_logprobs) + list(m.logprobs)])

            with concurrent.futures.ThreadPoolExecutor(len(questions)) as pool:
                streams = list(pool.map(generate, questions))
            client = openai_client(c)
            model = client.models.list().data[0].id
            text = client.completions.create(model=model, prompt="The three laws of motion are",
                                             max_tokens=12, temperature=0).choices[0].text
            got[name] = (streams, text)
            assert len(c.worker_pids()) == ranks * (2 if "--pp=2" in extra else 1)
            if name != "one":
                assert "pipeline stages" in c.output()
        finally:
            c.stop()
    for ids, logprobs in got["one"][0]:
        assert len(ids) == 10
        assert len(logprobs) > 10  # the prompt's and the answer's
    assert got["one"][1]
    assert got["pp2"] == got["one"]
    assert got["pp2xtp3"] == got["one"]


@pytest.mark.parametrize("layout", ["tp3", "pp2"])
def test_a_killed_rank_is_replaced_in_place_and_every_stream_completes(tmp_path, layout):
    """Issue 40: SIGKILL rank 1 (at TP 3 a tensor-parallel rank; at PP 2 the second stage)
    under 16 concurrent greedy streams. The launcher starts a successor, which loads rank 1's
    shard while the others regroup keeping their weights; every sequence is recomputed from
    its tokens. Every stream completes with the tokens of an undisturbed run of the same
    layout, no other rank's process changed, and /metrics counts one replacement."""
    import concurrent.futures
    import threading
    import urllib.request
    ranks, extra = {"tp3": (3, []), "pp2": (1, ["--pp=2"])}[layout]
    args = extra + ["--context=512", "--max_seqs=16"]
    prompts = [f"Tell me fact number {i} about rivers." for i in range(16)]

    def run(c, started=None):
        def one(i):
            req = chat_request(prompts[i], max_new_tokens=40, ignore_eos=True)
            ids = []
            for m in c.stub.Generate(req, timeout=300):
                ids += m.token_ids
                if started is not None and ids:
                    started[i].set()
            return ids
        with concurrent.futures.ThreadPoolExecutor(len(prompts)) as pool:
            return list(pool.map(one, range(len(prompts))))

    (tmp_path / "ref").mkdir()
    c = Cluster(ranks=ranks, tmp=tmp_path / "ref", extra_args=args)
    try:
        want = run(c)
    finally:
        c.stop()
    assert all(len(ids) == 40 for ids in want)

    (tmp_path / "kill").mkdir()
    c = Cluster(ranks=ranks, tmp=tmp_path / "kill", extra_args=args)
    try:
        pids = c.worker_pids()
        started = [threading.Event() for _ in prompts]
        with concurrent.futures.ThreadPoolExecutor(1) as pool:
            streams = pool.submit(run, c, started)
            for e in started:
                assert e.wait(120), c.output()[-3000:]
            os.kill(pids[1], signal.SIGKILL)
            got = streams.result(timeout=300)
        assert got == want
        out = c.output()
        assert f"rank 1 (pid {pids[1]}) was killed by signal 9 (Killed); replacing it in place" in out, out
        assert "rank 1 is gone; started its successor" in out, out
        for pid in pids[:1] + pids[2:]:
            os.kill(pid, 0)  # still the same process
        assert c.proc.poll() is None, out
        with urllib.request.urlopen(f"{c.http_url}/metrics", timeout=10) as r:
            metrics = r.read().decode()
        assert "tpserve_rank_replacements_total 1\n" in metrics, metrics
        assert c.health() == 1
    finally:
        c.stop()
