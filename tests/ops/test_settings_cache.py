"""cached_settings serves what django.conf.settings holds, also after a setting changes."""

from __future__ import annotations

import pytest
from django.conf import settings
from django.test import override_settings

from routing.ops.settings_cache import cached_settings


def test_a_setting_reads_as_django_has_it_and_is_kept_as_an_attribute() -> None:
    assert cached_settings.GOMODEL_MAX_BODY_BYTES == settings.GOMODEL_MAX_BODY_BYTES
    assert "GOMODEL_MAX_BODY_BYTES" in vars(cached_settings)


def test_a_changed_setting_is_read_afresh_and_the_old_value_comes_back_after() -> None:
    before = cached_settings.GOMODEL_MAX_N
    with override_settings(GOMODEL_MAX_N=before + 7):
        during = cached_settings.GOMODEL_MAX_N
    after = cached_settings.GOMODEL_MAX_N
    assert (during, after) == (before + 7, before)


def test_the_settings_fixture_is_seen(settings) -> None:  # pytest-django's, through setting_changed
    cached_settings.GOMODEL_AUTH  # noqa: B018 - cached before the change
    settings.GOMODEL_AUTH = "keys-only-for-this-test"
    assert cached_settings.GOMODEL_AUTH == "keys-only-for-this-test"


def test_an_unknown_or_lower_case_name_is_an_attribute_error_every_time() -> None:
    for _ in range(2):
        with pytest.raises(AttributeError):
            cached_settings.GOMODEL_NO_SUCH_SETTING  # noqa: B018
        with pytest.raises(AttributeError):
            cached_settings.configure  # noqa: B018 - a method of LazySettings, not a setting
