"""A fleet of thousands of clusters written as a user writes one, for the scale tests and the bench.

Block style, a comment above each cluster, labels on every pool: 3,000 clusters of 4 pools come
to about 5 MB, past the fleet file's old 4 MB limit. The clusters are spread over quota scopes
as a large organisation's are: AKS subscriptions, GKE projects, EKS and ACK regions, about the
same number of clusters in each, so pacing and sharding by scope have many scopes to work on.
With `shared_blocks`, each scope's first cluster anchors its pools and every other cluster of the
scope merges them in (`<<: *alias`), keeping only its own labels: the same fleet, by aliases.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

CLUSTERS, POOLS = 3000, 4


@dataclass(frozen=True)
class Scope:
    """A quota scope a fleet's clusters are spread over: the cloud and the cluster fields that say it."""

    cloud: str
    fields: tuple[tuple[str, str], ...]  # the cluster's scope fields, as the fleet file writes them

    @property
    def key(self) -> str:
        return "-".join([self.cloud, *(value for _, value in self.fields)])


# Region names are the clouds' own: AWS's (docs.aws.amazon.com/global-infrastructure/latest/
# regions/aws-regions.html) and Alibaba Cloud's region IDs (alibabacloud.com/help/en/
# cloud-migration-guide-for-beginners/latest/regions-and-zones). GKE runs every project in one
# region; its projects and AKS's subscriptions are made up.
EKS_REGIONS = (
    "us-east-1",
    "us-east-2",
    "us-west-2",
    "eu-west-1",
    "eu-central-1",
    "ap-northeast-1",
    "ap-southeast-1",
)
ACK_REGIONS = (
    "cn-hangzhou",
    "cn-shanghai",
    "cn-beijing",
    "cn-shenzhen",
    "cn-zhangjiakou",
    "ap-southeast-1",
    "eu-central-1",
)
SCOPES: tuple[Scope, ...] = (
    *(Scope("aks", (("subscription", f"5c0e{s:04x}-7a1b-4c2d-9e3f-{s:012x}"),)) for s in range(1, 9)),
    *(Scope("gke", (("project", f"ml-team-{s:02d}"),)) for s in range(1, 9)),
    *(Scope("eks", (("region", region),)) for region in EKS_REGIONS),
    *(Scope("ack", (("region", region),)) for region in ACK_REGIONS),
)
TEAMS = ("vision", "speech", "search", "ranking", "research", "platform", "robotics")


@dataclass(frozen=True)
class PoolKind:
    """One of a cloud's four pools, on an instance type its hardware data knows."""

    name: str
    instance_type: str
    comment: str  # what a user notes above it
    gpu: tuple[tuple[str, object], ...] = ()
    max_nodes: int = 4


POOL_KINDS: dict[str, tuple[PoolKind, ...]] = {
    "aks": (
        PoolKind(
            "a100mig7", "Standard_NC24ads_A100_v4", "each A100 cut into 7 x 1g.10gb", (("mig", "1g.10gb"),), 8
        ),
        PoolKind(
            "t4shared",
            "Standard_NC4as_T4_v3",
            "each T4 time-sliced between 10 pods",
            (("sharing", "time-slicing"), ("replicas", 10)),
            10,
        ),
        PoolKind("t4whole", "Standard_NC4as_T4_v3", "a whole T4 per pod, for the batch jobs"),
        PoolKind(
            "a100half", "Standard_NC24ads_A100_v4", "each A100 cut in two 3g.40gb", (("mig", "3g.40gb"),)
        ),
    ),
    "gke": (
        PoolKind("a100-mig", "a2-highgpu-1g", "each A100 40GB cut into 7 x 1g.5gb", (("mig", "1g.5gb"),), 8),
        PoolKind(
            "l4-timeshare",
            "g2-standard-8",
            "each L4 time-shared by 10 clients",
            (("sharing", "time-slicing"), ("replicas", 10)),
        ),
        PoolKind(
            "l4-mps", "g2-standard-8", "each L4 shared through MPS", (("sharing", "mps"), ("replicas", 4))
        ),
        PoolKind("l4-whole", "g2-standard-8", "a whole L4 per pod, for the batch jobs"),
    ),
    "eks": (
        PoolKind(
            "a10g-timesliced",
            "g5.xlarge",
            "each A10G time-sliced into 10",
            (("sharing", "time-slicing"), ("replicas", 10)),
            6,
        ),
        PoolKind(
            "p4d-mig", "p4d.24xlarge", "eight A100s a node, each cut into 7 x 1g.5gb", (("mig", "1g.5gb"),), 2
        ),
        PoolKind("a10g-whole", "g5.xlarge", "a whole A10G per pod, for the batch jobs"),
        PoolKind(
            "a10g-mps", "g5.xlarge", "each A10G shared through MPS", (("sharing", "mps"), ("replicas", 4))
        ),
    ),
    "ack": (
        PoolKind(
            "a10-cgpu",
            "ecs.gn7i-c8g1.2xlarge",
            "each A10 shared by memory, cGPU isolating it",
            (("sharing", "memory"), ("isolation", "memory")),
        ),
        PoolKind(
            "a10-share",
            "ecs.gn7i-c8g1.2xlarge",
            "each A10 shared by memory, scheduling only",
            (("sharing", "memory"), ("isolation", "none")),
        ),
        PoolKind("a10-whole", "ecs.gn7i-c8g1.2xlarge", "a whole A10 per pod, for the batch jobs"),
        PoolKind("t4-whole", "ecs.gn6i-c4g1.xlarge", "a whole T4 per pod, for the small models"),
    ),
}

