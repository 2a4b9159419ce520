"""A worker's stop, in process: SIGTERM makes it drain (readiness 503), the grace bounds the requests still
running, and the lifespan shutdown flushes the audit. The same under granian with real load is in
tests/e2e/test_shutdown.py.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
from collections.abc import Iterator
from typing import Any

import pytest
from django.test import RequestFactory

from audit.delivery import publisher
from audit.models import AuditRevision
from routing.api import probes
from routing.ops import early_stop, shutdown
from routing.ops.shutdown import drain
from tests.audit.events import make_event


@pytest.fixture(autouse=True)
def fresh_drain() -> Iterator[None]:
    """The process-wide drain and signal handlers as they were before the test."""
    state = dict(vars(drain))
    handlers = {signum: signal.getsignal(signum) for signum in shutdown.STOP_SIGNALS}
    yield
    vars(drain).clear()
    vars(drain).update(state)
    for signum, handler in handlers.items():
        signal.signal(signum, handler)
    early_stop._caught.clear()


async def ready_status() -> tuple[int, dict[str, Any]]:
    response = await probes.ready(RequestFactory().get("/health/ready"))
    return response.status_code, json.loads(response.content)


@pytest.mark.django_db
@pytest.mark.parametrize("signum", shutdown.STOP_SIGNALS)
def test_a_stop_signal_makes_readiness_fail_and_still_reaches_the_servers_handler(signum: int) -> None:
    servers_handler_got: list[int] = []

    async def scenario() -> tuple[int, dict[str, Any]]:
        signal.signal(signum, lambda number, frame: servers_handler_got.append(number))  # as a server's
        shutdown.install_signal_handlers(asyncio.get_running_loop(), grace=30)
        os.kill(os.getpid(), signum)
        while not servers_handler_got:  # Python runs the handler between two bytecodes of this thread
            await asyncio.sleep(0)
        return await ready_status()

    status, body = asyncio.run(scenario())
    assert servers_handler_got == [signum]  # the server's own graceful stop goes ahead
    assert status == 503
    assert body["status"] == "draining"


@pytest.mark.django_db
def test_readiness_is_unaffected_before_a_stop() -> None:
    status, body = asyncio.run(ready_status())
    assert body["status"] != "draining"


def test_a_request_still_running_when_the_grace_is_over_is_cancelled_quietly() -> None:
    finished: list[str] = []

    async def slow_app(scope: Any, receive: Any, send: Any) -> None:
        try:
            await asyncio.sleep(60)
        finally:
            finished.append("cleaned up")  # the request's own clean-up (its audit event) still runs

    async def scenario() -> None:
        drain.lifespan_started = True
        request = asyncio.create_task(drain.track(slow_app)({}, None, None))
        await asyncio.sleep(0)
        assert drain.in_flight == 1
        drain.begin(grace=0.05)
        await asyncio.wait_for(request, 10)  # returns normally: the server gets no error to log
        assert drain.in_flight == 0

    asyncio.run(scenario())
    assert finished == ["cleaned up"]


def test_a_request_that_ends_within_the_grace_is_left_alone() -> None:
    async def quick_app(scope: Any, receive: Any, send: Any) -> None:
        await asyncio.sleep(0.05)

    async def scenario() -> None:
        drain.lifespan_started = True
        request = asyncio.create_task(drain.track(quick_app)({}, None, None))
        await asyncio.sleep(0)
        drain.begin(grace=5)
        await asyncio.wait_for(request, 10)
        assert not request.cancelled()
        assert request.exception() is None
        drain.end()

    asyncio.run(scenario())


def test_a_cancellation_that_is_not_the_drains_goes_through() -> None:
    async def slow_app(scope: Any, receive: Any, send: Any) -> None:
        await asyncio.sleep(60)

    async def scenario() -> None:
        drain.lifespan_started = True
        request = asyncio.create_task(drain.track(slow_app)({}, None, None))
        await asyncio.sleep(0)
        request.cancel()  # the server's, or a client that went away
        with pytest.raises(asyncio.CancelledError):
            await request

    asyncio.run(scenario())


def test_a_worker_without_the_lifespan_protocol_says_so_loudly(caplog: pytest.LogCaptureFixture) -> None:
    async def app(scope: Any, receive: Any, send: Any) -> None:
        return None

    drain.lifespan_started = False
    drain._checked_lifespan = False
    tracked = drain.track(app)
    asyncio.run(tracked({}, None, None))
    asyncio.run(tracked({}, None, None))
    errors = [r for r in caplog.records if "NO ASGI LIFESPAN" in r.getMessage()]
    assert len(errors) == 1
    assert errors[0].levelname == "ERROR"


@pytest.mark.django_db(transaction=True)
def test_the_lifespan_shutdown_delivers_the_audit_events_still_in_memory() -> None:
    publisher.shutdown()
    for i in range(3):
        publisher.publish(make_event(f"at-stop-{i}"))
    asyncio.run(shutdown.stop_gateway())
    assert AuditRevision.objects.filter(request_id__startswith="at-stop-").count() == 3


@pytest.mark.django_db(transaction=True)
def test_a_stop_signal_that_arrives_during_start_up_reaches_the_server_once_it_handles_signals() -> None:
    masters_handler_got: list[int] = []
    servers_handler_got: list[int] = []
    # A forked granian worker starts with its master's handler, which does nothing useful in the worker.
    signal.signal(signal.SIGTERM, lambda number, frame: masters_handler_got.append(number))
    early_stop.catch()
    os.kill(os.getpid(), signal.SIGTERM)  # forwarded by the master while the application is being imported

    async def lifespan_startup() -> None:
        signal.signal(signal.SIGTERM, lambda number, frame: servers_handler_got.append(number))  # the server's
        await shutdown.start_serving()

    asyncio.run(lifespan_startup())
    publisher.shutdown()
    assert masters_handler_got == []
    assert servers_handler_got == [signal.SIGTERM]
    assert drain.draining


@pytest.mark.django_db(transaction=True)
def test_a_stop_signal_that_came_before_the_application_was_imported_is_not_lost() -> None:
    class ForkedMaster:  # the worker's copy of granian's server object, and the handler bound to it
        interrupt_signal = False

        def signal_handler_interrupt(self, *args: Any) -> None:
            self.interrupt_signal = True

    master = ForkedMaster()
    signal.signal(signal.SIGTERM, master.signal_handler_interrupt)
    signal.signal(signal.SIGINT, master.signal_handler_interrupt)
    os.kill(os.getpid(), signal.SIGTERM)  # forwarded while the worker was still importing the server's modules
    assert master.interrupt_signal
    early_stop.catch()
    servers_handler_got: list[int] = []

    async def lifespan_startup() -> None:
        signal.signal(signal.SIGTERM, lambda number, frame: servers_handler_got.append(number))
        await shutdown.start_serving()

    asyncio.run(lifespan_startup())
    publisher.shutdown()
    assert servers_handler_got == [signal.SIGTERM]
    assert drain.draining


def test_a_handler_that_has_not_run_records_nothing() -> None:
    class ForkedMaster:
        interrupt_signal = False

        def signal_handler_interrupt(self, *args: Any) -> None:
            self.interrupt_signal = True

    signal.signal(signal.SIGTERM, ForkedMaster().signal_handler_interrupt)
    early_stop.catch()
    assert early_stop._caught == []


def test_a_process_with_the_default_handlers_keeps_them_while_starting() -> None:
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    signal.signal(signal.SIGINT, signal.default_int_handler)
    early_stop.catch()
    assert signal.getsignal(signal.SIGTERM) == signal.SIG_DFL
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler
