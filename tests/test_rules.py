"""Every fleet-file rule: a bad file, and the exact message it gets (line: path: message)."""

from __future__ import annotations

import pytest

from provisioner.compile import compile_file
from provisioner.errors import FleetError
from tests.conftest import EXAMPLES


def problems(path) -> list[str]:
    with pytest.raises(FleetError) as caught:
        compile_file(path)
    return [f"{d.line}: {d.path}: {d.message}" for d in caught.value.diagnostics]


# (cloud, pools YAML, expected problems). Pools start on line 8 (AKS, GKE) or 9 (EKS).
CASES = {
    "mig profile the GPU lacks": (
        "aks",
        """\
        - name: a100
          instanceType: Standard_NC24ads_A100_v4
          gpu: {mig: 1g.5gb}
          nodes: {count: 1}
        """,
        [
            "10: clusters[azure-ml].pools[a100].gpu.mig: 1g.5gb is not a MIG profile of the A100 80GB "
            "on AKS; it offers 1g.10gb, 2g.20gb, 3g.40gb, 4g.40gb, 7g.80gb"
        ],
    ),
    "aks cannot ask for the double-memory 1g profile": (
        "aks",
        """\
        - name: a100
          instanceType: Standard_ND96asr_v4
          gpu: {mig: 1g.10gb}
          nodes: {count: 1}
        """,
        [
            "10: clusters[azure-ml].pools[a100].gpu.mig: 1g.10gb is not a MIG profile of the A100 40GB "
            "on AKS; it offers 1g.5gb, 2g.10gb, 3g.20gb, 4g.20gb, 7g.40gb"
        ],
    ),
    "gke has no double-memory 1g profile on the A100s": (
        "gke",
        """\
        - name: a100
          instanceType: a2-highgpu-1g
          gpu: {mig: 1g.10gb}
          nodes: {count: 1}
        """,
        [
            "10: clusters[gcp-ml].pools[a100].gpu.mig: 1g.10gb is not a MIG profile of the A100 40GB "
            "on GKE; it offers 1g.5gb, 2g.10gb, 3g.20gb, 7g.40gb"
        ],
    ),
    "gke has no 1g.20gb on the A100 80GB": (
        "gke",
        """\
        - name: a100
          instanceType: a2-ultragpu-1g
          gpu: {mig: 1g.20gb}
          nodes: {count: 1}
        """,
        [
            "10: clusters[gcp-ml].pools[a100].gpu.mig: 1g.20gb is not a MIG profile of the A100 80GB "
            "on GKE; it offers 1g.10gb, 2g.20gb, 3g.40gb, 7g.80gb"
        ],
    ),
    # container-engine-accelerators pkg/gpu/nvidia/mig/mig.go: GKE's device plugin has no 4g.40gb.
    "gke's device plugin has no 4g.40gb on the H100": (
        "gke",
        """\
        - name: h100
          instanceType: a3-highgpu-1g
          gpu: {mig: 4g.40gb}
          nodes: {count: 1}
        """,
        [
            "10: clusters[gcp-ml].pools[h100].gpu.mig: 4g.40gb is not a MIG profile of the H100 80GB "
            "on GKE; it offers 1g.10gb, 1g.20gb, 2g.20gb, 3g.40gb, 7g.80gb"
        ],
    ),
    "gke's device plugin has no 4g.20gb on the A100 40GB": (
        "gke",
        """\
        - name: a100
          instanceType: a2-highgpu-1g
          gpu: {mig: 4g.20gb}
          nodes: {count: 1}
        """,
        [
            "10: clusters[gcp-ml].pools[a100].gpu.mig: 4g.20gb is not a MIG profile of the A100 40GB "
            "on GKE; it offers 1g.5gb, 2g.10gb, 3g.20gb, 7g.40gb"
        ],
    ),
    "mig on a GPU without mig": (
        "eks",
        """\
        - name: g5
          instanceType: g5.xlarge
          gpu: {mig: 1g.5gb}
          nodes: {count: 1}
        """,
        [
            "11: clusters[aws-ml].pools[g5].gpu.mig: the A10G 24GB of g5.xlarge does not support MIG; "
            "remove gpu.mig or choose an instance type with A100, A30, H100, H200 or B200 GPUs"
        ],
    ),
    "replicas below two": (
        "aks",
        """\
        - name: t4
          instanceType: Standard_NC4as_T4_v3
          gpu: {sharing: time-slicing, replicas: 1}
          nodes: {count: 1}
        """,
        [
            "10: clusters[azure-ml].pools[t4].gpu.replicas: 1 is below the minimum of 2 clients per "
            "GPU for time-slicing"
        ],
    ),
    "gke caps sharing at 48 clients": (
        "gke",
        """\
        - name: l4
          instanceType: g2-standard-8
          gpu: {sharing: time-slicing, replicas: 49}
          nodes: {count: 1}
        """,
        [
            "10: clusters[gcp-ml].pools[l4].gpu.replicas: 49 is above the GKE maximum of 48 clients "
            "per GPU for time-slicing"
        ],
    ),
    "the device plugin caps mps at 48": (
        "eks",
        """\
        - name: g5
          instanceType: g5.xlarge
          gpu: {sharing: mps, replicas: 64}
          nodes: {count: 1}
        """,
        [
            "11: clusters[aws-ml].pools[g5].gpu.replicas: 64 is above the EKS maximum of 48 clients "
            "per GPU for mps"
        ],
    ),
    "mps on mig where the device plugin shares": (
        "eks",
        """\
        - name: p4d
          instanceType: p4d.24xlarge
          gpu: {mig: 1g.5gb, sharing: mps, replicas: 4}
          nodes: {count: 1}
        """,
        [
            "11: clusters[aws-ml].pools[p4d].gpu.sharing: mps on MIG partitions is not supported on "
            "EKS: the NVIDIA device plugin does not run MPS on MIG devices; use time-slicing, or "
            "drop gpu.mig"
        ],
    ),
    "aks pool-name rules": (
        "aks",
        """\
        - name: a100-mig-pool
          instanceType: Standard_NC24ads_A100_v4
          nodes: {count: 1}
        """,
        [
            "8: clusters[azure-ml].pools[a100-mig-pool].name: 'a100-mig-pool' is not a valid AKS pool "
            "name: lowercase letters and digits, starting with a letter, 1-12 characters"
        ],
    ),
    "min greater than max": (
        "aks",
        """\
        - name: t4
          instanceType: Standard_NC4as_T4_v3
          nodes: {min: 5, max: 2}
        """,
        ["10: clusters[azure-ml].pools[t4].nodes: min (5) is greater than max (2)"],
    ),
    "count and bounds together": (
        "aks",
        """\
        - name: t4
          instanceType: Standard_NC4as_T4_v3
          nodes: {min: 1, max: 2, count: 3}
        """,
        ["10: clusters[azure-ml].pools[t4].nodes: give either {min, max} or {count}, not both"],
    ),
    "unknown instance type suggests the nearest": (
        "aks",
        """\
        - name: a100
          instanceType: Standard_NC24ads_A100_v5
          nodes: {count: 1}
        """,
        [
            "9: clusters[azure-ml].pools[a100].instanceType: 'Standard_NC24ads_A100_v5' is not a known "
            "AKS GPU instance type; did you mean Standard_NC24ads_A100_v4, Standard_NC48ads_A100_v4, "
            "Standard_NC40ads_H100_v5?"
        ],
    ),
    "an instance type of another cloud": (
        "gke",
        """\
        - name: p4d
          instanceType: p4d.24xlarge
          nodes: {count: 1}
        """,
        [
            "9: clusters[gcp-ml].pools[p4d].instanceType: 'p4d.24xlarge' is not a known GKE GPU "
            "instance type; it is an instance type of EKS"
        ],
    ),
    "unknown key": (
        "aks",
        """\
        - name: t4
          instanceType: Standard_NC4as_T4_v3
          nodes: {count: 1}
          diskSizeGB: 100
        """,
        [
            "11: clusters[azure-ml].pools[t4].diskSizeGB: unknown field; did you mean diskSizeGb? "
            "allowed: name, instanceType, gpu, nodes, zones, edge, spot, diskSizeGb, labels, taints, "
            "replace, adopt"
        ],
    ),
    "zones that cannot share a fixed count": (
        "gke",
        """\
        - name: l4
          instanceType: g2-standard-8
          zones: [us-central1-a, us-central1-b, us-central1-c]
          nodes: {count: 4}
        """,
        [
            "11: clusters[gcp-ml].pools[l4].nodes.count: 4 nodes cannot be spread evenly over 3 zones: "
            "GKE runs the same number of nodes in each zone of a pool (4 / 3 = 1.33); give 3 or 6"
        ],
    ),
    "zones outside the cluster's region, or twice": (
        "gke",
        """\
        - name: l4
          instanceType: g2-standard-8
          zones: [europe-west4-a, us-central1-f, us-central1-f]
          nodes: {min: 0, max: 2}
        """,
        [
            "10: clusters[gcp-ml].pools[l4].zones[0]: 'europe-west4-a' is not a zone of us-central1 "
            "(GKE zones look like us-central1-a)",
            "10: clusters[gcp-ml].pools[l4].zones[2]: 'us-central1-f' is listed twice",
        ],
    ),
    "an AKS zone is a number": (
        "aks",
        """\
        - name: t4
          instanceType: Standard_NC4as_T4_v3
          zones: ["1", eastus-1]
          nodes: {count: 1}
        """,
        ["10: clusters[azure-ml].pools[t4].zones[1]: 'eastus-1' is not a zone (AKS zones look like 1)"],
    ),
    "zones on EKS, where subnets decide": (
        "eks",
        """\
        - name: g5
          instanceType: g5.xlarge
          zones: [us-east-1a]
          nodes: {count: 1}
        """,
        [
            "11: clusters[aws-ml].pools[g5].zones: EKS pools take no zones: an EKS node group runs in the "
            "Availability Zones of its subnets (CreateNodegroup takes subnets, not zones); choose the "
            "zones with the cluster's subnets"
        ],
    ),
    "a per-zone node limit over named zones": (
        "gke",
        """\
        - name: l4
          instanceType: g2-standard-8
          zones: [us-central1-a, us-central1-b]
          nodes: {min: 0, max: 2002}
        """,
        [
            "11: clusters[gcp-ml].pools[l4].nodes.max: 2002 nodes over 2 zones is above the GKE maximum "
            "of 1000 per zone"
        ],
    ),
    "sharing mode not known": (
        "aks",
        """\
        - name: t4
          instanceType: Standard_NC4as_T4_v3
          gpu: {sharing: vgpu, replicas: 4}
          nodes: {count: 1}
        """,
        [
            "10: clusters[azure-ml].pools[t4].gpu.sharing: 'vgpu' is not allowed; one of: exclusive, "
            "time-slicing, mps, memory"
        ],
    ),
    "sharing without replicas": (
        "aks",
        """\
        - name: t4
          instanceType: Standard_NC4as_T4_v3
          gpu: {sharing: time-slicing}
          nodes: {count: 1}
        """,
        ["10: clusters[azure-ml].pools[t4].gpu: sharing: time-slicing needs replicas (clients per GPU)"],
    ),
    "replicas without sharing": (
        "aks",
        """\
        - name: t4
          instanceType: Standard_NC4as_T4_v3
          gpu: {replicas: 4}
          nodes: {count: 1}
        """,
        [
            "10: clusters[azure-ml].pools[t4].gpu: replicas applies only with sharing: time-slicing or "
            "mps (sharing is exclusive)"
        ],
    ),
    "no silent coercion": (
        "aks",
        """\
        - name: t4
          instanceType: Standard_NC4as_T4_v3
          nodes: {count: "3"}
          spot: "yes"
        """,
        [
            "10: clusters[azure-ml].pools[t4].nodes.count: must be a valid integer (got '3')",
            "11: clusters[azure-ml].pools[t4].spot: must be a valid boolean (got 'yes')",
        ],
    ),
    "taint syntax and effect": (
        "aks",
        """\
        - name: t4
          instanceType: Standard_NC4as_T4_v3
          nodes: {count: 1}
          taints: ["dedicated", "x=y:Sometimes"]
        """,
        [
            "11: clusters[azure-ml].pools[t4].taints[0]: 'dedicated' is not a taint; write "
            "key=value:Effect, e.g. dedicated=ml:NoSchedule",
            "11: clusters[azure-ml].pools[t4].taints[1]: 'x=y:Sometimes' has effect Sometimes; "
            "allowed: NoSchedule, PreferNoSchedule, NoExecute",
        ],
    ),
    "a taint that clashes with the gpu taint": (
        "aks",
        """\
        - name: t4
          instanceType: Standard_NC4as_T4_v3
          nodes: {count: 1}
          taints: ["nvidia.com/gpu=absent:NoSchedule"]
        """,
        [
            "11: clusters[azure-ml].pools[t4].taints[0]: nvidia.com/gpu=absent:NoSchedule clashes with "
            "the GPU taint provisioner adds (same key and effect)"
        ],
    ),
    "labels the tool owns": (
        "eks",
        """\
        - name: g5
          instanceType: g5.xlarge
          nodes: {count: 1}
          labels: {nvidia.com/device-plugin.config: mine}
        """,
        [
            '12: clusters[aws-ml].pools[g5].labels["nvidia.com/device-plugin.config"]: '
            "nvidia.com/device-plugin.config is set by provisioner from gpu.sharing; remove it from labels"
        ],
    ),
    "the fleet pool's and its generation's labels": (
        "gke",
        """\
        - name: l4
          instanceType: g2-standard-8
          nodes: {count: 1}
          labels: {provisioner.io/pool: other, provisioner.io/generation: "2"}
        """,
        [
            '11: clusters[gcp-ml].pools[l4].labels["provisioner.io/generation"]: '
            "provisioner.io/generation marks which generation of its fleet pool a cloud pool is; "
            "remove it from labels",
            '11: clusters[gcp-ml].pools[l4].labels["provisioner.io/pool"]: '
            "provisioner.io/pool is set by provisioner from name; remove it from labels",
        ],
    ),
    "an eks pool name ending in a hyphen": (
        "eks",
        """\
        - name: g5-
          instanceType: g5.xlarge
          nodes: {count: 1}
        """,
        [
            "9: clusters[aws-ml].pools[g5-].name: 'g5-' cannot be the value of the node label "
            "provisioner.io/pool, which names the pool on its nodes: letters, digits, '-', '_' and '.', "
            "beginning and ending with a letter or digit"
        ],
    ),
    "gpu count where the machine fixes it": (
        "gke",
        """\
        - name: a100
          instanceType: a2-highgpu-1g
          gpu: {count: 2}
          nodes: {count: 1}
        """,
        ["10: clusters[gcp-ml].pools[a100].gpu.count: a2-highgpu-1g always has 1 GPU(s); remove gpu.count"],
    ),
    "gpu count where the pool chooses it": (
        "gke",
        """\
        - name: t4
          instanceType: n1-standard-8
          gpu: {count: 3}
          nodes: {count: 1}
        """,
        [
            "10: clusters[gcp-ml].pools[t4].gpu.count: 3 T4 16GB GPUs cannot be attached to "
            "n1-standard-8; one of: 1, 2, 4"
        ],
    ),
    "duplicate pool names": (
        "gke",
        """\
        - name: l4
          instanceType: g2-standard-8
          nodes: {count: 1}
        - name: l4
          instanceType: g2-standard-8
          nodes: {count: 1}
        """,
        ["11: clusters[gcp-ml].pools[l4].name: duplicate pool name 'l4' in this cluster"],
    ),
    # What the clouds' APIs refuse beyond Kubernetes' rules (hardware/clouds.yaml `limits`).
    "eks label keys are at most 63 characters": (
        "eks",
        f"""\
        - name: g5
          instanceType: g5.xlarge
          nodes: {{count: 1}}
          labels: {{example.com/{"k" * 52}: v}}
        """,
        [
            f'12: clusters[aws-ml].pools[g5].labels["example.com/{"k" * 52}"]: the key is 64 characters; '
            "EKS allows at most 63"
        ],
    ),
    "eks label values are not empty": (
        "eks",
        """\
        - name: g5
          instanceType: g5.xlarge
          nodes: {count: 1}
          labels: {team: ""}
        """,
        ["12: clusters[aws-ml].pools[g5].labels.team: EKS does not accept an empty label value"],
    ),
    "eks taint keys are at most 63 characters": (
        "eks",
        f"""\
        - name: g5
          instanceType: g5.xlarge
          nodes: {{count: 1}}
          taints: ["example.com/{"k" * 52}=v:NoSchedule"]
        """,
        ["12: clusters[aws-ml].pools[g5].taints[0]: the key is 64 characters; EKS allows at most 63"],
    ),
    "eks takes at most 50 taints, the gpu taint included": (
        "eks",
        f"""\
        - name: g5
          instanceType: g5.xlarge
          nodes: {{count: 1}}
          taints: [{", ".join(f"t{i}=x:NoSchedule" for i in range(50))}]
        """,
        [
            "12: clusters[aws-ml].pools[g5].taints: 51 taints (the GPU taint provisioner adds included); "
            "EKS allows at most 50 per pool"
        ],
    ),
    "aks os disks are at most 2048 GB": (
        "aks",
        """\
        - name: t4
          instanceType: Standard_NC4as_T4_v3
          nodes: {count: 1}
          diskSizeGb: 2049
        """,
        ["11: clusters[azure-ml].pools[t4].diskSizeGb: 2049 GB is above the AKS maximum of 2048 GB"],
    ),
    "gke disks are at least 12 GB": (
        "gke",
        """\
        - name: l4
          instanceType: g2-standard-8
          nodes: {count: 1}
          diskSizeGb: 11
        """,
        ["11: clusters[gcp-ml].pools[l4].diskSizeGb: 11 GB is below the GKE minimum of 12 GB"],
    ),
    "nodes per pool are bounded by the cloud": (
        "aks",
        """\
        - name: t4
          instanceType: Standard_NC4as_T4_v3
          nodes: {count: 100000000000000000000000000000}
        """,
        [
            "10: clusters[azure-ml].pools[t4].nodes.count: 100000000000000000000000000000 nodes is above "
            "the AKS maximum of 1000 per pool"
        ],
    ),
    "the autoscaling maximum too": (
        "eks",
        """\
        - name: g5
          instanceType: g5.xlarge
          nodes: {min: 0, max: 1001}
        """,
        ["11: clusters[aws-ml].pools[g5].nodes.max: 1001 nodes is above the EKS maximum of 1000 per pool"],
    ),
    "time-slicing replicas are bounded so the config key stays a label value": (
        "eks",
        f"""\
        - name: g5
          instanceType: g5.xlarge
          gpu: {{sharing: time-slicing, replicas: {10**59}}}
          nodes: {{count: 1}}
        """,
        [
            f"11: clusters[aws-ml].pools[g5].gpu.replicas: {10**59} is above the EKS maximum of 1000 "
            "clients per GPU for time-slicing"
        ],
    ),
    "gke sets its own gke-* labels": (
        "gke",
        """\
        - name: l4
          instanceType: g2-standard-8
          nodes: {count: 1}
          labels: {cloud.google.com/gke-accelerator: nvidia-l4}
        """,
        [
            '11: clusters[gcp-ml].pools[l4].labels["cloud.google.com/gke-accelerator"]: '
            "cloud.google.com/gke-* labels are not yours to set on GKE: GKE sets these node labels itself"
        ],
    ),
    "label key prefixes are at most 253 characters": (
        "aks",
        f"""\
        - name: t4
          instanceType: Standard_NC4as_T4_v3
          nodes: {{count: 1}}
          labels: {{{"a" * 60}.{"b" * 60}.{"c" * 60}.{"d" * 60}.example.com/team: ml}}
        """,
        [
            f'11: clusters[azure-ml].pools[t4].labels["{"a" * 60}.{"b" * 38}…"]: '
            f"'{'a' * 60}.{'b' * 37}… is not a Kubernetes label key ([prefix/]name: prefix a DNS "
            "subdomain of at most 253 characters, name at most 63)"
        ],
    ),
}


