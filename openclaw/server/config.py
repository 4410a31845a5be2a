"""Server configuration: parsed once from flags + environment into typed dataclasses.

Precedence: command-line flag > environment variable > default. Everything downstream
(app factory, engine loading, banner) reads these objects, never `os.environ` or argv.
"""

from __future__ import annotations

import argparse
import difflib
import json
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from slime.utils.net import is_loopback

from openclaw.environment import env_value
from openclaw.httpapi.config import ConfigError
from openclaw.httpapi.identity import KeyTable, load_key_file, single_key_table
from openclaw.httpapi.urls import client_url
from openclaw.intercept.config import InterceptConfig, InterceptConfigError, add_intercept_args
from openclaw.judge.config import (
    NO_IN_PROCESS_JUDGE,
    JudgeConfig,
    JudgeConfigError,
    add_judge_args,
    judge_arg_dests,
)
from openclaw.server.reasoning import REASONING_PARSERS, unknown_parser_message

BACKENDS = ("hf", "llamacpp", "sglang", "vllm", "tinker")
DTYPES = ("auto", "float32", "bfloat16", "float16")


@dataclass(frozen=True)
class RLConfig:
    """`--enable-rl-intercept` and its companions, typed: the intercept's InterceptConfig and,
    with `--judge-workers N`, the in-process judge's JudgeConfig (both parsed from the flags
    the intercept and the judge register on the server's parser)."""

    enabled: bool = False
    intercept: InterceptConfig = field(default_factory=InterceptConfig)
    judge: JudgeConfig | None = None  # judge workers in this process; None: judge elsewhere (or not)

    def __post_init__(self) -> None:
        if self.judge is not None and not self.enabled:
            raise ConfigError("--judge-workers needs --enable-rl-intercept: the judge reads the trajectory buffer")

    @property
    def buffer_dir(self) -> Path:
        return self.intercept.buffer_dir


@dataclass(frozen=True)
class EngineConfig:
    backend: str = "hf"
    model_path: str | None = None  # None: the embedded default (resolved at load time)
    dtype: str = "auto"
    device: str = "auto"
    max_batch_size: int = 16
    # hf: tokens of prompt + reply KV kept for the next request that starts with them (a chat's
    # next turn, an agent's repeated system prompt and tools); None: the engine's automatic size.
    prefix_cache_tokens: int | None = None
    # sglang / vllm: attach to a running server at this URL instead of launching one.
    engine_url: str | None = None
    tp_size: int = 1
    mem_fraction_static: float | None = None
    context_length: int | None = None
    # The server splits `<think>` blocks into reasoning_content itself (openclaw.server.reasoning),
    # so it must know the format; SGLang also gets the name when the server launches it.
    reasoning_parser: str | None = None
    tool_call_parser: str | None = None

    def __post_init__(self) -> None:
        if self.reasoning_parser is not None and self.reasoning_parser not in REASONING_PARSERS:
            raise ConfigError(unknown_parser_message(self.reasoning_parser))


@dataclass(frozen=True)
class ServerConfig:
    host: str = "127.0.0.1"
    port: int = 8000
    api_key: str | None = None
    # Per-user keys (openclaw.httpapi.identity.load_key_file); with api_key too, that key is an
    # admin "default" beside them.
    api_keys_file: Path | None = None
    served_model_name: str | None = None  # None: derived from the model folder
    max_body_mb: float = 32.0
    default_max_tokens: int = 2048
    log_level: str = "info"
    # Cross-site protection (openclaw.server.middleware.CrossSiteGuard): extra Host / Origin values
    # accepted besides the bind address and loopback names.
    allowed_hosts: tuple[str, ...] = ()
    allowed_origins: tuple[str, ...] = ()
    # Chat-template control tokens typed in messages are encoded as text unless this opts in.
    allow_control_tokens: bool = False
    # Slow clients: whole request head / whole body must arrive within these many seconds.
    header_timeout: float = 10.0
    body_timeout: float = 60.0
    engine: EngineConfig = field(default_factory=EngineConfig)
    rl: RLConfig = field(default_factory=RLConfig)

    def __post_init__(self) -> None:
        if self.rl.intercept.train_reasoning == "mask" and self.engine.reasoning_parser is None:
            # Nothing would find the think block to mask: every token would still be trained.
            raise ConfigError("--rl-train-reasoning mask needs --reasoning-parser (e.g. qwen3): the parser "
                              "marks the think tokens the loss mask leaves out")

    @property
    def has_keys(self) -> bool:
        return bool(self.api_key) or self.api_keys_file is not None

    def key_table(self) -> KeyTable | None:
        """Who each key is (read from the key file now: a malformed file is a ConfigError); None on
        a keyless server, where `X-OpenClaw-User` names the user."""
        if self.api_keys_file is not None:
            return load_key_file(self.api_keys_file, self.api_key)
        return single_key_table(self.api_key) if self.api_key else None

    @property
    def max_body_bytes(self) -> int:
        return int(self.max_body_mb * 1024 * 1024)

    def base_url(self, port: int | None = None) -> str:
        """The URL clients use (a wildcard bind is reached through loopback)."""
        return client_url(self.host, port or self.port)



