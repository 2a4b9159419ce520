"""Django settings read on the request path, as plain attributes.

``django.conf.settings`` is a ``LazyObject`` whose ``__getattribute__`` is a Python function, so every
``settings.X`` costs a Python call even after Django has cached the value; a request reads about ten settings.
``cached_settings.X`` is an ordinary instance attribute after its first read. The cache forgets everything when
a setting changes (``django.core.signals.setting_changed``, which ``override_settings`` and pytest-django's
``settings`` fixture send), so it never serves a value that ``django.conf.settings`` would not.
"""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.core.signals import setting_changed


class _CachedSettings:
    def __getattr__(self, name: str) -> Any:
        # Only on a miss: the value found is kept in the instance's dict, where the next read finds it first.
        if not name.isupper():  # settings are upper case; LazySettings' own methods are not served here
            raise AttributeError(name)
        value = self.__dict__[name] = getattr(settings, name)
        return value

    def forget(self) -> None:
        self.__dict__.clear()


cached_settings = _CachedSettings()


def _forget(**_: Any) -> None:
    cached_settings.forget()


setting_changed.connect(_forget, dispatch_uid="routing.ops.settings_cache")
