"""A raw TCP endpoint on a free loopback port, for servers that misbehave below HTTP: one that
never answers, one that drips its reply a byte at a time."""

from __future__ import annotations

import socket
import threading
from collections.abc import Callable


class TcpListener:
    """Accepts connections until `close`; each one is kept (and closed with the listener) and, when
    `on_connection` is given, handed to it on a thread of its own. `closed` is set by `close`, so a
    handler that paces itself can wait on it and stop."""

    def __init__(self, on_connection: Callable[[socket.socket], None] | None = None) -> None:
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(64)
        self.port = self.sock.getsockname()[1]
        self.conns: list[socket.socket] = []
        self.closed = threading.Event()
        self._on_connection = on_connection
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self._thread.start()

    @property
    def url(self) -> str:
        """The base URL of an OpenAI-compatible endpoint at this address."""
        return f"http://127.0.0.1:{self.port}/v1"

    @property
    def accepted(self) -> int:
        return len(self.conns)

    def _serve(self) -> None:
        self.sock.settimeout(0.1)  # so that the loop sees `closed`
        while not self.closed.is_set():
            try:
                conn, _ = self.sock.accept()
            except (TimeoutError, OSError):
                continue
            self.conns.append(conn)
            if self._on_connection is not None:
                threading.Thread(target=self._on_connection, args=(conn,), daemon=True).start()

    def close(self) -> None:
        self.closed.set()
        self._thread.join(5)
        for conn in self.conns:
            conn.close()
        self.sock.close()