@pytest.mark.parametrize("name", CASES)
def test_rule(name, pool_file):
    cloud, pools, expected = CASES[name]
    assert problems(pool_file(cloud, pools)) == expected


def test_eks_needs_node_role_and_subnets(fleet_file):
    path = fleet_file("""\
        clusters:
          - name: aws-ml
            cloud: eks
            region: us-east-1
            cluster: ml-eks
        """)
    assert problems(path) == [
        "2: clusters[aws-ml].nodeRole: is required",
        "2: clusters[aws-ml].subnets: is required",
    ]


def test_cloud_cluster_names_follow_each_clouds_rule(fleet_file):
    """Each goes into the cloud's resource path: a `/`, a newline or 300 characters cannot."""
    path = fleet_file(f"""\
        clusters:
          - {{name: a, cloud: aks, subscription: 00000000-0000-0000-0000-000000000000, resourceGroup: ml,
              cluster: ml/aks}}
          - {{name: g, cloud: gke, project: my-project, location: us-central1, cluster: "ml\\ngke"}}
          - {{name: g2, cloud: gke, project: my-project, location: us-central1, cluster: {"g" * 41}}}
          - name: e
            cloud: eks
            region: us-east-1
            cluster: {"e" * 300}
            nodeRole: arn:aws:iam::123456789012:role/r
            subnets: [subnet-0abc1234]
        """)
    assert problems(path) == [
        "3: clusters[a].cluster: 'ml/aks' is not an AKS cluster name (1-63 letters, digits, - and _, "
        "starting and ending with a letter or digit)",
        "4: clusters[g].cluster: 'ml\\ngke' is not a GKE cluster name (1-40 lowercase letters, digits and "
        "hyphens, starting with a letter, not ending with a hyphen)",
        f"5: clusters[g2].cluster: '{'g' * 41}' is not a GKE cluster name (1-40 lowercase letters, digits "
        "and hyphens, starting with a letter, not ending with a hyphen)",
        f"9: clusters[e].cluster: '{'e' * 98}… is not an EKS cluster name (1-100 letters, digits, - and _, "
        "starting with a letter or digit)",
    ]


