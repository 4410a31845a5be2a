"""An engine's weight_version is read strictly: SGLang's initial "default" is version 0, an integer
is itself, anything else is an error (a guessed 0 would blind the trainer's staleness check)."""

from __future__ import annotations

import pytest

from openclaw.engines.sglang_protocol import result_from_sglang


def _response(version: object) -> dict:
    return {"text": "hi", "output_ids": [5], "meta_info": {
        "id": "r1", "finish_reason": {"type": "stop"}, "weight_version": version,
        "output_token_logprobs": [[-0.5, 5, None]]}}


@pytest.mark.parametrize(("reported", "expected"), [("default", 0), (None, 0), (3, 3), ("7", 7)])
def test_readable_versions(reported: object, expected: int) -> None:
    assert result_from_sglang(_response(reported)).weight_version == expected


@pytest.mark.parametrize("reported", ["v2-lora", "", 1.5j])
def test_unreadable_version_is_an_error_naming_it(reported: object) -> None:
    with pytest.raises(ValueError, match="unreadable weight_version"):
        result_from_sglang(_response(reported))
