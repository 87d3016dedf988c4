"""`catalog serve` over real HTTP (uvicorn in a thread on an ephemeral port), on SQLite and
PostgreSQL, over a catalog that real syncs of the sandbox filled: the same rows as the CLI, the
filters, the read-only and token rules, 422s, metrics, and no credential in any answer."""

from __future__ import annotations

import base64
import contextlib
import dataclasses
import hmac
import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
import requests
import uvicorn
from prometheus_client.parser import text_string_to_metric_families

from provisioner.catalog import overview, service
from provisioner.catalog.service import create_app
from provisioner.catalog.store import Store
from provisioner.catalog.sync import sync
from provisioner.compile import compile_file, desired_state
from provisioner.drivers.registry import connect
from provisioner.observe import Drivers
from provisioner.retry import RetryPolicy
from provisioner.sandbox.server import SandboxSettings
from tests.catalog.conftest import fresh_catalog
from tests.worlds import World

FAST = RetryPolicy(attempts=2, base=0.01)
ROOT = Path(__file__).parents[2]


@contextlib.contextmanager
def running(app: Any) -> Iterator[str]:
    """The app served by uvicorn on 127.0.0.1:<free port>, in a thread; its base URL."""
    listener = service.listening("127.0.0.1", 0)  # as `catalog serve` listens
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning", access_log=False))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [listener]}, daemon=True)
    thread.start()
    while not server.started:  # start-up, not an assertion
        time.sleep(0.01)
    try:
        yield f"http://127.0.0.1:{listener.getsockname()[1]}"
    finally:
        server.should_exit = True
        thread.join(10)


@dataclasses.dataclass
class Seeded:
    url: str  # the catalog
    world: World
    base: str  # the service


def seed(world: World, url: str) -> None:
    """Apply, run a pod on aws/spare's GPU, and sync the fleet (allocation recorded); then edit
    gcp/mig's labels by hand and make AKS unreachable, and sync again without asking Kubernetes:
    gcp/mig drifts, azure's sync fails (its rows kept, the cluster stale), and the allocation
    figures of aws and gcp are kept, marked stale."""
    from kubernetes import client, config

    assert world.run("apply", str(world.fleet), "--auto-approve").exit_code == 0
    core = client.CoreV1Api(
        config.new_client_from_config(str(world.sandbox.directory / "kubeconfig"), context="aws")
    )
    (node,) = core.list_node(label_selector="eks.amazonaws.com/nodegroup=spare").items
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "infer"},
        "spec": {
            "nodeName": node.metadata.name,
            "containers": [
                {"name": "main", "image": "cuda", "resources": {"limits": {"nvidia.com/gpu": "1"}}}
            ],
        },
    }
    core.create_namespaced_pod("default", pod)
    assert world.run("sync", str(world.fleet)).exit_code == 0
    compiled = compile_file(world.fleet)
    gcp = compiled.cluster("gcp")
    mig = desired_state(gcp.pools[0])
    connect("gke", world.sandbox.directory).update_pool(
        gcp.target.ref, dataclasses.replace(mig, labels=(("edited", "by-hand"),))
    )
    world.sandbox.servers["aks"].stop()
    report = sync(compiled.clusters, Drivers(world.sandbox.directory), Store(url), policy=FAST)
    assert list(report.failed) == ["azure"]


@pytest.fixture(scope="module", params=["sqlite", "postgresql"])
def seeded(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Seeded]:
    directory = tmp_path_factory.mktemp(request.param)
    with fresh_catalog(request.param, directory) as url:
        world = World(directory, SandboxSettings(), catalog=url)
        try:
            seed(world, url)
        finally:
            world.sandbox.stop()
        with running(create_app(Store(url))) as base:
            yield Seeded(url, world, base)


def cli_json(seeded: Seeded, *args: str) -> Any:
    result = seeded.world.run(*args, "--json")
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def get(seeded: Seeded, path: str, **params: str) -> requests.Response:
    return requests.get(seeded.base + path, params=params, timeout=10)


def names(rows: list[dict[str, Any]]) -> list[tuple[str, str]]:
    return [(r["cluster"], r["pool"]) for r in rows]


