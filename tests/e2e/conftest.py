"""Fixtures for end-to-end tests: a real cluster (launcher + worker processes) on loopback,
and Python gRPC stubs generated from the same .proto files the server is built from."""

import os
import pathlib
import signal
import socket
import subprocess
import sys
import tempfile
import time

import grpc
import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
MODEL_DIR = pathlib.Path(os.environ.get("TPSERVE_MODEL_DIR", pathlib.Path.home() / ".cache/tpserve"))
MODEL = MODEL_DIR / "SmolLM2-135M-Instruct.Q4_1.gguf"


def _generate_stubs():
    from grpc_tools import protoc
    out = pathlib.Path(tempfile.mkdtemp(prefix="tpserve_pb_"))
    rc = protoc.main(["protoc", f"-I{ROOT}", f"--python_out={out}", f"--grpc_python_out={out}",
                      str(ROOT / "proto/tpserve.proto")])
    assert rc == 0, "protoc failed"
    sys.path.insert(0, str(out))
    from proto import tpserve_pb2, tpserve_pb2_grpc  # noqa: E402
    return tpserve_pb2, tpserve_pb2_grpc


pb, pb_grpc = _generate_stubs()


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Cluster:
    def __init__(self, ranks, tmp, extra_args=(), model=None):
        """`model`: what --model says (default: the bundled SmolLM2's path)."""
        if model is None:
            assert MODEL.exists(), f"{MODEL} is missing: run scripts/setup.sh"
            model = MODEL
        launch = ROOT / "bazel-bin/deploy/launch"
        assert launch.exists(), "build first: bazel build //deploy:launch //worker:worker"
        self.ready_file = tmp / "ready"
        self.log_path = tmp / "launch.log"
        self.log = open(self.log_path, "w+")
        env = dict(os.environ, TPSERVE_WORKER_BIN=str(ROOT / "bazel-bin/worker/worker"))
        # --http_port=0 turns HTTP off, so a port that was free a moment ago is chosen here.
        http_args = [f"--http_port={_free_port()}"]
        self.proc = subprocess.Popen(
            [str(launch), f"--ranks={ranks}", f"--model={model}", "--port=0",
             f"--ready_file={self.ready_file}", "--context=2048", "--max_seqs=4",
             "--collective_timeout_ms=3000", *http_args, *extra_args],
            stdout=self.log, stderr=subprocess.STDOUT, env=env, start_new_session=True)
        deadline = time.time() + 180
        while not self.ready_file.exists():
            assert self.proc.poll() is None, f"launcher exited early:\n{self.output()}"
            assert time.time() < deadline, f"cluster not ready in 180 s:\n{self.output()}"
            time.sleep(0.1)
        # Line 1: the gRPC address; line 2: the HTTP base URL (e.g. http://127.0.0.1:34567).
        lines = [line.strip() for line in self.ready_file.read_text().splitlines()]
        self.address = lines[0]
        self.http_url = lines[1] if len(lines) > 1 and lines[1] else None
        self.channel = grpc.insecure_channel(self.address)
        self.stub = pb_grpc.TpServeStub(self.channel)
        self.clients = []  # openai_client()s, closed before the launcher is stopped

    def output(self):
        self.log.flush()
        return self.log_path.read_text()

    def worker_pids(self):
        for line in self.output().splitlines():
            if "worker rank(s) (pids" in line:
                return [int(p) for p in line.split("(pids", 1)[1].strip(" )").split()]
        raise AssertionError(f"no pids line in:\n{self.output()}")

    def health(self):
        """grpc.health.v1.Health/Check for the whole server: 1 = SERVING, 2 = NOT_SERVING."""
        check = self.channel.unary_unary("/grpc.health.v1.Health/Check",
                                         request_serializer=lambda _: b"",
                                         response_deserializer=lambda b: b)
        reply = check(None, timeout=5)
        return reply[1] if len(reply) >= 2 else 0

    def stop(self):
        # Hang up first: an idle keep-alive connection holds its cpp-httplib worker (and so the
        # launcher's exit) for the 5 s keep-alive timeout, which stop() cannot cut short.
        for client in self.clients:
            client.close()
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                raise AssertionError(f"launcher did not exit on SIGTERM:\n{self.output()}")
        self.channel.close()


def openai_client(cluster, timeout=300):
    """The official OpenAI client on a cluster's HTTP API (no retries: a refusal is a result)."""
    import openai
    client = openai.OpenAI(base_url=f"{cluster.http_url.rstrip('/')}/v1", api_key="unused",
                           max_retries=0, timeout=timeout)
    cluster.clients.append(client)
    return client


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    c = Cluster(ranks=int(os.environ.get("TPSERVE_E2E_RANKS", "3")), tmp=tmp_path_factory.mktemp("cluster"))
    yield c
    c.stop()


@pytest.fixture(scope="module")
def http_url(cluster):
    """The cluster's OpenAI-compatible HTTP base URL (no trailing slash)."""
    assert cluster.http_url, f"the ready file has no HTTP URL:\n{cluster.output()}"
    return cluster.http_url.rstrip("/")
