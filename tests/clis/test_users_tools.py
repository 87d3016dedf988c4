"""gcloud, the aws CLI and kubectl see the pools the tool makes as the clouds' own tools would, and
pools made with them, with the seed documents' own commands, are imported, adopted and catalogued
as the cloud holds them."""

from __future__ import annotations

import json

import yaml

from tests.clis.conftest import Served, ok

FLEET = """\
clusters:
  - name: azure
    cloud: aks
    subscription: 44444444-4444-4444-4444-444444444444
    resourceGroup: clis
    cluster: clis-aks
    pools:
      - name: t4ts
        instanceType: Standard_NC4as_T4_v3
        gpu: {sharing: time-slicing, replicas: 4}
        nodes: {count: 1}
  - name: gcp
    cloud: gke
    project: clis-project
    location: us-central1
    cluster: clis-gke
    pools:
      - {name: l4-mps, instanceType: g2-standard-8, gpu: {sharing: mps, replicas: 4}, nodes: {min: 1, max: 4}}
  - name: aws
    cloud: eks
    region: us-west-2
    cluster: clis-eks
    nodeRole: arn:aws:iam::123456789012:role/nodes
    subnets: [subnet-0abc1234]
    pools:
      - {name: a10g-ts, instanceType: g5.xlarge, gpu: {sharing: time-slicing, replicas: 4}, nodes: {count: 1}}
"""
GKE = ["--project", "clis-project", "--region", "us-central1", "--cluster", "clis-gke"]


def test_the_clouds_tools_read_what_the_tool_made(served: Served):
    ok(served.provisioner("apply", str(served.fleet), "--auto-approve"))

    clusters = json.loads(
        ok(served.gcloud("container", "clusters", "list", "--project", "clis-project", "--format", "json"))
    )
    assert [(c["name"], c["location"], c["status"]) for c in clusters] == [
        ("clis-gke", "us-central1", "RUNNING")
    ]
    pool = json.loads(
        ok(served.gcloud("container", "node-pools", "describe", "l4-mps", *GKE, "--format", "json"))
    )
    assert pool["status"] == "RUNNING"  # an enum by its name, as GKE answers gcloud
    assert (pool["autoscaling"]["totalMinNodeCount"], pool["autoscaling"]["totalMaxNodeCount"]) == (1, 4)
    sharing = pool["config"]["accelerators"][0]["gpuSharingConfig"]
    assert sharing == {"gpuSharingStrategy": "MPS", "maxSharedClientsPerGpu": "4"}
    assert pool["config"]["taints"] == [
        {"effect": "NO_SCHEDULE", "key": "nvidia.com/gpu", "value": "present"}
    ]
    listed = ok(served.gcloud("container", "node-pools", "list", *GKE, "--format", "value(name)")).split()
    assert listed == ["default-pool", "l4-mps"]

    group = json.loads(
        ok(
            served.aws(
                "us-west-2",
                "eks",
                "describe-nodegroup",
                "--cluster-name",
                "clis-eks",
                "--nodegroup-name",
                "a10g-ts",
            )
        )
    )["nodegroup"]
    assert group["labels"]["nvidia.com/device-plugin.config"] == "time-sliced-4"
    assert group["taints"] == [{"key": "nvidia.com/gpu", "value": "present", "effect": "NO_SCHEDULE"}]
    assert group["tags"]["managed-by"] == "provisioner"

    nodes = ok(
        served.kubectl(
            "gcp",
            "get",
            "nodes",
            "-L",
            "nvidia.com/gpu.product",
            "-l",
            "cloud.google.com/gke-nodepool=l4-mps",
        )
    )
    assert nodes.splitlines()[0].split() == ["NAME", "STATUS", "ROLES", "AGE", "VERSION", "GPU.PRODUCT"]
    assert (
        len(nodes.splitlines()) == 1 + 3
    )  # min 1 over three zones: one node in each, the fewest that reach it
    node = nodes.splitlines()[1].split()[0]
    described = ok(served.kubectl("gcp", "describe", "node", node))
    assert "nvidia.com/gpu:" in described and "cloud.google.com/gke-nodepool=l4-mps" in described
    config_map = yaml.safe_load(
        ok(served.kubectl("azure", "get", "configmap", "-n", "gpu-operator", "-o", "yaml"))
    )
    assert "time-sliced-4" in config_map["items"][0]["data"]


def test_kubectl_server_side_applies_what_render_prints(served: Served, tmp_path):
    ok(served.provisioner("render", str(served.fleet), "--cluster", "aws", "--out-dir", str(tmp_path)))
    rendered = tmp_path / "aws" / "device-plugin-config.yaml"
    applied = ok(
        served.kubectl(
            "aws",
            "apply",
            "--server-side",
            "--field-manager",
            "gitops",
            "--force-conflicts",
            "-f",
            str(rendered),
        )
    )
    assert applied.strip() == "configmap/nvidia-device-plugin-configs serverside-applied"
    read = yaml.safe_load(
        ok(
            served.kubectl(
                "aws", "get", "configmap", "nvidia-device-plugin-configs", "-n", "gpu-operator", "-o", "yaml"
            )
        )
    )
    assert read["data"] == yaml.safe_load(rendered.read_text())["data"]