# The cluster fields besides its scope's: which cluster, and where its nodes go.
CLUSTER_FIELDS = {
    "aks": "    resourceGroup: rg-{team}\n    cluster: {name}\n",
    "gke": "    location: us-central1\n    cluster: {name}\n",
    "eks": "    cluster: {name}\n    nodeRole: arn:aws:iam::123456789012:role/eks-gpu-nodes\n"
    "    subnets: [subnet-{index:08x}]\n",
    "ack": "    clusterId: c{index:032x}\n    vswitches: [vsw-{index:021x}]\n",
}


def scope_of(index: int) -> Scope:
    """The scope cluster `index` is in: round the scopes, so every scope gets its share."""
    return SCOPES[index % len(SCOPES)]


def cluster_name(index: int) -> str:
    """Cluster `index`'s fleet name (its cloud's name for it as well, where one is needed)."""
    scope = scope_of(index)
    return f"{scope.cloud}-{SCOPES.index(scope):02d}-{index // len(SCOPES):04d}"


def fleet_text(clusters: int = CLUSTERS, shared_blocks: bool = False) -> str:
    """`clusters` clusters of 4 pools each over SCOPES, as a user writes them."""
    parts = [
        "# The GPU fleet: every team's training and inference clusters, on four clouds.\n",
        "# `provisioner validate` checks it; `provisioner plan` shows what would change.\n",
        "clusters:\n",
    ]
    anchored: set[Scope] = set()
    for index in range(clusters):
        scope = scope_of(index)
        anchors = shared_blocks and scope not in anchored
        anchored.add(scope)
        parts.append(_cluster(index, scope, anchor=anchors, merge=shared_blocks and not anchors))
    return "".join(parts)


def write_fleet(path: Path, clusters: int = CLUSTERS, shared_blocks: bool = False) -> Path:
    path.write_text(fleet_text(clusters, shared_blocks), encoding="utf-8")
    return path


def _cluster(index: int, scope: Scope, anchor: bool, merge: bool) -> str:
    name = cluster_name(index)
    team = TEAMS[index % len(TEAMS)]
    lines = [
        f"  # {team}: {'inference' if index % 3 else 'training'} cluster {index} of {scope.key}; "
        f"on call: {team}-oncall@example.com\n",
        f"  - name: {name}\n",
        f"    cloud: {scope.cloud}\n",
        *(f"    {key}: {value}\n" for key, value in scope.fields),
        CLUSTER_FIELDS[scope.cloud].format(name=name, team=team, index=index),
        "    pools:\n",
    ]
    for first, kind in zip([True, False, False, False], POOL_KINDS[scope.cloud], strict=True):
        alias = f"{scope.cloud}{SCOPES.index(scope):02d}-{kind.name}"
        lines.append(f"      # {kind.comment}\n")
        if merge:
            lines.append(f"      - <<: *{alias}\n")
        else:
            lines.append(
                f"      - &{alias}\n        name: {kind.name}\n" if anchor else f"      - name: {kind.name}\n"
            )
            lines.append(f"        instanceType: {kind.instance_type}\n")
            if kind.gpu:
                lines.append("        gpu:\n")
                lines.extend(f"          {key}: {value}\n" for key, value in kind.gpu)
            lines.append(f"        nodes:\n          min: 0\n          max: {kind.max_nodes}\n")
            if first:
                lines.append("        spot: true\n        diskSizeGb: 200\n")
                lines.append("        taints:\n          - dedicated=gpu:NoSchedule\n")
        lines.append("        labels:\n")
        lines.append(f"          team: {team}\n")
        lines.append(f"          cost-center: cc-{1000 + index % 97}\n")
        lines.append(f"          environment: {'prod' if index % 4 else 'staging'}\n")
    return "".join(lines) + "\n"
