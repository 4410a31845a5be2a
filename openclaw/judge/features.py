"""Feature vectors for the CPU judge head: the next state's sentence embedding, its similarity
to the graded response (a restatement of the request is close to the reply's topic, an
unrelated follow-up is not), the role, and the multilingual lexicon counts from rules.py."""

from __future__ import annotations

import math

import numpy as np

from openclaw.judge.prompts import normalize_role
from openclaw.judge.rules import (
    LEXICON_NAMES,
    has_cjk,
    is_silence,
    lexicon_hits,
    looks_like_question,
    word_overlap,
)

ROLES: tuple[str, ...] = ("user", "tool", "environment")


def side_feature_names() -> list[str]:
    names = [f"lex_{n}" for n in LEXICON_NAMES]
    names += ["cos_resp_ns", "cos_x_question", "question", "silence", "cjk", "log_len", "overlap", "overlap_x_question",
              "tool_clean", "tool_x_error", "positive_x_question"]
    names += [f"role_{r}" for r in ROLES]
    return names


def side_features(response: str, next_state: str, role: str, cos: float) -> list[float]:
    role = normalize_role(role)
    hits = lexicon_hits(next_state or "")
    q = 1.0 if looks_like_question(next_state or "") else 0.0
    feats = [float(min(hits[n], 3)) for n in LEXICON_NAMES]
    feats += [cos, cos * q, q, 1.0 if is_silence(next_state) else 0.0,
              1.0 if has_cjk(next_state or "") else 0.0, math.log1p(len(next_state or "")) / 5.0]
    ov = word_overlap(response or "", next_state or "")
    is_tool = 1.0 if role == "tool" else 0.0
    # Interactions a linear head cannot form itself: a tool output without any error marker is
    # usually a success; thanks followed by a question is acceptance plus a next request.
    feats += [ov, ov * q, is_tool * (hits["tool_error"] == 0), is_tool * min(hits["tool_error"], 3),
              min(hits["positive"], 3) * q]
    feats += [1.0 if role == r else 0.0 for r in ROLES]
    return feats


def build_matrix(
    responses: list[str], next_states: list[str], roles: list[str], emb_resp: np.ndarray, emb_ns: np.ndarray
) -> np.ndarray:
    """(n, dim + n_side) float32: [next-state embedding | side features]."""
    cos = (emb_resp * emb_ns).sum(axis=1)
    side = np.array(
        [side_features(r, ns, role, float(c)) for r, ns, role, c in zip(responses, next_states, roles, cos, strict=True)],
        dtype=np.float32,
    )
    return np.concatenate([emb_ns.astype(np.float32), side], axis=1)
