"""Without the OpenClaw CLI: the server fits an over-long agent prompt into the model's
window by the documented rule (or refuses with OpenAI's 400), marks the stored record, and
OpenClaw's utility calls (memory flush, compaction summary) are stored as `side`.

Real server over real HTTP with the tiny model at the embedded model's 8,192 context, real
SQLite buffer; the request shapes are those the OpenClaw CLI 2026.9.6 sends (its system prompt
texts are quoted from its source: memory-core's flush plan and SUMMARIZATION_SYSTEM_PROMPT).
"""

from __future__ import annotations

import asyncio
import json
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from openclaw.buffer import TrajectoryBuffer
from openclaw.intercept.config import InterceptConfig
from openclaw.intercept.messages import (
    INTERNAL_BEGIN,
    INTERNAL_END,
    OPENCLAW_COMPACTION_SUMMARY,
    OPENCLAW_MEMORY_FLUSH,
    openclaw_utility_kind,
)
from openclaw.server.banner import OPENCLAW_MIN_CONTEXT_WINDOW, openclaw_provider_config
from openclaw.server.config import RLConfig, ServerConfig

CTX = 8192
SUMMARY_SYSTEM = ("You are a context summarization assistant. Your task is to read a conversation between a "
                  "user and an AI assistant, then produce a structured summary following the exact format "
                  "specified.\n\nDo NOT continue the conversation. ONLY output the structured summary.")
FLUSH_SYSTEM = ("Pre-compaction memory flush turn. The session is near auto-compaction; capture durable memories "
                "to disk. Store durable memories only in memory/2026-11-24.md (create memory/ if needed).")
FLUSH_USER = ("Pre-compaction memory flush. Store durable memories only in memory/2026-11-24.md (create memory/ "
              "if needed). If nothing to store, reply with NO_REPLY.")


def _runtime(session: str) -> str:
    return f"Runtime: agent=main | session=agent:main:explicit:{session} | sessionId={session} | host=vm"


def _tools(n: int) -> list[dict[str, Any]]:
    params = {"type": "object", "properties": {f"arg{j}": {"type": "string", "description": "a parameter " * 8}
                                               for j in range(6)}}
    return [{"type": "function", "function": {"name": f"tool_{i}", "description": f"Tool {i}.\nLong details " * 4,
                                              "parameters": params}} for i in range(n)]


def _history(pairs: int, padding: int, user: str, assistant: str) -> list[dict[str, Any]]:
    """`pairs` earlier exchanges, each message numbered (`user` + i) and padded with `padding` times
    two filler words."""
    history: list[dict[str, Any]] = []
    for i in range(pairs):
        history += [{"role": "user", "content": f"{user}{i} " + "lorem ipsum " * padding},
                    {"role": "assistant", "content": f"{assistant}{i} " + "dolor sit " * padding}]
    return history


def _system(n_sections: int) -> str:
    return "You are a personal assistant running inside OpenClaw.\n" + "".join(
        f"## Section {i}\n" + "Follow the workspace rules carefully and write things down. " * 12 + "\n"
        for i in range(n_sections)) + "## Runtime\nEND-OF-SYSTEM-PROMPT"


@pytest.fixture(scope="module")
def server(tiny_model_path: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, Path]]:
    from openclaw.engines.hf_engine import HFEngine
    from openclaw.server.app import create_app
    from openclaw.server.runner import serve_in_background

    model = tmp_path_factory.mktemp("tiny8k") / "model"
    shutil.copytree(tiny_model_path, model)
    cfg = json.loads((model / "config.json").read_text())
    cfg["max_position_embeddings"] = CTX
    (model / "config.json").write_text(json.dumps(cfg))
    buf = tmp_path_factory.mktemp("buf") / "b"
    engine = HFEngine.load(str(model), dtype="float32", device="cpu", max_batch_size=4)
    app = create_app(ServerConfig(served_model_name="tiny", rl=RLConfig(enabled=True, intercept=InterceptConfig(
        buffer_dir=buf))), engine=engine)
    try:
        with serve_in_background(app) as srv:
            yield srv.base_url, buf
    finally:
        asyncio.run(engine.shutdown())


