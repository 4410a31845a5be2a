"""Serve ONLY SGLang's native endpoints over the embedded engine.

    python -m openclaw.engines.serve --model-path PATH --port 30000

This is the CPU stand-in for `python -m sglang.launch_server`: the trainer launches it as its
rollout engine and talks to it with `openclaw.engines.sglang_client`, exactly as it would to
SGLang on GPUs.
"""

from __future__ import annotations

import argparse
import contextlib
import logging
import socket
import sys
import threading
import time
from collections.abc import Iterator

from fastapi import FastAPI
from slime.utils.net import is_loopback

from openclaw.engines.sglang_api import sglang_router
from openclaw.environment import env_value
from openclaw.httpapi.errors import install_error_handlers
from openclaw.httpapi.middleware import APIKeyMiddleware, CrossSiteGuard


def create_app(engine, host: str = "127.0.0.1", api_key: str | None = None) -> FastAPI:
    """A FastAPI app with the SGLang endpoints; the engine is shut down with the app.

    Like the OpenAI server it refuses what a browser page could send (non-JSON POSTs, a foreign
    Origin, and on a loopback bind a foreign Host): a page must not swap this engine's weights.
    With `api_key` every request but the health probes must present it (the trainer's engine
    client sends OPENCLAW_API_KEY).
    """
    @contextlib.asynccontextmanager
    async def lifespan(app: FastAPI):
        yield
        await engine.shutdown()

    app = FastAPI(title="openclaw embedded engine (SGLang API)", lifespan=lifespan)
    app.include_router(sglang_router(engine))
    app.state.engine = engine
    install_error_handlers(app)  # 404/405 in OpenAI's error shape, as on the OpenAI server
    # A wildcard/LAN bind is reached under whatever name the trainer's nodes use: no Host check there.
    app.add_middleware(CrossSiteGuard, bind_host=host, check_host=is_loopback(host))
    if api_key:
        app.add_middleware(APIKeyMiddleware, api_key=api_key)
    return app


@contextlib.contextmanager
def serve_in_thread(app, host: str = "127.0.0.1", startup_timeout: float = 60.0) -> Iterator[str]:
    """Run `app` with uvicorn on a free port in a background thread; yields its base URL.

    Real HTTP for tests and benchmarks; the server is stopped (and its lifespan shutdown run)
    when the block exits.
    """
    import uvicorn

    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((host, 0))
    port = sock.getsockname()[1]
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning", lifespan="on"))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, name=f"uvicorn-{port}", daemon=True)
    thread.start()
    deadline = time.monotonic() + startup_timeout
    while not server.started:
        if not thread.is_alive() or time.monotonic() > deadline:
            raise RuntimeError(f"uvicorn on {host}:{port} did not start within {startup_timeout}s")
        time.sleep(0.01)
    try:
        yield f"http://{host}:{port}"
    finally:
        server.should_exit = True
        thread.join(30)
        sock.close()


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m openclaw.engines.serve", description=__doc__.splitlines()[0])
    p.add_argument("--model-path", default=env_value("MODEL_PATH"),
                   help="HF folder or PEFT adapter folder (default: the embedded SmolLM2-135M-Instruct)")
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, default=30000)
    p.add_argument("--dtype", default="float32", choices=["float32", "bfloat16", "float16"])
    p.add_argument("--device", default=None, help="cpu or cuda (default: cuda when available)")
    p.add_argument("--max-batch-size", "--max-running-requests", dest="max_batch_size", type=int, default=16)
    p.add_argument("--served-model-name", default=None)
    p.add_argument("--prefix-cache-tokens", type=int, default=0,
                   help="keep the KV of recent prompts, up to this many tokens, and run only the part of a new "
                        "prompt after its longest cached prefix (a GRPO group's samples, a shared instruction "
                        "block); 0 (default): off, every prompt is prefilled in full")
    p.add_argument("--num-threads", type=int, default=None, help="torch intra-op threads (default: torch's choice)")
    p.add_argument("--log-level", default="warning")
    return p.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    import uvicorn

    from openclaw.engines.hf_engine import HFEngine

    args = parse_args(argv)
    api_key = env_value("OPENCLAW_API_KEY")
    if api_key is None and not is_loopback(args.host):
        # an exposed engine takes weight pushes from whoever reaches it: never without a key
        print(f"error: --host {args.host} exposes the engine beyond this machine: set OPENCLAW_API_KEY (the "
              "trainer sends it)", file=sys.stderr)
        return 2
    logging.basicConfig(level=args.log_level.upper())
    if args.num_threads:
        import torch

        torch.set_num_threads(args.num_threads)
    engine = HFEngine.load(args.model_path, dtype=args.dtype, device=args.device,
                           max_batch_size=args.max_batch_size, served_model_name=args.served_model_name,
                           prefix_cache_tokens=args.prefix_cache_tokens)
    print(f"openclaw engine ready: http://{args.host}:{args.port} model={engine.model_path} "
          f"dtype={args.dtype} device={engine.device} prefix_cache_tokens={args.prefix_cache_tokens}", flush=True)
    from openclaw.httpapi.h11 import DEFAULT_HEADER_TIMEOUT, h11_with_header_timeout

    uvicorn.run(create_app(engine, args.host, api_key), host=args.host, port=args.port, log_level=args.log_level,
                http=h11_with_header_timeout(DEFAULT_HEADER_TIMEOUT))  # slow request heads are dropped
    return 0


if __name__ == "__main__":
    sys.exit(main())
