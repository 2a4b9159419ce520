"""A revision records the category route's decision: category, rule, detail, alias and target."""

from __future__ import annotations

import pytest

from audit import services
from audit.delivery.event import prepare_event
from audit.models import AuditRevision
from tests.audit.events import make_event

CATEGORY = {"category": "code", "category_rule": "keywords", "category_detail": "refactor*",
            "category_alias": "smart", "category_target": "normal"}


@pytest.mark.django_db
def test_the_category_fields_become_columns_and_an_event_without_them_gets_empty_ones() -> None:
    services.revisions_ingest(events=[make_event("with", **CATEGORY), make_event("without")])
    row = AuditRevision.objects.get(request_id="with")
    assert (row.category, row.category_rule, row.category_detail, row.category_alias, row.category_target) == (
        "code", "keywords", "refactor*", "smart", "normal")
    other = AuditRevision.objects.get(request_id="without")
    assert (other.category, other.category_rule, other.category_alias, other.category_target) == ("", "", "", "")


@pytest.mark.django_db
def test_the_filter_by_category_finds_the_rows() -> None:
    services.revisions_ingest(events=[make_event("a", **CATEGORY), make_event("b", **{**CATEGORY, "category": "math"})])
    assert list(AuditRevision.objects.filter(category="math").values_list("request_id", flat=True)) == ["b"]


def test_odd_values_are_capped_and_never_raise() -> None:
    event = prepare_event({**make_event("odd"), "category": "x" * 100, "category_rule": 7,
                           "category_detail": None, "category_target": ["not", "a", "string"]},
                          store_bodies=False, max_bytes=1000)
    assert len(event["category"]) == 32
    assert event["category_rule"] == "7"
    assert event["category_detail"] == ""
    assert isinstance(event["category_target"], str)
