"""The ARM error codes the AKS emulator answers, one class per code, each with its HTTP status.

Codes and statuses as ARM and the agentPools API send them (azure-rest-api-specs
Microsoft.ContainerService: CloudError / ErrorDetail bodies; ARM's common error codes page,
learn.microsoft.com/azure/azure-resource-manager/troubleshooting/common-deployment-errors;
AKS troubleshooting pages for OperationNotAllowed and PropertyChangeNotAllowed).
"""

from __future__ import annotations

from provisioner.sandbox.wire import ApiError


class AksError(ApiError):
    """An ARM error: rendered as `{"error": {"code", "message"}}`."""


class InvalidParameter(AksError):
    status, code = 400, "InvalidParameter"


class PropertyChangeNotAllowed(AksError):
    """A property fixed at creation given a new value on PUT."""

    status, code = 400, "PropertyChangeNotAllowed"


class OperationNotAllowed(AksError):
    """A refusal of the operation itself (the last System pool deleted, say)."""

    status, code = 400, "OperationNotAllowed"


class OperationInProgress(OperationNotAllowed):
    """ARM's same code with 409 while another operation runs on the cluster (FACTS.md, AKS)."""

    status = 409


class ResourceNotFound(AksError):
    """The managed cluster (the parent resource) does not exist."""

    status, code = 404, "ResourceNotFound"


class NotFound(AksError):
    """The agent pool or operation does not exist, or no route serves the path."""

    status, code = 404, "NotFound"


class AuthenticationFailed(AksError):
    status, code = 401, "AuthenticationFailed"


class MissingApiVersionParameter(AksError):
    status, code = 400, "MissingApiVersionParameter"


class InvalidRequestContent(AksError):
    status, code = 400, "InvalidRequestContent"


class TooManyRequests(AksError):
    """ARM's throttling answer, with Retry-After."""

    status, code = 429, "TooManyRequests"


class ServiceUnavailable(AksError):
    status, code = 503, "ServiceUnavailable"


class SubscriptionRequestsThrottled(AksError):
    """ARM's answer past a subscription's request quota, with Retry-After (Microsoft's AKS
    troubleshooting article "Troubleshoot the SubscriptionRequestsThrottled error code (429)",
    learn.microsoft.com/troubleshoot/azure/azure-kubernetes/create-upgrade-delete/
    subscriptionrequeststhrottled-error)."""

    status, code = 429, "SubscriptionRequestsThrottled"
