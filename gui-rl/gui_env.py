"""A MiniWoB++ episode in headless Chromium (Playwright), and the pool of reused browsers.

One `GuiEnv` = one Chromium process with one page. `reset(task, seed)` opens the task page,
seeds it and starts the episode; `step(action)` performs one action and reads the page's own
reward (`WOB_RAW_REWARD_GLOBAL`, set by the task's JavaScript): 1 for MiniWoB++'s full credit,
else 0. An episode is one problem on one document: its first end is final. Observations are the task's goal,
Playwright's accessibility snapshot of the task area (`aria_snapshot(mode="ai")`, whose
`[ref=eN]` element ids the actions name) and a PNG screenshot of the task area.

All browsers live on one background thread with its own event loop (`BrowserPool`): the trainer
runs every rollout in a fresh `asyncio.run`, and browsers must outlive those loops to be reused
across episodes. Callers in any loop (or none) reach them through `asyncio.wrap_future`.
"""

from __future__ import annotations

import asyncio
import atexit
import concurrent.futures
import contextlib
import dataclasses
import math
import random
import re
import secrets
import threading
from collections.abc import AsyncIterator, Coroutine
from dataclasses import dataclass, field
from typing import Any, TypeVar

from gui_tasks import task_url

from openclaw.environment import env_value

CHROMIUM = env_value("OPENCLAW_CHROMIUM") or "/usr/bin/chromium"
# No GPU, no QUIC, no background traffic (component updates, sync): the browser reaches nothing.
CHROMIUM_FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                  "--disable-background-networking", "--disable-component-update", "--disable-sync"]
# MiniWoB++ ends an episode after EPISODE_MAX_TIME (10 s by default); a CPU policy needs longer,
# and the step cap (MAX_STEPS) bounds episodes instead.
EPISODE_MAX_MS = 600_000
# Before each snapshot: hide the score panel and the goal line from the tree (the goal is given
# separately) and give pointer-cursor elements without a role the role "link", so clickable
# spans (click-link's words, for one) get element ids. Returns the goal and the task area's
# rectangle in the viewport (scrolled into view first, as an element screenshot would).
_PREPARE_TREE_JS = """() => {
  for (const id of ['reward-display', 'query']) {
    const el = document.getElementById(id); if (el) el.setAttribute('aria-hidden', 'true');
  }
  for (const el of document.querySelectorAll('#area span, #area div')) {
    if (!el.hasAttribute('role') && getComputedStyle(el).cursor === 'pointer' && el.children.length === 0) {
      el.setAttribute('role', 'link');
    }
  }
  const wrap = document.getElementById('wrap');
  let r = wrap.getBoundingClientRect();
  if (r.top < 0 || r.left < 0 || r.bottom > innerHeight || r.right > innerWidth) {
    wrap.scrollIntoView(); r = wrap.getBoundingClientRect();
  }
  return [core.getUtterance(), {x: r.x, y: r.y, width: r.width, height: r.height}];
}"""
# Starts this reset's episode. MiniWoB++ calls core.startEpisode() when an episode ends: its
# black START cover, whose click draws a new problem and clears the reward. Here one reset is one
# problem, so that call does nothing: the last screenshot shows the page as the episode left it,
# and no action can start a second try. The token, fixed on this document's window, tells the
# reward read below that the page is still the document this reset opened.
_START_EPISODE_JS = """([seed, ms, token]) => {
  Math.seedrandom(seed);
  core.EPISODE_MAX_TIME = ms;
  core.startEpisode = function () {};
  Object.defineProperty(window, '__guiEpisode', {value: token, writable: false, configurable: false});
  core.startEpisodeReal();
}"""
# [token, done, raw reward]; the token is null on any document this reset did not start.
_READ_STATE_JS = """() => [window.__guiEpisode === undefined ? null : window.__guiEpisode,
  typeof WOB_DONE_GLOBAL === 'undefined' ? null : WOB_DONE_GLOBAL,
  typeof WOB_RAW_REWARD_GLOBAL === 'undefined' ? null : WOB_RAW_REWARD_GLOBAL]"""
