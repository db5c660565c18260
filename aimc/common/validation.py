"""Strict pydantic models and one formatter that turns a ValidationError into one line per problem."""

from __future__ import annotations

import functools
import re
from collections.abc import Collection, Mapping
from typing import Any, Self

import numpy as np
from pydantic import BaseModel, ConfigDict, ValidationError, field_validator

STRICT = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False, strict=True)
"""The model config of every config section: unknown keys, NaN and infinities are errors, no value is
coerced across types (`true` is not the integer 1, a string not a number; an integer is a valid float), and
a validated config is frozen."""

FLOAT32_MAX = float(np.finfo(np.float32).max)
"""Largest finite float32 (about 3.4e38): the arrays and kernels compute in float32."""


class Float32Config(BaseModel):
    """A strict config section whose numbers reach float32 arrays or torch tensors: a number (or a number
    in a list) beyond float32's range is refused by field, before it overflows in a kernel or a torch
    call."""

    model_config = STRICT

    def model_copy(self, *, update: Mapping[str, Any] | None = None, deep: bool = False) -> Self:
        """pydantic's copy without the values the class's cached properties derived from the fields (pydantic
        copies them along, so an update would leave them stale)."""
        out = super().model_copy(update=update, deep=deep)
        for klass in type(self).__mro__:
            for name, attr in vars(klass).items():
                if isinstance(attr, functools.cached_property):
                    out.__dict__.pop(name, None)
        return out

    @field_validator("*")
    @classmethod
    def _fits_float32(cls, value: Any) -> Any:
        values = value if isinstance(value, (list, tuple)) else (value,)
        for v in values:
            if isinstance(v, float) and abs(v) > FLOAT32_MAX:
                raise ValueError(f"{v:g} is beyond float32's range (|x| <= {FLOAT32_MAX:.4g})")
        return value


def _dotted(loc: tuple, prefix: str, hidden: Collection[str]) -> str:
    """Dotted path of an error location behind `prefix`, without the parts pydantic inserts for unions:
    the tags in `hidden`, the `str` branch of a `str | table` field and function-validator names."""
    parts = [
        _part(p)
        for i, p in enumerate(loc)
        if not (i > 0 and isinstance(p, str) and (p in hidden or p == "str" or "[" in p))
    ]
    return ".".join(p for p in (prefix, *parts) if p != "")


def _part(key: str | int) -> str:
    """A path part as written, quoted where it is not a plain key (empty, spaces, line breaks, dots)."""
    key = str(key)
    return key if re.fullmatch(r"[\w-]+", key) else repr(key)


def format_validation_error(err: ValidationError, prefix: str = "", hidden: Collection[str] = ()) -> str:
    """One line per distinct problem: `dotted.path: message (got value)`. `prefix` goes before every path
    (the caller's place of the validated table, e.g. `tile.device`); location parts in `hidden` (the tags of
    tagged unions) are left out of the paths."""
    lines = []
    for e in err.errors():
        loc = _dotted(e["loc"], prefix, hidden)
        if e["type"] == "value_error" and "error" in e.get("ctx", {}):
            msg = str(e["ctx"]["error"])
            lines.append(msg if msg.startswith(loc) else f"{loc}: {msg}")  # our validators name the full path
            continue
        if e["type"] == "union_tag_not_found":
            lines.append(f"{loc}.{e['ctx']['discriminator'].strip(chr(39))}: Field required")
            continue
        if e["type"] == "string_type" and e["loc"][-1:] == ("str",):
            continue  # the `str` branch of a `str | table` union, when a table was given
        got = e.get("input")
        shown = "" if isinstance(got, (dict, list)) or e["type"] == "missing" else f" (got {got!r})"
        lines.append(f"{loc or '<root>'}: {e['msg']}{shown}")
    return "\n".join(dict.fromkeys(lines))
