"""contrib/kubernetes: the exporter's DaemonSet, Service and ServiceMonitor.

Each Kubernetes object is checked against the API's own schema by kubernetes-validate
(strict: an unknown or misspelt field fails), for the oldest and the newest Kubernetes it
ships; the ServiceMonitor against the prometheus-operator CRD's schema as the models
generated from it (cloudcoil-models-prometheus-operator) hold it, strictly, and with no
field dropped on the way; the container's command line against ``gputop export --help``.
"""

from __future__ import annotations

import copy
import re
import subprocess
import sys
from importlib.metadata import version
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import missing

ROOT = Path(__file__).resolve().parents[2]
KUBE = ROOT / "contrib" / "kubernetes"
NAMESPACE = "gputop"


def _objects() -> dict[str, dict[str, Any]]:
    """Every object of every manifest, by kind (each kind once)."""
    try:
        import yaml
    except ImportError:
        missing("PyYAML is not installed (pip install -e '.[test]')")
    found: dict[str, dict[str, Any]] = {}
    for path in sorted(KUBE.glob("*.yaml")):
        for doc in yaml.safe_load_all(path.read_text()):
            assert doc["kind"] not in found, (path, doc["kind"])
            found[doc["kind"]] = doc
    return found


@pytest.fixture(scope="module")
def objects() -> dict[str, dict[str, Any]]:
    return _objects()


def _pod(objects: dict[str, dict[str, Any]]) -> dict[str, Any]:
    spec: dict[str, Any] = objects["DaemonSet"]["spec"]["template"]["spec"]
    return spec


def _container(objects: dict[str, dict[str, Any]]) -> dict[str, Any]:
    (container,) = _pod(objects)["containers"]
    return dict(container)


def test_the_manifests_are_a_namespace_daemonset_service_and_servicemonitor(
    objects: dict[str, dict[str, Any]],
) -> None:
    assert sorted(objects) == ["DaemonSet", "Namespace", "Service", "ServiceMonitor"]
    assert objects["Namespace"]["metadata"]["name"] == NAMESPACE
    for kind in ("DaemonSet", "Service", "ServiceMonitor"):
        assert objects[kind]["metadata"]["namespace"] == NAMESPACE, kind


def _validate() -> Any:
    try:
        import kubernetes_validate
        from kubernetes_validate import utils
    except ImportError:
        missing("kubernetes-validate is not installed (pip install -e '.[test]')")
    return kubernetes_validate.validate, utils


def test_kubernetes_objects_match_the_api_schema(objects: dict[str, dict[str, Any]]) -> None:
    validate, utils = _validate()
    for k8s in (utils.all_versions()[0], utils.latest_version()):
        for kind in ("Namespace", "DaemonSet", "Service"):
            validate(objects[kind], k8s, strict=True)


def test_the_api_schema_check_catches_a_misspelt_field(
    objects: dict[str, dict[str, Any]],
) -> None:
    validate, utils = _validate()
    bad = copy.deepcopy(objects["DaemonSet"])
    bad["spec"]["template"]["spec"]["hostPid"] = True
    with pytest.raises(utils.ValidationError, match="hostPid"):
        validate(bad, utils.latest_version(), strict=True)


def _service_monitor() -> Any:
    try:
        from cloudcoil.models.prometheus_operator.v1 import ServiceMonitor
    except ImportError:
        missing("cloudcoil-models-prometheus-operator is not installed (pip install -e '.[test]')")
    return ServiceMonitor


def _crd_round_trip(doc: dict[str, Any]) -> dict[str, Any]:
    """``doc`` validated strictly by the CRD's models and written back: a field the CRD
    does not know is dropped (pydantic ignores it), so it differs from ``doc``."""
    model = _service_monitor().model_validate(doc, strict=True)
    out: dict[str, Any] = model.model_dump(mode="json", by_alias=True, exclude_unset=True)
    return out


def test_the_servicemonitor_matches_the_prometheus_operator_crd(
    objects: dict[str, dict[str, Any]],
) -> None:
    doc = objects["ServiceMonitor"]
    assert doc["apiVersion"] == "monitoring.coreos.com/v1"
    assert _crd_round_trip(doc) == doc


