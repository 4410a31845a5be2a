"""Server configuration: parsed once from flags + environment into typed dataclasses.

Precedence: command-line flag > environment variable > default. Everything downstream
(app factory, engine loading, banner) reads these objects, never `os.environ` or argv.
"""

from __future__ import annotations

import argparse
import ipaddress
import json
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

BACKENDS = ("hf", "sglang", "vllm")
DTYPES = ("auto", "float32", "bfloat16", "float16")
# Unknown flags with these prefixes belong to the RL intercept / judge and are passed through.
PASSTHROUGH_PREFIXES = ("--rl-", "--session-", "--judge-", "--num-judge-", "--prm-", "--majority-vote-",
                        "--custom-rm-", "--hint-")


class ConfigError(ValueError):
    """A configuration the server refuses to start with (message is shown to the user)."""


@dataclass(frozen=True)
class RLConfig:
    """What `--enable-rl-intercept` and its companion flags configure (read by openclaw.intercept)."""

    enabled: bool = False
    buffer_dir: Path = Path("./rl_buffer")
    buffer_max_mb: float | None = None
    session_idle_timeout: float | None = None
    # Every other pass-through flag (--rl-*, --session-*, --judge-*, --prm-*, --majority-vote-*, ...),
    # key without dashes, '-' -> '_'.
    # A bare flag is True; otherwise the string value (the intercept decides its type).
    options: dict[str, str | bool] = field(default_factory=dict)


@dataclass(frozen=True)
class EngineConfig:
    backend: str = "hf"
    model_path: str | None = None  # None: the embedded default (resolved at load time)
    dtype: str = "auto"
    device: str = "auto"
    max_batch_size: int = 16
    # sglang / vllm: attach to a running server at this URL instead of launching one.
    engine_url: str | None = None
    tp_size: int = 1
    mem_fraction_static: float | None = None
    context_length: int | None = None
    reasoning_parser: str | None = None
    tool_call_parser: str | None = None


@dataclass(frozen=True)
class ServerConfig:
    host: str = "127.0.0.1"
    port: int = 8000
    api_key: str | None = None
    served_model_name: str | None = None  # None: derived from the model folder
    max_body_mb: float = 32.0
    default_max_tokens: int = 2048
    log_level: str = "info"
    engine: EngineConfig = field(default_factory=EngineConfig)
    rl: RLConfig = field(default_factory=RLConfig)

    @property
    def max_body_bytes(self) -> int:
        return int(self.max_body_mb * 1024 * 1024)

    def base_url(self, port: int | None = None) -> str:
        """The URL clients use (a wildcard bind is reached through loopback)."""
        host = self.host
        if host in ("0.0.0.0", "::", ""):
            host = "127.0.0.1"
        if ":" in host:
            host = f"[{host}]"
        return f"http://{host}:{port or self.port}"


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False  # a hostname other than localhost may resolve to anything: treat as public


def _env_int(env: Mapping[str, str], name: str, default: int) -> int:
    raw = env.get(name)
    if raw is None or raw == "":
        return default
    try:
        return int(raw)
    except ValueError as exc:
        raise ConfigError(f"environment variable {name}={raw!r} is not an integer") from exc


def build_parser(env: Mapping[str, str]) -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python -m openclaw.server",
        allow_abbrev=False,  # an abbreviation must not swallow a pass-through --rl-*/--judge-* flag
        description="Serve a model as an OpenAI-compatible API (plus SGLang's native endpoints).",
    )
    p.add_argument("--model-path", default=env.get("BASE_MODEL_PATH") or env.get("MODEL_PATH") or None,
                   help="HF model folder (env BASE_MODEL_PATH / MODEL_PATH; default: embedded SmolLM2-135M-Instruct)")
    p.add_argument("--host", default=env.get("OPENCLAW_HOST") or "127.0.0.1",
                   help="bind address (env OPENCLAW_HOST; default 127.0.0.1)")
    p.add_argument("--port", type=int, default=_env_int(env, "OPENCLAW_PORT", 8000),
                   help="port (env OPENCLAW_PORT; default 8000)")
    p.add_argument("--backend", choices=BACKENDS, default="hf",
                   help="hf: embedded transformers engine; sglang: launch/attach SGLang; vllm: attach to vLLM")
    p.add_argument("--api-key", default=env.get("OPENCLAW_API_KEY") or None,
                   help="required bearer key (env OPENCLAW_API_KEY); mandatory on a non-loopback host")
    p.add_argument("--served-model-name", default=None, help="model id reported by the API (default: model folder name)")
    p.add_argument("--dtype", choices=DTYPES, default="auto")
    p.add_argument("--device", default="auto", help="hf backend: auto | cpu | cuda | cuda:N")
    p.add_argument("--max-batch-size", "--max-running-requests", dest="max_batch_size", type=int, default=16, help="hf backend: max sequences decoded together")
    p.add_argument("--max-body-mb", type=float, default=32.0, help="reject request bodies larger than this (413)")
    p.add_argument("--default-max-tokens", type=int, default=2048,
                   help="completion length when the request sets no max_tokens (capped by the context)")
    p.add_argument("--engine-url", default=None, help="sglang/vllm: attach to a running server instead of launching")
    p.add_argument("--tp-size", "--tp", type=int, default=1, dest="tp_size")
    p.add_argument("--mem-fraction-static", type=float, default=None)
    p.add_argument("--context-length", type=int, default=None)
    p.add_argument("--reasoning-parser", default=None)
    p.add_argument("--tool-call-parser", default=None)
    p.add_argument("--log-level", default="info", choices=("critical", "error", "warning", "info", "debug"))
    p.add_argument("--enable-rl-intercept", action="store_true",
                   help="capture conversations into the trajectory buffer (openclaw.intercept)")
    p.add_argument("--rl-buffer-dir", default=env.get("RL_BUFFER_DIR") or "./rl_buffer")
    p.add_argument("--rl-buffer-max-mb", type=float, default=None)
    p.add_argument("--session-idle-timeout", type=float, default=None)
    return p


