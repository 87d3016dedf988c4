"""Objects and lists as the API server answers them: an object, or a `<Kind>List` with the
cluster's resourceVersion, or the Table kubectl asks for where this API prints the kind."""

from __future__ import annotations

from typing import Any

from werkzeug.wrappers import Request, Response

from provisioner.sandbox.kube import tables
from provisioner.sandbox.kube.models import KubeCluster
from provisioner.sandbox.wire import json_response


def one(kind: str, cluster: KubeCluster, item: dict[str, Any], request: Request) -> Response:
    """An object, or its one-row Table where kubectl asks for one (`kubectl get pod NAME`)."""
    if tables.wants_table(request.headers.get("Accept", "")):
        printed = tables.table(kind, cluster.version, [item])
        if printed is not None:
            return json_response(printed)
    return json_response(item)


def listed(
    kind: str,
    cluster: KubeCluster,
    items: list[dict[str, Any]],
    request: Request | None = None,
    api_version: str = "v1",
) -> Response:
    """A `<Kind>List`, or the Table kubectl asks for where this API prints the kind."""
    if request is not None and tables.wants_table(request.headers.get("Accept", "")):
        printed = tables.table(kind, cluster.version, items)
        if printed is not None:
            return json_response(printed)
    return json_response(
        {
            "kind": f"{kind}List",
            "apiVersion": api_version,
            "metadata": {"resourceVersion": cluster.version},
            "items": items,
        }
    )
