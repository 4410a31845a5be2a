"""The dashboard in headless Chromium (Debian chromium + Playwright): served by the real server
behind the same API key as the API, it shows a session appear after a chat (with its explicit
feedback), the trainer's curves from its metrics.jsonl (written by slime's MetricsLogger), the
weight versions with their canary results, and its promote / rollback buttons change what the
engine serves. Screenshots are saved under the test's tmp dir (paths printed)."""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest

from openclaw.server import create_app, serve_in_background
from openclaw.server.config import parse_config

CHROMIUM = Path("/usr/bin/chromium")
ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
        "--disable-background-networking", "--disable-component-update", "--disable-sync"]
KEY = "dashboard-test-key"

pytestmark = pytest.mark.skipif(not CHROMIUM.exists(), reason="Debian chromium is not installed (/usr/bin/chromium)")


def write_metrics(log_dir: Path) -> None:
    """Two runs in one --log-dir, as slime's MetricsLogger appends them: steps 1..5, then a restart
    from step 2 (a resume from an earlier checkpoint) to step 3."""
    from slime.utils.metrics import MetricsLogger

    for steps in (range(1, 6), range(2, 4)):
        logger = MetricsLogger(log_dir, progress_bar=False, capture_logger=None)
        for step in steps:
            logger.log({"reward/mean": 0.1 * step, "loss/total": 1.0 / step, "train/kl": 0.01 * step}, step=step)
        logger.close()


def test_curves_are_one_line_per_run_ordered_by_step(tmp_path: Path) -> None:
    from openclaw.control.dashboard import curves

    write_metrics(tmp_path)
    c = curves(tmp_path)
    assert [r["steps"] for r in c["runs"]] == [[1, 2, 3, 4, 5], [2, 3]]
    assert c["runs"][0]["series"]["reward/mean"] == pytest.approx([0.1, 0.2, 0.3, 0.4, 0.5])
    assert c["runs"][1]["series"]["reward/mean"] == pytest.approx([0.2, 0.3])
    assert "reward/mean" in c["metrics"] and "train/kl" in c["metrics"]


