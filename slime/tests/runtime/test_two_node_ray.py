"""Two Ray nodes on one machine, one training step through `ray job submit`: the rollout manager
and its engine on the head (the `engine_node`), the train actor on a second node at 127.0.0.2 (all
of 127.0.0.0/8 is loopback on Linux; the `trainer_node`), and the weight sync crossing between
them through Ray's object store. The disk is shared here, but Ray's node ids say the nodes differ,
and that is what picks the path.

The head is started with --node-ip-address 127.0.0.1, which Ray replaces by the machine's own
address: the engine, started on a cluster of two nodes, then listens on that (discovered,
non-loopback) address, so the run needs the engines' API key, which the head's environment has.

Each node is a `ray start --block` with private ports and its own --temp-dir; SIGTERM to that one
PID stops exactly that node (the second node first, then the head)."""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import tempfile
import time
from pathlib import Path

import httpx
import pytest
from runtime_helpers import REPO, env, free_ports, metrics, processes_mentioning, wait_for

pytestmark = [pytest.mark.ray, pytest.mark.slow]

TRAINER_IP = "127.0.0.2"
RAY = shutil.which("ray") or "ray"
API_KEY = "two-node-test-key"


def _node_ports() -> list[str]:
    agent, agent_grpc, metrics_port, runtime_env, node_manager, object_manager = free_ports(6)
    return ["--dashboard-agent-listen-port", str(agent), "--dashboard-agent-grpc-port", str(agent_grpc),
            "--metrics-export-port", str(metrics_port), "--runtime-env-agent-port", str(runtime_env),
            "--node-manager-port", str(node_manager), "--object-manager-port", str(object_manager)]