def test_the_api_answers_exactly_what_the_cli_prints(seeded: Seeded):
    pools = get(seeded, "/api/pools")
    assert pools.status_code == 200 and pools.headers["content-type"] == "application/json"
    assert pools.json() == cli_json(seeded, "catalog", "ls")
    assert len(pools.json()) == 12  # 3 clusters x (3 fleet pools + 1 system pool)
    assert get(seeded, "/api/capacity").json() == cli_json(seeded, "catalog", "inspect")
    assert get(seeded, "/api/capacity", cluster="aws").json() == cli_json(
        seeded, "catalog", "inspect", "--cluster", "aws"
    )
    assert get(seeded, "/api/drift").json() == cli_json(seeded, "catalog", "drift")
    assert [(d["cluster"], d["pool"], d["kind"]) for d in get(seeded, "/api/drift").json()] == [
        ("gcp", "mig", "changed")
    ]
    assert get(seeded, "/api/clusters").json() == Store(seeded.url).clusters()
    status = {c["cluster"]: c["status"] for c in get(seeded, "/api/clusters").json()}
    assert status == {"aws": "ok", "azure": "error", "gcp": "ok"}


def test_one_pool_by_cluster_and_name(seeded: Seeded):
    row = next(r for r in cli_json(seeded, "catalog", "ls") if names([r]) == [("azure", "mig")])
    assert get(seeded, "/api/pools/azure/mig").json() == row
    missing = get(seeded, "/api/pools/azure/nope")
    assert (missing.status_code, missing.json()) == (404, {"error": "no live pool 'nope' in cluster 'azure'"})
    assert get(seeded, "/api/pools/mig").status_code == 404  # no cluster named


# Slices to each pool's maximum size (less what pods hold: aws/spare's one GPU): azure mig 3 nodes x 7
# 1g.10gb of an A100 80GB = 21; gcp mig 3 x 7 1g.5gb = 21; aws mig p4d (8 A100 40GB) 3 x 56 = 168;
# each shared pool 2 nodes x 1 GPU x 4 replicas = 8; each spare pool 1 node x 1 GPU = 1.
@pytest.mark.parametrize(
    ("query", "expected"),
    [
        ({"cloud": "eks"}, [("aws", "mig"), ("aws", "shared"), ("aws", "spare"), ("aws", "system")]),
        (
            {"cluster": "gcp", "gpu": ""},
            [("gcp", "default-pool"), ("gcp", "mig"), ("gcp", "shared"), ("gcp", "spare")],
        ),
        ({"gpu": "t4 16gb"}, [("azure", "shared"), ("azure", "spare")]),
        ({"mig": "1g.5gb"}, [("aws", "mig"), ("gcp", "mig")]),
        ({"sharing": "mps"}, [("gcp", "shared")]),
        ({"sharing": "exclusive", "cloud": "aks"}, [("azure", "mig"), ("azure", "spare")]),
        ({"isolation": "none"}, [("aws", "shared"), ("azure", "shared")]),
        ({"isolation": "hardware", "cloud": "gke"}, [("gcp", "mig"), ("gcp", "spare")]),
        ({"min_free_slices": "21"}, [("aws", "mig"), ("azure", "mig"), ("gcp", "mig")]),
        ({"min_free_slices": "22"}, [("aws", "mig")]),
        ({"min_free_slices": "2", "cloud": "aks"}, [("azure", "mig"), ("azure", "shared")]),
        ({"min_free_slices": "0", "cluster": "aws"}, [("aws", "mig"), ("aws", "shared"), ("aws", "spare")]),
        ({"cloud": "ack"}, []),
        # every GPU pool of this fleet gets its GPUs through the device plugin; none through DRA
        (
            {"allocation_mode": "device-plugin", "cloud": "gke"},
            [("gcp", "mig"), ("gcp", "shared"), ("gcp", "spare")],
        ),
        ({"allocation_mode": "dra"}, []),
    ],
)
def test_pool_filters(seeded: Seeded, query: dict[str, str], expected: list[tuple[str, str]]):
    answer = get(seeded, "/api/pools", **query)
    assert answer.status_code == 200, answer.text
    assert names(answer.json()) == expected
    every = {(r["cluster"], r["pool"]): r for r in cli_json(seeded, "catalog", "ls")}
    assert answer.json() == [every[key] for key in expected]  # the CLI's rows, untouched


@pytest.mark.parametrize("method", ["POST", "PUT", "PATCH", "DELETE", "OPTIONS"])
@pytest.mark.parametrize("path", ["/api/pools", "/", "/metrics", "/api/pools/azure/mig", "/nowhere"])
def test_every_method_but_get_and_head_is_405(seeded: Seeded, method: str, path: str):
    before = get(seeded, "/api/pools").json()
    answer = requests.request(method, seeded.base + path, json={"pool": "x"}, timeout=10)
    assert answer.status_code == 405
    assert answer.headers["allow"] == "GET, HEAD"
    assert answer.json() == {"error": f"the catalog is read-only: {method} is not allowed"}
    assert get(seeded, "/api/pools").json() == before


