"""The emulators reject what the real APIs reject, in each API's own wire format."""

from __future__ import annotations

import time

import boto3
import pytest
import requests
from botocore.exceptions import ClientError

from provisioner.compile import compile_file
from provisioner.errors import FleetError
from provisioner.sandbox.server import Sandbox

GKE_CLUSTER = "/v1/projects/contract-project/locations/us-central1/clusters/contract-gke"
AKS_CLUSTER = (
    "/subscriptions/11111111-1111-1111-1111-111111111111/resourceGroups/contract"
    "/providers/Microsoft.ContainerService/managedClusters/contract-aks"
)
API_VERSION = {"api-version": "2026-08-01"}
BEARER = {"Authorization": "Bearer test"}


def gke_pool(name: str, machine: str = "a2-highgpu-1g", **accelerator: object) -> dict:
    accelerator = {"acceleratorType": "nvidia-tesla-a100", "acceleratorCount": "1", **accelerator}
    return {
        "nodePool": {
            "name": name,
            "initialNodeCount": 1,
            "config": {"machineType": machine, "accelerators": [accelerator]},
        }
    }


# The wire as google-cloud-container's REST transport speaks it: enums as numbers, asked for
# with $alt (GKE answers names to a client that does not ask, as gcloud does not).
SDK_WIRE = requests.Session()
SDK_WIRE.params = {"$alt": "json;enum-encoding=int"}


def wait_gke_idle(url: str, operation: dict) -> None:
    for _ in range(100):
        status = SDK_WIRE.get(
            f"{url}/v1/projects/contract-project/locations/us-central1/operations/{operation['name']}"
        )
        if status.json()["status"] == 3:  # DONE
            return
        time.sleep(0.05)
    raise AssertionError("operation never finished")


def gke_error(response: requests.Response) -> tuple[int, str, str]:
    error = response.json()["error"]
    return response.status_code, error["status"], error["message"]


