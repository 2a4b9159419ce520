"""The admin's pages and forms, through Django's test client. Request-serving tests here capture audit events in
a list (tests/audit_capture.py)."""

from tests.audit_capture import audit_events  # noqa: F401  (an autouse fixture)
