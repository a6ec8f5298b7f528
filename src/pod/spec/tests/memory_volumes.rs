//! Memory-backed volumes: which emptyDirs are tmpfs, and the `size=` kubelet
//! gives a tmpfs volume.

use super::*;

const MI: u64 = 1 << 20;

fn with_volumes(resources: &str, volumes: &str) -> Pod {
    pod(&format!(
        "metadata: {{name: p, namespace: n, uid: u}}\nspec:\n  containers:\n  - {{name: a, image: x{resources}}}\n  - {{name: b, image: y{resources}}}\n  volumes:\n{volumes}"
    ))
}

#[test]
fn only_memory_medium_empty_dirs_are_tmpfs_and_carry_their_size_limit() {
    let p = with_volumes(
        "",
        concat!(
            "  - {name: disk, emptyDir: {}}\n",
            "  - {name: ram, emptyDir: {medium: Memory, sizeLimit: 64Mi}}\n",
            "  - {name: ram-unsized, emptyDir: {medium: Memory}}\n",
        ),
    );
    assert_eq!(
        memory_empty_dirs(&p),
        vec![
            ("ram".to_string(), Some(64 * MI)),
            ("ram-unsized".to_string(), None)
        ]
    );
}

#[test]
fn a_tmpfs_is_node_allocatable_when_a_container_has_no_memory_limit() {
    let p = with_volumes(
        ", resources: {limits: {memory: 100Mi}}",
        "  - {name: v, emptyDir: {medium: Memory}}\n",
    );
    let mut unlimited = p.clone();
    unlimited.spec.as_mut().unwrap().containers[1].resources = None;
    assert_eq!(
        memory_volume_size(&unlimited, None, Some(2048 * MI)),
        Some(2048 * MI)
    );
    assert_eq!(memory_volume_size(&unlimited, None, None), None);
}

#[test]
fn a_tmpfs_is_the_pods_memory_limit_when_every_container_has_one() {
    let p = with_volumes(
        ", resources: {limits: {memory: 100Mi}}",
        "  - {name: v, emptyDir: {medium: Memory}}\n",
    );
    assert_eq!(
        memory_volume_size(&p, None, Some(2048 * MI)),
        Some(200 * MI)
    );
    // A pod limit above allocatable does not raise the size.
    assert_eq!(memory_volume_size(&p, None, Some(150 * MI)), Some(150 * MI));
}

#[test]
fn a_size_limit_lowers_the_tmpfs_but_never_raises_it() {
    let p = with_volumes(
        ", resources: {limits: {memory: 100Mi}}",
        "  - {name: v, emptyDir: {medium: Memory}}\n",
    );
    assert_eq!(
        memory_volume_size(&p, Some(64 * MI), Some(2048 * MI)),
        Some(64 * MI)
    );
    assert_eq!(
        memory_volume_size(&p, Some(512 * MI), Some(2048 * MI)),
        Some(200 * MI)
    );
    assert_eq!(
        memory_volume_size(&p, Some(0), Some(2048 * MI)),
        Some(200 * MI)
    );
}

#[test]
fn a_pod_level_memory_limit_sizes_the_tmpfs() {
    let mut p = with_volumes("", "  - {name: v, emptyDir: {medium: Memory}}\n");
    p.spec.as_mut().unwrap().resources =
        Some(serde_yaml_ng::from_str("{limits: {memory: 300Mi}}").unwrap());
    assert_eq!(
        memory_volume_size(&p, None, Some(2048 * MI)),
        Some(300 * MI)
    );
}
