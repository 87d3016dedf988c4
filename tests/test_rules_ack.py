"""ACK's rules: cGPU memory sharing, ACK Edge pools, and what ACK does not offer, each refused
with what to use instead (exact file:line: path: message, as tests/test_rules.py does)."""

from __future__ import annotations

import pytest

from provisioner.compile import compile_file
from tests.test_rules import problems

ACK_HEADER = """\
clusters:
  - name: ali-ml
    cloud: ack
    region: cn-hangzhou
    clusterId: c0123456789abcdef0123456789abcdef
    vswitches: [vsw-bp1a2b3c4d5e6f7g8h9i0]
    pools:
"""
A10 = "ecs.gn7i-c8g1.2xlarge"

# (pools YAML indented as list items, expected problems). Pools start on line 8.
CASES = {
    "time-slicing": (
        f"- {{name: ts, instanceType: {A10}, gpu: {{sharing: time-slicing, replicas: 4}}, "
        "nodes: {count: 1}}",
        [
            "8: clusters[ali-ml].pools[ts].gpu.sharing: ACK does not offer time-slicing: time-slicing "
            "through the NVIDIA device plugin is not ACK's way to share GPUs; use sharing: memory "
            "(pods request aliyun.com/gpu-mem in GiB)"
        ],
    ),
    "mps": (
        f"- {{name: mps, instanceType: {A10}, gpu: {{sharing: mps, replicas: 4}}, nodes: {{count: 1}}}}",
        [
            "8: clusters[ali-ml].pools[mps].gpu.sharing: ACK does not offer mps: ACK's documentation "
            "does not say how pods request its MPS mode; use sharing: memory with isolation: compute "
            "(cGPU core_mem)"
        ],
    ),
    "mig": (
        "- {name: mig, instanceType: ecs.gn7-c12g1.3xlarge, gpu: {mig: 1g.5gb}, nodes: {count: 1}}",
        [
            "8: clusters[ali-ml].pools[mig].gpu.mig: MIG is not offered on ACK: ACK's documentation "
            "does not say how pods request MIG slices there; use sharing: memory with isolation: "
            "compute (cGPU core_mem) for isolated fractions"
        ],
    ),
    "memory without isolation": (
        f"- {{name: m, instanceType: {A10}, gpu: {{sharing: memory}}, nodes: {{count: 1}}}}",
        [
            "8: clusters[ali-ml].pools[m].gpu: sharing: memory needs isolation: none, memory or compute "
            "(what is enforced)"
        ],
    ),
    "isolation without memory sharing": (
        f"- {{name: m, instanceType: {A10}, gpu: {{isolation: memory}}, nodes: {{count: 1}}}}",
        ["8: clusters[ali-ml].pools[m].gpu: isolation and placement apply only with sharing: memory"],
    ),
    "edge pool isolating memory": (
        "- {name: edge, edge: true, gpu: {model: T4, count: 1, sharing: memory, isolation: memory}}",
        [
            "8: clusters[ali-ml].pools[edge].gpu.isolation: ACK edge pools share GPUs by scheduling "
            "only and isolate no memory; use isolation: none (or a cloud pool to isolate)"
        ],
    ),
    "edge pool with a cloud pool's fields": (
        f"- {{name: edge, edge: true, instanceType: {A10}, nodes: {{count: 1}}, spot: true, "
        "gpu: {model: T4, count: 1}}",
        [
            "8: clusters[ali-ml].pools[edge].instanceType: an edge pool's nodes are your own machines, "
            "which join it themselves: name their GPU with gpu.model and gpu.count; remove instanceType",
            "8: clusters[ali-ml].pools[edge].nodes: an edge pool's nodes are your own machines, which "
            "join it themselves: the tool neither scales nor counts them; remove nodes",
            "8: clusters[ali-ml].pools[edge].spot: an edge pool's nodes are your own machines, which "
            "join it themselves: they are not the cloud's instances; remove spot",
        ],
    ),
    "edge pool without its GPU": (
        "- {name: edge, edge: true}",
        [
            "8: clusters[ali-ml].pools[edge].gpu: an edge pool names its machines' GPUs: set gpu.model "
            "(e.g. T4) and gpu.count"
        ],
    ),
    "edge pool naming two GPUs": (
        "- {name: edge, edge: true, gpu: {model: V100, count: 1}}",
        [
            "8: clusters[ali-ml].pools[edge].gpu.model: 'V100' names several GPUs; write one of: "
            "V100-16GB, V100-32GB"
        ],
    ),
    "cloud pool without instance type": (
        "- {name: gpu, nodes: {count: 1}}",
        [
            "8: clusters[ali-ml].pools[gpu].instanceType: is required (or edge: true for a pool of "
            "your own machines)"
        ],
    ),
    "more labels than an ACK pool holds beside the tool's markers": (
        f"- {{name: l, instanceType: {A10}, nodes: {{count: 1}}, labels: {{"
        + ", ".join(f"team-{i}: ml" for i in range(17))
        + "}}",
        [
            "8: clusters[ali-ml].pools[l].labels: 19 labels (2 set by provisioner); ACK allows at most 18",
        ],
    ),
    "a pool name that is no label value": (
        f"- {{name: 推理-gpu, instanceType: {A10}, nodes: {{count: 1}}}}",
        [
            "8: clusters[ali-ml].pools[推理-gpu].name: '推理-gpu' cannot be the value of the node label "
            "provisioner.io/pool, which names the pool on its nodes: letters, digits, '-', '_' and '.', "
            "beginning and ending with a letter or digit"
        ],
    ),
    "labels the tool sets": (
        f"- {{name: l, instanceType: {A10}, nodes: {{count: 1}}, "
        "labels: {ack.node.gpu.schedule: cgpu, provisioner.io/managed-by: me}}",
        [
            '8: clusters[ali-ml].pools[l].labels["ack.node.gpu.schedule"]: ack.node.gpu.schedule is '
            "set by provisioner from gpu.sharing; remove it from labels",
            '8: clusters[ali-ml].pools[l].labels["provisioner.io/managed-by"]: '
            "provisioner.io/managed-by marks the pools provisioner owns; remove it from labels",
        ],
    ),
}


