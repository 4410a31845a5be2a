"""`--rl-train-reasoning keep|mask` behind the real server: the recorded turn keeps every token the
engine generated and, with `mask`, the sample's loss mask zeros exactly the think block; the judge
sees the answer only; and the next request, whose history drops (or re-wraps) the reasoning, still
continues the session.

The model is the one tests/test_server_reasoning.py trains to write Qwen3's think blocks (built
once per machine), so the tokens are what an engine really generated.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest
from slime.utils.plugins import load_plugin_module

from openclaw.bridge import loss_mask_of, turn_to_sample
from openclaw.buffer import TrajectoryBuffer, TurnRecord
from openclaw.intercept.config import InterceptConfig
from openclaw.intercept.sessions import SessionTracker
from openclaw.judge.turns import response_text, to_input
from openclaw.server.config import ConfigError, parse_config
from openclaw.server.hooks import RLControl

# The trained model and its prompts (tests run with --import-mode=importlib: loaded by path).
_models = load_plugin_module(str(Path(__file__).resolve().parent / "test_server_reasoning.py"))
GREET, GREET_THOUGHT, ASK, WEATHER = _models.GREET, _models.GREET_THOUGHT, _models.ASK, _models.WEATHER


@pytest.fixture(scope="module")
def engine(tiny_model_path: Path):
    from openclaw.engines.hf_engine import HFEngine

    eng = HFEngine.load(str(_models.build_reasoning_model(tiny_model_path)), dtype="float32", device="cpu",
                        max_batch_size=4)
    yield eng
    asyncio.run(eng.shutdown())


@contextmanager
def serve(engine: Any, buffer_dir: Path, *flags: str) -> Iterator[httpx.Client]:
    """The real app, its intercept built from the server's own flags."""
    from openclaw.server.app import create_app
    from openclaw.server.runner import serve_in_background

    cfg = parse_config(["--enable-rl-intercept", "--rl-buffer-dir", str(buffer_dir), *flags], env={})
    with serve_in_background(create_app(cfg, engine=engine)) as srv, \
            httpx.Client(base_url=srv.base_url, timeout=60) as client:
        yield client


def chat(client: httpx.Client, messages: list[dict], stream: bool = False, **body: Any) -> dict:
    payload = {"messages": messages, "tools": [WEATHER], "temperature": 0, "max_tokens": 64, "stream": stream, **body}
    r = client.post("/v1/chat/completions", json=payload)
    assert r.status_code == 200, r.text
    if stream:
        assert r.text.rstrip().endswith("data: [DONE]")
        return {}
    return r.json()["choices"][0]["message"]


def turns(buffer_dir: Path) -> list[TurnRecord]:
    b = TrajectoryBuffer.open(buffer_dir)
    try:
        return list(b.iter_turns())
    finally:
        b.close()


def think_end(engine: Any, rec: TurnRecord) -> int:
    """The number of leading response tokens whose text reaches the end of `</think>`, counted
    here independently of the server's code."""
    tok = engine.tokenizer
    ids = rec.response_ids
    return next(k for k in range(1, len(ids) + 1) if "</think>" in tok.decode(ids[:k]))


@pytest.mark.parametrize("stream", [False, True])
def test_mask_zeros_exactly_the_think_tokens_and_keeps_them(engine: Any, tmp_path: Path, stream: bool) -> None:
    d = tmp_path / "buf"
    with serve(engine, d, "--reasoning-parser", "qwen3", "--rl-train-reasoning", "mask") as client:
        chat(client, GREET, stream=stream)
    (rec,) = turns(d)
    tok, ids = engine.tokenizer, rec.response_ids
    k = think_end(engine, rec)
    assert tok.decode(ids[:k]).startswith("<think>") and tok.decode(ids[k:], skip_special_tokens=True) == "\n\nHello!"
    assert rec.metadata["reasoning"] == {"train": "mask", "tokens": [0, k]}
    assert rec.metadata["loss_mask_zero_spans"] == [[0, k]]
    # The tokens and their engine log-probs all stay: the sample is what the engine generated.
    assert len(rec.response_logprobs) == len(ids) and rec.response_text.startswith("<think>")
    assert rec.trainable and rec.content == "Hello!" and rec.tool_calls is None
    mask = loss_mask_of(rec)
    assert mask == [0] * k + [1] * (len(ids) - k)
    sample = turn_to_sample(rec, 1.0)
    assert sample.loss_mask == mask and sample.tokens[-len(ids):] == ids
    assert sample.rollout_log_probs == rec.response_logprobs


def test_keep_trains_the_whole_response(engine: Any, tmp_path: Path) -> None:
    d = tmp_path / "buf"
    with serve(engine, d, "--reasoning-parser", "qwen3") as client:  # keep is the default
        chat(client, GREET)
    (rec,) = turns(d)
    k = think_end(engine, rec)
    assert rec.metadata["reasoning"] == {"train": "keep", "tokens": [0, k]}
    assert "loss_mask_zero_spans" not in rec.metadata and rec.trainable
    assert turn_to_sample(rec, 1.0).loss_mask == [1] * len(rec.response_ids)


