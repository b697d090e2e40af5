"""`metrics.Labelled`: a metric's children kept by label values."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter

from graph.server.metrics import Labelled


def test_each_set_of_label_values_counts_in_its_own_series() -> None:
    registry = CollectorRegistry()
    requests = Labelled(
        Counter("requests", "by route and status", ["route", "status"], registry=registry)
    )
    requests("/graphql", "200").inc()
    requests("/graphql", "200").inc()
    requests("/graphql", "400").inc()
    assert requests("/graphql", "200") is requests("/graphql", "200")
    assert registry.get_sample_value("requests_total", {"route": "/graphql", "status": "200"}) == 2
    assert registry.get_sample_value("requests_total", {"route": "/graphql", "status": "400"}) == 1
