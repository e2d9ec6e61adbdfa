"""How memory text becomes search terms, the same way for what is stored and what is asked.

SQLite's unicode61 tokenizer splits on spaces and punctuation, which works for English and
Korean words but not for Japanese (no spaces), not for Korean nouns with a particle glued on
("이름은" should match "이름"), and not for emoji (symbols are separators). So the text is
turned into terms here, in Python, and the full-text index stores those terms space-joined:

- Latin, Cyrillic... words: lower-cased, accents dropped, a plural "s" removed ("cats" -> "cat");
- a run of Han, kana or Hangul: its overlapping two-character pieces ("名前は" -> "名前 前は"),
  plus single Han and Hangul characters (a kanji or a one-syllable Korean word means something
  alone), so a one- or two-character word is found inside a longer run;
- an emoji or other symbol: a word of its code point ("🐱" -> "u1f431").

What is asked is cut the same way, minus common function words (STOPWORDS), so "what is my
cat called" looks for "cat" and "call", not "what".
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterable, Iterator
from difflib import SequenceMatcher

_WORD = re.compile(r"[^\W_]+")
_DIGITS = re.compile(r"\d+")
# Scripts written without spaces between words (or with particles glued to them).
_CJK = re.compile(
    r"[\u1100-\u11ff\u3040-\u30ff\u3130-\u318f\u31f0-\u31ff\u3400-\u4dbf\u4e00-\u9fff"
    r"\ua960-\ua97f\uac00-\ud7af\uf900-\ufaff\U00020000-\U0003134f]+"
)
_HAN = re.compile(r"[\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\U00020000-\U0003134f]")
_HANGUL = re.compile(r"[\u1100-\u11ff\u3130-\u318f\ua960-\ua97f\uac00-\ud7af]")
_HAN_OR_HANGUL = re.compile(f"{_HAN.pattern}|{_HANGUL.pattern}")
_NOT_A_SYMBOL = {"\u200d", "\ufe0e", "\ufe0f", "\u20e3"}  # joiners and presentation selectors

_STOPWORDS = """
    a about above after again all also am an and any are as at be been before being below
    between both but by can could did do does doing down during each few for from further had
    has have having he her here hers him his how i if in into is it its itself just let me
    more most my myself no nor not now of off on once only or other our ours out over own same
    she should so some such than that the their theirs them then there these they this those
    through to too under until up very was we were what when where which while who whom why
    will with would you your yours yourself hey hi hello please thanks thank ok okay yes tell
    know remember recall think want like get got im ive dont does doesn isn wasn aren s t d ll
    user
    re ve m
    이 가 은 는 을 를 의 에 와 과 도 로 뭐 뭐야 뭐지 무엇 어떤 어디 언제 누구 나 내 너 네 저 제 그
    です ます した して する こと もの これ それ あれ どこ なに なん 何 ない ある いる の は が を
    に で と も か"""
STOPWORDS = frozenset(_STOPWORDS.split())

NEAR_DUPLICATE_RATIO = 0.95  # difflib ratio of the normalised texts, see near_duplicate()


def normalise(text: str) -> str:
    """Compatibility forms folded (full-width letters, ligatures), case folded, spaces
    collapsed, trailing punctuation dropped: what two memories that say the same thing share."""
    folded = unicodedata.normalize("NFKC", text).casefold()
    return " ".join(folded.split()).rstrip(" .!?。！？…")


def _strip_accents(word: str) -> str:
    """ "café" -> "cafe", only for Latin letters: kana and Hangul marks carry meaning."""
    if word.isascii():
        return word
    decomposed = unicodedata.normalize("NFKD", word)
    latin_marks = (
        ch
        for i, ch in enumerate(decomposed)
        if not (unicodedata.combining(ch) and i and ord(decomposed[i - 1]) < 0x250)
    )
    return unicodedata.normalize("NFC", "".join(latin_marks))


def _stem(word: str) -> str:
    """A plural "s" off an English-looking word, so "cats" finds "cat"."""
    if len(word) > 4 and word.endswith("ies"):
        return word[:-3] + "y"
    if len(word) > 3 and word.endswith("s") and not word.endswith(("ss", "us", "is")):
        return word[:-1]
    return word


def _pieces(run: str, singles: re.Pattern[str] | None) -> Iterator[str]:
    """A CJK run as overlapping pairs, and its single characters that `singles` matches."""
    if len(run) == 1:
        yield run
        return
    for i in range(len(run) - 1):
        yield run[i : i + 2]
    if singles is not None:
        yield from (ch for ch in run if singles.match(ch))


def _symbols(text: str) -> Iterator[str]:
    for ch in text:
        if ch not in _NOT_A_SYMBOL and unicodedata.category(ch) == "So":
            yield f"u{ord(ch):x}"


def _terms(text: str, singles: re.Pattern[str] | None) -> Iterator[str]:
    text = unicodedata.normalize("NFKC", text).casefold()
    for match in _WORD.finditer(text):
        word = match.group()
        position = 0
        for cjk in _CJK.finditer(word):  # "iphone의" -> "iphone", "의"
            if cjk.start() > position:
                yield _stem(_strip_accents(word[position : cjk.start()]))
            yield from _pieces(cjk.group(), singles)
            position = cjk.end()
        if position < len(word):
            yield _stem(_strip_accents(word[position:]))
    yield from _symbols(text)


def index_terms(text: str) -> list[str]:
    """Every term a stored text is found by: pairs, and single Han and Hangul characters (a
    one-syllable Korean word or a kanji inside a longer run)."""
    return list(dict.fromkeys(_terms(text, _HAN_OR_HANGUL)))


def content_terms(text: str) -> list[str]:
    """The terms that say what a memory is about: no single CJK characters inside longer
    runs, no function words. The denominator of a memory's coverage in search()."""
    return [t for t in dict.fromkeys(_terms(text, None)) if t not in STOPWORDS]


def query_terms(text: str, *, limit: int = 32) -> dict[str, float]:
    """What a question looks for, each term with its share of the weight: its terms without
    function words, at most `limit`. A single Han character inside a longer run counts half
    (a kanji means something alone, but "名前" should not match every "午前"); single Hangul
    syllables inside a word do not count (mostly particles; a one-syllable word stands alone
    and counts fully)."""
    terms: dict[str, float] = {}
    for term in _terms(text, _HAN):
        if term not in STOPWORDS and term not in terms and len(terms) < limit:
            terms[term] = 1.0
    runs = {run for run in _CJK.findall(unicodedata.normalize("NFKC", text)) if len(run) > 1}
    for term in terms:
        if len(term) == 1 and _HAN.match(term) and any(term in run for run in runs):
            terms[term] = 0.5
    return terms


def fts_query(terms: Iterable[str]) -> str:
    """An FTS5 MATCH expression: any of the terms, each a quoted phrase."""
    return " OR ".join('"' + term.replace('"', '""') + '"' for term in terms)


def near_duplicate(a: str, b: str) -> bool:
    """Whether a new memory only rewords an old one, so it updates it instead of adding.

    True when the normalised texts are equal, or when they are at least 95 % alike
    (difflib's ratio) and hold the same numbers: a typo fixed or a comma moved updates, a
    changed number ("room 12" -> "room 14") or another word in a short sentence ("cat" ->
    "dog") makes a new memory.
    """
    left, right = normalise(a), normalise(b)
    if left == right:
        return True
    if _DIGITS.findall(left) != _DIGITS.findall(right):
        return False
    return SequenceMatcher(None, left, right, autojunk=False).ratio() >= NEAR_DUPLICATE_RATIO
