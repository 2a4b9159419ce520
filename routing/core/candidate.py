"""Candidate: one target of a virtual model, as the selector sees it (health, weight, price).

Candidates are built once per routing table; ``select`` (``routing.core.selector``) runs over them per request.
"""

from __future__ import annotations

from routing.core.vitals import HasVitals

MIN_PRICE = 1e-9  # a free target counts as this cheap, so price ratios stay finite


class Candidate:
    """One target of a virtual model. ``price`` is input+output USD per 1M tokens; None means unpriced.

    Treat it as immutable. A plain slotted class rather than a frozen dataclass because a request may build
    several, and a frozen dataclass's ``__init__`` is markedly slower.
    """

    __slots__ = ("name", "health", "weight", "price", "price_weights")

    def __init__(self, name: str, health: HasVitals, weight: float = 1.0, price: float | None = None) -> None:
        if not weight > 0:
            raise ValueError(f"{name}: weight must be > 0")
        if price is not None and not price >= 0:
            raise ValueError(f"{name}: price must be >= 0")
        self.name = name
        self.health = health
        self.weight = weight
        self.price = price
        # weight / price ** k for k = 0, 1, 2 (None where unpriced), read by the adaptive hot loop.
        self.price_weights: tuple[float | None, float | None, float | None]
        if price is None:
            self.price_weights = (weight, None, None)
        else:
            price = price if price > MIN_PRICE else MIN_PRICE
            self.price_weights = (weight, weight / price, weight / (price * price))

    def __repr__(self) -> str:
        return f"Candidate({self.name!r}, weight={self.weight}, price={self.price})"

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Candidate):
            return NotImplemented
        return (self.name, self.health, self.weight, self.price) == (
            other.name,
            other.health,
            other.weight,
            other.price,
        )

    def __hash__(self) -> int:
        return hash((self.name, id(self.health), self.weight, self.price))
