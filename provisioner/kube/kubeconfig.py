"""The kubeconfig, read once per command rather than once per cluster.

`kubernetes.config.new_client_from_config` parses and merges the whole file for every client it
makes; a 100-context kubeconfig costs tens of milliseconds of pure-Python YAML each time, more
than the cluster's own requests. Here the files are merged once, as the client merges them
(its KubeConfigMerger, first file wins per name), parsed as JSON where written so, else with
libyaml where PyYAML has it, and read again only when one of them changed on disk, so a
long-lived process sees edits. Each client is then made by the client's own KubeConfigLoader, so
contexts, credentials and errors are exactly the client's.

Clients share their connections: every client's urllib3 PoolManager keeps its pools in one
container for the process, where urllib3 keys each pool by its host and every TLS setting (CA,
client certificate, server name, proxy; urllib3's PoolKey). Contexts that reach one API server
with the same TLS settings (a gateway such as Rancher's, or the sandbox's, serving many clusters
under one host) then reuse each other's kept-alive connections rather than each making its own TLS
handshake, most of a small read's CPU, and send it no more than REQUESTS_PER_POOL at once.
Credentials are not part of a connection: a bearer token goes in each request's header. client-go
shares one transport per TLS configuration alike (kubernetes/client-go transport/cache.go,
tlsConfigKey: CA, client certificate and key, server name, insecure; no token, no host).
"""

from __future__ import annotations

import contextlib
import copy
import json
import os
import stat
import tempfile
import threading
from pathlib import Path
from typing import Any

import yaml
from kubernetes.client import ApiClient, Configuration
from kubernetes.config import ConfigException
from kubernetes.config.kube_config import (
    ENV_KUBECONFIG_PATH_SEPARATOR,
    ConfigNode,
    FileOrData,
    KubeConfigLoader,
    KubeConfigMerger,
)
from urllib3 import PoolManager, Retry

from provisioner.kubeyaml import GO_YAML_EXTRAS

# PyYAML's safe loader in C where it is built (same YAML, same types), else in Python.
_SAFE_LOADER: Any = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
_LISTS = ("clusters", "contexts", "users")  # merged by name across the files
# Requests in flight at once through one pool (one API server and its TLS settings: contexts with a
# client certificate each have a pool each), in this process; the others wait for a connection.
# Clusters behind one gateway (Rancher's, the sandbox's) share it: a sync's hundreds of reads at
# once opened as many TLS connections to it, and 4 shards of 3,000 clusters left half of them
# unread, each connection's handshake timed out (bench `fleet`). client-go sends all of a
# transport's requests over one HTTP/2 connection.
REQUESTS_PER_POOL = 32
# Pools kept, the least recently used dropped (its connections closed when no request holds them):
# a fleet's API servers read at once, so that a plan's reads of different servers do not evict
# each other's pools while they run.
POOLS_KEPT = 128


class _KubectlSafeDumper(yaml.SafeDumper):
    """PyYAML's safe dumper (YAML 1.1) quoting too what kubectl's go-yaml v2 reads as a boolean or
    a float beyond it (provisioner.kubeyaml): a context named `y` saved plain would make kubectl
    refuse the whole file (cannot unmarshal bool into a name)."""


for _tag, _pattern, _first in GO_YAML_EXTRAS:
    _KubectlSafeDumper.add_implicit_resolver(_tag, _pattern, list(_first))


def _dump(document: Any, out: Any) -> None:
    """`document` written as the client writes a kubeconfig, with kubectl's ambiguous names quoted."""
    yaml.dump(document, out, Dumper=_KubectlSafeDumper, default_flow_style=False)


def _document(text: str) -> Any:
    """A kubeconfig file's document. One written as JSON (`kubectl config view --raw --flatten -o
    json`, the sandbox's) is read by the json module: PyYAML builds a 3,000-context file's objects in Python,
    0.8 s of CPU here (3.4 MB), json.loads 0.01 s, the same document. JSON is YAML (kubectl reads
    both alike); a file that only looks like it (a YAML flow mapping) is read as YAML."""
    if text.lstrip().startswith("{"):
        with contextlib.suppress(ValueError):
            return json.loads(text)
    return yaml.load(text, Loader=_SAFE_LOADER)


