"""Multilingual lexical signals for judging a next state, and the few high-precision rules
that decide a verdict outright.

The embedding model is English-centric, so these lexicons carry the other languages
(French, German, Spanish, Portuguese, Italian, Russian, Chinese, Japanese, Korean, Dutch).
They are features for the trained head, not verdicts by themselves; only `decisive_rule`
overrides the head, for cases where text patterns are more reliable than any embedding
(nothing came back; a tool's traceback).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

_POSITIVE = [
    r"\bthanks?\b", r"\bthank you\b", r"\bthx\b", r"\bty\b", r"\bcheers\b", r"\bperfect(ly)?\b",
    r"\bgreat\b", r"\bawesome\b", r"\bexcellent\b", r"\bbrilliant\b", r"\bamazing\b", r"\bwonderful\b",
    r"\bfantastic\b", r"\bnice\b", r"\blove (it|this)\b", r"\bworks?( now| fine| great| perfectly| for me)?\b",
    r"\bworked\b", r"\bexactly\b", r"\bspot on\b", r"\bnailed it\b", r"\bthat'?s (it|right|correct)\b",
    r"\bcorrect\b", r"\bsolved\b", r"\bfixed it\b", r"\bhelpful\b", r"\bappreciate", r"\blooks good\b",
    r"\bwell done\b", r"\bgood (job|stuff)\b", r"\byes\b", r"\byep\b", r"👍", r"🙏", r"🎉",
    # fr / de / es / pt / it / nl / ru
    r"\bmerci\b", r"\bparfait\b", r"\bg[ée]nial\b", r"\bsuper\b", r"\bça (marche|fonctionne)\b",
    r"\bdanke\b", r"\bperfekt\b", r"\bgenau\b", r"\bklappt\b", r"\bfunktioniert\b(?! nicht)",
    r"\bhilfreich\b", r"\bgracias\b", r"\bperfecto\b", r"\bfunciona\b", r"\bexcelente\b",
    r"\bobrigad[oa]\b", r"\bperfeito\b", r"\bfuncionou\b", r"\bgrazie\b", r"\bperfetto\b",
    r"\bfunziona\b", r"\bdank je\b", r"\bспасибо\b", r"\bотлично\b", r"\bработает\b", r"\bпомогло\b",
    # zh / ja / ko
    r"谢谢", r"感谢", r"完美", r"太好了", r"很好", r"解决了", r"可以了", r"ありがとう", r"完璧",
    r"助かり", r"うまくいき", r"감사", r"완벽",
]
_NEGATIVE = [
    r"\bwrong\b", r"\bincorrect\b", r"\bnot (right|correct|helpful|working|what i)\b", r"\bdoesn'?t work\b",
    r"\bdoes not work\b", r"\bdidn'?t work\b", r"\bnot work", r"\bbroken\b", r"\bbroke\b", r"\bcrash",
    r"\bfails?\b", r"(?<!\b0 )\bfailed\b", r"\berror\b", r"\bexception\b", r"\btraceback\b", r"\bmakes no sense\b",
    r"\bmisunderst", r"\bignored?\b", r"\bnope\b", r"\buseless\b", r"\bworse\b", r"\bhallucinat",
    r"\bstill (the same|broken|crash|fail|not)", r"\bnot what\b", r"\bthat'?s not\b", r"\bisn'?t\b",
    r"\bugh\b", r"\bstop\b", r"\bdoesn'?t compile\b", r"\bnot a word\b", r"\bthere'?s no\b",
    r"\bfaux\b", r"\bne (marche|fonctionne) pas\b", r"\bpas ce que\b", r"\bpas correct\b",
    r"\bfalsch\b", r"\bnicht (richtig|gemeint|das)\b", r"\bfunktioniert nicht\b", r"\bklappt nicht\b",
    r"\bestá mal\b", r"\bno funciona\b", r"\bno es lo que\b", r"\bincorrecto\b", r"\berrad[oa]\b",
    r"\bnão funciona\b", r"\bnon funziona\b", r"\bsbagliat", r"\bнеправильно\b", r"\bне работает\b",
    r"不对", r"错", r"报错", r"不是我要", r"不是我想要", r"違います", r"ちがう", r"間違",
]
_REDO = [
    r"\btry (it )?again\b", r"\bretry\b", r"\bredo\b", r"\bre-?do\b", r"\bstart over\b", r"\bagain\b",
    r"\bone more time\b", r"\bonce more\b", r"\bregenerate\b", r"\brewrite\b", r"\bdo it over\b",
    r"\banother (shot|try|attempt)\b", r"\bfrom scratch\b",
    r"\brecommence\b", r"\brefais\b", r"\bencore une fois\b", r"\bessaie encore\b", r"\bnochmal\b",
    r"\bnoch einmal\b", r"\bversuch es\b", r"\bneu machen\b", r"\bmach das .*neu\b",
    r"\bde nuevo\b", r"\botra vez\b", r"\bintentarlo\b", r"\bint[ée]ntalo\b", r"\bde novo\b",
    r"\btenta\b", r"\briprova\b", r"\bdi nuovo\b", r"\bещё раз\b", r"\bеще раз\b", r"\bпопробуй\b",
    r"重新", r"再试", r"重做", r"再来", r"もう一度", r"もう一回", r"やり直",
]
_CORRECTION = [
    r"\bi meant\b", r"\bi mean\b", r"\bi said\b", r"\bi asked (for|you)\b", r"\bi wanted\b", r"\bi needed\b",
    r"\bi told you\b", r"\bas i (said|mentioned)\b", r"\bactually\b", r"\bnot (the )?\w+,? (but|i)\b",
    r"\binstead\b", r"\bshould (be|only|use)\b", r"\bneeds? to\b", r"\bhas to\b", r"\bforgot\b",
    r"\bmissed\b", r"\bleft out\b", r"^\s*no[,.!]", r"^\s*not quite\b", r"\bplease fix\b",
    r"\bje voulais\b", r"\bje veux dire\b", r"\bich meinte\b", r"\bme refer[ií]a\b", r"\bquer[ií]a decir\b",
    r"\bintendevo\b", r"\beu quis dizer\b", r"我是说", r"我的意思是", r"^\s*不[，,是]", r"いいえ",
]
_TOOL_ERROR = [
    r"traceback \(most recent call last\)", r"\b\w*(error|exception)\b", r"(?<!\b0 )\bfailed\b", r"\bfailure\b",
    r"\bfatal\b", r"\bpanic(ked)?\b", r"\bsegmentation fault\b", r"\bcore dumped\b", r"\bkilled\b",
    r"\bcommand not found\b", r"\bno such file or directory\b", r"\bpermission denied\b",
    r"\bconnection refused\b", r"\btimed? ?out\b", r"\bnot found\b", r"\bcannot\b", r"\bcould not\b",
    r"\bunable to\b", r"\bdenied\b", r"\brejected\b", r"\binvalid\b", r"\bunknown\b", r"npm err!",
    r"\b(exit(ed)?|status|code)( with)?( code| status)?:? ?[1-9]\d*\b", r"\bhttp(/\d\.\d)? [45]\d\d\b",
    r'"ok":\s*false', r'"error"\s*:', r"\*\*\*", r"\bout of memory\b", r"\bnot a git repository\b",
]
_TOOL_SUCCESS = [
    r"\bpassed\b", r"\bsuccess(ful(ly)?)?\b", r"\bok\b", r"\bdone\b", r"\bcreated\b", r"\bapplied\b",
    r"\bfinished\b", r"\bsaved\b", r"\bwrote\b", r"\binstalled\b", r"\badded\b", r"\bbuilt\b",
    r"\b(exit(ed)?|status|code)( with)?( code| status)?:? ?0\b", r"\bhttp(/\d\.\d)? 2\d\d\b",
    r'"ok":\s*true', r"\bclean\b", r"\ball checks passed\b", r"\blistening on\b", r"\b0 failed\b",
    r"\bswitched to\b", r"\buploaded\b", r"\bsent\b", r"\bprocessed\b",
]
_SILENCE_MARKERS = re.compile(
    r"^\W*(\(?\[?<?\s*(no (response|reply|output)( from (the )?user)?|user did not reply|empty( output)?"
    r"|silence|no answer)\s*>?\]?\)?)?\W*$",
    re.IGNORECASE,
)
_CJK = re.compile(r"[\u3040-\u30ff\u3400-\u9fff\uac00-\ud7af]")
_QUESTION_START = re.compile(
    r"^\s*(please\s+)?(what|how|who|where|when|why|which|can|could|would|is|are|do|does|give|tell|write|make|"
    r"book|set|summari[sz]e|convert|add|create|translate|find|show|explain|list|calculate|schedule|draft|"
    r"generate|build|fix|rename|remind|send|compose|plan|help|get|check|install|delete|remove|update|"
    r"quel|quelle|où|wie|was|wo|qué|cuál|dónde|qual|chi|come)\b",
    re.IGNORECASE,
)


def _compile(patterns: list[str]) -> list[re.Pattern[str]]:
    return [re.compile(p, re.IGNORECASE) for p in patterns]


_LEX = {
    "positive": _compile(_POSITIVE),
    "negative": _compile(_NEGATIVE),
    "redo": _compile(_REDO),
    "correction": _compile(_CORRECTION),
    "tool_error": _compile(_TOOL_ERROR),
    "tool_success": _compile(_TOOL_SUCCESS),
}
LEXICON_NAMES: tuple[str, ...] = tuple(_LEX)


def lexicon_hits(text: str) -> dict[str, int]:
    """Number of distinct patterns of each lexicon that match `text`."""
    return {name: sum(1 for p in pats if p.search(text)) for name, pats in _LEX.items()}


def is_silence(text: str | None) -> bool:
    """Nothing came back: empty, whitespace, punctuation, or an explicit no-reply marker."""
    return _SILENCE_MARKERS.match(text or "") is not None


def has_cjk(text: str) -> bool:
    return _CJK.search(text) is not None


_WORD = re.compile(r"[^\W\d_]{3,}", re.UNICODE)
_STOP = frozenset(
    "the and for you your with that this have are was what how can could would please here there from "
    "into about just also then them they its it's not but all any some want need like make give write".split()
)


def content_words(text: str) -> set[str]:
    """Lower-cased words of 3+ letters minus a few function words (CJK runs count as words)."""
    return {w for w in (m.group(0).lower() for m in _WORD.finditer(text)) if w not in _STOP}


def word_overlap(a: str, b: str) -> float:
    """Share of b's content words that also occur in a: a restated request reuses the reply's
    topic words, an unrelated follow-up does not."""
    wb = content_words(b)
    if not wb:
        return 0.0
    wa = content_words(a)
    # Prefix match (4 letters) so "summary"/"summarize" and "alias"/"aliases" count.
    pa = {w[:4] for w in wa}
    return sum(1 for w in wb if w in wa or w[:4] in pa) / len(wb)


def looks_like_question(text: str) -> bool:
    t = text.strip()
    return t.endswith(("?", "？")) or _QUESTION_START.match(t) is not None


@dataclass(frozen=True)
class RuleVerdict:
    label: int
    rule: str


def decisive_rule(next_state: str, role: str) -> RuleVerdict | None:
    """A verdict where a text pattern is more reliable than the learned head, else None."""
    if is_silence(next_state):
        return RuleVerdict(0, "silence")
    if role == "tool":
        text = next_state
        if re.search(r"traceback \(most recent call last\)", text, re.IGNORECASE):
            return RuleVerdict(-1, "tool_traceback")
        hits = lexicon_hits(text)
        if hits["tool_error"] >= 2 and hits["tool_success"] == 0:
            return RuleVerdict(-1, "tool_error_patterns")
    return None
