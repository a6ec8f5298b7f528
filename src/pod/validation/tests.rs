//! Validation tables: one row per rule, each with the exact error the API
//! server would give. A row is a JSON merge patch over a small valid pod
//! (objects merge, lists are replaced), applied before API defaulting.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use serde_json::{json, Value};

use super::*;

/// The pod every row starts from: valid once defaulted.
fn base() -> Value {
    json!({
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "web", "namespace": "default"},
        "spec": {"containers": [{"name": "app", "image": "busybox"}]}
    })
}

fn merge(into: &mut Value, patch: &Value) {
    match (into, patch) {
        (Value::Object(a), Value::Object(b)) => {
            for (k, v) in b {
                merge(a.entry(k.clone()).or_insert(Value::Null), v);
            }
        }
        (slot, v) => *slot = v.clone(),
    }
}

/// The base pod with `patch` merged in, defaulted like every pod picolet runs.
fn pod(patch: &Value) -> Pod {
    let mut v = base();
    merge(&mut v, patch);
    let mut pod: Pod = serde_json::from_value(v).expect("a Pod");
    crate::pod::defaults::apply(&mut pod);
    pod
}

/// A patch replacing the one container with `app` plus `extra` fields.
fn container(extra: Value) -> Value {
    let mut c = json!({"name": "app", "image": "busybox"});
    merge(&mut c, &extra);
    json!({"spec": {"containers": [c]}})
}

fn errors(patch: &Value) -> Vec<String> {
    match validate_pod(&pod(patch)) {
        Ok(()) => Vec::new(),
        Err(errs) => errs.iter().map(ToString::to_string).collect(),
    }
}

const SUBDOMAIN_MSG: &str = "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')";
const LABEL_MSG: &str = "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')";
const KEY_NAME_MSG: &str = "name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')";

#[test]
fn a_small_valid_pod_passes() {
    assert_eq!(errors(&json!({})), Vec::<String>::new());
}