class TestGke:
    @pytest.fixture
    def url(self, sandbox: Sandbox) -> str:
        return sandbox.endpoints["gke"]

    def test_the_wire_format_is_proto3_json_with_integer_enums_and_int64_strings(self, url):
        body = gke_pool(
            "wire",
            gpuPartitionSize="1g.5gb",
            gpuSharingConfig={"gpuSharingStrategy": 1, "maxSharedClientsPerGpu": "3"},
        )
        body["nodePool"]["config"]["taints"] = [{"key": "nvidia.com/gpu", "value": "present", "effect": 1}]
        operation = SDK_WIRE.post(f"{url}{GKE_CLUSTER}/nodePools", json=body).json()
        assert operation["operationType"] == 7 and operation["status"] in (2, 3)  # CREATE_NODE_POOL
        by_name = requests.get(f"{url}{GKE_CLUSTER}/nodePools/wire").json()  # as gcloud asks: names
        assert by_name["status"] in ("PROVISIONING", "RUNNING")
        assert by_name["config"]["taints"][0]["effect"] == "NO_SCHEDULE"
        assert (
            by_name["config"]["accelerators"][0]["gpuSharingConfig"]["gpuSharingStrategy"] == "TIME_SHARING"
        )
        wait_gke_idle(url, operation)
        pool = SDK_WIRE.get(f"{url}{GKE_CLUSTER}/nodePools/wire").json()
        accelerator = pool["config"]["accelerators"][0]
        assert accelerator["acceleratorCount"] == "1"  # int64 as a string
        assert accelerator["gpuSharingConfig"] == {"gpuSharingStrategy": 1, "maxSharedClientsPerGpu": "3"}
        assert pool["config"]["taints"][0]["effect"] == 1  # NO_SCHEDULE as its number
        assert pool["status"] == 2  # RUNNING
        assert "spot" not in pool["config"]  # false is the default: left out
        wait_gke_idle(url, SDK_WIRE.delete(f"{url}{GKE_CLUSTER}/nodePools/wire").json())

    @pytest.mark.parametrize(
        ("body", "message"),
        [
            (
                gke_pool("nopart", gpuPartitionSize="1g.10gb"),
                "GPU partition size 1g.10gb is not supported for nvidia-tesla-a100; supported: "
                "1g.5gb, 2g.10gb, 3g.20gb, 7g.40gb.",
            ),
            (
                gke_pool("fourg", gpuPartitionSize="4g.20gb"),
                "GPU partition size 4g.20gb is not supported for nvidia-tesla-a100; supported: "
                "1g.5gb, 2g.10gb, 3g.20gb, 7g.40gb.",
            ),
            (
                gke_pool(
                    "fourg80",
                    machine="a3-highgpu-1g",
                    acceleratorType="nvidia-h100-80gb",
                    gpuPartitionSize="4g.40gb",
                ),
                "GPU partition size 4g.40gb is not supported for nvidia-h100-80gb; supported: "
                "1g.10gb, 1g.20gb, 2g.20gb, 3g.40gb, 7g.80gb.",
            ),
            (
                gke_pool("wrongacc", machine="g2-standard-8"),
                "Machine type g2-standard-8 takes nvidia-l4, not nvidia-tesla-a100.",
            ),
            (
                gke_pool("toomany", acceleratorCount="2"),
                "Machine type a2-highgpu-1g takes 1 nvidia-tesla-a100, not 2.",
            ),
            (
                gke_pool(
                    "clients", gpuSharingConfig={"gpuSharingStrategy": 2, "maxSharedClientsPerGpu": "49"}
                ),
                "maxSharedClientsPerGpu must be between 2 and 48.",
            ),
            (
                gke_pool("Bad_Name"),
                "Invalid node pool name 'Bad_Name': lowercase letters, digits and hyphens, starting with "
                "a letter, not ending with a hyphen, 1-40 characters.",
            ),
        ],
    )
    def test_invalid_pools_are_refused(self, url, body, message):
        response = SDK_WIRE.post(f"{url}{GKE_CLUSTER}/nodePools", json=body)
        assert gke_error(response) == (400, "INVALID_ARGUMENT", message)

    def test_disks_below_the_minimum_are_refused_on_create_and_update(self, url):
        small = gke_pool("smalldisk")
        small["nodePool"]["config"]["diskSizeGb"] = 11
        status, code, text = gke_error(SDK_WIRE.post(f"{url}{GKE_CLUSTER}/nodePools", json=small))
        assert (status, code, text) == (
            400,
            "INVALID_ARGUMENT",
            "Disk size 11 GB is too small: the smallest allowed is 12 GB.",
        )
        smallest = gke_pool("smalldisk")
        smallest["nodePool"]["config"]["diskSizeGb"] = 12
        wait_gke_idle(url, SDK_WIRE.post(f"{url}{GKE_CLUSTER}/nodePools", json=smallest).json())
        status, code, text = gke_error(
            SDK_WIRE.put(f"{url}{GKE_CLUSTER}/nodePools/smalldisk", json={"diskSizeGb": "11"})
        )
        assert (status, code) == (400, "INVALID_ARGUMENT") and "smallest allowed is 12 GB" in text
        wait_gke_idle(url, SDK_WIRE.delete(f"{url}{GKE_CLUSTER}/nodePools/smalldisk").json())

    def test_duplicate_taints_names_and_fixed_fields(self, url):
        body = gke_pool("dup")
        taint = {"key": "k", "value": "v", "effect": "NO_SCHEDULE"}
        body["nodePool"]["config"]["taints"] = [taint, {**taint, "value": "w"}]
        assert (
            "more than one taint with key k"
            in gke_error(SDK_WIRE.post(f"{url}{GKE_CLUSTER}/nodePools", json=body))[2]
        )
        wait_gke_idle(url, SDK_WIRE.post(f"{url}{GKE_CLUSTER}/nodePools", json=gke_pool("dup")).json())
        status, code, _ = gke_error(SDK_WIRE.post(f"{url}{GKE_CLUSTER}/nodePools", json=gke_pool("dup")))
        assert (status, code) == (409, "ALREADY_EXISTS")
        status, code, text = gke_error(
            SDK_WIRE.put(f"{url}{GKE_CLUSTER}/nodePools/dup", json={"machineType": "a2-highgpu-2g"})
        )
        assert (status, code) == (400, "INVALID_ARGUMENT") and "machineType cannot be updated" in text
        wait_gke_idle(url, SDK_WIRE.delete(f"{url}{GKE_CLUSTER}/nodePools/dup").json())

    def test_one_pool_operation_per_cluster(self, url):
        first = SDK_WIRE.post(f"{url}{GKE_CLUSTER}/nodePools", json=gke_pool("first")).json()
        status, code, text = gke_error(
            SDK_WIRE.post(f"{url}{GKE_CLUSTER}/nodePools", json=gke_pool("second"))
        )
        assert (status, code) == (400, "FAILED_PRECONDITION") and "incompatible operation" in text
        wait_gke_idle(url, first)
        wait_gke_idle(url, SDK_WIRE.delete(f"{url}{GKE_CLUSTER}/nodePools/first").json())


