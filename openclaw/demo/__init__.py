"""The main job: simulated users talk to the served model while it trains in the background."""
