"""HTTP pieces every openclaw service shares: OpenAI-shaped errors, the ASGI guards (API key,
cross-site requests, body size and deadline) and the start-up `ConfigError`.

They know nothing of engines, the intercept or the server, so the embedded engine's SGLang API
(`openclaw.engines.serve`) and the OpenAI server (`openclaw.server`) guard themselves alike.
"""