# A point (viewport coordinates) where the element itself receives the click, or null.
_VISIBLE_POINT_JS = """(el) => {
  const r = el.getBoundingClientRect();
  for (const fy of [0.5, 0.25, 0.75, 0.1, 0.9]) for (const fx of [0.5, 0.25, 0.75, 0.1, 0.9]) {
    const x = r.left + r.width * fx, y = r.top + r.height * fy;
    const hit = document.elementFromPoint(x, y);
    if (hit && (hit === el || el.contains(hit) || (el.control && el.control === hit))) return [x, y];
  }
  return null;
}"""
ACTIONS = ("click", "fill", "press", "scroll", "select_option", "done")
# Each action's arguments: an element id, text (a string; a number stands for its digits), a key
# name, or pixels (a number).
SIGNATURES: dict[str, tuple[str, ...]] = {
    "click": ("ref",), "fill": ("ref", "text"), "press": ("ref", "key"), "scroll": ("px", "px"),
    "select_option": ("ref", "text"), "done": ()}
# MiniWoB++'s raw reward for a task done right. Some tasks pay part of it for a wrong answer
# (click-checkboxes: the share of boxes in the right state, so Submit alone often scores > 0;
# find-greatest: 0.1 for the wrong card), so only full credit counts as success.
FULL_CREDIT = 1.0
# Browsers when PARALLEL_ENVS is unset: each is a Chromium of its own, heavier than a sandbox.
DEFAULT_BROWSERS = 4
T = TypeVar("T")


@dataclass(frozen=True)
class Observation:
    goal: str
    axtree: str  # accessibility tree text with [ref=eN] element ids
    screenshot: bytes  # PNG of the task area

    def text(self) -> str:
        return f"Goal: {self.goal}\nPage:\n{self.axtree}"


@dataclass(frozen=True)
class Action:
    name: str
    args: tuple[Any, ...] = ()

    def render(self) -> str:
        return f"{self.name}({', '.join(repr(a) for a in self.args)})"


@dataclass
class StepResult:
    observation: Observation
    reward: float  # 1.0 if the page's own reward is full credit (FULL_CREDIT), else 0.0
    done: bool
    raw_reward: float  # the page's reward in [-1, 1] (0 while the episode runs)
    error: str | None = None  # why an action could not be performed (shown to the policy)


class ActionError(ValueError):
    pass


_CALL = re.compile(r"\b(" + "|".join(ACTIONS) + r")\((.*?)\)\s*$", re.MULTILINE)
# The only argument forms: a quoted string (either quote, backslash escapes) or a decimal number.
_TOKEN = r"""(?:"(?:[^"\\\n]|\\.)*"|'(?:[^'\\\n]|\\.)*'|-?[0-9]+(?:\.[0-9]+)?)"""
_ARGS = re.compile(rf"\s*{_TOKEN}\s*(?:,\s*{_TOKEN}\s*)*")
_ESCAPES = {"n": "\n", "t": "\t"}


def parse_action(text: str) -> Action:
    """The last BrowserGym-style call in a model's reply: click("e3"), fill("e5", "hi"),
    press("e5", "Enter"), scroll(0, 200), select_option("e7", "Red"), done().

    Read against a strict grammar, never evaluated: whatever a reply holds becomes one of these
    calls with plain string/number arguments, or an ActionError."""
    matches = list(_CALL.finditer(text))
    if not matches:
        raise ActionError(f"no action found; use one of: {', '.join(a + '(...)' for a in ACTIONS)}")
    m = matches[-1]
    name, raw = m.group(1), m.group(2)
    if raw.strip() and not _ARGS.fullmatch(raw):
        raise ActionError(f"bad arguments in {m.group(0)[:80]!r}: use quoted strings and numbers")
    tokens = re.findall(_TOKEN, raw)
    kinds = SIGNATURES[name]
    if len(tokens) != len(kinds):
        raise ActionError(f"{name} takes {len(kinds)} argument(s), got {len(tokens)}")
    action = Action(name, tuple(_argument(name, kind, token) for kind, token in zip(kinds, tokens, strict=True)))
    check_scroll(action)
    return action


def _argument(name: str, kind: str, token: str) -> str | float:
    """One argument token, checked against what the action takes at that place."""
    if token[0] not in "\"'":
        if kind == "px":
            value = float(token)
            return int(value) if value.is_integer() and math.isfinite(value) else value
        if kind == "text":
            return token  # fill("e5", 42) types the digits
        raise ActionError(f"{name}'s {'element id' if kind == 'ref' else 'key'} is a quoted string, got {token}")
    if kind == "px":
        raise ActionError(f"scroll takes two numbers (pixels right, pixels down), got {token}")
    return re.sub(r"\\(.)", lambda e: _ESCAPES.get(e.group(1), e.group(1)), token[1:-1])