def _env_int(env: Mapping[str, str], name: str, default: int) -> int:
    raw = env_value(name, env)
    if raw is None:
        return default
    try:
        return int(raw)
    except ValueError as exc:
        raise ConfigError(f"environment variable {name}={raw!r} is not an integer") from exc


def build_parser(env: Mapping[str, str]) -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python -m openclaw.server",
        allow_abbrev=False,  # an abbreviation must not swallow a judge flag parsed in the second pass
        exit_on_error=False,  # a bad value is a ConfigError for parse_config's callers, not an exit
        epilog="judge workers in this process: --judge-workers N, with any flag of "
               "`python -m openclaw.judge --help` (--majority-vote-n, --judge-backend, --judge-url, ...)",
        description="Serve a model as an OpenAI-compatible API (plus SGLang's native endpoints).",
    )
    p.add_argument("--model-path", default=env_value("BASE_MODEL_PATH", env) or env_value("MODEL_PATH", env),
                   help="HF model folder (env BASE_MODEL_PATH / MODEL_PATH; default: embedded SmolLM2-135M-Instruct)")
    p.add_argument("--host", default=env_value("OPENCLAW_HOST", env) or "127.0.0.1",
                   help="bind address (env OPENCLAW_HOST; default 127.0.0.1)")
    p.add_argument("--port", type=int, default=_env_int(env, "OPENCLAW_PORT", 8000),
                   help="port (env OPENCLAW_PORT; default 8000)")
    p.add_argument("--backend", choices=BACKENDS, default="hf",
                   help="hf: embedded transformers engine; llamacpp: llama.cpp on a GGUF (default: the embedded "
                        "SmolLM2's Q4_1 file; LoRA pushes converted to GGUF adapters); sglang: launch/attach SGLang; "
                        "vllm: attach to vLLM; "
                        "tinker: sample from a Tinker API (--model-path = base model, --engine-url or env TINKER_ENDPOINT, env TINKER_API_KEY)")
    p.add_argument("--api-key", default=env_value("OPENCLAW_API_KEY", env),
                   help="required bearer key (env OPENCLAW_API_KEY); mandatory on a non-loopback host")
    p.add_argument("--api-keys-file", default=env_value("OPENCLAW_API_KEYS_FILE", env), metavar="PATH",
                   help="JSON file of per-user keys (env OPENCLAW_API_KEYS_FILE): "
                        '{"users": {"alice": {"key": "..."}}, "admins": {"ops": {"key": "..."}}}; '
                        "each user sees only their own sessions; --api-key, if also given, is an admin")
    p.add_argument("--served-model-name", default=None, help="model id reported by the API (default: model folder name)")
    p.add_argument("--dtype", choices=DTYPES, default="auto")
    p.add_argument("--device", default="auto", help="hf backend: auto | cpu | cuda | cuda:N")
    p.add_argument("--max-batch-size", "--max-running-requests", dest="max_batch_size", type=int, default=16, help="hf backend: max sequences decoded together")
    p.add_argument("--prefix-cache-tokens", type=int, default=EngineConfig.prefix_cache_tokens,
                   help="hf backend: keep the KV of recent prompts and replies, up to this many tokens, so a request "
                        "that starts with them (a chat's next turn, an agent's system prompt and tools) prefills only "
                        "the rest; 0: off; default: 8192 for full-attention models, off with a warning for "
                        "sliding-window ones (SmolLM2-135M: 46 KB per token). llamacpp backend: on by default "
                        "(a finished request's KV stays in its slot); only 0 (off) is accepted")
    p.add_argument("--max-body-mb", type=float, default=32.0, help="reject request bodies larger than this (413)")
    p.add_argument("--default-max-tokens", type=int, default=2048,
                   help="completion length when the request sets no max_tokens (capped by the context)")
    p.add_argument("--engine-url", default=None, help="sglang/vllm: attach to a running server instead of launching")
    p.add_argument("--tp-size", "--tp", type=int, default=1, dest="tp_size")
    p.add_argument("--mem-fraction-static", type=float, default=None)
    p.add_argument("--context-length", type=int, default=None)
    p.add_argument("--reasoning-parser", default=None, metavar="NAME",
                   help=f"split the model's <think> block into reasoning_content ({', '.join(REASONING_PARSERS)}); "
                        "default: none, the raw text is the content")
    p.add_argument("--tool-call-parser", default=None)
    p.add_argument("--allowed-host", action="append", default=[], dest="allowed_hosts", metavar="HOST",
                   help="repeatable: another Host header value to accept (e.g. a DNS name the server is reached "
                        "by); besides the bind address, localhost, 127.0.0.1 and [::1]")
    p.add_argument("--allowed-origin", action="append", default=[], dest="allowed_origins", metavar="ORIGIN",
                   help="repeatable: a browser Origin (scheme://host[:port]) allowed to send requests")
    p.add_argument("--allow-control-tokens", action="store_true",
                   help="encode chat-template control tokens typed in messages (<|im_end|>, ...) as real tokens; "
                        "default: as plain text, so a user cannot forge a turn")
    p.add_argument("--header-timeout", type=float, default=10.0,
                   help="seconds a client has to send the request line and headers (slow clients are dropped)")
    p.add_argument("--body-timeout", type=float, default=60.0,
                   help="seconds a client has to send the whole request body (408 after that)")
    p.add_argument("--log-level", default="info", choices=("critical", "error", "warning", "info", "debug"))
    p.add_argument("--enable-rl-intercept", action="store_true",
                   help="capture conversations into the trajectory buffer (openclaw.intercept)")
    add_intercept_args(p, env)  # --rl-* / --session-*: the intercept's own flags and defaults
    return p


