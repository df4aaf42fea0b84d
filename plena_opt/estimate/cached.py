"""``cached``: a computed-once attribute without ``functools.cached_property``'s lock.

Python 3.11's ``cached_property`` takes a class-wide lock on every first access (about 1 µs,
and it serialises threads); the evaluator reads a dozen such attributes per plan. This
descriptor stores the value in the instance ``__dict__`` on first access, after which the
instance attribute is found first and the descriptor is never called again. Two threads racing
on one object may both compute the value (the same value; the last one stays).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Generic, TypeVar, overload

T = TypeVar("T")


class cached(Generic[T]):  # noqa: N801 - used like ``property``
    """A read-only attribute computed on first access and kept on the instance."""

    def __init__(self, func: Callable[[Any], T]) -> None:
        self.func = func
        self.name = func.__name__
        self.__doc__ = func.__doc__

    def __set_name__(self, owner: type, name: str) -> None:
        self.name = name

    @overload
    def __get__(self, obj: None, owner: type) -> cached[T]: ...

    @overload
    def __get__(self, obj: object, owner: type) -> T: ...

    def __get__(self, obj: object | None, owner: type) -> T | cached[T]:
        if obj is None:
            return self
        value = obj.__dict__[self.name] = self.func(obj)
        return value
