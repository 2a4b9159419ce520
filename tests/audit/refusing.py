"""A database that refuses audit inserts for a reason other than a lost connection: a trigger, added by a test.

``refusing(tables, prefix)`` installs on each table a trigger that raises (SQLSTATE P0001, an InternalError,
not an OperationalError) for every row whose ``request_id`` starts with ``prefix``, and removes it afterwards.
It talks to the database through a connection of its own, so it works whatever the code under test does
with Django's connections.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import psycopg
from django.db import connection

REFUSAL_TEXT = "refused by the test trigger"


def conninfo() -> str:
    s = connection.settings_dict
    return f"host={s['HOST'] or '127.0.0.1'} port={s['PORT'] or 5432} user={s['USER']} dbname={s['NAME']}"


@contextlib.contextmanager
def refusing(tables: tuple[str, ...], prefix: str) -> Iterator[None]:
    function = f"gomodel_test_refuse_{prefix.strip('-_').lower()}"
    with psycopg.connect(conninfo(), autocommit=True) as conn:
        conn.execute(
            f"CREATE OR REPLACE FUNCTION {function}() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN "
            f"IF NEW.request_id LIKE '{prefix}%' THEN RAISE EXCEPTION '{REFUSAL_TEXT}'; END IF; RETURN NEW; END $$"
        )
        for table in tables:
            conn.execute(f"CREATE TRIGGER {function} BEFORE INSERT ON {table} "
                         f"FOR EACH ROW EXECUTE FUNCTION {function}()")
    try:
        yield
    finally:
        with psycopg.connect(conninfo(), autocommit=True) as conn:
            for table in tables:
                conn.execute(f"DROP TRIGGER IF EXISTS {function} ON {table}")
            conn.execute(f"DROP FUNCTION IF EXISTS {function}()")