class _Merger(KubeConfigMerger):
    """KubeConfigMerger reading each file by _document; the merge is the client's own."""

    def load_config(self, path: str) -> None:
        with Path(path).open() as f:
            config = _document(f.read())
        if config is None:
            raise ConfigException(f"Invalid kube-config. {path} file is empty")
        if not isinstance(config, dict):
            raise ConfigException(f"Invalid kube-config. {path} is not a mapping")
        if self.config_merged is None:
            rest = copy.deepcopy({k: v for k, v in config.items() if k not in _LISTS})
            self.config_merged = ConfigNode(path, {**rest, **{item: [] for item in _LISTS}}, path)
        for item in _LISTS:
            try:
                self._merge(item, config.get(item, []) or [], path)
            except (KeyError, TypeError):  # the client's merge reads a later entry's name unchecked
                raise ConfigException(
                    f"Invalid kube-config file. Expected all values in {path}/{item} list to have 'name' key"
                ) from None
        if "current-context" in config:
            self.config_merged.value["current-context"] = config["current-context"]
        self.config_files[path] = config

    def _merge(self, item: str, add_cfg: list[Any], path: str) -> None:
        """The client's merge (an entry whose name is already merged is skipped: first file wins),
        by a set of the names merged rather than a look over every entry for each one: the
        client's own is quadratic, 4 s for a 3,000-context kubeconfig. Where an entry is not a
        mapping named by a string (no name, a null, a number), the client's own way, and errors."""
        merged = self.config_merged.value[item]
        entries = [entry.value for entry in merged] + list(add_cfg)
        if not all(isinstance(e, dict) and isinstance(e.get("name"), str) for e in entries):
            super()._merge(item, add_cfg, path)
            return
        names = {entry.value["name"] for entry in merged}
        for new_item in add_cfg:
            if new_item["name"] not in names:
                names.add(new_item["name"])
                merged.append(ConfigNode(f"{path}/{new_item}", new_item, path))

    def save_config(self, path: str) -> None:
        """A refreshed credential saved as the client saves it, but whole or not at all where the
        file allows (_replace_whole), so the main process and a helper of provisioner.spread
        saving at once never leave it torn; the last save wins, and a credential it drops is
        refreshed again when next used. Where it cannot be replaced (a file bind-mounted alone,
        a directory not ours to write, an owner not ours to give), it is written in place, as
        the client writes it."""
        try:
            _replace_whole(Path(path).resolve(), self.config_files[path])
        except OSError:
            with Path(path).open("w") as out:
                _dump(self.config_files[path], out)


def _replace_whole(target: Path, document: Any) -> None:
    """`document` written beside `target`, with its owner and mode, and renamed over it."""
    kept = target.stat()
    handle, name = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.")  # 0600 from the start
    temporary = Path(name)
    try:
        with os.fdopen(handle, "w") as out:
            _dump(document, out)
            out.flush()
            os.fsync(out.fileno())
        os.chown(temporary, kept.st_uid, kept.st_gid)  # sudo saving a user's file leaves it theirs
        temporary.chmod(stat.S_IMODE(kept.st_mode))
        temporary.replace(target)
    except BaseException:
        temporary.unlink(missing_ok=True)
        raise


def _paths(config_file: str) -> list[str]:
    """The files `config_file` names, as the client splits and expands them."""
    return [str(Path(p).expanduser()) for p in config_file.split(ENV_KUBECONFIG_PATH_SEPARATOR) if p]


def _stamp(config_file: str) -> tuple[tuple[str, int, int, int] | None, ...]:
    """What changes when a file of the kubeconfig is written, replaced, created or removed."""
    stamps = []
    for path in _paths(config_file):
        try:
            info = Path(path).stat()
        except OSError:
            stamps.append(None)
            continue
        stamps.append((path, info.st_ino, info.st_mtime_ns, info.st_size))
    return tuple(stamps)


def _by_name(merger: _Merger) -> dict[str, dict[str, ConfigNode]] | None:
    """Per list (contexts, clusters, users), each entry by its name; None unless every entry is
    a mapping named by a string (the client then looks over the whole file, and fails or not
    as it does: a null name is a missing one to it, a number a name like any other)."""
    index: dict[str, dict[str, ConfigNode]] = {}
    for item in _LISTS:
        entries = merger.config.value[item]
        if not all(isinstance(e.value, dict) and isinstance(e.value.get("name"), str) for e in entries):
            return None
        index[item] = {entry.value["name"]: entry for entry in entries}  # the merge kept one per name
    return index


class Kubeconfig:
    """One kubeconfig (a path, or several joined as $KUBECONFIG joins them), merged once and
    shared by every client made from it; thread-safe."""

    def __init__(self, config_file: str):
        self.config_file = config_file
        self._lock = threading.Lock()
        self._stamp: tuple[Any, ...] | None = None
        self._merger: _Merger | None = None
        self._index: dict[str, dict[str, ConfigNode]] | None = None

    def _merged(self) -> tuple[_Merger, dict[str, dict[str, ConfigNode]] | None]:
        stamp = _stamp(self.config_file)
        with self._lock:
            if self._merger is None or stamp != self._stamp:
                self._merger, self._stamp = _Merger(self.config_file), stamp
                self._index = _by_name(self._merger) if self._merger.config is not None else None
            return self._merger, self._index

    def loader(self, context: str | None = None) -> KubeConfigLoader:
        """The client's loader for `context` (None: the current context); ConfigException,
        OSError or ValueError as the client raises them."""
        merger, index = self._merged()
        if merger.config is None:  # as kubernetes.config does when no file exists
            raise ConfigException("Invalid kube-config file. No configuration found.")
        # Credentials a loader refreshes (gcp, oidc) are written back, as new_client_from_config does.
        # Loaders share the parsed file: a copy each costs what the one read saves. Only those two
        # legacy auth providers write into it (the clouds' CLIs now write exec plugins, which do not).
        narrowed = _narrowed(merger.config, index, context)
        if narrowed is not merger.config:
            _inline_files_written(narrowed)
        return KubeConfigLoader(
            config_dict=narrowed,
            active_context=context,
            config_base_path=None,
            config_persister=lambda: self._save(merger),
        )

    def _save(self, merger: _Merger) -> None:
        with self._lock:
            merger.save_changes()

    def contexts(self) -> list[str]:
        return [c["name"] for c in self.loader().list_contexts()]

    def client(self, context: str) -> ApiClient:
        """A client for `context`, its settings as new_client_from_config makes them, its
        connections shared (at most REQUESTS_PER_POOL in use at once) and retried once."""
        configuration = type.__call__(Configuration)  # the client's way to skip copying the default
        self.loader(context).load_and_set(configuration)
        configuration.connection_pool_maxsize = REQUESTS_PER_POOL
        configuration.retries = _ONE_RETRY
        api = ApiClient(configuration=configuration)
        manager = getattr(api.rest_client, "pool_manager", None)
        if isinstance(manager, PoolManager):  # ProxyManager too: urllib3 keys its pools by the proxy
            manager.pools = _CONNECTIONS.pools
            manager.connection_pool_kw["block"] = True  # past REQUESTS_PER_POOL, wait for one
        return api


