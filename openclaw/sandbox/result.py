"""The typed outcome of one sandboxed command."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class ExecResult:
    exit_code: int  # the command's exit status; 128+N when killed by signal N (bwrap's convention)
    stdout: str
    stderr: str
    truncated: bool  # some output past Limits.max_output_bytes was discarded
    timed_out: bool
    # "timeout", "cpu_limit", "file_size_limit", "episode_memory_limit", "episode_process_limit",
    # "workspace_quota", "signal:SIGKILL", ...
    killed_reason: str | None
    duration_s: float
    stdout_bytes: int = 0  # total bytes the command wrote, including discarded ones
    stderr_bytes: int = 0
    # Per-episode caps this command ran into ("episode_memory", "episode_processes",
    # "workspace_quota"), whether or not it was killed for it (a refused fork or write is not).
    limits_hit: tuple[str, ...] = ()

    @property
    def ok(self) -> bool:
        return self.exit_code == 0 and not self.timed_out

    def observation(self, max_chars: int = 4000) -> str:
        """A compact text rendering for an agent's observation."""
        parts = []
        if self.stdout:
            parts.append(self.stdout)
        if self.stderr:
            parts.append(self.stderr)
        text = "\n".join(p.rstrip("\n") for p in parts)
        if len(text) > max_chars:
            text = text[:max_chars] + "\n...[truncated]"
            truncated = True
        else:
            truncated = self.truncated
        if truncated and not text.endswith("[truncated]"):
            text += "\n...[output truncated]"
        status = f"[exit code {self.exit_code}]"
        if self.timed_out:
            status = "[timed out]"
        elif self.killed_reason:
            status = f"[killed: {self.killed_reason}, exit code {self.exit_code}]"
        if self.limits_hit:
            status += f" [episode limit reached: {', '.join(self.limits_hit)}]"
        return f"{text}\n{status}" if text else status