def test_head_is_get_without_the_body(seeded: Seeded):
    full = get(seeded, "/api/capacity")
    head = requests.head(seeded.base + "/api/capacity", timeout=10)
    assert (head.status_code, head.content) == (200, b"")
    assert head.headers["content-length"] == str(len(full.content))


@pytest.mark.parametrize(
    ("path", "query", "message"),
    [
        (
            "/api/pools",
            {"cloud": "azure"},
            "cloud: Input should be 'aks', 'gke', 'eks' or 'ack' (got 'azure')",
        ),
        (
            "/api/pools",
            {"min_free_slices": "-1"},
            "min_free_slices: Input should be greater than or equal to 0 (got '-1')",
        ),
        (
            "/api/pools",
            {"min_free_slices": "many"},
            "min_free_slices: Input should be a valid integer, "
            "unable to parse string as an integer (got 'many')",
        ),
        (
            "/api/pools",
            {"isolation": "total"},
            "isolation: Input should be 'none', 'memory', 'compute' or 'hardware' (got 'total')",
        ),
        (
            "/api/pools",
            {"allocation_mode": "plugin"},
            "allocation_mode: Input should be 'device-plugin' or 'dra' (got 'plugin')",
        ),
        (
            "/api/pools",
            {"clod": "aks"},
            "unknown query parameter 'clod': "
            "it takes allocation_mode, cloud, cluster, gpu, isolation, mig, min_free_slices, sharing",
        ),
        ("/api/capacity", {"cloud": "aks"}, "unknown query parameter 'cloud': it takes cluster"),
        ("/api/clusters", {"x": "1"}, "unknown query parameter 'x': it takes none"),
        ("/api/pools", {"cluster": "c" * 201}, "cluster: String should have at most 200 characters"),
    ],
)
def test_bad_query_parameters_are_422_with_a_message(
    seeded: Seeded, path: str, query: dict[str, str], message: str
):
    answer = get(seeded, path, **query)
    assert answer.status_code == 422
    assert answer.json()["error"].startswith(message)


def test_a_bad_filter_on_the_page_is_a_422_page(seeded: Seeded):
    answer = get(seeded, "/", cloud="azure")
    assert answer.status_code == 422
    assert answer.headers["content-type"].startswith("text/html")
    assert (
        "cloud: Input should be &#39;aks&#39;, &#39;gke&#39;, &#39;eks&#39; or &#39;ack&#39;" in answer.text
    )


def test_place_answers_as_place_json_does(seeded: Seeded):
    for request in (["--mig", "1g.10gb"], ["--gpu-memory", "2GB", "--cloud", "eks"], ["--gpus", "1"]):
        printed = seeded.world.run("place", *request, "--json", "--catalog", seeded.url)
        assert printed.exit_code == 0, printed.output
        params = {request[0].lstrip("-").replace("-", "_"): request[1]}
        params |= {"cloud": request[3]} if len(request) > 2 else {}
        answer = get(seeded, "/api/place", **params)
        assert (answer.status_code, answer.json()) == (200, json.loads(printed.stdout))


def test_place_refuses_a_bad_request_and_names_the_closest_pools_when_nothing_fits(seeded: Seeded):
    bad = get(seeded, "/api/place", gpu_memory="4")
    assert (bad.status_code, bad.json()) == (
        422,
        {"error": "gpu_memory: '4' has no unit; say which, e.g. 4GB, 4000MB or 4GiB"},
    )
    none = get(seeded, "/api/place", gpus="64")
    assert none.status_code == 404
    assert none.json()["closest"]  # what the nearest pools offer, as `place` says it


def test_the_openapi_document_lists_every_route(seeded: Seeded):
    document = get(seeded, "/openapi.json").json()
    assert sorted(document["paths"]) == [
        "/",
        "/api/capacity",
        "/api/clusters",
        "/api/drift",
        "/api/place",
        "/api/pools",
        "/api/pools/{cluster_and_pool}",
        "/healthz",
        "/metrics",
    ]
    parameters = {p["name"] for p in document["paths"]["/api/pools"]["get"]["parameters"]}
    assert parameters == {
        *("cloud", "cluster", "gpu", "mig", "sharing", "isolation", "min_free_slices"),
        "allocation_mode",
        "If-None-Match",
    }
    place = {p["name"] for p in document["paths"]["/api/place"]["get"]["parameters"]}
    # request: mig, gpu_memory, gpus and gpu, whose rules tie them together
    assert place == {"request", "isolation", "cloud", "cluster", "pool"}


