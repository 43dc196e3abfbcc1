"""The worker plane on real processes over loopback: a rank's Worker service refuses a plain
client (no cluster secret) and the cluster keeps serving; a worker with another cluster's
secret cannot join; a coordinator whose ranks do not all come names the missing ones, and the
rank that did join exits once that coordinator is gone."""

import os
import re
import signal
import subprocess
import sys
import tempfile
import time

import grpc
import pytest

from conftest import MODEL, ROOT, Cluster, pb

LAUNCH = ROOT / "bazel-bin/deploy/launch"
WORKER = ROOT / "bazel-bin/worker/worker"


def _worker_stubs():
    from grpc_tools import protoc
    out = tempfile.mkdtemp(prefix="tpserve_worker_pb_")
    rc = protoc.main(["protoc", f"-I{ROOT}", f"--python_out={out}", f"--grpc_python_out={out}",
                      str(ROOT / "proto/worker.proto")])
    assert rc == 0, "protoc failed"
    sys.path.insert(0, out)
    from proto import worker_pb2, worker_pb2_grpc  # noqa: E402
    return worker_pb2, worker_pb2_grpc


wpb, wpb_grpc = _worker_stubs()


def _secret_file(tmp_path, name="secret"):
    path = tmp_path / name
    path.write_text(os.urandom(32).hex() + "\n")
    path.chmod(0o600)
    return path


def test_a_plain_client_cannot_step_or_stop_a_rank_and_the_cluster_still_serves(tmp_path):
    c = Cluster(ranks=1, tmp=tmp_path)
    try:
        match = re.search(r"worker: rank 0 of 1 serving on (\S+),", c.output())
        assert match, c.output()
        with grpc.insecure_channel(match.group(1)) as channel:
            stub = wpb_grpc.WorkerStub(channel)
            step = wpb.StepRequest(step_id=1)
            step.chunks.add(token_ids=[1], start_position=0, block_table=[0])
            for call, request in [(stub.Step, step), (stub.Shutdown, wpb.ShutdownRequest()),
                                  (stub.Heartbeat, wpb.HeartbeatRequest())]:
                for metadata in [None, (("x-tpserve-cluster-secret", os.urandom(32).hex()),)]:
                    with pytest.raises(grpc.RpcError) as err:
                        call(request, timeout=10, metadata=metadata)
                    assert err.value.code() == grpc.StatusCode.UNAUTHENTICATED, err.value.details()
        req = pb.GenerateRequest(text="Say hi.", max_new_tokens=4,
                                 sampling=pb.SamplingParams(temperature=0.0))
        assert [i for m in c.stub.Generate(req, timeout=60) for i in m.token_ids]
        assert c.health() == 1
    finally:
        c.stop()


def test_the_coordinator_names_ranks_that_never_join_and_refuses_another_clusters_secret(tmp_path):
    assert MODEL.exists(), f"{MODEL} is missing: run scripts/setup.sh"
    secret = _secret_file(tmp_path)
    with open(tmp_path / "launch.log", "w") as log:
        launch = subprocess.Popen(
            [str(LAUNCH), "--ranks=3", "--spawn_ranks=false", "--worker_listen=127.0.0.1:0",
             f"--cluster_secret_file={secret}", f"--model={MODEL}", "--port=0", "--http_port=0",
             "--context=512", "--join_timeout_s=4"],
            stdout=log, stderr=subprocess.STDOUT)
    try:
        address = None
        for _ in range(200):
            found = re.search(r"worker control plane on (\S+);", (tmp_path / "launch.log").read_text())
            if found:
                address = found.group(1)
                break
            assert launch.poll() is None, (tmp_path / "launch.log").read_text()
            time.sleep(0.05)
        assert address, (tmp_path / "launch.log").read_text()
        wrong = subprocess.run(
            [str(WORKER), f"--coordinator={address}", "--rank=0", "--listen=127.0.0.1:0",
             f"--cluster_secret_file={_secret_file(tmp_path, 'other')}", "--join_timeout_s=10"],
            capture_output=True, text=True, timeout=30)
        assert wrong.returncode == 1
        assert "refused rank 0" in wrong.stderr and "cluster secret" in wrong.stderr, wrong.stderr
        joined = subprocess.Popen(
            [str(WORKER), f"--coordinator={address}", "--rank=1", "--listen=127.0.0.1:0",
             f"--cluster_secret_file={secret}", "--coordinator_lost_s=2"],
            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        try:
            assert launch.wait(timeout=30) == 1
            # Its coordinator gone, the rank does not linger: it exits 1 for its supervisor.
            _, err = joined.communicate(timeout=15)
            assert joined.returncode == 1, err
            assert "has not answered for" in err, err
        finally:
            if joined.poll() is None:
                joined.kill()
                joined.wait()
        log_text = (tmp_path / "launch.log").read_text()
        assert "rank 1 joined from 127.0.0.1:" in log_text, log_text
        assert "ranks 0, 2 of 3 never joined (waited 4s)" in log_text, log_text
    finally:
        if launch.poll() is None:
            launch.kill()
            launch.wait()


def test_sigterm_while_the_ranks_are_joining_stops_the_coordinator_at_once(tmp_path):
    """A coordinator told to stop before its ranks came (a pod deleted while the stage pods are
    pending): it exits naming why within seconds, not when --join_timeout_s (300) runs out."""
    assert MODEL.exists(), f"{MODEL} is missing: run scripts/setup.sh"
    with open(tmp_path / "launch.log", "w") as log:
        launch = subprocess.Popen(
            [str(LAUNCH), "--ranks=3", "--spawn_ranks=false", "--worker_listen=127.0.0.1:0",
             f"--cluster_secret_file={_secret_file(tmp_path)}", f"--model={MODEL}", "--port=0",
             "--http_port=0", "--context=512"],
            stdout=log, stderr=subprocess.STDOUT)
    try:
        for _ in range(200):
            if "waiting up to 300 s for 3 rank(s)" in (tmp_path / "launch.log").read_text():
                break
            assert launch.poll() is None, (tmp_path / "launch.log").read_text()
            time.sleep(0.05)
        launch.send_signal(signal.SIGTERM)
        assert launch.wait(timeout=10) == 1
        log_text = (tmp_path / "launch.log").read_text()
        assert "terminated while waiting for the ranks to join" in log_text, log_text
    finally:
        if launch.poll() is None:
            launch.kill()
            launch.wait()
