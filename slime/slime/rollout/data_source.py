"""Prompt data source: a JSONL file of prompts, served in (optionally shuffled) epochs.

The position (epoch, offset, next sample index) is part of every checkpoint, so a resumed run
continues with exactly the prompts that come next: nothing is trained twice or skipped.
"""

from __future__ import annotations

import copy
import dataclasses
import json
import random
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from slime.utils.types import Sample


@dataclass(frozen=True)
class DataSourceConfig:
    prompt_data: str
    input_key: str = "input"
    label_key: str | None = None
    metadata_key: str | None = None
    apply_chat_template: bool = False
    system_prompt: str | None = None
    rollout_shuffle: bool = False
    seed: int = 1234
    n_samples_per_prompt: int = 1

    @classmethod
    def from_args(cls, args: Any, prompt_data: str | None = None) -> DataSourceConfig:
        """The reader's settings from the flags; `prompt_data` reads another file the same way."""
        def get(name: str, default: Any) -> Any:
            value = getattr(args, name, None)
            return default if value is None else value

        path = prompt_data or get("prompt_data", None)
        if not path:
            raise ValueError("--prompt-data is required for the default data source")
        return cls(prompt_data=str(path), input_key=get("input_key", "input"), label_key=get("label_key", None),
                   metadata_key=get("metadata_key", None), apply_chat_template=bool(get("apply_chat_template", False)),
                   system_prompt=get("system_prompt", None),
                   rollout_shuffle=bool(get("rollout_shuffle", False)), seed=int(get("rollout_seed", get("seed", 1234))),
                   n_samples_per_prompt=int(get("n_samples_per_prompt", 1)))


def load_prompts(cfg: DataSourceConfig, tokenizer: Any = None) -> list[Sample]:
    path = Path(cfg.prompt_data)
    if not path.is_file():
        raise FileNotFoundError(f"--prompt-data {str(path)!r} does not exist")
    samples: list[Sample] = []
    with path.open() as fh:
        for line_no, line in enumerate(fh, 1):
            if not line.strip():
                continue
            try:
                row = json.loads(line)
            except json.JSONDecodeError as exc:
                raise ValueError(f"{path}:{line_no}: not valid JSON ({exc.msg})") from None
            if cfg.input_key not in row:
                raise ValueError(f"{path}:{line_no}: missing input key {cfg.input_key!r} (have {sorted(row)})")
            prompt = row[cfg.input_key]
            if cfg.apply_chat_template:
                if tokenizer is None:
                    raise ValueError("--apply-chat-template needs a tokenizer")
                messages = prompt if isinstance(prompt, list) else [{"role": "user", "content": str(prompt)}]
                if cfg.system_prompt and messages[0].get("role") != "system":
                    messages = [{"role": "system", "content": cfg.system_prompt}] + messages
                prompt = tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
            elif not isinstance(prompt, str):
                raise ValueError(f"{path}:{line_no}: prompt is not a string; pass --apply-chat-template for messages")
            label = row.get(cfg.label_key) if cfg.label_key else None
            metadata = row.get(cfg.metadata_key, {}) if cfg.metadata_key else {}
            samples.append(Sample(prompt=prompt, label=None if label is None else str(label),
                                  metadata=dict(metadata) if isinstance(metadata, dict) else {"metadata": metadata}))
    if not samples:
        raise ValueError(f"--prompt-data {path} has no prompts")
    return samples


