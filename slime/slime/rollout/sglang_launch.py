"""Trainer flags -> SGLang rollout engines (the GPU production path).

Maps slime's rollout flags onto SGLang's launch commands
(`slime.rollout.sglang_command.build_sglang_launch_command` / `build_router_command`):

    --rollout-num-gpus N --rollout-num-gpus-per-engine K   -> N/K engines, each `--tp-size K`
    --rollout-num-engines E                                 -> E engines (overrides N/K)
    --sglang-mem-fraction-static F                          -> `--mem-fraction-static F`
    --sglang-context-length L                               -> `--context-length L`
    --sglang-reasoning-parser P / --sglang-tool-call-parser P
    --sglang-<any other name> V                             -> `--<name> V` (passed through)
    --sglang-router-ip/--sglang-router-port                 -> use that router; else with >1
                                                               engine launch `sglang_router`
    --bf16                                                  -> `--dtype bfloat16` (same dtype
                                                               as training) unless --sglang-dtype

GPU placement: engine i gets CUDA_VISIBLE_DEVICES = its K consecutive GPUs of the rollout GPU
list (`ROLLOUT_GPUS` as in the reference scripts, else the GPUs after the training ones, or
the training ones with --colocate). Under Ray the same lists become the engines' bundles.
"""

from __future__ import annotations

import importlib.util
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from slime.ray.engine_process import EngineProcess
from slime.rollout.sglang_command import SGLangLaunchConfig, build_router_command, build_sglang_launch_command
from slime.utils.environment import env_value

# --sglang-<name> values that are fields of SGLangLaunchConfig, with their types
_TYPED_FIELDS: dict[str, type] = {
    "mem_fraction_static": float,
    "context_length": int,
    "reasoning_parser": str,
    "tool_call_parser": str,
    "served_model_name": str,
    "dtype": str,
    "dp_size": int,
}
# names the mapping sets itself; given as --sglang-<name> they would conflict
_RESERVED = {"model_path", "host", "port", "tp_size", "tp"}


@dataclass(frozen=True)
class EngineLaunch:
    config: SGLangLaunchConfig
    command: list[str]
    env: dict[str, str]  # CUDA_VISIBLE_DEVICES for this engine

    @property
    def url(self) -> str:
        return f"http://{self.config.host}:{self.config.port}"


@dataclass(frozen=True)
class RolloutPlan:
    engines: list[EngineLaunch]
    router_command: list[str] | None  # None: one engine, or an existing router is used
    router_url: str | None

    @property
    def entry_url(self) -> str:
        """Where the rollout sends /generate (the router when there is one)."""
        return self.router_url or self.engines[0].url


def _get(args: Any, name: str, default: Any = None) -> Any:
    value = getattr(args, name, None)
    return default if value is None else value


def rollout_gpu_ids(args: Any, env: Mapping[str, str] | None = None) -> list[int]:
    total = _num_rollout_gpus(args)
    listed = env_value("ROLLOUT_GPUS", env)
    if listed:
        ids = [int(x) for x in listed.split(",") if x.strip()]
        if len(ids) < total:
            raise ValueError(f"ROLLOUT_GPUS lists {len(ids)} GPUs but the rollout needs {total}")
        return ids[:total]
    train = int(_get(args, "actor_num_gpus_per_node", 1))
    first = 0 if _get(args, "colocate", False) else train
    return list(range(first, first + total))


def _num_rollout_gpus(args: Any) -> int:
    per = int(_get(args, "rollout_num_gpus_per_engine", 1))
    engines = _get(args, "rollout_num_engines")
    if engines is not None:
        return int(engines) * per
    total = int(_get(args, "rollout_num_gpus", per))
    if total % per:
        raise ValueError(f"--rollout-num-gpus {total} is not divisible by --rollout-num-gpus-per-engine {per}")
    return max(total, per)


