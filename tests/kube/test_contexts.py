"""Which kubeconfig context reaches each fleet cluster: the fleet's kubeContext, else the one the
cloud's CLI writes (hardware/clouds.yaml), read by the real kubernetes client from real files."""

from __future__ import annotations

import functools
import socket
import threading
from pathlib import Path

import pytest
from ruamel.yaml import YAML

from provisioner.errors import KubeUnreachable
from provisioner.fleet import load
from provisioner.kube.contexts import KubeAccess, at_once

FLEET = """\
clusters:
  - name: azure
    cloud: aks
    subscription: 22222222-2222-2222-2222-222222222222
    resourceGroup: rg
    cluster: ml-aks
  - name: gcp
    cloud: gke
    project: my-project
    location: europe-west4
    cluster: ml-gke
  - name: aws
    cloud: eks
    region: us-west-2
    cluster: ml
    nodeRole: arn:aws:iam::123456789012:role/nodes
    subnets: [subnet-0abc1234]
  - name: named
    cloud: aks
    subscription: 22222222-2222-2222-2222-222222222222
    resourceGroup: rg
    cluster: other
    kubeContext: my-admin-context
"""


def _kubeconfig(path: Path, contexts: list[str]) -> Path:
    document = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "c", "cluster": {"server": "http://127.0.0.1:9"}}],
        "users": [{"name": "u", "user": {"token": "t"}}],
        "contexts": [{"name": name, "context": {"cluster": "c", "user": "u"}} for name in contexts],
        "current-context": contexts[0],
    }
    with path.open("w", encoding="utf-8") as out:
        YAML(typ="safe", pure=True).dump(document, out)
    return path


@pytest.fixture
def clusters(tmp_path: Path) -> dict:
    fleet = tmp_path / "fleet.yaml"
    fleet.write_text(FLEET, encoding="utf-8")
    return {c.name: c for c in load(fleet).clusters}


def test_each_cloud_finds_the_context_its_cli_writes(tmp_path: Path, clusters: dict):
    config = _kubeconfig(
        tmp_path / "config",
        [
            "ml-aks",
            "gke_my-project_europe-west4_ml-gke",
            "arn:aws:eks:us-east-1:123456789012:cluster/ml",  # the same name in another region
            "arn:aws:eks:us-west-2:123456789012:cluster/ml",
            "my-admin-context",
        ],
    )
    access = KubeAccess(kubeconfig=config)
    assert {name: access.context_for(c) for name, c in clusters.items()} == {
        "azure": "ml-aks",  # az aks get-credentials
        "gcp": "gke_my-project_europe-west4_ml-gke",  # gcloud container clusters get-credentials
        "aws": "arn:aws:eks:us-west-2:123456789012:cluster/ml",  # aws eks update-kubeconfig
        "named": "my-admin-context",  # the fleet's kubeContext wins
    }


def test_kubeconfig_env_lists_several_files_as_kubectl_merges_them(
    tmp_path: Path, clusters: dict, monkeypatch: pytest.MonkeyPatch
):
    one = _kubeconfig(tmp_path / "one", ["ml-aks"])
    two = _kubeconfig(tmp_path / "two", ["arn:aws:eks:us-west-2:123456789012:cluster/ml"])
    monkeypatch.setenv("KUBECONFIG", f"{one}:{two}")
    access = KubeAccess()
    assert access.contexts() == ["ml-aks", "arn:aws:eks:us-west-2:123456789012:cluster/ml"]
    assert access.context_for(clusters["aws"]) == "arn:aws:eks:us-west-2:123456789012:cluster/ml"


def test_two_matching_eks_contexts_ask_for_kube_context(tmp_path: Path, clusters: dict):
    config = _kubeconfig(
        tmp_path / "config",
        ["arn:aws:eks:us-west-2:111111111111:cluster/ml", "arn:aws:eks:us-west-2:222222222222:cluster/ml"],
    )
    with pytest.raises(KubeUnreachable) as caught:
        KubeAccess(kubeconfig=config).context_for(clusters["aws"])
    assert str(caught.value) == (
        f"aws: 2 contexts match (arn:aws:eks:us-west-2:111111111111:cluster/ml, "
        f"arn:aws:eks:us-west-2:222222222222:cluster/ml) in {config} matches "
        "arn:aws*:eks:us-west-2:*:cluster/ml; name its context with kubeContext in the fleet"
    )


