"""A tiny model overfit (seconds on CPU, cached per machine) to answer prompts with exact replies, so
that a real model really emits the markup a test needs (a tool call, a think block) and the server
must parse it from real generated tokens."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

from openclaw.models.atomic import build_once
from openclaw.paths import models_dir
from openclaw.server.prompting import normalize_messages, render_prompt, tool_mode
from openclaw.server.protocol import ChatCompletionRequest


def rendered_prompt(tok: Any, messages: list[dict], tools: list[dict] | None) -> list[int]:
    """The prompt's token ids exactly as the server renders the request."""
    req = ChatCompletionRequest.model_validate({"messages": messages, "tools": tools})
    return render_prompt(tok, normalize_messages(req.messages), tools, tool_mode(req)).input_ids


def _train(out: Path, base: Path, pairs: list[tuple[list[int], list[int]]], max_steps: int, name: str) -> None:
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    torch.manual_seed(0)
    model = AutoModelForCausalLM.from_pretrained(base, dtype=torch.float32)
    opt = torch.optim.Adam(model.parameters(), lr=1e-2)
    batch = [(torch.tensor([p + t]), torch.tensor(t), len(p)) for p, t in pairs]
    for _ in range(max_steps):
        loss, exact = 0.0, True
        for ids, targets, n in batch:
            # only the reply's positions go through lm_head: 6x less work than the whole sequence
            logits = model.lm_head(model.model(input_ids=ids).last_hidden_state[0, n - 1:-1])
            # Teacher-forced argmax == targets everywhere means greedy decoding reproduces the reply.
            exact = exact and torch.equal(logits.argmax(-1), targets)
            loss = loss + torch.nn.functional.cross_entropy(logits, targets)
        if exact:
            break
        opt.zero_grad()
        loss.backward()
        opt.step()
    else:
        raise RuntimeError(f"{name}: the tiny model did not converge in {max_steps} steps")
    model.save_pretrained(out)
    AutoTokenizer.from_pretrained(base).save_pretrained(out)


def overfit_model(base: Path, name: str, pairs: list[tuple[list[int], list[int]]], max_steps: int) -> Path:
    """`base` trained until greedy decoding answers each (prompt ids, reply ids) pair with its reply;
    built once per machine under `name`, keyed by the pairs."""
    key = hashlib.sha256(json.dumps(pairs).encode()).hexdigest()[:12]
    return build_once(models_dir() / f"{name}-{key}", lambda tmp: _train(tmp, base, pairs, max_steps, name))
