"""The one error tree. Every error the tool reports to a user is a ProvisionerError; the CLI
catches the root once and prints it, never a traceback.

    ProvisionerError
    ├── FleetError          the fleet file breaks a rule (carries file:line diagnostics)
    ├── CloudError          a cloud call failed (what drivers raise; see below)
    │   ├── NotFound, Busy, Throttled, Unavailable    Busy/Throttled/Unavailable mean "later"
    │   └── InvalidRequest, NotOwned, AuthenticationFailed, OperationFailed, OperationTimeout,
    │       PartialListing, Unreachable
    ├── CatalogError        the catalog cannot be opened or written (catalog/url.py: it redacts)
    ├── StalePlan           a saved plan no longer matches the clusters
    ├── LockHeld, LockUnusable   another run holds a cluster's lock; the lock cannot be taken
    ├── KubeUnreachable     a cluster's Kubernetes API cannot be reached (or refused us)
    ├── SandboxNotRunning   --sandbox names a directory with no running sandbox
    ├── InvalidOption       a manifests option Kubernetes would refuse (an image, a schedule...)
    ├── BadRequest          a placement request (or its manifest) that cannot be read as one
    └── NoPlacement         no live pool in the catalog fits a placement request
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass


@dataclass(frozen=True, order=True)
class Diagnostic:
    """One problem in a fleet file: where it is (file, line, field path) and what is wrong."""

    file: str
    line: int | None
    path: str
    message: str

    def __str__(self) -> str:
        where = f"{self.file}:{self.line}" if self.line else self.file
        return f"{where}: {self.path}: {self.message}" if self.path else f"{where}: {self.message}"


class ProvisionerError(Exception):
    """Anything the tool reports as an error: its message is for the user, credentials never in it."""

    def report(self) -> list[str]:
        """The lines the command line prints for it, on stderr."""
        return [f"error: {self}"]


class FleetError(ProvisionerError):
    """One or more problems with fleet files; each is a Diagnostic."""

    def __init__(self, diagnostics: Iterable[Diagnostic]):
        self.diagnostics = sorted(set(diagnostics), key=lambda d: (d.file, d.line or 0, d.path))
        super().__init__("\n".join(map(str, self.diagnostics)))

    def report(self) -> list[str]:
        count = len(self.diagnostics)
        return [*map(str, self.diagnostics), f"{count} error{'' if count == 1 else 's'}"]


class CloudError(ProvisionerError):
    """A cloud call failed; the message is the cloud's own."""


class NotFound(CloudError):
    pass


class Busy(CloudError):
    """Another operation runs on the cluster (AKS 409 OperationNotAllowed, GKE FAILED_PRECONDITION)."""


class Throttled(CloudError):
    def __init__(self, message: str, retry_after: float | None = None):
        super().__init__(message)
        self.retry_after = retry_after  # seconds, from the cloud's Retry-After where it sent one


class Unavailable(CloudError):
    """The cloud answered 5xx or did not answer: worth trying again later."""


class InvalidRequest(CloudError):
    pass


class NotOwned(CloudError):
    """The pool exists but this tool did not create it, so it is never changed or deleted."""


class AuthenticationFailed(CloudError):
    pass


class OperationTimeout(CloudError):
    pass


class OperationFailed(CloudError):
    """The cloud accepted the request, then its long-running operation failed."""


class Unreachable(CloudError):
    """The endpoint stayed unreachable (no answer, or 5xx) for longer than the outage window: not
    transient any more, so nothing retries it again."""


class PartialListing(CloudError):
    """A listing made of several calls (EKS: one describe per node group) lost some of them after
    each was retried on its own: reported, never retried whole, so retries never multiply."""


# Errors that say "later", not "no": the one retrying layer retries them, honouring retry_after.
TRANSIENT = (Busy, Throttled, Unavailable)


class StalePlan(ProvisionerError):
    """A saved plan whose clusters changed since it was made: refused whole."""


class RolloutStopped(ProvisionerError):
    """A replacement or a node-by-node reconfiguration stopped inside the cluster: the new pool's
    nodes did not come up, a drain was blocked, a node failed to take its new layout. The message
    says what was left as it was."""


class LockHeld(ProvisionerError):
    """A cluster's lock stayed taken for the whole --lock-timeout."""


class LockUnusable(ProvisionerError):
    """The lock could not be taken at all: its directory cannot be made or written, say."""


class InvalidOption(ProvisionerError):
    """A value given for a manifest that Kubernetes (or a container runtime) would refuse, or an
    environment variable's value the tool cannot use."""

    def __init__(self, option: str, message: str):
        super().__init__(message)
        self.option = option

    def report(self) -> list[str]:
        return [f"error: {self.option}: {self}"]


class SandboxNotRunning(ProvisionerError):
    pass


class KubeUnreachable(ProvisionerError):
    """A cluster's Kubernetes API cannot be used: no context for it, no answer, or credentials
    refused. Reported for that cluster; the other clusters go on."""


class BadRequest(ProvisionerError):
    """A placement request that is not one: a size without a unit, an unknown MIG profile, two
    kinds of request at once; or a manifest it cannot be merged into."""


class NoPlacement(ProvisionerError):
    """No live pool fits the request: says why, and what the closest pools offer."""

    def __init__(self, message: str, closest: list[str] | None = None):
        super().__init__(message)
        self.closest = closest or []

    def report(self) -> list[str]:
        lines = [f"error: {self}"]
        if self.closest:
            lines.append("closest pools:")
            lines += [f"  {line}" for line in self.closest]
        return lines


@dataclass(frozen=True)
class ErrorCodes:
    """A cloud's own error codes for the answers every cloud gives: the only part of the mapping
    from an HTTP answer to a CloudError that differs between clouds (a driver's data)."""

    busy: frozenset[str] = frozenset()  # another operation is running: try later
    throttled: frozenset[str] = frozenset()
    not_found: frozenset[str] = frozenset()
    auth: frozenset[str] = frozenset()
    # Where set, a busy code means busy only with this status (AKS answers 409 OperationNotAllowed
    # while an operation runs, and 400 OperationNotAllowed for a refusal).
    busy_status: int | None = None


def cloud_error(
    status: int | None, code: str, message: str, codes: ErrorCodes, retry_after: float | None = None
) -> CloudError:
    """The error an HTTP status and a cloud error code stand for: one ladder for every cloud.
    `status` None means no answer at all (refused, reset, timed out)."""
    if code in codes.busy and codes.busy_status in (None, status):
        return Busy(message)
    if code in codes.throttled or status == 429:
        return Throttled(message, retry_after)
    if code in codes.not_found or status == 404:
        return NotFound(message)
    if code in codes.auth or status in (401, 403):
        return AuthenticationFailed(message)
    if status is None or status >= 500:
        return Unavailable(message)
    return InvalidRequest(message)


def retry_after_seconds(header: str | None) -> float | None:
    """A Retry-After header's delay in seconds; None where absent or not a number (an HTTP date)."""
    try:
        return float(header) if header is not None else None
    except ValueError:
        return None
