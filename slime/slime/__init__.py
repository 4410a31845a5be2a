"""slime: the OpenClaw-RL trainer (slime-compatible arguments, plugins and Sample)."""

__version__ = "0.1.0"
