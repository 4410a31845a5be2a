"""python -m openclaw.models prepare|path|info|tiny"""

from __future__ import annotations

import argparse
import json
import sys

from openclaw.models.atomic import is_ready
from openclaw.models.embedded import (
    EMBEDDED_MODEL_NAME,
    EmbeddedModelMissing,
    embedded_model_dir,
    gguf_file,
    prepare_embedded_model,
)
from openclaw.models.tiny import build_tiny_model


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m openclaw.models", description=__doc__)
    sub = parser.add_subparsers(dest="cmd", required=True)
    sub.add_parser("prepare", help="convert the embedded GGUF to an HF folder (once)")
    sub.add_parser("path", help="print the embedded model folder (prepares it if needed)")
    sub.add_parser("info", help="show where the embedded model comes from and whether it is ready")
    tiny = sub.add_parser("tiny", help="build a tiny random test model and print its folder")
    tiny.add_argument("--arch", choices=["qwen3", "llama"], default="qwen3")
    tiny.add_argument("--seed", type=int, default=0)
    tiny.add_argument("--tie-word-embeddings", action="store_true")
    tiny.add_argument("--out", default=None)
    tiny.add_argument("--tokenizer", default=None, help="a folder with the SmolLM2 tokenizer files (default: the "
                      "embedded model's, converted first if needed)")
    args = parser.parse_args(argv)
    try:
        if args.cmd == "prepare":
            print(prepare_embedded_model(verbose=True))
        elif args.cmd == "path":
            print(prepare_embedded_model())
        elif args.cmd == "info":
            target = embedded_model_dir()
            info = {"name": EMBEDDED_MODEL_NAME, "path": str(target), "ready": is_ready(target)}
            try:
                info["gguf"] = str(gguf_file())
            except EmbeddedModelMissing as exc:
                info["gguf"] = None
                info["error"] = str(exc)
            print(json.dumps(info, indent=2))
        elif args.cmd == "tiny":
            from pathlib import Path

            print(build_tiny_model(args.arch, args.seed, args.tie_word_embeddings,
                                   Path(args.out) if args.out else None,
                                   Path(args.tokenizer) if args.tokenizer else None))
    except EmbeddedModelMissing as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
