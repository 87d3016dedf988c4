"""A catalog holding every cloud and sharing mode, written by the real Store from a compiled fleet,
for the placement tests (tests/test_placement.py, tests/test_place_cli.py)."""

from __future__ import annotations

import dataclasses
from datetime import UTC, datetime
from pathlib import Path

from provisioner.capacity import capacity
from provisioner.catalog.listing import ClusterIdentity, ObservedPool
from provisioner.catalog.store import Store
from provisioner.compile import compile_file, desired_state

# Each pool is one mode on one cloud; the pairs that differ in one respect only (isolation,
# maximum size, name) are there for the choice rule's order.
FLEET = """\
clusters:
  - name: azure
    cloud: aks
    subscription: 00000000-0000-0000-0000-000000000000
    resourceGroup: ml
    cluster: ml-aks
    pools:
      - {name: a100mig7, instanceType: Standard_NC24ads_A100_v4, gpu: {mig: 1g.10gb},
         nodes: {min: 0, max: 20}, spot: true, taints: ["dedicated=ml:NoSchedule"]}
      - {name: a100migts, instanceType: Standard_NC24ads_A100_v4,
         gpu: {mig: 1g.10gb, sharing: time-slicing, replicas: 2}, nodes: {min: 0, max: 2}}
      - {name: t4ts, instanceType: Standard_NC4as_T4_v3, gpu: {sharing: time-slicing, replicas: 4},
         nodes: {min: 0, max: 4}}
      - {name: t4mps, instanceType: Standard_NC4as_T4_v3, gpu: {sharing: mps, replicas: 4},
         nodes: {min: 0, max: 4}}
      - {name: a100x2, instanceType: Standard_NC48ads_A100_v4, nodes: {min: 0, max: 3}}
  - name: gcp
    cloud: gke
    project: my-project
    location: us-central1
    cluster: ml-gke
    pools:
      - {name: a100-mig, instanceType: a2-highgpu-1g, gpu: {mig: 1g.5gb}, nodes: {min: 0, max: 8}}
      - {name: a100-mig-mps, instanceType: a2-highgpu-1g, gpu: {mig: 2g.10gb, sharing: mps, replicas: 2},
         nodes: {min: 0, max: 2}}
      - {name: l4-ts, instanceType: g2-standard-8, gpu: {sharing: time-slicing, replicas: 4},
         nodes: {min: 0, max: 4}, labels: {team: ml}}
      - {name: l4-mps, instanceType: g2-standard-8, gpu: {sharing: mps, replicas: 4}, nodes: {min: 0, max: 4}}
  - name: aws
    cloud: eks
    region: us-east-1
    cluster: ml-eks
    nodeRole: arn:aws:iam::123456789012:role/eks-gpu-nodes
    subnets: [subnet-0abc1234]
    pools:
      - {name: p4d-mig, instanceType: p4d.24xlarge, gpu: {mig: 1g.5gb}, nodes: {count: 1}}
      - {name: ts-a, instanceType: g5.xlarge, gpu: {sharing: time-slicing, replicas: 8},
         nodes: {min: 0, max: 6}}
      - {name: ts-b, instanceType: g5.xlarge, gpu: {sharing: time-slicing, replicas: 8},
         nodes: {min: 0, max: 6}}
      - {name: ts-0-small, instanceType: g5.xlarge, gpu: {sharing: time-slicing, replicas: 8},
         nodes: {min: 0, max: 2}}
      - {name: a10g-x4, instanceType: g5.12xlarge, nodes: {min: 0, max: 2}}
  - name: ali
    cloud: ack
    region: cn-hangzhou
    clusterId: c0123456789abcdef0123456789abcdef
    vswitches: [vsw-bp1a2b3c4d5e6f7g8h9i0]
    pools:
      - {name: a10-cgpu, instanceType: ecs.gn7i-c8g1.2xlarge, gpu: {sharing: memory, isolation: memory},
         nodes: {min: 0, max: 4}}
      - {name: a10-coremem, instanceType: ecs.gn7i-c8g1.2xlarge, gpu: {sharing: memory, isolation: compute},
         nodes: {min: 0, max: 4}}
      - {name: edge-t4, edge: true, gpu: {model: T4, count: 1, sharing: memory, isolation: none}}
"""

# The IDs ACK gives its node pools (the catalog's cloud_id; a sync reads them from the cloud).
ACK_POOL_IDS = {"a10-cgpu": "np1a2b3c4d5e6f", "a10-coremem": "np7a8b9c0d1e2f", "edge-t4": "npe0d1e2f3a4b5"}


def fill(store: Store, fleet: Path, observed_at: datetime | None = None) -> None:
    """Record every cluster of `fleet` as if a sync had just listed it as the fleet asks."""
    store.migrate()
    for cluster in compile_file(fleet).clusters:
        pools = []
        for pool in cluster.pools:
            state = desired_state(pool)
            if state.name in ACK_POOL_IDS:
                state = dataclasses.replace(state, cloud_id=ACK_POOL_IDS[state.name])
            pools.append(ObservedPool(state, capacity(cluster.cloud.key, state)))
        identity = ClusterIdentity(cluster.name, cluster.cloud.key, "account", "location", cluster.name)
        store.record_cluster(identity, pools, [], observed_at or datetime.now(UTC))


def catalog(tmp_path: Path, url: str | None = None) -> Store:
    tmp_path.mkdir(parents=True, exist_ok=True)
    fleet = tmp_path / "fleet.yaml"
    fleet.write_text(FLEET, encoding="utf-8")
    store = Store(url or f"sqlite:///{tmp_path / 'catalog.db'}")
    fill(store, fleet)
    return store