# Each run stays small (the coverage phase makes every case the schema defines; /api/place's
# alone are 1,600, so fuzzing alone covers it), and duplicate query parameters are tried too.
SCHEMATHESIS_CONFIG = """\
[phases.coverage]
generate-duplicate-query-parameters = true

[phases.fuzzing]
generation.max-examples = 10

[[operations]]
include-path = "/api/place"
phases.coverage.enabled = false
phases.fuzzing.generation.max-examples = 20
"""


def test_schemathesis_finds_the_document_exact(seeded: Seeded, tmp_path: Path):
    """Every check schemathesis has, against the service over the seeded catalog: each answer's
    status, media type, headers and body as /openapi.json says, bad input refused and good input
    taken, no server error."""
    config = tmp_path / "schemathesis.toml"
    config.write_text(SCHEMATHESIS_CONFIG, encoding="utf-8")
    command = [sys.executable, "-m", "schemathesis.cli", "--config-file", str(config), "run"]
    found = subprocess.run(
        [*command, f"{seeded.base}/openapi.json", "--checks", "all", "--seed", "1", "--no-color"],
        check=False,
        capture_output=True,
        text=True,
        cwd=tmp_path,  # its .hypothesis directory
        timeout=300,
    )
    assert found.returncode == 0, found.stdout + found.stderr
    assert "Tested: 9" in found.stdout and " passed" in found.stdout, found.stdout


def test_a_query_parameter_given_twice_is_a_422(seeded: Seeded):
    answer = requests.get(seeded.base + "/api/pools?cluster=aws&cluster=gcp", timeout=10)
    assert (answer.status_code, answer.json()["error"]) == (
        422,
        "query parameter 'cluster' given more than once: it takes one value",
    )
    once = requests.get(seeded.base + "/api/pools?cluster=&cluster=gcp", timeout=10)  # the empty is none
    assert {r["cluster"] for r in once.json()} == {"gcp"}


def test_a_nul_in_a_name_finds_nothing_on_either_database(seeded: Seeded):
    for path in ("/api/capacity", "/api/drift"):
        answer = get(seeded, path, cluster="gcp\x00")
        assert (answer.status_code, answer.json()) == (200, []), path
    assert get(seeded, "/api/pools/gcp%00/mig").status_code == 404


def test_a_path_no_route_takes_is_a_404_in_the_api_shape(seeded: Seeded):
    answer = requests.get(seeded.base + "/api/pools/a%0Ab", timeout=10)
    assert (answer.status_code, answer.json()) == (404, {"error": "nothing at '/api/pools/a\\nb'"})


def samples(text: str) -> dict[str, dict[tuple[str, ...], float]]:
    """Each metric's samples by their label values, in the metrics module's label order."""
    found: dict[str, dict[tuple[str, ...], float]] = {}
    for family in text_string_to_metric_families(text):
        found.setdefault(family.name, {})
        for sample in family.samples:
            key = tuple(
                sample.labels[k]
                for k in ("cluster", "cloud", "pool", "gpu", "mig", "sharing", "isolation", "unit")
                if k in sample.labels
            )
            found[family.name][key] = sample.value
    return found


