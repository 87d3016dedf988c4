"""Drivers keep a connection per request in flight, without losing what the SDK mounted."""

from __future__ import annotations

import resource
import subprocess
import sys

import requests
from requests.adapters import HTTPAdapter

from provisioner import hardware
from provisioner.drivers import size_connection_pool


class CertificateAdapter(HTTPAdapter):
    """Stands for google-auth's mutual-TLS adapter: its pool manager carries its own settings."""

    def init_poolmanager(self, *args, **kwargs):
        kwargs["cert_reqs"] = "CERT_REQUIRED"
        super().init_poolmanager(*args, **kwargs)


def test_each_mounted_adapter_is_resized_in_place_keeping_its_kind_and_settings():
    session = requests.Session()
    session.mount("https://", CertificateAdapter(max_retries=0))
    size_connection_pool(session, 300)
    adapter = session.adapters["https://"]
    assert isinstance(adapter, CertificateAdapter)
    assert adapter.poolmanager.connection_pool_kw["maxsize"] == 300
    assert adapter.poolmanager.connection_pool_kw["cert_reqs"] == "CERT_REQUIRED"
    assert adapter.max_retries.total == 0
    assert session.adapters["http://"].poolmanager.connection_pool_kw["maxsize"] == 300


def test_making_the_drivers_raises_a_low_open_file_limit_up_to_the_hard_one():
    script = (
        "import resource\n"
        "soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)\n"
        "resource.setrlimit(resource.RLIMIT_NOFILE, (256, hard))\n"
        "from provisioner.observe import Drivers\n"
        "Drivers()\n"
        "print(resource.getrlimit(resource.RLIMIT_NOFILE)[0], hard)\n"
    )
    printed = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True)
    soft, hard = map(int, printed.stdout.split())
    wanted = sum(cloud.requests_at_once for cloud in hardware.load().clouds.values())
    assert soft == (wanted if hard == resource.RLIM_INFINITY else min(wanted, hard))