def test_a_context_missing_from_the_kubeconfig_names_the_cluster(tmp_path: Path, clusters: dict):
    config = _kubeconfig(tmp_path / "config", ["something-else"])
    with pytest.raises(KubeUnreachable) as caught:
        KubeAccess(kubeconfig=config).for_cluster(clusters["azure"])
    assert str(caught.value).startswith(f"azure: no usable context 'ml-aks' in {config}: ")
    with pytest.raises(KubeUnreachable) as caught:
        KubeAccess(kubeconfig=tmp_path / "absent").contexts()
    assert str(caught.value).startswith(f"cannot read the kubeconfig {tmp_path / 'absent'}: ")


def test_each_context_gets_the_client_s_own_settings_from_the_kubeconfig_read_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    """The kubeconfig is read once for every cluster; each client still gets what the client's own
    new_client_from_config gives it: the first file wins a name, paths are the file's own."""
    from kubernetes import config

    (tmp_path / "one").mkdir()
    (tmp_path / "one" / "ca.crt").write_text("not a real certificate\n", encoding="utf-8")
    one = _write(
        tmp_path / "one" / "config",
        {
            "clusters": [
                {"name": "a", "cluster": {"server": "https://a.example", "certificate-authority": "ca.crt"}},
                {"name": "b", "cluster": {"server": "https://b-first.example"}},
            ],
            "users": [{"name": "u", "user": {"token": "first"}}],
            "contexts": [
                {"name": "ctx-a", "context": {"cluster": "a", "user": "u"}},
                {"name": "ctx-b", "context": {"cluster": "b", "user": "u"}},
            ],
            "current-context": "ctx-a",
        },
    )
    two = _write(
        tmp_path / "two",
        {
            "clusters": [
                {"name": "b", "cluster": {"server": "https://b-second.example"}},
                {"name": "c", "cluster": {"server": "http://c.example", "insecure-skip-tls-verify": True}},
            ],
            "users": [{"name": "u", "user": {"token": "second"}}, {"name": "v", "user": {"token": "v"}}],
            "contexts": [{"name": "ctx-c", "context": {"cluster": "c", "user": "v"}}],
        },
    )
    monkeypatch.setenv("KUBECONFIG", f"{one}:{two}")
    access = KubeAccess()
    assert access.contexts() == [c["name"] for c in config.list_kube_config_contexts(f"{one}:{two}")[0]]

    def settings(made) -> tuple:
        return (made.host, made.api_key, made.ssl_ca_cert, made.verify_ssl)

    for context in ("ctx-a", "ctx-b", "ctx-c"):
        with access.connect(context, context) as kube:
            ours = settings(kube._core.api_client.configuration)
        theirs = settings(config.new_client_from_config(f"{one}:{two}", context=context).configuration)
        assert ours == theirs
    assert settings(access.connect("a", "ctx-a")._core.api_client.configuration)[2] == str(
        tmp_path / "one" / "ca.crt"
    )


def test_names_repeated_within_and_across_files_merge_as_the_client_merges_them(tmp_path: Path):
    """The merge by a set of names keeps what the client's KubeConfigMerger keeps, in its order:
    the first entry of a name, whichever file and place it comes from."""
    from kubernetes.config.kube_config import KubeConfigMerger

    from provisioner.kube.kubeconfig import _Merger

    def entries(prefix: str, names: list[str]) -> dict:
        return {
            "clusters": [{"name": n, "cluster": {"server": f"https://{prefix}-{n}.example"}} for n in names],
            "users": [{"name": n, "user": {"token": f"{prefix}-{n}"}} for n in names],
            "contexts": [{"name": n, "context": {"cluster": n, "user": n}} for n in names],
        }

    one = _write(tmp_path / "one", entries("one", ["a", "b", "a", "c"]))
    two = _write(tmp_path / "two", entries("two", ["c", "d", "b", "e", "d"]))
    joined = f"{one}:{two}"
    ours, theirs = _Merger(joined).config.value, KubeConfigMerger(joined).config.value
    for item in ("clusters", "users", "contexts"):
        assert [e.value for e in ours[item]] == [e.value for e in theirs[item]]
        assert [e.name for e in ours[item]] == [e.name for e in theirs[item]]
    assert [e.value["name"] for e in ours["users"]] == ["a", "b", "c", "d", "e"]
    assert [e.value["user"]["token"] for e in ours["users"]][2:] == ["one-c", "two-d", "two-e"]


