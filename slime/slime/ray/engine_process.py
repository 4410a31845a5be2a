"""Inference engines as child processes, started and stopped by PID.

CPU (and GPU without SGLang): the program named by `--rollout-engine-command` (any server that
speaks SGLang's HTTP API; slime ships none, so the caller names it), started with the model and
address flags appended. GPU with SGLang: the full `sglang.launch_server` argv from
`slime.rollout.sglang_command` (`argv=`). slime runs a command, it never imports the engine.
Each process runs in its own session so that stopping it also stops anything it spawned.
"""

from __future__ import annotations

import os
import shlex
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import httpx

from slime.rollout.sglang_client import API_KEY_ENV, auth_headers
from slime.utils.net import is_loopback

LOOPBACK = "127.0.0.1"
BIND_MODES = ("auto", "loopback", "node")


def engine_bind_host(mode: str, node_ip: str, num_nodes: int, api_key: str | None) -> str:
    """The address an engine started by the rollout manager binds (and is reached at).

    The rule: engines bind 127.0.0.1 unless told otherwise. They bind the node's own address, as
    Ray reports it (`ray.util.get_node_ip_address()`), only when another node may have to reach
    them: `mode` "node" (--rollout-engine-bind node), or "auto" on a cluster of more than one
    node. "loopback" keeps them on 127.0.0.1 whatever the cluster (everything that talks to them
    then has to run beside the rollout manager, as slime's own rollout and weight sync do).
    An address outside 127.0.0.0/8 exposes the engine to the network, which is refused without
    an API key in $OPENCLAW_API_KEY: the rollout manager passes it on to the engine process it
    starts, and every request to an engine sends it (`sglang_client.auth_headers`). A URL handed
    to another node is built from the returned address, never from a literal 127.0.0.1.
    """
    if mode not in BIND_MODES:
        raise ValueError(f"--rollout-engine-bind {mode!r}: choose one of {', '.join(BIND_MODES)}")
    if mode == "loopback" or (mode == "auto" and num_nodes <= 1):
        return LOOPBACK
    if not is_loopback(node_ip) and not api_key:
        why = "--rollout-engine-bind node" if mode == "node" else f"the Ray cluster has {num_nodes} nodes"
        raise ValueError(f"{why}: the engines would listen on {node_ip}, reachable from the network, and no "
                         f"API key is set: export {API_KEY_ENV} (slime hands it to the engines it starts and sends "
                         "it with every request), "
                         "or keep them on this node with --rollout-engine-bind loopback")
    return node_ip


def engine_program(command: str | None) -> list[str]:
    """The argv of `--rollout-engine-command`; a ValueError naming the flag when it is not given."""
    if command is None:
        raise ValueError("--rollout-engine-command is not set: this run starts its own inference engines "
                         "(--rollout-backend embedded, or auto without SGLang on a GPU) and slime ships none, so name "
                         "the program that serves SGLang's HTTP API (slime appends --model-path --host --port --dtype "
                         "--max-batch-size [--device]), or serve the engines yourself and pass --rollout-backend "
                         "external --rollout-external-engine-addrs HOST:PORT")
    program = shlex.split(command)
    if not program:
        raise ValueError("--rollout-engine-command is empty: name the program that serves the engine")
    return program


def free_port(host: str = "127.0.0.1") -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((host, 0))
        return int(s.getsockname()[1])


@dataclass
class EngineProcess:
    model_path: str
    host: str = "127.0.0.1"
    port: int = 0
    dtype: str = "float32"
    device: str | None = None
    max_batch_size: int = 16
    log_path: Path | None = None
    extra_env: dict[str, str] = field(default_factory=dict)
    engine_command: str | None = None  # --rollout-engine-command: required unless `argv` is given
    argv: list[str] | None = None  # a complete command (SGLang): host and port already in it
    proc: subprocess.Popen | None = None

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"

    def command(self) -> list[str]:
        if self.argv is not None:
            return list(self.argv)
        program = engine_program(self.engine_command)
        if program[0] in ("python", "python3"):
            program[0] = sys.executable  # the trainer's interpreter, not whatever is first on PATH
        cmd = program + ["--model-path", str(self.model_path), "--host", self.host, "--port", str(self.port),
                         "--dtype", self.dtype, "--max-batch-size", str(self.max_batch_size)]
        if self.device:
            cmd += ["--device", self.device]
        return cmd

    @property
    def base_url(self) -> str:
        return self.url

    def start(self, timeout_s: float = 300.0) -> None:
        """Launch and wait for /health; retries on a port taken between probe and bind."""
        last_error = ""
        for _ in range(3 if self.argv is None else 1):  # a given argv has its port fixed
            if not self.port:
                self.port = free_port(self.host)
            log = open(self.log_path, "ab") if self.log_path else subprocess.DEVNULL
            env = dict(os.environ, **self.extra_env)
            env.setdefault("TOKENIZERS_PARALLELISM", "false")
            self.proc = subprocess.Popen(self.command(), stdout=log, stderr=subprocess.STDOUT, env=env,
                                         start_new_session=True)
            if log is not subprocess.DEVNULL:
                log.close()
            ok, last_error = self._wait_healthy(timeout_s)
            if ok:
                return
            self.stop()
            self.port = 0
        raise RuntimeError(f"engine for {self.model_path} did not become healthy: {last_error}"
                           + (f" (log: {self.log_path})" if self.log_path else ""))

    def _wait_healthy(self, timeout_s: float) -> tuple[bool, str]:
        deadline = time.monotonic() + timeout_s
        error = "timeout"
        while time.monotonic() < deadline:
            if self.proc is None or self.proc.poll() is not None:
                return False, f"process exited with {self.proc.returncode if self.proc else None}"
            try:
                if httpx.get(self.url + "/health", headers=auth_headers(), timeout=2.0).status_code == 200:
                    return True, ""
            except httpx.HTTPError as exc:
                error = str(exc)
            time.sleep(0.2)  # polling interval while waiting on a condition with a deadline
        return False, error

    @property
    def pid(self) -> int | None:
        return self.proc.pid if self.proc else None

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def stop(self, timeout_s: float = 15.0) -> None:
        """SIGTERM the engine's process group (it is the group leader), SIGKILL after a timeout."""
        if self.proc is None:
            return
        if self.proc.poll() is None:
            try:
                os.killpg(self.proc.pid, signal.SIGTERM)
            except ProcessLookupError:
                pass
            try:
                self.proc.wait(timeout=timeout_s)
            except subprocess.TimeoutExpired:
                try:
                    os.killpg(self.proc.pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
                self.proc.wait(timeout=timeout_s)
        self.proc = None
