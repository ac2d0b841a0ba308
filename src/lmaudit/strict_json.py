"""Values as strict JSON: the one place results become JSON (dataclasses and pydantic models as their fields, tuples as
lists, NaN and infinities as null), so that lmaudit's documents (report.json and the other results) parse under any
strict JSON reader."""

from __future__ import annotations

import json
import math
from dataclasses import fields, is_dataclass

from pydantic import BaseModel


def json_ready(value):
    """The JSON form of a value: the one place results become JSON. Dataclasses become dicts (a field marked optional
    is left out when None), tuples lists, and NaN and infinities null, so the file stays strict JSON."""
    if isinstance(value, BaseModel):  # the fields it was given, in its order, under their names in the file
        given = value.model_fields_set
        named = {(field.alias or name): getattr(value, name) for name, field in type(value).model_fields.items()
                 if name in given}
        return json_ready({**named, **(value.model_extra or {})})
    if is_dataclass(value) and not isinstance(value, type):
        return {f.name: json_ready(getattr(value, f.name)) for f in fields(value)
                if not (f.metadata.get("optional") and getattr(value, f.name) is None)}
    if isinstance(value, dict):
        return {k: json_ready(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [json_ready(v) for v in value]
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


def json_text(document: dict) -> str:
    """A document as strict JSON text (indented, NaN refused)."""
    return json.dumps(json_ready(document), indent=2, allow_nan=False) + "\n"
