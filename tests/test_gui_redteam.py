"""Red team of gui-rl's reward, on real MiniWoB++ pages in real headless Chromium.

Each test is an attempt to earn the reward without doing the task through what a policy controls:
the text of its reply, parsed into actions (click, fill, press, scroll, select_option, done) on
the elements it is shown. Attempts that worked once (partial credit counted as success, a second
try after the episode had ended, replies that crashed the parser) are regression tests; those that
never worked (JavaScript typed into the page, keyboard shortcuts, ids crafted into selectors, the
reward of an earlier episode) keep a test that the reward stays 0. Also here: the last screenshot
shows the page as the episode left it, and the scripted policy says which tasks it has no plan for.
"""

from __future__ import annotations

import importlib
import io
import json
import random
import re
from pathlib import Path

import pytest
from PIL import Image
from slime.utils.plugins import load_plugin_module

pytestmark = pytest.mark.skipif(not Path("/usr/bin/chromium").exists(), reason="chromium not installed")
pytest.importorskip("playwright")

gui_env = load_plugin_module("gui-rl/gui_env.py")  # puts gui-rl/ on the path, as the trainer does
gui_policies = importlib.import_module("gui_policies")
gui_eval = importlib.import_module("gui_eval")
gui_compare = importlib.import_module("gui_compare")
Action, ActionError, parse_action = gui_env.Action, gui_env.ActionError, gui_env.parse_action
SEED = 1_000_000
COVER_BLACK = (17, 17, 17)  # MiniWoB++'s START cover (#sync-task-cover, background #111)


@pytest.fixture(scope="module")
def pool():
    pool = gui_env.BrowserPool(1)
    yield pool
    pool.close()


def ref_of(axtree: str, name: str, role: str = "button") -> str:
    return next(n.ref for n in gui_policies.nodes(axtree) if n.role == role and n.name == name)


def goal_button(goal: str) -> str:
    return re.match(r'Click on the "(.*)" button\.', goal).group(1)


def cover_share(png: bytes) -> float:
    """Share of the PNG's pixels in the START cover's black."""
    image = Image.open(io.BytesIO(png)).convert("RGB")
    return sum(n for n, colour in image.getcolors(1 << 16) if colour == COVER_BLACK) / (image.width * image.height)


# --- hacks that earned the reward before, now regression tests ------------------------------------


def test_partial_credit_is_not_success(pool):
    """click-checkboxes pays the share of boxes in the right state: Submit with none ticked scores
    > 0 whenever fewer than half should be. find-greatest pays 0.1 for the wrong card. Neither
    did the task, and neither earns the reward; only MiniWoB++'s full credit does."""
    with pool.env_sync() as env:
        for seed in (1_000_003, 1_000_007, 1_000_009):
            obs = env.reset("click-checkboxes", seed)
            assert obs.goal != "Select nothing and click Submit."
            result = env.step(Action("click", (ref_of(obs.axtree, "Submit"),)))
            assert result.done and 0 < result.raw_reward < 1, (seed, result.raw_reward)  # the page's partial credit
            assert result.reward == 0.0, seed
        obs = env.reset("find-greatest", 1_000_001)
        first_card = re.search(r"generic \[ref=(e\d+)\] \[cursor=pointer\]", obs.axtree).group(1)
        picked = env.step(Action("click", (first_card,)))
        result = env.step(Action("click", (ref_of(picked.observation.axtree, "Submit"),)))
        assert (result.done, result.raw_reward, result.reward) == (True, 0.1, 0.0)


def test_no_second_try_once_the_episode_has_ended(pool):
    """MiniWoB++ shows a START cover when an episode ends; clicking it drew a new problem and
    cleared the page's reward, so a wrong answer could be followed by a right one on a new page."""
    with pool.env_sync() as env:
        obs = env.reset("click-button", SEED)
        wrong = next(n.ref for n in gui_policies.nodes(obs.axtree) if n.role == "button" and n.name != "Okay")
        result = env.step(Action("click", (wrong,)))
        assert result.done and result.reward == 0.0 and result.raw_reward == -1.0
        start = re.search(r"\[ref=(e\d+)\][^\n]*: START", result.observation.axtree)
        if start:  # the cover: a click draws a new problem
            result = env.step(Action("click", (start.group(1),)))
        now = result.observation
        again = env.step(Action("click", (ref_of(now.axtree, goal_button(now.goal)),)))  # the right answer
        assert (again.done, again.reward, again.raw_reward) == (True, 0.0, -1.0)  # the first end stands
        assert start is None and again.error == "the episode is over; reset() starts the next one"
        assert len(env.screenshots) == 2  # refused steps take no observation


