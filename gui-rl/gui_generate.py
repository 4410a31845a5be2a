"""GUI-RL custom generate function (--custom-generate-function-path gui-rl/gui_generate.py).

One call = one MiniWoB++ episode in a pooled headless Chromium: the model reads the goal and the
accessibility tree, replies with one action (click("e5"), fill("e3", "text"), ...), the browser
performs it, and the new page is appended as a user turn (loss_mask 0), up to MAX_STEPS turns.
Reward = 1 if the task's own reward is full credit, else 0. Only the model's tokens are trained;
every step's PNG screenshot is kept in sample.metadata["screenshots"] (base64).
"""

from __future__ import annotations

import argparse
import base64
import os
import random
from dataclasses import dataclass
from typing import Any

from gui_env import ActionError, Observation, StepResult, parallel_envs_from_env, parse_action, shared_pool
from gui_screenshots import BACKENDS, check_screenshot_backend
from gui_tasks import TASKS_BY_NAME, task_url

from openclaw.engines.sglang_client import SGLangClient
from openclaw.sandbox.episode import chat_prompt_ids, engine_url_for, load_tokenizer
from openclaw.sandbox.trajectory import ObservationFormat, TrajectoryBuilder, Turn, run_agent_loop

SYSTEM_PROMPT = (
    "You control a web page. Each turn you see the goal and the page's elements, each with an id "
    "like [ref=e5]. Answer with exactly one action:\n"
    'click("e5")  fill("e5", "text")  press("e5", "Enter")  scroll(0, 200)  '
    'select_option("e5", "option")  done()'
)
# Worked examples, given as earlier turns of the chat. SmolLM2-135M does not follow a format that
# is only described (measured: 8 of 72 one-step pages got an action, the rest prose about
# addEventListener), but it copies one it has seen itself answer. The pages are made up, not
# MiniWoB++ seeds, and are part of the prompt (never in the loss).
EXAMPLES: tuple[tuple[str, str], ...] = (
    ('Goal: Click on the "Cancel" button.\nPage:\n- button "OK" [ref=e3]\n- button "Cancel" [ref=e4]',
     'click("e4")'),
    ('Goal: Enter "Kasey" into the text field and press Submit.\nPage:\n- textbox [ref=e6]\n- button "Submit" [ref=e7]',
     'fill("e6", "Kasey")'),
    ('Goal: Click on the link "lorem".\nPage:\n- text: Dolor sit\n- link "amet" [ref=e8] [cursor=pointer]\n'
     '- link "lorem" [ref=e9] [cursor=pointer]', 'click("e9")'),
)


def opening_messages(first_page: Any) -> list[dict[str, Any]]:
    """System prompt, the worked examples, then the episode's first page (a user message: text, or
    text + image parts for vision models)."""
    messages: list[dict[str, Any]] = [{"role": "system", "content": SYSTEM_PROMPT}]
    for page, action in EXAMPLES:
        messages += [{"role": "user", "content": page}, {"role": "assistant", "content": action}]
    return messages + [{"role": "user", "content": first_page}]

def add_arguments(parser: argparse.ArgumentParser) -> None:
    """GUI-RL flags (slime's extra-args-provider contract); each has an env default."""
    parser.add_argument("--env-type", default=os.environ.get("ENV_TYPE", "gui"), choices=["gui"])
    parser.add_argument("--max-steps", type=int, default=int(os.environ.get("MAX_STEPS", "4")),
                        help="Model turns per episode [env MAX_STEPS]")
    parser.add_argument("--parallel-envs", type=int, default=None,
                        help="Browsers, reused across episodes [env PARALLEL_ENVS, default 4]")
    parser.add_argument("--screenshot-backend", default=os.environ.get("SCREENSHOT_BACKEND", "playwright"),
                        choices=BACKENDS, help="[env SCREENSHOT_BACKEND]")
    parser.add_argument("--shuffle-element-ids", type=float, default=0.0, metavar="SHARE",
                        help="share of training pages (task, seed) whose element ids are drawn at random, so "
                             "that clicking a fixed id earns nothing and only reading the label does "
                             "(gui_env.ShuffledIds); evaluation never shuffles")


