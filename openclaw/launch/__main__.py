"""`python -m openclaw.launch <recipe> [flags...]` (the run_*.sh scripts exec this)."""

from __future__ import annotations

import os
import sys

from openclaw.launch.plan import build_plan, repo_root
from openclaw.launch.recipes import RECIPES, run_prepare
from openclaw.launch.settings import LaunchError


def _usage() -> str:
    lines = ["usage: python -m openclaw.launch RECIPE [flags for the server, judge or trainer...]", "", "recipes:"]
    lines += [f"  {r.name:<20} {r.summary}" for r in RECIPES.values()]
    lines += ["", "Settings are env vars (MODEL_PATH, CKPT_SAVE_DIR, ROLLOUT_ARGS, ...) and --config FILE.yaml; every",
              "name is in openclaw/launch/names.py (the table in openclaw/launch/README.md).",
              "OPENCLAW_DRY_RUN=1 prints the plan and starts and writes nothing."]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if not argv or argv[0] in ("-h", "--help"):
        print(_usage())
        return 0 if argv else 2
    recipe, rest = argv[0], argv[1:]
    try:
        repo = repo_root()
        plan = build_plan(recipe, rest, os.environ, repo)
        if plan.settings.dry_run:  # a dry run writes nothing: the data preparation is shown, not run
            print(plan.render())
            return 0
        run_prepare([c.argv for c in plan.prepare], repo)
    except LaunchError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    from openclaw.launch.run import execute

    return execute(plan, os.environ)


if __name__ == "__main__":
    sys.exit(main())
