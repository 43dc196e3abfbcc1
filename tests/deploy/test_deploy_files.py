"""The deployment files (deploy/Dockerfile, deploy/k8s/, deploy/slurm/) against the programs they
run: every YAML document parses, every --flag they pass exists in the real binaries (read from
`--helpfull` of bazel-bin/deploy/launch and bazel-bin/worker/worker, which scripts/test.sh builds
first), ports and probes agree with the flag values, and the cluster secret is mounted where
--cluster_secret_file points. Run: python3 -m pytest -q tests/deploy"""

import json
import os
import pathlib
import re
import shlex
import shutil
import signal
import subprocess
import time

import pytest
import yaml

ROOT = pathlib.Path(__file__).resolve().parents[2]
K8S = sorted((ROOT / "deploy/k8s").glob("*.yaml"))
LWS_FILES = [p for p in K8S if p.name.startswith("lws-")]
SLURM = ROOT / "deploy/slurm/tpserve.sbatch"
DOCKERFILE = ROOT / "deploy/Dockerfile"
DEPLOY_MD = ROOT / "docs/DEPLOY.md"
BINARIES = {"launch": ROOT / "bazel-bin/deploy/launch", "worker": ROOT / "bazel-bin/worker/worker"}
SECRET_NAME = "tpserve-cluster-secret"

# --name or --name=value, not inside a longer word (e.g. not srun's --kill-on-bad-exit).
FLAG_RE = re.compile(r"(?<![\w-])--([a-z][a-z0-9_]*)(?:=(\"[^\"]*\"|'[^']*'|\S+))?(?![\w-])")


def parse_flags(text):
    """{flag: value or None} of every --flag in `text` (quotes around a value removed)."""
    flags = {}
    for name, value in FLAG_RE.findall(text):
        flags[name] = value.strip("\"'") if value else None
    return flags


@pytest.fixture(scope="session")
def program_flags():
    """{program: set of flag names it defines}, from the built binaries' --helpfull."""
    out = {}
    for program, path in BINARIES.items():
        assert path.exists(), "build first: bazel build //deploy:launch //worker:worker"
        helpfull = subprocess.run([str(path), "--helpfull"], capture_output=True, text=True,
                                  timeout=60)
        names = set(re.findall(r"^\s+--([a-z][a-z0-9_]*) \(", helpfull.stdout + helpfull.stderr,
                               re.M))
        assert "flagfile" in names, f"{program} --helpfull printed no flags:\n{helpfull.stderr}"
        out[program] = names
    return out


def missing_flags(used, defined):
    """Flags in `used` the program lacks (--noX counts as X for booleans)."""
    return sorted(f for f in used if f not in defined
                  and not (f.startswith("no") and f[2:] in defined))


def port_of(address):
    return int(address.rsplit(":", 1)[1])


# ----- Kubernetes -------------------------------------------------------------------------------

def load_docs(path):
    return [d for d in yaml.safe_load_all(path.read_text()) if d is not None]


def lws_of(path):
    (lws,) = [d for d in load_docs(path) if d["kind"] == "LeaderWorkerSet"]
    return lws


def container_program(container):
    """(program, {flag: value}) that a container runs: launch/worker directly, via sh -c, or
    (a GPU stage pod) as several workers started by a bash script: its `worker` line."""
    command = container.get("command", []) + container.get("args", [])
    if command[:2] == ["/bin/sh", "-c"]:
        script = command[2]
        words = shlex.split(script)
        assert words[0] == "exec", f"sh -c should exec the program: {script}"
        return words[1], parse_flags(script)
    if command[:2] == ["/bin/bash", "-c"]:
        (line,) = [l for l in command[2].splitlines() if l.strip().startswith("worker ")]
        return "worker", parse_flags(line)
    return pathlib.PurePath(command[0]).name, parse_flags(" ".join(command[1:]))


LEADER_ADDRESS = "leader.tpserve.test"
POD_IP = "10.1.2.3"


# A `worker` that records its arguments (NUL-separated, one file a process, renamed into place
# whole), waits until $EXPECTED processes have (at most 20 s) and exits 0.
FAKE_WORKER = """#!/bin/sh
part="$(mktemp "$WORKER_RUNS/.part.XXXXXX")"
printf '%s\\0' "$@" > "$part"
mv "$part" "$WORKER_RUNS/run.${part##*.}"
for _ in $(seq 2000); do
  [ "$(ls "$WORKER_RUNS" | grep -c '^run[.]')" -ge "$EXPECTED" ] && exit 0
  sleep 0.01
done
"""


