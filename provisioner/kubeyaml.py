"""YAML written for kubectl: strings that kubectl's YAML reads as something else come out quoted.

kubectl decodes YAML with go-yaml v2 (sigs.k8s.io/yaml), which keeps YAML 1.1's implicit types:
`no`, `on`, `off`, `yes`, and also `y`, `Y`, `n`, `N`, are booleans, `1e3` a float, `010` an
octal. ruamel writes YAML 1.2, where these are plain strings, so a node label `spot: "no"` from
the fleet came out as `spot: no`: kubectl sends a pod's nodeSelector as `false`, and refuses a
ConfigMap labelled so ("cannot unmarshal bool into Go struct field ObjectMeta.metadata.labels").
Sources and what was seen: docs/FACTS.md.
"""

from __future__ import annotations

import re
from typing import Any

from ruamel.yaml import YAML
from ruamel.yaml.resolver import VersionedResolver

# Forms go-yaml v2 resolves that YAML 1.1's own rules (as ruamel and PyYAML have them) do not.
GO_YAML_EXTRAS = (
    ("tag:yaml.org,2002:bool", re.compile(r"^(?:y|Y|n|N)$"), "yYnN"),
    ("tag:yaml.org,2002:float", re.compile(r"^[-+]?[0-9]+[eE][-+]?[0-9]+$"), "-+0123456789"),
)


class KubectlResolver(VersionedResolver):
    """Resolves, when writing, as kubectl reads: YAML 1.1 and go-yaml v2's extras. A string one of
    these rules would read as another type is written quoted; no `%YAML` directive is written."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        rules = self.versioned_resolver  # YAML 1.1's, loaded now, before the extras go in
        for tag, pattern, first in GO_YAML_EXTRAS:
            for character in first:
                rules.setdefault(character, []).append((tag, pattern))

    @property
    def processing_version(self) -> Any:
        return (1, 1)


def for_kubectl(yaml: YAML) -> YAML:
    """`yaml`, now writing strings as kubectl reads them; use it to dump, not to load."""
    yaml.Resolver = KubectlResolver
    return yaml