def test_a_kubeconfig_written_as_json_or_as_a_yaml_flow_mapping_merges_as_the_client_merges_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    """JSON is read by the json module, and a file that only starts as JSON does (a YAML flow
    mapping, unquoted) by YAML: both as the client's own merger reads them."""
    from kubernetes.config.kube_config import KubeConfigMerger

    from provisioner.kube.kubeconfig import _Merger

    json_file = tmp_path / "as-json"
    json_file.write_text(
        '{"apiVersion": "v1", "clusters": [{"name": "a", "cluster": {"server": "https://a.example",'
        ' "insecure-skip-tls-verify": true}}], "users": [{"name": "u", "user": {"token": "t"}}],'
        ' "contexts": [{"name": "ctx", "context": {"cluster": "a", "user": "u"}}],'
        ' "current-context": "ctx"}\n',
        encoding="utf-8",
    )
    flow = tmp_path / "as-flow"
    flow.write_text(
        "{apiVersion: v1, clusters: [{name: b, cluster: {server: 'https://b.example'}}],\n"
        " users: [{name: u, user: {token: yes}}],\n"
        " contexts: [{name: ctx-b, context: {cluster: b, user: u}}]}\n",
        encoding="utf-8",
    )
    for path in (json_file, flow, f"{json_file}:{flow}"):
        ours, theirs = _Merger(str(path)).config.value, KubeConfigMerger(str(path)).config.value
        for item in ("clusters", "users", "contexts"):
            assert [e.value for e in ours[item]] == [e.value for e in theirs[item]]
        assert ours.get("current-context") == theirs.get("current-context")
    assert _Merger(str(flow)).config.value["users"][0].value["user"]["token"] is True  # YAML 1.1's yes

    def no_yaml(*_: object, **__: object) -> None:
        raise AssertionError("a JSON kubeconfig was read as YAML")

    monkeypatch.setattr("provisioner.kube.kubeconfig.yaml.load", no_yaml)
    assert [e.value["name"] for e in _Merger(str(json_file)).config.value["contexts"]] == ["ctx"]


