"""Secret redaction, applied to every string of a turn before anything is written to disk.

Token ids cannot be redacted in place (the ids of a secret ARE the secret), so a turn in which
anything was redacted keeps its redacted text but drops its prompt/response token ids and
log-probs and is stored non-trainable (see openclaw.intercept.observer).

Some kinds are recognised only by their context ("my vault passphrase is X", `api_key=X`); once
the conversation repeats X without that context, no pattern sees it. `SessionSecrets` remembers
such values per session, in this process's memory only, and `KnownSecrets` redacts them wherever
they come back in that session.
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
    # AWS secret access keys (40 characters of base64) have no prefix: recognised by their label in
    # any spelling (`aws_secret_access_key=`, the AWS CLI's JSON `"SecretAccessKey": "..."`,
    # `aws configure`'s "AWS Secret Access Key [None]: ", "the secret access key is ..."), by a
    # looser "AWS secret" cue ("my AWS secret is ...") when the value has exactly that shape, or
    # right after an access key id (credentials CSV, "AKIA... / wJalr..."). These run before
    # `aws_access_key`, whose match would hide the key id the last form keys on.
    ("aws_secret", r"(?P<keep>secret[\s_-]?access[\s_-]?key[\"']?(?:\s*\[[^\]\n]{0,20}\])?"
     r"(?:\s+(?:for|of|on|to)(?:\s+[^\s:]{1,40}){1,3}?)?\s*(?:(?:is|was)\b\s*:?|[=:])\s*[\"']?)[a-z0-9/+=]{16,}",
     ("secret",), True),
    ("aws_secret", r"(?P<keep>aws(?<![a-z0-9_]aws)[\s_-]+(?:[a-z]+[\s_-]+){0,2}?secret(?:[\s_-]*(?:access[\s_-]*)?key)?"
     r"[\"']?(?:\s+(?:for|of|on|to)(?:\s+[^\s:]{1,40}){1,3}?)?\s*(?:(?:is|was)\b\s*:?|[=:])\s*[\"']?)"
     r"[a-z0-9/+]{40}(?![a-z0-9/+=])", ("secret",), True),
    ("aws_secret", r"(?P<keep>a(?<![a-z0-9_]a)(?:kia|sia)[0-9a-z]{16}[\"']?\s*[\s,:;|=/]\s*[\"']?)"
     r"[a-z0-9/+]{40}(?![a-z0-9/+=])", ("AKIA", "ASIA"), True),
    # The session token that comes with temporary credentials (the same JSON, AWS_SESSION_TOKEN=).
    ("aws_session_token", r"(?P<keep>session[\s_-]?token[\"']?\s*[=:]\s*[\"']?)[a-z0-9/+=]{16,}", ("token",), True),
    ("aws_access_key", rf"A(?<!{_NW}A)(?:KIA|SIA|GPA|IDA|ROA|NPA|NVA)[0-9A-Z]{{16}}(?![0-9A-Za-z])", ("AKIA", "ASIA", "AGPA", "AIDA", "AROA", "ANPA", "ANVA"), False),
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


# Kinds recognised by their surroundings, not by the value itself: a repeat of the value without
# the cue is invisible to the patterns, so these values are remembered per session. Every other
# built-in kind matches the value on its own wherever it reappears. Custom patterns (`customN`)
# may depend on context too and are remembered as well.
CONTEXTUAL_KINDS = frozenset({"aws_secret", "aws_session_token", "bearer", "url_credentials", "assignment", "password"})
_QUOTES = {'"': '"', "'": "'", "“": "”", "‘": "’"}

Found = tuple[tuple[str, str], ...]  # (kind, value) of the contextual secrets found in a string


def _remembered(kind: str, m: re.Match[str], s: str) -> str | None:
    """The secret part of a match worth remembering (None: not a contextual kind, or too short)."""
    if kind not in CONTEXTUAL_KINDS and not kind.startswith("custom"):
        return None
    start = m.end("keep") if "keep" in m.re.groupindex and m.start("keep") >= 0 else m.start()
    value = s[start:m.end()]
    if kind == "url_credentials":  # "user:password@": the password
        value = value.partition(":")[2][:-1]
    if len(value) >= 2 and _QUOTES.get(value[0]) == value[-1]:
        value = value[1:-1]
    value = value.strip()
    return value if len(value) >= 2 else None


@dataclass
class Redactor:
    """Every pattern (gated by its triggers) over every string, with an LRU cache:
    a session re-sends its whole history every turn, so most strings were seen before."""

    extra: Sequence[re.Pattern[str]] = ()
    cache_size: int = 4096
    _pats: list[tuple[str, re.Pattern[str], re.Pattern[str] | None, tuple[tuple[str, bool], ...],
                      Callable[[str], bool] | None]] = field(init=False, repr=False)
    _cache: OrderedDict[str, tuple[str, int, Found]] = field(init=False, repr=False)

    def __post_init__(self) -> None:
        self._pats = [
            (kind, re.compile(rx), re.compile(rx, re.IGNORECASE) if lower else None,
             tuple((t, t != t.lower()) for t in trig), VALIDATORS.get(kind))
            for kind, rx, trig, lower in DEFAULT_PATTERNS
        ]
        self._pats += [(f"custom{j}", p, None, (), None) for j, p in enumerate(self.extra)]
        self._cache = OrderedDict()

    def scan_text(self, s: str) -> tuple[str, int, Found]:
        """(redacted text, number of redactions, the contextual secrets found)."""
        if len(s) < 6:
            return s, 0, ()
        hit = self._cache.get(s)
        if hit is not None:
            self._cache.move_to_end(s)
            return hit
        low = s.lower()
        out, count = s, 0
        found: list[tuple[str, str]] = []
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
            for m in matches:
                value = _remembered(kind, m, out)
                if value is not None:
                    found.append((kind, value))
            out = _splice(out, matches, f"[REDACTED:{kind}]")
            count += len(matches)
            low = out.lower()
        res = (out, count, tuple(found))
        if len(s) <= 1 << 20:
            self._cache[s] = res
            if len(self._cache) > self.cache_size:
                self._cache.popitem(last=False)
        return res

    def redact_text(self, s: str, known: KnownSecrets | None = None) -> tuple[str, int]:
        """The patterns, then the values `known` remembers (also in strings too short for a pattern)."""
        out, count, _ = self.scan_text(s)
        if known is not None:
            out, n = known.sub(out)
            count += n
        return out, count

    def redact(self, obj: Any, known: KnownSecrets | None = None) -> tuple[Any, int]:
        """Redact every string in a JSON-like value (dict keys included). Returns (copy, count)."""
        if isinstance(obj, str):
            return self.redact_text(obj, known)
        if isinstance(obj, dict):
            total = 0
            out: dict[Any, Any] = {}
            for k, v in obj.items():
                if isinstance(k, str):
                    k, n = self.redact_text(k, known)
                    total += n
                v2, n = self.redact(v, known)
                total += n
                out[k] = v2
            return out, total
        if isinstance(obj, list | tuple):
            total = 0
            items = []
            for v in obj:
                v2, n = self.redact(v, known)
                total += n
                items.append(v2)
            return items, total
        return obj, 0

    def secrets_in(self, obj: Any) -> list[tuple[str, str]]:
        """The contextual secrets (kind, value) in every string of a JSON-like value."""
        if isinstance(obj, str):
            return list(self.scan_text(obj)[2])
        found: list[tuple[str, str]] = []
        if isinstance(obj, dict):
            for k, v in obj.items():
                if isinstance(k, str):
                    found += self.scan_text(k)[2]
                found += self.secrets_in(v)
        elif isinstance(obj, list | tuple):
            for v in obj:
                found += self.secrets_in(v)
        return found


def _norm(value: str) -> str:
    return " ".join(value.split()).lower()


class KnownSecrets:
    """Remembered values as one regex: any case, any run of whitespace between words, and as a whole
    word where the value starts/ends with a word character (so a short password does not eat
    the middle of ordinary words)."""

    def __init__(self, values: dict[str, str]) -> None:  # normalised value -> kind
        alts = []
        for v in sorted(values, key=len, reverse=True):  # the longest first: "ab cd" before "ab"
            body = r"\s+".join(re.escape(w) for w in v.split())
            pre = r"(?<!\w)" if re.match(r"\w", v) else ""
            post = r"(?!\w)" if re.match(r"\w", v[-1]) else ""
            alts.append(pre + body + post)
        self._rx = re.compile("|".join(alts), re.IGNORECASE)
        self._kinds = dict(values)
        # Most strings contain none of the values: a substring test on the lower-cased text (exact
        # for ASCII text; other text always goes to the regex) skips the case-insensitive scan.
        self._firsts = tuple({v.split()[0] for v in values})

    def sub(self, text: str) -> tuple[str, int]:
        if text.isascii():
            low = text.lower()
            if not any(f in low for f in self._firsts):
                return text, 0
        parts: list[str] = []
        pos = count = 0
        for m in self._rx.finditer(text):
            start = m.start()
            if text[max(0, start - 10):start].upper() == "[REDACTED:":
                continue  # inside a placeholder already written ("password" as a remembered value)
            # A match whose lower-casing differs from the stored key (a few non-ASCII letters fold
            # differently under IGNORECASE) is still redacted, under the generic label.
            parts += [text[pos:start], f"[REDACTED:{self._kinds.get(_norm(m.group(0)), 'secret')}]"]
            pos = m.end()
            count += 1
        if not count:
            return text, 0
        parts.append(text[pos:])
        return "".join(parts), count


class SessionSecrets:
    """Contextual secrets seen in each session, so that a repeat without the cue is redacted too.

    Kept in this process's memory only: writing the values down, even hashed, would put a
    guessable password on disk in a form that can be checked offline. Bounded to the
    `max_sessions` sessions used most recently (the least recent is forgotten first); the memory
    lives as long as the process, beyond the session's idle timeout, so a feedback comment sent
    after the conversation ended is still covered."""

    def __init__(self, max_sessions: int = 10_000) -> None:
        if max_sessions < 1:
            raise ValueError(f"max_sessions must be >= 1, got {max_sessions}")
        self.max_sessions = max_sessions
        self._values: OrderedDict[str, dict[str, str]] = OrderedDict()
        self._known: dict[str, KnownSecrets] = {}
        self._anywhere: KnownSecrets | None = None

    def learn(self, session_id: str, found: Sequence[tuple[str, str]]) -> None:
        if not found:
            return
        values = self._values.setdefault(session_id, {})
        self._values.move_to_end(session_id)
        added = False
        for kind, value in found:
            key = _norm(value)
            if key and key not in values:
                values[key] = kind
                added = True
        if added:
            self._known.pop(session_id, None)
            self._anywhere = None
        while len(self._values) > self.max_sessions:
            old, _ = self._values.popitem(last=False)
            self._known.pop(old, None)
            self._anywhere = None

    def known(self, session_id: str) -> KnownSecrets | None:
        """The session's remembered values (None: none yet)."""
        values = self._values.get(session_id)
        if not values:
            return None
        self._values.move_to_end(session_id)
        known = self._known.get(session_id)
        if known is None:
            known = self._known[session_id] = KnownSecrets(values)
        return known

    def known_anywhere(self) -> KnownSecrets | None:
        """Every session's values together: for text tied to a turn whose session is not at hand."""
        if self._anywhere is None and self._values:
            merged: dict[str, str] = {}
            for values in self._values.values():
                merged.update(values)
            self._anywhere = KnownSecrets(merged)
        return self._anywhere

    def __len__(self) -> int:
        return len(self._values)


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
