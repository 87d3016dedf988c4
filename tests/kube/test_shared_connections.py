"""Clusters one API server serves share its connections where their TLS settings are the same,
each request still sent with its own context's credentials, and never more of them than
REQUESTS_PER_POOL; a forked helper opens its own."""

from __future__ import annotations

import functools
import multiprocessing
import threading
from pathlib import Path
from typing import Any

import pytest
from ruamel.yaml import YAML

from provisioner.errors import KubeUnreachable
from provisioner.kube.contexts import Kube, KubeAccess, each_cluster
from provisioner.kube.kubeconfig import REQUESTS_PER_POOL
from tests.kube.conftest import KubeWorld

CLUSTERS = ("azure", "gcp", "aws")


def _pool(kube: Kube, cluster: str) -> Any:
    """The urllib3 pool a client would send `cluster`'s requests through (not yet used by it)."""
    api = kube._core.api_client
    return api.rest_client.pool_manager.connection_from_url(api.configuration.host)


def _with_contexts(world: KubeWorld, extra: dict[str, dict[str, Any]]) -> Path:
    """The sandbox's kubeconfig plus, per name in `extra`, a context to the azure cluster's server
    with that cluster entry's settings changed and a user of its own ({"token": ...})."""
    yaml = YAML(typ="safe", pure=True)
    document = yaml.load(world.kubeconfig.read_text(encoding="utf-8"))
    azure = next(c for c in document["clusters"] if c["name"] == "azure")["cluster"]
    for name, settings in extra.items():
        cluster = {k: v for k, v in {**azure, **settings.get("cluster", {})}.items() if v is not None}
        document["clusters"].append({"name": name, "cluster": cluster})
        document["users"].append({"name": name, "user": settings["user"]})
        document["contexts"].append({"name": name, "context": {"cluster": name, "user": name}})
    path = world.kubeconfig.parent / "kubeconfig-extra"
    with path.open("w", encoding="utf-8") as out:
        yaml.dump(document, out)
    return path


def test_clusters_of_one_api_server_share_its_connection_each_with_its_own_token(world: KubeWorld):
    path = _with_contexts(world, {"wrong-token": {"user": {"token": "not-the-sandbox-token"}}})
    access = KubeAccess(kubeconfig=path)
    seen = {}
    for cluster in CLUSTERS:  # one after another: each finds the connection the one before left
        with access.connect(cluster, cluster) as kube:
            seen[cluster] = {n["metadata"]["name"] for n in kube.nodes()}
    assert seen == {c: set(world.node_names(c, "")) for c in CLUSTERS}  # each its own cluster's nodes
    with access.connect("azure", "azure") as fresh:
        pool = _pool(fresh, "azure")
        assert pool.num_connections == 1  # made once, by the first cluster's read
        assert pool.pool.qsize() == pool.pool.maxsize  # and kept for the next one
    with pytest.raises(KubeUnreachable, match="401"), access.connect("wrong", "wrong-token") as kube:
        kube.nodes()  # the same connection, this context's token: refused
    with access.connect("azure", "azure") as kube:
        assert {n["metadata"]["name"] for n in kube.nodes()} == seen[
            "azure"
        ]  # and the right one still served


def test_clients_made_at_once_for_one_ca_share_one_pool(world: KubeWorld):
    """Loaders made on many threads at once each write the inline CA where it is not yet written:
    they must all name one file, or urllib3 keys a pool for each and none shares a connection."""
    access = KubeAccess(kubeconfig=world.kubeconfig)
    clusters = [CLUSTERS[i % len(CLUSTERS)] for i in range(64)]
    start = threading.Barrier(len(clusters))
    pools: list[Any] = [None] * len(clusters)

    def connect(i: int) -> None:
        start.wait()
        with access.connect(clusters[i], clusters[i]) as kube:
            pools[i] = _pool(kube, clusters[i])

    threads = [threading.Thread(target=connect, args=(i,)) for i in range(len(clusters))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len({id(pool) for pool in pools}) == 1


def _nodes_and_pods(access: KubeAccess, cluster: str) -> int:
    with access.connect(cluster, cluster) as kube:
        return len(kube.nodes()) + len(kube.pods())


def test_many_clusters_read_at_once_through_one_api_server_wait_for_its_few_connections(world: KubeWorld):
    """A gateway serving hundreds of clusters (Rancher's, the sandbox's) is not sent a connection,
    and a TLS handshake, per read in flight: past REQUESTS_PER_POOL, reads wait their turn."""
    clusters = [CLUSTERS[i % len(CLUSTERS)] for i in range(4 * REQUESTS_PER_POOL)]
    access = KubeAccess(kubeconfig=world.kubeconfig)
    expected = [_nodes_and_pods(access, c) for c in CLUSTERS]
    world.sandbox.kube.app.latency = 0.2  # every read in flight long enough for the others to start
    try:
        counts = each_cluster(functools.partial(_nodes_and_pods, access), clusters, helpers=False)
    finally:
        world.sandbox.kube.app.latency = 0.0
    assert counts == [expected[i % len(CLUSTERS)] for i in range(len(clusters))]  # every read answered
    with access.connect("azure", "azure") as kube:
        assert _pool(kube, "azure").num_connections <= REQUESTS_PER_POOL  # 100 reads in flight


@pytest.mark.filterwarnings("ignore::urllib3.exceptions.InsecureRequestWarning")  # what is tested
def test_other_tls_settings_make_connections_of_their_own(world: KubeWorld):
    """A context that skips verifying the server (no CA) never takes a connection verified with
    the CA, nor the other way round."""
    path = _with_contexts(
        world,
        {
            "no-verify": {
                "cluster": {"certificate-authority-data": None, "insecure-skip-tls-verify": True},
                "user": {"token": "sandbox"},
            }
        },
    )
    access = KubeAccess(kubeconfig=path)
    with access.connect("azure", "azure") as kube:
        kube.nodes()
    with access.connect("no-verify", "no-verify") as kube:
        pool = _pool(kube, "no-verify")
        assert pool.num_connections == 0  # the verified connection is not offered to it
        assert kube.nodes()
        assert pool.num_connections == 1


def _read_in_child(path: str, out: Any) -> None:
    access = KubeAccess(kubeconfig=Path(path))
    with access.connect("azure", "azure") as kube:
        pool = _pool(kube, "azure")
        made_before = pool.num_connections
        kube.nodes()
        out.send((made_before, pool.num_connections))


def test_a_forked_helper_opens_its_own_connection_and_leaves_the_parent_s_usable(world: KubeWorld):
    access = KubeAccess(kubeconfig=world.kubeconfig)
    with access.connect("azure", "azure") as kube:
        expected = {n["metadata"]["name"] for n in kube.nodes()}
    parent, child = multiprocessing.Pipe()
    process = multiprocessing.get_context("fork").Process(
        target=_read_in_child, args=(str(world.kubeconfig), child)
    )
    process.start()
    assert parent.recv() == (0, 1)  # none of the parent's connections: one of its own
    process.join(timeout=30)
    assert process.exitcode == 0
    with access.connect("azure", "azure") as kube:
        pool = _pool(kube, "azure")
        assert {n["metadata"]["name"] for n in kube.nodes()} == expected
        assert pool.num_connections == 1  # the parent's connection, whole after the child's exit
