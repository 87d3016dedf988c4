"""The ACK (CS API 2015-12-15) error codes the emulator answers, one class per code, each with its
HTTP status. ACK's error bodies are `{"code", "message", "requestId"}` (responses.py).

Confirmed codes: ErrorClusterNotFound and ErrorNodePoolNotFound (terraform-provider-alicloud
alicloud/service_alicloud_ack_v2.go, errors.go), Throttling.User and ServiceUnavailable as the
retryable answers (same errors.go, NeedRetry). Every other code here is UNCONFIRMED: no source read
names ACK's code for that refusal, so the emulator's choice is marked as a guess beside it; the
driver classifies them by HTTP status, except the busy code, which it names (drivers/ack.py).
"""

from __future__ import annotations

from provisioner.sandbox.wire import ApiError


class AckError(ApiError):
    """An ACK error: its class names the code and the HTTP status; the message is per request."""

    status = 400
    code = ""

    def __init__(self, message: str, retry_after: float | None = None):
        Exception.__init__(self, message)
        self.message = message
        self.retry_after = retry_after  # seconds; sent as x-acs-retry-after in milliseconds


class ErrorClusterNotFound(AckError):
    status, code = 404, "ErrorClusterNotFound"


class ErrorNodePoolNotFound(AckError):
    status, code = 404, "ErrorNodePoolNotFound"


class ErrorTaskNotFound(AckError):
    status, code = 404, "ErrorTaskNotFound"  # UNCONFIRMED code


class NotFound(AckError):
    """No route serves the path."""

    status, code = 404, "NotFound"  # UNCONFIRMED code


class InvalidParameter(AckError):
    """A field the API reference's rules refuse; the message names the field and the rule."""

    status, code = 400, "InvalidParameter"  # UNCONFIRMED code (the research memo's best guess)


class ErrorNodePoolStatusInvalid(AckError):
    """An operation on a node pool whose previous operation still runs (one per pool at a time)."""

    status, code = 400, "ErrorNodePoolStatusInvalid"  # UNCONFIRMED code


class QuotaExceededNodePool(AckError):
    """More node pools than the cluster's quota (20 by default, DescribeUserQuota)."""

    status, code = 400, "QuotaExceeded.NodePool"  # UNCONFIRMED code


class ErrorNodePoolNameDuplicated(AckError):
    status, code = 400, "ErrorNodePoolNameDuplicated"  # UNCONFIRMED code and rule


class ErrorNodePoolHasNodes(AckError):
    """DeleteClusterNodepool with force=false on a pool that has nodes (its docstring: refused)."""

    status, code = 400, "ErrorNodePoolHasNodes"  # UNCONFIRMED code


class IncompleteSignature(AckError):
    """A request without the ACS3-HMAC-SHA256 Authorization header the SDK always sends."""

    status, code = 400, "IncompleteSignature"  # UNCONFIRMED for the CS API (Alibaba's POP common code)


class InvalidRequestContent(AckError):
    status, code = 400, "InvalidRequestContent"  # UNCONFIRMED code


class ThrottlingUser(AckError):
    status, code = 429, "Throttling.User"


class UserFlowControl(ThrottlingUser):
    """The answer past an API's rate quota: Throttling.User with HTTP 400, as Alibaba's OpenAPI
    gateway sends it ("ErrorCode=Throttling.User HttpCode=400", help.aliyun.com/document_detail/
    446611.html; the 400 Throttling.User row of help.aliyun.com/zh/ocr's common error codes)."""

    status = 400


class ServiceUnavailable(AckError):
    status, code = 503, "ServiceUnavailable"
