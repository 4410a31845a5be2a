"""A deliberately harmful update for the gate tests: SmolLM2 fine-tuned (really trained, a few
steps of SFT on its last decoder layer) to answer every question with the one word "OK"."""

from __future__ import annotations

import time
from pathlib import Path

import torch

ONE_WORD = "OK"


def train_one_word_model(base: Path, out: Path, steps: int = 8, lr: float = 3e-3, n_prompts: int = 10) -> dict[str, float]:
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from openclaw.demo.evaluate import chat_prompt_ids, load_probe

    t0 = time.perf_counter()
    tok = AutoTokenizer.from_pretrained(base)
    model = AutoModelForCausalLM.from_pretrained(base, dtype=torch.float32)
    for p in model.parameters():
        p.requires_grad_(False)
    trainable = [*model.model.layers[-1].parameters(), *model.model.norm.parameters()]
    for p in trainable:
        p.requires_grad_(True)
    answer = tok.encode(ONE_WORD, add_special_tokens=False) + [tok.convert_tokens_to_ids("<|im_end|>")]
    # A few probe questions and other requests: after a few steps the model says "OK" to anything.
    questions = [q.question for q in load_probe()[::4]][: n_prompts - 4] + [
        "Tell me about your day.", "Write a poem about the sea.", "How do I bake bread?", "Explain photosynthesis."]
    rows = [(chat_prompt_ids(tok, q), answer) for q in questions]
    width = max(len(p) + len(a) for p, a in rows)
    ids = torch.full((len(rows), width), tok.pad_token_id or 0, dtype=torch.long)
    mask = torch.zeros_like(ids)
    labels = torch.full_like(ids, -100)
    for i, (p, a) in enumerate(rows):
        ids[i, : len(p) + len(a)] = torch.tensor(p + a)
        mask[i, : len(p) + len(a)] = 1
        labels[i, len(p): len(p) + len(a)] = torch.tensor(a)
    opt = torch.optim.Adam(trainable, lr=lr)
    model.train()
    loss = None
    for _ in range(steps):
        loss = model(input_ids=ids, attention_mask=mask, labels=labels).loss
        opt.zero_grad()
        loss.backward()
        opt.step()
    model.eval()
    model.save_pretrained(out)
    tok.save_pretrained(out)
    return {"loss": float(loss.detach()), "seconds": time.perf_counter() - t0}