def worker_processes(container, worker_index, expected, tmp_path):
    """[{flag: value}] of each worker a rank container starts in pod `worker_index` (LWS's
    LWS_WORKER_INDEX), found by running its command with a `worker` on PATH that records its
    arguments and exits once `expected` workers have started (so a script that stops its
    other ranks when one exits stops none before it has started)."""
    runs = tmp_path / f"runs-{worker_index}-{container['name']}"
    runs.mkdir()
    fake = tmp_path / "bin" / "worker"
    fake.parent.mkdir(exist_ok=True)
    fake.write_text(FAKE_WORKER)
    fake.chmod(0o755)
    env = {"PATH": f"{fake.parent}:/usr/bin:/bin", "WORKER_RUNS": str(runs),
           "EXPECTED": str(expected), "LWS_WORKER_INDEX": str(worker_index),
           "LWS_LEADER_ADDRESS": LEADER_ADDRESS, "POD_IP": POD_IP}
    command = container.get("command", []) + container.get("args", [])
    subprocess.run(command, env=env, timeout=60, capture_output=True)
    processes = []
    for run in sorted(runs.glob("run.*")):
        argv = run.read_bytes().split(b"\0")[:-1]
        processes.append(parse_flags(" ".join(shlex.quote(a.decode()) for a in argv)))
    return processes


def pods(lws):
    template = lws["spec"]["leaderWorkerTemplate"]
    return template["leaderTemplate"]["spec"], template["workerTemplate"]["spec"]


def ranks_per_container(lws):
    """How many ranks each rank container runs: the cluster's ranks over its containers."""
    leader, worker = pods(lws)
    _, flags = container_program(leader["containers"][0])
    ranks = int(flags.get("ranks") or flags.get("gpus")) * int(flags.get("pp") or 1)
    containers = (lws["spec"]["leaderWorkerTemplate"]["size"] - 1) * len(worker["containers"])
    assert ranks % containers == 0, f"{ranks} ranks do not split over {containers} containers"
    return ranks // containers


@pytest.mark.parametrize("path", K8S, ids=lambda p: p.name)
def test_every_yaml_document_parses(path):
    docs = load_docs(path)
    assert docs, f"{path} has no documents"
    for doc in docs:
        assert doc.get("apiVersion") and doc.get("kind") and doc["metadata"].get("name"), doc


@pytest.mark.parametrize("path", LWS_FILES, ids=lambda p: p.name)
def test_lws_leader_is_coordinator_and_workers_are_ranks(path, tmp_path):
    lws = lws_of(path)
    assert lws["apiVersion"] == "leaderworkerset.x-k8s.io/v1"
    template = lws["spec"]["leaderWorkerTemplate"]
    leader, worker = pods(lws)
    program, flags = container_program(leader["containers"][0])
    assert program == "launch"
    assert flags["spawn_ranks"] == "false"
    ranks = int(flags.get("ranks") or flags.get("gpus")) * int(flags.get("pp") or 1)
    plane_port = port_of(flags["worker_listen"])
    if "gpus" in flags:  # the ranks' GPUs are not the coordinator's: the plan needs their kind
        assert flags.get("gpu"), "a coordinator of GPU ranks elsewhere must name --gpu"
    assert template["restartPolicy"] == "RecreateGroupOnPodRestart"
    # LWS numbers the leader 0 and the rank pods 1..size-1; pod p runs ranks (p - 1) * per_pod
    # onwards, per_pod of them (a stage's, with pipeline stages).
    started = []
    for p in range(1, template["size"]):
        per_container = [worker_processes(c, p, ranks_per_container(lws), tmp_path)
                         for c in worker["containers"]]
        here = [f for processes in per_container for f in processes]
        per_pod = len(here)
        assert sorted(int(f["rank"]) for f in here) == list(range((p - 1) * per_pod, p * per_pod))
        started += [int(f["rank"]) for f in here]
        for f in here:
            assert f["advertise"] == POD_IP
            assert f["coordinator"] == f"{LEADER_ADDRESS}:{plane_port}"
        assert len({port_of(f["listen"]) for f in here}) == per_pod, "one port a rank"
        if "gpus" in flags:  # a container holds the GPUs of every rank it runs (NCCL over NVLink)
            for container, processes in zip(worker["containers"], per_container):
                for limits in ("requests", "limits"):
                    gpus = container["resources"][limits]["nvidia.com/gpu"]
                    assert gpus == len(processes), (container["name"], limits)
    assert sorted(started) == list(range(ranks)), "size = 1 coordinator + the rank pods"
    for container in worker["containers"]:
        env = {e["name"]: e for e in container["env"]}
        assert env["POD_IP"]["valueFrom"]["fieldRef"]["fieldPath"] == "status.podIP"
    if len(worker["containers"]) > 1:  # the stage's ranks reduce over one /dev/shm volume
        shm = [m["name"] for c in worker["containers"] for m in c["volumeMounts"]
               if m["mountPath"] == "/dev/shm"]
        assert len(shm) == len(worker["containers"]) and len(set(shm)) == 1
        (volume,) = [v for v in worker["volumes"] if v["name"] == shm[0]]
        assert volume["emptyDir"]["medium"] == "Memory"


