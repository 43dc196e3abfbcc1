"""The worker plane across real network boundaries: the coordinator and the ranks of SmolLM2 on
"hosts", network namespaces of their own (each also a UTS namespace, with its own hostname, so
it looks like another machine: Gloo between hosts, gRPC steps), joined by veth pairs on a
bridge. Two layouts: three hosts of one rank each (--ranks=3), and two hosts of three ranks each,
one pipeline stage a host (--ranks=3 --pp=2: tensor parallelism within a host, over shared
memory, the stages over Gloo across hosts). Tokens stream through the public API; then one
host's link is cut and the stream must end with UNAVAILABLE naming that host's first rank,
within the collective timeout and a few seconds.

Needs root, `ip` and `unshare`; skips with one line where namespaces cannot be made. Everything
it creates (namespaces tpn<id>-*, interfaces tpn<id>*, addresses 10.77.<n>.0/24) is removed
afterwards, also when the test fails."""

import os
import pathlib
import shutil
import signal
import subprocess
import time

import grpc
import pytest

from conftest import MODEL, ROOT, pb, pb_grpc

RANKS = 3  # the tensor-parallel degree (SmolLM2: 9 heads, 3 KV heads)
COLLECTIVE_TIMEOUT_S = 3
CONTROL_PORT = 7000
API_PORT = 50051


def _ip(*args, check=True):
    return subprocess.run(["ip", *args], capture_output=True, text=True, check=check)


class Net:
    """A bridge in namespace `hub`; the coordinator (.1), rank host h (.10+h) and this process's
    namespace (.254) each on a veth pair into it."""

    def __init__(self, hosts):
        self.id = f"tpn{os.getpid() % 100000}"
        self.subnet = 20 + os.getpid() % 200
        self.hub = f"{self.id}-hub"
        self.coord = f"{self.id}-c"
        self.ranks = [f"{self.id}-w{h}" for h in range(hosts)]  # the hosts' namespaces
        self.made = []
        self.root_veth = f"{self.id}ra"

    def addr(self, host):
        return f"10.77.{self.subnet}.{host}"

    def rank_veth(self, h):
        """The hub-side end of host h's link."""
        return f"{self.id}{h}b"

    def _attach(self, name, ns, host):
        a, b = f"{name}a", f"{name}b"
        _ip("link", "add", a, "type", "veth", "peer", "name", b)
        _ip("link", "set", b, "netns", self.hub)
        _ip("-n", self.hub, "link", "set", b, "master", "br0", "up")
        if ns is None:
            _ip("addr", "add", f"{self.addr(host)}/24", "dev", a)
            _ip("link", "set", a, "up")
            return
        _ip("link", "set", a, "netns", ns)
        _ip("-n", ns, "link", "set", a, "name", "eth0")
        _ip("-n", ns, "addr", "add", f"{self.addr(host)}/24", "dev", "eth0")
        _ip("-n", ns, "link", "set", "eth0", "up")
        _ip("-n", ns, "link", "set", "lo", "up")

    def build(self):
        for ns in [self.hub, self.coord, *self.ranks]:
            _ip("netns", "add", ns)
            self.made.append(ns)
        _ip("-n", self.hub, "link", "add", "br0", "type", "bridge")
        _ip("-n", self.hub, "link", "set", "br0", "up")
        self._attach(f"{self.id}c", self.coord, 1)
        for r, ns in enumerate(self.ranks):
            self._attach(f"{self.id}{r}", ns, 10 + r)
        self._attach(f"{self.id}r", None, 254)

    def destroy(self):
        # Deleting a namespace deletes the veth ends in it, and with them their peers.
        _ip("link", "del", self.root_veth, check=False)
        for ns in reversed(self.made):
            _ip("netns", "del", ns, check=False)


def _skip_unless_namespaces_work():
    if os.geteuid() != 0:
        pytest.skip("network namespaces need root")
    for tool in ("ip", "unshare"):
        if shutil.which(tool) is None:
            pytest.skip(f"no `{tool}` on PATH")
    probe = f"tpnprobe{os.getpid()}"
    made = _ip("netns", "add", probe, check=False)
    if made.returncode != 0:
        pytest.skip(f"cannot make a network namespace: {made.stderr.strip()}")
    _ip("netns", "del", probe, check=False)


# (ranks per host, pipeline stages): three hosts of one rank; two hosts of a stage each.
LAYOUTS = {"tp3": (1, 1), "tp3xpp2": (3, 2)}


