"""The routing table's per-name answers (kind, cheapest price), kept for the names it has and never for others."""

from __future__ import annotations

from routing.core.table import ModelSpec, ProviderSpec, RoutingTable, TargetRef, TierRouteSpec, VirtualModelSpec


def table() -> RoutingTable:
    return RoutingTable.build(
        version=1, providers=[ProviderSpec("p", "openai", "http://127.0.0.1:9/v1")],
        models=[ModelSpec(name="cheap", provider="p", upstream="c", input_price=0.1, output_price=0.4),
                ModelSpec(name="dear", provider="p", upstream="d", input_price=3.0, output_price=15.0),
                ModelSpec(name="free", provider="p", upstream="f"),
                ModelSpec(name="off", provider="p", upstream="o", input_price=0.01, output_price=0.01, enabled=False)],
        virtual_models=[VirtualModelSpec("pool", "adaptive", (TargetRef("dear"), TargetRef("cheap"), TargetRef("off"))),
                        VirtualModelSpec("unpriced", "failover", (TargetRef("free"),))],
        tier_routes=[TierRouteSpec("smart", easy="pool", hard="dear")])


def test_kinds_and_prices_are_the_same_asked_twice() -> None:
    routes = table()
    for _ in range(2):
        assert [routes.kind_of(n) for n in ("smart", "pool", "cheap", "off", "nope")] == \
            ["tier", "virtual", "model", None, None]
        assert routes.cheapest_price("pool") == 0.5  # the disabled model's lower price does not count
        assert routes.cheapest_price("dear") == 18.0
        assert routes.cheapest_price("smart") == 0.5
        assert routes.cheapest_price("unpriced") is None
        assert routes.cheapest_price("nope") is None


def test_names_a_client_invents_are_not_kept() -> None:
    routes = table()
    for i in range(1000):
        assert routes.kind_of(f"invented-{i}") is None
        assert routes.cheapest_price(f"invented-{i}") is None
    assert set(routes._kinds) <= {"smart", "pool", "unpriced", "cheap", "dear", "free"}
    assert set(routes._prices) <= set(routes._kinds)


def test_the_virtual_models_below_a_name_are_listed_depth_first_and_kept_for_the_tables_names() -> None:
    base = table()
    routes = RoutingTable.build(
        version=1, providers=list(base.providers.values()), models=list(base.models.values()),
        virtual_models=[*base.virtual_models.values(),
                        VirtualModelSpec("outer", "failover",
                                         (TargetRef("pool"), TargetRef("cheap"), TargetRef("unpriced")))])
    for _ in range(2):
        assert routes.virtual_models_below("outer") == ("outer", "pool", "unpriced")
        assert routes.virtual_models_below("pool") == ("pool",)
        assert routes.virtual_models_below("cheap") == ()
        assert routes.virtual_models_below("nope") == ()
    assert set(routes._virtual_below) == {"outer", "pool"}
