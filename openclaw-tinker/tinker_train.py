"""Binary RL, OPD and combine trained over the Tinker API (LoRA only).

    python openclaw-tinker/tinker_train.py --method combine --base-model MODEL \
        --rl-buffer-dir ./rl_buffer --server-url http://127.0.0.1:8000 [--tinker-url URL] [--steps N]

The same server, intercept, buffer and judge as the slime recipes; only training moves: each step
drains judged turns from the buffer, expresses the method's advantages per token, runs Tinker's
`forward_backward` with its `importance_sampling` or `ppo` loss, `optim_step`, saves sampler weights
and tells the serving engine (`/update_weights_from_disk` with the `tinker://` sampler path) to
sample from them, so the served policy is the trained one. Reads top to bottom: setup -> (batch ->
advantages -> train -> publish -> commit) per step.

Loss mapping (Tinker's loss, per response token t, ratio r_t = p_new/p_behaviour): the method's own
advantage (`openclaw.methods.Method.token_advantages`), e.g.
    rl       A_t = score - baseline           (baseline: batch mean of scores, or 0)
    opd      A_t = teacher_logp_t - old_logp_t (teacher: the current policy shown the judge's hint)
    combine  A_t = w_opd (teacher_logp_t - old_logp_t) + w_rl (score - baseline)
    loss     ppo: -min(r_t A_t, clip(r_t) A_t)     importance_sampling: -r_t A_t
Judged turns are drained through the slime recipes' data source (`openclaw.bridge.BufferDataSource`):
the same trainable kinds, skip reasons, retraction checks and provenance ledger.
`old_logp` is what the engine recorded with the turn (behaviour policy), as in the slime recipes.
Refused, with the reason: full fine-tuning (Tinker trains LoRA adapters), a KL term to the
reference (Tinker's built-in losses have none), top-k distillation (no per-token distributions).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

from openclaw.bridge.source import BufferDataSource
from openclaw.bridge.teacher import teacher_prompt_ids
from openclaw.bridge.turns import turn_signal
from openclaw.buffer.location import buffer_dir_from_env
from openclaw.engines.tinker_engine import prompt_logprobs, tinker_service_client
from openclaw.environment import env_value
from openclaw.httpapi.urls import server_url_from_env
from openclaw.methods import DEFAULT_METHOD, Method, MethodError, get_method, method_names

LOSSES = ("ppo", "importance_sampling")


class Refused(ValueError):
    """A setting Tinker cannot express."""


@dataclass(frozen=True)
class TinkerTrainConfig:
    method: Method | str  # a method object, or its name
    base_model: str
    buffer_dir: Path
    server_url: str  # the OpenAI server whose engine serves the policy (weights pushed there)
    tinker_url: str | None = None  # None: env TINKER_ENDPOINT, else the SDK's default service
    tokenizer_path: str | None = None  # None: base_model (a local folder, or a hub name)
    loss: str = "ppo"
    lora_rank: int = 32
    lr: float = 1e-4
    batch_size: int = 8
    steps: int = 1  # 0: run until stopped
    baseline: str = "batch"  # rl/combine: subtract the batch's mean score ("batch") or nothing ("zero")
    w_opd: float | None = None  # None: the method's own weight
    w_rl: float | None = None
    consumer_id: str = "openclaw-tinker"
    ckpt_dir: Path = Path("./ckpt-tinker")
    wait_timeout: float = 3600.0
    poll_interval: float = 1.0


def _float_or_none(text: str | None) -> float | None:
    """A weight from the environment; unset keeps the method's own (None)."""
    return float(text) if text is not None else None


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="openclaw-tinker/tinker_train.py", description=__doc__.split("\n\n")[0])
    p.add_argument("--method", default=env_value("OPENCLAW_METHOD") or DEFAULT_METHOD,
                   help=f"{', '.join(method_names())}, or a method file's path (openclaw.methods; env OPENCLAW_METHOD)")
    p.add_argument("--base-model", "--model-path", dest="base_model", default=env_value("MODEL_PATH"),
                   help="the base model as Tinker names it (env MODEL_PATH)")
    p.add_argument("--tokenizer-path", default=None, help="where the chat template/tokenizer is read (default: --base-model)")
    p.add_argument("--rl-buffer-dir", dest="buffer_dir", type=Path, default=Path(buffer_dir_from_env()))
    p.add_argument("--server-url", default=server_url_from_env())
    p.add_argument("--tinker-url", default=env_value("TINKER_ENDPOINT"))
    p.add_argument("--loss", choices=LOSSES, default="ppo")
    p.add_argument("--lora-rank", type=int, default=32)
    p.add_argument("--lr", type=float, default=1e-4)
    p.add_argument("--batch-size", "--rollout-batch-size", dest="batch_size", type=int, default=8)
    p.add_argument("--steps", "--num-rollout", dest="steps", type=int, default=int(env_value("NUM_ROLLOUT") or 0),
                   help="training steps; 0 runs until stopped (env NUM_ROLLOUT, as in the slime recipes)")
    p.add_argument("--baseline", choices=("batch", "zero"), default="batch")
    p.add_argument("--w-opd", "--openclaw-combine-w-opd", dest="w_opd", type=float,
                   default=_float_or_none(env_value("OPENCLAW_COMBINE_W_OPD")),
                   help="combine's OPD weight (default: the method's)")
    p.add_argument("--w-rl", "--openclaw-combine-w-rl", dest="w_rl", type=float,
                   default=_float_or_none(env_value("OPENCLAW_COMBINE_W_RL")),
                   help="combine's binary-RL weight (default: the method's)")
    p.add_argument("--buffer-consumer-id", dest="consumer_id", default=None)
    p.add_argument("--save", "--ckpt-dir", dest="ckpt_dir", type=Path, default=Path(env_value("CKPT_SAVE_DIR") or "./ckpt-tinker"))
    p.add_argument("--buffer-wait-timeout", dest="wait_timeout", type=float, default=3600.0)
    # Accepted only to refuse them by name: what Tinker cannot express.
    p.add_argument("--kl-coef", "--kl-loss-coef", dest="kl_coef", type=float, default=0.0)
    p.add_argument("--full-finetune", action="store_true")
    p.add_argument("--opd-topk", type=int, default=0)
    return p


