"""The page a locked-out admin login gets (django-axes calls this; settings.AXES_LOCKOUT_CALLABLE).

Axes' own response is a bare line of text; this one is the admin's page, says how long the lock lasts and is
a 429, so a script that guesses passwords sees it as rate limiting.
"""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.contrib import admin
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render


def lockout_response(request: HttpRequest, original_response: HttpResponse | None = None,
                     credentials: dict[str, Any] | None = None) -> HttpResponse:
    """The admin's "login refused" page, status 429, with a Retry-After of the whole lockout."""
    seconds = int(settings.GOMODEL_ADMIN_LOCKOUT)
    context = {**admin.site.each_context(request), "failure_limit": settings.GOMODEL_ADMIN_LOGIN_FAILURES,
               "lockout": duration_words(seconds)}
    response = render(request, "admin/login_locked.html", context, status=429)
    response["Retry-After"] = str(seconds)
    return response


def duration_words(seconds: int) -> str:
    """``15 minutes``, ``1 hour``, ``90 seconds``: the largest unit that divides the duration."""
    for unit, size in (("day", 86_400), ("hour", 3_600), ("minute", 60)):
        if seconds >= size and seconds % size == 0:
            count = seconds // size
            return f"{count} {unit}{'s' if count != 1 else ''}"
    return f"{seconds} second{'s' if seconds != 1 else ''}"