class RolloutDataSource:
    """`get_samples(n)` -> n groups of n_samples_per_prompt fresh Samples (slime's interface)."""

    def __init__(self, cfg: DataSourceConfig, tokenizer: Any = None) -> None:
        self.cfg = cfg
        self.prompts = load_prompts(cfg, tokenizer)
        self.epoch_id = 0
        self.offset = 0
        self.sample_index = 0  # next Sample.index (global, unique across the run)
        self.group_index = 0
        self._order = self._epoch_order(0)

    def _epoch_order(self, epoch: int) -> list[int]:
        order = list(range(len(self.prompts)))
        if self.cfg.rollout_shuffle:
            random.Random(self.cfg.seed + epoch).shuffle(order)  # a function of (seed, epoch): resumable
        return order

    def get_samples(self, num_prompts: int) -> list[list[Sample]]:
        groups: list[list[Sample]] = []
        for _ in range(num_prompts):
            if self.offset >= len(self._order):
                self.epoch_id += 1
                self.offset = 0
                self._order = self._epoch_order(self.epoch_id)
            base = self.prompts[self._order[self.offset]]
            self.offset += 1
            group = []
            for _ in range(self.cfg.n_samples_per_prompt):
                s = copy.deepcopy(base)
                s.index = self.sample_index
                s.group_index = self.group_index
                s.metadata = dict(s.metadata, prompt_index=self._order[self.offset - 1], epoch=self.epoch_id)
                self.sample_index += 1
                group.append(s)
            self.group_index += 1
            groups.append(group)
        return groups

    def add_samples(self, groups: list[list[Sample]]) -> None:
        raise NotImplementedError("the prompt data source has no buffer; use a buffer data source for partial rollouts")

    def state_dict(self) -> dict[str, int]:
        return {"epoch_id": self.epoch_id, "offset": self.offset, "sample_index": self.sample_index,
                "group_index": self.group_index}

    def load_state_dict(self, state: dict[str, int]) -> None:
        self.epoch_id = int(state["epoch_id"])
        self.offset = int(state["offset"])
        self.sample_index = int(state["sample_index"])
        self.group_index = int(state.get("group_index", 0))
        self._order = self._epoch_order(self.epoch_id)

    # slime's names
    def save(self, rollout_id: int) -> dict[str, int]:
        return self.state_dict()

    def load(self, state: dict[str, int]) -> None:
        self.load_state_dict(state)


def eval_datasets(values: Sequence[str] | None) -> list[tuple[str, str]]:
    """--eval-prompt-data NAME PATH [NAME PATH ...] -> [(name, path), ...] (checked at parse time)."""
    items = [str(v) for v in values or ()]
    return list(zip(items[0::2], items[1::2], strict=True))


class EvalDataSource:
    """The --eval-prompt-data sets, each read once with the training prompts' reader and keys. An
    evaluation takes fresh copies of every prompt (`groups(name)`), so it never moves the training
    data's position; its samples carry no index (`Sample.index` is what training records)."""

    def __init__(self, datasets: Sequence[tuple[str, str]], cfg: DataSourceConfig, tokenizer: Any = None) -> None:
        self.cfg = cfg
        self.datasets: dict[str, list[Sample]] = {}
        for name, path in datasets:
            if not Path(path).is_file():
                raise FileNotFoundError(f"--eval-prompt-data {name} {path}: no such file")
            try:
                self.datasets[name] = load_prompts(dataclasses.replace(cfg, prompt_data=path), tokenizer)
            except ValueError as exc:  # the reader's messages name the file; say which flag read it
                raise ValueError(f"--eval-prompt-data {name}: {exc}") from None

    @classmethod
    def from_args(cls, args: Any, tokenizer: Any = None) -> EvalDataSource | None:
        pairs = eval_datasets(getattr(args, "eval_prompt_data", None))
        if not pairs:
            return None
        cfg = dataclasses.replace(DataSourceConfig.from_args(args, prompt_data=pairs[0][1]), rollout_shuffle=False,
                                  n_samples_per_prompt=int(getattr(args, "n_samples_per_eval_prompt", 1) or 1))
        return cls(pairs, cfg, tokenizer)

    @property
    def names(self) -> list[str]:
        return list(self.datasets)

    def groups(self, name: str) -> list[list[Sample]]:
        """Every prompt of dataset `name`, n_samples_per_eval_prompt fresh Samples each."""
        groups = []
        for i, base in enumerate(self.datasets[name]):
            group = []
            for _ in range(self.cfg.n_samples_per_prompt):
                s = copy.deepcopy(base)
                s.group_index = i
                s.metadata = dict(s.metadata, prompt_index=i, eval_dataset=name)
                group.append(s)
            groups.append(group)
        return groups

    def get_samples(self, num_prompts: int) -> list[list[Sample]]:
        # A rollout function that ignores `evaluation` would train-style draw batches from here.
        raise TypeError("this is the evaluation data: take data_source.groups(name) for each name in "
                        "data_source.names and return RolloutFnEvalOutput")