# A `worker` that records its pid and rank, then runs until killed, except rank $FAIL_RANK, which
# exits 3 once every rank of the container has started.
LIVE_WORKER = """#!/bin/sh
rank=""
for a in "$@"; do case "$a" in --rank=*) rank="${a#--rank=}";; esac; done
echo $$ > "$WORKER_RUNS/pid.$rank"
if [ "$rank" = "$FAIL_RANK" ]; then
  for _ in $(seq 2000); do
    [ "$(ls "$WORKER_RUNS" | grep -c '^pid[.]')" -ge "$EXPECTED" ] && exit 3
    sleep 0.01
  done
fi
exec sleep 600
"""
MULTI_RANK_LWS = [p for p in LWS_FILES if '"/bin/bash", "-c"' in p.read_text()]


@pytest.mark.parametrize("how", ["a rank exits 3", "SIGTERM"])
@pytest.mark.parametrize("path", MULTI_RANK_LWS, ids=lambda p: p.name)
def test_a_stage_container_ends_with_its_first_rank_and_stops_the_others(path, how, tmp_path):
    """A container running several ranks: the first one to exit ends it with that rank's status
    and the others stopped; SIGTERM (a pod's deletion) stops every rank and ends it 143."""
    lws = lws_of(path)
    (container,) = pods(lws)[1]["containers"]
    expected = ranks_per_container(lws)
    fake = tmp_path / "bin" / "worker"
    fake.parent.mkdir()
    fake.write_text(LIVE_WORKER)
    fake.chmod(0o755)
    runs = tmp_path / "runs"
    runs.mkdir()
    env = {"PATH": f"{fake.parent}:/usr/bin:/bin", "WORKER_RUNS": str(runs),
           "EXPECTED": str(expected), "LWS_WORKER_INDEX": "2",
           "LWS_LEADER_ADDRESS": LEADER_ADDRESS, "POD_IP": POD_IP,
           "FAIL_RANK": str(expected + 1) if how == "a rank exits 3" else "none"}
    script = subprocess.Popen(container["command"] + container["args"], env=env)
    try:
        deadline = time.monotonic() + 30
        while len(list(runs.glob("pid.*"))) < expected and time.monotonic() < deadline:
            time.sleep(0.02)
        pids = [int(p.read_text()) for p in runs.glob("pid.*")]
        assert len(pids) == expected
        if how == "SIGTERM":
            script.send_signal(signal.SIGTERM)
        assert script.wait(timeout=30) == (3 if how == "a rank exits 3" else 143)
    finally:
        script.kill()
    for pid in pids:  # every rank process gone (reaped by the script)
        with pytest.raises(ProcessLookupError):
            os.kill(pid, 0)


@pytest.mark.parametrize("path", LWS_FILES, ids=lambda p: p.name)
def test_lws_flags_exist_in_the_programs(path, program_flags):
    missing = {}
    for spec in pods(lws_of(path)):
        for container in spec["containers"]:
            program, flags = container_program(container)
            if lacking := missing_flags(flags, program_flags[program]):
                missing[program] = lacking
    assert not missing, f"{path.name} passes flags the programs do not define: {missing}"


