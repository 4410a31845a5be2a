"""Rollout: prompt data source, default rollout function (engine /generate), built-in rewards."""
