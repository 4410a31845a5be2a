"""The skeleton the Track 2 folders (terminal-rl, swe-rl, gui-rl, toolcall-rl) share.

Each track is a plugin folder the trainer loads by file path, so its files cannot import one
another's code as a package; what they share lives here:
  options   a track's flags, declared once as a dataclass (add_arguments and from_args follow)
  episode   the generate() skeleton: engine client, multi-turn token loop, the Sample's fields
  env       the turn budget and record of an environment's episode, a sandbox step's result
  samples   what a Sample names (a whole record or an id)
"""

from openclaw.tracks.env import EpisodeEnv, SandboxStep, process_bonus
from openclaw.tracks.episode import Play, Score, generate_episode
from openclaw.tracks.options import SandboxedOptions, TrackOptions, option, trainer_value
from openclaw.tracks.samples import named_in_sample

__all__ = [
    "EpisodeEnv",
    "Play",
    "SandboxStep",
    "SandboxedOptions",
    "Score",
    "TrackOptions",
    "generate_episode",
    "named_in_sample",
    "option",
    "process_bonus",
    "trainer_value",
]