def aks_put(
    url: str, name: str, params: dict | None = None, headers: dict | None = None, **properties
) -> requests.Response:
    properties = {"vmSize": "Standard_NC24ads_A100_v4", "count": 1, **properties}
    return SDK_WIRE.put(
        f"{url}{AKS_CLUSTER}/agentPools/{name}",
        params=API_VERSION if params is None else params,
        headers=BEARER if headers is None else headers,
        json={"properties": properties},
    )


def wait_aks(response: requests.Response) -> None:
    for _ in range(100):
        if (
            SDK_WIRE.get(response.headers["Azure-AsyncOperation"], headers=BEARER).json()["status"]
            == "Succeeded"
        ):
            return
        time.sleep(0.05)
    raise AssertionError("operation never finished")


class TestAks:
    @pytest.fixture
    def url(self, sandbox: Sandbox) -> str:
        return sandbox.endpoints["aks"]

    def test_requests_need_a_token_and_an_api_version(self, url):
        assert aks_put(url, "x", headers={}).json()["error"]["code"] == "AuthenticationFailed"
        assert aks_put(url, "x", params={}).json()["error"]["code"] == "MissingApiVersionParameter"

    def test_a_managed_cluster_gives_the_version_it_runs(self, url):
        found = requests.get(f"{url}{AKS_CLUSTER}", params=API_VERSION, headers=BEARER, timeout=10)
        assert found.status_code == 200
        assert (found.json()["name"], found.json()["type"]) == (
            "contract-aks",
            "Microsoft.ContainerService/ManagedClusters",
        )
        properties = found.json()["properties"]
        # tests/drivers/conftest.py seeds 1.34.2: asked for and running, as after a create
        versions = (properties["kubernetesVersion"], properties["currentKubernetesVersion"])
        assert versions == ("1.34.2", "1.34.2")
        missing = requests.get(f"{url}{AKS_CLUSTER}x", params=API_VERSION, headers=BEARER, timeout=10)
        assert (missing.status_code, missing.json()["error"]["code"]) == (404, "ResourceNotFound")

    def test_create_is_long_running_and_fixed_fields_cannot_change(self, url):
        created = aks_put(url, "fixed", gpuInstanceProfile="MIG1g")
        assert created.status_code == 201
        assert created.json()["properties"]["provisioningState"] == "Creating"
        busy = aks_put(url, "other")
        assert (busy.status_code, busy.json()["error"]["code"]) == (409, "OperationNotAllowed")
        wait_aks(created)
        changed = aks_put(url, "fixed", gpuInstanceProfile="MIG3g")
        assert (changed.status_code, changed.json()["error"]["code"]) == (400, "PropertyChangeNotAllowed")
        assert "gpuInstanceProfile" in changed.json()["error"]["message"]
        updated = aks_put(url, "fixed", gpuInstanceProfile="MIG1g", nodeLabels={"a": "b"})
        assert updated.status_code == 200
        wait_aks(updated)
        deleted = requests.delete(f"{url}{AKS_CLUSTER}/agentPools/fixed", params=API_VERSION, headers=BEARER)
        assert deleted.status_code == 202 and "Location" in deleted.headers
        wait_aks(deleted)

    @pytest.mark.parametrize(
        ("name", "properties", "message"),
        [
            (
                "t4mig",
                {"vmSize": "Standard_NC4as_T4_v3", "gpuInstanceProfile": "MIG1g"},
                "The VM size Standard_NC4as_T4_v3 does not support GPU instance profile MIG1g.",
            ),
            (
                "badmig",
                {"gpuInstanceProfile": "MIG5g"},
                "gpuInstanceProfile 'MIG5g' is invalid; allowed: MIG1g, MIG2g, MIG3g, MIG4g, MIG7g.",
            ),
            (
                "toolongpoolname",
                {},
                "Agent pool name 'toolongpoolname' is invalid: lowercase letters and digits, starting "
                "with a letter, 1-12 characters.",
            ),
            (
                "taint",
                {"nodeTaints": ["k=v:Sometimes"]},
                "Taint 'k=v:Sometimes' is invalid: want key=value:NoSchedule|PreferNoSchedule|NoExecute.",
            ),
            (
                "bounds",
                {"enableAutoScaling": True, "minCount": 3, "maxCount": 1},
                "Autoscaling needs 0 <= minCount <= maxCount.",
            ),
            ("novm", {"vmSize": "Standard_NC6_Promo"}, "The VM size 'Standard_NC6_Promo' is not available."),
            (
                "bigdisk",
                {"osDiskSizeGB": 2049},
                "The value of parameter osDiskSizeGB is invalid: 2049 is not in [0, 2048].",
            ),
        ],
    )
    def test_invalid_pools_are_refused(self, url, name, properties, message):
        response = aks_put(url, name, **properties)
        assert (response.status_code, response.json()) == (
            400,
            {"error": {"code": "InvalidParameter", "message": message}},
        )

    def test_a_spot_pool_carries_the_label_and_taint_aks_adds(self, url):
        """`az aks nodepool show` of a Spot pool (AKS spot-node-pool docs) lists both, and an update
        that leaves them out does not remove them."""
        created = aks_put(
            url, "spotty", scaleSetPriority="Spot", nodeLabels={"team": "ml"}, nodeTaints=["a=b:NoSchedule"]
        )
        wait_aks(created)
        updated = aks_put(url, "spotty", scaleSetPriority="Spot", nodeLabels={}, nodeTaints=[])
        wait_aks(updated)
        for response in (created, updated):
            assert response.status_code in (200, 201)
        shown = requests.get(f"{url}{AKS_CLUSTER}/agentPools/spotty", params=API_VERSION, headers=BEARER)
        properties = shown.json()["properties"]
        assert properties["nodeLabels"] == {"kubernetes.azure.com/scalesetpriority": "spot"}
        assert properties["nodeTaints"] == ["kubernetes.azure.com/scalesetpriority=spot:NoSchedule"]
        assert created.json()["properties"]["nodeLabels"] == {
            "team": "ml",
            "kubernetes.azure.com/scalesetpriority": "spot",
        }
        assert created.json()["properties"]["nodeTaints"] == [
            "a=b:NoSchedule",
            "kubernetes.azure.com/scalesetpriority=spot:NoSchedule",
        ]
        wait_aks(requests.delete(f"{url}{AKS_CLUSTER}/agentPools/spotty", params=API_VERSION, headers=BEARER))


