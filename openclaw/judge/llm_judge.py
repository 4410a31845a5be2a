"""LLM judge: m PRM votes (and m hint votes) per turn through an OpenAI-compatible endpoint,
aggregated by majority vote. Calls for one batch run concurrently on a bounded thread pool;
each call is bounded by the client's timeout and retries, so a batch always finishes."""

from __future__ import annotations

import logging
from concurrent.futures import ThreadPoolExecutor

from openclaw.judge.config import JudgeConfig
from openclaw.judge.hints import HintVote, aggregate_hints, parse_hint_vote
from openclaw.judge.launcher import LaunchedJudgeServer, launch_judge_server
from openclaw.judge.llm_client import ChatClient, JudgeCallError
from openclaw.judge.prompts import build_hint_messages, build_prm_messages
from openclaw.judge.schema import JudgeFailure, JudgeInput, JudgeResult, Stopwatch
from openclaw.judge.votes import majority_vote, parse_verdict

log = logging.getLogger(__name__)


class LLMJudge:
    name = "llm"

    def __init__(self, config: JudgeConfig, client: ChatClient | None = None) -> None:
        self.config = config
        self._server: LaunchedJudgeServer | None = None
        if client is None:
            url = config.judge_url
            if not url:
                assert config.prm_model_path, "validated by JudgeConfig"
                log.info("launching judge server on %s", config.prm_model_path)
                engine = [] if config.prm_backend == "hf" and config.prm_tp_size == 1 else \
                    ["--backend", config.prm_backend, "--tp-size", str(config.prm_tp_size)]
                self._server = launch_judge_server(config.prm_model_path, extra_args=engine)
                url = self._server.base_url
            client = ChatClient(url, config.api_key(), config.timeout_s, config.retries, config.judge_model)
        self.client = client
        width = max(1, config.m + (config.hint_votes if config.extract_hints else 0)) * config.batch_size
        self._pool = ThreadPoolExecutor(max_workers=min(64, width), thread_name_prefix="judge-call")

    def _call(self, messages: list[dict[str, str]], seed: int) -> tuple[str | None, str | None]:
        """(completion text, error). Errors become invalid votes, recorded with the result."""
        try:
            return self.client.chat(messages, self.config.temperature, self.config.max_tokens, seed=seed).text, None
        except JudgeCallError as e:
            return None, str(e)

    def judge_batch(self, items: list[JudgeInput]) -> list[JudgeResult | JudgeFailure]:
        watch = Stopwatch()
        m, hm = self.config.m, (self.config.hint_votes if self.config.extract_hints else 0)
        futures = []
        for item in items:
            prm = build_prm_messages(item.response, item.next_state, item.next_state_role, item.prompt)
            hint = build_hint_messages(item.response, item.next_state, item.next_state_role, item.prompt)
            futures.append(([self._pool.submit(self._call, prm, k) for k in range(m)],
                            [self._pool.submit(self._call, hint, 1000 + k) for k in range(hm)]))
        results = []
        for prm_f, hint_f in futures:
            prm_out = [f.result() for f in prm_f]
            hint_out = [f.result() for f in hint_f]
            errors = [e for _, e in prm_out + hint_out if e]
            if len(errors) == len(prm_out) + len(hint_out):
                # Nothing came back at all: a failure of the judge, not a verdict of 0.
                results.append(JudgeFailure(errors[0]))
                continue
            votes = [parse_verdict(t) if t is not None else None for t, _ in prm_out]
            if all(v is None for v in votes):
                # No completion held a verdict: that is not a score of 0 (it would train the policy
                # on noise); it is a failure of the judge, recorded and retried like a timeout.
                unparseable = sum(t is not None for t, _ in prm_out)
                sample = next((t for t, _ in prm_out if t is not None), "")
                why = (f"no parseable verdict in {unparseable} judge completion(s) (expected \\boxed{{1}}, "
                       f"\\boxed{{0}} or \\boxed{{-1}}); first: {sample[:200]!r}") if unparseable else errors[0]
                results.append(JudgeFailure(why, invalid_votes=unparseable))
                continue
            vr = majority_vote(votes, self.config.threshold)
            rationale = next((t for (t, _), v in zip(prm_out, votes, strict=True) if v is not None and v == vr.label), None)
            if rationale is None:
                rationale = next((t for t, _ in prm_out if t), None)
            result = JudgeResult(reward=vr.reward, votes=votes, backend=self.name, rationale=rationale,
                                 vote_reason=vr.reason, all_invalid=vr.all_invalid,
                                 extra={"call_errors": errors[:5], "counts": {str(k): v for k, v in vr.counts.items()}})
            if hm:
                hvotes = [parse_hint_vote(t) if t is not None else HintVote(None, None) for t, _ in hint_out]
                agg = aggregate_hints(hvotes, self.config.hint_min_chars)
                result.hint, result.hint_reason = agg.hint, agg.reason
                result.hint_votes = [{"accept": v.accept, "hint": v.hint} for v in hvotes]
            results.append(result)
        per_item = watch.elapsed() / max(1, len(items))
        for r in results:
            if isinstance(r, JudgeResult):
                r.timings = {"score_s": per_item, "total_s": per_item}
        return results

    def close(self) -> None:
        self._pool.shutdown(wait=False, cancel_futures=True)
        self.client.close()
        if self._server is not None:
            self._server.stop()
            self._server = None
