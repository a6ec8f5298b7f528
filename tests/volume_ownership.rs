//! `securityContext.fsGroup` on the volumes picolet writes (issue #9), on a
//! real container runtime: a non-root container whose only way to read a
//! 0400 downwardAPI file is the fsGroup's group-read bit, and an emptyDir
//! whose new files inherit the group through setgid, as kubelet's volume
//! ownership rule makes them; and a nonexistent emptyDir subPath, which
//! picolet creates with the mode of the volume's root, group included.
//!
//! Run: `flock /tmp/picolet-itest.lock cargo test --test volume_ownership
//! -- --test-threads=2`.

mod harness;

use std::time::Duration;

use harness::{wait_until, Containerd, Picolet};

const LONG: Duration = Duration::from_secs(120);

/// The log of the (only) container `name` of the pod `pod` in namespace edge.
fn container_log(p: &Picolet, pod: &serde_json::Value, name: &str) -> String {
    let md = &pod["metadata"];
    let log_file = p
        .logs_dir()
        .join(format!(
            "edge_{}_{}",
            md["name"].as_str().unwrap(),
            md["uid"].as_str().unwrap()
        ))
        .join(format!("{name}/0.log"));
    std::fs::read_to_string(&log_file).unwrap_or_default()
}

#[test]
fn a_pod_with_an_fs_group_sees_its_volume_files_owned_by_that_group() {
    let c = Containerd::start();
    let p = Picolet::start(&c);
    // defaultMode 256 is 0400: picolet reads manifests as YAML 1.2, where
    // a bare `0400` is decimal (kubelet's YAML 1.1 reads it as octal).
    let manifest = r#"apiVersion: v1
kind: Pod
metadata:
  name: owned
  namespace: edge
spec:
  restartPolicy: Never
  securityContext: {runAsUser: 65534, fsGroup: 2345}
  containers:
  - name: main
    image: busybox
    imagePullPolicy: IfNotPresent
    command: ["sh", "-c"]
    args:
    - >-
      echo "info=$(stat -L -c '%g %a' /info/name) name=$(cat /info/name)";
      echo "scratch=$(stat -c '%g %a' /scratch)";
      touch /scratch/f && echo "new=$(stat -c %g /scratch/f)";
      echo "groups=$(id -G)"
    volumeMounts:
    - {name: info, mountPath: /info}
    - {name: scratch, mountPath: /scratch}
  volumes:
  - name: info
    downwardAPI:
      defaultMode: 256
      items: [{path: name, fieldRef: {fieldPath: metadata.name}}]
  - name: scratch
    emptyDir: {}
"#;
    p.write_manifest("owned", manifest);
    let pod = wait_until("pod owned Succeeded", LONG, || {
        let pod = p.find_pod("owned")?;
        (pod["status"]["phase"] == "Succeeded").then_some(pod)
    });
    let log = container_log(&p, &pod, "main");
    let node = p.hostname();
    // 0400 | 0440: the group may read what only the owner could.
    assert!(
        log.contains(&format!("info=2345 440 name=owned-{node}")),
        "{log}"
    );
    // emptyDir: 0777 plus setgid, and new files take the group.
    assert!(log.contains("scratch=2345 2777"), "{log}");
    assert!(log.contains("new=2345"), "{log}");
    assert!(log.contains("groups=") && log.contains("2345"), "{log}");
}

/// The node conformance test "EmptyDir volumes when FSGroup is specified
/// nonexistent volume subPath should have the correct mode and owner using
/// FSGroup": the subPath directory is the volume root's twin (tmpfs root
/// 1777 plus setgid for the fsGroup), not the runtime's 0755.
#[test]
fn a_nonexistent_sub_path_of_an_empty_dir_is_created_with_the_mode_and_group_of_the_volume_root() {
    let c = Containerd::start();
    let p = Picolet::start(&c);
    let manifest = r#"apiVersion: v1
kind: Pod
metadata:
  name: subpath
  namespace: edge
spec:
  restartPolicy: Never
  securityContext: {fsGroup: 123}
  containers:
  - name: main
    image: busybox
    imagePullPolicy: IfNotPresent
    command: ["sh", "-c", "echo \"sub=$(stat -c '%A %u %g' /test-volume)\""]
    volumeMounts:
    - {name: scratch, mountPath: /test-volume, subPath: test-sub}
  volumes:
  - name: scratch
    emptyDir: {medium: Memory}
"#;
    p.write_manifest("subpath", manifest);
    let pod = wait_until("pod subpath Succeeded", LONG, || {
        let pod = p.find_pod("subpath")?;
        (pod["status"]["phase"] == "Succeeded").then_some(pod)
    });
    let log = container_log(&p, &pod, "main");
    assert!(log.contains("sub=drwxrwsrwt 0 123"), "{log}");
}