def test_dashboard_live_sessions_versions_and_buttons(tiny_model_path, tiny_model_path_alt, tmp_path, monkeypatch):
    from playwright.sync_api import expect, sync_playwright

    expect.set_options(timeout=60_000)  # a shared 2-core machine: the page polls every second
    write_metrics(tmp_path / "logs")
    monkeypatch.setenv("OPENCLAW_PROMOTION_GATE", "1")
    monkeypatch.setenv("OPENCLAW_CANARY_PROBE_LIMIT", "2")
    monkeypatch.setenv("OPENCLAW_CONTROL_DIR", str(tmp_path / "control"))
    monkeypatch.setenv("OPENCLAW_TRAIN_LOG_DIR", str(tmp_path / "logs"))
    cfg = parse_config(["--model-path", str(tiny_model_path), "--api-key", KEY, "--enable-rl-intercept",
                        "--rl-buffer-dir", str(tmp_path / "buffer")], env={})
    shots = tmp_path / "screenshots"
    shots.mkdir()
    auth = {"Authorization": f"Bearer {KEY}"}
    with serve_in_background(create_app(cfg)) as srv, \
            httpx.Client(base_url=srv.base_url, timeout=300, headers=auth) as client:
        # Same auth as the API: no key, no dashboard (and no state).
        assert httpx.get(srv.base_url + "/dashboard").status_code == 401
        assert httpx.get(srv.base_url + "/dashboard/state").status_code == 401
        with sync_playwright() as pw:
            browser = pw.chromium.launch(executable_path=str(CHROMIUM), args=ARGS)
            page = browser.new_context(extra_http_headers=auth).new_page()
            page.goto(srv.base_url + "/dashboard")
            expect(page.locator("#served-version")).to_have_text("0")
            expect(page.locator("#gate")).to_have_text("on")
            expect(page.locator('[data-metric="reward/mean"]')).to_contain_text("last 0.3")  # the newest run's last step
            expect(page.locator('[data-metric="train/kl"]')).to_be_visible()
            # one line per run, each drawn by step (x grows along the line), on a labelled step axis
            lines = page.locator('[data-metric="reward/mean"] polyline')
            expect(lines).to_have_count(2)
            for i in range(2):
                xs = [float(p.split(",")[0]) for p in lines.nth(i).get_attribute("points").split()]
                assert xs == sorted(xs) and len(set(xs)) == len(xs), xs
            expect(page.locator('[data-metric="reward/mean"] .x-axis')).to_contain_text("step 1")
            expect(page.locator('[data-metric="reward/mean"] .x-axis')).to_contain_text("step 5")
            page.screenshot(path=str(shots / "1-empty.png"), full_page=True)

            # A chat appears as a live session (the page polls; Playwright waits for it).
            r = client.post("/v1/chat/completions", json={
                "model": "m", "messages": [{"role": "user", "content": "Hello dashboard"}], "max_tokens": 6,
                "temperature": 0, "session_id": "dash-session"})
            assert r.status_code == 200
            session = page.locator('[data-session="dash-session"]')
            expect(session).to_contain_text("Hello dashboard")
            fb = client.post("/v1/feedback", json={"id": r.json()["id"], "rating": "down", "comment": "too vague"})
            if fb.status_code == 200:  # the feedback endpoint is mounted
                expect(session).to_contain_text("feedback down: too vague")
            expect(page.locator("#queue")).to_contain_text("turns")
            page.screenshot(path=str(shots / "2-session.png"), full_page=True)

            # The trainer pushes v1: the canary passes (tiny models), the page shows it served.
            push = client.post("/update_weights_from_disk", json={"model_path": str(tiny_model_path_alt),
                                                                   "weight_version": "1"})
            assert push.status_code == 200 and push.json()["promotion"]["status"] == "serving"
            expect(page.locator("#served-version")).to_have_text("1")
            expect(page.locator('tr[data-version="1"]')).to_contain_text("passed")

            page.locator('tr[data-version="0"] button', has_text="rollback").click()
            expect(page.locator("#served-version")).to_have_text("0")
            expect(page.locator('tr[data-version="1"]')).to_contain_text("rolled_back")
            assert client.get("/health").json()["weight_version"] == 0
            page.screenshot(path=str(shots / "3-rolled-back.png"), full_page=True)

            page.locator('tr[data-version="1"] button', has_text="promote").click()
            expect(page.locator("#served-version")).to_have_text("1")
            expect(page.locator("#status")).to_contain_text("serving weight version 1")
            assert client.get("/health").json()["weight_version"] == 1
            page.screenshot(path=str(shots / "4-promoted.png"), full_page=True)

            # The session was trained into v1 (a ledger row, as the trainer's bridge writes it).
            from openclaw.buffer import TrajectoryBuffer

            with TrajectoryBuffer.open(tmp_path / "buffer", create=False) as buf:
                turn_id = buf.find_turn(request_id=r.json()["id"])[0]
                assert buf.record_trained("dash-trainer", [turn_id], 0, 1, save_dir=None,
                                          base_model=str(tiny_model_path)) == 1
            # Retract asks first (it cannot be undone); dismissed, nothing happens.
            dialogs: list[str] = []

            def answer(accept: bool):
                def on_dialog(dialog) -> None:
                    dialogs.append(dialog.message)
                    dialog.accept() if accept else dialog.dismiss()
                return on_dialog

            page.once("dialog", answer(False))
            session.locator("button", has_text="retract").click()
            expect(page.locator("#status")).to_contain_text("not retracted")
            assert dialogs and "cannot be undone" in dialogs[0] and "dash-session" in dialogs[0]
            assert client.get("/v1/sessions/dash-session/feedback").status_code == 200  # still there
            page.once("dialog", answer(True))
            session.locator("button", has_text="retract").click()
            expect(page.locator('[data-session="dash-session"]')).to_have_count(0)
            expect(page.locator("#served-version")).to_have_text("0")  # rolled back: v1 holds the session
            retracted = page.locator('tr[data-version="1"]')
            expect(retracted).to_contain_text("retracted")
            expect(retracted.locator("button")).to_have_count(0)  # neither promote nor rollback
            page.screenshot(path=str(shots / "5-retracted.png"), full_page=True)
            browser.close()
    print(f"dashboard screenshots: {shots}")
