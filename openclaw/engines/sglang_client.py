"""The SGLang-protocol client, as the runtime uses it.

The client itself lives in the trainer (`slime.rollout.sglang_client`: slime never imports
openclaw, so what both need lives there). This module adds the one call that speaks openclaw's
engine types, `generate_request` (GenerationRequest in, GenerationResult out), and re-exports the
rest under the names the runtime has always used.
"""

from __future__ import annotations

from slime.rollout.sglang_client import SGLangClient as _BaseClient
from slime.rollout.sglang_client import SGLangClientError
from slime.rollout.sglang_client import SyncSGLangClient as _BaseSyncClient

from openclaw.engines.base import GenerationRequest, GenerationResult
from openclaw.engines.sglang_protocol import request_to_body, result_from_sglang

__all__ = ["SGLangClient", "SGLangClientError", "SyncSGLangClient"]


class SGLangClient(_BaseClient):
    """Async client for one SGLang-compatible server, plus openclaw's request type."""

    async def generate_request(self, req: GenerationRequest) -> GenerationResult:
        """Run one engine request through /generate and convert the answer to a GenerationResult."""
        out = await self.generate(request_to_body(req))
        return result_from_sglang(out, tuple(req.input_ids))


class SyncSGLangClient(_BaseSyncClient):
    """Blocking wrapper over `SGLangClient` (same methods, plus `generate_request`)."""

    client_class = SGLangClient

    def generate_request(self, req: GenerationRequest) -> GenerationResult:
        return self._run(self._client.generate_request(req))
