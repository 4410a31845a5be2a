"""`openclaw_combine`: this folder, importable under the name the second public page uses.

    python -m openclaw_combine.test_rollout --num-samples 10 --output-dir ./debug_rollouts
    from openclaw_combine.utils import inspect_sessions

setup.py maps the package name to the folder. The trainer still loads the method's plugins
(args, rollout, loss) by path, as for every method folder.
"""