def test_a_context_naming_what_the_kubeconfig_lacks_fares_as_with_the_client_s_own_loader(tmp_path: Path):
    """Each client's loader sees only its context's entries: a cluster or user the file lacks, or
    an entry without a name, still ends as the client's own loader ends it."""
    from kubernetes import config
    from kubernetes.config import ConfigException

    path = _write(
        tmp_path / "config",
        {
            "clusters": [{"name": "c", "cluster": {"server": "http://c.example"}}],
            "users": [{"name": "u", "user": {"token": "t"}}],
            "contexts": [
                {"name": "no-cluster", "context": {"cluster": "absent", "user": "u"}},
                {"name": "no-user", "context": {"cluster": "c", "user": "absent"}},
                {"name": "ok", "context": {"cluster": "c", "user": "u"}},
            ],
            "current-context": "ok",
        },
    )
    access = KubeAccess(kubeconfig=path)
    with pytest.raises(ConfigException) as theirs:
        config.new_client_from_config(str(path), context="no-cluster")
    with pytest.raises(KubeUnreachable) as ours:
        access.connect("x", "no-cluster")
    assert str(ours.value).endswith(" ".join(str(theirs.value).split()))
    for context in ("no-user", "ok"):
        made = config.new_client_from_config(str(path), context=context).configuration
        with access.connect(context, context) as kube:
            assert (
                kube._core.api_client.configuration.host,
                kube._core.api_client.configuration.api_key,
            ) == (
                made.host,
                made.api_key,
            )
    for unnamed in ({}, {"name": None}):  # the client takes a null name for a missing one
        path = _write(
            tmp_path / "unnamed",
            {
                "clusters": [{"name": "c", "cluster": {"server": "http://c.example"}}],
                "users": [{**unnamed, "user": {"token": "x"}}],
                "contexts": [{"name": "ok", "context": {"cluster": "c", "user": "u"}}],
                "current-context": "ok",
            },
        )
        with pytest.raises(ConfigException) as theirs:
            config.new_client_from_config(str(path), context="ok")
        with pytest.raises(KubeUnreachable) as ours:
            KubeAccess(kubeconfig=path).connect("x", "ok")
        assert str(ours.value).endswith(" ".join(str(theirs.value).split()))
    # An unnamed entry after a named one: the client's own merge fails with a KeyError; here it is
    # the same clear error, naming the list.
    second = _write(
        tmp_path / "second",
        {
            "clusters": [{"name": "c", "cluster": {"server": "http://c.example"}}],
            "users": [{"name": "u", "user": {"token": "t"}}, {"user": {"token": "x"}}],
            "contexts": [{"name": "ok", "context": {"cluster": "c", "user": "u"}}],
            "current-context": "ok",
        },
    )
    with pytest.raises(KubeUnreachable) as ours:
        KubeAccess(kubeconfig=second).connect("x", "ok")
    assert str(ours.value).endswith(f"Expected all values in {second}/users list to have 'name' key")
    numbered = _write(  # a name YAML reads as a number is a name all the same
        tmp_path / "numbered",
        {
            "clusters": [{"name": "c", "cluster": {"server": "http://c.example"}}],
            "users": [{"name": 7, "user": {"token": "seven"}}],
            "contexts": [{"name": "ok", "context": {"cluster": "c", "user": 7}}],
            "current-context": "ok",
        },
    )
    made = config.new_client_from_config(str(numbered), context="ok").configuration
    assert list(made.api_key.values()) == ["Bearer seven"]
    with KubeAccess(kubeconfig=numbered).connect("ok", "ok") as kube:
        assert kube._core.api_client.configuration.api_key == made.api_key


def test_a_refreshed_credential_is_saved_whole_with_the_file_s_mode_through_its_symlink(tmp_path: Path):
    """What the client's loader writes back (a gcp or oidc token it refreshed) replaces the file
    in one rename: a reader never finds it half written, the symlink stays a symlink, the file
    keeps its mode, no temporary is left."""
    import yaml

    real = tmp_path / "real"
    real.mkdir()
    target = _one_context(real / "config")
    target.chmod(0o640)  # not mkstemp's 0600: the file's own mode is kept
    link = tmp_path / "config"
    link.symlink_to(target)
    loader = KubeAccess(kubeconfig=link)._kubeconfig().loader("ok")
    seen: list[object] = []
    saving = threading.Event()
    fast = getattr(yaml, "CSafeLoader", yaml.SafeLoader)  # more reads while the saves run

    def read_while_saving() -> None:  # what kubectl, or another process, reads meanwhile
        while not saving.is_set():
            try:
                seen.append(yaml.load(target.read_text(encoding="utf-8"), Loader=fast))
            except yaml.YAMLError as error:  # a torn file: kept, so the test sees it
                seen.append(error)

    reader = threading.Thread(target=read_while_saving)
    reader.start()
    for n in range(30):  # as the loader's refresh of a legacy auth provider does, each time
        loader._user.value["token"] = f"refreshed-{n}-" + "x" * 4000
        loader._config_persister()
    saving.set()
    reader.join()
    assert seen and all(isinstance(s, dict) and len(s["users"]) == 1 for s in seen)  # never torn
    assert link.is_symlink() and link.resolve() == target
    assert (target.stat().st_mode & 0o777) == 0o640
    assert sorted(p.name for p in real.iterdir()) == ["config"]
    saved = YAML(typ="safe", pure=True).load(target.read_text(encoding="utf-8"))
    assert saved["users"] == [{"name": "u", "user": {"token": "refreshed-29-" + "x" * 4000}}]
    assert saved["contexts"] == [{"name": "ok", "context": {"cluster": "c", "user": "u"}}]


