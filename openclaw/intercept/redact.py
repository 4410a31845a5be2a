"""Secret redaction, applied to every string of a turn before anything is written to disk.

Token ids cannot be redacted in place (the ids of a secret ARE the secret), so a turn in which
anything was redacted keeps its redacted text but drops its prompt/response token ids and
log-probs and is stored non-trainable (see openclaw.intercept.observer).
"""

from __future__ import annotations

import re
from collections import OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

# (kind, regex, triggers, on_lower). A named group `keep` is kept verbatim (e.g. the
# `password=` before a value). Speed matters: a turn re-sends its whole history (~32 KB for 8k
# tokens) and this runs on the request path. So (1) a pattern only runs on strings containing
# one of its triggers (a plain substring test: on the original text for triggers with capitals,
# on the lower-cased text otherwise), (2) every regex starts
# with a literal so `re` can skip ahead (word boundaries are lookbehinds placed after the
# literal), (3) case-insensitive patterns run, without IGNORECASE, on the lower-cased text and
# their spans are applied to the original, and (4) results are cached per string.
# A kind listed in VALIDATORS keeps only the matches its check accepts (card numbers: Luhn).
# Exceptions to (2): `payment_card` starts with a digit class (and has no trigger) and `email`
# with the local-part class; both bound every repetition, so a scan stays linear.
_NW = "[A-Za-z0-9_]"  # a word character (lookbehinds stand in for a leading \b)
# Words that follow "password is" in ordinary prose ("the password is required") and are not a
# password. Only unquoted single words are checked against it.
_NOT_A_PASSWORD = (
    "required|incorrect|wrong|invalid|correct|too|not|no|a|an|the|empty|blank|missing|expired|strong|weak|"
    "set|reset|needed|optional|case|different|same|what|where|secure|safe|hidden|stored|saved|protected|"
    "long|short|only|also|never|always|still|in|on|at|for|of|to|and|or|my|your|his|her|their|our|this|that|"
    "it|you|i|we|mine|yours|ok|okay|fine|good|bad|easy|hard|simple|important|sensitive|private|secret|"
    "[a-z]+(?:ed|ing|ly)"
)
_PW_VALUE = (rf"(?!\[redacted:)(?:\"[^\"\n]{{1,100}}\"|'[^'\n]{{1,100}}'|“[^”\n]{{1,100}}”"
             rf"|(?!(?:{_NOT_A_PASSWORD})(?![^\s\"'“”‘’`,;.!?]))[^\s\"'“”‘’`,;]{{2,100}})")
DEFAULT_PATTERNS: tuple[tuple[str, str, tuple[str, ...], bool], ...] = (
    ("private_key", r"-----BEGIN[A-Z ]{0,40}PRIVATE KEY(?: BLOCK)?-----[\s\S]*?(?:-----END[A-Z ]{0,40}PRIVATE KEY(?: BLOCK)?-----|\Z)", ("private key",), False),
    ("openai_key", rf"sk-(?<!{_NW}sk-)[A-Za-z0-9_\-]{{16,}}", ("sk-",), False),
    ("github_token", rf"gh[pousr]_(?<!{_NW}gh._)[A-Za-z0-9]{{20,}}", ("ghp_", "gho_", "ghu_", "ghs_", "ghr_"), False),
    ("github_token", rf"github_pat_(?<!{_NW}github_pat_)[A-Za-z0-9_]{{20,}}", ("github_pat_",), False),
    ("aws_access_key", rf"A(?<!{_NW}A)(?:KIA|SIA|GPA|IDA|ROA|NPA|NVA)[0-9A-Z]{{16}}(?![0-9A-Za-z])", ("AKIA", "ASIA", "AGPA", "AIDA", "AROA", "ANPA", "ANVA"), False),
    ("aws_secret", r"(?P<keep>aws_?secret_?access_?key[\"']?\s*[=:]\s*[\"']?)[A-Za-z0-9/+=]{40}", ("secret",), True),
    ("slack_token", rf"xox[abposr]-(?<!{_NW}xox.-)[A-Za-z0-9-]{{10,}}", ("xox",), False),
    ("google_api_key", rf"AIza(?<!{_NW}AIza)[0-9A-Za-z\-_]{{35}}", ("AIza",), False),
    ("hf_token", rf"hf_(?<!{_NW}hf_)[A-Za-z0-9]{{30,}}", ("hf_",), False),
    ("jwt", rf"eyJ(?<!{_NW}eyJ)[A-Za-z0-9_-]{{8,}}\.eyJ[A-Za-z0-9_-]{{8,}}\.[A-Za-z0-9_-]{{8,}}", ("eyJ",), False),
    ("bearer", rf"(?P<keep>bearer(?<!{_NW}bearer)\s+)[A-Za-z0-9\-._~+/]{{8,}}=*", ("bearer",), True),
    ("url_credentials", r"(?P<keep>://)[^\s/:@]{1,256}:[^\s/@]{1,256}@", ("://",), False),
    ("stripe_key", rf"[sr]k(?<!{_NW}[sr]k)_(?:live|test)_[A-Za-z0-9]{{16,}}",
     ("sk_live_", "rk_live_", "sk_test_", "rk_test_"), False),
    ("gitlab_token", rf"gl(?<!{_NW}gl)(?:pat|dt|rt|ptt|ft|soat|agent)-[A-Za-z0-9_\-]{{20,}}",
     ("glpat-", "gldt-", "glrt-", "glptt-", "glft-", "glsoat-", "glagent-"), False),
    ("assignment", r"(?=[apcs])(?P<keep>(?:api[_-]?key|secret[_-]?key|client[_-]?secret|access[_-]?token|auth[_-]?token|password|passwd)[\"']?\s*[=:]\s*[\"']?)[^\s\"',;]{6,}", ("api_key", "api-key", "apikey", "secret", "access_token", "access-token", "accesstoken", "auth_token",
      "auth-token", "authtoken", "passw"), True),
    # Passwords in prose: "my password is hunter2", "pw: x", "the password for the VPN is 'a b'".
    ("password", r"(?=p)(?P<keep>p(?<![a-z0-9_]p)(?:assword|asswd|assphrase|asscode|wd|w)(?![a-z0-9_])"
     r"(?:\s+(?:for|of|on|to)(?:\s+[^\s:]{1,40}){1,3}?)?\s*(?:(?:is|was)\b\s*:?|[:=])\s*"
     r"(?:(?:now|still|just)\s+)?)" + _PW_VALUE, ("passw", "passphrase", "passcode", "pwd", "pw"), True),
    # A candidate card number: 13-19 digits (single spaces/dashes between allowed), first digit
    # 2-6 (Visa, Mastercard, Amex, Discover, ...), not part of a longer number; Luhn-checked.
    ("payment_card", r"[2-6](?<![0-9][2-6])(?:[ -]?[0-9]){12,18}(?![0-9])", (), False),
    ("email", r"(?<![A-Za-z0-9._%+\-])[A-Za-z0-9._%+\-]{1,64}@[A-Za-z0-9\-]{1,63}(?:\.[A-Za-z0-9\-]{1,63}){0,8}"
     r"\.[A-Za-z]{2,24}(?![A-Za-z0-9\-])", ("@",), False),
)