def _chat(base: str, body: dict[str, Any]) -> httpx.Response:
    return httpx.post(f"{base}/v1/chat/completions", json={"model": "tiny", **body}, timeout=120)


def _turns(buf: Path, session: str) -> list[Any]:
    with TrajectoryBuffer.open(buf) as b:
        return b.session_turns(session)


def test_snippet_tells_the_cli_a_window_it_can_use() -> None:
    # Told 8,192 the CLI clamps max_completion_tokens to max(1, 8192 - ~15.5k - 1) = 1.
    model = openclaw_provider_config("http://h:1", "m", None, CTX, 2048)["models"]["providers"]["openclaw-rl"]["models"][0]
    assert model["contextWindow"] == OPENCLAW_MIN_CONTEXT_WINDOW and model["maxTokens"] == CTX // 8
    big = openclaw_provider_config("http://h:1", "m", None, 131072, 2048)["models"]["providers"]["openclaw-rl"]
    assert big["models"][0]["contextWindow"] == 131072 and big["models"][0]["maxTokens"] == 2048


def test_over_long_agent_prompt_is_trimmed_in_order_and_marked(server: tuple[str, Path]) -> None:
    base, buf = server
    history = _history(30, 30, "old question ", "old answer ")
    msgs = ([{"role": "system", "content": _system(60)}] + history
            + [{"role": "user", "content": "What is the capital of France?\n\n" + _runtime("fit-1")},
               {"role": "user", "content": f"{INTERNAL_BEGIN}\nActive exec sessions: none\n{INTERNAL_END}"}])
    r = _chat(base, {"messages": msgs, "tools": _tools(12), "max_completion_tokens": 16, "stream": True,
                     "stream_options": {"include_usage": True}})
    assert r.status_code == 200, r.text
    usage = [json.loads(line[6:]) for line in r.text.splitlines() if line.startswith("data: {")][-1]["usage"]
    assert usage["prompt_tokens"] + 16 <= CTX and usage["completion_tokens"] == 16  # not a 1-token reply
    (turn,) = _turns(buf, "fit-1")
    fit = turn.metadata["context_fit"]
    # All 60 history messages went first; then the schemas; then the system prompt's middle.
    assert fit["dropped_messages"] == 60 and fit["tool_schemas_dropped"] and fit["system_chars_dropped"] > 0
    assert fit["original_prompt_tokens"] > CTX and fit["prompt_tokens"] == len(turn.prompt_ids) == usage["prompt_tokens"]
    assert turn.turn_type == "main" and turn.trainable and len(turn.response_logprobs) == 16
    assert len(turn.messages) == len(msgs)  # the record keeps the request as sent; prompt_ids are what ran


def test_history_alone_is_dropped_when_enough(server: tuple[str, Path]) -> None:
    base, buf = server
    history = _history(40, 40, "q", "a")
    msgs = [{"role": "system", "content": "Be brief."}] + history + [{"role": "user", "content": "last?"}]
    r = _chat(base, {"messages": msgs, "max_tokens": 8, "session_id": "fit-2"})
    assert r.status_code == 200, r.text
    fit = _turns(buf, "fit-2")[0].metadata["context_fit"]
    assert 0 < fit["dropped_messages"] < 80 and fit["dropped_messages"] % 2 == 0  # oldest first, whole pairs
    assert not fit["tool_schemas_dropped"] and fit["system_chars_dropped"] == 0


def test_a_prompt_that_fits_is_untouched(server: tuple[str, Path]) -> None:
    base, buf = server
    r = _chat(base, {"messages": [{"role": "user", "content": "hi"}], "max_tokens": 4, "session_id": "fit-3"})
    assert r.status_code == 200
    assert "context_fit" not in _turns(buf, "fit-3")[0].metadata


