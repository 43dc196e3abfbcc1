"""The public gRPC door under load and at its edges, on real launcher + worker processes:
admission control, threads at 200 open streams, graceful drain on SIGTERM, TLS (mutual) with
a bearer token, invalid UTF-8, and the warning for a plaintext non-loopback listener."""

import json
import pathlib
import signal
import ssl
import subprocess
import time
import urllib.error
import urllib.request

import grpc
import pytest

from conftest import Cluster, pb, pb_grpc


def _threads(pid):
    for line in pathlib.Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("Threads:"):
            return int(line.split()[1])
    raise AssertionError("no Threads line")


def _long_request(n=400):
    return pb.GenerateRequest(text="Count slowly:", max_new_tokens=n, ignore_eos=True,
                              sampling=pb.SamplingParams(temperature=0.0))


def _wait(predicate, timeout=60, what="condition"):
    deadline = time.time() + timeout
    while not predicate():
        assert time.time() < deadline, f"timed out waiting for {what}"
        time.sleep(0.05)


def test_200_open_streams_stay_within_a_few_dozen_threads_and_the_queue_bound_refuses(tmp_path):
    c = Cluster(ranks=1, tmp=tmp_path, extra_args=["--max_queued_requests=196", "--listen=0.0.0.0",
                                                    "--drain_timeout_s=5"])
    try:
        assert "WARNING: listening on 0.0.0.0 (not loopback) without TLS" in c.output()
        idle = _threads(c.proc.pid)
        # 4 running (--max_seqs=4) + 196 queued = 200 streams, all open at once.
        calls = [c.stub.Generate(_long_request(), timeout=300) for _ in range(200)]
        time.sleep(2.0)
        busy = _threads(c.proc.pid)
        # One more is past the bound: refused before any token, with a retry hint.
        refused = c.stub.Generate(_long_request(), timeout=30)
        with pytest.raises(grpc.RpcError) as e:
            next(refused)
        assert e.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED, e.value.details()
        assert "max_queued_requests = 196" in e.value.details()
        retry = dict(e.value.trailing_metadata() or ()).get("retry-after")
        assert retry is not None and int(retry) >= 1
        print(f"launcher threads: idle {idle}, with 200 open streams {busy}")
        assert busy <= 48, f"{busy} threads with 200 streams open (idle: {idle})"
        # Streams are served in arrival order; whichever ones run are streaming tokens.
        assert sum(1 for call in calls if call.running()) == 200
        for call in calls:
            call.cancel()
        # The cancelled streams leave room: a new request runs to its end.
        # (Cancels reach the engine at its next step: until then the queue may still be full.)
        deadline = time.time() + 60
        while True:
            try:
                done = list(c.stub.Generate(_long_request(3), timeout=120))
                break
            except grpc.RpcError as err:
                assert err.code() == grpc.StatusCode.RESOURCE_EXHAUSTED and time.time() < deadline
                time.sleep(0.2)
        assert done[-1].finish_reason == pb.FINISH_REASON_LENGTH
    finally:
        c.stop()


def test_sigterm_drains_a_stream_in_flight_to_its_normal_finish_and_exits_0(tmp_path):
    c = Cluster(ranks=1, tmp=tmp_path, extra_args=["--drain_timeout_s=120"])
    stream = c.stub.Generate(_long_request(48), timeout=300)
    got = [next(stream)]
    c.proc.send_signal(signal.SIGTERM)
    _wait(lambda: "draining" in c.output(), what="the drain to begin")
    # New requests are refused while the one in flight runs on.
    with pytest.raises(grpc.RpcError) as e:
        next(c.stub.Generate(_long_request(4), timeout=30))
    assert e.value.code() == grpc.StatusCode.UNAVAILABLE
    assert "draining" in e.value.details()
    assert c.health() == 2  # NOT_SERVING
    got += list(stream)
    assert got[-1].finish_reason == pb.FINISH_REASON_LENGTH
    assert got[-1].usage.completion_tokens == 48
    assert c.proc.wait(timeout=60) == 0, c.output()
    assert "drained (0 request(s) cancelled at the timeout)" in c.output()
    c.channel.close()


def test_drain_timeout_cancels_what_is_left(tmp_path):
    c = Cluster(ranks=1, tmp=tmp_path, extra_args=["--drain_timeout_s=1"])
    stream = c.stub.Generate(_long_request(1500), timeout=300)
    next(stream)
    c.proc.send_signal(signal.SIGTERM)
    with pytest.raises(grpc.RpcError) as e:
        list(stream)
    assert e.value.code() in (grpc.StatusCode.CANCELLED, grpc.StatusCode.UNAVAILABLE)
    assert c.proc.wait(timeout=60) == 0, c.output()
    assert "drained (1 request(s) cancelled at the timeout)" in c.output()
    c.channel.close()


def _make_pki(d):
    def run(*args):
        subprocess.run(["openssl", *args], check=True, capture_output=True, cwd=d)
    run("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", "ca.key", "-out", "ca.pem",
        "-days", "1", "-subj", "/CN=tpserve test CA")
    for name in ("server", "client"):
        run("req", "-newkey", "rsa:2048", "-nodes", "-keyout", f"{name}.key", "-out", f"{name}.csr",
            "-subj", f"/CN={name}")
        (d / f"{name}.ext").write_text("subjectAltName=IP:127.0.0.1,DNS:localhost\n")
        run("x509", "-req", "-in", f"{name}.csr", "-CA", "ca.pem", "-CAkey", "ca.key",
            "-CAcreateserial", "-out", f"{name}.pem", "-days", "1", "-extfile", f"{name}.ext")
    return {k: (d / f"{k}").read_bytes() for k in
            ("ca.pem", "server.pem", "client.pem", "client.key")}


