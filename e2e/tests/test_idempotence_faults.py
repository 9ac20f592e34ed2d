"""Idempotent producers under connection cuts: a proxy between client and broker drops the
connection right after forwarding a Produce request, before the response gets back. The
producer retries batches the broker already appended; the broker must recognise them, so
the topic ends with exactly one copy of each record, in produce order per partition."""

from __future__ import annotations

import time

import pytest

from brokers import free_port
from clients import ALL
from fault_proxy import FaultProxy
from util import PARTITIONS, dataset, verify

pytestmark = pytest.mark.durability


@pytest.mark.parametrize("client", ["confluent-kafka", "java"])
def test_idempotent_producer_survives_connection_cuts(new_broker, topic, tmp, client):
    proxy_port = free_port()
    proxy = FaultProxy(proxy_port, cut_every=4, max_cuts=25)
    try:
        def route_through_proxy(b):
            proxy.target_port = b.port

        b = new_broker({"advertised.listeners": f"PLAINTEXT://127.0.0.1:{proxy_port}"},
                       before_start=route_through_proxy)
        bootstrap = f"127.0.0.1:{proxy_port}"
        proxy.faults = False
        ALL["confluent-kafka"](bootstrap, tmp).create_topic(topic, PARTITIONS)
        recs = dataset(20_000, seed=77, ts_base=int(time.time() * 1000) - 60_000)
        proxy.faults = True
        c = ALL[client](bootstrap, tmp)
        if client == "confluent-kafka":
            # idempotence on, small batches so there are many produce requests to cut
            acked = c.produce(topic, recs, "lz4", extra={"enable.idempotence": True, "linger.ms": 1,
                                                         "batch.num.messages": 200, "retry.backoff.ms": 50})
        else:
            # the Java producer is idempotent by default (acks=all, enable.idempotence=true)
            acked = c.produce(topic, recs, "lz4")
        assert proxy.cuts >= 5, f"the proxy cut only {proxy.cuts} produce requests; the test proved nothing"
        proxy.faults = False
        got = ALL["confluent-kafka"](bootstrap, tmp).consume(topic)
        verify(recs, got, acked=acked,
               what=f"{client} through {proxy.cuts} cut connections")
    finally:
        proxy.close()
