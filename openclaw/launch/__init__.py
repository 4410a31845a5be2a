"""One launcher for every method and track: `python -m openclaw.launch <recipe> [flags]`.

    python -m openclaw.launch openclaw-combine --majority-vote-n 5 --lr 1e-6
    OPENCLAW_DRY_RUN=1 python -m openclaw.launch terminal-rl      # print the plan, start nothing

The run_*.sh scripts are two-line wrappers around it. Modules, one job each:
    names     every name a user types (env vars, launcher flags, --config keys, scripts): one table
    settings  the table's env vars, read once (Settings)
    config_file  --config FILE: each key to the setting or flag it names
    page_env  env vars that become a component's flags
    recipes   per method/track: components, method flags (plugins as file paths), presets
    routing   each flag to the component whose own parser declares it
    plan      every command of one launch, built and validated before anything starts
    processes start children, stop exactly those by PID (and what they spawned), fast
    progress  the live-run status line (buffer, steps, reward, weight version)
    run       execute a plan
See openclaw/launch/README.md.
"""

from openclaw.launch.plan import Plan, build_plan
from openclaw.launch.recipes import RECIPES, Recipe
from openclaw.launch.settings import LaunchError, Settings

__all__ = ["RECIPES", "LaunchError", "Plan", "Recipe", "Settings", "build_plan"]
