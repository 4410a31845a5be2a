"""The rollout manager: owns the inference engines and the data source, runs the rollout
function, pushes weights to the engines, and stops its engine processes on shutdown.

Engines by `--rollout-backend`:
  embedded (CPU default): `--rollout-engine-command` child processes (a server speaking SGLang's
      HTTP API), one per engine;
  sglang (GPU default when sglang is importable): `sglang.launch_server` child processes on the
      rollout GPUs (commands from slime.rollout.sglang_launch);
  external: already-running servers at --rollout-external-engine-addrs (not started/stopped).
Runs as a Ray actor with max_concurrency 2 so that train_async can push weights while the next
rollout is being generated.

Engines bind 127.0.0.1 on a one-node cluster and the node's own address on a multi-node one
(`engine_process.engine_bind_host` states the rule). Weights arrive either as a folder this node
can read (`update_weights`) or, from a trainer on another node, as the folder's files through
Ray's object store (`update_weights_from_files`), written here into a private folder first.
"""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import tempfile
import time
from pathlib import Path
from typing import Any

from slime.ray.engine_process import LOOPBACK, EngineProcess, engine_bind_host, engine_program
from slime.rollout.base_types import RolloutFnTrainOutput, normalize_rollout_output
from slime.utils.environment import env_value
from slime.utils.types import Sample


def resolve_backend(args: Any, use_gpu: bool) -> str:
    backend = getattr(args, "rollout_backend", "auto") or "auto"
    if backend == "auto":
        backend = "sglang" if use_gpu and importlib.util.find_spec("sglang") is not None else "embedded"
    return backend


def check_engine_command(args: Any, use_gpu: bool) -> None:
    """Refuse, before any engine starts, a run that would start its own engines (embedded) without
    --rollout-engine-command: slime ships no engine program to fall back on."""
    if not getattr(args, "debug_train_only", False) and resolve_backend(args, use_gpu) == "embedded":
        engine_program(args.rollout_engine_command)