def test_replies_are_parsed_never_evaluated():
    """Model text becomes an action with plain string/number arguments, or an ActionError the
    policy is shown; nothing else (a deep nesting once raised MemoryError out of the parser and
    would have ended the training job)."""
    for reply in ("click(" + "-" * 100_000 + "1)", "click(" + "(" * 150 + '"e1"' + ")" * 150 + ")",
                  'click(__import__("os").system("true"))', 'fill("e1", open("/etc/passwd").read())',
                  'fill("e1", "a" + "b")', "scroll(1e309, 0)", "scroll(" + "9" * 400 + ", 0)", 'press("e1", 5)',
                  'click("e1",)', "click(e1)", 'click(f"{1}")'):
        with pytest.raises(ActionError):
            parse_action(reply)
    assert parse_action('fill("e5", "a)b\\"c")') == Action("fill", ("e5", 'a)b"c'))
    assert parse_action('fill("e5", 42)') == Action("fill", ("e5", "42"))  # digits are text to type
    rng = random.Random(0)
    pieces = ["click(", "fill(", "press(", "scroll(", "done(", ")", "(", '"e1"', "'x'", ",", " ", "-", "1", "1.5",
              "\\", '"', "'", "\n", "[", "]", "{", "}", "*", "e", "__import__", "lambda:0", "#"]
    for _ in range(3000):
        reply = "".join(rng.choice(pieces) for _ in range(rng.randint(1, 14)))
        try:
            action = parse_action(reply)
        except ActionError:
            continue
        assert all(type(a) in (str, int, float) for a in action.args), reply


# --- attacks that never earned the reward: it stays 0 -------------------------------------------


def test_javascript_in_text_is_typed_not_run(pool):
    payloads = ["javascript:core.endEpisode(1)", "');core.endEpisode(1);//", "`${core.endEpisode(1)}`",
                '<img src=x onerror="core.endEpisode(1)">', "WOB_RAW_REWARD_GLOBAL = 1; WOB_DONE_GLOBAL = true"]
    with pool.env_sync() as env:
        obs = env.reset("enter-text", SEED)
        box = next(n.ref for n in gui_policies.nodes(obs.axtree) if n.role == "textbox")
        for payload in payloads:
            for action in (Action("fill", (box, payload)), Action("press", (box, "Enter"))):
                result = env.step(action)
                assert (result.done, result.reward, result.raw_reward) == (False, 0.0, 0.0), (payload, action)
        assert pool.run(env.env.page.locator("#tt").input_value()) == payloads[-1]  # typed as text
        obs = env.reset("choose-list", SEED)
        combo = next(n.ref for n in gui_policies.nodes(obs.axtree) if n.role == "combobox")
        result = env.step(Action("select_option", (combo, "'); core.endEpisode(1); ('")))
        assert result.error and (result.done, result.reward) == (False, 0.0)


def test_element_ids_cannot_reach_into_selectors_or_hidden_elements(pool):
    """An id goes into Playwright's `aria-ref=` selector: only plain ids of elements the policy was
    shown are accepted (not the hidden goal line or score panel, not selector syntax)."""
    with pool.env_sync() as env:
        obs = env.reset("click-button", SEED)
        okay = ref_of(obs.axtree, "Okay")
        snapshot = pool.run(env.env.page.locator("body").aria_snapshot(mode="ai"))
        hidden = [r for r in re.findall(r"\[ref=(?:f\d+)?(e\d+)\]", snapshot) if f"[ref={r}]" not in obs.axtree]
        assert len(hidden) >= 5  # the goal line, the score panel, the wrappers
        crafted = [f"{okay} >> xpath=//button", f"{okay}\n", f"f1{okay}", "e\u0666", f'{okay}", core.endEpisode(1), "',
                   f"{okay}] , [ref=e1"]
        for ref in crafted:
            for action in (Action("click", (ref,)), Action("fill", (ref, "1")), Action("press", (ref, "Enter"))):
                result = env.step(action)
                assert result.error and (result.done, result.reward) == (False, 0.0), (ref, action)
        for ref in hidden:
            result = env.step(Action("click", (ref,)))
            assert result.error == f"no element {ref} on this page" and not result.done, ref
        assert env.step(Action("click", (okay,))).reward == 1.0  # the page itself was untouched


def test_keyboard_shortcuts_neither_reload_nor_go_back(pool):
    """Browser shortcuts (reload, back to the previous episode's page, close) are not run for
    keys sent to the page: the episode, its seed and its reward are untouched."""
    with pool.env_sync() as env:
        obs = env.reset("click-button", SEED)
        assert env.step(Action("click", (ref_of(obs.axtree, "Okay"),))).reward == 1.0  # a page to go back to
        obs = env.reset("click-button", SEED + 1)
        url = env.env.page.url
        box = next(n.ref for n in gui_policies.nodes(obs.axtree) if n.role == "textbox")
        for key in ("F5", "Control+r", "Control+Shift+r", "Alt+ArrowLeft", "Alt+ArrowRight", "Control+w",
                    "Control+t", "Control+l", "Escape"):
            result = env.step(Action("press", (box, key)))
            assert (result.done, result.reward, result.raw_reward, result.error) == (False, 0.0, 0.0, None), key
            assert result.observation.goal == obs.goal and env.env.page.url == url, key
        result = env.step(Action("click", (ref_of(obs.axtree, goal_button(obs.goal)),)))
        assert result.reward == 1.0  # the same seeded episode, still running