@pytest.mark.parametrize("path", LWS_FILES, ids=lambda p: p.name)
def test_lws_ports_and_probes_match_the_flags(path, tmp_path):
    lws = lws_of(path)
    leader, worker = pods(lws)
    coordinator = leader["containers"][0]
    _, lflags = container_program(coordinator)
    ports = {p["name"]: p["containerPort"] for p in coordinator["ports"]}
    assert ports["grpc"] == int(lflags["port"])
    assert ports["http"] == int(lflags["http_port"])
    assert ports["worker-plane"] == port_of(lflags["worker_listen"])
    assert lflags["listen"] == "0.0.0.0", "the public API must be reachable from the Service"
    # grpc.health.v1 on the public gRPC port decides startup, readiness and liveness.
    for probe in ("startupProbe", "readinessProbe", "livenessProbe"):
        assert coordinator[probe]["grpc"]["port"] == int(lflags["port"]), probe

    for rank in worker["containers"]:
        processes = worker_processes(rank, 1, ranks_per_container(lws), tmp_path)
        listen = {port_of(f["listen"]) for f in processes}
        assert len(listen) == ranks_per_container(lws)
        assert {p["containerPort"] for p in rank["ports"]} == listen
        for probe in ("readinessProbe", "livenessProbe"):
            if "tcpSocket" in rank[probe]:  # one rank: its port
                assert {rank[probe]["tcpSocket"]["port"]} == listen, probe
            else:  # several: a command that connects to each of their ports
                command = " ".join(rank[probe]["exec"]["command"])
                assert set(map(int, re.findall(r"\b5\d{4}\b", command))) == listen, probe

    (service,) = [d for d in load_docs(ROOT / "deploy/k8s/service.yaml") if d["kind"] == "Service"]
    by_target = {p["targetPort"]: p["port"] for p in service["spec"]["ports"]}
    assert by_target == {"grpc": int(lflags["port"]), "http": int(lflags["http_port"])}
    assert service["spec"]["selector"].items() <= leader_labels(path).items()


def leader_labels(path):
    return lws_of(path)["spec"]["leaderWorkerTemplate"]["leaderTemplate"]["metadata"]["labels"]


def test_network_policies_open_only_the_public_ports_to_clients():
    policies = {d["metadata"]["name"]: d for d in load_docs(ROOT / "deploy/k8s/service.yaml")
                if d["kind"] == "NetworkPolicy"}
    public = policies["tpserve-public"]["spec"]
    assert {p["port"] for p in public["ingress"][0]["ports"]} == {50051, 8080}
    assert public["podSelector"]["matchLabels"]["app.kubernetes.io/component"] == "coordinator"
    plane = policies["tpserve-worker-plane"]["spec"]
    assert plane["ingress"] == [{"from": [{"podSelector": plane["podSelector"]}]}]
    for path in LWS_FILES:
        _, lflags = container_program(pods(lws_of(path))[0]["containers"][0])
        assert {int(lflags["port"]), int(lflags["http_port"])} == {50051, 8080}


@pytest.mark.parametrize("path", LWS_FILES, ids=lambda p: p.name)
def test_the_secret_is_mounted_where_cluster_secret_file_points(path):
    for spec in pods(lws_of(path)):
        volumes = {v["name"]: v for v in spec["volumes"]}
        for container in spec["containers"]:
            _, flags = container_program(container)
            secret_file = pathlib.PurePath(flags["cluster_secret_file"])
            (mount,) = [m for m in container["volumeMounts"]
                        if pathlib.PurePath(m["mountPath"]) == secret_file.parent]
            secret = volumes[mount["name"]]["secret"]
            assert secret["secretName"] == SECRET_NAME
            assert [i["path"] for i in secret["items"]] == [secret_file.name]
            assert secret["defaultMode"] & 0o007 == 0, "the secret must not be world-readable"
            assert spec["securityContext"]["fsGroup"] == spec["securityContext"]["runAsGroup"]
    # The command in docs/DEPLOY.md creates the Secret these pods mount.
    assert f"kubectl create secret generic {SECRET_NAME} --from-file=cluster-secret=" in \
        DEPLOY_MD.read_text()


@pytest.mark.parametrize("path", LWS_FILES, ids=lambda p: p.name)
def test_termination_grace_outlasts_the_drain(path):
    leader, worker = pods(lws_of(path))
    _, lflags = container_program(leader["containers"][0])
    drain_s = int(lflags["drain_timeout_s"])
    assert leader["terminationGracePeriodSeconds"] > drain_s
    # Ranks get SIGTERM at the same moment as the leader: they wait out its drain first.
    for rank in worker["containers"]:
        wait = rank["lifecycle"]["preStop"]["exec"]["command"]
        assert wait[0] == "sleep" and int(wait[1]) > drain_s
        assert worker["terminationGracePeriodSeconds"] > int(wait[1])


# ----- Slurm ------------------------------------------------------------------------------------

