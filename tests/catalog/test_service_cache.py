"""`catalog serve` keeps each /api/pools answer, encoded, for as long as the catalog is unchanged:
on SQLite and PostgreSQL, the bytes are those of encoding the rows afresh, a write from another
Store (a sync) is seen by the next request, ETags answer If-None-Match, and the token still rules."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
import requests
from fastapi.responses import JSONResponse

from provisioner.capacity import capacity
from provisioner.catalog.listing import ClusterIdentity, ObservedPool
from provisioner.catalog.overview import PoolFilter, filter_pools
from provisioner.catalog.service import EncodedPools, create_app
from provisioner.catalog.store import Store
from provisioner.compile import compile_file, desired_state
from tests.catalog.conftest import fresh_catalog
from tests.catalog.test_service import running
from tests.placements import FLEET, fill

TOKEN = "cache-test-token"


@dataclass
class Served:
    url: str  # the catalog
    base: str  # the service
    fleet: Path


@pytest.fixture(params=["sqlite", "postgresql"])
def served(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Served]:
    fleet = tmp_path / "fleet.yaml"
    fleet.write_text(FLEET, encoding="utf-8")
    with fresh_catalog(request.param, tmp_path) as url:
        fill(Store(url), fleet)
        with running(create_app(Store(url))) as base:
            yield Served(url, base, fleet)


def afresh(url: str, wanted: PoolFilter) -> bytes:
    """What /api/pools answered before it kept answers: the rows read and encoded for the request."""
    return JSONResponse(filter_pools(Store(url).live_pools(), wanted)).body


def drop_pool(served: Served, cluster: str, pool: str) -> None:
    """A later listing of `cluster` without `pool`, written by a Store of its own (as a sync)."""
    compiled = compile_file(served.fleet).cluster(cluster)
    states = [desired_state(p) for p in compiled.pools]
    kept = [ObservedPool(s, capacity(compiled.cloud.key, s)) for s in states if s.name != pool]
    identity = ClusterIdentity(cluster, compiled.cloud.key, "account", "location", cluster)
    assert Store(served.url).record_cluster(identity, kept, [], datetime.now(UTC) + timedelta(minutes=1))


def get(served: Served, path: str, headers: dict[str, str] | None = None, **query: str) -> requests.Response:
    return requests.get(served.base + path, params=query, headers=headers, timeout=10)


QUERIES = [
    ({}, PoolFilter()),
    ({"cloud": "eks"}, PoolFilter(cloud="eks")),
    ({"gpu": "a100 80gb"}, PoolFilter(gpu="a100 80gb")),
    ({"gpu": "A100 80GB"}, PoolFilter(gpu="A100 80GB")),
    ({"isolation": "none", "cloud": "aks"}, PoolFilter(cloud="aks", isolation="none")),
    ({"min_free_slices": "40"}, PoolFilter(min_free_slices=40)),
    ({"cluster": "ali", "sharing": "memory"}, PoolFilter(cluster="ali", sharing="memory")),
    ({"cluster": "nowhere"}, PoolFilter(cluster="nowhere")),
]


def test_every_answer_is_the_bytes_of_encoding_the_rows_afresh(served: Served):
    for query, wanted in QUERIES:
        expected = afresh(served.url, wanted)
        for _ in range(2):  # the second is the kept answer
            answer = get(served, "/api/pools", **query)
            assert answer.status_code == 200
            assert answer.content == expected, query
            assert answer.headers["content-type"] == "application/json"
            assert answer.headers["content-length"] == str(len(expected))
    head = requests.head(served.base + "/api/pools", timeout=10)
    assert (head.status_code, head.content) == (200, b"")
    assert head.headers["content-length"] == str(len(afresh(served.url, PoolFilter())))


def test_a_write_from_another_store_is_seen_by_the_next_request(served: Served):
    before = get(served, "/api/pools", cloud="eks")
    assert "a10g-x4" in [p["pool"] for p in before.json()]
    assert get(served, "/api/place", gpus="2").json()["pool"] == "a10g-x4"
    drop_pool(served, "aws", "a10g-x4")
    after = get(served, "/api/pools", cloud="eks")
    assert after.content == afresh(served.url, PoolFilter(cloud="eks"))
    assert "a10g-x4" not in [p["pool"] for p in after.json()]
    assert after.headers["etag"] != before.headers["etag"]
    assert get(served, "/api/place", gpus="2").json()["pool"] == "a100x2"


def test_if_none_match_with_the_current_etag_is_304(served: Served):
    first = get(served, "/api/pools")
    etag = first.headers["etag"]
    for given in (etag, f"W/{etag}", f'"other", {etag}', "*"):
        again = get(served, "/api/pools", {"If-None-Match": given})
        assert (again.status_code, again.content, again.headers["etag"]) == (304, b"", etag), given
    other = get(served, "/api/pools", {"If-None-Match": '"other"'})
    assert (other.status_code, other.content) == (200, first.content)
    assert get(served, "/api/pools", cloud="gke").headers["etag"] != etag  # another answer, another tag
    drop_pool(served, "gcp", "l4-mps")
    changed = get(served, "/api/pools", {"If-None-Match": etag})
    assert changed.status_code == 200 and changed.headers["etag"] != etag


def test_a_kept_answer_still_needs_the_token(tmp_path: Path):
    fleet = tmp_path / "fleet.yaml"
    fleet.write_text(FLEET, encoding="utf-8")
    with fresh_catalog("sqlite", tmp_path) as url:
        fill(Store(url), fleet)
        with running(create_app(Store(url), TOKEN)) as base:
            given = requests.get(
                base + "/api/pools", headers={"Authorization": f"Bearer {TOKEN}"}, timeout=10
            )
            assert given.status_code == 200
            for headers in ({}, {"If-None-Match": given.headers["etag"]}):
                refused = requests.get(base + "/api/pools", headers=headers, timeout=10)
                assert (refused.status_code, refused.json()) == (401, {"error": "a valid token is required"})


def test_the_answers_kept_stay_within_their_budget(tmp_path: Path):
    fleet = tmp_path / "fleet.yaml"
    fleet.write_text(FLEET, encoding="utf-8")
    with fresh_catalog("sqlite", tmp_path) as url:
        fill(Store(url), fleet)
        encoded = EncodedPools(Store(url).live_pools())
        encoded.KEPT_BYTES = len(afresh(url, PoolFilter())) + 1  # the whole list and a little more
        for _, wanted in QUERIES * 2:  # each asked for again once others pushed it out
            assert encoded.get(wanted)[0] == afresh(url, wanted)
            assert encoded.kept_bytes <= encoded.KEPT_BYTES