class TestEks:
    @pytest.fixture
    def eks(self, sandbox: Sandbox):
        return boto3.client(
            "eks",
            endpoint_url=sandbox.endpoints["eks"],
            region_name="eu-west-1",
            aws_access_key_id="test",
            aws_secret_access_key="test",
        )

    def create(self, eks, **overrides):
        request = {
            "clusterName": "contract-eks",
            "nodegroupName": "rules",
            "nodeRole": "arn:aws:iam::123456789012:role/contract-nodes",
            "subnets": ["subnet-0c0ffee1"],
            "instanceTypes": ["g5.xlarge"],
            "amiType": "AL2023_x86_64_NVIDIA",
            "scalingConfig": {"minSize": 0, "maxSize": 2, "desiredSize": 0},
            **overrides,
        }
        return eks.create_nodegroup(**request)

    @pytest.mark.parametrize(
        ("overrides", "message"),
        [
            (
                {"taints": [{"key": "k", "value": "v", "effect": "NoSchedule"}]},
                "Taint effect 'NoSchedule' is invalid; allowed: NO_SCHEDULE, NO_EXECUTE, PREFER_NO_SCHEDULE.",
            ),
            ({"capacityType": "RESERVED"}, "capacityType must be one of ON_DEMAND, SPOT, CAPACITY_BLOCK."),
            ({"amiType": "AL2_x86_64_CUDA"}, "amiType 'AL2_x86_64_CUDA' is not supported."),
            (
                {"scalingConfig": {"minSize": 3, "maxSize": 1, "desiredSize": 1}},
                "Minimum capacity 3 can't be greater than maximum capacity 1.",
            ),
            (
                {"nodegroupName": "-gpu"},
                "Nodegroup name '-gpu' is invalid: letters, digits, hyphens and underscores, starting "
                "with a letter or digit, 1-63 characters.",
            ),
            (
                {"labels": {"example.com/" + "k" * 52: "v"}},
                f"The label key 'example.com/{'k' * 52}' must be 1 to 63 characters long.",
            ),
            (
                {"taints": [{"key": "example.com/" + "k" * 52, "value": "v", "effect": "NO_SCHEDULE"}]},
                f"The taint key 'example.com/{'k' * 52}' must be 1 to 63 characters long.",
            ),
            (
                {"taints": [{"key": f"t{i}", "effect": "NO_SCHEDULE"} for i in range(51)]},
                "A node group can have at most 50 taints.",
            ),
        ],
    )
    def test_what_moto_accepts_but_eks_refuses(self, eks, overrides, message):
        with pytest.raises(ClientError) as caught:
            self.create(eks, **overrides)
        error = caught.value.response["Error"]
        assert (
            caught.value.response["ResponseMetadata"]["HTTPStatusCode"],
            error["Code"],
            error["Message"],
        ) == (
            400,
            "InvalidParameterException",
            message,
        )

    @pytest.mark.parametrize("attempt", [1, 2])  # the second made after the partitions were read once
    def test_a_role_arn_outside_every_partition_is_refused(self, eks, attempt):
        role = "arn:aws-moon:iam::123456789012:role/nodes"  # botocore knows no aws-moon partition
        with pytest.raises(ClientError) as node_group:
            self.create(eks, nodegroupName=f"moon{attempt}", nodeRole=role)
        with pytest.raises(ClientError) as cluster:
            eks.create_cluster(
                name=f"moon-{attempt}", roleArn=role, resourcesVpcConfig={"subnetIds": ["subnet-0c0ffee1"]}
            )
        for caught in (node_group, cluster):
            error = caught.value.response["Error"]
            assert (error["Code"], error["Message"]) == (
                "InvalidParameterException",
                f"Invalid Role Arn: '{role}'",
            )
        gov = "arn:aws-us-gov:iam::123456789012:role/nodes"  # a partition botocore knows
        made = eks.create_cluster(
            name=f"gov-{attempt}", roleArn=gov, resourcesVpcConfig={"subnetIds": ["subnet-0c0ffee1"]}
        )
        assert made["cluster"]["roleArn"] == gov
        eks.delete_cluster(name=f"gov-{attempt}")

    def test_an_empty_label_value_is_refused_over_the_wire(self, sandbox: Sandbox):
        """botocore refuses it before sending (labelValue min 1), so it is sent as raw JSON."""
        response = requests.post(
            f"{sandbox.endpoints['eks']}/clusters/contract-eks/node-groups",
            json={
                "nodegroupName": "emptylabel",
                "nodeRole": "arn:aws:iam::123456789012:role/contract-nodes",
                "subnets": ["subnet-0c0ffee1"],
                "labels": {"team": ""},
            },
        )
        assert (response.status_code, response.headers["x-amzn-ErrorType"]) == (
            400,
            "InvalidParameterException",
        )
        assert response.json() == {"message": "The label value '' must be 1 to 63 characters long."}

    def test_updates_are_held_to_the_same_label_rules(self, eks):
        self.create(eks, nodegroupName="labelrules")
        deadline = time.monotonic() + 5
        while (
            eks.describe_nodegroup(clusterName="contract-eks", nodegroupName="labelrules")["nodegroup"][
                "status"
            ]
            != "ACTIVE"
        ):
            assert time.monotonic() < deadline
            time.sleep(0.05)
        with pytest.raises(ClientError) as caught:
            eks.update_nodegroup_config(
                clusterName="contract-eks",
                nodegroupName="labelrules",
                labels={"addOrUpdateLabels": {"k" * 64: "v"}},
            )
        assert caught.value.response["Error"]["Code"] == "InvalidParameterException"
        assert "label key" in caught.value.response["Error"]["Message"]
        eks.delete_nodegroup(clusterName="contract-eks", nodegroupName="labelrules")

    def test_a_node_group_runs_its_clusters_kubernetes_version_and_no_other(self, eks):
        cluster = eks.describe_cluster(name="contract-eks")["cluster"]["version"]
        assert cluster == "1.33"  # tests/drivers/conftest.py seeds 1.33.4; EKS writes major.minor
        with pytest.raises(ClientError) as caught:
            self.create(eks, nodegroupName="older", version="1.32")
        assert (caught.value.response["Error"]["Code"], caught.value.response["Error"]["Message"]) == (
            "InvalidParameterException",
            "version 1.32 is invalid: a new node group runs its cluster's Kubernetes version, 1.33.",
        )
        made = self.create(eks, nodegroupName="atversion")["nodegroup"]
        assert made["version"] == "1.33"  # not moto's own default, 1.19
        deadline = time.monotonic() + 5
        while (
            eks.describe_nodegroup(clusterName="contract-eks", nodegroupName="atversion")["nodegroup"][
                "status"
            ]
            != "ACTIVE"
        ):
            assert time.monotonic() < deadline
            time.sleep(0.05)
        eks.delete_nodegroup(clusterName="contract-eks", nodegroupName="atversion")

    def test_node_groups_take_time_and_updates_can_be_described(self, eks):
        assert self.create(eks)["nodegroup"]["status"] == "CREATING"
        with pytest.raises(ClientError, match="ResourceInUseException"):
            eks.update_nodegroup_config(
                clusterName="contract-eks", nodegroupName="rules", labels={"addOrUpdateLabels": {"a": "b"}}
            )
        waiter_deadline = time.monotonic() + 5
        while (
            eks.describe_nodegroup(clusterName="contract-eks", nodegroupName="rules")["nodegroup"]["status"]
            != "ACTIVE"
        ):
            assert time.monotonic() < waiter_deadline
            time.sleep(0.05)
        update = eks.update_nodegroup_config(
            clusterName="contract-eks", nodegroupName="rules", labels={"addOrUpdateLabels": {"a": "b"}}
        )["update"]
        assert update["status"] == "InProgress"
        described = eks.describe_update(name="contract-eks", nodegroupName="rules", updateId=update["id"])
        assert described["update"]["status"] in ("InProgress", "Successful")
        time.sleep(0.2)
        eks.delete_nodegroup(clusterName="contract-eks", nodegroupName="rules")
        assert (
            eks.describe_nodegroup(clusterName="contract-eks", nodegroupName="rules")["nodegroup"]["status"]
            == "DELETING"
        )