class _Node:
    """One `ray start --block` process (the CLI stays up and owns the node's processes)."""

    def __init__(self, args: list[str], extra_env: dict[str, str] | None = None) -> None:
        self.temp_dir = Path(tempfile.mkdtemp(prefix="rt", dir="/tmp"))  # short: unix socket paths are limited
        self.log = self.temp_dir.with_suffix(".log")
        with open(self.log, "wb") as out:
            self.proc = subprocess.Popen([RAY, "start", "--block", "--num-gpus", "0", "--object-store-memory",
                                          str(150 * 1024 * 1024), "--temp-dir", str(self.temp_dir), *args],
                                         env={**env(), **(extra_env or {})}, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)

    def check_running(self) -> None:
        if self.proc.poll() is not None:
            raise RuntimeError(f"ray start exited with {self.proc.returncode}: {self.log.read_text()[-3000:]}")

    def stop(self) -> list[int]:
        """Stop the node through its CLI process; returns the PIDs of ours that outlived it."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait(timeout=30)
        try:  # every process of this node has its private temp dir on its command line
            wait_for(lambda: not processes_mentioning(str(self.temp_dir)), 60, f"{self.temp_dir}'s processes to exit")
        except TimeoutError:
            pass
        stray = processes_mentioning(str(self.temp_dir))
        for pid in stray:  # ours by construction (private temp dir), never another cluster's
            os.kill(pid, signal.SIGKILL)
        shutil.rmtree(self.temp_dir, ignore_errors=True)
        self.log.unlink(missing_ok=True)
        return stray


@pytest.fixture
def two_node_cluster():
    """The head with the custom resource `engine_node` (and the engines' API key in its
    environment, which the job's driver inherits), a second node at 127.0.0.2 with `trainer_node`;
    yields the dashboard URL once both nodes are alive."""
    gcs, dash, client = free_ports(3)
    nodes: list[_Node] = []
    try:
        head = _Node(["--head", "--node-ip-address", "127.0.0.1", "--num-cpus", "1",
                      "--resources", json.dumps({"engine_node": 1}), "--port", str(gcs),
                      "--dashboard-port", str(dash), "--dashboard-host", "127.0.0.1", "--include-dashboard", "true",
                      "--ray-client-server-port", str(client), *_node_ports()], {"OPENCLAW_API_KEY": API_KEY})
        nodes.append(head)
        url = f"http://127.0.0.1:{dash}"

        def dashboard_up() -> bool:
            head.check_running()
            try:
                return httpx.get(url + "/api/version", timeout=2).status_code == 200
            except httpx.HTTPError:
                return False

        wait_for(dashboard_up, 180, "the head's dashboard")
        worker = _Node(["--address", f"127.0.0.1:{gcs}", "--node-ip-address", TRAINER_IP, "--num-cpus", "2",
                        "--resources", json.dumps({"trainer_node": 1}), *_node_ports()])
        nodes.append(worker)

        def both_alive() -> bool:
            head.check_running()
            worker.check_running()
            alive = _alive_nodes(url)
            return len(alive) == 2 and TRAINER_IP in {n["node_ip"] for n in alive}

        wait_for(both_alive, 180, "both Ray nodes to be alive")
        yield url
    finally:
        stray = []
        for node in reversed(nodes):
            stray += node.stop()
        assert not stray, f"processes outlived `ray start --block`: {stray}"


def _alive_nodes(url: str) -> list[dict]:
    from ray.util.state import list_nodes

    return [{"node_id": n.node_id, "node_ip": n.node_ip, "head": n.is_head_node}
            for n in list_nodes(address=url, raise_on_missing_output=False) if n.state == "ALIVE"]


def _actors(url: str, class_name: str) -> list:
    from ray.util.state import list_actors

    return list_actors(address=url, filters=[("class_name", "=", class_name)], detail=True,
                       raise_on_missing_output=False)


MODES = {"full": [], "lora": ["--use-lora", "--lora-rank", "8", "--lora-alpha", "16"]}


@pytest.mark.parametrize("mode", sorted(MODES))
def test_one_step_with_the_engine_and_the_trainer_on_different_nodes(two_node_cluster, tmp_path, task, mode):
    url = two_node_cluster
    nodes = _alive_nodes(url)
    ip_of = {n["node_id"]: n["node_ip"] for n in nodes}
    engine_ip = next(n["node_ip"] for n in nodes if n["head"])  # as Ray reports it
    model = task.model
    flags = task.flags() + [
        "--num-rollout", "1", "--rollout-backend", "embedded",
        "--actor-resources", "trainer_node", "--rollout-resources", "engine_node", *MODES[mode]]
    t0 = time.monotonic()
    submit = subprocess.run([RAY, "job", "submit", "--address", url, "--working-dir", str(REPO), "--",
                             "python", "slime/train.py", *flags],
                            cwd=REPO, env=env(), capture_output=True, text=True, timeout=900)
    output = submit.stdout + submit.stderr
    assert submit.returncode == 0, output[-4000:]
    print(f"two-node job ({mode}) took {time.monotonic() - t0:.1f}s")

    # Ray's own record of where the actors ran.
    managers = _actors(url, "RolloutManagerActor")
    trainers = _actors(url, "TrainRayActor")
    assert len(managers) == 1 and len(trainers) == 1, (managers, trainers)
    assert ip_of[managers[0].node_id] == engine_ip
    assert ip_of[trainers[0].node_id] == TRAINER_IP

    log = (tmp_path / "logs" / "training.log").read_text()
    placed = re.search(r"rollout manager on node (\S+) \(id (\w+), pid (\d+)\): engine urls \['([^']+)'\], "
                       r"engine pids \[(\d+)\]", log)
    assert placed, log[-3000:]
    node_ip, node_id, manager_pid, engine_url, _ = placed.groups()
    assert (node_ip, node_id, int(manager_pid)) == (engine_ip, managers[0].node_id, managers[0].pid)
    # The engine listens on the engine node's address, discovered, not on a literal 127.0.0.1.
    assert re.fullmatch(rf"http://{re.escape(engine_ip)}:\d+", engine_url), (engine_url, engine_ip)
    assert f"openclaw engine ready: {engine_url} " in (tmp_path / "logs" / "engine_0.log").read_text()

    trainer = re.search(r"train rank 0 on node (\S+) \(id (\w+), pid (\d+)\); weight sync: (.+)", log)
    assert trainer, log[-3000:]
    assert trainer.groups() == (TRAINER_IP, trainers[0].node_id, str(trainers[0].pid),
                                "cross-node, through Ray's object store")
    synced = re.search(r"weight sync v1 crossed nodes through Ray's object store: (\d+) files, (\d+) bytes, "
                       r"written to (\S+) on the rollout node; engines now serve versions \['(\d+)'\]", log)
    assert synced, log[-3000:]
    files, size, folder, served = synced.groups()
    weights = (model / "model.safetensors").stat().st_size
    assert int(files) >= 2
    if mode == "lora":  # the adapter (and tokenizer) travel, not the model
        assert int(size) < weights / 2, (size, weights)
    else:
        assert int(size) > weights, (size, weights)
    assert served == "1"  # the engine itself reports the new version (it started at 0)
    assert not Path(folder).exists()  # the rollout manager removed what it received when it shut down

    rows = metrics(tmp_path / "logs")
    assert [r["step"] for r in rows] == [0]
    assert rows[0]["weights/cross_node"] == 1.0 and rows[0]["weights/version"] == 1
    assert not processes_mentioning(str(model))  # the engine stopped with the job
