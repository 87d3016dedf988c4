"""The Auto Scaling groups behind EKS managed node groups, as the Auto Scaling API holds them:
one group per node group, made with it and gone with it, carrying the tags EKS puts on it and
those a user adds.

Rules, each from its reference:
- EKS tags the group it makes with `eks:cluster-name`, `eks:nodegroup-name` and the autoscaler's
  auto-discovery tags `k8s.io/cluster-autoscaler/enabled` and `k8s.io/cluster-autoscaler/<cluster>`
  ("Managed node groups": "automatically tagged for auto-discovery by the Kubernetes Cluster
  Autoscaler"; cluster-autoscaler cloudprovider/aws README); it does not copy the node group's
  own tags there (EKS TagResource reference: tags "do not propagate to any other resources";
  aws/containers-roadmap#608).
- A group has at most 50 tags, keys 1-128 and values 0-256 characters, and keys starting
  with `aws:` are reserved (Auto Scaling User Guide, "Tag Auto Scaling groups and instances").
"""

from __future__ import annotations

from dataclasses import dataclass, field

from provisioner.sandbox.eks.exceptions import AutoScalingValidationError

MAX_GROUP_TAGS = 50
GROUP_TAG_KEY_LENGTH, GROUP_TAG_VALUE_LENGTH = 128, 256
RESOURCE_TYPE = "auto-scaling-group"


@dataclass
class AutoScalingGroup:
    name: str
    cluster: str
    nodegroup: str
    tags: dict[str, str] = field(default_factory=dict)

    @classmethod
    def for_nodegroup(cls, name: str, cluster: str, nodegroup: str) -> AutoScalingGroup:
        return cls(
            name,
            cluster,
            nodegroup,
            {
                "eks:cluster-name": cluster,
                "eks:nodegroup-name": nodegroup,
                "k8s.io/cluster-autoscaler/enabled": "true",
                f"k8s.io/cluster-autoscaler/{cluster}": "owned",
            },
        )

    def tag(self, tags: dict[str, str]) -> None:
        for key, value in tags.items():
            if not 1 <= len(key) <= GROUP_TAG_KEY_LENGTH or key.lower().startswith("aws:"):
                raise AutoScalingValidationError(
                    f"Tag key {key!r} must be 1-{GROUP_TAG_KEY_LENGTH} characters and not start with aws:"
                )
            if len(value) > GROUP_TAG_VALUE_LENGTH:
                raise AutoScalingValidationError(f"Tag value for {key!r} exceeds {GROUP_TAG_VALUE_LENGTH}")
        merged = {**self.tags, **tags}
        if len(merged) > MAX_GROUP_TAGS:
            raise AutoScalingValidationError(
                f"Exceeded the maximum of {MAX_GROUP_TAGS} tags for Auto Scaling group {self.name}"
            )
        self.tags = merged

    def untag(self, keys: list[str]) -> None:
        for key in keys:
            self.tags.pop(key, None)
