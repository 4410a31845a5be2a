"""A stdlib request handler that answers with JSON, for stand-ins of the HTTP services a test talks
to (a judge endpoint, an engine); serve one with the `http_server` fixture."""

from __future__ import annotations

import json
from http.server import BaseHTTPRequestHandler


class JsonHandler(BaseHTTPRequestHandler):
    """Subclasses define `do_GET` / `do_POST` and answer with `send_json`."""

    def read_body(self) -> bytes:
        return self.rfile.read(int(self.headers.get("Content-Length", 0)))

    def send_json(self, payload: object) -> None:
        body = json.dumps(payload).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        pass  # a test's requests are not worth a line each on stderr