@pytest.fixture(params=sorted(LAYOUTS))
def net(request):
    _skip_unless_namespaces_work()
    per_host, stages = LAYOUTS[request.param]
    n = Net(hosts=RANKS * stages // per_host)
    n.per_host, n.stages = per_host, stages
    try:
        n.build()
        yield n
    finally:
        n.destroy()


def _spawn(argv, log_path):
    log = open(log_path, "w")
    return subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)


def _stop(proc):
    if proc.poll() is None:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()


def test_cutting_a_hosts_link_ends_the_stream_naming_its_rank(net, tmp_path):
    assert MODEL.exists(), f"{MODEL} is missing: run scripts/setup.sh"
    launch, worker = ROOT / "bazel-bin/deploy/launch", ROOT / "bazel-bin/worker/worker"
    assert launch.exists() and worker.exists(), "build first: bazel build //deploy:launch //worker:worker"
    secret = tmp_path / "cluster_secret"
    secret.write_text(os.urandom(32).hex() + "\n")
    secret.chmod(0o600)
    ready = tmp_path / "ready"
    coordinator = f"{net.addr(1)}:{CONTROL_PORT}"
    procs = []
    try:
        procs.append(_spawn(
            ["ip", "netns", "exec", net.coord, str(launch), f"--ranks={RANKS}",
             f"--pp={net.stages}", "--spawn_ranks=false",
             f"--worker_listen={coordinator}", f"--cluster_secret_file={secret}",
             f"--model={MODEL}", f"--listen={net.addr(1)}", f"--port={API_PORT}", "--http_port=0",
             f"--ready_file={ready}", "--context=2048", "--max_seqs=4",
             f"--collective_timeout_ms={COLLECTIVE_TIMEOUT_S * 1000}", "--join_timeout_s=120",
             "--rank_replace_timeout_s=0"],  # a lost host ends the cluster: what is tested here
            tmp_path / "launch.log"))
        for h, ns in enumerate(net.ranks):
            # A UTS namespace of its own: another hostname, so the host looks like another
            # machine (comm=auto picks Gloo between hosts and shared memory within one; steps
            # go over gRPC). Its ranks are h * per_host onwards.
            workers = " ".join(
                f'"$0" --coordinator={coordinator} --rank={h * net.per_host + i} '
                f"--listen={net.addr(10 + h)}:0 --cluster_secret_file={secret} &"
                for i in range(net.per_host))
            procs.append(_spawn(
                ["ip", "netns", "exec", ns, "unshare", "--uts", "sh", "-c",
                 f"hostname {net.id}-host{h} && {workers} wait", str(worker)],
                tmp_path / f"host{h}.log"))

        def logs():
            return "\n".join(f"--- {p.name}\n{p.read_text()}" for p in sorted(tmp_path.glob("*.log")))

        deadline = time.time() + 180
        while not ready.exists():
            assert procs[0].poll() is None, f"launcher exited early:\n{logs()}"
            assert time.time() < deadline, f"cluster not ready in 180 s:\n{logs()}"
            time.sleep(0.1)
        launch_log = (tmp_path / "launch.log").read_text()
        for r in range(RANKS * net.stages):
            assert f"rank {r} joined from {net.addr(10 + r // net.per_host)}:" in launch_log, launch_log
        with grpc.insecure_channel(f"{net.addr(1)}:{API_PORT}") as channel:
            stub = pb_grpc.TpServeStub(channel)
            req = pb.GenerateRequest(text="Write a long essay about rivers.", max_new_tokens=1500,
                                     ignore_eos=True, sampling=pb.SamplingParams(temperature=0.0))
            call = stub.Generate(req, timeout=120)
            it = iter(call)
            for _ in range(3):
                assert next(it).token_ids, "a message without tokens"
            # The last host's link: with stages, the one between them.
            cut = len(net.ranks) - 1
            _ip("-n", net.hub, "link", "set", net.rank_veth(cut), "down")
            cut_at = time.time()
            with pytest.raises(grpc.RpcError) as err:
                for _ in it:
                    pass
            took = time.time() - cut_at
        print(f"link cut -> {err.value.code()} after {took:.1f} s: {err.value.details()}")
        assert err.value.code() == grpc.StatusCode.UNAVAILABLE, err.value.details()
        assert took < COLLECTIVE_TIMEOUT_S + 5, f"{took:.1f} s after the cut:\n{err.value.details()}"
        first = cut * net.per_host  # the cut host's first rank
        assert f"rank {first} ({net.addr(10 + cut)}:" in err.value.details(), err.value.details()
        assert "does not answer" in err.value.details(), err.value.details()
    finally:
        for p in procs:
            _stop(p)
