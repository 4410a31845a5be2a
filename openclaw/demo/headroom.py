"""Teacher headroom: can OPD's teacher show a persona's preference at all?

    python -m openclaw.demo.headroom [--persona NAME|FILE ...] [--prompts train|heldout] [--limit N]
                                     [--model-path PATH | --engine-url URL] [--json FILE]

On-policy distillation (and combine's OPD half) moves the policy toward the *same model shown
the user's feedback* (`openclaw.bridge.teacher.teacher_messages`). If that hinted model does not
meet the preference either, OPD has nothing to distil, and only the rare sampled reply that
meets it gives binary RL something to reinforce. This measures it before any training: for each
prompt, the policy's greedy reply, the persona's verdict and feedback, the hint the judge's
extractor makes of that feedback (`openclaw.judge.feedback_hint`), and the greedy reply of the
teacher prompt built from it. Same decoding and verdicts as the main job's evaluation
(`openclaw.demo.evaluate`). Persona files written by a user work the same way: run this first to
see whether the model can learn the preference from its own hinted self.
"""

from __future__ import annotations

import argparse
import json
import random
import signal
import sys
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from openclaw.demo.personas import Persona, PersonaError, PromptItem, load_persona, persona_names


@dataclass(frozen=True)
class Headroom:
    """Percentages over the prompts; the teacher's reply is the policy's own where no hint was made
    (the user accepted, or the feedback carried nothing to correct), as in training."""

    persona: str
    prompts: int
    hinted: int  # prompts where the feedback became a hint
    policy_meets: float  # % of policy replies meeting the preference (IFEval checkers)
    policy_accepted: float  # % meeting it and on topic
    policy_on_topic: float
    teacher_meets: float
    teacher_accepted: float
    teacher_on_topic: float
    examples: list[dict[str, Any]]

    def row(self) -> str:
        return (f"{self.persona:<14} {self.prompts:>7} {self.hinted:>6} {self.policy_meets:>8.1f} "
                f"{self.policy_accepted:>9.1f} {self.policy_on_topic:>9.1f} {self.teacher_meets:>9.1f} "
                f"{self.teacher_accepted:>10.1f} {self.teacher_on_topic:>10.1f}")


HEADER = (f"{'persona':<14} {'prompts':>7} {'hinted':>6} {'policy%':>8} {'accepted%':>9} {'on-topic%':>9} "
          f"{'teacher%':>9} {'accepted%':>10} {'on-topic%':>10}")


def teacher_prompt(question: str, feedback: str) -> str | None:
    """The single user message the teacher is shown for this feedback, or None when the judge's
    hint extractor rejects the feedback (no hint: the teacher is the policy)."""
    from openclaw.bridge.teacher import teacher_messages
    from openclaw.judge.feedback_hint import feedback_hint

    vote = feedback_hint(feedback, "user", label=-1)
    if not vote.accept or not vote.hint:
        return None
    (message,) = teacher_messages([{"role": "user", "content": question}], vote.hint)
    return str(message["content"])


