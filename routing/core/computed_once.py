"""``computed_once``: ``functools.cached_property`` without its lock.

On Python 3.11 every first read of a ``cached_property`` takes a re-entrant lock shared by all instances of
the class (Python 3.12 removed it as a mistake) and runs a dozen lines of Python around the computation. The
request path reads four such values per request (a call's session and capability needs, the case-folded
user text, a response's cookie jar), each on an object of its own request. This descriptor computes the
value on first read and stores it in the instance's ``__dict__``, where every later read finds it without
calling anything. Two threads reading the same new instance at once may both compute: the values must be
what the instance alone determines, as all of these are.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Generic, TypeVar, overload

T = TypeVar("T")


class computed_once(Generic[T]):
    def __init__(self, compute: Callable[[Any], T]) -> None:
        self.compute = compute
        self.name = compute.__name__
        self.__doc__ = compute.__doc__

    def __set_name__(self, owner: type, name: str) -> None:
        self.name = name

    @overload
    def __get__(self, instance: None, owner: type | None = None) -> computed_once[T]: ...

    @overload
    def __get__(self, instance: object, owner: type | None = None) -> T: ...

    def __get__(self, instance: object | None, owner: type | None = None) -> T | computed_once[T]:
        if instance is None:
            return self
        value = instance.__dict__[self.name] = self.compute(instance)
        return value
