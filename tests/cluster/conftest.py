"""One cluster (three production gateways behind HAProxy, PostgreSQL, Redis, RabbitMQ, a Celery worker and the
simulator) for every test of this package; each test leaves every replica running and in rotation."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.cluster.cluster import Cluster, cluster


@pytest.fixture(scope="package")
def running_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    with cluster(tmp_path_factory.mktemp("cluster")) as running:
        yield running


@pytest.fixture
def gomodel_cluster(running_cluster: Cluster) -> Iterator[Cluster]:
    """The cluster with every replica up and in rotation, checked before and after the test."""
    for replica in running_cluster.replicas:
        assert replica.running(), f"{replica.name} is not running"
        assert running_cluster.balancer.status(replica.name) == "UP"
    running_cluster.sim.clear_faults()
    yield running_cluster
    running_cluster.sim.clear_faults()