def _parse_passthrough(extra: Sequence[str]) -> dict[str, str | bool]:
    """`--rl-foo 1 --judge-bar --session-x=y` -> {"rl_foo": "1", "judge_bar": True, "session_x": "y"}."""
    options: dict[str, str | bool] = {}
    i = 0
    while i < len(extra):
        tok = extra[i]
        if not tok.startswith(PASSTHROUGH_PREFIXES):
            raise ConfigError(f"unrecognized argument: {tok}")
        name, eq, value = tok[2:].partition("=")
        key = name.replace("-", "_")
        if eq:
            options[key] = value
            i += 1
        elif i + 1 < len(extra) and not extra[i + 1].startswith("--"):
            options[key] = extra[i + 1]
            i += 2
        else:
            options[key] = True
            i += 1
    return options


def parse_config(argv: Sequence[str] | None = None, env: Mapping[str, str] | None = None) -> ServerConfig:
    """Parse flags + env once. Raises ConfigError for a configuration that must not start."""
    env = os.environ if env is None else env
    parser = build_parser(env)
    args, extra = parser.parse_known_args(list(argv) if argv is not None else None)
    options = _parse_passthrough(extra)
    if args.port < 0 or args.port > 65535:
        raise ConfigError(f"--port {args.port} is out of range 0..65535")
    if args.max_batch_size < 1:
        raise ConfigError("--max-batch-size must be >= 1")
    if args.max_body_mb <= 0:
        raise ConfigError("--max-body-mb must be > 0")
    config = ServerConfig(
        host=args.host,
        port=args.port,
        api_key=args.api_key,
        served_model_name=args.served_model_name,
        max_body_mb=args.max_body_mb,
        default_max_tokens=args.default_max_tokens,
        log_level=args.log_level,
        engine=EngineConfig(
            backend=args.backend, model_path=args.model_path, dtype=args.dtype, device=args.device,
            max_batch_size=args.max_batch_size, engine_url=args.engine_url, tp_size=args.tp_size,
            mem_fraction_static=args.mem_fraction_static, context_length=args.context_length,
            reasoning_parser=args.reasoning_parser, tool_call_parser=args.tool_call_parser,
        ),
        rl=RLConfig(
            enabled=args.enable_rl_intercept, buffer_dir=Path(args.rl_buffer_dir),
            buffer_max_mb=args.rl_buffer_max_mb, session_idle_timeout=args.session_idle_timeout,
            options=options,
        ),
    )
    check_security(config)
    return config


def check_security(config: ServerConfig) -> None:
    """Refuse to expose an unauthenticated model to the network."""
    if not is_loopback(config.host) and not config.api_key:
        raise ConfigError(
            f"refusing to bind {config.host}:{config.port} without an API key: anyone on the network "
            "could use the model (and write to the RL buffer). Set --api-key or OPENCLAW_API_KEY, "
            "or bind 127.0.0.1."
        )


def default_served_model_name(model_path: str) -> str:
    """The model folder's name; the embedded model reports its upstream name."""
    path = Path(model_path)
    source = path / "openclaw_source.json"
    if source.is_file():
        try:
            name = json.loads(source.read_text()).get("name")
            if isinstance(name, str) and name:
                return name
        except (OSError, ValueError):
            pass
    return path.name or str(model_path)