def test_pools_made_with_the_seeds_commands_are_imported_adopted_and_catalogued(served: Served):
    ok(served.provisioner("apply", str(served.fleet), "--auto-approve"))  # the team's own pools first
    # TrueFoundry's guide (docs/seeds/002): a MIG pool and a time-shared pool with total limits ...
    for name, accelerator in (
        ("a100-40-mig-1g5gb", "type=nvidia-tesla-a100,count=1,gpu-partition-size=1g.5gb"),
        (
            "a100-40-frac-10",
            "type=nvidia-tesla-a100,count=1,gpu-sharing-strategy=time-sharing,max-shared-clients-per-gpu=10",
        ),
    ):
        ok(
            served.gcloud(
                "container",
                "node-pools",
                "create",
                name,
                *GKE,
                "--machine-type=a2-highgpu-1g",
                "--accelerator",
                accelerator,
                "--enable-autoscaling",
                "--total-min-nodes",
                "0",
                "--total-max-nodes",
                "4",
                "--num-nodes",
                "0",
            )
        )
    # ... and an EKS node group labelled for the device plugin's time-sliced-10 config.
    ok(
        served.aws(
            "us-west-2",
            "eks",
            "create-nodegroup",
            "--cluster-name",
            "clis-eks",
            "--nodegroup-name",
            "g5-ts-10",
            "--node-role",
            "arn:aws:iam::123456789012:role/nodes",
            "--subnets",
            "subnet-0abc1234",
            "--instance-types",
            "g5.xlarge",
            "--scaling-config",
            "minSize=0,maxSize=3,desiredSize=0",
            "--labels",
            "nvidia.com/device-plugin.config=time-sliced-10",
        )
    )

    written = ok(served.provisioner("import", str(served.fleet), "--write"))
    for pool in ("gcp/a100-40-mig-1g5gb", "gcp/a100-40-frac-10", "aws/g5-ts-10"):
        assert (
            f"{pool}: adopting it updates it in place: label provisioner.io/pool={pool.split('/')[1]} "
            "added; taint nvidia.com/gpu=present:NoSchedule added"
        ) in written
    entries = yaml.safe_load(served.fleet.read_text())["clusters"]
    by_name = {(c["name"], p["name"]): p for c in entries for p in c["pools"]}
    assert by_name[("gcp", "a100-40-frac-10")]["gpu"] == {"sharing": "time-slicing", "replicas": 10}
    assert by_name[("gcp", "a100-40-mig-1g5gb")]["nodes"] == {"min": 0, "max": 4}  # the pool's total
    assert by_name[("aws", "g5-ts-10")]["gpu"] == {"sharing": "time-slicing", "replicas": 10}
    rendered = ok(served.provisioner("render", str(served.fleet), "--cluster", "aws"))
    assert "time-sliced-10:" in rendered  # the key the node group's label names now exists

    plan = json.loads(ok(served.provisioner("plan", str(served.fleet), "--json")))
    assert {(c["cluster"], c["pool"], c["action"], c.get("then")) for c in plan["changes"]} == {
        ("gcp", "a100-40-mig-1g5gb", "adopt", "update"),
        ("gcp", "a100-40-frac-10", "adopt", "update"),
        ("aws", "g5-ts-10", "adopt", "update"),
    }
    fields = {c["pool"]: [f["field"] for f in c["fields"]] for c in plan["changes"]}
    # GKE's autoscaler knows the pool's sharing; EKS's needs the hints for a pool at zero
    assert fields == {  # every pool the tool manages carries its fleet pool's label
        "a100-40-mig-1g5gb": ["labels", "taints"],
        "a100-40-frac-10": ["labels", "taints"],
        "g5-ts-10": ["labels", "taints", "autoscaler_hints"],
    }
    assert (
        "aws/g5-ts-10: adopting it updates it in place: label provisioner.io/pool=g5-ts-10 added; "
        "taint nvidia.com/gpu=present:NoSchedule added; "
        "autoscaler hints none -> nvidia.com/gpu=0, nvidia.com/gpu.shared=10" in written
    )
    ok(served.provisioner("apply", str(served.fleet), "--auto-approve"))
    again = served.provisioner("plan", str(served.fleet), "--detailed-exitcode")
    assert again.returncode == 0, again.stdout + again.stderr

    ok(served.provisioner("sync", str(served.fleet)))
    rows = {
        (r["cluster"], r["pool"]): r for r in json.loads(ok(served.provisioner("catalog", "ls", "--json")))
    }
    frac = rows[("gcp", "a100-40-frac-10")]
    assert (frac["min_nodes"], frac["max_nodes"], frac["slices_per_node"]) == (0, 4, 10)
    mig = rows[("gcp", "a100-40-mig-1g5gb")]
    assert (mig["max_nodes"], mig["slices_per_node"], mig["mig"]) == (4, 7, "1g.5gb")
    assert rows[("aws", "g5-ts-10")]["slices_per_node"] == 10
    described = json.loads(
        ok(served.gcloud("container", "node-pools", "describe", "a100-40-frac-10", *GKE, "--format", "json"))
    )
    assert described["config"]["resourceLabels"]["managed-by"] == "provisioner"  # adopted, the same pool
