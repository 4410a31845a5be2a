"""The rollout side's view of the inference engines: a list of SGLang-protocol addresses.

Every HTTP call goes through the one SGLang-protocol client (`slime.rollout.sglang_client`), so SGLang (GPU) and the embedded
engine (CPU) are driven by one code path.
"""

from __future__ import annotations

from typing import Any


def engine_urls_from_args(args: Any) -> list[str]:
    urls = list(getattr(args, "rollout_engine_urls", None) or [])
    if not urls:
        addrs = getattr(args, "rollout_external_engine_addrs", None) or []
        urls = [a if a.startswith("http") else f"http://{a}" for a in addrs]
    if not urls and getattr(args, "sglang_router_ip", None):
        urls = [f"http://{args.sglang_router_ip}:{args.sglang_router_port}"]
    if not urls:
        raise ValueError("no inference engine address: the rollout manager sets args.rollout_engine_urls; "
                         "standalone use needs --rollout-backend external --rollout-external-engine-addrs HOST:PORT")
    return urls


def sampling_params_from_args(args: Any, evaluation: bool = False) -> dict[str, Any]:
    max_new = getattr(args, "rollout_max_response_len", None) or 128
    temperature = float(getattr(args, "rollout_temperature", 1.0))
    if evaluation:
        max_new = getattr(args, "eval_max_response_len", None) or max_new
        t = getattr(args, "eval_temperature", None)
        temperature = float(t) if t is not None else temperature
    params: dict[str, Any] = {
        "max_new_tokens": int(max_new),
        "temperature": temperature,
        "top_p": float(getattr(args, "rollout_top_p", 1.0)),
        "top_k": int(getattr(args, "rollout_top_k", -1)),
        "skip_special_tokens": bool(getattr(args, "rollout_skip_special_tokens", False)),
        "no_stop_trim": True,  # keep the stop string/token in the response, as slime does
    }
    if getattr(args, "rollout_stop", None):
        params["stop"] = list(args.rollout_stop)
    if getattr(args, "rollout_stop_token_ids", None):
        params["stop_token_ids"] = list(args.rollout_stop_token_ids)
    return params


class EngineClients:
    """Async clients for N engines; create and close them inside the event loop that uses them.

    adapter_name (--lora-adapter-name): the policy is the LoRA adapter the engines serve under this
    name, so every /generate names it (`lora_path`, SGLang's per-request adapter field); without
    it the request would be answered by the base model."""

    def __init__(self, urls: list[str], timeout_s: float = 600.0, *, adapter_name: str | None = None) -> None:
        from slime.rollout.sglang_client import SGLangClient

        if not urls:
            raise ValueError("EngineClients needs at least one engine URL")
        self.urls = list(urls)
        self.clients = [SGLangClient(u, timeout=timeout_s) for u in self.urls]
        self.adapter_name = adapter_name
        self._versions_adapters: dict[int, bool] = {}  # engine index -> answer of reports_adapter_versions

    @classmethod
    def from_args(cls, args: Any) -> EngineClients:
        return cls(engine_urls_from_args(args), adapter_name=getattr(args, "lora_adapter_name", None))

    @property
    def num_engines(self) -> int:
        return len(self.clients)

    async def generate(self, engine_index: int, input_ids: list[int], sampling_params: dict[str, Any]) -> dict[str, Any]:
        client = self.clients[engine_index % len(self.clients)]
        body: dict[str, Any] = {"input_ids": input_ids, "sampling_params": sampling_params, "return_logprob": True}
        if self.adapter_name is not None:
            body["lora_path"] = self.adapter_name
        out = await client.generate(body)
        if isinstance(out, list):
            raise RuntimeError("engine returned a batch for a single /generate request")
        return out

    async def reports_adapter_versions(self, engine_index: int) -> bool:
        """Does this engine version its adapters (its /get_server_info lists `lora_adapters`)? Such an
        engine (the embedded one) answers a request naming an adapter with that adapter's version;
        SGLang answers with its base weights' version. Asked once per engine (concurrent first calls
        may each ask; the answers agree)."""
        from slime.rollout.sglang_client import SGLangClientError
        from slime.utils.weight_sync import adapter_versions

        i = engine_index % len(self.clients)
        if i not in self._versions_adapters:
            try:
                info = await self.clients[i].get_server_info()
            except SGLangClientError:
                info = {}  # as weight_sync.server_info: a server that does not say is treated as SGLang
            self._versions_adapters[i] = isinstance(info, dict) and adapter_versions(info) is not None
        return self._versions_adapters[i]

    async def aclose(self) -> None:
        for c in self.clients:
            await c.aclose()