def _launch_fields(args: Any) -> tuple[dict[str, Any], tuple[str, ...]]:
    sglang_args = dict(_get(args, "sglang_args", {}) or {})
    for name in ("mem_fraction_static", "context_length", "reasoning_parser", "tool_call_parser"):
        flat = getattr(args, f"sglang_{name}", None)  # also accept them as explicit fields
        if flat is not None:
            sglang_args.setdefault(name, flat)
    fields: dict[str, Any] = {}
    extra: list[str] = []
    for name, value in sglang_args.items():
        if name in _RESERVED:
            raise ValueError(f"--sglang-{name.replace('_', '-')} is set by the trainer "
                             "(use --rollout-num-gpus-per-engine for the TP size)")
        if name in _TYPED_FIELDS:
            try:
                fields[name] = _TYPED_FIELDS[name](value)
            except (TypeError, ValueError):
                raise ValueError(f"--sglang-{name.replace('_', '-')}: invalid value {value!r}") from None
        elif name == "trust_remote_code":
            fields[name] = value in (True, "true", "True", "1")
        else:
            flag = "--" + name.replace("_", "-")
            extra += [flag] if value is True else [flag, str(value)]
    if "dtype" not in fields and _get(args, "bf16", False):
        fields["dtype"] = "bfloat16"
    return fields, tuple(extra)


def plan_sglang_rollout(args: Any, model_path: str, *, host: str = "127.0.0.1", base_port: int = 30000,
                        ports: list[int] | None = None, router_port: int | None = None,
                        gpu_ids: list[int | str] | None = None, weight_version: int = 0,
                        env: Mapping[str, str] | None = None) -> RolloutPlan:
    """Launch commands (and GPU lists) for all SGLang engines of a run, plus the router.

    gpu_ids: the rollout GPUs when the caller knows them (e.g. `ray.get_gpu_ids()` of the
    rollout actor); default: `ROLLOUT_GPUS` or the GPUs after the training ones.
    ports: one port per engine (default base_port, base_port + 1, ...).
    """
    per = int(_get(args, "rollout_num_gpus_per_engine", 1))
    gpus = [str(g) for g in gpu_ids] if gpu_ids else [str(g) for g in rollout_gpu_ids(args, env)]
    n_engines = max(1, len(gpus) // per)
    if ports is not None and len(ports) < n_engines:
        raise ValueError(f"{n_engines} engines need {n_engines} ports, got {len(ports)}")
    fields, extra = _launch_fields(args)
    if _get(args, "colocate", False):
        # engines share the devices with the (offloaded) trainer: leave it room by default
        fields.setdefault("mem_fraction_static", 0.4)
    engines = []
    for i in range(n_engines):
        cfg = SGLangLaunchConfig(model_path=str(model_path), host=host,
                                 port=ports[i] if ports is not None else base_port + i, tp_size=per,
                                 weight_version=str(weight_version), extra_args=extra, **fields)
        mine = gpus[i * per : (i + 1) * per]
        engines.append(EngineLaunch(cfg, build_sglang_launch_command(cfg),
                                    {"CUDA_VISIBLE_DEVICES": ",".join(str(g) for g in mine)}))
    router_ip, r_port = _get(args, "sglang_router_ip"), _get(args, "sglang_router_port")
    if router_ip:
        if not r_port:
            raise ValueError("--sglang-router-ip needs --sglang-router-port")
        return RolloutPlan(engines, None, f"http://{router_ip}:{r_port}")
    if n_engines > 1:
        port = router_port or base_port + n_engines
        cmd = build_router_command([e.url for e in engines], host=host, port=port)
        return RolloutPlan(engines, cmd, f"http://{host}:{port}")
    return RolloutPlan(engines, None, None)


def launch_planned_engines(plan: RolloutPlan, *, startup_timeout: float = 900.0,
                           launch_command: Callable[[EngineLaunch], list[str]] | None = None,
                           log_dir: str | None = None) -> list[EngineProcess]:
    """Start every engine of `plan` (each with its CUDA_VISIBLE_DEVICES) as a child process and
    wait for its /health; on any failure the ones already started are stopped.

    `launch_command(engine) -> argv` replaces `sglang.launch_server` (CI starts the embedded
    engine's SGLang-compatible server this way). The router, if planned, is the caller's.
    """
    if launch_command is None and importlib.util.find_spec("sglang") is None:
        raise RuntimeError("--rollout-backend sglang: SGLang is not installed in this Python (pip install -r "
                           "requirements-gpu.txt, needs CUDA GPUs); use --rollout-backend embedded or external")
    started: list[EngineProcess] = []
    try:
        for i, engine in enumerate(plan.engines):
            argv = launch_command(engine) if launch_command else engine.command
            proc = EngineProcess(model_path=engine.config.model_path, host=engine.config.host, port=engine.config.port,
                                 argv=argv, extra_env=dict(engine.env),
                                 log_path=Path(log_dir) / f"sglang_{i}.log" if log_dir else None)
            started.append(proc)
            proc.start(timeout_s=startup_timeout)
    except BaseException:
        for proc in started:
            proc.stop()
        raise
    return started