def check_scroll(action: Action) -> None:
    """scroll takes pixel offsets. A sampled `scroll("e5", 0)` is the policy's mistake (an
    ActionError it is shown), not a ValueError that ends the training job (it did, once)."""
    if action.name == "scroll" and not all(isinstance(a, int | float) and not isinstance(a, bool)
                                           and math.isfinite(a) for a in action.args):
        raise ActionError(f"scroll takes two numbers (pixels right, pixels down), got {action.render()}")


_REF = re.compile(r"\[ref=(e\d+)\]")


@dataclass
class ShuffledIds:
    """One episode's renaming of element ids, drawn at random from e1..e40 (a training
    augmentation, `--shuffle-element-ids`). MiniWoB++ builds a task's pages from one template, so
    the right element has the same id on every seed (click-dialog's "Close" is `e15`), and a policy
    rewarded for clicking it learns the position, not the label beside the id. With the ids drawn
    at random only copying the id of the right line earns the reward; a permutation of the page's
    own ids would not do (click-dialog has three). Ids stay fixed within the episode; elements
    that appear later get ids of their own."""

    rng: random.Random
    shown: dict[str, str] = field(default_factory=dict)  # page's id -> id the policy sees
    real: dict[str, str] = field(default_factory=dict)  # id the policy sees -> page's id
    id_range: int = 40

    def rename(self, tree: str) -> str:
        new = [r for r in dict.fromkeys(_REF.findall(tree)) if r not in self.shown]
        size = max(self.id_range, 2 * (len(self.shown) + len(new)))
        free = [f"e{i}" for i in range(1, size + 1) if f"e{i}" not in self.real]
        for ref, shown in zip(new, self.rng.sample(free, len(new)), strict=True):
            self.shown[ref], self.real[shown] = shown, ref
        return _REF.sub(lambda m: f"[ref={self.shown[m.group(1)]}]", tree)

    def resolve(self, shown: str) -> str:
        if shown not in self.real:
            raise ActionError(f"no element {shown} on this page")
        return self.real[shown]


_CONTAINER = re.compile(r"^\s*- generic( \[active\])? \[ref=e\d+\]:$")


def compact_tree(snapshot: str) -> str:
    """Drop aria-hidden subtrees (score panel, goal line) and unnamed `generic` wrappers: a small
    model's context is short, and these lines carry no element a task needs."""
    out: list[str] = []
    hidden_indent: int | None = None
    for line in snapshot.splitlines():
        indent = len(line) - len(line.lstrip())
        if hidden_indent is not None and indent > hidden_indent:
            continue
        hidden_indent = None
        if "[aria-hidden]" in line:
            hidden_indent = indent
            continue
        if _CONTAINER.match(line) or line.lstrip().startswith("- /url:"):
            continue
        out.append(line.strip())
    return "\n".join(out)


