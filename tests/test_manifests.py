"""`provisioner manifests`: the CronJob that runs the nightly sync, as Kubernetes takes it."""

from __future__ import annotations

import kubernetes_validate
import pytest
from conftest import EXAMPLES
from ruamel.yaml import YAML
from test_cli import run

from provisioner.render import render_catalog_service, render_cronjob


@pytest.mark.parametrize("version", ["1.31", "1.34"])  # the releases the other manifests' tests use
@pytest.mark.parametrize("shards", [1, 4])
def test_the_cronjob_validates_against_the_kubernetes_schema(shards: int, version: str):
    text = render_cronjob(schedule="0 2 * * *", image="registry.example/provisioner:1.0", shards=shards)
    document = YAML(typ="safe").load(text)
    kubernetes_validate.validate(document, version, strict=True)
    spec = document["spec"]
    job = spec["jobTemplate"]["spec"]
    assert spec["concurrencyPolicy"] == "Forbid"
    container = job["template"]["spec"]["containers"][0]
    assert container["resources"]["requests"] and container["resources"]["limits"]
    assert container["env"] == [
        {
            "name": "PROVISIONER_CATALOG",
            "valueFrom": {"secretKeyRef": {"name": "provisioner-catalog", "key": "url"}},
        }
    ]
    if shards > 1:
        assert (job["completionMode"], job["completions"], job["parallelism"]) == ("Indexed", 4, 4)
        assert container["args"][-2:] == ["--shard", "$(JOB_COMPLETION_INDEX)/4"]
        # Each shard retried on its own; a Job-wide backoffLimit would let one shard's failures end all.
        assert job["backoffLimitPerIndex"] == 2 and "backoffLimit" not in job
    else:
        assert "completionMode" not in job and "backoffLimitPerIndex" not in job
        assert job["backoffLimit"] == 2


def test_cronjob_quotes_its_values_so_none_changes_type_or_adds_a_key():
    result = run(
        "manifests",
        "cronjob",
        "--schedule",
        "0 2 * * *",
        "--namespace",
        "null",
        "--image",
        "registry:5000/sync:1.0",
    )
    assert result.returncode == 0, result.stderr
    document = YAML(typ="safe").load(result.stdout)
    assert document["metadata"]["namespace"] == "null"  # the name, not YAML's null
    container = document["spec"]["jobTemplate"]["spec"]["template"]["spec"]["containers"][0]
    assert container["image"] == "registry:5000/sync:1.0"


@pytest.mark.parametrize(
    ("option", "value", "message"),
    [
        ("--image", "sync:1.0\n              command: [sh, -c, id]", "is not an image reference"),
        ("--image", "sync 1.0", "is not an image reference"),
        ("--namespace", "prod\n  annotations: {x: y}", "is not a Kubernetes namespace"),
        ("--namespace", "Prod", "is not a Kubernetes namespace"),
        ("--schedule", "0 2 * *", "is not a schedule: 4 fields"),
        ("--schedule", "0 24 * * *", "'24' is not a valid hour (0-23)"),
        ("--schedule", "@every-night", "is not a schedule: unknown descriptor"),
        ("--schedule", "0 2 * * *\n", "is not a schedule: it holds a tab, newline"),
    ],
)
def test_cronjob_refuses_a_value_kubernetes_would_refuse(option: str, value: str, message: str):
    options = {"--schedule": "0 2 * * *", "--image": "ghcr.io/example/sync:1.0", "--namespace": "ops"}
    options[option] = value
    result = run("manifests", "cronjob", *[part for pair in options.items() for part in pair])
    assert result.returncode == 1
    assert result.stdout == ""
    assert result.stderr.startswith(f"error: {option}: {value!r} is not")
    assert message in result.stderr
    assert "Traceback" not in result.stderr


@pytest.mark.parametrize("schedule", ["*/15 0-6 1,15 JAN-MAR MON-FRI", "@daily", "0 0 ? * sun", "5 4 * * 0"])
def test_cronjob_accepts_what_the_cronjob_controller_accepts(schedule: str):
    result = run("manifests", "cronjob", "--schedule", schedule)
    assert result.returncode == 0, result.stderr
    assert YAML(typ="safe").load(result.stdout)["spec"]["schedule"] == schedule


def test_render_cronjob_still_prints_the_cronjob_with_a_deprecation_note(tmp_path):
    options = ("--schedule", "0 2 * * *", "--shards", "3", "--image", "registry.example/sync:1.0")
    new = run("manifests", "cronjob", *options)
    old = run("render", "cronjob", *options)
    assert (old.returncode, new.returncode) == (0, 0)
    assert old.stdout == new.stdout
    assert YAML(typ="safe").load(old.stdout)["spec"]["jobTemplate"]["spec"]["completions"] == 3
    assert new.stderr == ""
    assert old.stderr == (
        "warning: `provisioner render cronjob` is deprecated and goes in the next release; "
        "use `provisioner manifests cronjob`\n"
    )


def test_render_renders_a_fleet_file_named_cronjob(tmp_path):
    (tmp_path / "cronjob").write_text((EXAMPLES / "fleet.yaml").read_text(encoding="utf-8"), encoding="utf-8")
    result = run("render", "cronjob", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert result.stderr == ""
    assert result.stdout == run("render", str(EXAMPLES / "fleet.yaml")).stdout


def test_render_takes_no_cronjob_options():
    result = run("render", "examples/fleet.yaml", "--schedule", "0 2 * * *")
    assert result.returncode == 2
    assert "Error: No such option '--schedule'" in result.stderr


def test_the_catalog_service_validates_and_runs_catalog_serve_with_its_token():
    text = render_catalog_service(image="registry.example/provisioner:1.0", replicas=2, port=9000)
    deployment, service = YAML(typ="safe").load_all(text)
    for document in (deployment, service):
        kubernetes_validate.validate(document, "1.31", strict=True)
    assert (deployment["kind"], service["kind"]) == ("Deployment", "Service")
    pod = deployment["spec"]["template"]["spec"]
    container = pod["containers"][0]
    assert container["args"] == ["catalog", "serve", "--host", "0.0.0.0", "--port", "9000"]
    assert container["env"] == [
        {
            "name": "PROVISIONER_CATALOG",
            "valueFrom": {"secretKeyRef": {"name": "provisioner-catalog", "key": "url"}},
        },
        {
            "name": "PROVISIONER_CATALOG_TOKEN",
            "valueFrom": {"secretKeyRef": {"name": "provisioner-catalog", "key": "token"}},
        },
    ]
    assert container["ports"] == [{"name": "http", "containerPort": 9000}]
    assert pod["securityContext"]["runAsNonRoot"] is True
    assert container["securityContext"]["readOnlyRootFilesystem"] is True
    assert deployment["spec"]["replicas"] == 2
    assert deployment["spec"]["selector"]["matchLabels"] == service["spec"]["selector"]
    assert service["spec"]["ports"] == [{"name": "http", "port": 80, "targetPort": "http"}]


@pytest.mark.parametrize(
    ("option", "value", "message"),
    [
        ("--image", "sync:1.0\n          command: [sh]", "is not an image reference"),
        ("--namespace", "Prod", "is not a Kubernetes namespace"),
    ],
)
def test_catalog_service_refuses_a_value_kubernetes_would_refuse(option: str, value: str, message: str):
    result = run("manifests", "catalog-service", option, value)
    assert result.returncode == 1
    assert result.stdout == ""
    assert result.stderr.startswith(f"error: {option}: {value!r} is not")
    assert message in result.stderr