@pytest.mark.parametrize("name", CASES)
def test_ack_rule(name, fleet_file):
    pools, expected = CASES[name]
    assert problems(fleet_file(ACK_HEADER + "      " + pools + "\n")) == expected


def test_memory_sharing_and_edge_pools_elsewhere_are_refused_with_what_to_use(pool_file):
    path = pool_file(
        "aks",
        """\
        - {name: t4, instanceType: Standard_NC4as_T4_v3, gpu: {sharing: memory, isolation: memory},
           nodes: {count: 1}}
        - {name: edge, edge: true, gpu: {model: T4, count: 1}}
        """,
    )
    assert problems(path) == [
        "8: clusters[azure-ml].pools[t4].gpu.sharing: AKS does not offer memory: it has no managed "
        "memory-based GPU sharing; use sharing: time-slicing or mps with replicas (clients per GPU), "
        "each client's memory a nominal share",
        "10: clusters[azure-ml].pools[edge].edge: AKS has no edge pools of your own machines; remove edge",
    ]


def test_the_issue_s_ack_fleet_compiles_to_cgpu_and_share_pools(fleet_file):
    path = fleet_file(
        ACK_HEADER
        + f"""\
      - name: a10-cgpu
        instanceType: {A10}
        gpu: {{sharing: memory, isolation: memory}}
        nodes: {{min: 0, max: 4}}
      - name: edge-t4
        edge: true
        gpu: {{model: T4, count: 1, sharing: memory, isolation: none, placement: spread}}
      - name: a10-whole
        instanceType: ecs.gn7i-c32g1.16xlarge
        nodes: {{count: 1}}
"""
    )
    cloud_pool, edge, whole = compile_file(path).clusters[0].pools
    assert (dict(cloud_pool.setup.labels), cloud_pool.setup.resource) == (
        {"ack.node.gpu.schedule": "cgpu", "provisioner.io/pool": "a10-cgpu"},
        "aliyun.com/gpu-mem",
    )
    assert (cloud_pool.setup.slices_per_node, cloud_pool.setup.slice_unit, cloud_pool.setup.isolation) == (
        22,
        "GiB",
        "memory",
    )
    assert dict(edge.setup.labels) == {
        "ack.node.gpu.schedule": "share",
        "ack.node.gpu.placement": "spread",
        "gpu.provisioner.io/model": "T4-16GB",
        "gpu.provisioner.io/count": "1",
        "provisioner.io/pool": "edge-t4",
    }
    assert (edge.setup.slices_per_node, edge.setup.isolation, edge.setup.instance_type) == (15, "none", None)
    assert (dict(whole.setup.labels), whole.setup.resource, whole.setup.slices_per_node) == (
        {"ack.node.gpu.schedule": "default", "provisioner.io/pool": "a10-whole"},
        "nvidia.com/gpu",
        2,
    )
    assert whole.setup.isolation == "hardware"


def test_ack_cluster_ids_and_vswitches_are_checked(fleet_file):
    path = fleet_file("""\
        clusters:
          - name: ali
            cloud: ack
            region: cn-hangzhou
            clusterId: c/0123
            vswitches: [subnet-0abc]
        """)
    assert problems(path) == [
        "5: clusters[ali].clusterId: 'c/0123' is not an ACK cluster ID (c and 32 hexadecimal digits)",
        "6: clusters[ali].vswitches[0]: 'subnet-0abc' is not a vSwitch ID (vsw-...)",
    ]