@dataclass
class GuiEnv:
    """One browser, one page; runs on the pool's thread (use `BrowserPool.env()` from outside)."""

    browser: Any
    page: Any
    task: str = ""
    seed: int = 0
    steps: int = 0
    screenshots: list[bytes] = field(default_factory=list)
    ref_prefix: str = ""
    ids: ShuffledIds | None = None  # set by reset(shuffle_ids=True)
    shown: set[str] = field(default_factory=set)  # the page's ids of the elements last shown
    token: str = ""  # this reset's document (see _START_EPISODE_JS)
    final: StepResult | None = None  # the step that ended this episode

    async def reset(self, task: str, seed: int, shuffle_ids: bool = False) -> Observation:
        """Open `task`'s page for `seed`. `shuffle_ids`: show the element ids drawn at random, the
        same way for every episode of this (task, seed), so a GRPO group shares one page."""
        self.task, self.seed, self.steps, self.screenshots = task, seed, 0, []
        self.ids = ShuffledIds(random.Random(f"ids:{task}:{seed}")) if shuffle_ids else None
        self.token, self.final = secrets.token_hex(8), None
        await self.page.goto(task_url(task))
        await self.page.evaluate(_START_EPISODE_JS, [str(seed), EPISODE_MAX_MS, self.token])
        await self.page.wait_for_function("WOB_TASK_READY === true")
        return await self.observe()

    async def observe(self) -> Observation:
        goal, task_area = await self.page.evaluate(_PREPARE_TREE_JS)
        snapshot = await self.page.locator("body").aria_snapshot(mode="ai")
        # Playwright prefixes ids with the frame's number (f3e12), which changes with every page
        # load; the policy sees the stable part (e12) and we add the prefix back when acting.
        m = re.search(r"\[ref=(f\d+)e\d+\]", snapshot)
        self.ref_prefix = m.group(1) if m else ""
        axtree = compact_tree(re.sub(r"\[ref=f\d+(e\d+)\]", r"[ref=\1]", snapshot))
        self.shown = set(_REF.findall(axtree))
        if self.ids is not None:
            axtree = self.ids.rename(axtree)
        png = await self.screenshot(task_area)
        self.screenshots.append(png)
        return Observation(goal=goal, axtree=axtree, screenshot=png)

    async def screenshot(self, task_area: dict[str, float]) -> bytes:
        """PNG of the task area (#wrap). A clip of the page rather than `locator.screenshot()`: the
        same bytes without the locator's actionability waits (38 ms against 158 ms a shot, measured
        on 2 cores; test_gui_env checks the bytes are equal)."""
        return await self.page.screenshot(type="png", clip=task_area)

    async def _state(self) -> tuple[bool, float, str | None]:
        """(done, raw reward, why the episode is void) of this reset's episode. A document other
        than the one reset started (reloaded, or an earlier page back from the history) holds no
        reward of this episode, whatever its MiniWoB++ variables say."""
        from playwright.async_api import Error as PlaywrightError

        try:
            token, done, raw = await self.page.evaluate(_READ_STATE_JS)
        except PlaywrightError:  # the document was replaced while we read it
            token = done = raw = None
        if token != self.token or done is None or raw is None:
            return True, 0.0, "the page left this episode's document; the episode ends without reward"
        return bool(done), float(raw), None

    async def _perform(self, action: Action) -> None:
        def el(ref: Any) -> Any:
            if not isinstance(ref, str) or not re.fullmatch(r"e[0-9]+", ref):
                raise ActionError(f"element ids look like 'e12', got {ref!r}")
            page_ref = self.ids.resolve(ref) if self.ids is not None else ref
            # Only elements the policy was shown: not the hidden score panel, goal line or wrappers.
            if page_ref not in self.shown:
                raise ActionError(f"no element {ref} on this page")
            return self.page.locator(f"aria-ref={self.ref_prefix}{page_ref}")

        timeout = 2000  # ms: an element that is not actionable by then is an error for the policy
        name, args = action.name, action.args
        if name == "click":
            # Click a point of the element that is not covered (MiniWoB++ overlaps elements on
            # purpose, e.g. click-test-2): Playwright's click aims at the centre and refuses.
            target = el(args[0])
            await target.scroll_into_view_if_needed(timeout=timeout)
            point = await target.evaluate(_VISIBLE_POINT_JS, timeout=timeout)
            if point is None:
                raise ActionError(f"element {args[0]} is hidden or covered by other elements")
            await self.page.mouse.click(point[0], point[1])
        elif name == "fill":
            await el(args[0]).fill(str(args[1]), timeout=timeout)
        elif name == "press":
            await el(args[0]).press(str(args[1]), timeout=timeout)
        elif name == "scroll":
            check_scroll(action)  # an Action built in code, not parsed, reaches here unchecked
            await self.page.mouse.wheel(float(args[0]), float(args[1]))
        elif name == "select_option":
            await el(args[0]).select_option(str(args[1]), timeout=timeout)

    async def _try(self, action: Action) -> str | None:
        """Perform `action`; the error the policy is shown if it could not be performed."""
        from playwright.async_api import Error as PlaywrightError

        try:
            await self._perform(action)
        except ActionError as exc:
            return str(exc)
        except PlaywrightError as exc:  # missing element, not clickable, ... : the policy's mistake
            return str(exc).splitlines()[0][:300]
        return None

    async def step(self, action: Action) -> StepResult:
        """One action. The episode's first end is final: later steps perform nothing and return
        that end again, so nothing done after it (a second try, a page drawn anew) counts."""
        if self.final is not None:
            return dataclasses.replace(self.final, error="the episode is over; reset() starts the next one")
        self.steps += 1
        error = await self._try(action) if action.name != "done" else None
        done, raw, void = await self._state()
        obs = await self.observe()
        done = done or action.name == "done"
        result = StepResult(obs, 1.0 if done and raw >= FULL_CREDIT else 0.0, done, raw, void or error)
        if done:
            self.final = result
        return result