class _SharedPools:
    """This process's urllib3 pools, an LRU by urllib3's PoolKey, made as a PoolManager makes its
    own; every client's PoolManager keeps its pools here."""

    def __init__(self) -> None:
        self.forget()

    def forget(self) -> None:
        """Start with no pools; in a forked child (provisioner.spread's helpers), so that it opens
        its own: the parent's connections are the parent's, and their lock may be copied held."""
        self.pools: Any = PoolManager(num_pools=POOLS_KEPT).pools
        # A pool evicted is dropped, not closed, as urllib3 2 does (1.26 closed it): a request on
        # another thread may still be using it, and would fail on a closed pool.
        self.pools.dispose_func = None


_CONNECTIONS = _SharedPools()
# One more try at a dropped connection; no answer is no answer (urllib3's default is 3, each a
# connect timeout more). One object for every client: urllib3 keys a pool by its Retry, which
# compares by identity, so a number would give each client a Retry and a pool of its own.
_ONE_RETRY = Retry(1)
os.register_at_fork(after_in_child=_CONNECTIONS.forget)


def _narrowed(
    config: ConfigNode, index: dict[str, dict[str, ConfigNode]] | None, context: str | None
) -> ConfigNode:
    """The kubeconfig as the loader of `context` needs it: that context, its cluster and its user,
    the very entries of the whole file (a refreshed credential is saved with it). The client looks
    each name up by walking its list, so a loader per context of a 100-context file would walk
    them all each time. Where the context, its cluster or its user is not found here, the whole
    file: the client's own lookup then says what is wrong, or finds what this did not."""
    entry = index["contexts"].get(context) if index is not None and context is not None else None
    spec = entry.value.get("context") if entry is not None else None
    if not isinstance(spec, dict):
        return config
    assert index is not None
    cluster_name, user_name = spec.get("cluster"), spec.get("user")
    cluster = index["clusters"].get(cluster_name) if isinstance(cluster_name, str) else None
    user = index["users"].get(user_name) if isinstance(user_name, str) else None
    if cluster is None or (user_name and user is None):
        return config
    value = {
        **config.value,
        "contexts": [entry],
        "clusters": [cluster],
        "users": [user] if user is not None else [],
    }
    return ConfigNode(config.name, value, config.path)


# What a loader writes to a temporary file when the kubeconfig holds it inline, by the list, the
# entry's key and the field (kube_config.KubeConfigLoader._load_cluster_info, for https servers).
_INLINE_FILES = (
    ("clusters", "cluster", "certificate-authority"),
    ("users", "user", "client-certificate"),
    ("users", "user", "client-key"),
)
_WRITING_FILES = threading.Lock()


def _inline_files_written(narrowed: ConfigNode) -> None:
    """The CA, client certificate and key a context's entries hold inline, each written to its
    temporary file by the client's own FileOrData, one thread at a time, before its loader
    needs them. The client keeps one file per content but takes no lock: loaders made at once
    each wrote one (all but the last left behind in the temporary directory), one could read a
    file another had named but not yet written, and clients of one CA named different files, so
    urllib3 kept a pool for each and they shared no connection."""
    cluster = narrowed.value["clusters"][0].value.get("cluster")
    if not isinstance(cluster, dict) or not str(cluster.get("server", "")).startswith("https"):
        return  # the loader writes no file for it
    with _WRITING_FILES:
        for item, key, field in _INLINE_FILES:
            for entry in narrowed.value[item]:
                spec = entry.value.get(key)
                if isinstance(spec, dict) and spec.get(f"{field}-data"):
                    FileOrData(spec, field).as_file()


_SHARED: dict[str, Kubeconfig] = {}
_SHARING = threading.Lock()


def shared(config_file: str) -> Kubeconfig:
    """The process's one Kubeconfig for `config_file` (it reads its files again when they change)."""
    with _SHARING:
        if config_file not in _SHARED:
            _SHARED[config_file] = Kubeconfig(config_file)
        return _SHARED[config_file]