def config_from(a: argparse.Namespace, env: dict[str, str] | None = None) -> TinkerTrainConfig:
    """The typed config, or Refused naming what Tinker cannot express."""
    max_steps = env_value("MAX_STEPS", env)
    if max_steps and not env_value("NUM_ROLLOUT", env):
        raise Refused(f"MAX_STEPS={max_steps} is the tracks' model turns per episode; Tinker's number of "
                      "training steps is NUM_ROLLOUT (or --steps)")
    try:
        method = get_method(a.method)
    except MethodError as exc:
        raise Refused(f"--method: {exc}") from None
    if method.weights is None and (a.w_opd is not None or a.w_rl is not None):
        raise Refused(f"--w-opd/--w-rl weigh two signals; {method.name} trains on one")
    if a.full_finetune:
        raise Refused("--full-finetune: Tinker trains LoRA adapters only (create_lora_training_client); "
                      "use the slime recipes for full fine-tuning")
    if a.kl_coef:
        raise Refused(f"--kl-coef {a.kl_coef}: Tinker's built-in losses (ppo, importance_sampling) have no KL term "
                      "to a reference model; use --kl-coef 0 or the slime recipes")
    if a.opd_topk:
        raise Refused("--opd-topk: top-k distillation needs per-token distributions in the loss; Tinker's "
                      "losses take one advantage per token")
    if not a.base_model:
        raise Refused("--base-model (or env MODEL_PATH) is required: the base model as Tinker names it")
    return TinkerTrainConfig(
        method=method, base_model=a.base_model, buffer_dir=a.buffer_dir, server_url=a.server_url.rstrip("/"),
        tinker_url=a.tinker_url, tokenizer_path=a.tokenizer_path, loss=a.loss, lora_rank=a.lora_rank, lr=a.lr,
        batch_size=a.batch_size, steps=a.steps, baseline=a.baseline, w_opd=a.w_opd, w_rl=a.w_rl,
        consumer_id=a.consumer_id or f"openclaw-tinker-{method.name}", ckpt_dir=a.ckpt_dir, wait_timeout=a.wait_timeout)


def parse_args(argv: list[str] | None = None) -> TinkerTrainConfig:
    return config_from(build_parser().parse_args(argv))


# -- setup ------------------------------------------------------------------------------------

@dataclass
class Trainer:
    cfg: TinkerTrainConfig
    training: Any  # tinker.TrainingClient
    sampling: Any  # tinker.SamplingClient of the latest weights (the OPD teacher)
    tokenizer: Any
    source: BufferDataSource
    step: int = 0


