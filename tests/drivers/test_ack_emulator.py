"""The ACK emulator refuses what ACK's API reference refuses, in ACK's ROA JSON error format.

Raw HTTP (requests) with the headers the SDK sends, so each refusal's exact code and message is
seen as a client sees it. Codes marked UNCONFIRMED in sandbox/ack/exceptions.py are the
emulator's guesses; these tests pin the emulator's behaviour, not ACK's wording.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest
import requests

from provisioner.clusters import ClusterRef, Target
from provisioner.sandbox.server import Sandbox, SandboxSettings

CLUSTER_ID = "c00000000000000000000000000000abc"
REGION = "cn-shanghai"
POOLS = f"/clusters/{CLUSTER_ID}/nodepools"
SIGNED = {
    "Authorization": "ACS3-HMAC-SHA256 Credential=sandbox,SignedHeaders=host,Signature=0",
    "x-acs-version": "2015-12-15",
}
NAME_RULE = (
    "The name must be 1 to 63 characters in length and can contain digits, Chinese characters, "
    "letters, and hyphens (-). It cannot start with a hyphen (-)."
)


@pytest.fixture(scope="module")
def sandbox(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Sandbox]:
    running = Sandbox(tmp_path_factory.mktemp("ack-emulator"), SandboxSettings(seed=3)).start(
        [Target(CLUSTER_ID, ClusterRef("ack", "", REGION, CLUSTER_ID))]
    )
    yield running
    running.stop()


@pytest.fixture(scope="module")
def url(sandbox: Sandbox) -> str:
    return sandbox.endpoints["ack"]


def call(url: str, method: str, path: str, action: str, body: Any = None, **params: Any) -> requests.Response:
    headers = {**SIGNED, "x-acs-action": action}
    return requests.request(method, url + path, json=body, params=params, headers=headers, timeout=10)


def ess_body(name: str = "gpu-pool") -> dict[str, Any]:
    """A valid CreateClusterNodePool body, with the empty lists the SDK adds to every request."""
    return {
        "nodepool_info": {"name": name, "type": "ess"},
        "scaling_group": {
            "instance_types": ["ecs.gn7i-c8g1.2xlarge"],
            "vswitch_ids": ["vsw-bp1a2b3c"],
            "desired_size": 1,
            "system_disk_size": 120,
            "system_disk_category": "cloud_essd",
            "spot_strategy": "NoSpot",
            "tags": [{"key": "managed-by", "value": "provisioner"}],
            "data_disks": [],
            "disk_init": [],
            "instance_patterns": [],
            "spot_price_limit": [],
        },
        "kubernetes_config": {
            "labels": [{"key": "ack.node.gpu.schedule", "value": "cgpu"}],
            "taints": [{"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}],
            "runtime": "containerd",
        },
        "auto_scaling": {"enable": False, "type": "gpu"},
        "node_components": [],
    }


def create(url: str, body: dict[str, Any]) -> requests.Response:
    return call(url, "POST", POOLS, "CreateClusterNodePool", body)


def pool_named(url: str, name: str) -> dict[str, Any]:
    listed = call(url, "GET", POOLS, "DescribeClusterNodePools", NodepoolName=name).json()["nodepools"]
    assert len(listed) == 1, listed
    return listed[0]


def delete(url: str, nodepool_id: str) -> None:
    answer = call(url, "DELETE", f"{POOLS}/{nodepool_id}", "DeleteClusterNodepool", force="True")
    assert answer.status_code == 200, answer.text


def assert_error(answer: requests.Response, status: int, code: str, message: str) -> None:
    assert answer.status_code == status, answer.text
    body = answer.json()
    assert (body["code"], body["message"]) == (code, message)
    assert set(body) == {"code", "message", "requestId"}


def _set(path: str, value: Any) -> Callable[[dict[str, Any]], None]:
    def apply(body: dict[str, Any]) -> None:
        *parents, last = path.split(".")
        target = body
        for part in parents:
            target = target[part]
        target[last] = value

    return apply


def _labels(labels: list[tuple[str, str]]) -> Callable[[dict[str, Any]], None]:
    return _set("kubernetes_config.labels", [{"key": k, "value": v} for k, v in labels])


REFUSALS = {
    "name with spaces": (
        _set("nodepool_info.name", "Not A Name!"),
        f"Invalid node pool name 'Not A Name!': {NAME_RULE}",
    ),
    "name starting with a hyphen": (
        _set("nodepool_info.name", "-pool"),
        f"Invalid node pool name '-pool': {NAME_RULE}",
    ),
    "name of 64 characters": (
        _set("nodepool_info.name", "p" * 64),
        f"Invalid node pool name '{'p' * 64}': {NAME_RULE}",
    ),
    "no name": (_set("nodepool_info.name", ""), "nodepool_info.name is required."),
    "lingjun pool": (
        _set("nodepool_info.type", "lingjun"),
        "nodepool_info.type 'lingjun' is not supported; valid values: ess, edge.",
    ),
    "unknown instance type": (
        _set("scaling_group.instance_types", ["ecs.gn9x-imaginary"]),
        "scaling_group.instance_types: ecs.gn9x-imaginary is not a valid instance type.",
    ),
    "no instance type": (
        _set("scaling_group.instance_types", []),
        "scaling_group.instance_types must list 1 to 10 instance types.",
    ),
    "eleven instance types": (
        _set("scaling_group.instance_types", ["ecs.gn7i-c8g1.2xlarge"] * 11),
        "scaling_group.instance_types must list 1 to 10 instance types.",
    ),
    "no vswitch": (
        _set("scaling_group.vswitch_ids", []),
        "scaling_group.vswitch_ids must list 1 to 8 vSwitches.",
    ),
    "not a vswitch": (
        _set("scaling_group.vswitch_ids", ["subnet-1"]),
        "scaling_group.vswitch_ids: 'subnet-1' is not a vSwitch ID.",
    ),
    "desired size above 2000": (
        _set("scaling_group.desired_size", 2001),
        "scaling_group.desired_size must be between 0 and 2000.",
    ),
    "system disk of 19 GiB": (
        _set("scaling_group.system_disk_size", 19),
        "scaling_group.system_disk_size 19 is out of range: valid values are 20 to 2048 GiB.",
    ),
    "system disk of 2049 GiB": (
        _set("scaling_group.system_disk_size", 2049),
        "scaling_group.system_disk_size 2049 is out of range: valid values are 20 to 2048 GiB.",
    ),
    "unknown spot strategy": (
        _set("scaling_group.spot_strategy", "Spot"),
        "scaling_group.spot_strategy 'Spot' is not valid; "
        "valid values: NoSpot, SpotWithPriceLimit, SpotAsPriceGo.",
    ),
    "min above max": (
        _set("auto_scaling", {"enable": True, "min_instances": 3, "max_instances": 2, "type": "gpu"}),
        "auto_scaling: min_instances (3) and max_instances (2) must satisfy "
        "0 <= min_instances <= max_instances <= 2000.",
    ),
    "max above 2000": (
        _set("auto_scaling", {"enable": True, "min_instances": 0, "max_instances": 2001, "type": "gpu"}),
        "auto_scaling: min_instances (0) and max_instances (2001) must satisfy "
        "0 <= min_instances <= max_instances <= 2000.",
    ),
    "unknown scaling type": (
        _set("auto_scaling.type", "tpu"),
        "auto_scaling.type 'tpu' is not valid; valid values: cpu, gpu, gpushare, spot.",
    ),
    "21 labels": (
        _labels([(f"k{n}", "v") for n in range(21)]),
        "kubernetes_config.labels: at most 20 labels, got 21.",
    ),
    "label key of 65 characters": (
        _labels([("k" * 65, "v")]),
        f"kubernetes_config.labels: label key '{'k' * 65}' must be 1 to 64 characters.",
    ),
    "label value of 129 characters": (
        _labels([("team", "v" * 129)]),
        "kubernetes_config.labels: the value of team is longer than 128 characters.",
    ),
    "label key starting with aliyun": (
        _labels([("aliyun.com/gpu", "x")]),
        "kubernetes_config.labels: 'aliyun.com/gpu' must not start with aliyun, acs:, https://, http://.",
    ),
    "label value starting with acs:": (
        _labels([("team", "acs:ml")]),
        "kubernetes_config.labels: 'acs:ml' must not start with aliyun, acs:, https://, http://.",
    ),
    "duplicated label key": (
        _labels([("team", "a"), ("team", "b")]),
        "kubernetes_config.labels: label key team is duplicated.",
    ),
    "unknown taint effect": (
        _set("kubernetes_config.taints", [{"key": "a", "value": "b", "effect": "NO_SCHEDULE"}]),
        "kubernetes_config.taints: invalid effect 'NO_SCHEDULE' for key a; "
        "valid values: NoSchedule, NoExecute, PreferNoSchedule.",
    ),
    "tag key starting with acs:": (
        _set("scaling_group.tags", [{"key": "acs:owner", "value": "x"}]),
        "scaling_group.tags: 'acs:owner' must not start with aliyun or acs: nor contain http(s)://.",
    ),
}


@pytest.mark.parametrize("case", REFUSALS)
def test_create_refuses_what_the_api_reference_refuses(url, case):
    mutate, message = REFUSALS[case]
    body = ess_body("refused")
    mutate(body)
    assert_error(create(url, body), 400, "InvalidParameter", message)
    names = [
        p["nodepool_info"]["name"]
        for p in call(url, "GET", POOLS, "DescribeClusterNodePools").json()["nodepools"]
    ]
    assert "refused" not in names


def test_the_cluster_starts_with_an_unowned_active_system_pool(url):
    system = pool_named(url, "default-nodepool")
    assert system["nodepool_info"]["is_default"] is True
    assert system["status"] == {
        "state": "active",
        "total_nodes": 2,
        "healthy_nodes": 2,
        "serving_nodes": 2,
        "failed_nodes": 0,
        "offline_nodes": 0,
        "removing_nodes": 0,
        "initial_nodes": 0,
    }
    assert system["kubernetes_config"]["labels"] == []
    assert system["scaling_group"]["instance_types"] == ["ecs.g7.xlarge"]


def test_a_pool_is_initial_until_its_task_succeeds_then_active(url, sandbox):
    engine = sandbox.engines["ack"]
    engine.op_seconds = 3600
    try:
        answer = create(url, ess_body("slow"))
    finally:
        engine.op_seconds = 0.0
    assert answer.status_code == 200, answer.text
    created = answer.json()
    assert created["nodepool_id"].startswith("np") and created["task_id"].startswith("T-")
    task_path = f"/tasks/{created['task_id']}"
    assert call(url, "GET", task_path, "DescribeTaskInfo").json()["state"] == "running"
    assert pool_named(url, "slow")["status"]["state"] == "initial"
    backend = sandbox.emulators["ack"].backend("", REGION)
    backend.tasks[created["task_id"]].done_at = engine.now()  # the hour has passed
    task = call(url, "GET", task_path, "DescribeTaskInfo").json()
    assert (task["state"], task["task_type"], task["cluster_id"]) == (
        "success",
        "nodepool_create",
        CLUSTER_ID,
    )
    assert pool_named(url, "slow")["status"]["state"] == "active"
    delete(url, created["nodepool_id"])


def test_one_operation_per_pool_at_a_time_but_other_pools_may_change(url, sandbox):
    first = create(url, ess_body("first")).json()["nodepool_id"]
    second = create(url, ess_body("second")).json()["nodepool_id"]
    engine = sandbox.engines["ack"]
    engine.op_seconds = 3600
    try:
        resize = {"scaling_group": {"desired_size": 3}}
        running = call(url, "PUT", f"{POOLS}/{first}", "ModifyClusterNodePool", resize)
        assert running.status_code == 200, running.text
        assert pool_named(url, "first")["status"]["state"] == "scaling"
        assert_error(
            call(url, "PUT", f"{POOLS}/{first}", "ModifyClusterNodePool", resize),
            400,
            "ErrorNodePoolStatusInvalid",
            f"The current status of node pool {first} is scaling; another operation is in progress. "
            "Try again when the node pool is active.",
        )
        assert_error(
            call(url, "DELETE", f"{POOLS}/{first}", "DeleteClusterNodepool", force="true"),
            400,
            "ErrorNodePoolStatusInvalid",
            f"The current status of node pool {first} is scaling; another operation is in progress. "
            "Try again when the node pool is active.",
        )
        other = call(url, "PUT", f"{POOLS}/{second}", "ModifyClusterNodePool", resize)
        assert other.status_code == 200, other.text
    finally:
        engine.op_seconds = 0.0
    backend = sandbox.emulators["ack"].backend("", REGION)
    for task in backend.tasks.values():
        task.done_at = min(task.done_at, engine.now())
    assert pool_named(url, "first")["scaling_group"]["desired_size"] == 3
    delete(url, first)
    delete(url, second)


def test_modify_replaces_labels_and_taints_whole_and_ignores_the_sdks_empty_lists(url):
    nodepool_id = create(url, ess_body("relabel")).json()["nodepool_id"]
    body = {
        "kubernetes_config": {"labels": [{"key": "team", "value": "ml"}], "taints": []},
        "scaling_group": {"data_disks": [], "tags": [], "instance_patterns": [], "spot_price_limit": []},
        "update_nodes": True,
    }
    assert call(url, "PUT", f"{POOLS}/{nodepool_id}", "ModifyClusterNodePool", body).status_code == 200
    pool = pool_named(url, "relabel")
    assert pool["kubernetes_config"]["labels"] == [{"key": "team", "value": "ml"}]
    assert pool["kubernetes_config"]["taints"] == []
    assert pool["scaling_group"]["tags"] == [
        {"key": "managed-by", "value": "provisioner"}
    ]  # [] is "not given"
    delete(url, nodepool_id)


def test_modify_refuses_a_new_scaling_type_and_an_invalid_result(url):
    nodepool_id = create(url, ess_body("fixedtype")).json()["nodepool_id"]
    path = f"{POOLS}/{nodepool_id}"
    assert_error(
        call(
            url,
            "PUT",
            path,
            "ModifyClusterNodePool",
            {"auto_scaling": {"enable": True, "max_instances": 2, "type": "cpu"}},
        ),
        400,
        "InvalidParameter",
        "auto_scaling.type cannot be modified after the node pool is created (gpu -> cpu).",
    )
    assert_error(
        call(url, "PUT", path, "ModifyClusterNodePool", {"scaling_group": {"system_disk_size": 10}}),
        400,
        "InvalidParameter",
        "scaling_group.system_disk_size 10 is out of range: valid values are 20 to 2048 GiB.",
    )
    assert pool_named(url, "fixedtype")["scaling_group"]["system_disk_size"] == 120
    delete(url, nodepool_id)


def test_a_pool_name_is_unique_in_its_cluster(url):
    nodepool_id = create(url, ess_body("twin")).json()["nodepool_id"]
    assert_error(
        create(url, ess_body("twin")),
        400,
        "ErrorNodePoolNameDuplicated",
        f"A node pool named twin already exists in cluster {CLUSTER_ID}.",
    )
    delete(url, nodepool_id)


def test_a_cluster_holds_at_most_20_pools(url):
    existing = len(call(url, "GET", POOLS, "DescribeClusterNodePools").json()["nodepools"])
    made = [create(url, ess_body(f"fill-{n}")).json()["nodepool_id"] for n in range(20 - existing)]
    assert_error(
        create(url, ess_body("one-too-many")),
        400,
        "QuotaExceeded.NodePool",
        f"The number of node pools in cluster {CLUSTER_ID} has reached the quota of 20.",
    )
    for nodepool_id in made:
        delete(url, nodepool_id)


def test_delete_without_force_refuses_a_pool_with_nodes_and_force_is_read_in_any_case(url):
    nodepool_id = create(url, ess_body("withnodes")).json()["nodepool_id"]
    path = f"{POOLS}/{nodepool_id}"
    assert_error(
        call(url, "DELETE", path, "DeleteClusterNodepool", force="false"),
        400,
        "ErrorNodePoolHasNodes",
        f"Node pool {nodepool_id} has 1 nodes; delete them first or set force=true.",
    )
    answer = call(url, "DELETE", path, "DeleteClusterNodepool", force="True")  # as the Python SDK spells it
    assert answer.status_code == 200 and answer.json()["task_id"].startswith("T-")
    assert_error(
        call(url, "GET", path, "DescribeClusterNodePoolDetail"),
        404,
        "ErrorNodePoolNotFound",
        f"Node pool {nodepool_id} not found in cluster {CLUSTER_ID}.",
    )


def test_an_edge_pool_needs_no_scaling_group(url):
    body = {
        "nodepool_info": {"name": "edge-pool", "type": "edge"},
        "kubernetes_config": {"labels": [{"key": "ack.node.gpu.schedule", "value": "share"}], "taints": []},
        "node_components": [],
    }
    answer = create(url, body)
    assert answer.status_code == 200, answer.text
    pool = pool_named(url, "edge-pool")
    assert (pool["nodepool_info"]["type"], pool["scaling_group"]["instance_types"]) == ("edge", [])
    assert pool["status"]["total_nodes"] == 0
    delete(url, answer.json()["nodepool_id"])


def test_unknown_clusters_pools_and_tasks_are_404(url):
    other = "c" + "e" * 32
    assert_error(
        call(url, "GET", f"/clusters/{other}/nodepools", "DescribeClusterNodePools"),
        404,
        "ErrorClusterNotFound",
        f"Cluster {other} not found.",
    )
    assert_error(
        call(url, "PUT", f"{POOLS}/np0", "ModifyClusterNodePool", {}),
        404,
        "ErrorNodePoolNotFound",
        f"Node pool np0 not found in cluster {CLUSTER_ID}.",
    )
    assert_error(
        call(url, "GET", "/tasks/T-nope", "DescribeTaskInfo"),
        404,
        "ErrorTaskNotFound",
        "Task T-nope not found.",
    )


def test_requests_without_the_sdks_signature_or_with_another_action_are_refused(url):
    unsigned = requests.get(url + POOLS, headers={"x-acs-action": "DescribeClusterNodePools"}, timeout=10)
    assert_error(
        unsigned,
        400,
        "IncompleteSignature",
        "The request signature does not conform to Alibaba Cloud standards.",
    )
    assert_error(
        call(url, "GET", POOLS, "DescribeClustersV1"),
        400,
        "InvalidParameter",
        f"x-acs-action 'DescribeClustersV1' / x-acs-version '2015-12-15' do not match GET {POOLS} "
        "(DescribeClusterNodePools, 2015-12-15).",
    )


def test_faults_are_throttling_with_a_retry_after_in_milliseconds_or_unavailable(url, sandbox):
    engine = sandbox.engines["ack"]
    engine.fault_rate = 1.0
    try:
        answers = [call(url, "GET", POOLS, "DescribeClusterNodePools") for _ in range(12)]
    finally:
        engine.fault_rate = 0.0
    assert {a.status_code for a in answers} == {429, 503}
    for answer in answers:
        if answer.status_code == 429:
            assert answer.json()["code"] == "Throttling.User"
            assert 50 <= int(answer.headers["x-acs-retry-after"]) <= 500
        else:
            assert answer.json()["code"] == "ServiceUnavailable"
            assert "x-acs-retry-after" not in answer.headers


def test_describe_cluster_detail_gives_the_version_the_cluster_runs(url):
    detail = call(url, "GET", f"/clusters/{CLUSTER_ID}", "DescribeClusterDetail")
    assert detail.status_code == 200
    assert (detail.json()["cluster_id"], detail.json()["current_version"]) == (CLUSTER_ID, "1.35.1-aliyun.1")
    missing = "c0000000000000000000000000000dead"
    assert_error(
        call(url, "GET", f"/clusters/{missing}", "DescribeClusterDetail"),
        404,
        "ErrorClusterNotFound",
        f"Cluster {missing} not found.",
    )


def test_describe_clusters_pages_by_region(url):
    first = call(
        url, "GET", "/api/v1/clusters", "DescribeClustersV1", region_id=REGION, page_size=1, page_number=1
    )
    assert first.json() == {
        "clusters": [
            {
                "cluster_id": CLUSTER_ID,
                "name": CLUSTER_ID,
                "region_id": REGION,
                "cluster_type": "ManagedKubernetes",
                "profile": "Default",
                "state": "running",
                "init_version": "1.35.1-aliyun.1",
                "current_version": "1.35.1-aliyun.1",
            }
        ],
        "page_info": {"page_number": 1, "page_size": 1, "total_count": 1},
    }
    elsewhere = call(url, "GET", "/api/v1/clusters", "DescribeClustersV1", region_id="eu-central-1")
    assert elsewhere.json()["clusters"] == []


def test_the_emulator_imports_nothing_of_the_tool_outside_the_sandbox():
    """Its rules are its own: a wrong fact in the tool's data must fail a test, not pass twice."""
    import ast
    from pathlib import Path

    import provisioner.sandbox.ack as package

    for source in Path(package.__file__).parent.glob("*.py"):
        tree = ast.parse(source.read_text(encoding="utf-8"))
        type_checking = {
            id(child)
            for node in ast.walk(tree)
            if isinstance(node, ast.If) and getattr(node.test, "id", "") == "TYPE_CHECKING"
            for child in ast.walk(node)
        }
        outside = [
            node.module
            for node in ast.walk(tree)
            if isinstance(node, ast.ImportFrom)
            and id(node) not in type_checking
            and (node.module or "").startswith("provisioner")
            and not (node.module or "").startswith("provisioner.sandbox")
        ]
        assert outside == [], f"{source.name} imports {outside}"


def test_a_body_that_is_not_json_is_refused(url):
    headers = {**SIGNED, "x-acs-action": "CreateClusterNodePool", "Content-Type": "application/json"}
    answer = requests.post(url + POOLS, data=b"{not json", headers=headers, timeout=10)
    assert answer.status_code == 400
    assert "not JSON" in answer.json()["message"]
