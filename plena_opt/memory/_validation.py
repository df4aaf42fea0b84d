"""Strict pydantic base for memory profiles and its translation into ``PlenaInputError``.

Profiles are SI-unit JSON (analytic-model §3.2): unknown keys are rejected, JSON booleans are not
numbers, integers must be integers and every number must be finite. A pydantic
``ValidationError`` becomes a :class:`PlenaInputError` whose ``field`` is the dotted profile key
(``dram.connected_layers``) and whose message names that key and the rule it breaks.
"""

from __future__ import annotations

from typing import Annotated, Any, ClassVar

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from plena_opt.bounds import strip_value_error
from plena_opt.errors import PlenaInputError, PlenaTypeError

PositiveInt = Annotated[int, Field(gt=0)]
NonNegativeInt = Annotated[int, Field(ge=0)]
PositiveNumber = Annotated[float, Field(gt=0)]
NonNegativeNumber = Annotated[float, Field(ge=0)]
Fraction = Annotated[float, Field(gt=0, le=1)]
Name = Annotated[str, Field(min_length=1)]

# pydantic error type -> rule text (the dotted field name is put in front of it).
_RULES: dict[str, str] = {
    "missing": "is required",
    "extra_forbidden": "is not a known key (unknown keys are rejected)",
    "int_type": "must be an integer",
    "float_type": "must be a number",
    "bool_type": "must be true or false",
    "string_type": "must be a string",
    "string_too_short": "must be a non-empty string",
    "finite_number": "must be finite",
    "dict_type": "must be a JSON object",
    "model_type": "must be a JSON object",
    "model_attributes_type": "must be a JSON object",
}
_TYPE_ERRORS = {"int_type", "float_type", "bool_type", "string_type", "dict_type", "model_type"}
_BOUNDS = {"greater_than": ">", "greater_than_equal": "≥", "less_than": "<", "less_than_equal": "≤"}


def dotted(*parts: object) -> str:
    """Join a location into a dotted field name, skipping empty parts."""
    return ".".join(str(part) for part in parts if part not in ("", None))


def input_error(exc: ValidationError, prefix: str = "") -> PlenaInputError:
    """The first error of ``exc`` as a :class:`PlenaInputError` naming the dotted field."""
    err = exc.errors(include_url=False)[0]
    ctx = err.get("ctx") or {}
    inner = ctx.get("error")
    if isinstance(inner, PlenaInputError):  # raised by a cross-field rule; already fully named
        return inner
    field = dotted(prefix, *err["loc"])
    kind = err["type"]
    if kind in _BOUNDS:
        bound = next(iter(ctx.values()))
        rule = f"must be {_BOUNDS[kind]} {bound}"
    elif kind == "value_error":  # a plausible-range rule (plena_opt.bounds) says its range
        rule = strip_value_error(err["msg"])
    else:
        rule = _RULES.get(kind, err["msg"])
    message = f"{field} {rule}"
    if kind != "missing" and "input" in err and not isinstance(err["input"], dict):
        message += f" (got {err['input']!r})"
    cls = PlenaTypeError if kind in _TYPE_ERRORS else PlenaInputError
    return cls(field, message)


class StrictModel(BaseModel):
    """Frozen, strict, closed pydantic model; construction errors become ``PlenaInputError``.

    ``section`` is the dotted profile key of the model (``dram.bank_timing``), used to name fields
    when the model is built directly rather than from a profile.
    """

    model_config = ConfigDict(strict=True, extra="forbid", frozen=True, allow_inf_nan=False)
    section: ClassVar[str] = ""

    def __init__(self, **data: Any) -> None:
        try:
            super().__init__(**data)
        except ValidationError as exc:
            raise input_error(exc, self.section) from None

    @classmethod
    def field_name(cls, name: str) -> str:
        """Dotted profile name of one of this model's fields."""
        return dotted(cls.section, name)