class BrowserPool:
    """Up to `size` Chromium browsers, launched on first use and reused for every episode.

    The browsers run on a daemon thread's event loop. `close()` (also registered with atexit, so
    Ctrl-C closes them) ends every browser; if this process is killed outright, Playwright's driver
    sees its pipe close and kills the browsers it launched (tests/test_gui_leaks.py checks by PID).
    """

    backend = "playwright"  # SCREENSHOT_BACKEND (gui_screenshots.make_pool picks the class)

    def __init__(self, size: int, viewport: tuple[int, int] = (500, 400)) -> None:
        if size < 1:
            raise ValueError(f"PARALLEL_ENVS must be >= 1, got {size}")
        self.size, self.viewport = size, viewport
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="gui-browsers", daemon=True)
        self._thread.start()
        self._playwright: Any = None
        self._envs: list[GuiEnv] = []
        self._free: asyncio.Queue[GuiEnv] | None = None
        self._launch_lock: asyncio.Lock | None = None
        self._closed = False
        self._stopped = False  # the loop is (being) stopped: nothing submitted to it would ever run
        atexit.register(self.close)

    def call(self, coro: Coroutine[Any, Any, T]) -> concurrent.futures.Future[T]:
        if self._stopped:
            coro.close()
            raise RuntimeError("the browser pool is closed")
        return asyncio.run_coroutine_threadsafe(coro, self._loop)

    def run(self, coro: Coroutine[Any, Any, T], timeout: float | None = 120) -> T:
        """Run a coroutine on the browser thread and wait for it (for synchronous callers)."""
        return self.call(coro).result(timeout)

    async def _launch(self) -> GuiEnv:
        from playwright.async_api import async_playwright

        if self._playwright is None:
            self._playwright = await async_playwright().start()
        browser = await self._playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_FLAGS)
        page = await browser.new_page(viewport={"width": self.viewport[0], "height": self.viewport[1]})
        env = GuiEnv(browser, page)
        self._envs.append(env)
        return env

    async def _acquire(self) -> GuiEnv:
        if self._free is None:
            self._free, self._launch_lock = asyncio.Queue(), asyncio.Lock()
        assert self._launch_lock is not None
        async with self._launch_lock:
            if self._free.empty() and len(self._envs) < self.size:
                return await self._launch()
        return await self._free.get()

    async def _release(self, env: GuiEnv) -> None:
        assert self._free is not None
        self._free.put_nowait(env)

    @contextlib.asynccontextmanager
    async def env(self) -> AsyncIterator[RemoteEnv]:
        """Borrow a browser for one episode (waits while all `size` are busy)."""
        env = await asyncio.wrap_future(self.call(self._acquire()))
        try:
            yield RemoteEnv(self, env)
        finally:
            await asyncio.wrap_future(self.call(self._release(env)))

    @contextlib.contextmanager
    def env_sync(self) -> Any:
        env = self.run(self._acquire())
        try:
            yield SyncEnv(self, env)
        finally:
            # A borrow still open at exit (Ctrl-C) ends after `close()` ran from atexit: nothing to return.
            if not self._stopped:
                self.run(self._release(env))

    @property
    def launched(self) -> int:
        return len(self._envs)

    async def _close(self) -> None:
        for env in self._envs:
            with contextlib.suppress(Exception):
                await env.browser.close()
        self._envs.clear()
        if self._playwright is not None:
            await self._playwright.stop()
            self._playwright = None

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        atexit.unregister(self.close)
        with contextlib.suppress(Exception):
            self.run(self._close(), timeout=30)
        self._stopped = True
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(timeout=10)


@dataclass
class RemoteEnv:
    """A pooled GuiEnv seen from another event loop."""

    pool: BrowserPool
    env: GuiEnv

    async def reset(self, task: str, seed: int, shuffle_ids: bool = False) -> Observation:
        return await asyncio.wrap_future(self.pool.call(self.env.reset(task, seed, shuffle_ids)))

    async def step(self, action: Action) -> StepResult:
        return await asyncio.wrap_future(self.pool.call(self.env.step(action)))

    @property
    def screenshots(self) -> list[bytes]:
        return self.env.screenshots


@dataclass
class SyncEnv:
    """A pooled GuiEnv for synchronous callers (evaluation, benchmarks, tests)."""

    pool: BrowserPool
    env: GuiEnv

    def reset(self, task: str, seed: int, shuffle_ids: bool = False) -> Observation:
        return self.pool.run(self.env.reset(task, seed, shuffle_ids))

    def step(self, action: Action) -> StepResult:
        return self.pool.run(self.env.step(action))

    @property
    def screenshots(self) -> list[bytes]:
        return self.env.screenshots