def test_the_longest_names_each_cloud_takes_pass(fleet_file):
    path = fleet_file(f"""\
        clusters:
          - {{name: a, cloud: aks, subscription: 00000000-0000-0000-0000-000000000000, resourceGroup: ml,
              cluster: A_{"x" * 60}9}}
          - {{name: g, cloud: gke, project: my-project, location: us-central1, cluster: g{"-" * 38}9}}
          - name: e
            cloud: eks
            region: us-east-1
            cluster: "9{"_" * 99}"
            nodeRole: arn:aws:iam::123456789012:role/r
            subnets: [subnet-0abc1234]
        """)
    assert [c.cluster.cluster for c in compile_file(path).clusters] == [
        f"A_{'x' * 60}9",
        f"g{'-' * 38}9",
        f"9{'_' * 99}",
    ]


def test_a_long_value_is_cut_in_its_message(fleet_file):
    path = fleet_file(f"""\
        clusters:
          - name: gcp-ml
            cloud: gke
            project: my-project
            location: us-central1
            cluster: ml-gke
            pools:
              - name: l4
                instanceType: g2-standard-8
                nodes: {{count: 1}}
                labels: {{team: {"x" * 3_000_000}}}
        """)
    assert problems(path) == [
        f"11: clusters[gcp-ml].pools[l4].labels.team: '{'x' * 98}… is not a Kubernetes label value "
        "(at most 63 letters, digits, -, _ or .)"
    ]


