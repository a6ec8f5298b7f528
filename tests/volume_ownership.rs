//! `securityContext.fsGroup` on the volumes picolet writes (issue #9), on a
//! real container runtime: a non-root container whose only way to read a
//! 0400 downwardAPI file is the fsGroup's group-read bit, and an emptyDir
//! whose new files inherit the group through setgid, as kubelet's volume
//! ownership rule makes them.
//!
//! Run: `flock /tmp/picolet-itest.lock cargo test --test volume_ownership
//! -- --test-threads=2`.

mod harness;

use std::time::Duration;

use harness::{wait_until, Containerd, Picolet};

const LONG: Duration = Duration::from_secs(120);

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
    let md = &pod["metadata"];
    let log_file = p
        .logs_dir()
        .join(format!(
            "edge_{}_{}",
            md["name"].as_str().unwrap(),
            md["uid"].as_str().unwrap()
        ))
        .join("main/0.log");
    let log = std::fs::read_to_string(&log_file).unwrap_or_default();
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