def test_without_a_parser_nothing_changes(engine: Any, tmp_path: Path) -> None:
    d = tmp_path / "buf"
    with serve(engine, d) as client:
        chat(client, GREET)
    (rec,) = turns(d)
    assert "reasoning" not in rec.metadata and loss_mask_of(rec) == [1] * len(rec.response_ids)
    with pytest.raises(ConfigError, match="--rl-train-reasoning mask needs --reasoning-parser"):
        parse_config(["--rl-train-reasoning", "mask"], env={})
    with pytest.raises(ConfigError, match="--rl-train-reasoning"):
        parse_config(["--rl-train-reasoning", "drop"], env={})
    assert parse_config([], env={}).rl.intercept.train_reasoning == "keep"


def test_all_reasoning_is_not_trainable_under_mask(engine: Any, tmp_path: Path) -> None:
    d = tmp_path / "buf"
    with serve(engine, d, "--reasoning-parser", "qwen3", "--rl-train-reasoning", "mask") as client:
        msg = chat(client, GREET, max_tokens=8)  # cut inside the think block
        assert msg["content"] is None and msg["reasoning_content"]
    (first,) = turns(d)
    n = len(first.response_ids)
    assert first.metadata["loss_mask_zero_spans"] == [[0, n]] and not first.trainable
    assert "only reasoning" in first.metadata["untrainable_reason"]
    assert response_text(first) == ""  # the judge is not handed the reasoning instead


def test_judge_reads_the_answer_without_the_reasoning(engine: Any, tmp_path: Path) -> None:
    d = tmp_path / "buf"
    with serve(engine, d, "--reasoning-parser", "qwen3") as client:
        first = chat(client, GREET)
        follow = GREET + [{"role": "assistant", "content": first["content"]}, {"role": "user", "content": "Thanks!"}]
        chat(client, follow)
        call = chat(client, ASK)
        assert call["reasoning_content"] == "I need the weather." and call["content"] is None
        result = {"role": "tool", "tool_call_id": call["tool_calls"][0]["id"], "content": "21C, clear"}
        chat(client, ASK + [{"role": "assistant", "content": None, "tool_calls": call["tool_calls"]}, result])
    by_text = {t.request_id: t for t in turns(d)}
    greet = next(t for t in by_text.values() if t.content == "Hello!")
    asked = next(t for t in by_text.values() if t.tool_calls)
    assert to_input(greet).response == "Hello!" and to_input(greet).next_state == "Thanks!"
    judged = to_input(asked)
    assert judged.response == '[tool calls] get_weather({"city": "Paris"})' and judged.next_state == "21C, clear"
    for rec, thought in ((greet, "The user greets me"), (asked, "I need the weather")):
        assert thought in rec.response_text and thought not in to_input(rec).response


ECHOES = {
    "answer only": {"role": "assistant", "content": "Hello!"},
    "reasoning_content field": {"role": "assistant", "content": "Hello!", "reasoning_content": GREET_THOUGHT},
    "think block put back": {"role": "assistant", "content": f"<think>\n{GREET_THOUGHT}\n</think>\n\nHello!"},
}


@pytest.mark.parametrize("echo", list(ECHOES))
def test_next_turn_continues_the_session_whatever_the_client_does_with_the_reasoning(
        engine: Any, tmp_path: Path, echo: str) -> None:
    d = tmp_path / "buf"
    with serve(engine, d, "--reasoning-parser", "qwen3", "--rl-train-reasoning", "mask") as client:
        chat(client, GREET)
        chat(client, GREET + [ECHOES[echo], {"role": "user", "content": "And now?"}])
    first, second = sorted(turns(d), key=lambda t: t.turn_index)
    assert second.session_id == first.session_id and second.metadata["session_source"] == "continuity"
    assert first.next_state["content"] == "And now?"


def observe(tr: SessionTracker, messages: list[dict], content: str, now: float) -> Any:
    d = tr.observe(control=RLControl(), messages=messages, tools=None, content=content, tool_calls=None, now=now)
    tr.recorded(d, TurnRecord(session_id=d.session_id, turn_index=None, turn_type=d.turn_type, messages=messages))
    return d


def test_echoed_think_block_picks_the_session_whose_answer_it_carries() -> None:
    """Two conversations open alike and got different answers: the echo of the older one's answer,
    its think block put back in front, links to it rather than to the most recent one."""
    hi = [{"role": "user", "content": "hi"}]

    def two_sessions() -> tuple[SessionTracker, str, str]:
        tr = SessionTracker(InterceptConfig())
        a, b = observe(tr, hi, "Answer A", now=1), observe(tr, hi, "Answer B", now=2)
        assert a.session_id != b.session_id
        return tr, a.session_id, b.session_id

    tr, a, _ = two_sessions()
    echoed = hi + [{"role": "assistant", "content": "<think>\nmulling\n</think>\n\nAnswer A"},
                   {"role": "user", "content": "more"}]
    assert observe(tr, echoed, "x", now=3).session_id == a
    # Only a block in front of the answer is reasoning: one after it is part of what was said, so
    # this echo matches neither answer and falls back to the most recent opening.
    tr, _, b = two_sessions()
    quoted = hi + [{"role": "assistant", "content": "Answer A <think>aside</think>"}, {"role": "user", "content": "?"}]
    assert observe(tr, quoted, "x", now=3).session_id == b