def test_what_cannot_fit_is_refused_in_openai_shape(server: tuple[str, Path]) -> None:
    base, _ = server
    r = _chat(base, {"messages": [{"role": "system", "content": "s"},
                                  {"role": "user", "content": "word " * 9000}], "max_tokens": 8})
    assert r.status_code == 400
    err = r.json()["error"]
    assert err["code"] == "context_length_exceeded" and err["type"] == "invalid_request_error"
    assert err["param"] == "messages" and "8192" in err["message"]


def test_openclaw_utility_calls_are_side(server: tuple[str, Path]) -> None:
    base, buf = server
    main_msgs = [{"role": "system", "content": "You are a personal assistant running inside OpenClaw."},
                 {"role": "user", "content": "Hello there\n\n" + _runtime("util-1")}]
    assert _chat(base, {"messages": main_msgs, "max_tokens": 4}).status_code == 200
    # The flush runs in its own internal session; the summary carries no session at all.
    flush = [{"role": "system", "content": "You are a personal assistant running inside OpenClaw.\n" + FLUSH_SYSTEM},
             {"role": "user", "content": "Hello there\n\n" + _runtime("internal-session-effects-abc")},
             {"role": "assistant", "content": "hi"}, {"role": "user", "content": FLUSH_USER}]
    summary = [{"role": "system", "content": SUMMARY_SYSTEM},
               {"role": "user", "content": "<conversation>\n[User]: Hello there\n</conversation>\n\nSummarize."}]
    for msgs in (flush, summary):
        r = _chat(base, {"messages": msgs, "max_completion_tokens": 4, "stream": True})
        assert r.status_code == 200 and "data: [DONE]" in r.text
    with TrajectoryBuffer.open(buf) as b:
        every = list(b.iter_turns())
    mine = [t for t in every if t.session_id == "util-1" or t.metadata.get("side_reason")]
    kinds = {t.metadata.get("side_reason"): t for t in mine if t.turn_type == "side"}
    assert set(kinds) == {OPENCLAW_MEMORY_FLUSH, OPENCLAW_COMPACTION_SUMMARY}
    assert all(not t.trainable for t in kinds.values())
    assert [t.turn_type for t in mine if t.session_id == "util-1"] == ["main"]
    assert not [t for t in every if t.turn_type == "main" and t.session_id.startswith("internal-session-effects")]


def test_utility_recognition_is_anchored() -> None:
    assert openclaw_utility_kind([{"role": "system", "content": SUMMARY_SYSTEM}]) == OPENCLAW_COMPACTION_SUMMARY
    assert openclaw_utility_kind([{"role": "user", "content": FLUSH_USER}]) == OPENCLAW_MEMORY_FLUSH
    # A user quoting the phrase inside a normal turn keeps it a normal turn.
    quoting = [{"role": "system", "content": "Be helpful."},
               {"role": "user", "content": "Why does my log say 'Pre-compaction memory flush.'?"}]
    assert openclaw_utility_kind(quoting) is None


def test_an_agents_next_turn_gets_the_same_cut_so_its_prompt_extends_the_cached_one(server: tuple[str, Path]) -> None:
    """Two turns of one agent: the same system prompt and tools, a short and a long message. The
    system prompt loses the same middle in both (the cut is a whole number of steps), so the second
    prompt shares everything before its message with the first: what the prefix cache reuses."""
    from openclaw.engines.prefix_cache import common_prefix_len

    base, buf = server
    ids = []
    for session, question in (("cut-1", "Hi?"), ("cut-2", "Could you list three rivers in Europe and say " * 6)):
        msgs = [{"role": "system", "content": _system(150)}, {"role": "user", "content": question + _runtime(session)}]
        r = _chat(base, {"messages": msgs, "tools": _tools(12), "max_tokens": 8})
        assert r.status_code == 200, r.text
        (turn,) = _turns(buf, session)
        assert turn.metadata["context_fit"]["system_chars_dropped"] > 0
        ids.append((turn.metadata["context_fit"]["system_chars_dropped"], turn.prompt_ids))
    (cut1, first), (cut2, second) = ids
    assert cut1 == cut2
    question_tokens = 120  # an upper bound on the first message, its runtime line and the template's tail
    assert common_prefix_len(tuple(first), tuple(second)) >= len(first) - question_tokens
