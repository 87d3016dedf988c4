"""The google.rpc status codes the GKE emulator answers, one class per code, each with the HTTP
status Google's REST mapping gives it (googleapis google/rpc/code.proto, "HTTP Mapping"; AIP-193).
A GKE error reads `{"error": {"code": <HTTP status>, "message", "status": <code>}}`."""

from __future__ import annotations

from provisioner.sandbox.wire import ApiError


class GkeError(ApiError):
    pass


class InvalidArgument(GkeError):
    status, code = 400, "INVALID_ARGUMENT"


class FailedPrecondition(GkeError):
    """GKE's answer while another operation runs on the cluster (FACTS.md, GKE)."""

    status, code = 400, "FAILED_PRECONDITION"


class NotFound(GkeError):
    status, code = 404, "NOT_FOUND"


class AlreadyExists(GkeError):
    status, code = 409, "ALREADY_EXISTS"


class ResourceExhausted(GkeError):
    """Quota or rate exceeded: Google's throttling answer."""

    status, code = 429, "RESOURCE_EXHAUSTED"


class Unavailable(GkeError):
    status, code = 503, "UNAVAILABLE"