def test_metrics_parse_with_the_exact_values(seeded: Seeded):
    answer = get(seeded, "/metrics")
    assert answer.headers["content-type"] == "text/plain; version=0.0.4; charset=utf-8"
    found = samples(answer.text)
    azure_mig = ("azure", "aks", "mig", "A100 80GB", "1g.10gb", "exclusive", "hardware", "slice")
    aws_mig = ("aws", "eks", "mig", "A100 40GB", "1g.5gb", "exclusive", "hardware", "slice")
    gcp_shared = ("gcp", "gke", "shared", "L4 24GB", "", "mps", "compute", "slice")
    aws_spare = ("aws", "eks", "spare", "A10G 24GB", "", "exclusive", "hardware", "slice")
    assert found["provisioner_pool_slices_max"][azure_mig] == 21
    assert found["provisioner_pool_gpus_max"][azure_mig] == 3
    assert found["provisioner_pool_slices_max"][aws_mig] == 168
    assert found["provisioner_pool_gpus_max"][aws_mig] == 24
    assert found["provisioner_pool_slices_max"][gcp_shared] == 8
    assert found["provisioner_pool_slices_max"][aws_spare] == 1
    # the sandbox starts each autoscaled pool at its minimum (0) and a fixed one at its count (1)
    assert found["provisioner_pool_slices"][aws_mig] == 0
    assert found["provisioner_pool_gpus"][aws_spare] == 1
    assert found["provisioner_pool_slices"][aws_spare] == 1
    assert len(found["provisioner_pool_slices_max"]) == 9  # the GPU pools; system pools have none
    # What sync recorded from Kubernetes: the pod on aws/spare's GPU, nothing elsewhere.
    assert found["provisioner_pool_slices_allocated"] == {
        labels: (1 if labels == aws_spare else 0) for labels in found["provisioner_pool_slices_max"]
    }
    assert found["provisioner_cluster_sync_error"] == {
        ("aws", "eks"): 0,
        ("azure", "aks"): 1,
        ("gcp", "gke"): 0,
    }
    clusters = {c["cluster"]: c for c in Store(seeded.url).clusters()}
    assert found["provisioner_cluster_last_success_timestamp_seconds"] == {
        (name, c["cloud"]): datetime.fromisoformat(c["observed_at"]).timestamp()
        for name, c in clusters.items()
    }
    assert found["provisioner_cluster_last_sync_timestamp_seconds"][("azure", "aks")] == (
        datetime.fromisoformat(clusters["azure"]["last_sync_at"]).timestamp()
    )


def test_healthz_says_the_database_answers(seeded: Seeded):
    answer = get(seeded, "/healthz")
    assert (answer.status_code, answer.json()["status"]) == (200, "ok")


def test_stale_is_a_failed_sync_or_an_old_listing():
    moment = datetime(2026, 11, 30, 12, tzinfo=UTC)
    cluster = {"status": "ok", "observed_at": (moment - timedelta(hours=35)).isoformat()}
    assert not overview.is_stale(cluster, moment)
    assert overview.is_stale({**cluster, "observed_at": (moment - timedelta(hours=37)).isoformat()}, moment)
    assert overview.is_stale({**cluster, "status": "error"}, moment)
    assert overview.is_stale({"status": "new", "observed_at": None}, moment)


# The token


TOKEN = "s3cret-token-for-tests"


