"""GUI-RL custom generate function (--custom-generate-function-path gui-rl/gui_generate.py).

One call = one MiniWoB++ episode in a pooled headless Chromium: the model reads the goal and the
accessibility tree, replies with one action (click("e5"), fill("e3", "text"), ...), the browser
performs it, and the new page is appended as a user turn (loss_mask 0), up to MAX_STEPS turns.
Reward = 1 if the task's own reward is full credit, else 0. Only the model's tokens are trained;
every step's PNG screenshot is kept in sample.metadata["screenshots"] (base64).
"""

from __future__ import annotations

import base64
import contextlib
import random
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

from gui_env import DEFAULT_BROWSERS, ActionError, Observation, RemoteEnv, StepResult, parse_action
from gui_screenshots import BACKENDS, check_screenshot_backend, shared_pool
from gui_tasks import TASKS_BY_NAME, task_url

from openclaw.sandbox.trajectory import Turn
from openclaw.tracks import Play, Score, TrackOptions, generate_episode, option, trainer_value

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


@dataclass(frozen=True)
class GuiRLConfig(TrackOptions):
    NAME = "gui"
    DEFAULT_ENVS = DEFAULT_BROWSERS

    max_steps: int = option(4, env="MAX_STEPS", help="Model turns per episode [env MAX_STEPS]")
    parallel_envs: int | None = option(None, parse=int,
                                       help="Browsers, reused across episodes [env PARALLEL_ENVS, default 4]")
    screenshot_backend: str = option("playwright", env="SCREENSHOT_BACKEND", choices=BACKENDS,
                                     help="[env SCREENSHOT_BACKEND]")
    shuffle_element_ids: float = option(
        0.0, metavar="SHARE", help="share of training pages (task, seed) whose element ids are drawn at random, so "
                                   "that clicking a fixed id earns nothing and only reading the label does "
                                   "(gui_env.ShuffledIds); evaluation never shuffles")
    rollout_max_context_len: int = trainer_value(2048)

    def __post_init__(self) -> None:
        super().__post_init__()
        if not 0.0 <= self.shuffle_element_ids <= 1.0:
            raise ValueError(f"--shuffle-element-ids is a share in [0, 1], got {self.shuffle_element_ids}")

    def shuffles(self, task: str, seed: int, evaluation: bool) -> bool:
        """Whether this page's ids are drawn at random: decided by (task, seed), so the samples
        of one GRPO group all see the same page."""
        return (not evaluation and self.shuffle_element_ids > 0
                and random.Random(f"shuffle:{task}:{seed}").random() < self.shuffle_element_ids)


add_arguments = GuiRLConfig.add_arguments


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


@dataclass
class GuiEpisode:
    """The turns of one episode on a pooled browser page, and what they earned."""

    env: RemoteEnv
    tokenizer: Any
    max_steps: int
    text: str  # the page as the policy last saw it
    actions: list[str] = field(default_factory=list)
    reward: float = 0.0
    raw_reward: float = 0.0
    errors: int = 0

    async def step(self, turn: Turn) -> str | None:
        try:
            action = parse_action(action_text(self.tokenizer, turn.token_ids))
        except ActionError as exc:  # an unreadable reply costs a turn; the page is shown again
            self.actions.append("invalid")
            self.errors += 1
            return None if len(self.actions) >= self.max_steps else f"Error: {exc}\n{self.text}"
        result = await self.env.step(action)
        self.actions.append(action.render())
        self.reward, self.raw_reward, self.text = result.reward, result.raw_reward, result.observation.text()
        self.errors += result.error is not None
        if result.done or len(self.actions) >= self.max_steps:
            return None
        return observation_text(result)


@contextlib.asynccontextmanager
async def gui_play(cfg: GuiRLConfig, task: str, seed: int, evaluation: bool, tokenizer: Any) -> AsyncIterator[Play]:
    async with shared_pool(cfg.envs(), cfg.screenshot_backend).env() as env:
        shuffled = cfg.shuffles(task, seed, evaluation)
        first: Observation = await env.reset(task, seed, shuffle_ids=shuffled)
        episode = GuiEpisode(env, tokenizer, cfg.max_steps, first.text())

        async def score(outcome: str) -> Score:
            kind = TASKS_BY_NAME[task].kind if task in TASKS_BY_NAME else "other"
            return Score(float(episode.reward), dict(
                task=task, seed=seed, kind=kind, steps=len(episode.actions), actions=episode.actions,
                shuffled_ids=shuffled, raw_reward=episode.raw_reward, action_errors=episode.errors,
                screenshots=[base64.b64encode(png).decode() for png in env.screenshots]))

        yield Play(opening_messages(first.text()), episode.step, score)


async def generate(args: Any, sample: Any, sampling_params: dict[str, Any], evaluation: bool = False) -> Any:
    cfg = GuiRLConfig.from_args(args)
    check_screenshot_backend(cfg.screenshot_backend)
    task, seed = task_for_sample(sample)
    return await generate_episode(args, sample, sampling_params,
                                  lambda tokenizer, obs_format: gui_play(cfg, task, seed, evaluation, tokenizer),
                                  cfg.rollout_max_context_len)
