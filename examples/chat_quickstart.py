"""Quick start: a 3-turn scripted chat with the served model through the official `openai` SDK.

    python examples/chat_quickstart.py                 # starts a server on a free port (embedded SmolLM2)
    OPENCLAW_BASE_URL=http://127.0.0.1:8000/v1 python examples/chat_quickstart.py   # use a running server

Options: --model-path PATH (a local HF folder; default: the embedded SmolLM2-135M-Instruct),
--max-tokens N. With a running server, OPENCLAW_API_KEY is sent as the key if set.
"""

from __future__ import annotations

import argparse
import os
import sys
import time

import openai

SCRIPT = [
    "Hi! What is the capital of France?",
    "Name one famous landmark in that city.",
    "Thanks! Summarize our conversation in one sentence.",
]


def chat(client: openai.OpenAI, model: str, max_tokens: int) -> None:
    messages: list[dict[str, str]] = [{"role": "system", "content": "You are a concise, helpful assistant."}]
    for user in SCRIPT:
        messages.append({"role": "user", "content": user})
        print(f"\nuser> {user}\nassistant> ", end="", flush=True)
        start = time.perf_counter()
        first = None
        reply: list[str] = []
        usage = None
        stream = client.chat.completions.create(model=model, messages=messages, temperature=0, max_tokens=max_tokens,
                                                stream=True, stream_options={"include_usage": True})
        for chunk in stream:
            if chunk.usage is not None:
                usage = chunk.usage
            if chunk.choices and chunk.choices[0].delta.content:
                first = first or time.perf_counter()
                reply.append(chunk.choices[0].delta.content)
                print(chunk.choices[0].delta.content, end="", flush=True)
        took = time.perf_counter() - start
        tokens = usage.completion_tokens if usage else len(reply)
        ttft = (first - start) if first else took
        print(f"\n  [{tokens} tokens in {took:.2f}s, first token after {ttft:.2f}s]")
        messages.append({"role": "assistant", "content": "".join(reply)})


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--model-path", default=None, help="HF model folder (default: the embedded SmolLM2-135M-Instruct)")
    p.add_argument("--max-tokens", type=int, default=64)
    args = p.parse_args()
    t0 = time.perf_counter()
    base_url = os.environ.get("OPENCLAW_BASE_URL")
    server = None
    if base_url is None:
        from openclaw.server import EngineConfig, ServerConfig, create_app, serve_in_background

        print("Starting the OpenClaw-RL server (first run converts the embedded model, ~20 s)...", flush=True)
        app = create_app(ServerConfig(engine=EngineConfig(model_path=args.model_path)))
        server = serve_in_background(app)
        base_url = server.base_url + "/v1"
        print(f"Server ready at {base_url} in {time.perf_counter() - t0:.1f}s", flush=True)
    try:
        client = openai.OpenAI(base_url=base_url, api_key=os.environ.get("OPENCLAW_API_KEY") or "local")
        model = client.models.list().data[0].id
        print(f"Model: {model}")
        chat(client, model, args.max_tokens)
    finally:
        if server is not None:
            server.stop()
    print(f"\nDone in {time.perf_counter() - t0:.1f}s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