def build_judge_parser(env: Mapping[str, str]) -> argparse.ArgumentParser:
    """The in-process judge's flags (`--judge-workers N` and every `python -m openclaw.judge` flag),
    declared by openclaw.judge. Kept apart from build_parser so that a launcher routing flags by
    owner sends judge flags to the judge, not to the server as well."""
    p = argparse.ArgumentParser(prog="python -m openclaw.server", add_help=False, allow_abbrev=False,
                                exit_on_error=False)
    try:
        add_judge_args(p, env, in_server=True)
    except JudgeConfigError as exc:  # MAJORITY_VOTE_N / MAJORITY_VOTE_THRESHOLD unreadable
        raise ConfigError(str(exc)) from None
    return p


def _refuse_unknown(parsers: Sequence[argparse.ArgumentParser], extra: Sequence[str]) -> None:
    """An unknown flag is an error naming it (with the closest known flag), never kept."""
    if not extra:
        return
    tok = extra[0]
    known = [opt for parser in parsers for action in parser._actions for opt in action.option_strings]  # noqa: SLF001
    name = tok.partition("=")[0]
    close = difflib.get_close_matches(name, known, n=1, cutoff=0.75) if name.startswith("--") else []
    hint = f" (did you mean {close[0]}?)" if close else ""
    raise ConfigError(f"unrecognized argument: {tok}{hint}")


def _rl_config(args: argparse.Namespace, judge_parser: argparse.ArgumentParser,
               judge_args: argparse.Namespace) -> RLConfig:
    """The intercept's and the judge's typed configs from the flags they registered."""
    try:
        intercept = InterceptConfig.from_args(args)
    except InterceptConfigError as exc:
        raise ConfigError(f"RL intercept configuration: {exc}") from None
    if judge_args.num_judge_workers == NO_IN_PROCESS_JUDGE:
        # Judge flags without --judge-workers would be accepted and ignored: refuse them.
        flags = {a.dest: "/".join(a.option_strings) for a in judge_parser._actions}  # noqa: SLF001
        given = sorted(flags[d] for d in judge_arg_dests() & flags.keys()
                       if getattr(judge_args, d) != judge_parser.get_default(d))
        if given:
            raise ConfigError(f"judge option(s) {', '.join(given)} need --judge-workers N (judge in this "
                              "server) or belong to `python -m openclaw.judge`")
        return RLConfig(enabled=args.enable_rl_intercept, intercept=intercept)
    try:
        judge = JudgeConfig.from_args(judge_args)
    except JudgeConfigError as exc:
        raise ConfigError(f"judge configuration: {exc}") from None
    return RLConfig(enabled=args.enable_rl_intercept, intercept=intercept, judge=judge)


