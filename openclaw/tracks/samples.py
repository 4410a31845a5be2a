"""What a trainer Sample names for a track: the full record it carries, or the id to look up."""

from __future__ import annotations

from typing import Any


def named_in_sample(sample: Any, record_key: str, id_key: str) -> dict[str, Any] | str:
    """metadata[record_key] when it is a whole record (it wins); else the id in metadata[id_key],
    else the sample's label. A sample that names nothing is refused."""
    meta = sample.metadata or {}
    if isinstance(meta.get(record_key), dict):
        return meta[record_key]
    found = meta.get(id_key) or sample.label
    if not found:
        raise ValueError(f"sample {sample.index}: metadata has neither {record_key!r} nor {id_key!r} (and no label)")
    return found
