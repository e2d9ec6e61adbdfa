"""Embeddings of memories: stored as unit-length float32 BLOBs, compared by brute force.

No numpy and no SQLite extension: a memory store holds hundreds to a few thousand rows, the
Python this runs on may lack `enable_load_extension` (pyenv's and uv's builds do), and the
scan is a plain loop over `array('f')` values. bench/memory.py measures what it costs.
Vectors are normalised when stored, so cosine similarity is a dot product.
"""

from __future__ import annotations

import heapq
import math
import operator
from array import array
from collections.abc import Callable, Iterable, Sequence

Dot = Callable[[Sequence[float], Sequence[float]], float]


def _dot_py(a: Sequence[float], b: Sequence[float]) -> float:
    return float(sum(map(operator.mul, a, b)))


# math.sumprod (Python 3.12+) is the same sum in C, several times faster.
dot: Dot = getattr(math, "sumprod", _dot_py)


def unit(vector: Sequence[float]) -> array[float]:
    """The vector scaled to length 1 (a zero vector stays zero), as float32."""
    values = array("f", vector)
    norm = math.sqrt(dot(values, values))
    return array("f", (v / norm for v in values)) if norm > 0 else values


def pack(vector: Sequence[float]) -> bytes:
    return unit(vector).tobytes()


def similarities(query: Sequence[float], rows: Iterable[tuple[int, bytes]]) -> dict[int, float]:
    """Each row's cosine similarity to the (unit) query. A row of another length (embedded
    by another model) is left out: the store embeds it again."""
    size = len(query) * 4
    return {ident: dot(query, array("f", blob)) for ident, blob in rows if len(blob) == size}


def best(similarity: dict[int, float], k: int) -> list[int]:
    """The `k` most similar ids, best first."""
    return heapq.nlargest(k, similarity, key=similarity.__getitem__)


def reciprocal_rank_fusion(*rankings: Sequence[int], k: int = 60) -> dict[int, float]:
    """Each id's sum of 1 / (k + rank) over the rankings it is in (rank 1 is best): an order
    that needs no common scale between BM25 and cosine, only each list's order."""
    fused: dict[int, float] = {}
    for ranking in rankings:
        for rank, ident in enumerate(ranking, start=1):
            fused[ident] = fused.get(ident, 0.0) + 1.0 / (k + rank)
    return fused
