"""`python -m openclaw.server [--model-path ...] [--port 8000] [--backend hf|sglang|vllm] ...`"""

from __future__ import annotations

import logging
import sys

from openclaw.server.config import ConfigError, parse_config


def _error(message: object, code: int) -> int:
    """Say why the server did not start, as argparse says it (program name, `error:`); return `code`."""
    print(f"openclaw.server: error: {message}", file=sys.stderr)
    return code


def main(argv: list[str] | None = None) -> int:
    try:
        config = parse_config(argv)
    except ConfigError as exc:
        return _error(exc, 2)
    logging.basicConfig(level=config.log_level.upper(), format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    # Heavy imports after argument parsing so `--help` and config errors are instant.
    from openclaw.server.app import create_app
    from openclaw.server.banner import ready_banner
    from openclaw.server.runner import serve_forever

    print(f"Loading model ({config.engine.backend} backend)...", file=sys.stderr, flush=True)
    try:
        app = create_app(config)
    except ConfigError as exc:
        return _error(exc, 2)
    state = app.state.openclaw

    def on_ready(port: int) -> None:
        print(ready_banner(config.base_url(port), state.served_model_name, state.engine.model_path,
                           config.engine.backend, "set" if config.has_keys else None, state.engine.max_context_len,
                           config.default_max_tokens, config.rl.enabled, str(config.rl.buffer_dir)), flush=True)

    try:
        serve_forever(app, config.host, config.port, config.log_level, on_ready=on_ready)
    except OSError as exc:
        return _error(f"cannot listen on {config.host}:{config.port}: {exc}", 1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