def measure(url: str, tokenizer: Any, persona: Persona, items: list[PromptItem], max_tokens: int) -> Headroom:
    from openclaw.demo.evaluate import generate_greedy

    rng = random.Random(0)  # the feedback phrasing picked per reply, as the evaluation seeds it
    policy = [text for _, _, text in generate_greedy(url, tokenizer, [i.prompt for i in items], max_tokens)]
    verdicts = [persona.judge(text, item, rng) for text, item in zip(policy, items, strict=True)]
    prompts = [None if v.accepted else teacher_prompt(i.prompt, v.feedback) for v, i in zip(verdicts, items, strict=True)]
    hinted = [p for p in prompts if p is not None]
    taught = iter(text for _, _, text in generate_greedy(url, tokenizer, hinted, max_tokens)) if hinted else iter(())
    teacher = [next(taught) if p is not None else reply for p, reply in zip(prompts, policy, strict=True)]
    tverdicts = [persona.judge(text, item, rng) for text, item in zip(teacher, items, strict=True)]
    n = len(items)

    def pct(flags: list[bool]) -> float:
        return 100.0 * sum(flags) / n

    examples = [{"prompt": i.prompt, "policy": p, "policy_meets": v.meets_preference, "feedback": v.feedback,
                 "teacher_prompt": tp, "teacher": t, "teacher_meets": tv.meets_preference}
                for i, p, v, tp, t, tv in zip(items, policy, verdicts, prompts, teacher, tverdicts, strict=True)]
    return Headroom(persona.name, n, len(hinted), pct([v.meets_preference for v in verdicts]),
                    pct([v.accepted for v in verdicts]), pct([v.on_topic for v in verdicts]),
                    pct([v.meets_preference for v in tverdicts]),
                    pct([v.accepted for v in tverdicts]), pct([v.on_topic for v in tverdicts]), examples)


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m openclaw.demo.headroom", description=__doc__.split("\n\n")[1])
    p.add_argument("--persona", nargs="+", default=None,
                   help=f"shipped personas ({', '.join(persona_names())}) or persona JSON files; default: all shipped")
    p.add_argument("--prompts", choices=("train", "heldout"), default="train",
                   help="the main job's training prompts (what the teacher sees in training) or its held-out ones")
    p.add_argument("--limit", type=int, default=None, help="only the first N prompts")
    p.add_argument("--max-tokens", type=int, default=48, help="reply cap (the main job's evaluation cap)")
    src = p.add_mutually_exclusive_group()
    src.add_argument("--model-path", default=None, help="default: the embedded SmolLM2-135M-Instruct")
    src.add_argument("--engine-url", default=None,
                     help="an engine already serving SGLang's native /generate (SGLang, or `python -m "
                          "openclaw.engines`); --tokenizer-path then names its tokenizer")
    p.add_argument("--tokenizer-path", default=None, help="with --engine-url: the served model's tokenizer")
    p.add_argument("--threads", type=int, default=None,
                   help="the engine's torch threads (OMP_NUM_THREADS; default 1): more than the idle cores makes "
                        "OpenMP spin")
    p.add_argument("--json", default=None, help="write every persona's numbers and replies here")
    args = p.parse_args(argv)
    if args.limit is not None and args.limit < 1 or args.threads is not None and args.threads < 1:
        p.error("--limit and --threads must be positive")
    if args.engine_url and not args.tokenizer_path:
        p.error("--engine-url needs --tokenizer-path: the prompts are rendered with the served model's chat template")
    if not args.engine_url and args.tokenizer_path:
        p.error("--tokenizer-path goes with --engine-url: the engine this command starts uses the model's own")
    if args.engine_url and args.threads is not None:
        p.error("--threads sets the engine this command starts; with --engine-url the served engine's are its own")
    args.threads = 1 if args.threads is None else args.threads
    try:
        args.personas = [load_persona(name) for name in (args.persona or persona_names())]
    except PersonaError as exc:
        p.error(str(exc))
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    signal.signal(signal.SIGTERM, signal.default_int_handler)  # a kill stops the engine we start, as Ctrl-C does
    from slime.backends.fsdp.model import load_tokenizer
    from slime.ray.engine_process import EngineProcess

    from openclaw.demo import evaluate as ev
    from openclaw.models import resolve_model_path

    items = (ev.train_prompts() if args.prompts == "train" else ev.heldout_prompts())[: args.limit]
    engine = None
    if args.engine_url:
        url, tokenizer_path = args.engine_url.rstrip("/"), args.tokenizer_path
    else:
        tokenizer_path = str(resolve_model_path(args.model_path))
        print(f"starting the engine on {tokenizer_path}", flush=True)
        engine = EngineProcess(model_path=tokenizer_path, max_batch_size=max(48, len(items)),
                               engine_command="python -m openclaw.engines.serve",
                               extra_env={"OMP_NUM_THREADS": str(args.threads)})
        engine.start()
        url = engine.url
    results = []
    try:
        tokenizer = load_tokenizer(tokenizer_path)
        for k, persona in enumerate(args.personas, 1):
            print(f"[{k}/{len(args.personas)}] {persona.name}: {len(items)} {args.prompts} prompts", flush=True)
            results.append(measure(url, tokenizer, persona, items, args.max_tokens))
    finally:
        if engine is not None:
            engine.stop()
    print("\ngreedy replies; teacher = the policy shown the user's feedback as a hint (where the judge makes one)")
    print(HEADER)
    print("-" * len(HEADER))
    for r in results:
        print(r.row())
    if args.json:
        Path(args.json).write_text(json.dumps([asdict(r) for r in results], indent=2) + "\n")
        print(f"\nreplies and numbers: {args.json}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
