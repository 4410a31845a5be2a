"""What a running server holds: its config, the engine, the optional RL observer."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

from openclaw.engines.base import Engine
from openclaw.server.config import ServerConfig
from openclaw.server.hooks import TurnObserver


@dataclass
class ServerState:
    config: ServerConfig
    engine: Engine
    served_model_name: str
    observer: TurnObserver | None = None
    started_at: float = field(default_factory=time.time)

    @property
    def tokenizer(self) -> Any:
        return self.engine.tokenizer