def luhn_valid(text: str) -> bool:
    """The Luhn checksum of the digits in `text` (payment card numbers pass; most numbers don't)."""
    digits = [int(c) for c in text if c.isdigit()]
    total = 0
    for i, d in enumerate(reversed(digits)):
        if i % 2:
            d *= 2
            if d > 9:
                d -= 9
        total += d
    return bool(digits) and total % 10 == 0


VALIDATORS: dict[str, Callable[[str], bool]] = {"payment_card": luhn_valid}


@dataclass
class Redactor:
    """Every pattern (gated by its triggers) over every string, with an LRU cache:
    a session re-sends its whole history every turn, so most strings were seen before."""

    extra: Sequence[re.Pattern[str]] = ()
    cache_size: int = 4096
    _pats: list[tuple[str, re.Pattern[str], re.Pattern[str] | None, tuple[tuple[str, bool], ...],
                      Callable[[str], bool] | None]] = field(init=False, repr=False)
    _cache: OrderedDict[str, tuple[str, int]] = field(init=False, repr=False)

    def __post_init__(self) -> None:
        self._pats = [
            (kind, re.compile(rx), re.compile(rx, re.IGNORECASE) if lower else None,
             tuple((t, t != t.lower()) for t in trig), VALIDATORS.get(kind))
            for kind, rx, trig, lower in DEFAULT_PATTERNS
        ]
        self._pats += [(f"custom{j}", p, None, (), None) for j, p in enumerate(self.extra)]
        self._cache = OrderedDict()

    def redact_text(self, s: str) -> tuple[str, int]:
        if len(s) < 6:
            return s, 0
        hit = self._cache.get(s)
        if hit is not None:
            self._cache.move_to_end(s)
            return hit
        low = s.lower()
        out, count = s, 0
        for kind, rx, rx_ci, triggers, valid in self._pats:
            if triggers and not any(t in (out if exact else low) for t, exact in triggers):
                continue
            if rx_ci is not None:
                # Case-insensitive: match the lower-cased text, splice spans into the original.
                # (str.lower can change the length of a few characters; then use IGNORECASE.)
                matches = list(rx.finditer(low)) if len(low) == len(out) else list(rx_ci.finditer(out))
            else:
                matches = list(rx.finditer(out))
            if valid is not None:
                matches = [m for m in matches if valid(m.group(0))]
            if not matches:
                continue
            out = _splice(out, matches, f"[REDACTED:{kind}]")
            count += len(matches)
            low = out.lower()
        res = (out, count)
        if len(s) <= 1 << 20:
            self._cache[s] = res
            if len(self._cache) > self.cache_size:
                self._cache.popitem(last=False)
        return res

    def redact(self, obj: Any) -> tuple[Any, int]:
        """Redact every string in a JSON-like value (dict keys included). Returns (copy, count)."""
        if isinstance(obj, str):
            return self.redact_text(obj)
        if isinstance(obj, dict):
            total = 0
            out: dict[Any, Any] = {}
            for k, v in obj.items():
                if isinstance(k, str):
                    k, n = self.redact_text(k)
                    total += n
                v2, n = self.redact(v)
                total += n
                out[k] = v2
            return out, total
        if isinstance(obj, list | tuple):
            total = 0
            items = []
            for v in obj:
                v2, n = self.redact(v)
                total += n
                items.append(v2)
            return items, total
        return obj, 0


def _splice(s: str, matches: list[re.Match[str]], placeholder: str) -> str:
    parts: list[str] = []
    pos = 0
    for m in matches:
        start, end = m.span()
        parts.append(s[pos:start])
        if "keep" in m.re.groupindex and m.start("keep") >= 0:
            ks, ke = m.span("keep")
            parts.append(s[ks:ke])
        parts.append(placeholder)
        pos = end
    parts.append(s[pos:])
    return "".join(parts)