#[test]
fn a_realistic_pod_using_every_checked_field_passes() {
    let patch = json!({
        "metadata": {
            "labels": {"app": "web", "example.com/tier": "front_end-1"},
            "annotations": {"Example.COM/Note": "anything at all"}
        },
        "spec": {
            "terminationGracePeriodSeconds": 10,
            "hostname": "web-0",
            "dnsPolicy": "None",
            "dnsConfig": {"nameservers": ["10.0.0.10", "fd00::a"], "searches": ["svc.cluster.local."], "options": [{"name": "ndots", "value": "2"}]},
            "securityContext": {"runAsUser": 1000, "fsGroup": 2000, "supplementalGroups": [3000], "seccompProfile": {"type": "RuntimeDefault"}},
            "tolerations": [{"key": "node.kubernetes.io/unreachable", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 30}],
            "volumes": [
                {"name": "data", "emptyDir": {"sizeLimit": "64Mi"}},
                {"name": "host", "hostPath": {"path": "/var/lib/web", "type": "DirectoryOrCreate"}},
                {"name": "info", "downwardAPI": {"items": [{"path": "labels", "fieldRef": {"fieldPath": "metadata.labels"}}]}}
            ],
            "initContainers": [{"name": "init", "image": "busybox", "command": ["true"]}],
            "containers": [{
                "name": "app", "image": "registry.example.com/web:1.2",
                "ports": [{"name": "http", "containerPort": 8080}, {"containerPort": 9090, "protocol": "UDP"}],
                "env": [
                    {"name": "MY.ENV-1", "value": "x"},
                    {"name": "POD_IP", "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}}},
                    {"name": "TIER", "valueFrom": {"fieldRef": {"fieldPath": "metadata.labels['example.com/tier']"}}},
                    {"name": "MEM", "valueFrom": {"resourceFieldRef": {"resource": "limits.memory", "divisor": "1Mi"}}}
                ],
                "resources": {"requests": {"cpu": "250m", "memory": "64Mi"}, "limits": {"cpu": "1", "memory": "128Mi", "example.com/dongle": "1"}},
                "volumeMounts": [{"name": "data", "mountPath": "/data", "subPath": "web/cache"}, {"name": "host", "mountPath": "/host", "readOnly": true, "recursiveReadOnly": "IfPossible"}],
                "livenessProbe": {"httpGet": {"path": "/healthz", "port": "http", "httpHeaders": [{"name": "X-Probe", "value": "1"}]}, "periodSeconds": 5},
                "readinessProbe": {"tcpSocket": {"port": 8080}, "successThreshold": 2},
                "startupProbe": {"exec": {"command": ["true"]}, "failureThreshold": 30},
                "lifecycle": {"preStop": {"sleep": {"seconds": 5}}},
                "securityContext": {"allowPrivilegeEscalation": false, "readOnlyRootFilesystem": true, "capabilities": {"drop": ["ALL"]}}
            }]
        }
    });
    assert_eq!(errors(&patch), Vec::<String>::new());
}

/// (rule, patch, one error the API server gives for it).
type Row = (&'static str, Value, String);

/// Every table's rows.
fn rows() -> Vec<Row> {
    [
        metadata_rows(),
        pod_spec_rows(),
        container_rows(),
        resource_rows(),
        port_rows(),
        probe_and_handler_rows(),
        env_rows(),
        volume_and_mount_rows(),
        container_security_context_rows(),
    ]
    .concat()
}

/// The rows on metadata.
fn metadata_rows() -> Vec<Row> {
    let s = |x: &str| x.to_string();
    vec![
        ("pod name required", json!({"metadata": {"name": ""}}),
         s("metadata.name: Required value: name or generateName is required")),
        ("pod name is a DNS subdomain", json!({"metadata": {"name": "Web_Server"}}),
         format!("metadata.name: Invalid value: \"Web_Server\": {SUBDOMAIN_MSG}")),
        ("pod name at most 253 characters", json!({"metadata": {"name": "a".repeat(254)}}),
         format!("metadata.name: Invalid value: \"{}\": must be no more than 253 characters", "a".repeat(254))),
        ("namespace is a DNS label", json!({"metadata": {"namespace": "kube.system"}}),
         s("metadata.namespace: Invalid value: \"kube.system\": must not contain dots")),
        ("label keys are qualified names", json!({"metadata": {"labels": {"bad key": "x"}}}),
         format!("metadata.labels: Invalid value: \"bad key\": {KEY_NAME_MSG}")),
        ("label key prefixes are DNS subdomains", json!({"metadata": {"labels": {"Example.com/k": "x"}}}),
         format!("metadata.labels: Invalid value: \"Example.com/k\": prefix part {SUBDOMAIN_MSG}")),
        ("label values are at most 63 bytes", json!({"metadata": {"labels": {"k": "v".repeat(64)}}}),
         format!("metadata.labels: Invalid value: \"{}\": must be no more than 63 bytes", "v".repeat(64))),
        ("annotation keys are qualified names", json!({"metadata": {"annotations": {"a/b/c": "x"}}}),
         s("metadata.annotations: Invalid value: \"a/b/c\": a valid label key must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]') with an optional DNS subdomain prefix and '/' (e.g. 'example.com/MyName')")),
        ("annotations total at most 256 KiB", json!({"metadata": {"annotations": {"big": "x".repeat(256 * 1024)}}}),
         s("metadata.annotations: Too long: must have at most 262144 bytes")),
    ]
}

/// The rows on pod spec.
fn pod_spec_rows() -> Vec<Row> {
    let s = |x: &str| x.to_string();
    vec![
        ("grace period not negative", json!({"spec": {"terminationGracePeriodSeconds": -5}}),
         s("spec.terminationGracePeriodSeconds: Invalid value: -5: must be greater than or equal to 0")),
        ("restartPolicy values", json!({"spec": {"restartPolicy": "Sometimes"}}),
         s("spec.restartPolicy: Unsupported value: \"Sometimes\": supported values: \"Always\", \"OnFailure\", \"Never\"")),
        ("dnsPolicy values", json!({"spec": {"dnsPolicy": "Google"}}),
         s("spec.dnsPolicy: Unsupported value: \"Google\": supported values: \"ClusterFirstWithHostNet\", \"ClusterFirst\", \"Default\", \"None\"")),
        ("dnsPolicy None needs dnsConfig", json!({"spec": {"dnsPolicy": "None"}}),
         s("spec.dnsConfig: Required value: must provide `dnsConfig` when `dnsPolicy` is None")),
        ("dnsConfig nameservers are IPs", json!({"spec": {"dnsConfig": {"nameservers": ["dns.example"]}}}),
         s("spec.dnsConfig.nameservers[0]: Invalid value: \"dns.example\": must be a valid IP address, (e.g. 10.9.8.7 or 2001:db8::ffff)")),
        ("activeDeadlineSeconds positive", json!({"spec": {"activeDeadlineSeconds": 0}}),
         s("spec.activeDeadlineSeconds: Invalid value: 0: must be between 1 and 2147483647, inclusive")),
        ("hostname is a DNS label", json!({"spec": {"hostname": "Web"}}),
         format!("spec.hostname: Invalid value: \"Web\": {LABEL_MSG}")),
        ("nodeName is a DNS subdomain", json!({"spec": {"nodeName": "Edge-1"}}),
         format!("spec.nodeName: Invalid value: \"Edge-1\": {SUBDOMAIN_MSG}")),
        ("toleration with empty key needs Exists", json!({"spec": {"tolerations": [{"operator": "Equal", "value": "x"}]}}),
         s("spec.tolerations[0].operator: Invalid value: \"Equal\": operator must be Exists when `key` is empty, which means \"match all values and all keys\"")),
        ("toleration effects", json!({"spec": {"tolerations": [{"key": "k", "operator": "Exists", "effect": "Evict"}]}}),
         s("spec.tolerations[0].effect: Unsupported value: \"Evict\": supported values: \"NoSchedule\", \"PreferNoSchedule\", \"NoExecute\"")),
        ("pod securityContext ids in range", json!({"spec": {"securityContext": {"fsGroup": -1}}}),
         s("spec.securityContext.fsGroup: Invalid value: -1: must be between 0 and 4294967295, inclusive")),
        ("seccomp Localhost needs a profile", json!({"spec": {"securityContext": {"seccompProfile": {"type": "Localhost"}}}}),
         s("spec.securityContext.seccompProfile.localhostProfile: Required value: must be set when seccomp type is Localhost")),
        ("seccomp profile types", json!({"spec": {"securityContext": {"seccompProfile": {"type": "Strict"}}}}),
         s("spec.securityContext.seccompProfile.type: Unsupported value: \"Strict\": supported values: \"Localhost\", \"RuntimeDefault\", \"Unconfined\"")),
        ("pod-level resources are cpu and memory", json!({"spec": {"resources": {"limits": {"pids": "10"}}}}),
         s("spec.resources.limits[pids]: Unsupported value: \"pids\": supported values: \"cpu\", \"memory\"")),
        ("hostNetwork ports: hostPort = containerPort", json!({"spec": {"hostNetwork": true, "containers": [{"name": "app", "image": "busybox", "ports": [{"containerPort": 80, "hostPort": 8080}]}]}}),
         s("spec.containers[0].ports[0].hostPort: Invalid value: 8080: must match `containerPort` when `hostNetwork` is true")),
    ]
}

/// The rows on containers.
fn container_rows() -> Vec<Row> {
    let s = |x: &str| x.to_string();
    vec![
        ("at least one container", json!({"spec": {"containers": []}}),
         s("spec.containers: Required value")),
        ("container name is a DNS label", container(json!({"name": "App"})),
         format!("spec.containers[0].name: Invalid value: \"App\": {LABEL_MSG}")),
        ("a NUL in a container name", container(json!({"name": "a\u{0}b"})),
         format!("spec.containers[0].name: Invalid value: \"a\\x00b\": {LABEL_MSG}")),
        ("container names unique", json!({"spec": {"containers": [{"name": "app", "image": "a"}, {"name": "app", "image": "b"}]}}),
         s("spec.containers[1].name: Duplicate value: \"app\"")),
        ("container names unique across init and app", json!({"spec": {"initContainers": [{"name": "app", "image": "a"}]}}),
         s("spec.initContainers[0].name: Duplicate value: \"app\"")),
        ("image required", json!({"spec": {"containers": [{"name": "app"}]}}),
         s("spec.containers[0].image: Required value")),
        ("image without surrounding spaces", container(json!({"image": " busybox"})),
         s("spec.containers[0].image: Invalid value: \" busybox\": must not have leading or trailing whitespace")),
        ("imagePullPolicy values", container(json!({"imagePullPolicy": "Sometimes"})),
         s("spec.containers[0].imagePullPolicy: Unsupported value: \"Sometimes\": supported values: \"Always\", \"IfNotPresent\", \"Never\"")),
        ("terminationMessagePolicy values", container(json!({"terminationMessagePolicy": "Stdout"})),
         s("spec.containers[0].terminationMessagePolicy: Unsupported value: \"Stdout\": supported values: \"File\", \"FallbackToLogsOnError\"")),
        ("restartPolicy only on init containers", container(json!({"restartPolicy": "Always"})),
         s("spec.containers[0].restartPolicy: Forbidden: may not be set for non-init containers")),
        ("init container restartPolicy is Always", json!({"spec": {"initContainers": [{"name": "init", "image": "a", "restartPolicy": "Never"}]}}),
         s("spec.initContainers[0].restartPolicy: Unsupported value: \"Never\": supported values: \"Always\"")),
        ("init containers have no probes", json!({"spec": {"initContainers": [{"name": "init", "image": "a", "livenessProbe": {"exec": {"command": ["true"]}}}]}}),
         s("spec.initContainers[0].livenessProbe: Forbidden: may not be set for init containers without restartPolicy=Always")),
    ]
}

/// The rows on resources.
fn resource_rows() -> Vec<Row> {
    let s = |x: &str| x.to_string();
    vec![
        ("no negative quantities", container(json!({"resources": {"limits": {"memory": "-1Gi"}}})),
         s("spec.containers[0].resources.limits[memory]: Invalid value: \"-1Gi\": must be greater than or equal to 0")),
        ("no overflowing cpu", container(json!({"resources": {"limits": {"cpu": "1e400"}}})),
         s("spec.containers[0].resources.limits[cpu]: Invalid value: \"1e400\": must be less than or equal to 9223372036854775807m")),
        ("no overflowing memory", container(json!({"resources": {"requests": {"memory": "16Ei"}}})),
         s("spec.containers[0].resources.requests[memory]: Invalid value: \"16Ei\": must be less than or equal to 9223372036854775807")),
        ("quantities parse", container(json!({"resources": {"limits": {"memory": "lots"}}})),
         s("spec.containers[0].resources.limits[memory]: Invalid value: \"lots\": quantities must match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'")),
        ("requests at most limits", container(json!({"resources": {"requests": {"cpu": "2"}, "limits": {"cpu": "1"}}})),
         s("spec.containers[0].resources.requests: Invalid value: \"2\": must be less than or equal to cpu limit of 1")),
        ("pids is not a container resource", container(json!({"resources": {"limits": {"pids": "10"}}})),
         s("spec.containers[0].resources.limits[pids]: Invalid value: pids: must be a standard resource type or fully qualified")),
        ("only standard resources for containers", container(json!({"resources": {"limits": {"pods": "1"}}})),
         s("spec.containers[0].resources.limits[pods]: Invalid value: pods: must be a standard resource for containers")),
        ("extended resources are whole numbers", container(json!({"resources": {"limits": {"example.com/gpu": "1500m"}}})),
         s("spec.containers[0].resources.limits[example.com/gpu]: Invalid value: 1500m: must be an integer")),
        ("extended resources need a limit", container(json!({"resources": {"requests": {"example.com/gpu": "1"}}})),
         s("spec.containers[0].resources.limits: Required value: Limit must be set for non overcommitable resources")),
        ("extended resources: request equals limit", container(json!({"resources": {"requests": {"example.com/gpu": "1"}, "limits": {"example.com/gpu": "2"}}})),
         s("spec.containers[0].resources.requests: Invalid value: \"1\": must be equal to example.com/gpu limit of 2")),
    ]
}

/// The rows on ports.
fn port_rows() -> Vec<Row> {
    let s = |x: &str| x.to_string();
    vec![
        ("containerPort required", container(json!({"ports": [{"containerPort": 0}]})),
         s("spec.containers[0].ports[0].containerPort: Required value")),
        ("containerPort in range", container(json!({"ports": [{"containerPort": 70000}]})),
         s("spec.containers[0].ports[0].containerPort: Invalid value: 70000: must be between 1 and 65535, inclusive")),
        ("hostPort in range", container(json!({"ports": [{"containerPort": 80, "hostPort": -1}]})),
         s("spec.containers[0].ports[0].hostPort: Invalid value: -1: must be between 1 and 65535, inclusive")),
        ("port names are IANA service names", container(json!({"ports": [{"name": "web--1", "containerPort": 80}]})),
         s("spec.containers[0].ports[0].name: Invalid value: \"web--1\": must not contain consecutive hyphens")),
        ("port names unique", container(json!({"ports": [{"name": "http", "containerPort": 80}, {"name": "http", "containerPort": 81}]})),
         s("spec.containers[0].ports[1].name: Duplicate value: \"http\"")),
        ("port protocols", container(json!({"ports": [{"containerPort": 80, "protocol": "ICMP"}]})),
         s("spec.containers[0].ports[0].protocol: Unsupported value: \"ICMP\": supported values: \"SCTP\", \"TCP\", \"UDP\"")),
        ("host ports unique across containers", json!({"spec": {"containers": [
            {"name": "a", "image": "x", "ports": [{"containerPort": 80, "hostPort": 8080}]},
            {"name": "b", "image": "x", "ports": [{"containerPort": 81, "hostPort": 8080}]}]}}),
         s("spec.containers[1].ports[0].hostPort: Duplicate value: \"TCP//8080\"")),
    ]
}

/// The rows on probes and handlers.
fn probe_and_handler_rows() -> Vec<Row> {
    let s = |x: &str| x.to_string();
    vec![
        ("a probe needs a handler", container(json!({"livenessProbe": {"periodSeconds": 5}})),
         s("spec.containers[0].livenessProbe: Required value: must specify a handler type")),
        ("a probe has one handler", container(json!({"livenessProbe": {"exec": {"command": ["true"]}, "tcpSocket": {"port": 80}}})),
         s("spec.containers[0].livenessProbe.tcpSocket: Forbidden: may not specify more than 1 handler type")),
        ("exec needs a command", container(json!({"readinessProbe": {"exec": {}}})),
         s("spec.containers[0].readinessProbe.exec.command: Required value")),
        ("probe periods not negative", container(json!({"livenessProbe": {"tcpSocket": {"port": 80}, "periodSeconds": -1}})),
         s("spec.containers[0].livenessProbe.periodSeconds: Invalid value: -1: must be greater than or equal to 0")),
        ("probe thresholds not negative", container(json!({"readinessProbe": {"tcpSocket": {"port": 80}, "failureThreshold": -3}})),
         s("spec.containers[0].readinessProbe.failureThreshold: Invalid value: -3: must be greater than or equal to 0")),
        ("liveness successThreshold is 1", container(json!({"livenessProbe": {"tcpSocket": {"port": 80}, "successThreshold": 2}})),
         s("spec.containers[0].livenessProbe.successThreshold: Invalid value: 2: must be 1")),
        ("readiness has no termination grace", container(json!({"readinessProbe": {"tcpSocket": {"port": 80}, "terminationGracePeriodSeconds": 5}})),
         s("spec.containers[0].readinessProbe.terminationGracePeriodSeconds: Invalid value: 5: must not be set for readinessProbes")),
        ("probe termination grace positive", container(json!({"startupProbe": {"tcpSocket": {"port": 80}, "terminationGracePeriodSeconds": 0}})),
         s("spec.containers[0].startupProbe.terminationGracePeriodSeconds: Invalid value: 0: must be greater than 0")),
        ("probe ports in range", container(json!({"livenessProbe": {"httpGet": {"path": "/", "port": 0}}})),
         s("spec.containers[0].livenessProbe.httpGet.port: Invalid value: 0: must be between 1 and 65535, inclusive")),
        ("httpGet schemes", container(json!({"livenessProbe": {"httpGet": {"path": "/", "port": 80, "scheme": "FTP"}}})),
         s("spec.containers[0].livenessProbe.httpGet.scheme: Unsupported value: \"FTP\": supported values: \"HTTP\", \"HTTPS\"")),
        ("httpGet header names", container(json!({"livenessProbe": {"httpGet": {"path": "/", "port": 80, "httpHeaders": [{"name": "X Bad", "value": "1"}]}}})),
         s("spec.containers[0].livenessProbe.httpGet.httpHeaders: Invalid value: \"X Bad\": a valid HTTP header must consist of alphanumeric characters or '-' (e.g. 'X-Header-Name', regex used for validation is '[-A-Za-z0-9]+')")),
        ("grpc ports in range", container(json!({"livenessProbe": {"grpc": {"port": 99999}}})),
         s("spec.containers[0].livenessProbe.grpc.port: Invalid value: 99999: must be between 1 and 65535, inclusive")),
        ("a hook needs a handler", container(json!({"lifecycle": {"postStart": {}}})),
         s("spec.containers[0].lifecycle.postStart: Required value: must specify a handler type")),
        ("a preStop sleep fits the grace period", container(json!({"lifecycle": {"preStop": {"sleep": {"seconds": 60}}}})),
         s("spec.containers[0].lifecycle.preStop.sleep: Invalid value: 60: must be non-negative and less than terminationGracePeriodSeconds (30)")),
    ]
}

/// The rows on env.
fn env_rows() -> Vec<Row> {
    let s = |x: &str| x.to_string();
    vec![
        ("env names required", container(json!({"env": [{"name": "", "value": "x"}]})),
         s("spec.containers[0].env[0].name: Required value")),
        ("env names are printable ASCII without '='", container(json!({"env": [{"name": "A=B"}]})),
         s("spec.containers[0].env[0].name: Invalid value: \"A=B\": a valid environment variable name must consist only of printable ASCII characters other than '='")),
        ("valueFrom needs a source", container(json!({"env": [{"name": "A", "valueFrom": {}}]})),
         s("spec.containers[0].env[0].valueFrom: Invalid value: \"\": must specify one of: `fieldRef`, `resourceFieldRef`, `configMapKeyRef` or `secretKeyRef`")),
        ("valueFrom or value, not both", container(json!({"env": [{"name": "A", "value": "x", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}}]})),
         s("spec.containers[0].env[0].valueFrom: Invalid value: \"\": may not be specified when `value` is not empty")),
        ("downward API field paths", container(json!({"env": [{"name": "A", "valueFrom": {"fieldRef": {"fieldPath": "spec.hostNetwork"}}}]})),
         s("spec.containers[0].env[0].valueFrom.fieldRef.fieldPath: Unsupported value: \"spec.hostNetwork\": supported values: \"metadata.name\", \"metadata.namespace\", \"metadata.uid\", \"spec.nodeName\", \"spec.serviceAccountName\", \"status.hostIP\", \"status.hostIPs\", \"status.podIP\", \"status.podIPs\"")),
        ("resourceFieldRef resources", container(json!({"env": [{"name": "A", "valueFrom": {"resourceFieldRef": {"resource": "limits.pids"}}}]})),
         s("spec.containers[0].env[0].valueFrom.resourceFieldRef.resource: Unsupported value: \"limits.pids\": supported values: \"limits.cpu\", \"limits.ephemeral-storage\", \"limits.memory\", \"requests.cpu\", \"requests.ephemeral-storage\", \"requests.memory\"")),
        ("cpu divisors", container(json!({"env": [{"name": "A", "valueFrom": {"resourceFieldRef": {"resource": "limits.cpu", "divisor": "10m"}}}]})),
         s("spec.containers[0].env[0].valueFrom.resourceFieldRef.divisor: Invalid value: \"limits.cpu\": only divisor's values 1m and 1 are supported with the cpu resource")),
        ("envFrom needs a source", container(json!({"envFrom": [{"prefix": "P_"}]})),
         s("spec.containers[0].envFrom: Invalid value: \"\": must specify one of: `configMapRef` or `secretRef`")),
    ]
}

/// The rows on volumes and mounts.
fn volume_and_mount_rows() -> Vec<Row> {
    let s = |x: &str| x.to_string();
    vec![
        ("volume names are DNS labels", json!({"spec": {"volumes": [{"name": "Data", "emptyDir": {}}]}}),
         format!("spec.volumes[0].name: Invalid value: \"Data\": {LABEL_MSG}")),
        ("volume names unique", json!({"spec": {"volumes": [{"name": "data", "emptyDir": {}}, {"name": "data", "emptyDir": {}}]}}),
         s("spec.volumes[1].name: Duplicate value: \"data\"")),
        ("one source per volume", json!({"spec": {"volumes": [{"name": "data", "emptyDir": {}, "hostPath": {"path": "/d"}}]}}),
         s("spec.volumes[0].hostPath: Forbidden: may not specify more than 1 volume type")),
        ("hostPath path required", json!({"spec": {"volumes": [{"name": "h", "hostPath": {"path": ""}}]}}),
         s("spec.volumes[0].hostPath.path: Required value")),
        ("hostPath without backsteps", json!({"spec": {"volumes": [{"name": "h", "hostPath": {"path": "/data/../etc"}}]}}),
         s("spec.volumes[0].hostPath.path: Invalid value: \"/data/../etc\": must not contain '..'")),
        ("hostPath types", json!({"spec": {"volumes": [{"name": "h", "hostPath": {"path": "/d", "type": "Dir"}}]}}),
         s("spec.volumes[0].hostPath.type: Unsupported value: \"Dir\": supported values: \"\", \"BlockDevice\", \"CharDevice\", \"Directory\", \"DirectoryOrCreate\", \"File\", \"FileOrCreate\", \"Socket\"")),
        ("emptyDir sizeLimit not negative", json!({"spec": {"volumes": [{"name": "d", "emptyDir": {"sizeLimit": "-1Mi"}}]}}),
         s("spec.volumes[0].emptyDir.sizeLimit: Forbidden: SizeLimit field must be a valid resource quantity")),
        ("configMap volumes need a name", json!({"spec": {"volumes": [{"name": "c", "configMap": {"name": ""}}]}}),
         s("spec.volumes[0].configMap.name: Required value")),
        ("volume file modes", json!({"spec": {"volumes": [{"name": "c", "configMap": {"name": "cm", "defaultMode": 4096}}]}}),
         s("spec.volumes[0].configMap.defaultMode: Invalid value: 4096: must be a number between 0 and 0777 (octal), both inclusive")),
        ("mounts name a volume", container(json!({"volumeMounts": [{"name": "nope", "mountPath": "/x"}]})),
         s("spec.containers[0].volumeMounts[0].name: Not found: \"nope\"")),
        ("mount paths unique", json!({"spec": {"volumes": [{"name": "d", "emptyDir": {}}], "containers": [{"name": "app", "image": "x",
            "volumeMounts": [{"name": "d", "mountPath": "/x"}, {"name": "d", "mountPath": "/x"}]}]}}),
         s("spec.containers[0].volumeMounts[1].mountPath: Invalid value: \"/x\": must be unique")),
        ("subPath without '..'", json!({"spec": {"volumes": [{"name": "d", "emptyDir": {}}], "containers": [{"name": "app", "image": "x",
            "volumeMounts": [{"name": "d", "mountPath": "/x", "subPath": "../../etc"}]}]}}),
         s("spec.containers[0].volumeMounts.subPath: Invalid value: \"../../etc\": must not contain '..'")),
        ("subPath is relative", json!({"spec": {"volumes": [{"name": "d", "emptyDir": {}}], "containers": [{"name": "app", "image": "x",
            "volumeMounts": [{"name": "d", "mountPath": "/x", "subPath": "/etc"}]}]}}),
         s("spec.containers[0].volumeMounts.subPath: Invalid value: \"/etc\": must be a relative path")),
        ("Bidirectional propagation needs privileged", json!({"spec": {"volumes": [{"name": "d", "emptyDir": {}}], "containers": [{"name": "app", "image": "x",
            "volumeMounts": [{"name": "d", "mountPath": "/x", "mountPropagation": "Bidirectional"}]}]}}),
         s("spec.containers[0].volumeMounts.mountPropagation: Forbidden: Bidirectional mount propagation is available only to privileged containers")),
    ]
}

/// The rows on container security context.
fn container_security_context_rows() -> Vec<Row> {
    let s = |x: &str| x.to_string();
    vec![
        ("runAsUser in range", container(json!({"securityContext": {"runAsUser": -1}})),
         s("spec.containers[0].securityContext.runAsUser: Invalid value: -1: must be between 0 and 4294967295, inclusive")),
        ("procMount values", container(json!({"securityContext": {"procMount": "Masked"}})),
         s("spec.containers[0].securityContext.procMount: Unsupported value: \"Masked\": supported values: \"Default\", \"Unmasked\"")),
        ("Unmasked procMount needs a user namespace", container(json!({"securityContext": {"procMount": "Unmasked"}})),
         s("spec.containers[0].securityContext.procMount: Invalid value: \"Unmasked\": `hostUsers` must be false to use `Unmasked`")),
        ("no escalation contradicts privileged", container(json!({"securityContext": {"allowPrivilegeEscalation": false, "privileged": true}})),
         s("spec.containers[0].securityContext: Invalid value: {...}: cannot set `allowPrivilegeEscalation` to false and `privileged` to true")),
        ("AppArmor Localhost needs a profile", container(json!({"securityContext": {"appArmorProfile": {"type": "Localhost"}}})),
         s("spec.containers[0].securityContext.appArmorProfile.localhostProfile: Required value: must be set when AppArmor type is Localhost")),
    ]
}

#[test]
fn every_rule_gives_the_api_servers_error() {
    let mut failures = Vec::new();
    for (rule, patch, want) in rows() {
        let got = errors(&patch);
        if !got.contains(&want) {
            failures.push(format!("{rule}:\n  want {want}\n  got  {got:#?}"));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn an_invalid_pod_reports_every_problem_in_field_order() {
    let errs = errors(&json!({"spec": {
        "terminationGracePeriodSeconds": -5,
        "containers": [{"name": "app", "image": "busybox",
            "resources": {"limits": {"memory": "-1Gi", "cpu": "1e400"}}}]}}));
    assert_eq!(
        errs,
        [
            "spec.terminationGracePeriodSeconds: Invalid value: -5: must be greater than or equal to 0",
            "spec.containers[0].resources.limits[cpu]: Invalid value: \"1e400\": must be less than or equal to 9223372036854775807m",
            "spec.containers[0].resources.limits[memory]: Invalid value: \"-1Gi\": must be greater than or equal to 0",
            "spec.containers[0].resources.requests[cpu]: Invalid value: \"1e400\": must be less than or equal to 9223372036854775807m",
            "spec.containers[0].resources.requests[memory]: Invalid value: \"-1Gi\": must be greater than or equal to 0",
        ]
    );
}

#[test]
fn zero_probe_fields_mean_the_default_as_in_the_api() {
    let patch = container(
        json!({"livenessProbe": {"httpGet": {"port": 80}, "periodSeconds": 0,
        "timeoutSeconds": 0, "successThreshold": 0, "failureThreshold": 0}}),
    );
    assert_eq!(errors(&patch), Vec::<String>::new());
}

#[test]
fn a_pod_without_spec_is_rejected() {
    let pod = Pod {
        metadata: ObjectMeta {
            name: Some("web".into()),
            namespace: Some("default".into()),
            ..Default::default()
        },
        ..Default::default()
    };
    let errs = validate_pod(&pod).unwrap_err();
    assert_eq!(errs[0].to_string(), "spec: Required value");
}

#[test]
fn errors_print_like_the_api_servers_field_errors() {
    let e = |kind, value, detail: &str| FieldError {
        kind,
        field: "spec.x".into(),
        value,
        detail: detail.into(),
    };
    let cases = [
        (
            e(ErrorType::Required, BadValue::None, ""),
            "spec.x: Required value",
        ),
        (
            e(ErrorType::Forbidden, BadValue::Str("v".into()), "no"),
            "spec.x: Forbidden: no",
        ),
        (
            e(ErrorType::NotFound, BadValue::Str("v".into()), ""),
            "spec.x: Not found: \"v\"",
        ),
        (
            e(ErrorType::Invalid, BadValue::Int(-1), "bad"),
            "spec.x: Invalid value: -1: bad",
        ),
        (
            e(ErrorType::Invalid, BadValue::Bare("pids".into()), "bad"),
            "spec.x: Invalid value: pids: bad",
        ),
        (
            e(
                ErrorType::TooLong,
                BadValue::None,
                "must have at most 1 bytes",
            ),
            "spec.x: Too long: must have at most 1 bytes",
        ),
    ];
    for (err, want) in cases {
        assert_eq!(err.to_string(), want);
    }
    assert_eq!(
        go_quote("a\"b\\\u{0}\n\u{85}é"),
        "\"a\\\"b\\\\\\x00\\n\\u0085é\""
    );
    let list = [
        e(ErrorType::Required, BadValue::None, ""),
        e(ErrorType::Duplicate, BadValue::Str("a".into()), ""),
    ];
    assert_eq!(
        summary(&list),
        "spec.x: Required value; spec.x: Duplicate value: \"a\""
    );
}

#[test]
fn ephemeral_containers_are_refused_on_create_but_accepted_in_a_pod_from_the_api() {
    let p =
        pod(&json!({"spec": {"ephemeralContainers": [{"name": "debugger", "image": "busybox"}]}}));
    assert_eq!(validate_pod(&p), Ok(()));
    let errs: Vec<String> = validate_pod_create(&p)
        .unwrap_err()
        .iter()
        .map(ToString::to_string)
        .collect();
    assert_eq!(
        errs,
        ["spec.ephemeralContainers: Forbidden: cannot be set on create"]
    );
    assert_eq!(validate_pod_create(&pod(&json!({}))), Ok(()));
}
