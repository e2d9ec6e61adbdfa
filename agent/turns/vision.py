"""Photos for models that can see: the image as a `data:` URL part of the turn's user message
(OpenAI's format, which LiteLLM translates for other providers), downsized with Pillow so the
long side is at most `max_px`. Only the current turn carries it; history keeps the marker."""

from __future__ import annotations

import base64
import io
import logging
from typing import Any

log = logging.getLogger(__name__)


def image_part(data: bytes, name: str, max_px: int) -> dict[str, Any] | None:
    """The image as a message part, or None (logged) when it cannot be read as one."""
    from PIL import Image, UnidentifiedImageError

    try:
        with Image.open(io.BytesIO(data)) as opened:
            opened.load()
            kind = "PNG" if opened.mode in ("RGBA", "LA", "P") else "JPEG"
            image: Image.Image = opened
            if max(image.size) > max_px:
                image.thumbnail((max_px, max_px))
            if kind == "JPEG" and image.mode != "RGB":
                image = image.convert("RGB")
            buffer = io.BytesIO()
            image.save(buffer, kind, **({"quality": 85} if kind == "JPEG" else {}))
    except (OSError, UnidentifiedImageError, Image.DecompressionBombError) as exc:
        log.warning("%s is not shown to the model: %s", name, exc)
        return None
    encoded = base64.b64encode(buffer.getvalue()).decode("ascii")
    mime = "image/png" if kind == "PNG" else "image/jpeg"
    return {"type": "image_url", "image_url": {"url": f"data:{mime};base64,{encoded}"}}
