"""Photos for models that can see: the image as a `data:` URL part of the turn's user message
(OpenAI's format, which LiteLLM translates for other providers), downsized with Pillow so the
long side is at most `max_px`. Only the current turn carries it; history keeps the marker."""

from __future__ import annotations

import base64
import io
import logging
from typing import Any

log = logging.getLogger(__name__)

# Decoded, an image takes 3-4 bytes a pixel: this cap keeps one at about 100 MB at most, what
# a Raspberry Pi can spare, and still takes a 24 MP camera's photo. The model sees at most
# `max_px` on the long side (1568 px by default, 2.4 MP) anyway. Pillow's own limit (a
# warning at 89 MP, an error only at 179 MP) would let a 3 MB PNG take gigabytes.
MAX_PIXELS = 24_000_000
# What phones and chats send. Pillow opens some 40 formats; each is a decoder an attacker's
# file can reach, and EPS would run Ghostscript where it is installed.
PHOTO_FORMATS = ("JPEG", "PNG", "GIF", "WEBP", "BMP")  # JPEG takes MPO (two-lens) too


def image_part(data: bytes, name: str, max_px: int) -> dict[str, Any] | None:
    """The image as a message part, or None (logged) when it cannot be read as one."""
    from PIL import Image

    try:
        with Image.open(io.BytesIO(data), formats=PHOTO_FORMATS) as opened:
            # A JPEG is decoded at 1/2, 1/4 or 1/8 of its size when that still covers
            # max_px (DCT scaling: far less memory); other formats ignore this.
            shrink = max_px / max(opened.size)
            if shrink < 1:
                width, height = opened.size
                opened.draft(None, (max(1, int(width * shrink)), max(1, int(height * shrink))))
            width, height = opened.size  # from the header: nothing decoded yet
            if width * height > MAX_PIXELS:
                raise ValueError(f"{width} x {height} pixels is over {MAX_PIXELS:,}")
            opened.load()
            kind = "PNG" if opened.mode in ("RGBA", "LA", "P") else "JPEG"
            image: Image.Image = opened
            if max(image.size) > max_px:
                image.thumbnail((max_px, max_px))
            if kind == "JPEG" and image.mode != "RGB":
                image = image.convert("RGB")
            buffer = io.BytesIO()
            image.save(buffer, kind, **({"quality": 85} if kind == "JPEG" else {}))
    except Exception as exc:  # a decoder's any error (SyntaxError, ValueError, OSError, ...)
        log.warning("%s is not shown to the model: %s", name, exc)
        return None
    encoded = base64.b64encode(buffer.getvalue()).decode("ascii")
    mime = "image/png" if kind == "PNG" else "image/jpeg"
    return {"type": "image_url", "image_url": {"url": f"data:{mime};base64,{encoded}"}}
