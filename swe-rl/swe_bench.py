"""SWE_BENCH_PATH: a user's SWE-bench instances (JSON/JSONL, SWE-bench field names) plus local
repository mirrors, and the lookup from a trainer Sample to its instance.

    SWE_BENCH_PATH=/data/swe-bench            # a folder: one *.json/*.jsonl file + repos/<owner>__<name>/
    SWE_BENCH_PATH=/data/lite.jsonl           # a file; mirrors in SWE_BENCH_REPOS (default: <its folder>/repos)

A mirror is a git clone (it must contain base_commit); the repository's Python dependencies go in
repos/<owner>__<name>.deps (pip install --target). What is missing is named when an instance is
loaded. Without SWE_BENCH_PATH the shipped instances (swe-rl/instances/) are used.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from swe_instances import Instance, read_instances, shipped_instances

from openclaw.environment import env_value
from openclaw.tracks import named_in_sample

BENCHMARKS = {
    "swe-bench-lite": ("princeton-nlp/SWE-bench_Lite", "SWE-bench_Lite test split (300 instances)"),
    "swe-bench-verified": ("princeton-nlp/SWE-bench_Verified", "SWE-bench Verified (500 instances)"),
    "swe-bench": ("princeton-nlp/SWE-bench", "full SWE-bench test split (2294 instances)"),
}


def benchmark_help(name: str) -> str:
    """What to provide for a public SWE-bench variant (nothing is downloaded: no network here)."""
    if name not in BENCHMARKS:
        raise ValueError(f"unknown benchmark {name!r}; known: {', '.join(BENCHMARKS)} (or the shipped 'heldout')")
    dataset, what = BENCHMARKS[name]
    return (
        f"--benchmark {name} needs local data ({what}); nothing is downloaded. Provide:\n"
        f"  1. the instances as JSON/JSONL with SWE-bench's fields, e.g. on a machine with network:\n"
        f"     python -c \"import datasets; datasets.load_dataset('{dataset}', split='test')"
        f".to_json('{name}.jsonl')\"\n"
        f"  2. repos/<owner>__<name>/ beside it: a git clone of each repository (e.g. repos/astropy__astropy)\n"
        f"  3. repos/<owner>__<name>.deps/: the repository's Python dependencies "
        f"(pip install --target) for its tests (pytest-based repositories only)\n"
        f"then set SWE_BENCH_PATH=/path/to/folder (or the .jsonl file and SWE_BENCH_REPOS=/path/to/repos)."
    )


@dataclass(frozen=True)
class SweBenchPath:
    instances_file: Path
    mirrors: str

    @classmethod
    def parse(cls, value: str) -> SweBenchPath:
        path = Path(value)
        if path.is_dir():
            files = sorted(p for p in path.iterdir() if p.suffix in (".json", ".jsonl"))
            if len(files) != 1:
                raise FileNotFoundError(f"SWE_BENCH_PATH={value}: expected exactly one .json/.jsonl instances file "
                                        f"in the folder, found {[f.name for f in files]}")
            instances, default_mirrors = files[0], path / "repos"
        elif path.is_file():
            instances, default_mirrors = path, path.parent / "repos"
        else:
            raise FileNotFoundError(f"SWE_BENCH_PATH={value} does not exist (a SWE-bench .json/.jsonl file or a "
                                    "folder holding one and repos/)")
        return cls(instances, env_value("SWE_BENCH_REPOS") or str(default_mirrors))

    def load(self) -> list[Instance]:
        return read_instances(self.instances_file)


_CACHE: dict[str, dict[str, Instance]] = {}


def _index(source: SweBenchPath | None) -> dict[str, Instance]:
    key = str(source.instances_file) if source else "shipped"
    if key not in _CACHE:
        rows = source.load() if source else shipped_instances()
        _CACHE[key] = {i.instance_id: i for i in rows}
    return _CACHE[key]


def instance_for_sample(sample: Any, source: SweBenchPath | None) -> Instance:
    """metadata.instance (a full instance) wins; else metadata.instance_id / label, looked up."""
    named = named_in_sample(sample, "instance", "instance_id")
    if isinstance(named, dict):
        return Instance.from_dict(named)
    found = _index(source).get(named)
    if found is None:
        where = source.instances_file if source else "swe-rl/instances/"
        raise ValueError(f"sample {sample.index}: unknown instance id {named!r} in {where}")
    return found