# The oracle property: where the tool's data refuses a pool, the emulator refuses the request the
# pool would make by its own table and in the cloud's own words. The emulator reads none of the
# tool's data (tests/test_sandbox_independence.py), so a wrong fact cannot pass both.

ORACLE_CLUSTERS = {
    "aks": """\
    cloud: aks
    subscription: 11111111-1111-1111-1111-111111111111
    resourceGroup: contract
    cluster: contract-aks""",
    "gke": """\
    cloud: gke
    project: contract-project
    location: us-central1
    cluster: contract-gke""",
    "eks": """\
    cloud: eks
    region: eu-west-1
    cluster: contract-eks
    nodeRole: arn:aws:iam::123456789012:role/contract-nodes
    subnets: [subnet-0c0ffee1]""",
}


def tool_refusal(fleet_file, cloud: str, pool: str) -> list[str]:
    """What the tool says of a fleet with this one pool on the contract cluster of `cloud`."""
    path = fleet_file(f"clusters:\n  - name: {cloud}\n{ORACLE_CLUSTERS[cloud]}\n    pools:\n      - {pool}\n")
    with pytest.raises(FleetError) as caught:
        compile_file(path)
    return [d.message for d in caught.value.diagnostics]


def test_aks_refuses_mig_on_a_t4_by_its_own_table_as_the_tool_does(sandbox: Sandbox, fleet_file):
    pool = "{name: t4mig, instanceType: Standard_NC4as_T4_v3, gpu: {mig: 1g.10gb}, nodes: {count: 1}}"
    assert tool_refusal(fleet_file, "aks", pool) == [
        "the T4 16GB of Standard_NC4as_T4_v3 does not support MIG; remove gpu.mig or choose an instance "
        "type with A100, A30, H100, H200 or B200 GPUs"
    ]
    response = aks_put(
        sandbox.endpoints["aks"], "t4mig", vmSize="Standard_NC4as_T4_v3", gpuInstanceProfile="MIG1g"
    )
    assert (response.status_code, response.json()) == (
        400,
        {
            "error": {
                "code": "InvalidParameter",
                "message": "The VM size Standard_NC4as_T4_v3 does not support GPU instance profile MIG1g.",
            }
        },
    )


