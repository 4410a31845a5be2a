"""Weight sync trainer -> engines through the disk, the way slime does it with SGLang:

1. the train group writes full HF weights (or, with LoRA, only the adapter) into a fresh folder;
2. every engine: POST /pause_generation -> POST /update_weights_from_disk {model_path,
   weight_version} -> POST /flush_cache (retried until idle) -> POST /continue_generation;
   an engine whose `GET /get_server_info` says `"weight_swap": "live"` (a server answering users
   while it trains: it loads the new weights beside the serving ones and swaps them between two
   decode steps) gets the update alone, without the pause: its users see no stall;
3. the version is bumped; every sample generated afterwards reports it.

With `--lora-adapter-name NAME` the trained adapter is served under NAME beside the base model and
other adapters (SGLang's per-request LoRA), so step 2 becomes one POST /load_lora_adapter
{lora_name: NAME, lora_path} per engine and the base weights are never touched (`load_adapter`).

Folders live under `<root>/v<version>`; after a successful push the previous version's folder
is deleted (the engines have loaded it into memory).
"""

from __future__ import annotations

import json
import shutil
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any


def server_info(client: Any) -> dict[str, Any]:
    """The engine's GET /get_server_info, or {} when it does not answer one: such an engine gets
    the sequences that are correct for any SGLang server (no live swap, no adapter versions)."""
    from slime.rollout.sglang_client import SGLangClientError

    try:
        info = client.get_server_info()
    except SGLangClientError:
        return {}
    return info if isinstance(info, dict) else {}


def swaps_live(client: Any) -> bool:
    """Does the engine swap weights without a pause? Only when it says so; SGLang does not."""
    return server_info(client).get("weight_swap") == "live"


# The one rule for a served adapter's name, wherever a name enters (the trainer's
# --lora-adapter-name, a load sent to SGLang, the embedded engine's load): requests name the
# adapter as `lora_path`, so a name every engine accepts is one that no engine reads differently.
ADAPTER_NAME_RULE = "1-128 characters without whitespace"
ADAPTER_NAME_MAX_CHARS = 128


def check_adapter_name(name: Any) -> str | None:
    """What is wrong with `name` as a served LoRA adapter's name, or None when nothing is. The
    answer reads after the name's label ("lora_name " + answer), so each caller says which name."""
    if not isinstance(name, str):
        return f"must be a string of {ADAPTER_NAME_RULE}, got {type(name).__name__} {name!r:.60}"
    if not name:
        return f"must be {ADAPTER_NAME_RULE}, got an empty name"
    if len(name) > ADAPTER_NAME_MAX_CHARS:
        return f"must be {ADAPTER_NAME_RULE}, got {len(name)} characters ({name[:40]!r}...)"
    if any(c.isspace() for c in name):
        return f"must be {ADAPTER_NAME_RULE}, got {name!r}"
    return None


def adapter_versions(info: dict[str, Any]) -> dict[str, int] | None:
    """{adapter name: weight version} from a /get_server_info answer (`lora_adapters`), or None for
    an engine that does not version its adapters (SGLang: its one `weight_version` is the base's).

    A list that is there but unreadable raises ValueError naming what is wrong: read as "no
    versions" it would make the engine look like SGLang, and a wrong version would mislabel every
    sample's staleness."""
    if "lora_adapters" not in info:
        return None
    versions = info["lora_adapters"]
    if not isinstance(versions, dict):
        raise ValueError("/get_server_info's lora_adapters must map adapter names to integer versions, "
                         f"got {type(versions).__name__} {versions!r:.200}")
    for name, version in versions.items():
        if not isinstance(name, str):
            raise ValueError(f"/get_server_info's lora_adapters names an adapter {name!r:.60}, not a string")
        if isinstance(version, bool) or not isinstance(version, int):
            raise ValueError(f"/get_server_info's lora_adapters[{name!r:.60}] is {version!r:.60}, "
                             "not an integer version")
    return dict(versions)


def push_to_engines(urls: list[str], model_path: str | Path, version: int, timeout_s: float = 600.0, *,
                    adapter_name: str | None = None) -> None:
    """Load `model_path` into every engine with pause/continue + flush_cache around the swap
    (engines that swap live get the update alone). With `adapter_name`, `model_path` is a PEFT
    adapter folder loaded under that name beside the base (`load_adapter`): no pause, no
    update_weights_from_disk. Raises on the first engine that fails, naming it."""
    from slime.rollout.sglang_client import SyncSGLangClient

    for url in urls:
        with SyncSGLangClient(url, timeout=timeout_s) as client:
            if adapter_name is not None:
                load_adapter(client, adapter_name, model_path, version)
                continue
            if swaps_live(client):
                client.update_weights_from_disk(str(model_path), weight_version=version)
                continue
            client.pause_generation()
            try:
                client.update_weights_from_disk(str(model_path), weight_version=version)
                client.flush_cache()
            finally:
                client.continue_generation()


def load_adapter(client: Any, name: str, path: str | Path, version: int) -> None:
    """Serve the adapter folder `path` under `name` on one engine, leaving the base weights and the
    other adapters as they are.

    An engine that versions its adapters (its /get_server_info lists `lora_adapters`: the embedded
    engine) gets one POST /load_lora_adapter with `weight_version`; loading a name it serves replaces
    that adapter atomically between two decode steps. SGLang gets no `weight_version` (its request has
    no such field) and refuses a name it already serves ("Failed to load LoRA adapter NAME because it
    is already loaded": LoRAManager.validate_new_adapter, sgl-project/sglang
    python/sglang/srt/lora/lora_manager.py), so a refused name is unloaded and loaded again. That
    leaves a brief window on that engine: the unload waits for the requests already using the old
    adapter to finish, and a request naming the adapter between the unload and the load is refused
    as "not loaded": it fails loudly, never answered by other weights (with train_async, whose next
    rollout generates during the push, such a failure stops the rollout).
    A failure raises SGLangClientError naming the engine and its message."""
    from slime.rollout.sglang_client import SGLangClientError

    if adapter_versions(server_info(client)) is not None:
        client.load_lora_adapter(name, str(path), weight_version=version)
        return
    try:
        client.load_lora_adapter(name, str(path))
        return
    except SGLangClientError as exc:
        if not _name_taken(exc, name):
            raise
    client.unload_lora_adapter(name)
    try:
        client.load_lora_adapter(name, str(path))
    except SGLangClientError as exc:
        raise SGLangClientError(f"{exc} (the previous adapter {name!r} was unloaded from {client.base_url}: "
                                "requests naming it fail until a load succeeds)", url=exc.url, status=exc.status,
                                body=exc.body) from exc


def _name_taken(exc: Any, name: str) -> bool:
    """Was a load refused only because `name` is already served? SGLang's refusal says "already"
    (loaded / exists) and, where its answer lists `loaded_adapters`, the name is among them. Any
    other refusal is a real failure, and the served adapter is left in place."""
    try:
        body = json.loads(exc.body) if exc.body else {}
    except ValueError:
        return False
    if not isinstance(body, dict):
        return False
    message = str(body.get("error_message") or body.get("message") or "")
    loaded = body.get("loaded_adapters")
    return "already" in message and (not isinstance(loaded, dict) or name in loaded)


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
