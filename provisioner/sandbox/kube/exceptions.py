"""The errors the sandbox's Kubernetes API answers, one class per Status reason, each with its HTTP
status (k8s.io/apimachinery pkg/apis/meta/v1 types.go, StatusReason; pkg/api/errors/errors.go for
the messages). Rendered as a `Status` object by `responses`."""

from __future__ import annotations

from typing import Any

from provisioner.sandbox.wire import ApiError


class KubeError(ApiError):
    """A Status: `code` holds the reason (NotFound, AlreadyExists...); `details` its details."""

    def __init__(self, message: str, details: dict[str, Any] | None = None, retry_after: float | None = None):
        super().__init__(message, retry_after)
        self.details = details


def _details(kind: str, name: str) -> dict[str, Any]:
    return {"name": name, "kind": kind}


class BadRequest(KubeError):
    status, code = 400, "BadRequest"


class Unauthorized(KubeError):
    status, code = 401, "Unauthorized"


class NotFound(KubeError):
    status, code = 404, "NotFound"

    @classmethod
    def of(cls, kind: str, name: str) -> NotFound:
        """errors.NewNotFound: `<resource> "<name>" not found`."""
        return cls(f'{kind} "{name}" not found', _details(kind, name))


class Forbidden(KubeError):
    status, code = 403, "Forbidden"


class MethodNotSupported(KubeError):
    status, code = 405, "MethodNotAllowed"


class AlreadyExists(KubeError):
    status, code = 409, "AlreadyExists"

    @classmethod
    def of(cls, kind: str, name: str) -> AlreadyExists:
        return cls(f'{kind} "{name}" already exists', _details(kind, name))


class Conflict(KubeError):
    status, code = 409, "Conflict"


class UnsupportedMediaType(KubeError):
    status, code = 415, "UnsupportedMediaType"


class Invalid(KubeError):
    """errors.NewInvalid: `<Kind> "<name>" is invalid: <field>: <why>`, one cause per field."""

    status, code = 422, "Invalid"

    @classmethod
    def of(cls, kind: str, name: str, causes: list[tuple[str, str, str]], group: str = "") -> Invalid:
        """`causes`: (field, reason such as FieldValueRequired, message). `kind` is qualified by
        `group` in the message (schema.GroupKind.String); several causes print as an aggregate
        ("[a, b]", utilerrors.aggregate.Error)."""
        texts = [f"{field}: {message}" for field, _, message in causes]
        text = texts[0] if len(texts) == 1 else "[" + ", ".join(texts) + "]"
        details = {
            "name": name,
            **({"group": group} if group else {}),
            "kind": kind,
            "causes": [{"reason": r, "message": m, "field": f} for f, r, m in causes],
        }
        qualified = f"{kind}.{group}" if group else kind
        return cls(f'{qualified} "{name}" is invalid: {text}', details)


class TooManyRequests(KubeError):
    status, code = 429, "TooManyRequests"


class ServiceUnavailable(KubeError):
    status, code = 503, "ServiceUnavailable"


class GatewayTimeout(KubeError):
    status, code = 504, "Timeout"


class FailureStatus(KubeError):
    """A handler's own Status of failure, with no reason, turned into the error response
    (apiserver pkg/endpoints/handlers/finisher/finisher.go: errors.FromObject)."""

    status, code = 500, ""