def test_gke_refuses_a_partition_size_the_a100_40gb_lacks_as_the_tool_does(sandbox: Sandbox, fleet_file):
    pool = "{name: nopart, instanceType: a2-highgpu-1g, gpu: {mig: 1g.10gb}, nodes: {count: 1}}"
    assert tool_refusal(fleet_file, "gke", pool) == [
        "1g.10gb is not a MIG profile of the A100 40GB on GKE; it offers 1g.5gb, 2g.10gb, 3g.20gb, 7g.40gb"
    ]
    response = requests.post(
        f"{sandbox.endpoints['gke']}{GKE_CLUSTER}/nodePools",
        json=gke_pool("nopart", gpuPartitionSize="1g.10gb"),
    )
    assert response.json() == {
        "error": {
            "code": 400,
            "status": "INVALID_ARGUMENT",
            "message": "GPU partition size 1g.10gb is not supported for nvidia-tesla-a100; supported: "
            "1g.5gb, 2g.10gb, 3g.20gb, 7g.40gb.",
        }
    }
    assert response.status_code == 400


def test_eks_refuses_a_64_character_label_key_as_the_tool_does(sandbox: Sandbox, fleet_file):
    key = "example.com/" + "k" * 52
    pool = (
        "{name: longlabel, instanceType: g5.xlarge, gpu: {sharing: time-slicing, replicas: 2}, "
        f"nodes: {{count: 1}}, labels: {{{key}: v}}}}"
    )
    assert tool_refusal(fleet_file, "eks", pool) == ["the key is 64 characters; EKS allows at most 63"]
    response = requests.post(
        f"{sandbox.endpoints['eks']}/clusters/contract-eks/node-groups",
        json={
            "nodegroupName": "longlabel",
            "nodeRole": "arn:aws:iam::123456789012:role/contract-nodes",
            "subnets": ["subnet-0c0ffee1"],
            "labels": {key: "v"},
        },
    )
    assert (response.status_code, response.headers["x-amzn-ErrorType"], response.json()) == (
        400,
        "InvalidParameterException",
        {"message": f"The label key '{key}' must be 1 to 63 characters long."},
    )