def drain_args(cfg: TinkerTrainConfig) -> argparse.Namespace:
    """The data source's settings, as the slime recipes' trainer flags would give them: one turn per
    group (the baseline is Tinker-side), and no slime checkpoint (this trainer commits at its own)."""
    return argparse.Namespace(
        rl_buffer_dir=str(cfg.buffer_dir), buffer_consumer_id=cfg.consumer_id, buffer_wait_timeout=cfg.wait_timeout,
        buffer_min_batch=cfg.batch_size, buffer_poll_interval=cfg.poll_interval, rollout_batch_size=cfg.batch_size,
        n_samples_per_prompt=1, rewards_normalization=False, save=None, load=None, hf_checkpoint=cfg.base_model)


def setup(cfg: TinkerTrainConfig) -> Trainer:
    from transformers import AutoTokenizer

    service = tinker_service_client(cfg.tinker_url, None)
    training = service.create_lora_training_client(base_model=cfg.base_model, rank=cfg.lora_rank, seed=0)
    sampling = service.create_sampling_client(base_model=cfg.base_model)
    tokenizer = AutoTokenizer.from_pretrained(cfg.tokenizer_path or cfg.base_model)
    # An existing buffer only: a wrong path is an error naming it, never a new empty buffer.
    source = BufferDataSource(drain_args(cfg), cfg.method)
    cfg.ckpt_dir.mkdir(parents=True, exist_ok=True)
    return Trainer(cfg, training, sampling, tokenizer, source)


# -- one step ---------------------------------------------------------------------------------

def next_batch(t: Trainer) -> tuple[list[Any], dict[str, int]]:
    """`batch_size` judged main turns this method can train on, drained as the slime recipes drain
    them; the others are consumed and counted by reason (never silently dropped). Tinker's loss needs
    the behaviour log-probs the engine recorded, so a turn without them is skipped (`no_logprobs`)."""
    picked: list[Any] = []
    skipped: dict[str, int] = {}
    while len(picked) < t.cfg.batch_size:
        drained = t.source.take(t.cfg.batch_size - len(picked))
        for reason, n in drained.skipped.items():
            skipped[reason] = skipped.get(reason, 0) + n
        for r in drained.records:
            if r.response_ids and len(r.response_logprobs) == len(r.response_ids):
                picked.append(r)
            else:
                skipped["no_logprobs"] = skipped.get("no_logprobs", 0) + 1
    return picked, skipped


def teacher_logprobs(t: Trainer, rec: Any, hint: str) -> list[float]:
    """log p(response | hinted prompt) under the current policy, from Tinker's compute_logprobs."""
    prompt = teacher_prompt_ids(t.tokenizer, list(rec.messages), rec.tools, hint)
    response = list(rec.response_ids)
    lps = asyncio.run(prompt_logprobs(t.sampling, prompt + response))
    return [float(x) for x in lps[len(prompt):]]


def token_advantages(t: Trainer, batch: list[Any]) -> tuple[list[list[float]], dict[str, float]]:
    """Per response token, the method's advantage (see the module docstring)."""
    cfg, scores = t.cfg, [turn_signal(r).score for r in batch]
    method = get_method(cfg.method)
    baseline = sum(scores) / len(scores) if cfg.baseline == "batch" else 0.0
    out, opd_sum, n_tok, hinted = [], 0.0, 0, 0
    for rec, score in zip(batch, scores, strict=True):
        old = [float(x) for x in rec.response_logprobs]
        hint = turn_signal(rec).hint
        opd = [0.0] * len(old)
        if method.uses_teacher and hint:
            hinted += 1
            opd = [te - o for te, o in zip(teacher_logprobs(t, rec, hint), old, strict=True)]
        out.append(method.token_advantages(opd, score, baseline, cfg.w_opd, cfg.w_rl))
        opd_sum, n_tok = opd_sum + sum(opd), n_tok + len(opd)
    return out, {"reward/mean": sum(scores) / len(scores), "advantage/opd_mean": opd_sum / max(n_tok, 1),
                 "rollout/opd_hinted": float(hinted)}