def test_the_crd_check_catches_a_misspelt_field_and_a_bad_interval(
    objects: dict[str, dict[str, Any]],
) -> None:
    _service_monitor()  # installed (or missing()) before pydantic is imported
    from pydantic import ValidationError

    bad = copy.deepcopy(objects["ServiceMonitor"])
    bad["spec"]["endpoints"][0]["honourLabels"] = True
    assert _crd_round_trip(bad) != bad
    bad = copy.deepcopy(objects["ServiceMonitor"])
    bad["spec"]["endpoints"][0]["interval"] = "15 seconds"
    with pytest.raises(ValidationError, match="interval"):
        _crd_round_trip(bad)


def test_the_container_runs_gputop_export_with_flags_it_has(
    objects: dict[str, dict[str, Any]],
) -> None:
    from gputop.exporter import build_parser

    container = _container(objects)
    assert container["command"] == ["gputop"]
    args = container["args"]
    assert args[0] == "export"
    help_text = subprocess.run(
        [sys.executable, "-m", "gputop", "export", "--help"],
        capture_output=True, text=True, timeout=60, check=True,
    ).stdout  # fmt: skip
    offered = set(re.findall(r"(?<![\w-])--[a-z][a-z-]*", help_text))
    passed = [a.split("=", 1)[0] for a in args[1:] if a.startswith("--")]
    assert passed and set(passed) <= offered, (passed, offered)
    parsed = build_parser().parse_args(args[1:])
    assert parsed.jobs
    # every IPv4 interface of the pod, on the port the Service targets
    (port,) = container["ports"]
    assert parsed.listen == ("0.0.0.0", port["containerPort"])


def test_the_daemonset_sees_host_processes_and_pod_names_without_privileges(
    objects: dict[str, dict[str, Any]],
) -> None:
    pod, container = _pod(objects), _container(objects)
    assert pod["hostPID"] is True
    assert pod["nodeSelector"]
    assert pod["securityContext"]["runAsNonRoot"] is True
    assert container["securityContext"]["allowPrivilegeEscalation"] is False
    assert container["securityContext"]["capabilities"]["drop"] == ["ALL"]
    assert "privileged" not in container["securityContext"]
    assert {"cpu", "memory"} <= set(container["resources"]["requests"])
    # no GPU taken from the workloads: the devices come through the container toolkit
    assert not any("nvidia.com" in r for r in container["resources"].get("limits", {}))
    env = {e["name"]: e["value"] for e in container["env"]}
    assert env["NVIDIA_VISIBLE_DEVICES"] == "all"
    (logs,) = [v for v in pod["volumes"] if v.get("hostPath", {}).get("path") == "/var/log/pods"]
    (mount,) = [m for m in container["volumeMounts"] if m["name"] == logs["name"]]
    assert mount == {"name": logs["name"], "mountPath": "/var/log/pods", "readOnly": True}


def test_the_service_and_servicemonitor_reach_the_daemonsets_port(
    objects: dict[str, dict[str, Any]],
) -> None:
    pod_labels = objects["DaemonSet"]["spec"]["template"]["metadata"]["labels"]
    service, monitor = objects["Service"], objects["ServiceMonitor"]
    assert service["spec"]["selector"].items() <= pod_labels.items()
    assert (
        monitor["spec"]["selector"]["matchLabels"].items() <= service["metadata"]["labels"].items()
    )
    (container_port,) = _container(objects)["ports"]
    (service_port,) = service["spec"]["ports"]
    assert service_port["targetPort"] == container_port["name"]
    assert [e["port"] for e in monitor["spec"]["endpoints"]] == [service_port["name"]]


def test_the_image_is_built_here_and_tagged_with_this_version(
    objects: dict[str, dict[str, Any]],
) -> None:
    dockerfile = (KUBE / "Dockerfile").read_text()
    image = _container(objects)["image"]
    assert image.endswith(":" + version("gputop-dashboard")), image
    assert f"-t {image} ." in dockerfile  # the build command its header shows
    assert f"-t {image} ." in (ROOT / "docs" / "exporter.md").read_text()  # and the docs
    assert re.search(r"^USER 65534", dockerfile, re.MULTILINE)
    assert re.search(r'^ENTRYPOINT \["gputop"\]', dockerfile, re.MULTILINE)
