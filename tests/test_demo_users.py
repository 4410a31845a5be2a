"""The main job's several-users mode as a user runs it (`python -m openclaw.demo --personas a,b`, a real
subprocess, tiny model): each user's trainer trains only that user's turns (the ledger of each
user's trainer holds only their sessions' turns) and pushes that user's adapter, which the server
serves under their id with its own version sequence."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from openclaw.buffer import TrajectoryBuffer
from openclaw.buffer.users import session_owner
from openclaw.control.ledger import adapter_ledger

REPO = Path(__file__).resolve().parents[1]


def test_two_users_each_train_their_own_adapter_on_their_own_turns(tiny_model_path: Path, tmp_path: Path) -> None:
    cmd = [sys.executable, "-m", "openclaw.demo", "--personas", "brief,no_vague", "--model-path", str(tiny_model_path),
           "--interactions", "12", "--batch-size", "4", "--evals", "1", "--eval-limit", "2", "--max-tokens", "8",
           "--eval-max-tokens", "8", "--minutes", "5", "--lr", "1e-2", "--trainer-workers", "2", "--out", str(tmp_path)]
    out = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, timeout=900)
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    assert "2 trainer(s) at once" in out.stdout  # --trainer-workers 2: both users' trainers step side by side
    (run,) = tmp_path.glob("users-*/results.json")
    result = json.loads(run.read_text())
    assert set(result["users"]) == {"brief", "no_vague"}
    final = result["points"][-1]
    for user in ("brief", "no_vague"):
        steps = result["steps"][user]
        assert steps, f"{user}'s trainer never stepped"
        # its own version sequence: every step pushed a newer version of this user's adapter
        versions = [s["weight_version"] for s in steps]
        assert versions == sorted(set(versions))
        assert final[user]["weight_version"] == versions[-1]
        assert set(final[user]["acceptance_by_persona"]) == {"brief", "no_vague"}
        flags = (run.parent / f"trainer_flags_{user}.txt").read_text().split()
        assert flags[flags.index("--buffer-user") + 1] == user == flags[flags.index("--lora-adapter-name") + 1]
    buf = TrajectoryBuffer.open(run.parent / "rl_buffer")
    try:
        for user in ("brief", "no_vague"):
            rows = adapter_ledger(buf, f"openclaw-combine-{user}")
            assert rows, f"no ledger rows for {user}'s adapter"
            assert {session_owner(r["session_id"]) for r in rows} == {user}
            assert {r["adapter"] for r in rows} == {user}  # each row names the adapter it trained
            owners = buf.turn_users([r["turn_id"] for r in rows])
            assert set(owners.values()) == {user}
    finally:
        buf.close()
    assert (run.parent / "learning.png").stat().st_size > 0