def slurm_function(name):
    """The body of the shell function `name` in the sbatch script."""
    match = re.search(rf"^{name}\(\) \{{\n(.*?)^\}}", SLURM.read_text(), re.M | re.S)
    assert match, f"no function {name} in {SLURM}"
    return match.group(1)


def test_slurm_script_is_valid_bash():
    subprocess.run(["bash", "-n", str(SLURM)], check=True)


def test_slurm_flags_exist_in_the_programs(program_flags):
    missing = {}
    for function, program in (("run_coordinator", "launch"), ("run_rank", "worker")):
        body = slurm_function(function)
        assert f'exec "${"LAUNCH" if program == "launch" else "WORKER"}"' in body
        if lacking := missing_flags(parse_flags(body), program_flags[program]):
            missing[program] = lacking
    assert not missing, f"{SLURM.name} passes flags the programs do not define: {missing}"


def test_slurm_coordinator_and_ranks_agree():
    coordinator = parse_flags(slurm_function("run_coordinator"))
    rank = parse_flags(slurm_function("run_rank"))
    assert coordinator["spawn_ranks"] == "false"
    assert coordinator["worker_listen"] == "0.0.0.0:$WORKER_PLANE_PORT"
    assert rank["coordinator"] == "$COORD_HOST:$WORKER_PLANE_PORT"
    assert coordinator["cluster_secret_file"] == rank["cluster_secret_file"] == "$SECRET"
    assert rank["rank"] == "$SLURM_PROCID"
    # Every task a rank: TP x PP of them, stage s the tasks s * TP onwards.
    assert coordinator["ranks"] == "$TP" and coordinator["pp"] == "$PP"
    text = SLURM.read_text()
    assert 'TP=$((RANKS / PP))' in text and 'RANKS="$SLURM_NTASKS"' in text
    text = SLURM.read_text()
    assert '(umask 077 && openssl rand -hex 32 > "$SECRET")' in text
    assert 'scontrol show hostnames "$SLURM_JOB_NODELIST"' in text


# ----- Dockerfile -------------------------------------------------------------------------------

def dockerfile_stages():
    """{stage name: the instructions of that stage, continuation lines joined}."""
    text = re.sub(r"\\\n", " ", DOCKERFILE.read_text())
    stages, current = {}, None
    for line in text.splitlines():
        line = line.strip()
        if match := re.match(r"FROM (\S+) AS (\S+)", line):
            current = match.group(2)
            stages[current] = [line]
        elif current and line and not line.startswith("#"):
            stages[current].append(line)
    return stages


def apt_installed(instructions):
    """Package names after `apt-get install` in RUN lines that do not use ${...} (NVIDIA's)."""
    packages = []
    for line in instructions:
        for chunk in re.findall(r"apt-get install ([^&;]*)", line):
            if "${" in chunk:
                continue
            packages += [w for w in chunk.split() if not w.startswith("-")]
    return packages


def test_dockerfile_is_debian_12_multi_stage_with_a_non_root_runtime():
    stages = dockerfile_stages()
    assert list(stages) == ["build", "runtime"]
    assert stages["build"][0].startswith("FROM debian:bookworm ")
    assert stages["runtime"][0].startswith("FROM debian:bookworm-slim ")
    user = [line for line in stages["runtime"] if line.startswith("USER ")]
    assert user == ["USER 10001:10001"]
    assert any("--config=$config" in line for line in stages["build"])


def test_dockerfile_build_stage_installs_what_setup_sh_installs():
    setup = (ROOT / "scripts/setup.sh").read_text()
    listed = re.search(r"APT_PACKAGES=\((.*?)\)", setup, re.S).group(1)
    apt_packages = re.sub(r"#[^\n]*", "", listed).split()  # comments are not packages
    assert set(apt_packages) <= set(apt_installed(dockerfile_stages()["build"]))


def test_dockerfile_packages_exist_in_debian():
    if shutil.which("apt-cache") is None:
        pytest.skip("no apt-cache on this machine")
    stages = dockerfile_stages()
    packages = sorted(set(apt_installed(stages["build"]) + apt_installed(stages["runtime"])))
    policy = subprocess.run(["apt-cache", "policy", *packages], capture_output=True,
                            text=True).stdout
    candidates = dict(re.findall(r"^(\S+):\n  Installed: .*\n  Candidate: (\S+)", policy, re.M))
    absent = [p for p in packages if candidates.get(p, "(none)") == "(none)"]
    assert not absent, f"not in this machine's Debian archive: {absent}"


