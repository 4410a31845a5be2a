"""Multi-node logic without a cluster: where engines listen, which nodes the placement flags
allow, when a weight push must carry the files, and the files' round trip."""

from __future__ import annotations

import os
import re
from pathlib import Path
from types import SimpleNamespace

import pytest
from slime.ray.driver import RolloutManagerActor, Run, needs_cross_node_sync
from slime.ray.engine_process import engine_bind_host
from slime.ray.placement_group import check_placement_resources, cpus_per_rank, resource_request
from slime.ray.rollout_manager import write_weight_files
from slime.ray.train_actor import read_weight_files
from slime.utils.arguments import ConfigError, parse_config
from slime.utils.weight_sync import WeightVersions

NO_ENV: dict[str, str] = {}


# ---------------------------------------------------------------------------- engine address
def test_engines_stay_on_loopback_on_one_node_unless_told():
    assert engine_bind_host("auto", "10.0.0.5", 1, None) == "127.0.0.1"
    assert engine_bind_host("loopback", "10.0.0.5", 4, "key") == "127.0.0.1"
    assert engine_bind_host("node", "10.0.0.5", 1, "key") == "10.0.0.5"


def test_engines_on_a_multi_node_cluster_listen_on_the_node_address():
    assert engine_bind_host("auto", "10.0.0.5", 2, "key") == "10.0.0.5"
    # another loopback address exposes nothing: no key needed
    assert engine_bind_host("auto", "127.0.0.2", 2, None) == "127.0.0.2"


@pytest.mark.parametrize("mode,nodes", [("auto", 2), ("node", 1)])
def test_an_exposed_engine_without_an_api_key_is_refused(mode, nodes):
    with pytest.raises(ValueError, match="OPENCLAW_API_KEY") as err:
        engine_bind_host(mode, "10.0.0.5", nodes, None)
    assert "10.0.0.5" in str(err.value) and "--rollout-engine-bind loopback" in str(err.value)


def test_an_unknown_bind_mode_is_refused():
    with pytest.raises(ValueError, match="auto, loopback, node"):
        engine_bind_host("public", "10.0.0.5", 2, "key")


def test_the_rollout_manager_takes_the_drivers_api_key(tmp_path, monkeypatch):
    monkeypatch.setenv("OPENCLAW_API_KEY", "")  # recorded, so the actor's write is undone after the test
    monkeypatch.delenv("OPENCLAW_API_KEY")
    cfg = parse_config(["--log-dir", str(tmp_path / "logs")], env=NO_ENV)
    manager = RolloutManagerActor(cfg, str(tmp_path), False, str(tmp_path / "logs"), None, 0, None, "k-123")
    try:
        from slime.rollout.sglang_client import auth_headers

        assert os.environ["OPENCLAW_API_KEY"] == "k-123"  # the engines it starts inherit it
        assert auth_headers() == {"Authorization": "Bearer k-123"}
    finally:
        manager.shutdown()


# ---------------------------------------------------------------------------- placement flags
def test_placement_flags_parse_into_the_cluster_section():
    cfg = parse_config(["--actor-resources", "trainer_node", "--rollout-resources", "engine_node",
                        "--rollout-engine-bind", "node", "--weight-sync-shared-storage"], env=NO_ENV)
    c = cfg.cluster
    assert (c.actor_resources, c.rollout_resources, c.rollout_engine_bind, c.weight_sync_shared_storage) == (
        "trainer_node", "engine_node", "node", True)
    ns = cfg.to_namespace()
    assert (ns.actor_resources, ns.rollout_resources) == ("trainer_node", "engine_node")
    default = parse_config([], env=NO_ENV).cluster
    assert (default.actor_resources, default.rollout_resources, default.rollout_engine_bind,
            default.weight_sync_shared_storage) == (None, None, "auto", False)


@pytest.mark.parametrize("argv,needle", [
    (["--actor-resources", "GPU"], "--actor-resources 'GPU'"),
    (["--rollout-resources", " "], "--rollout-resources ' '"),
    (["--rollout-resources", "node:10.0.0.5"], "node: resource"),
    (["--rollout-engine-bind", "public"], "public"),
])
def test_placement_flags_refuse_what_cannot_pick_a_node(argv, needle):
    with pytest.raises(ConfigError, match=re.escape(needle)):
        parse_config(argv, env=NO_ENV)


def _node(resources: dict[str, float], alive: bool = True) -> dict:
    return {"Alive": alive, "Resources": {"CPU": 2.0, "memory": 1e9, "node:10.0.0.1": 1.0, **resources}}


def test_a_resource_no_live_node_offers_is_refused_with_what_there_is():
    nodes = [_node({"engine_node": 1}), _node({"trainer_node": 1}, alive=False)]
    check_placement_resources(SimpleNamespace(actor_resources=None, rollout_resources="engine_node"), nodes)
    with pytest.raises(ValueError) as err:
        check_placement_resources(SimpleNamespace(actor_resources="trainer_node", rollout_resources="engine_node"),
                                  nodes)
    message = str(err.value)
    assert "--actor-resources trainer_node" in message and "no node of this Ray cluster" in message
    assert "custom resources here: engine_node" in message and "node:" not in message.split("here:")[1]
    assert """ray start ... --resources '{"trainer_node": 1}'""" in message


def test_a_resource_request_is_a_sliver_so_many_ranks_share_one_unit():
    assert resource_request(None) == {}
    (amount,) = resource_request("trainer_node").values()
    assert 0 < amount <= 0.001


