"""compile_settings: the environment's PRO_* values are defaults, a field set in the admin wins."""

from __future__ import annotations

from django.test import override_settings

from routing import models as m
from routing.config.file.routing_settings import compile_settings

ENVIRONMENT = {
    "PRO_SMART_ROUTING_ENABLED": True,
    "PRO_SMART_ROUTING_THRESHOLD": 4,
    "PRO_SMART_ROUTING_SESSION_TTL": 1800.0,
    "PRO_SMART_ROUTING_KEYWORDS": ["refactor"],
    "PRO_ROUTING_ENABLED": True,
    "PRO_ROUTING_OBJECTIVE": "balanced",
    "PRO_ROUTING_MIN_WEIGHT_FRACTION": 0.05,
    "PRO_ROUTING_COOLDOWN_BASE": 30.0,
    "PRO_ROUTING_COOLDOWN_MAX": 300.0,
    "PRO_ROUTING_WARM_CACHE_WEIGHT": 8.0,
    "PRO_ROUTING_WARM_CACHE_TTL": 600.0,
}


@override_settings(**ENVIRONMENT)
def test_it_takes_every_value_from_the_environment_without_a_row() -> None:
    compiled = compile_settings(None)

    assert compiled.smart_routing_enabled is True
    assert compiled.smart_routing_threshold == 4
    assert compiled.smart_routing_session_ttl_s == 1800.0
    assert compiled.smart_routing_keywords == ("refactor",)
    assert compiled.routing_enabled is True
    assert compiled.routing_objective == "balanced"
    assert compiled.min_weight_fraction == 0.05
    assert compiled.cooldown_base_s == 30.0
    assert compiled.cooldown_max_s == 300.0
    assert compiled.warm_cache_weight == 8.0
    assert compiled.warm_cache_ttl_s == 600.0


@override_settings(**ENVIRONMENT)
def test_it_takes_the_environment_for_fields_the_admin_left_empty() -> None:
    assert compile_settings(m.RoutingSettings(routing_objective="")) == compile_settings(None)


@override_settings(**ENVIRONMENT)
def test_it_lets_every_field_set_in_the_admin_win() -> None:
    row = m.RoutingSettings(
        smart_routing_enabled=False,
        smart_routing_threshold=9,
        smart_routing_session_ttl_seconds=60,
        smart_routing_keywords=[],
        routing_enabled=False,
        routing_objective="cost",
        min_weight_fraction=0.0,
        cooldown_base_seconds=1.5,
        cooldown_max_seconds=2.5,
        warm_cache_weight=1.0,
        warm_cache_ttl_seconds=0.0,
    )

    compiled = compile_settings(row)

    assert compiled.smart_routing_enabled is False
    assert compiled.smart_routing_threshold == 9
    assert compiled.smart_routing_session_ttl_s == 60.0
    assert compiled.smart_routing_keywords == ()
    assert compiled.routing_enabled is False
    assert compiled.routing_objective == "cost"
    assert compiled.min_weight_fraction == 0.0
    assert compiled.cooldown_base_s == 1.5
    assert compiled.cooldown_max_s == 2.5
    assert compiled.warm_cache_weight == 1.0
    assert compiled.warm_cache_ttl_s == 0.0