@dataclass(frozen=True)
class GuiRLConfig:
    max_steps: int
    parallel_envs: int
    screenshot_backend: str
    max_context_len: int
    shuffle_element_ids: float

    @classmethod
    def from_args(cls, args: Any) -> GuiRLConfig:
        max_steps = int(args.max_steps)
        if max_steps < 1:
            raise ValueError(f"--max-steps/MAX_STEPS must be >= 1, got {max_steps}")
        shuffle = float(args.shuffle_element_ids)
        if not 0.0 <= shuffle <= 1.0:
            raise ValueError(f"--shuffle-element-ids is a share in [0, 1], got {shuffle}")
        return cls(max_steps=max_steps, parallel_envs=int(args.parallel_envs or 0) or parallel_envs_from_env(),
                   screenshot_backend=args.screenshot_backend,
                   max_context_len=int(args.rollout_max_context_len or 2048), shuffle_element_ids=shuffle)

    def shuffles(self, task: str, seed: int, evaluation: bool) -> bool:
        """Whether this page's ids are drawn at random: decided by (task, seed), so the samples
        of one GRPO group all see the same page."""
        return (not evaluation and self.shuffle_element_ids > 0
                and random.Random(f"shuffle:{task}:{seed}").random() < self.shuffle_element_ids)


def task_for_sample(sample: Any) -> tuple[str, int]:
    meta = sample.metadata or {}
    task = meta.get("task") or sample.label
    if not task:
        raise ValueError(f"sample {sample.index}: metadata has no 'task' (and no label)")
    task_url(task)  # an unknown name fails here, not in the browser
    if "seed" not in meta:
        raise ValueError(f"sample {sample.index}: metadata has no 'seed'")
    return task, int(meta["seed"])


def observation_text(result: StepResult) -> str:
    head = f"Error: {result.error}\n" if result.error else ""
    return head + result.observation.text()


def action_text(tokenizer: Any, token_ids: list[int]) -> str:
    """The reply an action is read from: the model's tokens without special tokens. The trainer's
    engine text keeps the end-of-turn token (`no_stop_trim`, `skip_special_tokens=False`), and
    `click("e5")<|im_end|>` is not a call at the end of a line."""
    return tokenizer.decode(token_ids, skip_special_tokens=True)


async def generate(args: Any, sample: Any, sampling_params: dict[str, Any], evaluation: bool = False) -> Any:
    from slime.utils.types import Sample

    cfg = GuiRLConfig.from_args(args)
    check_screenshot_backend(cfg.screenshot_backend)
    task, seed = task_for_sample(sample)
    tokenizer = load_tokenizer(args.hf_checkpoint)
    obs_format = ObservationFormat.from_tokenizer(tokenizer, role="user")
    pool = shared_pool(cfg.parallel_envs, cfg.screenshot_backend)
    async with pool.env() as env, SGLangClient(engine_url_for(args, sample.index)) as client:
        shuffled = cfg.shuffles(task, seed, evaluation)
        first: Observation = await env.reset(task, seed, shuffle_ids=shuffled)
        messages = opening_messages(first.text())
        prompt_text, prompt_ids = chat_prompt_ids(tokenizer, messages)
        builder = TrajectoryBuilder(client, prompt_ids, sampling_params, cfg.max_context_len)
        actions: list[str] = []
        last: dict[str, Any] = {"reward": 0.0, "raw": 0.0, "errors": 0, "text": first.text()}

        async def step(turn: Turn) -> str | None:
            try:
                action = parse_action(action_text(tokenizer, turn.token_ids))
            except ActionError as exc:  # an unreadable reply costs a turn; the page is shown again
                actions.append("invalid")
                last["errors"] += 1
                return None if len(actions) >= cfg.max_steps else f"Error: {exc}\n{last['text']}"
            result = await env.step(action)
            actions.append(action.render())
            last.update(reward=result.reward, raw=result.raw_reward, text=result.observation.text())
            last["errors"] += result.error is not None
            if result.done or len(actions) >= cfg.max_steps:
                return None
            return observation_text(result)

        outcome = await run_agent_loop(builder, tokenizer, obs_format, step)
        await builder.finalize()
        screenshots = [base64.b64encode(png).decode() for png in env.screenshots]
    builder.fill_sample(sample)
    sample.prompt = prompt_text
    sample.response = tokenizer.decode(sample.tokens[len(prompt_ids):])
    sample.reward = float(last["reward"])
    sample.status = Sample.Status(outcome)
    sample.metadata.update(task=task, seed=seed, kind=TASKS_BY_NAME[task].kind if task in TASKS_BY_NAME else "other",
                           steps=len(actions), actions=actions, shuffled_ids=shuffled, raw_reward=last["raw"],
                           action_errors=last["errors"], screenshots=screenshots)
    return sample