def test_a_kubeconfig_that_cannot_be_replaced_is_saved_in_place(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    """A kubeconfig bind-mounted alone into a container cannot be renamed over (EBUSY): the
    refreshed credential is written into the file itself, as the client writes it."""
    import errno

    path = _one_context(tmp_path / "config")
    inode = path.stat().st_ino
    loader = KubeAccess(kubeconfig=path)._kubeconfig().loader("ok")

    def busy(self: Path, target: Path) -> Path:
        raise OSError(errno.EBUSY, "Device or resource busy")

    monkeypatch.setattr(Path, "replace", busy)
    loader._user.value["token"] = "refreshed"
    loader._config_persister()
    saved = YAML(typ="safe", pure=True).load(path.read_text(encoding="utf-8"))
    assert saved["users"] == [{"name": "u", "user": {"token": "refreshed"}}]
    assert path.stat().st_ino == inode  # the same file, written in place
    assert sorted(p.name for p in tmp_path.iterdir()) == ["config"]


def test_an_edited_kubeconfig_is_read_again(tmp_path: Path, clusters: dict):
    config = _kubeconfig(tmp_path / "config", ["something-else"])
    access = KubeAccess(kubeconfig=config)
    with pytest.raises(KubeUnreachable):
        access.for_cluster(clusters["azure"])
    _kubeconfig(config, ["something-else", "ml-aks"])  # `az aks get-credentials` adds the context
    assert access.contexts() == ["something-else", "ml-aks"]
    with access.for_cluster(clusters["azure"]) as kube:
        assert kube.context == "ml-aks"


def test_a_server_that_drops_every_connection_is_tried_twice_then_reported(tmp_path: Path):
    """One more try at a dropped connection (a kept-alive one the server closed), no more: each
    try past it could cost a connect timeout."""
    accepted = []
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen(16)

        def drop_each() -> None:
            while True:
                try:
                    connection, _ = server.accept()
                except OSError:  # closed: the test is over
                    return
                accepted.append(1)
                connection.close()

        threading.Thread(target=drop_each, daemon=True).start()
        path = _kubeconfig(tmp_path / "config", ["dropping"])
        text = path.read_text(encoding="utf-8").replace("127.0.0.1:9", f"127.0.0.1:{server.getsockname()[1]}")
        path.write_text(text, encoding="utf-8")
        with (
            pytest.raises(KubeUnreachable, match="dropping"),
            KubeAccess(kubeconfig=path).connect("dropping", "dropping") as kube,
        ):
            kube.nodes()
    assert len(accepted) == 2


def test_at_once_makes_the_calls_together_and_raises_the_first_call_s_error():
    together = threading.Barrier(3, timeout=30)  # broken unless all three calls wait at once

    def call(n: int) -> int:
        together.wait()
        return n

    assert at_once(*(functools.partial(call, n) for n in range(3))) == [0, 1, 2]

    second_failed = threading.Event()

    def first() -> None:
        second_failed.wait(timeout=30)  # fails after the second call has failed
        raise KubeUnreachable("first")

    def second() -> None:
        second_failed.set()
        raise KubeUnreachable("second")

    with pytest.raises(KubeUnreachable, match=r"^first$"):  # as if they had run one after another
        at_once(first, second)


def _one_context(path: Path) -> Path:
    """Context `ok`: cluster `c`, user `u` with the token `old`."""
    return _write(
        path,
        {
            "clusters": [{"name": "c", "cluster": {"server": "http://c.example"}}],
            "users": [{"name": "u", "user": {"token": "old"}}],
            "contexts": [{"name": "ok", "context": {"cluster": "c", "user": "u"}}],
            "current-context": "ok",
        },
    )


def _write(path: Path, document: dict) -> Path:
    with path.open("w", encoding="utf-8") as out:
        YAML(typ="safe", pure=True).dump({"apiVersion": "v1", "kind": "Config", **document}, out)
    return path