@pytest.mark.parametrize("node_cpus,world,expected", [
    ([2.0], 1, 2.0),  # one node: the whole node, as before
    ([4.0], 2, 2.0),
    ([2.0, 1.0], 1, 2.0),  # never more than one node has: a bundle cannot span nodes
    ([1.0, 1.0], 1, 1.0),
    ([1.0], 3, 1.0),  # more ranks than CPUs: one each
])
def test_cpus_per_rank(node_cpus, world, expected):
    assert cpus_per_rank(node_cpus, world) == expected


# ---------------------------------------------------------------------------- the weight sync
def test_the_node_ids_decide_the_path_not_the_disk():
    assert not needs_cross_node_sync("a", "a")
    assert needs_cross_node_sync("a", "b")
    assert not needs_cross_node_sync("a", "b", shared_storage=True)


def test_weight_files_round_trip(tmp_path):
    src = tmp_path / "saved"
    (src / "sub").mkdir(parents=True)
    (src / "model.safetensors").write_bytes(b"\x00\x01weights")
    (src / "config.json").write_text("{}")
    (src / "sub" / "extra.bin").write_bytes(b"x" * 10)
    files = read_weight_files(src)
    assert set(files) == {"model.safetensors", "config.json", "sub/extra.bin"}
    out = tmp_path / "received" / "v1"
    assert write_weight_files(files, out) == sum(len(v) for v in files.values())
    assert read_weight_files(out) == files


@pytest.mark.parametrize("name", ["../escape", "/etc/passwd", "a/../../escape", "."])
def test_weight_files_may_not_leave_their_folder(tmp_path, name):
    with pytest.raises(ValueError, match="not a path inside"):
        write_weight_files({name: b"x"}, tmp_path / "v1")
    assert not (tmp_path / "escape").exists()


def test_no_weight_files_is_an_error(tmp_path):
    with pytest.raises(ValueError, match="no weight files"):
        write_weight_files({}, tmp_path / "v1")


class _Train:
    def __init__(self) -> None:
        self.calls: list[str] = []

    def save_hf(self, folder) -> None:
        self.calls.append("save_hf")
        Path(folder).mkdir(parents=True)
        (Path(folder) / "config.json").write_text("{}")

    def save_hf_files(self) -> dict[str, bytes]:
        self.calls.append("save_hf_files")
        return {"config.json": b"{}"}


class _Rollout:
    def __init__(self) -> None:
        self.calls: list[tuple] = []

    def update_weights(self, path: str, version: int) -> int:
        self.calls.append(("update_weights", Path(path).is_dir(), version))
        return version

    def update_weights_from_files(self, files: dict[str, bytes], version: int) -> dict:
        self.calls.append(("update_weights_from_files", sorted(files), version))
        return {"folder": "/elsewhere/v1", "files": len(files), "bytes": 2, "served_versions": [str(version)]}


@pytest.mark.parametrize("cross_node", [False, True])
def test_sync_weights_takes_the_path_the_layout_chose(tmp_path, cross_node):
    cfg = parse_config([], env=NO_ENV)
    run = Run(cfg=cfg, args=cfg.to_namespace(), model_path="/m", start_rollout_id=0, num_rollout=1,
              weights=WeightVersions(root=tmp_path / "sync"), train=_Train(), rollout=_Rollout(),
              weights_cross_node=cross_node)
    run.sync_weights()
    run.sync_weights()
    assert run.weights.version == 2
    if cross_node:
        assert run.train.calls == ["save_hf_files"] * 2
        assert run.rollout.calls == [("update_weights_from_files", ["config.json"], 1),
                                     ("update_weights_from_files", ["config.json"], 2)]
        assert not (tmp_path / "sync").exists()  # nothing written on this side
    else:
        assert run.train.calls == ["save_hf"] * 2
        assert run.rollout.calls == [("update_weights", True, 1), ("update_weights", True, 2)]
        assert sorted(p.name for p in (tmp_path / "sync").iterdir()) == ["v2"]


def test_the_rollout_manager_writes_received_weights_locally_and_keeps_only_the_latest(tmp_path, monkeypatch):
    import slime.utils.weight_sync as weight_sync
    from slime.ray.rollout_manager import RolloutManager

    pushed: list[tuple] = []
    monkeypatch.setattr(weight_sync, "push_to_engines",
                        lambda urls, path, version, adapter_name=None: pushed.append(
                            (Path(path), read_weight_files(path), version)))
    monkeypatch.setenv("SLIME_WEIGHT_SYNC_DIR", str(tmp_path / "sync"))
    cfg = parse_config(["--log-dir", str(tmp_path / "logs")], env=NO_ENV)
    manager = RolloutManager(cfg, str(tmp_path), log_dir=str(tmp_path / "logs"))
    first = manager.update_weights_from_files({"config.json": b"{}", "model.safetensors": b"w1"}, 1)
    second = manager.update_weights_from_files({"config.json": b"{}", "model.safetensors": b"w2"}, 2)
    assert [(p[1]["model.safetensors"], p[2]) for p in pushed] == [(b"w1", 1), (b"w2", 2)]
    assert (first["files"], first["bytes"]) == (2, 4)
    assert not Path(first["folder"]).exists() and Path(second["folder"]).is_dir()
    assert Path(second["folder"]).is_relative_to(tmp_path / "sync")
    assert manager.weight_version == 2
    manager.shutdown()
    assert not Path(second["folder"]).exists()