def num_engines(args: Any, use_gpu: bool) -> int:
    if not use_gpu:
        return max(1, int(getattr(args, "rollout_num_engines", 0) or 1))
    gpus = int(args.rollout_num_gpus or 1)
    return max(1, gpus // max(1, int(args.rollout_num_gpus_per_engine)))


class RolloutManager:
    def __init__(self, config: Any, model_path: str, use_gpu: bool = False, log_dir: str | None = None,
                 data_source_state: dict[str, Any] | None = None, weight_version: int = 0) -> None:
        self.config = config
        self.args = config.to_namespace()
        self.use_gpu = use_gpu
        self.model_path = str(model_path)
        self.weight_version = weight_version
        # --lora-adapter-name: the trained adapter is served under this name beside the base
        self.adapter_name: str | None = getattr(self.args, "lora_adapter_name", None)
        self.engines: list[EngineProcess] = []
        self.sglang_handles: list[Any] = []
        self.backend = resolve_backend(self.args, use_gpu)
        self.log_dir = Path(log_dir or self.args.log_dir)
        self.log_dir.mkdir(parents=True, exist_ok=True)
        self.data_source = self._make_data_source()
        if data_source_state and self.data_source is not None:
            self.data_source.load_state_dict(data_source_state)
        self.urls: list[str] = []
        self.engine_host = LOOPBACK
        self.received_root: Path | None = None  # weights pushed from another node land under it
        self.received: list[Path] = []
        # Loaded now, so that an unreadable eval file or an eval function that cannot evaluate stops
        # the run at setup, not at its first evaluation step.
        self.eval_source, self.eval_fn = self._make_evaluation()

    # ------------------------------------------------------------------ engines
    def start_engines(self, gpu_ids: list[str] | None = None) -> list[str]:
        """Start (or attach to) the engines. `gpu_ids`: the GPUs the engines may use (colocated:
        the training actors' GPUs); default: the GPUs Ray assigned to this actor."""
        if gpu_ids is None and self.use_gpu:
            import ray

            gpu_ids = [str(int(g)) for g in ray.get_gpu_ids()]
        n = num_engines(self.args, self.use_gpu)
        per = max(1, int(self.args.rollout_num_gpus_per_engine))
        if self.backend != "external":
            self.engine_host = self._bind_host()

        def engine_env(i: int) -> dict[str, str]:
            if not gpu_ids:
                return {}
            return {"CUDA_VISIBLE_DEVICES": ",".join(gpu_ids[(i * per) % len(gpu_ids):][:per])}

        if self.backend == "external":
            addrs = self.args.rollout_external_engine_addrs
            self.urls = [a if a.startswith("http") else f"http://{a}" for a in addrs]
        elif self.backend == "sglang":
            from slime.ray.engine_process import free_port
            from slime.rollout.sglang_launch import launch_planned_engines, plan_sglang_rollout

            # Every --sglang-* flag (mem fraction, context length, parsers, passthrough) goes
            # through the one planner, so none is dropped on the way to sglang.launch_server.
            host = self.engine_host
            plan = plan_sglang_rollout(self.args, self._engine_model_path(), host=host, ports=[free_port(host) for _ in range(n)],
                                       gpu_ids=gpu_ids or None, weight_version=self.weight_version)
            self.sglang_handles = launch_planned_engines(plan, log_dir=str(self.log_dir))
            self.urls = [h.base_url for h in self.sglang_handles]
        else:
            for i in range(n):
                eng = EngineProcess(model_path=self._engine_model_path(), host=self.engine_host,
                                    log_path=self.log_dir / f"engine_{i}.log",
                                    dtype="bfloat16" if getattr(self.args, "bf16", False) else "float32",
                                    device="cuda" if gpu_ids else None, extra_env=engine_env(i),
                                    engine_command=self.args.rollout_engine_command,
                                    max_batch_size=max(8, int(self.args.rollout_batch_size) * int(self.args.n_samples_per_prompt)))
                self.engines.append(eng)
                eng.start()
                self.urls.append(eng.url)
        if self.weight_version and self.backend == "embedded" and self.adapter_name is None:
            # the embedded server starts at version 0: re-announce the resumed version so that
            # samples report it (staleness stays meaningful across a resume); a named adapter
            # carries its own version, loaded by the driver's first push
            from slime.utils.weight_sync import push_to_engines

            push_to_engines(self.urls, self.model_path, self.weight_version)
        self.args.rollout_engine_urls = list(self.urls)
        if self.urls:
            host, port = self.urls[0].split("//", 1)[1].rsplit(":", 1)
            self.args.sglang_router_ip, self.args.sglang_router_port = host, int(port)
        return list(self.urls)

    def _engine_model_path(self) -> str:
        """What engines slime starts load: with a named adapter always the base model (a resumed
        checkpoint holds the adapter, which is loaded by name, never merged into what everyone is
        served); otherwise the run's model (the checkpoint when resuming)."""
        return str(self.args.hf_checkpoint) if self.adapter_name is not None else self.model_path

    def _bind_host(self) -> str:
        import ray

        from slime.rollout.sglang_client import engine_api_key

        mode = getattr(self.args, "rollout_engine_bind", "auto") or "auto"
        if not ray.is_initialized():  # in-process runs (torchrun, local): one node unless told
            return engine_bind_host(mode, ray.util.get_node_ip_address() if mode == "node" else LOOPBACK, 1,
                                    engine_api_key())
        nodes = sum(1 for n in ray.nodes() if n.get("Alive"))
        return engine_bind_host(mode, ray.util.get_node_ip_address(), nodes, engine_api_key())

    def engine_pids(self) -> list[int]:
        return [e.pid for e in [*self.engines, *self.sglang_handles] if e.pid is not None]

    def engine_urls(self) -> list[str]:
        return list(self.urls)

    # ------------------------------------------------------------------ data
    def _make_data_source(self):
        path = getattr(self.args, "data_source_path", None)
        if path:
            from slime.utils.plugins import load_plugin

            cls = load_plugin(path, kind="data_source")
            return cls(self.args)
        if not getattr(self.args, "prompt_data", None):
            return None
        from slime.rollout.data_source import DataSourceConfig, RolloutDataSource

        return RolloutDataSource(DataSourceConfig.from_args(self.args), self._prompt_tokenizer())

    def _prompt_tokenizer(self) -> Any:
        from slime.backends.fsdp.model import load_tokenizer

        return load_tokenizer(self.model_path) if getattr(self.args, "apply_chat_template", False) else None

    def _make_evaluation(self) -> tuple[Any, Any]:
        from slime.rollout.data_source import EvalDataSource
        from slime.rollout.evaluation import load_eval_fn

        if not getattr(self.args, "eval_prompt_data", None):
            return None, None
        return EvalDataSource.from_args(self.args, self._prompt_tokenizer()), load_eval_fn(self.args)

    def num_prompts(self) -> int:
        return len(getattr(self.data_source, "prompts", []) or [])

    def data_source_state(self) -> dict[str, Any]:
        if self.data_source is None or not hasattr(self.data_source, "state_dict"):
            return {}
        return self.data_source.state_dict()

    # ------------------------------------------------------------------ rollout
    def generate(self, rollout_id: int) -> tuple[list[Sample], dict[str, Any]]:
        """Run the rollout function; returns the flat sample list (groups contiguous) + metrics."""
        from slime.rollout.plugins_io import load_optional
        from slime.rollout.staleness import fill_unreported_versions
        from slime.utils.plugins import load_rollout_fn

        t0 = time.perf_counter()
        debug_load = getattr(self.args, "load_debug_rollout_data", None)
        if debug_load:
            samples = load_rollout_data(debug_load, rollout_id)
            return samples, {"rollout/time": time.perf_counter() - t0}
        if getattr(self.args, "debug_train_only", False):
            raise ValueError("--debug-train-only trains on saved rollouts: pass --load-debug-rollout-data")
        if self.data_source is None and self.args.rollout_function_path.startswith("slime.rollout.sglang_rollout"):
            raise ValueError("the default rollout function needs --prompt-data (or --data-source-path)")
        fn = load_rollout_fn(self.args.rollout_function_path, self.args)
        start_version = self.weight_version
        out: RolloutFnTrainOutput = normalize_rollout_output(fn(rollout_id, self.data_source, evaluation=False))
        metrics = dict(out.metrics)
        fill_unreported_versions([s for g in out.samples for s in g], start_version)
        sample_filter = load_optional(self.args, "rollout_sample_filter_path", "sample_filter")
        if sample_filter is not None:
            sample_filter(out.samples)
            metrics["rollout/removed_samples"] = sum(s.remove_sample for g in out.samples for s in g)
        samples = [s for g in out.samples for s in g]
        metrics.setdefault("rollout/time", time.perf_counter() - t0)
        save = getattr(self.args, "save_debug_rollout_data", None)
        if save:
            save_rollout_data(save, rollout_id, samples)
        return samples, metrics

    def evaluate(self, rollout_id: int) -> dict[str, float]:
        """Run the eval function on the eval datasets with the engines' current weights; returns
        `eval/<name>/reward` and `eval/<name>/samples` (the samples stay here: never trained on)."""
        from slime.rollout.evaluation import eval_metrics

        if self.eval_fn is None:
            raise ValueError("evaluation needs --eval-prompt-data NAME PATH and --eval-interval N")
        out = self.eval_fn(rollout_id, self.eval_source)
        reward_key = getattr(self.args, "eval_reward_key", None) or getattr(self.args, "reward_key", None)
        return eval_metrics(out, self.eval_source.names, reward_key)

    # ------------------------------------------------------------------ weights
    def update_weights(self, model_path: str, version: int) -> int:
        from slime.utils.weight_sync import push_to_engines

        push_to_engines(self.urls, model_path, version, adapter_name=self.adapter_name)
        self.weight_version = version
        return version

    def update_weights_from_files(self, files: dict[str, bytes], version: int) -> dict[str, Any]:
        """Weights from a trainer on another node: write `files` (relative path -> content, the
        folder rank 0 saved) into a private folder on this node, load it into every engine, and
        drop the previous one. Returns what was done, including the versions the engines serve now."""
        from slime.rollout.sglang_client import SyncSGLangClient
        from slime.utils.weight_sync import push_to_engines

        if self.received_root is None:
            parent = env_value("SLIME_WEIGHT_SYNC_DIR")
            if parent:
                Path(parent).mkdir(parents=True, exist_ok=True)
            self.received_root = Path(tempfile.mkdtemp(prefix="slime-weights-recv-", dir=parent))
        folder = self.received_root / f"v{version}"
        size = write_weight_files(files, folder)
        push_to_engines(self.urls, folder, version, adapter_name=self.adapter_name)
        self.weight_version = version
        for old in self.received:
            shutil.rmtree(old, ignore_errors=True)
        self.received = [folder]
        served = []
        for url in self.urls:
            with SyncSGLangClient(url, timeout=60) as client:
                served.append(served_version(client, self.adapter_name))
        return {"folder": str(folder), "files": len(files), "bytes": size, "served_versions": served}

    def offload(self) -> None:
        """Colocated GPU mode: SGLang's /release_memory_occupation while the trainer runs."""
        self._memory_call("/release_memory_occupation")

    def onload(self) -> None:
        self._memory_call("/resume_memory_occupation")

    def _memory_call(self, path: str) -> None:
        import httpx

        from slime.rollout.sglang_client import auth_headers

        for h in self.sglang_handles:  # the embedded engine keeps its (CPU) memory: nothing to do
            httpx.post(h.base_url + path, json={}, headers=auth_headers(), timeout=300).raise_for_status()

    def shutdown(self) -> None:
        close = getattr(self.data_source, "close", None)
        if close is not None:
            close()
            self.data_source = None
        for e in self.engines:
            e.stop()
        self.engines = []
        for h in self.sglang_handles:
            h.stop()  # the launched server's process group, by PID
        self.sglang_handles = []
        if self.received_root is not None:
            shutil.rmtree(self.received_root, ignore_errors=True)
            self.received_root = None
            self.received = []


def served_version(client: Any, adapter_name: str | None) -> str:
    """The version an engine serves the policy at: its weight version, or with a named adapter that
    adapter's version (/get_server_info's lora_adapters[NAME]). SGLang versions only its base, so
    for it the answer says the adapter's version is not reported rather than give the base's."""
    from slime.utils.weight_sync import adapter_versions, server_info

    if adapter_name is None:
        return str(client.get_weight_version())
    versions = adapter_versions(server_info(client))
    if versions is None:
        return f"{adapter_name}: not reported (the engine versions only its base)"
    if adapter_name not in versions:
        raise RuntimeError(f"engine {client.base_url} does not serve adapter {adapter_name!r} after the push "
                           f"(it serves {sorted(versions)})")
    return str(versions[adapter_name])


def write_weight_files(files: dict[str, bytes], folder: str | Path) -> int:
    """Recreate a saved weights folder from its files (relative path -> bytes); returns the bytes
    written. A path that would leave `folder` is refused: the files come from another process."""
    if not files:
        raise ValueError("no weight files arrived (rank 0 saved nothing)")
    folder = Path(folder)
    if folder.exists():
        shutil.rmtree(folder)
    folder.mkdir(parents=True)
    root = folder.resolve()
    size = 0
    for rel, data in files.items():
        target = (folder / rel).resolve()
        if os.path.isabs(rel) or not target.is_relative_to(root) or target == root:
            raise ValueError(f"weight file {rel!r} is not a path inside the weights folder")
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(data)
        size += len(data)
    return size


def _rollout_path(template: str, rollout_id: int) -> Path:
    return Path(template.format(rollout_id=rollout_id) if "{rollout_id}" in template
                else os.path.join(template, f"rollout_{rollout_id}.jsonl"))


def save_rollout_data(template: str, rollout_id: int, samples: list[Sample]) -> Path:
    path = _rollout_path(template, rollout_id)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(path.suffix + ".tmp")
    with tmp.open("w") as fh:
        for s in samples:
            fh.write(json.dumps(s.to_dict(), default=str) + "\n")
    os.replace(tmp, path)
    return path


def load_rollout_data(template: str, rollout_id: int) -> list[Sample]:
    path = _rollout_path(template, rollout_id)
    if not path.is_file():
        raise FileNotFoundError(f"--load-debug-rollout-data: {path} does not exist")
    return [Sample.from_dict(json.loads(line)) for line in path.read_text().splitlines() if line.strip()]
