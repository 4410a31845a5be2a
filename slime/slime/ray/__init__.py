"""Ray orchestration: placement groups, the train actor group, the rollout manager."""
