"""Kubernetes manifests each cluster needs, rendered with jinja2 from templates/.

The templates sit at the top of the repository, beside provisioner/, and the wheel carries them
as package data (provisioner/templates, pyproject.toml's force-include): the loader looks in the
package first (installed), then beside it (a checkout, editable or on PYTHONPATH).
"""

from __future__ import annotations

import functools
import io
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import jinja2
from ruamel.yaml import YAML

from provisioner import hardware
from provisioner.claims import MANAGED_BY
from provisioner.clusters import KubernetesVersion
from provisioner.compile import CompiledCluster, CompiledFleet, CompiledPool, desired_state
from provisioner.errors import InvalidOption
from provisioner.kubeyaml import for_kubectl
from provisioner.nvidia import (
    DEFAULT_CONFIG_KEY,
    MIG_STRATEGY,
    default_device_plugin_config,
    mig_device_class,
)
from provisioner.pools import Taint

NAMESPACE = "gpu-operator"
CONFIG_MAP = "nvidia-device-plugin-configs"
DEVICE_PLUGIN_FILE = "device-plugin-config.yaml"
GPU_OPERATOR_FILE = "gpu-operator-values.yaml"
DRA_DRIVER_FILE = "dra-driver-values.yaml"
DRA_CLASSES_FILE = "dra-device-classes.yaml"
# The DRA driver chart's kubeletPlugin.tolerations (its values.yaml L290-293); a list replaces it.
CHART_KUBELET_PLUGIN_TOLERATIONS: tuple[dict[str, str], ...] = (
    {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"},
)


@dataclass(frozen=True)
class RenderedCluster:
    name: str
    files: dict[str, str]  # file name -> YAML text; empty where the cloud needs nothing
    note: str = ""  # why nothing is needed, where so


# Documents dumped before, by their plain content: a fleet's clusters share a few device-plugin
# configs, and ruamel's pure-Python dump of each costs more than rendering the rest of a cluster.
_DUMPED: dict[tuple[Any, int], str] = {}
_DUMPED_MAX = 1024  # documents kept; past it the cache starts again


class _NotPlain(Exception):
    """The data holds something other than dicts, lists and plain scalars: dumped, not cached."""


def _content(data: Any) -> Any:
    """A hashable stand-in for plain data that differs wherever its YAML could (each value's exact
    type kept: 1, 1.0, True and "1" dump differently); _NotPlain for anything else."""
    kind = type(data)
    if kind in (str, int, float, bool, type(None)):
        return (kind, data)
    if kind is list:
        return (list, tuple(_content(item) for item in data))
    if kind is dict:
        return (dict, tuple((_content(k), _content(v)) for k, v in data.items()))
    raise _NotPlain


def to_yaml(data: Any, width: int = 80) -> str:
    try:
        key = (_content(data), width)
    except _NotPlain:
        return _dump(data, width)
    text = _DUMPED.get(key)
    if text is None:
        if len(_DUMPED) >= _DUMPED_MAX:
            _DUMPED.clear()
        text = _DUMPED[key] = _dump(data, width)
    return text


def _dump(data: Any, width: int) -> str:
    out = io.StringIO()
    yaml = for_kubectl(YAML(typ="safe", pure=True))
    yaml.width = width  # a CEL expression reads best on one line
    yaml.default_flow_style = False
    yaml.sort_base_mapping_type_on_output = False  # keep the documents' own key order
    yaml.dump(data, out)
    return out.getvalue().rstrip("\n")


_PACKAGE = Path(__file__).resolve().parent
# Installed: inside the package (the wheel puts them there); a checkout: the repository's top level.
TEMPLATE_DIRS = (_PACKAGE / "templates", _PACKAGE.parent / "templates")


@functools.cache  # once per process: each template is then compiled once, not once per cluster
def _environment() -> jinja2.Environment:
    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader([str(d) for d in TEMPLATE_DIRS if d.is_dir()]),
        undefined=jinja2.StrictUndefined,
        auto_reload=False,  # package data, fixed while the process runs: no stat per template used
        keep_trailing_newline=True,
        autoescape=False,  # YAML, not HTML
    )
    env.filters["to_yaml"] = to_yaml
    return env


