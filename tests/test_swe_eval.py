"""swe-rl's evaluation command on the held-out split, both ways a model is given: a checkpoint
(embedded engine, the training loop's token path) and an OpenAI-compatible endpoint (our own
server over real HTTP). Each writes results.json with the resolved rate plus a log and a patch
per instance."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest
from slime.utils.plugins import load_plugin_module

ROOT = Path(__file__).resolve().parents[1]
# The trainer's plugin loader puts swe-rl on the import path, as in a run; its sibling
# modules are then imported by their own names (one module object each).
load_plugin_module("swe-rl/swe_sources.py")

import swe_eval  # noqa: E402
import swe_sources  # noqa: E402
from swe_instances import shipped_instances  # noqa: E402

pytestmark = pytest.mark.skipif(shutil.which("bwrap") is None, reason="bubblewrap not installed")


@pytest.fixture(scope="module", autouse=True)
def sources():
    missing = swe_sources.missing_sources([shipped_instances("heldout")[0].sdist])
    if missing:
        msg = f"missing: {missing}; run `bash swe-rl/setup_swe.sh`"
        pytest.fail(msg) if os.environ.get("CI") else pytest.skip(msg)


def check_outputs(out: Path) -> None:
    summary = json.loads((out / "results.json").read_text())
    (iid,) = summary["per_instance"]
    assert iid == shipped_instances("heldout")[0].instance_id
    assert summary["instances"] == 1 and summary["resolved_rate"] == summary["resolved"] / 1
    log = json.loads((out / iid / "log.json").read_text())
    assert log["steps"] == 2 and set(log["test_results"]) == set(shipped_instances("heldout")[0].test_ids)
    assert (out / iid / "patch.diff").read_text() == log["patch"]
    assert len(log["transcript"]) == 2 and all("model" in t and "observation" in t for t in log["transcript"])


def test_eval_a_checkpoint(tmp_path, tiny_model_path, capsys):
    out = tmp_path / "ck"
    assert swe_eval.main(["--model-path", str(tiny_model_path), "--limit", "1", "--max-steps", "2",
                          "--max-new-tokens", "16", "--out", str(out)]) == 0
    assert "resolved 0/1" in capsys.readouterr().out  # a random tiny model fixes nothing
    check_outputs(out)


@pytest.mark.slow  # ~90 s on the shared 2-core machine (server start + 2 chat turns + tests)
def test_eval_an_openai_compatible_endpoint(tmp_path, tiny_model_path):
    from openclaw.server import EngineConfig, ServerConfig, create_app, serve_in_background

    cfg = ServerConfig(engine=EngineConfig(model_path=str(tiny_model_path)))
    with serve_in_background(create_app(cfg)) as srv:
        assert swe_eval.main(["--base-url", srv.base_url + "/v1", "--model", "tiny", "--limit", "1",
                              "--max-steps", "2", "--max-new-tokens", "16", "--out", str(tmp_path / "ep")]) == 0
    check_outputs(tmp_path / "ep")