def to_datum(rec: Any, advantages: list[float]) -> Any:
    """Tinker's next-token layout: input = tokens[:-1], targets = tokens[1:]; behaviour log-probs,
    advantages and weights are zero on the prompt and set on the response."""
    import tinker

    tokens = list(rec.prompt_ids) + list(rec.response_ids)
    n_prompt = len(rec.prompt_ids) - 1  # target positions that predict prompt tokens
    return tinker.Datum(
        model_input=tinker.ModelInput.from_ints(tokens[:-1]),
        loss_fn_inputs={
            "target_tokens": tinker.TensorData(data=tokens[1:], dtype="int64", shape=[len(tokens) - 1]),
            "logprobs": tinker.TensorData(data=[0.0] * n_prompt + [float(x) for x in rec.response_logprobs],
                                          dtype="float32", shape=[len(tokens) - 1]),
            "advantages": tinker.TensorData(data=[0.0] * n_prompt + advantages, dtype="float32", shape=[len(tokens) - 1]),
            "weights": tinker.TensorData(data=[0.0] * n_prompt + [1.0] * len(advantages), dtype="float32",
                                         shape=[len(tokens) - 1]),
        })


def train_step(t: Trainer, data: list[Any]) -> dict[str, float]:
    import tinker

    fb = t.training.forward_backward(data, t.cfg.loss).result()
    t.training.optim_step(tinker.AdamParams(learning_rate=t.cfg.lr)).result()
    return {f"tinker/{k}": float(v) for k, v in (fb.metrics or {}).items()}


def publish(t: Trainer) -> str:
    """Sampler weights for this step; the trainer's teacher and the serving engine move to them."""
    path = t.training.save_weights_for_sampler(name=f"step-{t.step:06d}").result().path
    t.sampling = t.training.create_sampling_client(path)
    r = httpx.post(t.cfg.server_url + "/update_weights_from_disk",
                   json={"model_path": path, "weight_version": t.step}, timeout=300,
                   headers=_auth_headers())
    body = r.json() if r.headers.get("content-type", "").startswith("application/json") else {}
    if r.status_code != 200 or not body.get("success"):
        raise RuntimeError(f"the server at {t.cfg.server_url} did not load {path}: {r.status_code} {r.text[:300]}")
    return path


def _auth_headers() -> dict[str, str]:
    key = env_value("OPENCLAW_API_KEY")
    return {"Authorization": f"Bearer {key}"} if key else {}


def save_checkpoint(t: Trainer, sampler_path: str, turn_ids: list[int], metrics: dict[str, float]) -> str:
    """`checkpoint-<step>.json` (atomic) with the Tinker paths and the consumed turn ids, then
    the buffer commit (the buffer's exactly-once protocol). Resuming from it is not implemented
    yet: a restarted trainer starts a new LoRA on the turns not yet committed."""
    state = t.training.save_state(name=f"state-{t.step:06d}").result().path
    tag = f"checkpoint-{t.step}"
    out = t.cfg.ckpt_dir / f"{tag}.json"
    tmp = out.with_suffix(".tmp")
    tmp.write_text(json.dumps({"step": t.step, "sampler_path": sampler_path, "state_path": state,
                               "turn_ids": turn_ids, "metrics": metrics}, indent=1))
    os.replace(tmp, out)
    (t.cfg.ckpt_dir / "checkpoint-latest").write_text(tag + "\n")
    t.source.buffer.commit_consumed(t.cfg.consumer_id, turn_ids, checkpoint_tag=tag)
    # Skipped turns stay pending in the source, which commits them when it next drains.
    t.source.pending.difference_update(turn_ids)
    return tag


def run(cfg: TinkerTrainConfig) -> list[dict[str, float]]:
    t = setup(cfg)
    history = []
    try:
        while cfg.steps == 0 or t.step < cfg.steps:
            batch, skipped = next_batch(t)
            advantages, metrics = token_advantages(t, batch)
            metrics.update(train_step(t, [to_datum(r, a) for r, a in zip(batch, advantages, strict=True)]))
            metrics.update({f"rollout/buffer_skipped/{k}": float(v) for k, v in skipped.items()})
            t.step += 1
            t.source.before_weight_push()  # weights that hold a retracted session never leave
            path = publish(t)
            turn_ids = [int(r.turn_id) for r in batch]
            t.source.on_trained(turn_ids, t.step, t.step)  # the provenance ledger, as the slime recipes write it
            save_checkpoint(t, path, turn_ids, metrics)
            metrics["step"] = float(t.step)
            print(json.dumps({"step": t.step, "sampler_path": path, **metrics}), flush=True)
            history.append(metrics)
    finally:
        t.source.buffer.close()
    return history


def main(argv: list[str] | None = None) -> int:
    try:
        cfg = parse_args(argv)
    except Refused as exc:
        print(f"openclaw-tinker: refused: {exc}", file=sys.stderr)
        return 2
    run(cfg)
    return 0


if __name__ == "__main__":
    sys.exit(main())
