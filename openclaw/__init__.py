"""OpenClaw-RL runtime: serve a model, capture conversations as RL data, judge them."""

__version__ = "0.1.0"
