"""openclaw-tinker's fast checks: refusals, Tinker's datum layout, the deploy scripts without keys.

The training itself runs against a live Tinker-API server in test_tinker_e2e.py (slow)."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

ROOT = Path(__file__).resolve().parents[1]


def _load(name: str):
    spec = importlib.util.spec_from_file_location(f"openclaw_tinker_{name}", ROOT / "openclaw-tinker" / f"{name}.py")
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod
    spec.loader.exec_module(mod)
    return mod


train = _load("tinker_train")


@pytest.mark.parametrize(("flags", "reason"), [
    (["--full-finetune"], "LoRA adapters only"),
    (["--kl-coef", "0.5"], "no KL term"),
    (["--opd-topk", "16"], "one advantage per token"),
])
def test_refuses_what_tinker_cannot_express(flags: list[str], reason: str) -> None:
    with pytest.raises(train.Refused, match=reason):
        train.parse_args(["--base-model", "m", *flags])


def test_refusal_is_a_nonzero_exit_with_the_reason(capsys: pytest.CaptureFixture[str]) -> None:
    assert train.main(["--base-model", "m", "--kl-coef", "0.1"]) == 2
    assert "--kl-coef 0.1" in capsys.readouterr().err


def test_datum_layout_is_next_token_with_response_only_weights() -> None:
    rec = SimpleNamespace(prompt_ids=[1, 2, 3], response_ids=[7, 8], response_logprobs=[-0.5, -1.5])
    d = train.to_datum(rec, [0.25, -0.75])
    assert d.model_input.to_ints() == [1, 2, 3, 7]
    inputs = {k: v.data for k, v in d.loss_fn_inputs.items()}
    assert inputs["target_tokens"] == [2, 3, 7, 8]
    assert inputs["logprobs"] == [0.0, 0.0, -0.5, -1.5]
    assert inputs["advantages"] == [0.0, 0.0, 0.25, -0.75]
    assert inputs["weights"] == [0.0, 0.0, 1.0, 1.0]


def _rec(score: float, hint: str | None, n: int = 2) -> SimpleNamespace:
    return SimpleNamespace(judgement={"score": score, "hint": hint}, response_logprobs=[-1.0] * n,
                           messages=[{"role": "user", "content": "q"}], tools=None, response_ids=[5] * n,
                           feedback=None)


@pytest.mark.parametrize(("method", "baseline", "expected"), [
    ("rl", "zero", [[1.0, 1.0], [-1.0, -1.0]]),
    ("rl", "batch", [[1.0, 1.0], [-1.0, -1.0]]),  # mean 0
    ("combine", "zero", [[1.0, 1.0], [-1.0 + 0.5, -1.0 + 0.5]]),  # + w_opd (teacher - old = 0.5) where hinted
    ("opd", "zero", [[0.0, 0.0], [0.5, 0.5]]),
])
def test_token_advantages_map_each_method(method: str, baseline: str, expected: list[list[float]],
                                          monkeypatch: pytest.MonkeyPatch) -> None:
    cfg = train.TinkerTrainConfig(method=method, base_model="m", buffer_dir=Path("."), server_url="x",
                                  baseline=baseline)
    t = SimpleNamespace(cfg=cfg)
    # The teacher (Tinker's compute_logprobs under the hinted prompt) is exercised live in the e2e
    # test; here only the arithmetic: teacher = old + 0.5 on every token.
    monkeypatch.setattr(train, "teacher_logprobs", lambda t, rec, hint: [x + 0.5 for x in rec.response_logprobs])
    batch = [_rec(1.0, None), _rec(-1.0, "be brief")]
    adv, metrics = train.token_advantages(t, batch)
    assert adv == expected
    assert metrics["rollout/opd_hinted"] == (0.0 if method == "rl" else 1.0)


def _script(name: str, env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    clean = {k: v for k, v in os.environ.items() if not k.startswith(("TINKER_", "FIREWORKS_"))}
    return subprocess.run(["bash", str(ROOT / name), *args], env={**clean, **env}, capture_output=True,
                          text=True, timeout=60, cwd=ROOT)


def test_deploy_to_tinker_without_key_names_the_env_vars() -> None:
    r = _script("deploy_to_tinker.sh", {})
    assert r.returncode != 0
    for var in ("TINKER_API_KEY", "TINKER_PROJECT_ID", "TINKER_ENDPOINT"):
        assert var in r.stderr


def test_deploy_to_fireworks_says_what_it_needs() -> None:
    r = _script("deploy_to_fireworks.sh", {}, "--gpus", "8", "--method", "combine")
    assert r.returncode != 0 and "FIREWORKS_API_KEY" in r.stderr
    r = _script("deploy_to_fireworks.sh", {"FIREWORKS_API_KEY": "k"}, "--gpus", "8", "--method", "combine")
    assert r.returncode == 3
    assert "refused" in r.stderr and "fireworks-ai[training]" in r.stderr and "deploy_to_tinker.sh" in r.stderr
    r = _script("deploy_to_fireworks.sh", {"FIREWORKS_API_KEY": "k"}, "--gpus", "8", "--method", "dpo")
    assert r.returncode == 2 and "--method must be" in r.stderr


def test_server_backend_tinker_without_key_is_a_config_error(tmp_path: Path) -> None:
    from openclaw.server.config import ConfigError, EngineConfig
    from openclaw.server.engine_loader import load_engine

    os.environ.pop("TINKER_API_KEY", None)
    with pytest.raises(ConfigError, match="TINKER_API_KEY"):
        load_engine(EngineConfig(backend="tinker", model_path=str(tmp_path)))
    with pytest.raises(ConfigError, match="--model-path"):
        load_engine(EngineConfig(backend="tinker"))


def test_deploy_to_tinker_routes_flags_to_the_server_and_the_trainer(tmp_path: Path) -> None:
    r = _script("deploy_to_tinker.sh", {"TINKER_API_KEY": "k", "TINKER_ENDPOINT": "http://127.0.0.1:9", "OPENCLAW_DRY_RUN": "1"},
                "--method", "opd", "--majority-vote-n", "3", "--lr", "3e-5", "--rl-buffer-dir", str(tmp_path / "b"))
    assert r.returncode == 0, r.stderr
    server = next(ln for ln in r.stdout.splitlines() if ln.startswith("would run server: "))
    trainer = next(ln for ln in r.stdout.splitlines() if ln.startswith("would run trainer: "))
    assert "--backend tinker" in server and "--model-path Qwen/Qwen3-8B" in server
    assert "--engine-url http://127.0.0.1:9" in server and "--majority-vote-n 3" in server  # the judge's flag
    assert f"--rl-buffer-dir {tmp_path / 'b'}" in server and "--lr" not in server
    assert '"method": "opd"' in trainer and '"lr": "3e-05"' in trainer
    assert "k" not in server.split()  # the key never goes on a command line
