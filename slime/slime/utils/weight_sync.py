"""Weight sync trainer -> engines through the disk, the way slime does it with SGLang:

1. the train group writes full HF weights (or, with LoRA, only the adapter) into a fresh folder;
2. every engine: POST /pause_generation -> POST /update_weights_from_disk {model_path,
   weight_version} -> POST /flush_cache (retried until idle) -> POST /continue_generation;
   an engine whose `GET /get_server_info` says `"weight_swap": "live"` (a server answering users
   while it trains: it loads the new weights beside the serving ones and swaps them between two
   decode steps) gets the update alone, without the pause: its users see no stall;
3. the version is bumped; every sample generated afterwards reports it.

Folders live under `<root>/v<version>`; after a successful push the previous version's folder
is deleted (the engines have loaded it into memory).
"""

from __future__ import annotations

import shutil
from dataclasses import dataclass, field
from pathlib import Path


def swaps_live(client) -> bool:
    """Does the engine swap weights without a pause? Only when it says so; SGLang does not.
    An engine that does not answer /get_server_info gets the classic (always correct) sequence."""
    from slime.rollout.sglang_client import SGLangClientError

    try:
        info = client.get_server_info()
    except SGLangClientError:
        return False
    return isinstance(info, dict) and info.get("weight_swap") == "live"


def push_to_engines(urls: list[str], model_path: str | Path, version: int, timeout_s: float = 600.0) -> None:
    """Load `model_path` into every engine with pause/continue + flush_cache around the swap
    (engines that swap live get the update alone)."""
    from slime.rollout.sglang_client import SyncSGLangClient

    for url in urls:
        with SyncSGLangClient(url, timeout=timeout_s) as client:
            if swaps_live(client):
                client.update_weights_from_disk(str(model_path), weight_version=version)
                continue
            client.pause_generation()
            try:
                client.update_weights_from_disk(str(model_path), weight_version=version)
                client.flush_cache()
            finally:
                client.continue_generation()


@dataclass
class WeightVersions:
    """Where sync folders go and which version is current (the trainer owns the counter)."""

    root: Path
    version: int = 0
    interval: int = 1
    history: list[Path] = field(default_factory=list)

    def due(self, rollout_id: int) -> bool:
        return (rollout_id + 1) % max(1, self.interval) == 0

    def next_folder(self) -> Path:
        folder = self.root / f"v{self.version + 1}"
        if folder.exists():
            shutil.rmtree(folder)
        folder.parent.mkdir(parents=True, exist_ok=True)
        return folder

    def committed(self, folder: Path) -> int:
        """Record a successful push; drop older folders. Returns the new version."""
        self.version += 1
        for old in self.history:
            shutil.rmtree(old, ignore_errors=True)
        self.history = [folder]
        return self.version
