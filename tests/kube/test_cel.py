"""The sandbox's CEL evaluator over devices as the NVIDIA DRA driver publishes them."""

from __future__ import annotations

import pytest

from provisioner.sandbox.kube.cel import CompileError, EvaluationError, Unsupported, compile_selector
from tests.kube.dradevices import DRIVER, gpu, mig

GPU, MIG = gpu(0), mig(1, "1g.5gb", 0)
ATTRS = f"device.attributes['{DRIVER}']"


def matches(expression: str, device: dict) -> bool:
    return compile_selector(expression).matches(DRIVER, device)


@pytest.mark.parametrize(
    ("expression", "on_gpu", "on_mig"),
    [
        (f"device.driver == '{DRIVER}' && {ATTRS}.type == 'gpu'", True, False),
        (f"{ATTRS}.type == 'mig' && {ATTRS}.profile == '1g.5gb'", False, True),
        (f"'profile' in {ATTRS}", False, True),
        (f"has({ATTRS}.parentUUID)", False, True),
        (f"!has({ATTRS}.parentUUID)", True, False),
        (f'device.attributes["{DRIVER}"]["productName"] == "NVIDIA A100-SXM4-40GB"', True, True),
        (f"{ATTRS}.type in ['gpu', 'vfio']", True, False),
        (f"device.capacity['{DRIVER}'].memory.compareTo(quantity('10Gi')) >= 0", True, False),
        (f"device.capacity['{DRIVER}'].memory.isLessThan(quantity('5Gi'))", False, True),
        (f"device.capacity['{DRIVER}'].memory == quantity('40960Mi')", True, False),
        (f"{ATTRS}.cudaComputeCapability.isGreaterThan(semver('7.5.0'))", True, True),
        (f"{ATTRS}.cudaComputeCapability == semver('8.0.0')", True, True),
        (f"{ATTRS}.driverVersion.major() >= 570", True, True),
        ("'pciBusID' in device.attributes['resource.kubernetes.io']", True, False),
        (
            f"cel.bind(nv, {ATTRS}, nv.type == 'mig' ? nv.profile == '1g.5gb' "
            ": nv.productName.contains('A100'))",
            True,
            True,
        ),
        ("'x' in device.attributes['other.example.com']", False, False),
        (f"{ATTRS}.type == 'gpu' || {ATTRS}.profile == '7g.40gb'", True, False),
    ],
)
def test_selectors_on_full_gpus_and_mig_devices(expression: str, on_gpu: bool, on_mig: bool) -> None:
    assert (matches(expression, GPU), matches(expression, MIG)) == (on_gpu, on_mig)


def test_a_missing_attribute_is_a_runtime_error_unless_the_other_side_decides() -> None:
    profile = f"{ATTRS}.profile == '1g.5gb'"
    with pytest.raises(EvaluationError, match=r"^no such key: profile$"):
        matches(profile, GPU)
    # && and || are commutative over errors: false && error is false, true || error true.
    assert matches(f"{profile} && {ATTRS}.type == 'mig'", GPU) is False
    assert matches(f"{profile} || {ATTRS}.type == 'gpu'", GPU) is True
    with pytest.raises(EvaluationError, match="no such key: profile"):
        matches(f"{profile} || {ATTRS}.type == 'mig'", GPU)


def test_an_unknown_domain_reads_as_an_empty_map() -> None:
    with pytest.raises(EvaluationError, match="no such key: uuid"):
        matches("device.attributes['other.example.com'].uuid == 'x'", GPU)


def test_unqualified_and_qualified_names_share_the_drivers_domain() -> None:
    device = {"name": "d", "attributes": {f"{DRIVER}/type": {"string": "gpu"}, "model": {"int": 7}}}
    assert matches(f"{ATTRS}.type == 'gpu' && {ATTRS}.model > 6", device)


def test_equality_across_types_is_false_and_ordering_is_an_overload_error() -> None:
    assert matches(f"{ATTRS}.uuid == 3", GPU) is False
    with pytest.raises(EvaluationError, match=r"no such overload: _<_\(string, int\)"):
        matches(f"{ATTRS}.uuid < 3", GPU)


@pytest.mark.parametrize(
    ("expression", "message"),
    [
        ("device.driver", "must evaluate to bool or the unknown type, not string"),
        ("device.driver == 1", "found no matching overload for '_==_' applied to '(string, int)'"),
        ("device.model == 'x'", "undefined field 'model'"),
        ("gpu.type == 'x'", "undeclared reference to 'gpu'"),
        ("(device.driver == 'x'", "Syntax error: mismatched input '<EOF>' expecting ')'"),
        (f"device.capacity['{DRIVER}'].memory > quantity('1Gi')", "found no matching overload for '_>_'"),
        ("device.driver == 'a' && 'b'", "found no matching overload for '_&&_'"),
        ("", "the expression is empty"),
    ],
)
def test_what_the_api_servers_compiler_rejects(expression: str, message: str) -> None:
    with pytest.raises(CompileError) as raised:
        compile_selector(expression)
    assert message in str(raised.value)


@pytest.mark.parametrize(
    ("expression", "what"),
    [
        (f"{ATTRS}.profile.matches('^1g')", "the function 'matches'"),
        (f"device.capacity['{DRIVER}'].multiprocessors.asInteger() + 1 > 2", "arithmetic ('+')"),
        (f"{ATTRS}.?profile.orValue('') == ''", "optional field selection"),
        ("{'a': 1}.size() == 1", "map literals"),
        ("device.attributes.exists(d, d == 'x')", "the function 'exists'"),
    ],
)
def test_what_the_sandbox_does_not_evaluate_is_said_not_guessed(expression: str, what: str) -> None:
    with pytest.raises(Unsupported) as raised:
        compile_selector(expression)
    assert f"the sandbox does not evaluate {what}" in str(raised.value)


def test_each_expression_is_parsed_once() -> None:
    expression = f"{ATTRS}.type == 'gpu' && device.driver != 'x'"
    assert compile_selector(expression) is compile_selector(expression)
    with pytest.raises(CompileError) as first:
        compile_selector("device.nothing == 1")
    with pytest.raises(CompileError) as second:
        compile_selector("device.nothing == 1")
    assert first.value is second.value


def test_a_malformed_version_attribute_fails_the_device() -> None:
    device = {"name": "d", "attributes": {"driverVersion": {"version": "570.158"}}}
    with pytest.raises(EvaluationError, match="semver"):
        matches("device.driver == 'x'", device)