# The chart's own tolerations (values.yaml at the version hardware/clouds.yaml pins). Helm replaces
# a list rather than merging it, so a rendered list must repeat them.
CHART_DAEMONSET_TOLERATIONS: tuple[dict[str, str], ...] = (
    {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"},
)
CHART_NFD_WORKER_TOLERATIONS: tuple[dict[str, str], ...] = (
    {
        "key": "node-role.kubernetes.io/control-plane",
        "operator": "Equal",
        "value": "",
        "effect": "NoSchedule",
    },
    {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"},
)


def pool_taints(compiled: CompiledCluster, pools: tuple[CompiledPool, ...] | None = None) -> list[Taint]:
    """Every taint the cluster's GPU pools' nodes (or `pools`') carry: the fleet's, and what the
    cloud adds to Spot pools (AKS), in pool order without repeats."""
    taints: dict[Taint, None] = {}
    for pool in compiled.pools if pools is None else pools:
        state = desired_state(pool)
        taints.update(dict.fromkeys(state.taints))
        if state.spot:
            taints.update(dict.fromkeys(compiled.cloud.spot_taints))
    return list(taints)


def _tolerating(defaults: tuple[dict[str, str], ...], taints: list[Taint]) -> list[dict[str, str]]:
    """`defaults` plus a toleration of any value for each taint's key and effect they lack."""
    tolerations = [dict(t) for t in defaults]
    for taint in taints:
        toleration = {"key": taint.key, "operator": "Exists", "effect": taint.effect}
        if toleration not in tolerations:
            tolerations.append(toleration)
    return tolerations


def gpu_operator_values(compiled: CompiledCluster) -> dict[str, Any]:
    values: dict[str, Any] = {
        "mig": {"strategy": MIG_STRATEGY},
        "devicePlugin": {"config": {"name": CONFIG_MAP, "create": False, "default": DEFAULT_CONFIG_KEY}},
    }
    values.update(compiled.cloud.gpu_operator_values)
    # The device plugin, feature discovery and MIG manager must run on every GPU node, whatever
    # its taints; by default they tolerate only nvidia.com/gpu, and a node they skip has no GPUs.
    taints = pool_taints(compiled)
    daemonsets = _tolerating(CHART_DAEMONSET_TOLERATIONS, taints)
    if len(daemonsets) > len(CHART_DAEMONSET_TOLERATIONS):
        values["daemonsets"] = {"tolerations": daemonsets}
        values["node-feature-discovery"] = {
            "worker": {"tolerations": _tolerating(CHART_NFD_WORKER_TOLERATIONS, taints)}
        }
    return values


def dra_driver_values(compiled: CompiledCluster) -> dict[str, Any]:
    """The DRA driver chart's values for the cluster: its kubelet plugin on the DRA pools' nodes
    alone (selected by the labels that keep their device plugin off), tolerating their taints, with
    the cloud's driver root and the alpha gates the pools' sharing opted in to."""
    rules, driver = compiled.cloud.dra, hardware.load().dra_driver
    assert rules is not None
    pools = compiled.dra_pools
    gates = sorted({driver.sharing[p.setup.sharing].gate for p in pools if p.setup.sharing in driver.sharing})
    values: dict[str, Any] = {"nvidiaDriverRoot": rules.driver_root, "gpuResourcesEnabledOverride": True}
    if gates:
        values["featureGates"] = dict.fromkeys(gates, True)
    values["kubeletPlugin"] = {
        "nodeSelector": dict(rules.device_plugin_off),
        # null deletes the chart's default affinity (NFD or GPU Operator labels, which GKE and ACK
        # nodes lack): the node selector alone decides (Helm, "Deleting a default key").
        "affinity": None,
        "tolerations": _tolerating(CHART_KUBELET_PLUGIN_TOLERATIONS, pool_taints(compiled, pools)),
    }
    return values


def dra_device_classes(compiled: CompiledCluster, version: KubernetesVersion | None) -> list[dict[str, Any]]:
    """A DeviceClass per MIG profile the cluster's DRA pools use, selecting that profile's devices;
    from the version where DRAExtendedResource is on by default, also named as the extended
    resource nvidia.com/mig-<profile>, so a pod asking for that gets the device through DRA."""
    driver = hardware.load().dra_driver
    since = driver.extended_resource_since
    profiles = sorted({p.setup.mig.name for p in compiled.dra_pools if p.setup.mig is not None})
    classes = []
    for profile in profiles:
        attributes = f"device.attributes['{driver.driver}']"
        expression = (
            f"device.driver == '{driver.driver}' && {attributes}.type == 'mig' && "
            f"{attributes}.profile == '{profile}'"
        )
        spec: dict[str, Any] = {"selectors": [{"cel": {"expression": expression}}]}
        if version is not None and version.at_least(since):
            spec["extendedResourceName"] = f"nvidia.com/mig-{profile}"
        classes.append(
            {
                "apiVersion": "resource.k8s.io/v1",
                "kind": "DeviceClass",
                "metadata": {
                    "name": mig_device_class(profile),
                    "labels": dict(MANAGED_BY),
                },
                "spec": spec,
            }
        )
    return classes


def _dra_files(compiled: CompiledCluster, version: KubernetesVersion | None) -> dict[str, str]:
    if not compiled.dra_pools:
        return {}
    env, driver, rules = _environment(), hardware.load().dra_driver, compiled.cloud.dra
    assert rules is not None
    selector = ", ".join(f"{k}={v}" for k, v in rules.device_plugin_off.items())
    files = {
        DRA_DRIVER_FILE: env.get_template(f"{DRA_DRIVER_FILE}.j2").render(
            cluster=compiled.cluster,
            cloud=compiled.cloud,
            driver=driver,
            selector=selector,
            install_note=rules.install_note,
            values=dra_driver_values(compiled),
        )
    }
    classes = dra_device_classes(compiled, version)
    if classes:
        since = driver.extended_resource_since
        files[DRA_CLASSES_FILE] = env.get_template(f"{DRA_CLASSES_FILE}.j2").render(
            cluster=compiled.cluster,
            classes=classes,
            version_text=str(version) if version is not None else "version not given",
            extended=version is not None and version.at_least(since),
            extended_since=".".join(map(str, since)),
        )
    return files


def render_cluster(compiled: CompiledCluster, version: KubernetesVersion | None = None) -> RenderedCluster:
    """What the cluster needs installed; `version` its Kubernetes version, where DRA pools need it."""
    name = compiled.cluster.name
    dra = _dra_files(compiled, version)
    if not compiled.uses_gpu_operator:
        cloud = compiled.cloud
        return RenderedCluster(
            name,
            dra,
            note=""
            if dra
            else cloud.gpu_stack_note
            or f"{cloud.title} partitions and shares GPUs itself: nothing to install",
        )
    context = _gpu_operator_context(compiled)
    env = _environment()
    files = {
        filename: env.get_template(f"{filename}.j2").render(context)
        for filename in (DEVICE_PLUGIN_FILE, GPU_OPERATOR_FILE)
    }
    return RenderedCluster(name, files | dra)


def render_device_plugin_config(compiled: CompiledCluster) -> str | None:
    """The device-plugin ConfigMap of render_cluster's files alone (plan compares it with the
    cluster's); None where the cloud needs none."""
    if not compiled.uses_gpu_operator:
        return None
    template = _environment().get_template(f"{DEVICE_PLUGIN_FILE}.j2")
    return template.render(_gpu_operator_context(compiled))


def _gpu_operator_context(compiled: CompiledCluster) -> dict[str, Any]:
    """What the device-plugin ConfigMap's and the GPU Operator values' templates are given."""
    configs = {DEFAULT_CONFIG_KEY: default_device_plugin_config()}
    configs |= {c.key: c.document() for c in compiled.device_plugin_configs}
    return {
        "cluster": compiled.cluster,
        "cloud": compiled.cloud,
        "namespace": NAMESPACE,
        "config_map": CONFIG_MAP,
        "default_key": DEFAULT_CONFIG_KEY,
        "configs": configs,
        "values": gpu_operator_values(compiled),
        "chart": hardware.load().gpu_operator_chart,
    }


def render_fleet(
    compiled: CompiledFleet,
    cluster: str | None = None,
    versions: dict[str, KubernetesVersion] | None = None,
) -> list[RenderedCluster]:
    """Each cluster's files; `versions` the Kubernetes version of clusters with DRA pools, by name."""
    clusters = [c for c in compiled.clusters if cluster is None or c.cluster.name == cluster]
    return [render_cluster(c, (versions or {}).get(c.name)) for c in clusters]


def as_stream(rendered: list[RenderedCluster]) -> str:
    """One YAML stream, each document headed like `helm template` heads its output."""
    parts = []
    for cluster in rendered:
        if not cluster.files:
            parts.append(f"# Cluster {cluster.name}: {cluster.note}\n")
        for filename, text in cluster.files.items():
            parts.append(f"---\n# Source: {cluster.name}/{filename}\n{text}")
    return "".join(parts)


# A Kubernetes namespace is a DNS-1123 label (k8s.io/apimachinery validation.IsDNS1123Label).
_DNS1123_LABEL = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?")
# An image reference by the grammar of github.com/distribution/reference (regexp.go): an optional
# registry host[:port], slash-separated lowercase path components, an optional :tag, @digest.
_IMAGE_COMPONENT = r"[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*"
_IMAGE_DOMAIN_PART = r"[a-zA-Z0-9](?:[a-zA-Z0-9-]*[a-zA-Z0-9])?"
_IMAGE_HOST = rf"(?:{_IMAGE_DOMAIN_PART}(?:\.{_IMAGE_DOMAIN_PART})*|\[[0-9a-fA-F:]+\])(?::[0-9]+)?"
_IMAGE = re.compile(
    rf"(?:{_IMAGE_HOST}/)?{_IMAGE_COMPONENT}(?:/{_IMAGE_COMPONENT})*"
    r"(?::[\w][\w.-]{0,127})?(?:@[A-Za-z][A-Za-z0-9]*(?:[-_+.][A-Za-z][A-Za-z0-9]*)*:[0-9a-fA-F]{32,})?",
    re.ASCII,
)
# The CronJob controller parses schedules with robfig/cron's standard parser: five fields, or one
# of its descriptors (Kubernetes docs, "CronJob": Schedule syntax).
CRON_MACROS = ("@yearly", "@annually", "@monthly", "@weekly", "@daily", "@midnight", "@hourly")
_MONTHS = ("JAN", "FEB", "MAR", "APR", "MAY", "JUN", "JUL", "AUG", "SEP", "OCT", "NOV", "DEC")
_DAYS = ("SUN", "MON", "TUE", "WED", "THU", "FRI", "SAT")
# (field name, lowest, highest, names counted from `lowest`) in robfig/cron's order and bounds.
_CRON_FIELDS = (
    ("minute", 0, 59, ()),
    ("hour", 0, 23, ()),
    ("day of month", 1, 31, ()),
    ("month", 1, 12, _MONTHS),
    ("day of week", 0, 6, _DAYS),
)


def check_cronjob_options(*, schedule: str, image: str, namespace: str) -> None:
    """InvalidOption for the first value Kubernetes would refuse, or that would not stay one value."""
    check_image_and_namespace(image=image, namespace=namespace)
    problem = _cron_problem(schedule)
    if problem:
        raise InvalidOption(
            "--schedule",
            f"{schedule!r} is not a schedule: {problem}; want five fields (minute hour day-of-month "
            f"month day-of-week, e.g. '0 2 * * *') or one of {', '.join(CRON_MACROS)}",
        )


def check_image_and_namespace(*, image: str, namespace: str) -> None:
    """InvalidOption where the image or namespace would be refused or would not stay one value."""
    if len(namespace) > 63 or not _DNS1123_LABEL.fullmatch(namespace):
        raise InvalidOption(
            "--namespace",
            f"{namespace!r} is not a Kubernetes namespace: at most 63 characters of a-z, 0-9 and '-', "
            "starting and ending with a letter or digit",
        )
    if len(image) > 4096 or not _IMAGE.fullmatch(image):
        raise InvalidOption(
            "--image",
            f"{image!r} is not an image reference such as registry.example.com/team/provisioner:1.2 "
            "(no spaces, newlines or upper-case path)",
        )


def _cron_problem(schedule: str) -> str | None:
    if schedule.startswith("@"):
        return None if schedule in CRON_MACROS else "unknown descriptor"
    if any(c in schedule for c in "\n\r\t") or schedule.strip() != schedule:
        return "it holds a tab, newline or leading/trailing space"
    fields = schedule.split(" ")
    if len(fields) != 5 or "" in fields:
        return f"{len([f for f in fields if f])} fields"
    for text, (name, low, high, names) in zip(fields, _CRON_FIELDS, strict=True):
        for item in text.split(","):
            if not _cron_item_ok(item, low, high, names, name.startswith("day of")):
                return f"{item!r} is not a valid {name} ({low}-{high}{', or a name' if names else ''})"
    return None


def _cron_item_ok(item: str, low: int, high: int, names: tuple[str, ...], question_ok: bool) -> bool:
    span, _, step = item.partition("/")
    if step and not (step.isdigit() and int(step) > 0):
        return False
    if span == "*" or (span == "?" and question_ok):
        return True
    bounds = span.split("-")
    if len(bounds) > 2:
        return False
    values = [_cron_value(b, low, names) for b in bounds]
    if any(v is None or not low <= v <= high for v in values):
        return False
    return len(values) == 1 or values[0] <= values[1]  # type: ignore[operator]


def _cron_value(text: str, low: int, names: tuple[str, ...]) -> int | None:
    if text.isdigit():
        return int(text)
    if text.upper() in names:
        return low + names.index(text.upper())
    return None


def render_cronjob(
    *,
    schedule: str,
    image: str,
    namespace: str = "provisioner",
    name: str = "provisioner-sync",
    fleet_configmap: str = "provisioner-fleet",
    catalog_secret: str = "provisioner-catalog",
    service_account: str = "provisioner",
    shards: int = 1,
    deadline_seconds: int = 3600,
    retries: int = 2,
) -> str:
    """The nightly sync as a CronJob (an Indexed Job of `shards` pods where shards > 1, each
    shard retried `retries` times on its own).

    InvalidOption where the schedule, image or namespace would be refused or would not stay one
    value; every value goes into the YAML quoted (as JSON), so none can add a key of its own."""
    check_cronjob_options(schedule=schedule, image=image, namespace=namespace)
    template = _environment().get_template("cronjob.yaml.j2")
    return template.render(
        schedule=schedule,
        image=image,
        namespace=namespace,
        name=name,
        fleet_configmap=fleet_configmap,
        catalog_secret=catalog_secret,
        service_account=service_account,
        shards=shards,
        deadline=deadline_seconds,
        retries=retries,
    )


def render_catalog_service(
    *,
    image: str,
    namespace: str = "provisioner",
    name: str = "provisioner-catalog",
    catalog_secret: str = "provisioner-catalog",
    replicas: int = 1,
    port: int = 8080,
) -> str:
    """`catalog serve` as a Deployment and its ClusterIP Service. It listens beyond loopback, so
    it reads its token (and the catalog URL) from the Secret `catalog_secret` (keys token, url)."""
    check_image_and_namespace(image=image, namespace=namespace)
    template = _environment().get_template("catalog-service.yaml.j2")
    return template.render(
        image=image,
        namespace=namespace,
        name=name,
        catalog_secret=catalog_secret,
        replicas=replicas,
        port=port,
    )
