"""JSON response serialised by orjson (numbers as the core computed them, NaN as null)."""

from __future__ import annotations

import orjson
from starlette.responses import Response


class JSONBytes(Response):
    media_type = "application/json"

    def render(self, content) -> bytes:
        return orjson.dumps(content, option=orjson.OPT_SERIALIZE_NUMPY)
