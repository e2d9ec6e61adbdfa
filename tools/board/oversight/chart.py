"""A small PNG line chart of a pin's readings, drawn with Pillow alone (no plotting library).

People would rather look at a temperature curve than read forty numbers. The chart is a
title, the value range on the left, the first and last time below, and the readings as one
line; when there are more readings than pixel columns, each column shows the lowest and
highest reading that falls in it, so a short spike still shows. Pure: readings in, bytes out.
"""

from __future__ import annotations

import io
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, tzinfo

WIDTH, HEIGHT = 640, 320
LEFT, RIGHT, TOP, BOTTOM = 64, 16, 32, 40  # margins around the plot area
LINE = (31, 119, 180)
AXES = (90, 90, 90)
GRID = (225, 225, 225)
TEXT = (30, 30, 30)


@dataclass(frozen=True)
class Frame:
    """Where a reading lands: time across the plot area, value up it."""

    t0: float
    t1: float
    low: float
    high: float
    width: int = WIDTH
    height: int = HEIGHT

    @classmethod
    def around(cls, points: Sequence[tuple[float, float]], **size: int) -> Frame:
        times = [t for t, _ in points]
        values = [v for _, v in points]
        low, high = min(values), max(values)
        if high == low:  # a flat line sits in the middle
            low, high = low - 1, high + 1
        t0, t1 = min(times), max(times)
        return cls(t0, t1 if t1 > t0 else t0 + 1, low, high, **size)

    @property
    def left(self) -> int:
        return LEFT

    @property
    def right(self) -> int:
        return self.width - RIGHT - 1

    @property
    def top(self) -> int:
        return TOP

    @property
    def bottom(self) -> int:
        return self.height - BOTTOM - 1

    def x(self, t: float) -> int:
        return round(self.left + (t - self.t0) / (self.t1 - self.t0) * (self.right - self.left))

    def y(self, value: float) -> int:
        share = (value - self.low) / (self.high - self.low)
        return round(self.bottom - share * (self.bottom - self.top))


def render(
    points: Sequence[tuple[float, float]],
    title: str,
    zone: tzinfo,
    *,
    width: int = WIDTH,
    height: int = HEIGHT,
) -> bytes:
    """PNG bytes of `points` ((epoch seconds, value), oldest first; at least one), times
    shown in `zone`."""
    from PIL import Image, ImageDraw, ImageFont

    frame = Frame.around(points, width=width, height=height)
    image = Image.new("RGB", (width, height), "white")
    draw = ImageDraw.Draw(image)
    font = ImageFont.load_default()
    for value in (frame.low, (frame.low + frame.high) / 2, frame.high):
        y = frame.y(value)
        draw.line([(frame.left, y), (frame.right, y)], fill=GRID)
        draw.text((frame.left - 6, y), f"{value:.4g}", fill=TEXT, font=font, anchor="rm")
    draw.rectangle([frame.left, frame.top, frame.right, frame.bottom], outline=AXES)
    draw.text((frame.left, 8), title, fill=TEXT, font=font)
    below = frame.bottom + 8
    draw.text((frame.left, below), _when(frame.t0, zone), fill=TEXT, font=font)
    draw.text((frame.right, below), _when(frame.t1, zone), fill=TEXT, font=font, anchor="ra")
    for segment in _columns(frame, points):
        if len(segment) == 1:
            draw.point(segment, fill=LINE)
        else:
            draw.line(segment, fill=LINE, width=2, joint="curve")
    out = io.BytesIO()
    image.save(out, "PNG", optimize=True)
    return out.getvalue()


def _columns(frame: Frame, points: Sequence[tuple[float, float]]) -> list[list[tuple[int, int]]]:
    """The line as pixel segments: the points joined in order, or, with more points than
    columns, each column's lowest and highest reading joined to the next column's."""
    xy = [(frame.x(t), frame.y(v)) for t, v in points]
    if len(xy) <= frame.right - frame.left:
        return [xy]
    spans: dict[int, tuple[int, int]] = {}
    for x, y in xy:
        low, high = spans.get(x, (y, y))
        spans[x] = (min(low, y), max(high, y))
    line: list[tuple[int, int]] = []
    for x in sorted(spans):
        low, high = spans[x]
        line += [(x, low), (x, high)] if low != high else [(x, low)]
    return [line]


def _when(epoch: float, zone: tzinfo) -> str:
    return datetime.fromtimestamp(epoch, zone).strftime("%a %d %b %H:%M")