def test_unknown_cloud_and_duplicate_clusters(fleet_file):
    path = fleet_file("""\
        clusters:
          - name: ml
            cloud: gke
            project: my-project
            location: us-central1
            cluster: ml-gke
          - name: ml
            cloud: azure
        """)
    assert problems(path) == [
        "7: clusters[ml].name: duplicate cluster name 'ml'; names are unique in a fleet",
        "8: clusters[ml].cloud: 'azure' is not a supported cloud; one of: aks, gke, eks, ack",
    ]


def test_same_cluster_twice(fleet_file):
    path = fleet_file(
        """\
        clusters:
          - {name: a, cloud: eks, region: us-east-1, cluster: ml, nodeRole: R, subnets: [subnet-0abc1234]}
          - {name: b, cloud: eks, region: us-east-1, cluster: ml, nodeRole: R, subnets: [subnet-0abc1234]}
        """.replace(" R,", " arn:aws:iam::123456789012:role/r,")
    )
    assert problems(path) == [
        "3: clusters[b].cluster: 'ml' is the same cluster as clusters[a] (EKS reaches a cluster by "
        "region and name in the credentials' account; a node role's account does not choose it); two "
        "entries would fight over its pools",
    ]


def test_every_error_in_a_file_is_reported(fleet_file):
    """Structural errors in one cluster do not hide the cloud-rule errors of another's pools."""
    path = fleet_file("""\
        clusters:
          - name: aws-ml
            cloud: eks
            region: us-east-1
            cluster: ml-eks
            pools:
              - name: p4d
                instanceType: p4d.24xlarge
                gpu: {mig: 1g.10gb, sharing: mps, replicas: 1}
                nodes: {count: 1}
          - name: gcp-ml
            cloud: gke
            project: my-project
            location: us-central1
            cluster: ml-gke
            pools:
              - name: l4
                instanceType: g2-standard-8
                nodes: {count: -1}
        """)
    assert problems(path) == [
        "2: clusters[aws-ml].nodeRole: is required",
        "2: clusters[aws-ml].subnets: is required",
        "9: clusters[aws-ml].pools[p4d].gpu.replicas: 1 is below the minimum of 2 clients per GPU for mps",
        "9: clusters[aws-ml].pools[p4d].gpu.sharing: mps on MIG partitions is not supported on EKS: "
        "the NVIDIA device plugin does not run MPS on MIG devices; use time-slicing, or drop gpu.mig",
        "19: clusters[gcp-ml].pools[l4].nodes.count: must be greater than or equal to 0 (got -1)",
    ]


