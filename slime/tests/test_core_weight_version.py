"""An engine whose weight version is not an integer (SGLang started without --weight-version
reports "default") is a loud, counted warning in the default rollout, not a silent version 0:
staleness (--max-staleness, train_async) depends on it.

The engine here is a minimal SGLang-protocol server over real HTTP (SGLang itself needs GPUs, and
the embedded engine only serves integer versions)."""

from __future__ import annotations

import json
import logging
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from slime.rollout.data_source import DataSourceConfig, RolloutDataSource
from slime.rollout.sglang_rollout import generate_rollout, parse_weight_version
from slime.utils.arguments import parse_config


class _SGLangDefaultVersion(BaseHTTPRequestHandler):
    def do_POST(self) -> None:  # noqa: N802 - http.server's naming
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        assert self.path == "/generate" and body["return_logprob"] is True
        out = json.dumps({"text": "ab", "output_ids": [5, 6], "meta_info": {
            "id": "r", "finish_reason": {"type": "stop"}, "prompt_tokens": len(body["input_ids"]), "completion_tokens": 2,
            "output_token_logprobs": [[-0.1, 5, None], [-0.2, 6, None]], "weight_version": "default"}}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(out)))
        self.end_headers()
        self.wfile.write(out)

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture
def engine_url() -> Iterator[str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _SGLangDefaultVersion)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


def test_parse_weight_version() -> None:
    assert parse_weight_version("3") == 3 and parse_weight_version(4) == 4
    assert parse_weight_version("default") is None and parse_weight_version(None) is None


def test_unreadable_version_is_counted_and_warned(engine_url: str, tiny_model_path: Path, tmp_path: Path,
                                                  caplog: pytest.LogCaptureFixture) -> None:
    prompts = tmp_path / "prompts.jsonl"
    prompts.write_text(json.dumps({"input": "Count to 3:", "label": "3"}) + "\n")
    args = parse_config(["--hf-checkpoint", str(tiny_model_path), "--prompt-data", str(prompts), "--label-key", "label",
                         "--rm-type", "length", "--rollout-batch-size", "1", "--n-samples-per-prompt", "2",
                         "--rollout-max-response-len", "4"]).to_namespace()
    args.rollout_engine_urls = [engine_url]
    with caplog.at_level(logging.WARNING, logger="slime.rollout"):
        out = generate_rollout(args, 0, RolloutDataSource(DataSourceConfig.from_args(args)))
    samples = [s for g in out.samples for s in g]
    assert len(samples) == 2 and all(s.metadata["weight_version_unreadable"] == "'default'" for s in samples)
    assert out.metrics["rollout/weight_version_unreadable"] == 2
    assert any("2 of 2 samples came with weight version 'default'" in r.getMessage() for r in caplog.records)