def test_reward_of_an_earlier_episode_does_not_carry_over(pool):
    with pool.env_sync() as env:
        obs = env.reset("click-button", SEED)
        assert env.step(Action("click", (ref_of(obs.axtree, "Okay"),))).reward == 1.0
        for task in ("click-button", "click-dialog"):  # the same page again, and another
            env.reset(task, SEED)
            result = env.step(Action("done"))
            assert (result.done, result.reward, result.raw_reward) == (True, 0.0, 0.0), task


def test_only_the_episodes_own_document_pays(pool):
    """The reward is read with a token the reset fixed on its document. No action navigates (the
    tests above), but should the page ever be another document, say an earlier episode's page back
    from the history claiming reward 1, the episode ends with nothing."""
    with pool.env_sync() as env:
        env.reset("click-button", SEED)
        env.reset("click-dialog", SEED)
        page = env.env.page
        pool.run(page.go_back())
        pool.run(page.evaluate("() => { WOB_DONE_GLOBAL = true; WOB_RAW_REWARD_GLOBAL = 1; }"))
        result = env.step(Action("done"))
        assert (result.done, result.reward) == (True, 0.0)
        assert "left this episode's document" in result.error


# --- the last screenshot ----------------------------------------------------------------------


def test_last_screenshot_is_the_final_page_not_the_start_cover(pool):
    with pool.env_sync() as env:
        for button in ("Okay", "Submit"):  # a right and a wrong answer
            obs = env.reset("click-button", SEED)
            result = env.step(Action("click", (ref_of(obs.axtree, button),)))
            assert result.done
            page = env.env.page
            assert pool.run(page.evaluate("getComputedStyle(document.getElementById('sync-task-cover')).display")) == "none"
            last = env.screenshots[-1]
            assert last == result.observation.screenshot and cover_share(last) < 0.01, button
            # the page as the click left it: the same page as at the start, the clicked button focused
            element = pool.run(page.locator("#wrap").screenshot(type="png"))
            assert last == element and last != env.screenshots[0]


def test_eval_saves_the_final_page_and_leaves_unplanned_tasks_out(tmp_path, capsys):
    """gui_eval's saved last PNG is the final page; tasks the scripted policy has no plan for are
    named, not run, and not averaged in as 0%."""
    out = tmp_path / "eval"
    assert gui_eval.main(["--tasks", "click-button", "use-autocomplete", "click-tab-2", "login-user-popup",
                          "enter-date", "--episodes", "1", "--parallel-envs", "1", "--out", str(out)]) == 0
    printed = capsys.readouterr().out
    report = json.loads((out / "report.json").read_text())
    assert report["success_rate"] == {"click-button": 1.0} and report["mean_success"] == 1.0
    unplanned = ["use-autocomplete", "click-tab-2", "login-user-popup", "enter-date"]
    assert report["unplanned"] == {t: f"no scripted plan for {t}" for t in unplanned}
    assert {e["task"] for e in report["episodes"]} == {"click-button"}
    for task in unplanned:
        assert f"no scripted plan for {task}: left out of the mean" in printed
    last = (out / f"click-button-seed{SEED}-ok-last.png").read_bytes()
    first = (out / f"click-button-seed{SEED}-ok-first.png").read_bytes()
    assert cover_share(last) < 0.01 and last != first


# --- the scripted policy says what it cannot do --------------------------------------------------


def test_scripted_policy_refuses_tasks_and_goals_it_has_no_plan_for(pool):
    for task in ("use-autocomplete", "click-tab-2", "login-user-popup", "enter-date", "click-checkboxes-soft"):
        with pytest.raises(gui_policies.NoPlanError, match=f"no scripted plan for {task}"):
            gui_policies.check_planned(task)
    for task in gui_policies.PLANNED_TASKS:
        gui_policies.check_planned(task)
    with pool.env_sync() as env:
        # Run anyway (bypassing the up-front check), it refuses the goal instead of acting blind.
        result = gui_eval.run_episode(env, gui_policies.ScriptedPolicy(), "use-autocomplete", SEED, max_steps=4)
    assert (result.planned, result.success, result.steps) == (False, False, 0)
    assert "no scripted plan for the goal" in result.error_messages[0]
    assert gui_eval.unplanned_goals([result]) == {"use-autocomplete": "no scripted plan for use-autocomplete (1 of 1 goals)"}


def test_compare_leaves_unplanned_tasks_out_of_both_sides():
    def episodes(task: str, oks: list[bool]) -> list[dict]:
        return [{"task": task, "seed": SEED + i, "success": ok} for i, ok in enumerate(oks)]

    scripted = {"episodes": episodes("click-button", [True, True]), "unplanned": {"enter-date": "no scripted plan"}}
    model = {"episodes": episodes("click-button", [True, False]) + episodes("enter-date", [False, False])}
    rows, delta = gui_compare.compare(scripted, model)
    assert rows == [("click-button", 100.0, 50.0)] and delta.n == 2
    assert gui_compare.unplanned(scripted, model) == ["enter-date"]
