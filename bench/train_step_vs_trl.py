"""One GRPO update on SmolLM2-135M (embedded), LoRA r16, CPU, fp32: our FSDP actor vs TRL's
GRPOTrainer on the same batch (8 samples x 256 tokens: 64 prompt + 192 completion), timed in
the same process, interleaved, median of N repetitions after one warm-up each.

What is timed on both sides (generation excluded; rollout log-probs given, as TRL's
num_iterations=1 reuses the current policy's log-probs as "old"):
  forward with grad -> response log-probs + entropy -> GRPO clipped loss (per-sample mean)
  -> backward -> grad-norm clip -> AdamW step.
Ours:  slime.backends.fsdp.train_loop.train_rollout (advantages from rewards, group of 8),
       --use-rollout-logprobs, one micro-batch of 8x256 (--use-dynamic-batch-size). The group's
       8 rows share their 64-token prompt, so our actor runs it once and the completions on its
       repeated KV cache (the shared-prompt forward). The same step with it turned off
       (--disable-shared-prompt-forward) is timed too, to show what it buys.
TRL:   GRPOTrainer.compute_loss(model, inputs) + accelerator.backward + clip + optimizer.step
       with the inputs its generation step would produce (prompt/completion ids and masks,
       advantages), loss_type="grpo", beta=0.

Also prints achieved training FLOP/s (LoRA: forward 2*N*T + input-gradient backward 2*N*T over
the matmul weights, plus attention) as a fraction of this CPU's measured fp32 matmul peak.

    python bench/train_step_vs_trl.py [--reps 3] [--prompt-len 64] [--completion-len 192] [--model-path PATH]
                                      [--out bench/results/train_step_vs_trl.md]
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

import torch  # noqa: E402

B, PROMPT, COMPLETION = 8, 64, 192
LORA = dict(r=16, lora_alpha=32, lora_dropout=0.0, target_modules=["q_proj", "k_proj", "v_proj", "o_proj"])
LR = 1e-5


def make_batch(vocab: int, seed: int = 0):
    g = torch.Generator().manual_seed(seed)
    prompt = torch.randint(100, vocab - 1, (PROMPT,), generator=g)
    completions = torch.randint(100, vocab - 1, (B, COMPLETION), generator=g)
    rewards = torch.tensor([1.0, 0.0, 0.5, 0.0, 1.0, 0.25, 0.0, 0.75])
    return prompt, completions, rewards


def matmul_peak(seconds: float = 3.0, n: int = 2048) -> float:
    a, b = torch.randn(n, n), torch.randn(n, n)
    torch.mm(a, b)
    done, t0 = 0, time.perf_counter()
    while time.perf_counter() - t0 < seconds:
        torch.mm(a, b)
        done += 1
    return done * 2 * n**3 / (time.perf_counter() - t0)


def train_flops(model_cfg, tokens: int, seq: int, batch: int) -> float:
    d, layers, ff, vocab = model_cfg.hidden_size, model_cfg.num_hidden_layers, model_cfg.intermediate_size, model_cfg.vocab_size
    kv = model_cfg.num_key_value_heads * (d // model_cfg.num_attention_heads)
    per_layer = d * d * 2 + d * kv * 2 + 3 * d * ff  # q,o + k,v + gate,up,down
    n_matmul = layers * per_layer + d * vocab  # + lm_head
    attention = layers * batch * 4 * seq * seq * d  # QK^T and AV, forward
    forward = 2 * n_matmul * tokens + attention
    return 2 * forward  # + backward w.r.t. activations (LoRA weight grads are negligible)


# ----------------------------------------------------------------------------- ours
def build_ours(model_path: str, shared_prompt: bool = True):
    from slime.backends.fsdp import ActorConfig, FSDPTrainActor
    from slime.backends.fsdp.train_loop import build_loss_call
    from slime.utils.arguments import parse_config

    args = parse_config([
        "--hf-checkpoint", model_path, "--rollout-batch-size", "1", "--n-samples-per-prompt", str(B),
        "--use-lora", "--lora-rank", str(LORA["r"]), "--lora-alpha", str(LORA["lora_alpha"]),
        "--lora-target-modules", *LORA["target_modules"], "--lr", str(LR), "--weight-decay", "0",
        "--use-dynamic-batch-size", "--max-tokens-per-gpu", str(B * (PROMPT + COMPLETION)),
        "--use-rollout-logprobs", "--clip-grad", "1.0",
        *([] if shared_prompt else ["--disable-shared-prompt-forward"]),
    ]).to_namespace()
    actor = FSDPTrainActor(ActorConfig.from_args(args), args)
    return actor, args, build_loss_call(args)


def ours_step(actor, args, loss_call, prompt, completions, rewards, rollout_lp) -> None:
    from slime.backends.fsdp.train_loop import train_rollout
    from slime.utils.types import Sample

    samples = [Sample(index=i, group_index=0, tokens=prompt.tolist() + completions[i].tolist(),
                      response_length=COMPLETION, loss_mask=[1] * COMPLETION, reward=float(rewards[i]),
                      rollout_log_probs=rollout_lp[i]) for i in range(B)]
    train_rollout(actor, args, samples, loss_call)


# ----------------------------------------------------------------------------- TRL
def build_trl(model_path: str, tmp: Path):
    from datasets import Dataset
    from peft import LoraConfig
    from transformers import AutoModelForCausalLM, AutoTokenizer
    from trl import GRPOConfig, GRPOTrainer

    tok = AutoTokenizer.from_pretrained(model_path)
    model = AutoModelForCausalLM.from_pretrained(model_path, dtype=torch.float32)
    cfg = GRPOConfig(output_dir=str(tmp / "trl"), per_device_train_batch_size=B, num_generations=B,
                     max_completion_length=COMPLETION, beta=0.0, loss_type="grpo", learning_rate=LR,
                     weight_decay=0.0, max_grad_norm=1.0, bf16=False, fp16=False, use_cpu=True, report_to=[],
                     logging_steps=1000, save_strategy="no", gradient_checkpointing=False, seed=0)
    data = Dataset.from_list([{"prompt": "hello"}] * B)
    trainer = GRPOTrainer(model=model, reward_funcs=lambda completions, **kw: [0.0] * len(completions), args=cfg,
                          train_dataset=data, processing_class=tok, peft_config=LoraConfig(task_type="CAUSAL_LM", **LORA))
    trainer.create_optimizer_and_scheduler(num_training_steps=100)
    trainer.model.train()
    trainer.current_gradient_accumulation_steps = 1
    return trainer


def trl_step(trainer, prompt, completions, rewards) -> None:
    grouped = rewards.view(-1, B)
    adv = ((grouped - grouped.mean(-1, keepdim=True)) / (grouped.std(-1, keepdim=True) + 1e-4)).view(-1)
    inputs = {"prompt_ids": prompt.unsqueeze(0).repeat(B, 1), "prompt_mask": torch.ones(B, PROMPT, dtype=torch.long),
              "completion_ids": completions, "completion_mask": torch.ones(B, COMPLETION, dtype=torch.long),
              "advantages": adv, "num_items_in_batch": torch.tensor(float(B * COMPLETION))}
    model = trainer.model
    loss = trainer.compute_loss(model, inputs)
    trainer.accelerator.backward(loss)
    torch.nn.utils.clip_grad_norm_([p for p in model.parameters() if p.requires_grad], 1.0)
    trainer.optimizer.step()
    trainer.optimizer.zero_grad(set_to_none=True)


def main() -> None:
    global PROMPT, COMPLETION  # the batch shape every step function here builds on: --prompt-len/--completion-len
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--prompt-len", type=int, default=PROMPT)
    ap.add_argument("--completion-len", type=int, default=COMPLETION)
    ap.add_argument("--model-path", default=None)
    ap.add_argument("--out", default=None, help="write a markdown report here")
    a = ap.parse_args()
    sizes = "" if (a.prompt_len, a.completion_len) == (PROMPT, COMPLETION) else \
        f" --prompt-len {a.prompt_len} --completion-len {a.completion_len}"
    PROMPT, COMPLETION = a.prompt_len, a.completion_len
    import tempfile

    import transformers
    import trl
    from transformers import AutoConfig

    from openclaw.models import resolve_model_path

    load = os.getloadavg()[0]

    model_path = str(a.model_path or resolve_model_path(None))
    mcfg = AutoConfig.from_pretrained(model_path)
    prompt, completions, rewards = make_batch(mcfg.vocab_size)
    torch.manual_seed(0)
    ours = build_ours(model_path)
    torch.manual_seed(0)
    plain = build_ours(model_path, shared_prompt=False)
    actor = ours[0]
    # the engine's log-probs for these tokens == the policy's (fp32, same weights): compute once
    rollout_lp = actor.compute_log_probs([prompt.tolist() + c.tolist() for c in completions], [COMPLETION] * B)
    trainer = build_trl(model_path, Path(tempfile.mkdtemp()))

    ours_step(*ours, prompt, completions, rewards, rollout_lp)  # warm-up
    ours_step(*plain, prompt, completions, rewards, rollout_lp)
    trl_step(trainer, prompt, completions, rewards)
    t_ours, t_trl, c_ours, c_trl, t_plain = [], [], [], [], []
    for _ in range(a.reps):  # interleaved: machine load affects all alike
        t0, c0 = time.perf_counter(), time.process_time()
        ours_step(*ours, prompt, completions, rewards, rollout_lp)
        t_ours.append(time.perf_counter() - t0)
        c_ours.append(time.process_time() - c0)
        t0 = time.perf_counter()
        ours_step(*plain, prompt, completions, rewards, rollout_lp)
        t_plain.append(time.perf_counter() - t0)
        t0, c0 = time.perf_counter(), time.process_time()
        trl_step(trainer, prompt, completions, rewards)
        t_trl.append(time.perf_counter() - t0)
        c_trl.append(time.process_time() - c0)
    peak = matmul_peak()
    flops = train_flops(mcfg, B * (PROMPT + COMPLETION), PROMPT + COMPLETION, B)
    # the shared-prompt forward runs the prompt's tokens once instead of B times
    flops_shared = flops - (train_flops(mcfg, B * PROMPT, PROMPT, B) - train_flops(mcfg, PROMPT, PROMPT, 1))
    mo, mt, mp = statistics.median(t_ours), statistics.median(t_trl), statistics.median(t_plain)
    ratio = mo / mt
    lines = [
        f"machine: {platform.processor() or platform.machine()}, {os.cpu_count()} cores, load avg at start {load:.1f}, "
        f"torch threads {torch.get_num_threads()}, "
        f"torch {torch.__version__}, transformers {transformers.__version__}, trl {trl.__version__}",
        f"batch: {B} samples x {PROMPT + COMPLETION} tokens ({COMPLETION} trained), LoRA r{LORA['r']} {LORA['target_modules']}, fp32",
        f"ours step (s): {[round(t, 3) for t in t_ours]} median {mo:.3f}",
        f"ours without the shared-prompt forward (s): {[round(t, 3) for t in t_plain]} median {mp:.3f} "
        f"-> /TRL = {mp / mt:.3f}",
        f"TRL  step (s): {[round(t, 3) for t in t_trl]} median {mt:.3f}",
        f"CPU time (s, all threads of this process): ours {[round(t, 2) for t in c_ours]} TRL {[round(t, 2) for t in c_trl]}"
        f" -> ours/TRL = {statistics.median(c_ours) / statistics.median(c_trl):.3f}",
        f"fp32 matmul peak (2048^3 torch.mm): {peak / 1e9:.1f} GFLOP/s",
        f"training FLOP per step, padded batch: {flops / 1e9:.1f} GFLOP (shared prompt: {flops_shared / 1e9:.1f}) -> "
        f"ours {flops_shared / mo / 1e9:.1f} GFLOP/s = {flops_shared / mo / peak:.1%} of peak; without the shared "
        f"prompt {flops / mp / peak:.1%}; TRL {flops / mt / 1e9:.1f} GFLOP/s = {flops / mt / peak:.1%}",
        f"ours/TRL = {ratio:.3f} wall-clock median (target <= 0.8)",
    ]
    print("\n".join(lines))
    if a.out:
        Path(a.out).write_text("# train_step_vs_trl\n\nCommand: `python bench/train_step_vs_trl.py --reps "
                               f"{a.reps}{sizes}`\n\n```\n" + "\n".join(lines) + "\n```\n")


if __name__ == "__main__":
    main()
