"""The EKS error codes the emulator answers, one class per code, each with its HTTP status as
botocore's EKS model gives it (botocore data/eks/2017-11-01/service-2.json, the exception shapes'
httpStatusCode). AWS rest-json: the code in `x-amzn-ErrorType`, `{"message": ...}` in the body."""

from __future__ import annotations

from provisioner.sandbox.wire import ApiError


class EksError(ApiError):
    pass


class InvalidParameterException(EksError):
    status, code = 400, "InvalidParameterException"


class InvalidRequestException(EksError):
    """A request that cannot be read (here: a body that is not a JSON object)."""

    status, code = 400, "InvalidRequestException"


class ResourceInUseException(EksError):
    """The node group is CREATING, UPDATING or DELETING: wait until it is ACTIVE."""

    status, code = 409, "ResourceInUseException"


class ResourceNotFoundException(EksError):
    status, code = 404, "ResourceNotFoundException"


class NotFoundException(EksError):
    """No route serves the path."""

    status, code = 404, "NotFoundException"


class ThrottlingException(EksError):
    status, code = 429, "ThrottlingException"


class ServiceUnavailableException(EksError):
    status, code = 503, "ServiceUnavailableException"


class AutoScalingError(ApiError):
    """The Auto Scaling API's errors (query protocol): the code and message in an XML ErrorResponse."""


class AutoScalingValidationError(AutoScalingError):
    status, code = 400, "ValidationError"


class InvalidAction(AutoScalingError):
    status, code = 400, "InvalidAction"


class AutoScalingThrottling(AutoScalingError):
    status, code = 400, "Throttling"  # Auto Scaling throttles with a 400 Throttling error


class AutoScalingUnavailable(AutoScalingError):
    status, code = 503, "ServiceUnavailable"
