"""Embeddings of memories: stored as unit-length float32 BLOBs, compared by brute force.

No numpy and no SQLite extension: the Python this runs on may lack `enable_load_extension`
(pyenv's build here does, so sqlite-vec could not even load), and a personal store holds
hundreds to a few thousand memories per person. Each BLOB is unpacked with struct and
compared in C (math.sumprod on Python 3.12+, math.dist before); only the scopes searched
are scanned. bench/memory.py measures what it costs: about 45 µs per 1,536-dimension
row on Python 3.11, most of it turning the floats into Python objects.
"""

from __future__ import annotations

import heapq
import math
import operator
import struct
import sys
from array import array
from collections.abc import Callable, Iterable, Sequence

_sumprod: Callable[[Sequence[float], Sequence[float]], float] | None = getattr(
    math, "sumprod", None
)  # Python 3.12+: the dot product in C


def _dot(a: Sequence[float], b: Sequence[float]) -> float:
    return _sumprod(a, b) if _sumprod else float(sum(map(operator.mul, a, b)))


def unit(vector: Sequence[float]) -> array[float]:
    """The vector scaled to length 1 (a zero vector stays zero), as float32."""
    values = array("f", vector)
    norm = math.sqrt(_dot(values, values))
    return array("f", (v / norm for v in values)) if norm > 0 else values


def pack(vector: Sequence[float]) -> bytes:
    """The stored form: unit float32, little-endian; b"" for a zero vector (an embedding
    that says nothing: kept so it is not asked for again, never similar to anything)."""
    values = unit(vector)
    if not any(values):
        return b""
    if sys.byteorder != "little":
        values.byteswap()
    return values.tobytes()


def similarities(query: Sequence[float], rows: Iterable[tuple[int, bytes]]) -> dict[int, float]:
    """Each row's cosine similarity to the (unit) query. A row of another length (embedded
    by another model, or empty) is left out: the store embeds it again.

    Without math.sumprod, the similarity of two unit vectors comes from their distance,
    cos = 1 - |a - b|² / 2, since math.dist runs in C: twice as fast as a Python sum."""
    if not any(query):
        return {}
    size = len(query)
    unpack = struct.Struct(f"<{size}f").unpack
    wanted = tuple(query)
    if _sumprod is not None:
        return {i: _sumprod(wanted, unpack(b)) for i, b in rows if len(b) == size * 4}
    return {i: 1.0 - math.dist(wanted, unpack(b)) ** 2 / 2 for i, b in rows if len(b) == size * 4}


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
