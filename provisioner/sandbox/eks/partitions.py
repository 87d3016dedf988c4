"""moto's role-ARN check, made once per process instead of once per request.

moto's CreateCluster and CreateNodegroup check a role ARN's partition against
`boto3.Session().get_available_partitions()` (moto/eks/utils.py `validate_role_arn`): a new
Session each time, which reads botocore's endpoint data afresh, about 0.1 s of CPU a request and
most of the time of seeding hundreds of EKS clusters. The partitions are botocore's data and the
same every time, so one warmed Session answers every check: the same check, the same answers.
"""

from __future__ import annotations

import functools
from typing import Any


@functools.cache
def share_one_session() -> None:
    """Point moto's EKS role-ARN check at one boto3 Session whose partitions are read already."""
    import boto3
    import moto.eks.utils

    session = boto3.Session()
    session.get_available_partitions()  # the endpoint resolver is built now, not under concurrent requests

    def the_session() -> Any:
        return session

    moto.eks.utils.Session = the_session  # type: ignore[attr-defined]