def test_yaml_syntax_error_has_a_line(fleet_file):
    path = fleet_file("clusters:\n  - name: a\n    cloud: [aks\n")
    [message] = problems(path)
    assert message.startswith("4: : invalid YAML") or message.startswith("3: : invalid YAML")


def test_duplicate_yaml_keys(fleet_file):
    path = fleet_file("clusters: []\nclusters: []\n")
    [message] = problems(path)
    assert message.startswith("2: : invalid YAML") and "duplicate key" in message


def test_missing_file(tmp_path):
    with pytest.raises(FleetError) as caught:
        compile_file(tmp_path / "nope.yaml")
    [diagnostic] = caught.value.diagnostics
    assert diagnostic.line is None and diagnostic.message == "cannot read: No such file or directory"


def test_empty_fleet(fleet_file):
    assert problems(fleet_file("clusters: []\n")) == ["1: clusters: must not be empty"]
    assert problems(fleet_file("# nothing\n")) == ["None: : expected a mapping with a clusters: list"]


def test_values_of_the_wrong_shape_are_errors_not_crashes(fleet_file):
    path = fleet_file("""\
        clusters:
          - name: {a: 1}
            cloud: [aks]
          - name: ml
            cloud: eks
            pools:
              - name: [g5]
                instanceType: g5.xlarge
              - 7
        """)
    assert problems(path) == [
        "3: clusters[0].cloud: \"['aks']\" is not a supported cloud; one of: aks, gke, eks, ack",
        "4: clusters[ml].cluster: is required",
        "4: clusters[ml].nodeRole: is required",
        "4: clusters[ml].region: is required",
        "4: clusters[ml].subnets: is required",
        "7: clusters[ml].pools[0].name: must be a valid string",
        # nodes is missing too, but whether a pool needs it is a cloud rule (edge pools have
        # none), checked once the pool's own structure is valid
        "9: clusters[ml].pools[1]: must be a mapping (got 7)",
    ]


