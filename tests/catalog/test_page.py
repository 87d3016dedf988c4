"""The capacity page in a real headless Chromium (Debian's `chromium`, installed here when
missing), driven by Playwright with JavaScript off: the page must work without it."""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from playwright.sync_api import Browser, Page, sync_playwright

from provisioner.catalog.service import create_app
from provisioner.catalog.store import Store
from provisioner.sandbox.server import SandboxSettings
from tests.catalog.test_service import running, seed
from tests.worlds import World

CHROMIUM = Path("/usr/bin/chromium")


@pytest.fixture(scope="session")
def chromium() -> Path:
    """Debian's chromium, installed with apt-get the first time (CI images start without it)."""
    if not CHROMIUM.exists():
        apt = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
        sudo = [] if os.geteuid() == 0 else ["sudo", "-n"]
        subprocess.run([*sudo, "apt-get", "update", "-qq"], check=True, env=apt)
        subprocess.run([*sudo, "apt-get", "install", "-y", "-qq", "chromium"], check=True, env=apt)
    assert CHROMIUM.exists(), "apt-get installed no /usr/bin/chromium"
    return CHROMIUM


@pytest.fixture(scope="module")
def browser(chromium: Path) -> Iterator[Browser]:
    with sync_playwright() as playwright:
        launched = playwright.chromium.launch(executable_path=str(chromium))
        yield launched
        launched.close()


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, list[dict[str, Any]]]]:
    """The service over a SQLite catalog that real syncs of the sandbox filled (as test_service
    seeds it: gcp/mig drifted, azure's last sync failed); its URL and every live pool."""
    directory = tmp_path_factory.mktemp("page")
    url = f"sqlite:///{directory / 'catalog.db'}"
    world = World(directory, SandboxSettings(), catalog=url)
    try:
        seed(world, url)
    finally:
        world.sandbox.stop()
    store = Store(url)
    with running(create_app(store)) as base:
        yield base, store.live_pools()


def table_rows(page: Page) -> list[tuple[str, str]]:
    cells = page.locator("#pools tbody tr").evaluate_all(
        "rows => rows.map(r => [r.dataset.cluster, r.dataset.pool])"
    )
    return [tuple(c) for c in cells]


def test_the_page_shows_every_cluster_and_pool_a_chart_and_filters_without_javascript(
    browser: Browser, site: tuple[str, list[dict[str, Any]]], tmp_path: Path
):
    base, pools = site
    context = browser.new_context(java_script_enabled=False, viewport={"width": 1400, "height": 900})
    page = context.new_page()
    answer = page.goto(base + "/")
    assert answer is not None and answer.status == 200
    assert page.title() == "GPU capacity · provisioner catalog"

    assert table_rows(page) == [(p["cluster"], p["pool"]) for p in pools]
    assert len(pools) == 12
    clusters = page.locator("#clusters tbody tr")
    assert clusters.evaluate_all("rows => rows.map(r => r.dataset.cluster)") == ["aws", "azure", "gcp"]
    assert clusters.filter(has_text="azure").locator(".flag.stale").count() == 1  # its last sync failed
    assert page.locator("#clusters .flag.stale").count() == 1
    assert "last sync failed" in clusters.filter(has_text="azure").inner_text()

    chart = page.locator("svg#capacity-chart")
    assert chart.is_visible()
    bars = chart.locator("g.bar")
    # one bar per cloud, cluster and GPU model, in that order; slices to the maximum size: a MIG
    # pool 3 nodes x 7 (aws: 8 GPUs, 56); a shared pool 2 x 4, plus its cluster's spare GPU (gcp:
    # its spare pool's 3 nodes, one in each of the regional cluster's zones)
    assert bars.evaluate_all("gs => gs.map(g => [g.dataset.cluster, g.dataset.gpu, g.dataset.total])") == [
        ["azure", "A100 80GB", "21"],
        ["azure", "T4 16GB", "9"],
        ["aws", "A100 40GB", "168"],
        ["aws", "A10G 24GB", "9"],
        ["gcp", "A100 40GB", "21"],
        ["gcp", "L4 24GB", "11"],
    ]
    # allocation as the last sync read it from Kubernetes: aws's spare A10G is held by a pod
    texts = bars.evaluate_all("gs => gs.map(g => g.querySelector('text:last-of-type').textContent)")
    assert texts[3] == "1 allocated · 8 free · 9 total (1 now)"
    assert texts[0] == "0 allocated · 21 free · 21 total (0 now)"
    box = chart.bounding_box()
    assert box is not None and box["width"] > 600 and box["height"] > 200  # drawn, not collapsed

    drifted = page.locator('#pools tr[data-cluster="gcp"][data-pool="mig"] .flag.drift')
    assert drifted.count() == 1
    assert page.locator("#pools .flag.drift").count() == 1
    assert page.locator("#drift li").all_inner_texts() == [
        'drift gcp/mig: changed (labels: fleet {"provisioner.io/pool": "mig"}, cloud {"edited": "by-hand"})'
    ]

    screenshot = tmp_path / "catalog-page.png"
    page.screenshot(path=str(screenshot), full_page=True)
    print(f"screenshot of the capacity page: {screenshot}")
    assert screenshot.stat().st_size > 10_000
    if target := os.environ.get("PROVISIONER_PAGE_SCREENSHOT"):  # how docs/catalog-page.png is made
        shutil.copyfile(screenshot, target)

    # The filter form is a GET form: choosing and submitting narrows the table, with no script.
    page.select_option("select[name=cloud]", "eks")
    page.fill("input[name=min_free_slices]", "2")
    with page.expect_navigation():
        page.click("button[type=submit]")
    assert page.url == base + "/?cloud=eks&cluster=&gpu=&mig=&sharing=&isolation=&min_free_slices=2"
    assert table_rows(page) == [("aws", "mig"), ("aws", "shared")]
    assert page.locator("#pool-count").inner_text() == "2 of 12 pools"
    assert page.locator("select[name=cloud]").input_value() == "eks"  # the choice kept
    assert chart.locator("g.bar").evaluate_all("gs => gs.map(g => g.dataset.cluster)") == ["aws", "aws"]
    context.close()
