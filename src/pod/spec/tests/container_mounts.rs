//! Container tests: mounts: hostPath and emptyDir, subPath, config volumes,
//! the managed /etc/hosts.

use super::*;

const VOLUMES: &str = r#"
metadata: {name: p, namespace: n, uid: u}
spec:
  volumes:
  - name: data
    hostPath: {path: /srv/data, type: DirectoryOrCreate}
  - name: scratch
    emptyDir: {}
  - name: defaulted
  - name: cfg
    configMap: {name: cm}
  containers:
  - name: app
    image: x
    terminationMessagePath: /dev/termination-log
    env: [{name: SUB, value: logs}]
    volumeMounts:
    - {name: data, mountPath: /data, readOnly: true}
    - {name: data, mountPath: /data-sub, subPath: a/b, mountPropagation: HostToContainer}
    - {name: scratch, mountPath: /scratch}
    - {name: scratch, mountPath: /logs, subPathExpr: "$(SUB)"}
"#;

fn volume_dir(name: &str) -> Option<PathBuf> {
    Some(PathBuf::from("/var/lib/picolet/pods/u/volumes/kubernetes.io~empty-dir").join(name))
}

#[test]
fn host_path_and_empty_dir_mounts_with_read_only_sub_path_and_propagation() {
    let p = pod(VOLUMES);
    let hosts = Path::new("/var/lib/picolet/pods/u/etc-hosts");
    let tlog = Path::new("/var/lib/picolet/pods/u/containers/app/abc123");
    let cp = ContainerParams {
        volume_dir: &volume_dir,
        etc_hosts: Some(hosts),
        termination_log_host_path: Some(tlog),
        ..params()
    };
    let cfg = container_config(&p, first(&p), &cp).unwrap();
    let got: Vec<(&str, &str, bool, i32)> = cfg
        .mounts
        .iter()
        .map(|m| {
            (
                m.container_path.as_str(),
                m.host_path.as_str(),
                m.readonly,
                m.propagation,
            )
        })
        .collect();
    let private = api::MountPropagation::PropagationPrivate as i32;
    let ed = "/var/lib/picolet/pods/u/volumes/kubernetes.io~empty-dir/scratch";
    assert_eq!(
        got,
        vec![
            ("/data", "/srv/data", true, private),
            (
                "/data-sub",
                "/srv/data/a/b",
                false,
                api::MountPropagation::PropagationHostToContainer as i32
            ),
            ("/scratch", ed, false, private),
            ("/logs", &format!("{ed}/logs") as &str, false, private),
            (
                "/etc/hosts",
                "/var/lib/picolet/pods/u/etc-hosts",
                false,
                private
            ),
            (
                "/dev/termination-log",
                "/var/lib/picolet/pods/u/containers/app/abc123",
                false,
                private
            ),
        ]
    );
    assert_eq!(empty_dir_volumes(&p), vec!["scratch", "defaulted"]);
    assert_eq!(
        host_path_volumes(&p),
        vec![(
            "/srv/data".to_string(),
            Some("DirectoryOrCreate".to_string())
        )]
    );
}

#[test]
fn sub_path_with_dot_dot_or_absolute_is_rejected_naming_the_mount() {
    for bad in ["../etc", "a/../../b", "/etc"] {
        let p = pod(&VOLUMES.replace("subPath: a/b", &format!("subPath: {bad:?}")));
        let cp = ContainerParams {
            volume_dir: &volume_dir,
            ..params()
        };
        let err = container_config(&p, first(&p), &cp).unwrap_err();
        assert_eq!(err.field, "volumeMount \"data\"", "{bad}");
        assert!(err.to_string().contains(bad), "{err}");
    }
}

#[test]
fn config_volumes_mount_read_only_and_unknown_volumes_are_rejected_naming_them() {
    let p = pod(&VOLUMES.replace(
        "    - {name: data, mountPath: /data, readOnly: true}",
        "    - {name: cfg, mountPath: /cfg}",
    ));
    let cp = ContainerParams {
        volume_dir: &volume_dir,
        ..params()
    };
    // A configMap volume is mounted read-only from the directory the
    // caller wrote, whatever the mount says.
    let config = container_config(&p, first(&p), &cp).unwrap();
    let cfg = config
        .mounts
        .iter()
        .find(|m| m.container_path == "/cfg")
        .unwrap();
    assert!(cfg.readonly);
    assert_eq!(cfg.host_path, volume_dir("cfg").unwrap().to_string_lossy());
    let p = pod(&VOLUMES.replace(
        "    - {name: data, mountPath: /data, readOnly: true}",
        "    - {name: nope, mountPath: /x}",
    ));
    let err = container_config(&p, first(&p), &cp).unwrap_err();
    assert!(err.to_string().contains("\"nope\" not found"), "{err}");
}

#[test]
fn container_mounting_etc_hosts_itself_does_not_get_the_managed_one() {
    let p = pod(&VOLUMES.replace("mountPath: /scratch}", "mountPath: /etc/hosts}"));
    let cp = ContainerParams {
        volume_dir: &volume_dir,
        etc_hosts: Some(Path::new("/h")),
        ..params()
    };
    let cfg = container_config(&p, first(&p), &cp).unwrap();
    assert_eq!(
        cfg.mounts
            .iter()
            .filter(|m| m.container_path == "/etc/hosts")
            .count(),
        1
    );
    assert!(cfg.mounts.iter().all(|m| m.host_path != "/h"));
}
