"""Errors raised by ``deepstack`` for bad profiles and bad collective requests.

``deepstack`` must not import ``plena_opt``, so it carries its own error types; callers treat
:class:`ProfileError` like ``plena_opt.errors.PlenaInputError`` (same ``field`` / ``rule`` shape).
"""

from __future__ import annotations


class ProfileError(ValueError):
    """Bad NoC profile or collective input: ``field`` names the offending key, ``rule`` the rule.

    ``str(err)`` is the rule text (it follows the reference wording where one is recorded).
    """

    def __init__(self, field: str, rule: str) -> None:
        super().__init__(rule)
        self.field = field
        self.rule = rule


class ProfileTypeError(ProfileError, TypeError):
    """A value of the wrong JSON type (e.g. ``provenance`` that is not an object)."""