def test_dockerfile_runtime_packages_hold_every_library_the_binaries_load():
    if shutil.which("dpkg") is None or shutil.which("readelf") is None:
        pytest.skip("needs dpkg and readelf")
    runtime = set(apt_installed(dockerfile_stages()["runtime"])) | {"libc6", "libgcc-s1"}
    needed = set()
    for path in BINARIES.values():
        assert path.exists(), "build first: bazel build //deploy:launch //worker:worker"
        dynamic = subprocess.run(["readelf", "-d", str(path)], capture_output=True, text=True,
                                 check=True).stdout
        needed |= set(re.findall(r"\(NEEDED\)\s+Shared library: \[(\S+)\]", dynamic))
    # The CUDA libraries come from the toolkit (copied to /opt/tpserve/lib), not from Debian.
    needed = {so for so in needed if not re.match(r"lib(cudart|cublas|cublasLt|nccl)\.so", so)}
    cache = dict(re.findall(r"^\s+(\S+) \(.*\) => (\S+)$",
                            subprocess.run(["ldconfig", "-p"], capture_output=True,
                                           text=True).stdout, re.M)[::-1])
    # dpkg knows a file by the path its package installed (/lib or /usr/lib: merged /usr).
    forms = {}
    for soname in needed:
        assert soname in cache, f"{soname} is not in the loader cache"
        for path in {cache[soname], str(pathlib.Path(cache[soname]).resolve())}:
            for form in (path, re.sub(r"^/usr", "", path), "/usr" + path):
                forms[form] = soname
    owners = {}
    found = subprocess.run(["dpkg", "-S", *sorted(forms)], capture_output=True, text=True).stdout
    for package, path in re.findall(r"^(\S+?)(?::\S+)?: (\S+)$", found, re.M):
        if path in forms:
            owners.setdefault(forms[path], set()).add(package)
    unowned = {so: sorted(owners.get(so, [])) for so in sorted(needed)
               if not owners.get(so, set()) & runtime}
    assert not unowned, f"the runtime stage lacks the packages of: {unowned}"


def test_dockerfile_cmd_flags_exist_and_ports_are_exposed(program_flags):
    (cmd,) = [line for line in dockerfile_stages()["runtime"] if line.startswith("CMD ")]
    argv = json.loads(cmd[len("CMD "):])
    assert argv[0] == "launch"
    flags = parse_flags(" ".join(argv[1:]))
    assert not missing_flags(flags, program_flags["launch"])
    (expose,) = [line for line in dockerfile_stages()["runtime"] if line.startswith("EXPOSE ")]
    exposed = {int(p) for p in expose.split()[1:]}
    assert {int(flags["port"]), int(flags["http_port"])} <= exposed
    # The worker-plane ports the manifests use are documented in the image too.
    _, lflags = container_program(pods(lws_of(LWS_FILES[0]))[0]["containers"][0])
    _, wflags = container_program(pods(lws_of(LWS_FILES[0]))[1]["containers"][0])
    assert {port_of(lflags["worker_listen"]), port_of(wflags["listen"])} <= exposed


# ----- docs/DEPLOY.md ---------------------------------------------------------------------------

def test_deploy_md_names_only_files_that_exist():
    text = DEPLOY_MD.read_text()
    named = set(re.findall(r"`((?:deploy|docs|scripts|tests|worker|coordinator|proto)/[\w./-]+)`",
                           text))
    assert named, "DEPLOY.md names no repository files"
    missing = sorted(p for p in named if not (ROOT / p.rstrip("/")).exists())
    assert not missing, f"DEPLOY.md names files that do not exist: {missing}"


def test_deploy_md_flags_exist_in_the_programs(program_flags):
    """Every --flag on a `launch`/`worker` line of DEPLOY.md's code blocks exists."""
    missing = {}
    blocks = re.findall(r"```(?:sh|bash)?\n(.*?)```", DEPLOY_MD.read_text(), re.S)
    for block in blocks:
        for line in re.sub(r"\\\n", " ", block).splitlines():
            for program in ("launch", "worker"):
                if re.search(rf"(^|[\s/:]){program}(\s|$)", line):
                    tail = re.split(rf"(?:^|[\s/:]){program}(?:\s|$)", line, maxsplit=1)[1]
                    tail = tail.split(" -- ", 1)[-1]
                    if lacking := missing_flags(parse_flags(tail), program_flags[program]):
                        missing.setdefault(program, set()).update(lacking)
    assert not missing, f"DEPLOY.md uses flags the programs do not define: {missing}"