@pytest.fixture(scope="module", params=["sqlite", "postgresql"])
def guarded(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    with fresh_catalog(request.param, tmp_path_factory.mktemp("guarded")) as url:
        store = Store(url)
        store.migrate()
        with running(create_app(store, TOKEN)) as base:
            yield base


def _basic(user: str, password: str) -> str:
    return "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode()


@pytest.mark.parametrize(
    ("authorization", "status"),
    [
        (None, 401),
        ("Bearer wrong", 401),
        (f"Bearer {TOKEN}x", 401),
        (f"Bearer {TOKEN[:-1]}", 401),
        (f"Token {TOKEN}", 401),
        (_basic("anyone", "wrong"), 401),
        ("Basic !!!not-base64", 401),
        (f"Bearer {TOKEN}", 200),
        (_basic("anyone", TOKEN), 200),
    ],
)
@pytest.mark.parametrize("path", ["/api/pools", "/", "/metrics", "/healthz", "/openapi.json", "/nowhere"])
def test_with_a_token_every_request_must_carry_it(
    guarded: str, authorization: str | None, status: int, path: str
):
    headers = {"Authorization": authorization} if authorization else {}
    answer = requests.get(guarded + path, headers=headers, timeout=10)
    expected = 404 if status == 200 and path == "/nowhere" else status
    assert answer.status_code == expected
    if status == 401:
        assert answer.json() == {"error": "a valid token is required"}
        assert answer.headers["www-authenticate"].startswith('Basic realm="provisioner catalog"')


def test_with_a_token_the_document_says_every_route_needs_it(guarded: str):
    bearer = {"Authorization": f"Bearer {TOKEN}"}
    document = requests.get(guarded + "/openapi.json", headers=bearer, timeout=10).json()
    assert document["security"] == [{"bearer": []}, {"basic": []}]
    for path, operations in document["paths"].items():
        assert "401" in operations["get"]["responses"], path


def test_the_token_comes_before_the_method_and_is_compared_in_constant_time(
    guarded: str, monkeypatch: pytest.MonkeyPatch
):
    compared: list[tuple[bytes, bytes]] = []
    constant_time = hmac.compare_digest

    def recording(given: bytes, expected: bytes) -> bool:
        compared.append((given, expected))
        return constant_time(given, expected)

    monkeypatch.setattr(service.hmac, "compare_digest", recording)
    assert requests.post(guarded + "/api/pools", timeout=10).status_code == 401
    assert (
        requests.post(
            guarded + "/api/pools", headers={"Authorization": "Bearer guess"}, timeout=10
        ).status_code
        == 401
    )
    allowed = requests.post(guarded + "/api/pools", headers={"Authorization": f"Bearer {TOKEN}"}, timeout=10)
    assert allowed.status_code == 405
    assert compared == [(b"", TOKEN.encode()), (b"guess", TOKEN.encode()), (TOKEN.encode(), TOKEN.encode())]


def test_no_password_in_any_answer(tmp_path: Path):
    with fresh_catalog("postgresql", tmp_path) as url:
        # PostgreSQL here trusts local connections: the password is carried, and ignored.
        with_password = url.replace("postgres@", "postgres:hunter2@")
        store = Store(with_password)
        store.migrate()
        with running(create_app(store)) as base:
            paths = [
                "/",
                "/healthz",
                "/api/clusters",
                "/api/pools",
                "/api/capacity",
                "/api/drift",
                "/metrics",
            ]
            for path in [*paths, "/openapi.json", "/api/pools/a/b", "/?cloud=nope"]:
                answer = requests.get(base + path, timeout=10)
                assert answer.status_code < 500 and "hunter2" not in answer.text, path
            health = requests.get(base + "/healthz", timeout=10).json()
            assert health["catalog"] == with_password.replace("hunter2", "***")
            assert "postgres:***@127.0.0.1" in requests.get(base + "/", timeout=10).text
    unreachable = Store("postgresql+psycopg://postgres:hunter2@127.0.0.1:1/catalog")
    with running(create_app(unreachable)) as base:
        health = requests.get(base + "/healthz", timeout=10)
        assert health.status_code == 503
        assert health.json()["error"] == (
            "catalog postgresql+psycopg://postgres:***@127.0.0.1:1/catalog: "
            "cannot connect (Connection refused)"
        )
        for path in ["/api/pools", "/api/clusters", "/metrics", "/"]:
            answer = requests.get(base + path, timeout=10)
            assert answer.status_code == 503, path
            assert "hunter2" not in answer.text and "Traceback" not in answer.text


# The command


def _serve(*args: str, env: dict[str, str]) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "provisioner", "catalog", "serve", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONPATH": str(ROOT), "PROVISIONER_SANDBOX": "", **env},
    )


@pytest.mark.parametrize("host", ["0.0.0.0", "::", "192.0.2.10"])
def test_serving_beyond_loopback_needs_a_token(tmp_path: Path, host: str):
    url = f"sqlite:///{tmp_path / 'catalog.db'}"
    process = _serve("--catalog", url, "--host", host, env={"PROVISIONER_CATALOG_TOKEN": ""})
    stdout, stderr = process.communicate(timeout=30)
    assert process.returncode == 1 and stdout == ""
    assert stderr == (
        f"error: --host {host}: listening beyond this machine needs --token T "
        "(or PROVISIONER_CATALOG_TOKEN); every request must then carry it\n"
    )


def test_serve_with_the_token_from_the_environment_and_stop_on_sigterm(tmp_path: Path):
    url = f"sqlite:///{tmp_path / 'catalog.db'}"
    process = _serve(
        "--catalog", url, "--host", "0.0.0.0", "--port", "0", env={"PROVISIONER_CATALOG_TOKEN": TOKEN}
    )
    try:
        line = process.stdout.readline()
        assert line.startswith(f"Serving the catalog {url} at http://0.0.0.0:")
        port = int(line.rsplit(":", 1)[1].split("/")[0])
        base = f"http://127.0.0.1:{port}"
        assert requests.get(base + "/api/pools", timeout=10).status_code == 401
        authorised = requests.get(
            base + "/api/pools", headers={"Authorization": f"Bearer {TOKEN}"}, timeout=10
        )
        assert (authorised.status_code, authorised.json()) == (200, [])
    finally:
        process.send_signal(signal.SIGTERM)
        stdout, stderr = process.communicate(timeout=30)
    assert process.returncode == 0, stderr
    assert TOKEN not in line + stdout + stderr