def test_mutual_tls_and_bearer_token(tmp_path):
    pki_dir = tmp_path / "pki"
    pki_dir.mkdir()
    pki = _make_pki(pki_dir)
    token = "t0ken-for-the-e2e-test"
    (tmp_path / "token").write_text(token + "\n")
    c = Cluster(ranks=1, tmp=tmp_path, extra_args=[
        f"--tls_cert_file={pki_dir / 'server.pem'}", f"--tls_key_file={pki_dir / 'server.key'}",
        f"--tls_client_ca_file={pki_dir / 'ca.pem'}", f"--auth_token_file={tmp_path / 'token'}"])
    try:
        assert "WARNING" not in c.output()
        req = pb.GenerateRequest(text="Hi", max_new_tokens=3)

        def call(creds, auth):
            with grpc.secure_channel(c.address, creds) as ch:
                stub = pb_grpc.TpServeStub(ch)
                md = [("authorization", auth)] if auth else None
                return list(stub.Generate(req, metadata=md, timeout=30))

        good = grpc.ssl_channel_credentials(root_certificates=pki["ca.pem"],
                                            private_key=pki["client.key"],
                                            certificate_chain=pki["client.pem"])
        out = call(good, f"Bearer {token}")
        assert out[-1].usage.completion_tokens >= 1

        with pytest.raises(grpc.RpcError) as e:
            call(good, "Bearer wrong-token-wrong-token")
        assert e.value.code() == grpc.StatusCode.UNAUTHENTICATED
        with pytest.raises(grpc.RpcError) as e:
            call(good, None)
        assert e.value.code() == grpc.StatusCode.UNAUTHENTICATED

        # A client that does not trust our CA, or has no certificate of its own, gets nowhere.
        with pytest.raises(grpc.RpcError) as e:
            call(grpc.ssl_channel_credentials(), f"Bearer {token}")
        assert e.value.code() == grpc.StatusCode.UNAVAILABLE
        with pytest.raises(grpc.RpcError) as e:
            call(grpc.ssl_channel_credentials(root_certificates=pki["ca.pem"]), f"Bearer {token}")
        assert e.value.code() == grpc.StatusCode.UNAVAILABLE
        with grpc.insecure_channel(c.address) as ch:
            with pytest.raises(grpc.RpcError) as e:
                list(pb_grpc.TpServeStub(ch).Generate(req, timeout=10))
            assert e.value.code() == grpc.StatusCode.UNAVAILABLE

        # The operator's client speaks it too.
        client = pathlib.Path(__file__).resolve().parents[2] / "bazel-bin/deploy/client"
        assert client.exists(), "build first: bazel build //deploy:client"
        out = subprocess.run(
            [str(client), f"--address={c.address}", f"--tls_ca_file={pki_dir / 'ca.pem'}",
             f"--tls_cert_file={pki_dir / 'client.pem'}", f"--tls_key_file={pki_dir / 'client.key'}",
             f"--auth_token_file={tmp_path / 'token'}", "--max_new_tokens=3", "Hi"],
            capture_output=True, text=True, timeout=60)
        assert out.returncode == 0, out.stderr
        assert "[prompt" in out.stderr

                # The HTTP port: the same certificate, client CA and token.
        assert c.http_url.startswith("https://"), c.http_url

        def get(path, ctx, auth):
            r = urllib.request.Request(f"{c.http_url}{path}",
                                       headers={"Authorization": auth} if auth else {})
            with urllib.request.urlopen(r, context=ctx, timeout=30) as resp:
                return resp.status, json.loads(resp.read())

        mtls = ssl.create_default_context(cafile=str(pki_dir / "ca.pem"))
        mtls.load_cert_chain(str(pki_dir / "client.pem"), str(pki_dir / "client.key"))
        status, models = get("/v1/models", mtls, f"Bearer {token}")
        assert status == 200 and models["data"][0]["object"] == "model"
        with pytest.raises(urllib.error.HTTPError) as e:
            get("/v1/models", mtls, "Bearer wrong-token-wrong-token")
        assert e.value.code == 401
        no_client_cert = ssl.create_default_context(cafile=str(pki_dir / "ca.pem"))
        with pytest.raises((ssl.SSLError, urllib.error.URLError, ConnectionError)):
            get("/v1/models", no_client_cert, f"Bearer {token}")
        with pytest.raises((ssl.SSLError, urllib.error.URLError)):
            get("/v1/models", ssl.create_default_context(), f"Bearer {token}")
    finally:
        c.stop()


def test_invalid_utf8_is_invalid_argument_naming_the_field(cluster):
    # Python's protobuf refuses to build such a message, so the bytes are made by hand:
    # field 1 (text), length 3, "a\xffb".
    raw = cluster.channel.unary_stream("/tpserve.v1.TpServe/Generate",
                                       request_serializer=lambda b: b,
                                       response_deserializer=pb.GenerateResponse.FromString)
    with pytest.raises(grpc.RpcError) as e:
        list(raw(b"\x0a\x03a\xffb", timeout=30))
    assert e.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert e.value.details() == (
        "text = 3 bytes is invalid: text must be valid UTF-8; the first bad byte is at offset 1")
