"""Deterministic text embeddings for the fake LLM: paraphrases close, unrelated texts apart.

A vector has DIMS dimensions. The first ones are concepts: every word of CONCEPTS' table
("kitten", "feline", "猫", "고양이" -> cat) adds 1 to its concept's dimension; words of other
scripts are found as substrings, since Japanese has no spaces. Every other word adds ±1 to
one of the remaining dimensions, chosen by a hash of the word (blake2b, so the same on every
run and machine). Function words count for nothing. The vector is scaled to length 1.

So "The kitten adores salmon" and "what food does my cat like?" share two concepts (cat,
love) and have a cosine of about 0.58 without a word in common, while texts that share no
concept and no word are orthogonal up to a rare hash collision.
"""

from __future__ import annotations

import base64
import hashlib
import math
import re
import struct
from typing import Any

DIMS = 256
CONCEPTS: dict[str, str] = {
    "cat": "cat cats kitten kittens kitty feline 猫 ねこ 고양이",
    "dog": "dog dogs puppy puppies hound canine 犬 강아지",
    "love": "love loves loved adore adores like likes enjoy enjoys fond favourite 好き 좋아",
    "fish": "fish salmon tuna seafood sushi 魚 寿司 생선 🍣",
    "food": "food eat eats eating meal meals dinner lunch breakfast cook cooking 食べ 음식",
    "birthday": "birthday birthdays born anniversary 誕生日 생일",
    "sibling": "sister brother sibling siblings 姉 妹 兄 弟 언니 누나 오빠 동생",
    "doctor": "doctor dentist clinic hospital appointment 歯医者 病院 치과 병원",
    "music": "music song songs guitar piano band 音楽 음악",
    "work": "work works job office nurse shift shifts career 仕事 직장",
    "drink": "coffee tea espresso latte drink drinks コーヒー 커피",
    "weather": "weather rain sunny snow forecast 天気 날씨",
    "name": "name named called 名前 이름",
}
_FUNCTION_WORDS = """a an the is are was were be my your our i you we he she it its of to in on
    at for and or what how when where who which does do did with me his her this that user s"""
STOPWORDS = frozenset(_FUNCTION_WORDS.split())
_WORD = re.compile(r"[^\W_]+|[^\w\s]", re.UNICODE)
_CONCEPT_OF = {word: i for i, words in enumerate(CONCEPTS.values()) for word in words.split()}
_SUBSTRING_WORDS = [(w, i) for w, i in _CONCEPT_OF.items() if not w.isascii()]


def _hashed(word: str) -> tuple[int, float]:
    """A dimension past the concepts, and a sign, from the word's hash."""
    digest = hashlib.blake2b(word.encode(), digest_size=8).digest()
    dim = len(CONCEPTS) + int.from_bytes(digest[:4], "big") % (DIMS - len(CONCEPTS))
    return dim, 1.0 if digest[4] & 1 else -1.0


def embed_text(text: str) -> list[float]:
    """The fake embedding of one text (length DIMS, unit length unless the text is empty)."""
    vector = [0.0] * DIMS
    lowered = text.lower()
    for word, concept in _SUBSTRING_WORDS:
        if word in lowered:
            vector[concept] += 1.0
    for word in _WORD.findall(lowered):
        if word in STOPWORDS or not word.strip():
            continue
        if word in _CONCEPT_OF:
            if word.isascii():
                vector[_CONCEPT_OF[word]] += 1.0
        elif word.isascii() and word.isalnum():
            dim, sign = _hashed(word)
            vector[dim] += sign
    norm = math.sqrt(sum(v * v for v in vector))
    return [v / norm for v in vector] if norm else vector


def cosine(a: list[float], b: list[float]) -> float:
    return sum(x * y for x, y in zip(a, b, strict=True))


def embeddings_reply(body: dict[str, Any], texts: list[str]) -> dict[str, Any]:
    """OpenAI's embeddings answer for `texts`: each vector a list of numbers, or with
    ``encoding_format`` "base64" little-endian float32 (as the openai SDK asks)."""
    data = []
    for index, text_in in enumerate(texts):
        vector: Any = embed_text(text_in)
        if body.get("encoding_format") == "base64":
            vector = base64.b64encode(struct.pack(f"<{len(vector)}f", *vector)).decode()
        data.append({"object": "embedding", "index": index, "embedding": vector})
    tokens = sum(max(1, len(t) // 4) for t in texts)
    usage = {"prompt_tokens": tokens, "total_tokens": tokens}
    return {"object": "list", "data": data, "model": body.get("model", ""), "usage": usage}
