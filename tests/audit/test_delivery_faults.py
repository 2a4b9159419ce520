"""Nothing is lost: real gateway processes publish under load while the worker, the broker, PostgreSQL or the
gateway itself fails; afterwards every request id is stored exactly once.

Processes (tests/audit/procs.py): publishing processes running the real publisher (tests/audit/publish_load.py),
``celery -A gomodel_site worker`` (prefork, one child), a RabbitMQ vhost of the test's own on the machine's
broker, a private redis-server and a private PostgreSQL cluster that the tests stop and start (the machine's
shared services are never stopped). The worker writes to the suite's test database, except in the PostgreSQL
outage test, which uses the private cluster.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest
from django.db import connection

from audit.models import AuditRevision
from tests.audit.procs import (
    REPO,
    Gateway,
    PrivatePostgres,
    PrivateRedis,
    RabbitVhost,
    Worker,
    free_port,
    process_env,
    wait_for,
)

pytestmark = [pytest.mark.slow, pytest.mark.services]

OUTAGE_SECONDS = 30


@pytest.fixture
def rabbit() -> Iterator[RabbitVhost]:
    vhost = RabbitVhost()
    vhost.create()
    yield vhost
    vhost.delete()


def test_database_url() -> str:
    s = connection.settings_dict
    return f"postgres://{s['USER']}@{s['HOST'] or '127.0.0.1'}:{s['PORT'] or 5432}/{s['NAME']}"


test_database_url.__test__ = False  # type: ignore[attr-defined]  # a helper, not a test


def audit_env(tmp_path: Path, *, database_url: str, broker_url: str) -> dict[str, str]:
    return process_env(
        DATABASE_URL=database_url,
        CELERY_BROKER_URL=broker_url,
        AUDIT_SPOOL_DIR=str(tmp_path / "spool"),
        AUDIT_BATCH_SIZE="50",
        AUDIT_FLUSH_INTERVAL="200ms",
    )


def stored(prefix: str) -> set[str]:
    return set(AuditRevision.objects.filter(request_id__startswith=prefix + "-").values_list("request_id", flat=True))


def expected(prefix: str, count: int) -> set[str]:
    return {f"{prefix}-{i:06d}" for i in range(count)}


def spooled(spool_dir: Path, prefix: str) -> list[str]:
    ids = []
    for path in spool_dir.glob("audit-*.jsonl"):
        for line in path.read_bytes().splitlines():
            ids += [e["request_id"] for e in json.loads(line) if e["request_id"].startswith(prefix + "-")]
    return ids


def _conninfo() -> str:
    s = connection.settings_dict
    return f"host={s['HOST'] or '127.0.0.1'} port={s['PORT'] or 5432} user={s['USER']} dbname={s['NAME']}"


def blocked_inserts() -> int:
    """Backends waiting on a lock while inserting audit revisions (a worker stuck mid-batch)."""
    with psycopg.connect(_conninfo(), autocommit=True) as conn:
        row = conn.execute(
            "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() "
            "AND wait_event_type = 'Lock' AND query LIKE 'INSERT INTO \"audit_auditrevision\"%%'"
        ).fetchone()
    return int(row[0]) if row else 0


@contextlib.contextmanager
def revisions_table_locked() -> Iterator[None]:
    """Hold a lock that makes every insert into the revisions table wait, until the block ends (rollback)."""
    with psycopg.connect(_conninfo()) as conn:
        conn.execute("LOCK TABLE audit_auditrevision IN SHARE MODE")
        try:
            yield
        finally:
            conn.rollback()


@pytest.mark.django_db(transaction=True)
def test_nothing_is_lost_when_the_worker_is_killed_mid_batch(tmp_path: Path, rabbit: RabbitVhost) -> None:
    env = audit_env(tmp_path, database_url=test_database_url(), broker_url=rabbit.url)
    worker = Worker(env, tmp_path / "worker.log")
    worker.start()
    gateway = Gateway(env, tmp_path / "gateway.log", prefix="wk", count=1200, rate=200)
    try:
        gateway.wait_started()
        wait_for(lambda: stored("wk"), 30, "the first batch to be stored")
        with revisions_table_locked():
            # The worker's child is now inside its transaction, blocked on the lock: kill it (the master
            # rejects the message with requeue), then kill the whole worker while the next child is blocked
            # on the same batch (the broker requeues the unacknowledged message).
            wait_for(lambda: blocked_inserts() >= 1, 30, "the worker to block mid-batch")
            [child] = worker.children()
            os.kill(child, signal.SIGKILL)
            wait_for(lambda: blocked_inserts() >= 2, 30, "a new child to block on the redelivered batch")
            worker.kill()
        worker = Worker(env, tmp_path / "worker.log")
        worker.start()
        counters = gateway.finish(timeout=60)
        assert counters["published"] == 1200
        wait_for(lambda: stored("wk") == expected("wk", 1200), 90, "every event to be stored")
        assert AuditRevision.objects.filter(request_id__startswith="wk-").count() == 1200
        log = (tmp_path / "worker.log").read_text()
        assert "WorkerLostError" in log  # the child's death was noticed and its batch requeued
    finally:
        gateway.kill()
        worker.stop()


@pytest.mark.django_db(transaction=True)
def test_nothing_is_lost_when_the_broker_is_down_for_30_seconds(tmp_path: Path) -> None:
    redis = PrivateRedis(tmp_path / "redis")
    redis.start()
    env = audit_env(tmp_path, database_url=test_database_url(), broker_url=redis.url)
    worker = Worker(env, tmp_path / "worker.log")
    worker.start()
    gateway = Gateway(env, tmp_path / "gateway.log", prefix="br", count=1500, rate=40)
    try:
        gateway.wait_started()
        wait_for(lambda: stored("br"), 30, "the first batch to be stored")
        redis.stop()
        down_at = time.monotonic()
        time.sleep(OUTAGE_SECONDS)
        during = len(stored("br"))
        redis.start()
        assert time.monotonic() - down_at >= OUTAGE_SECONDS
        counters = gateway.finish(timeout=90)
        assert counters["spooled"] > 0, "the outage must have sent events to the spool"
        assert counters["replayed_batches"] > 0
        wait_for(lambda: stored("br") == expected("br", 1500), 90, "every event to be stored")
        assert during < 1500
        assert spooled(tmp_path / "spool", "br") == []
    finally:
        gateway.kill()
        worker.stop()
        redis.stop()


def _private_rows(pg: PrivatePostgres, prefix: str) -> tuple[int, set[str]]:
    try:
        with psycopg.connect(pg.url, connect_timeout=3) as conn:
            rows = conn.execute("SELECT request_id FROM audit_auditrevision WHERE request_id LIKE %s",
                                [prefix + "-%"]).fetchall()
    except psycopg.OperationalError:
        return -1, set()
    return len(rows), {r[0] for r in rows}


def test_nothing_is_lost_when_postgresql_is_down_for_30_seconds(tmp_path: Path, rabbit: RabbitVhost) -> None:
    pg = PrivatePostgres()
    worker: Worker | None = None
    gateway: Gateway | None = None
    t0 = time.monotonic()
    try:
        pg.init()
        pg.start()
        migrate = subprocess.run([sys.executable, "manage.py", "migrate", "audit", "--noinput"], cwd=REPO,
                                 env=process_env(DATABASE_URL=pg.url), capture_output=True, text=True, timeout=180)
        assert migrate.returncode == 0, migrate.stderr[-3000:]
        print(f"migrated at {time.monotonic() - t0:.1f}s")
        env = audit_env(tmp_path, database_url=pg.url, broker_url=rabbit.url)
        worker = Worker(env, tmp_path / "worker.log")
        worker.start()
        print(f"worker ready at {time.monotonic() - t0:.1f}s")
        gateway = Gateway(env, tmp_path / "gateway.log", prefix="pg", count=1500, rate=40)
        gateway.wait_started()
        wait_for(lambda: _private_rows(pg, "pg")[0] > 0, 30, "the first batch to be stored")
        print(f"first batch stored at {time.monotonic() - t0:.1f}s")
        pg.stop()
        time.sleep(OUTAGE_SECONDS)
        pg.start()
        counters = gateway.finish(timeout=90)
        print(f"gateway done at {time.monotonic() - t0:.1f}s")
        assert counters["spooled"] == 0  # the broker was up: the batches waited in the broker and the worker
        wanted = expected("pg", 1500)
        wait_for(lambda: _private_rows(pg, "pg")[1] == wanted, 90, "every event to be stored")
        print(f"all stored at {time.monotonic() - t0:.1f}s")
        count, ids = _private_rows(pg, "pg")
        assert count == 1500
        assert ids == wanted
        assert "database unreachable" in (tmp_path / "worker.log").read_text()
    finally:
        if gateway is not None:
            gateway.kill()
        if worker is not None:
            worker.stop()
        pg.remove()


@pytest.mark.django_db(transaction=True)
def test_nothing_is_lost_when_the_gateway_restarts(tmp_path: Path, rabbit: RabbitVhost) -> None:
    spool_dir = tmp_path / "spool"
    unreachable = f"redis://127.0.0.1:{free_port()}/0"  # nothing listens there: every publish fails
    env_down = audit_env(tmp_path, database_url=test_database_url(), broker_url=unreachable)

    # 1. A gateway stopped with SIGTERM under load: what it had in memory goes to the spool first.
    first = Gateway(env_down, tmp_path / "gateway.log", prefix="rs1", count=1_000_000, rate=400,
                    progress=tmp_path / "progress")
    first.wait_started()
    wait_for(lambda: first.last_index() > 500, 30, "the gateway to be under load")
    first.signal(signal.SIGTERM)
    assert first.process.returncode == -signal.SIGTERM
    last = first.last_index()
    handed_over = set(spooled(spool_dir, "rs1"))
    assert last > 100
    # The signal lands before or after the publish call of event ``last``: both are complete.
    assert handed_over in (expected("rs1", last), expected("rs1", last + 1))

    # 2. A gateway killed with SIGKILL after its events reached the spool (the spool is fsync'd).
    second = Gateway(env_down, tmp_path / "gateway.log", prefix="rs2", count=300, rate=1000, hold=True)
    second.wait_published(30)
    wait_for(lambda: len(spooled(spool_dir, "rs2")) == 300, 30, "the crashed gateway's events to be spooled")
    second.kill()

    # 3. A new gateway with the broker reachable replays both spools at start-up, besides its own traffic.
    env_up = audit_env(tmp_path, database_url=test_database_url(), broker_url=rabbit.url)
    worker = Worker(env_up, tmp_path / "worker.log")
    worker.start()
    try:
        third = Gateway(env_up, tmp_path / "gateway.log", prefix="rs3", count=150, rate=50)
        counters = third.finish(timeout=60)
        assert counters["replayed_batches"] > 0
        wait_for(lambda: stored("rs1") == handed_over, 60, "the SIGTERM'd gateway's events")
        wait_for(lambda: stored("rs2") == expected("rs2", 300), 60, "the SIGKILL'd gateway's events")
        wait_for(lambda: stored("rs3") == expected("rs3", 150), 60, "the new gateway's events")
        assert list(spool_dir.glob("audit-*.jsonl")) == []
    finally:
        worker.stop()