@pytest.mark.parametrize("example", sorted(EXAMPLES.glob("*.yaml")), ids=lambda p: p.name)
def test_the_fast_parser_and_the_positions_parser_read_the_same_data(example):
    """Data comes from ruamel's C parser, lines from its round-trip parser: they must agree."""
    from provisioner.source import SourceDocument, _plain

    document = SourceDocument.read(example)
    assert document.data == _plain(document._tree)


TRICKY_SCALARS = """\
octal-looking: 017
octal: 0o17
hex: 0x1F
yes-word: yes
no-word: No
on-word: on
true-word: True
exponent: 1e3
float: 6.5
infinity: -.inf
null-tilde: ~
null-word: null
empty:
sexagesimal: 12:30
underscored: 1_000
quoted-number: "017"
single-quoted: '0x1F'
block: |
  yes
017: octal-looking key
true: a boolean key
~: a null key
1e3: an exponent key
list: [017, yes, 1e3, 0x1F, ~, "~", +12, -0, .5]
"""


def test_the_event_builder_reads_tricky_scalars_as_ruamel_does():
    """Big files are built from the parser's events, not by ruamel's loader: both read YAML 1.2."""
    from ruamel.yaml import YAML

    from provisioner.source import SourceDocument, _Builder, _plain

    builder = _Builder()
    for _ in builder.fed(YAML(typ="safe").parse(TRICKY_SCALARS)):
        pass
    assert not builder.unusual  # the event builder read it, not the fallback
    data = SourceDocument.parse(TRICKY_SCALARS, "tricky.yaml").data
    loaded = _plain(YAML(typ="safe").load(TRICKY_SCALARS))
    assert data == loaded == builder.data
    assert [(k, type(v).__name__, v) for k, v in data.items() if k != "list"] == [
        (k, type(v).__name__, v) for k, v in loaded.items() if k != "list"
    ]
    assert [type(v).__name__ for v in data["list"]] == [type(v).__name__ for v in loaded["list"]]
    assert data["octal-looking"] == 17 and data["octal"] == 15 and data["hex"] == 31
    assert data["yes-word"] == "yes" and data["no-word"] == "No" and data["on-word"] == "on"
    assert data["true-word"] is True and data["exponent"] == 1000.0 and isinstance(data["exponent"], float)
    assert data["null-tilde"] is None and data["null-word"] is None and data["empty"] is None
    assert data["sexagesimal"] == "12:30" and data["underscored"] == 1000
    assert data["quoted-number"] == "017" and data["single-quoted"] == "0x1F" and data["block"] == "yes\n"
    assert {"17", "True", "None", "1000.0"} <= set(data)
    assert data["list"] == [17, "yes", 1000.0, 31, None, "~", 12, 0, 0.5]


@pytest.mark.parametrize(
    "text",
    [
        "defaults: &d {min: 0, max: 4}\npool:\n  <<: *d\n  max: 8\n",  # anchors, aliases, merge keys
        "when: 2024-01-01\n",  # a timestamp
        "%YAML 1.1\n---\nspot: yes\nmode: 017\n",  # a version directive changes the scalar rules
        "tagged: !!str 017\n",
        "1: int key\n'1': str key\n",  # keys that collide once read as text
    ],
)
def test_what_the_event_builder_leaves_to_ruamel_reads_as_ruamel_does(text):
    from ruamel.yaml import YAML

    from provisioner.source import SourceDocument, _Builder, _plain

    builder = _Builder()
    for _ in builder.fed(YAML(typ="safe").parse(text)):
        pass
    assert builder.unusual
    assert SourceDocument.parse(text, "f.yaml").data == _plain(YAML(typ="safe").load(text))
