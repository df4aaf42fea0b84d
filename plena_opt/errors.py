"""User-input errors shared by every layer (CLI: exit 2; gRPC: INVALID_ARGUMENT / NOT_FOUND)."""

from __future__ import annotations


class PlenaInputError(ValueError):
    """Bad user input: names the offending ``field`` and the ``rule`` it breaks.

    ``str(err)`` is the human message (the rule text, which already names the field where the
    reference wording does). Subclasses pick the gRPC status.
    """

    def __init__(self, field: str, rule: str) -> None:
        super().__init__(rule)
        self.field = field
        self.rule = rule


class PlenaTypeError(PlenaInputError, TypeError):
    """A value of the wrong type (e.g. a float where an integer is required)."""


class PlenaNotFoundError(PlenaInputError, LookupError):
    """An unknown name (model, profile, study); the message lists the valid ones."""
