"""Go and protobuf durations: the settings' and the providers' one parser."""

from __future__ import annotations

import pytest

from routing.core.durations import parse_duration


@pytest.mark.parametrize(
    ("text", "seconds"),
    [("6m0s", 360.0), ("1h2m3.5s", 3723.5), ("20ms", 0.02), ("32s", 32.0), ("0.5s", 0.5), ("0", 0.0),
     ("1h30m", 5400.0), ("250us", 0.00025), (" 30s ", 30.0), ("", None), ("5 s", None), ("s", None),
     ("12", None), ("1x", None), ("-5s", None), ("30s5", None)],
)
def test_it_parses_go_and_protobuf_durations(text: str, seconds: float | None) -> None:
    value = parse_duration(text)
    assert value == (pytest.approx(seconds) if seconds is not None else None)
