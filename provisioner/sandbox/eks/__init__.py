"""The EKS emulator: moto's server holds the state; split as moto splits a service, `models` adds
the checks and timed transitions moto lacks (one EksBackend per account and region),
`exceptions` one class per EKS error code, `responses` the layer in front of moto and `urls` its
routes."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from provisioner.sandbox.engine import BackendDict, Engine

if TYPE_CHECKING:
    from provisioner.sandbox import ClusterAddress
    from provisioner.sandbox.eks.models import EksBackend
    from provisioner.sandbox.quotas import QuotaSettings
    from provisioner.sandbox.versions import Release


class EksEmulator:
    def __init__(self, engine: Engine, latency: float = 0.0):
        from provisioner.sandbox.eks import responses
        from provisioner.sandbox.eks.models import KUBERNETES_VERSIONS, EksBackend
        from provisioner.sandbox.eks.partitions import share_one_session

        share_one_session()

        self.kubernetes_versions = KUBERNETES_VERSIONS  # how EKS writes a cluster's version
        self.engine = engine  # its clock and op_seconds (the Kubernetes API's autoscaler reads them)
        self.backends: BackendDict[EksBackend] = BackendDict(
            lambda account, region: EksBackend(engine, account, region)
        )
        self.app: Any = responses.app(engine, self.backends, latency)
        self._seeders: dict[tuple[str, str], Any] = {}  # boto3 EKS clients by (url, region)

    def backend(self, region: str) -> EksBackend:
        """The region's backend (the Kubernetes API's autoscaler resizes node groups through it)."""
        from moto.core import DEFAULT_ACCOUNT_ID

        return self.backends[DEFAULT_ACCOUNT_ID][region]

    def nodegroups(self, region: str, cluster: str) -> dict[str, dict[str, Any]]:
        """`cluster`'s node groups with nodes, as this emulator holds them (for the Kubernetes API)."""
        from moto.core import DEFAULT_ACCOUNT_ID

        return self.backends[DEFAULT_ACCOUNT_ID][region].nodegroups(cluster)

    def enforce_quotas(self, settings: QuotaSettings) -> None:
        """From now on, count each request against EKS's row of sandbox/quotas.py and refuse those past it."""
        from provisioner.sandbox.eks import quotas as eks_quotas
        from provisioner.sandbox.quotas import QuotaGate

        eks_quotas.operations()  # botocore's EKS model read now, not in the first counted request
        self.app.eks.quotas = QuotaGate("eks", eks_quotas.WIRE, settings)

    def add_cluster(self, cluster: ClusterAddress, url: str, release: Release) -> None:
        """Create the cluster at `release` and its system node group through the API, as a user would."""
        eks = self._seeder(url, cluster.location)
        eks.create_cluster(
            name=cluster.name,
            version=self.kubernetes_versions.spell(release),
            roleArn=cluster.extras["node_role"],
            resourcesVpcConfig={"subnetIds": list(cluster.extras["subnets"])},
        )
        eks.create_nodegroup(
            clusterName=cluster.name,
            nodegroupName="system",
            nodeRole=cluster.extras["node_role"],
            subnets=list(cluster.extras["subnets"]),
            instanceTypes=["m5.large"],
            scalingConfig={"minSize": 2, "maxSize": 2, "desiredSize": 2},
        )

    def _seeder(self, url: str, region: str) -> Any:
        """The region's EKS client for seeding, made once (a boto3 client takes ~20 ms to make)."""
        if (url, region) not in self._seeders:
            import boto3

            self._seeders[url, region] = boto3.client(
                "eks",
                endpoint_url=url,
                region_name=region,
                aws_access_key_id="sandbox",
                aws_secret_access_key="sandbox",
            )
        return self._seeders[url, region]
