"""The EKS emulator's routes: the node-group paths of the EKS REST API it serves itself
(botocore data/eks/2017-11-01/service-2.json, each operation's http requestUri); everything
else goes to moto's EKS server."""

from __future__ import annotations

from werkzeug.routing import Map, Rule

_GROUPS = "/clusters/<cluster>/node-groups"
_GROUP = f"{_GROUPS}/<nodegroup>"
ROUTES = Map(
    [
        Rule(_GROUPS, methods=["POST"], endpoint="create"),
        Rule(_GROUPS, methods=["GET"], endpoint="list"),
        Rule(_GROUP, methods=["GET"], endpoint="describe"),
        Rule(_GROUP, methods=["DELETE"], endpoint="delete"),
        Rule(f"{_GROUP}/update-config", methods=["POST"], endpoint="update"),
        Rule("/clusters/<cluster>/updates/<update>", methods=["GET"], endpoint="describe_update"),
        # TagResource: moto tags clusters only (its tag_resource says so); node groups are served here.
        Rule("/tags/<path:arn>", methods=["POST"], endpoint="tag"),
        Rule("/tags/<path:arn>", methods=["DELETE"], endpoint="untag"),
        Rule("/<path:rest>", endpoint="moto"),
    ],
    strict_slashes=False,
)