def parse_config(argv: Sequence[str] | None = None, env: Mapping[str, str] | None = None) -> ServerConfig:
    """Parse flags + env once. Raises ConfigError for a configuration that must not start."""
    env = os.environ if env is None else env
    parser = build_parser(env)
    try:
        args, extra = parser.parse_known_args(list(argv) if argv is not None else None)
        judge_parser = build_judge_parser(env)
        judge_args, extra = judge_parser.parse_known_args(extra)
    except argparse.ArgumentError as exc:  # e.g. --port abc, --majority-vote-n many
        raise ConfigError(str(exc)) from None
    _refuse_unknown([parser, judge_parser], extra)
    if args.port < 0 or args.port > 65535:
        raise ConfigError(f"--port {args.port} is out of range 0..65535")
    if args.max_batch_size < 1:
        raise ConfigError("--max-batch-size must be >= 1")
    if args.prefix_cache_tokens not in (None, 0) and args.backend == "llamacpp":
        raise ConfigError("--backend llamacpp keeps each finished request's KV in its slot (no token budget to set); "
                          "--prefix-cache-tokens takes only 0 there (off)")
    if args.prefix_cache_tokens is not None and args.backend not in ("hf", "llamacpp"):
        raise ConfigError(f"--prefix-cache-tokens is the hf and llamacpp backends'; --backend {args.backend} does not take it")
    if args.prefix_cache_tokens is not None and args.prefix_cache_tokens < 0:
        raise ConfigError(f"--prefix-cache-tokens must be >= 0 (0: off), got {args.prefix_cache_tokens}")
    if args.max_body_mb <= 0:
        raise ConfigError("--max-body-mb must be > 0")
    if args.api_key is not None and (not args.api_key.strip() or args.api_key != args.api_key.strip()):
        # A blank key would lock every client out; surrounding spaces never match (clients' keys are stripped).
        raise ConfigError("--api-key / OPENCLAW_API_KEY is blank or starts/ends with whitespace; "
                          "give a non-blank key without surrounding spaces (or none on loopback)")
    if args.header_timeout <= 0 or args.body_timeout <= 0:
        raise ConfigError("--header-timeout and --body-timeout must be > 0")
    config = ServerConfig(
        host=args.host,
        port=args.port,
        api_key=args.api_key,
        api_keys_file=Path(args.api_keys_file) if args.api_keys_file else None,
        served_model_name=args.served_model_name,
        max_body_mb=args.max_body_mb,
        default_max_tokens=args.default_max_tokens,
        log_level=args.log_level,
        allowed_hosts=tuple(args.allowed_hosts),
        allowed_origins=tuple(args.allowed_origins),
        allow_control_tokens=args.allow_control_tokens,
        header_timeout=args.header_timeout,
        body_timeout=args.body_timeout,
        engine=EngineConfig(
            backend=args.backend, model_path=args.model_path, dtype=args.dtype, device=args.device,
            max_batch_size=args.max_batch_size, prefix_cache_tokens=args.prefix_cache_tokens,
            engine_url=args.engine_url, tp_size=args.tp_size,
            mem_fraction_static=args.mem_fraction_static, context_length=args.context_length,
            reasoning_parser=args.reasoning_parser, tool_call_parser=args.tool_call_parser,
        ),
        rl=_rl_config(args, judge_parser, judge_args),
    )
    check_security(config)
    config.key_table()  # a malformed key file stops the start here, naming the file and the field
    return config


def check_security(config: ServerConfig) -> None:
    """Refuse to expose an unauthenticated model to the network."""
    if not is_loopback(config.host) and not config.has_keys:
        raise ConfigError(
            f"refusing to bind {config.host}:{config.port} without an API key: anyone on the network "
            "could use the model (and write to the RL buffer). Set --api-key or OPENCLAW_API_KEY "
            "(or --api-keys-file), or bind 127.0.0.1."
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
