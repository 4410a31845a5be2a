"""gui-rl environment on real MiniWoB++ pages in real headless Chromium: observations (goal,
accessibility tree with element ids, PNG screenshot), actions, the page's own reward, the seed
split, and the scripted policy's success on the one-step tasks (random policy alongside)."""

from __future__ import annotations

import importlib
import random
import re
from pathlib import Path

import pytest
from slime.utils.plugins import load_plugin_module

pytestmark = pytest.mark.skipif(not Path("/usr/bin/chromium").exists(), reason="chromium not installed")
pytest.importorskip("playwright")

gui_env = load_plugin_module("gui-rl/gui_env.py")
gui_tasks = importlib.import_module("gui_tasks")
gui_policies = importlib.import_module("gui_policies")
gui_eval = importlib.import_module("gui_eval")
Action, parse_action, ActionError = gui_env.Action, gui_env.parse_action, gui_env.ActionError


@pytest.fixture(scope="module")
def pool():
    pool = gui_env.BrowserPool(2)
    yield pool
    pool.close()


def test_task_list_and_seed_split():
    assert len(gui_tasks.TASKS) >= 20
    assert {t.kind for t in gui_tasks.TASKS} == {"one-step", "multi-step"}
    assert not set(gui_tasks.TRAIN_SEEDS) & set(gui_tasks.HELDOUT_SEEDS)
    names = gui_tasks.all_task_names()
    assert len(names) > 100 and all(t.name in names for t in gui_tasks.TASKS)
    assert gui_tasks.task_url("click-pie").startswith("file://")  # any shipped task, served from disk
    with pytest.raises(ValueError, match="unknown MiniWoB"):
        gui_tasks.task_url("no-such-task")


def test_parse_action():
    assert parse_action('I will click it.\nclick("e12")') == Action("click", ("e12",))
    assert parse_action("fill('e3', \"Hello, world\")") == Action("fill", ("e3", "Hello, world"))
    assert parse_action('press("e3", "Enter")').name == "press"
    assert parse_action("scroll(0, 200)") == Action("scroll", (0, 200))
    assert parse_action('select_option("e5", "Red")').args == ("e5", "Red")
    assert parse_action("done()") == Action("done")
    for bad in ("hello", 'click("e1", "x")', "fill(e3, )", 'scroll("e5", 0)', "scroll(True, 1)"):
        with pytest.raises(ActionError):
            parse_action(bad)


def test_observation_and_reward(pool):
    with pool.env_sync() as env:
        obs = env.reset("click-button", 1_000_000)
        assert obs.goal == 'Click on the "Okay" button.'
        assert 'button "Okay" [ref=e' in obs.axtree and "Last reward" not in obs.axtree
        assert obs.screenshot.startswith(b"\x89PNG")
        same = env.reset("click-button", 1_000_000)  # a seed fixes the page
        assert same.axtree == obs.axtree
        wrong = [n for n in gui_policies.nodes(obs.axtree) if n.role == "button" and n.name != "Okay"][0]
        result = env.step(Action("click", (wrong.ref,)))
        assert result.done and result.reward == 0.0 and result.raw_reward == -1.0  # the page's own verdict
        obs = env.reset("click-button", 1_000_000)
        right = [n for n in gui_policies.nodes(obs.axtree) if n.name == "Okay"][0]
        result = env.step(Action("click", (right.ref,)))
        assert result.done and result.reward == 1.0 and result.raw_reward == 1.0
        assert len(env.screenshots) == 2  # reset + step, kept for the trajectory


def test_screenshot_is_the_task_areas_element_screenshot(pool):
    """The observation's PNG is a clip of the page (cheaper than an element screenshot): it must
    be the very bytes Playwright's element screenshot of #wrap gives, on every kind of page."""
    with pool.env_sync() as env:
        for task in [t.name for t in gui_tasks.TASKS]:
            obs = env.reset(task, 1_000_003)
            element = pool.run(env.env.page.locator("#wrap").screenshot(type="png"))
            assert obs.screenshot == element, task


def test_type_select_and_errors_are_observations(pool):
    with pool.env_sync() as env:
        obs = env.reset("enter-text", 1_000_001)
        box = [n for n in gui_policies.nodes(obs.axtree) if n.role == "textbox"][0]
        text = obs.goal.split('"')[1]
        result = env.step(Action("fill", (box.ref, text)))
        assert not result.done and result.error is None
        result = env.step(Action("click", ("e999",)))  # no such element: an error the policy sees
        assert result.error and not result.done
        submit = [n for n in gui_policies.nodes(result.observation.axtree) if n.name == "Submit"][0]
        assert env.step(Action("click", (submit.ref,))).reward == 1.0
        obs = env.reset("choose-list", 1_000_001)
        combo = [n for n in gui_policies.nodes(obs.axtree) if n.role == "combobox"][0]
        choice = obs.goal.removeprefix("Select ").split(" from")[0]
        assert env.step(Action("select_option", (combo.ref, choice))).error is None
        assert env.step(Action("scroll", (0, 100))).error is None
        # a sampled scroll("e5", 0) once ended a training job with a ValueError: now the policy's error
        assert "scroll takes two numbers" in env.step(Action("scroll", ("e5", 0))).error


def test_shuffled_ids_rename_the_pages_elements_and_act_on_the_element_shown(pool):
    """--shuffle-element-ids: the same page with its ids drawn at random (the same way for every
    episode of a (task, seed), so a GRPO group shares one page); an action names the id it was shown."""
    ref = re.compile(r"\[ref=(e\d+)\]")
    with pool.env_sync() as env:
        plain = env.reset("click-dialog", 1_000_000)
        shuffled = env.reset("click-dialog", 1_000_000, shuffle_ids=True)
        assert ref.sub("", shuffled.axtree) == ref.sub("", plain.axtree)  # only the ids differ
        ids = ref.findall(shuffled.axtree)
        assert len(set(ids)) == len(ids) == len(ref.findall(plain.axtree)) == 3
        assert ids != ref.findall(plain.axtree)
        assert env.reset("click-dialog", 1_000_000, shuffle_ids=True).axtree == shuffled.axtree
        result = env.step(Action("click", ("e999",)))
        assert result.error == "no element e999 on this page" and result.reward == 0.0
        obs = env.reset("click-button", 1_000_000, shuffle_ids=True)
        right = [n for n in gui_policies.nodes(obs.axtree) if n.name == "Okay"][0]
        assert env.step(Action("click", (right.ref,))).reward == 1.0
        results = [gui_eval.run_episode(env, gui_policies.ScriptedPolicy(), task, seed, max_steps=1, shuffle_ids=True)
                   for task in gui_tasks.ONE_STEP for seed in list(gui_tasks.HELDOUT_SEEDS)[:2]]
    assert sum(r.success for r in results) / len(results) >= 0.95  # a reader of labels is unaffected


def test_scripted_beats_95_percent_on_one_step_tasks_random_does_not(pool):
    # One action per episode: these tasks are solved (or failed) by a single action.
    seeds = list(gui_tasks.HELDOUT_SEEDS)[:3]
    rates = {}
    for name, make in (("scripted", gui_policies.ScriptedPolicy), ("random", lambda: gui_policies.RandomPolicy(random.Random(1)))):
        results = []
        with pool.env_sync() as env:
            for task in gui_tasks.ONE_STEP:
                for seed in seeds:
                    results.append(gui_eval.run_episode(env, make(), task, seed, max_steps=1))
        rates[name] = sum(r.success for r in results) / len(results)
    assert rates["scripted"] >= 0.95
    assert rates["random"] < 0.9, rates  # random gets the tiny pages (one button) right, not all
