"""`openclaw_combine`: the second public page's Python entry points for the combined method.

    python -m openclaw_combine.test_rollout --num-samples 10 --output-dir ./debug_rollouts
    from openclaw_combine.utils import inspect_sessions

(The method itself -- args, rollout, loss, run script -- lives in the `openclaw-combine/` folder,
loaded by the trainer as plugins; this package only holds these two tools.)
"""
