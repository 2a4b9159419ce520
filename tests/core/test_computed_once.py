"""``computed_once`` computes a value on its first read and is then out of the way, like ``cached_property``."""

from __future__ import annotations

from routing.core.computed_once import computed_once


class Counted:
    def __init__(self, base: int) -> None:
        self.base = base
        self.computed = 0

    @computed_once
    def doubled(self) -> int:
        """Twice the base."""
        self.computed += 1
        return self.base * 2


def test_the_value_is_computed_on_the_first_read_only() -> None:
    one = Counted(21)
    assert "doubled" not in one.__dict__  # nothing computed before it is asked for
    assert one.doubled == 42
    assert one.doubled == 42
    assert one.computed == 1
    assert one.__dict__["doubled"] == 42  # later reads are plain attribute reads


def test_each_instance_has_its_own_value_and_assignment_replaces_it() -> None:
    one, two = Counted(1), Counted(2)
    assert (one.doubled, two.doubled) == (2, 4)
    one.doubled = 7
    assert one.doubled == 7
    assert one.computed == 1


def test_the_class_attribute_is_the_descriptor_with_the_function_s_doc() -> None:
    assert isinstance(Counted.doubled, computed_once)
    assert Counted.doubled.__doc__ == "Twice the base."
