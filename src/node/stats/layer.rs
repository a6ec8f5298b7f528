//! A container's writable layer, found from the kernel: the root mount of
//! one of its processes (`/proc/<pid>/mountinfo`) is an overlay whose
//! `upperdir` is the layer the container writes to. containerd's and
//! CRI-O's overlay snapshotters both work this way, so disk ranking can
//! measure the layer without asking the runtime (kubelet takes it from the
//! CRI `ContainerStats`' `writable_layer`).

use super::{Buf, StatsError};
use std::path::{Path, PathBuf};

/// The `upperdir` of the overlay mounted on `/` in a mountinfo text, with
/// mountinfo's octal escapes (`\040` for a space) undone; `None` when the
/// root is not an overlay (a runtime without a snapshot, vfs).
pub fn root_overlay_upper_dir(mountinfo: &str) -> Option<String> {
    mountinfo.lines().rev().find_map(|line| {
        // `36 35 98:0 /mnt1 / rw,noatime master:1 - overlay overlay rw,...`
        let (mount, fs) = line.split_once(" - ")?;
        if mount.split(' ').nth(4)? != "/" {
            return None;
        }
        let mut fs = fs.split(' ');
        if fs.next()? != "overlay" {
            return None;
        }
        let options = fs.nth(1)?;
        options
            .split(',')
            .find_map(|o| o.strip_prefix("upperdir="))
            .map(unescape)
    })
}

/// Undoes mountinfo's `\ooo` escapes.
fn unescape(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        let octal = b
            .get(i + 1..i + 4)
            .filter(|d| b[i] == b'\\' && d.iter().all(|c| (b'0'..=b'7').contains(c)));
        match octal {
            Some(d) => {
                let v = d.iter().fold(0u32, |v, c| v * 8 + u32::from(c - b'0'));
                out.push(v as u8);
                i += 4;
            }
            None => {
                out.push(b[i]);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// The first process of the cgroup directory `dir` (`cgroup.procs`), if
/// it has one.
pub fn first_pid(dir: &Path, buf: &mut Buf) -> Result<Option<u32>, StatsError> {
    let text = buf.read(&dir.join("cgroup.procs"))?;
    Ok(text.lines().find_map(|l| l.trim().parse().ok()))
}

/// The writable layer of the container whose process is `pid`; `proc` is
/// normally `/proc`.
pub fn upper_dir_of(proc: &Path, pid: u32, buf: &mut Buf) -> Result<Option<PathBuf>, StatsError> {
    let text = buf.read(&proc.join(pid.to_string()).join("mountinfo"))?;
    Ok(root_overlay_upper_dir(text).map(PathBuf::from))
}

#[cfg(test)]
mod tests {
    use super::*;

    const CONTAINER: &str = "\
1290 1208 0:123 / / rw,relatime master:400 - overlay overlay rw,lowerdir=/var/lib/containerd/io.containerd.snapshotter.v1.overlayfs/snapshots/3/fs,upperdir=/var/lib/containerd/io.containerd.snapshotter.v1.overlayfs/snapshots/42/fs,workdir=/var/lib/containerd/io.containerd.snapshotter.v1.overlayfs/snapshots/42/work
1291 1290 0:125 / /proc rw,nosuid,nodev,noexec,relatime - proc proc rw
1300 1290 0:30 /pods/x/volumes/data /data rw,relatime - overlay overlay rw,upperdir=/elsewhere
";

    #[test]
    fn the_root_overlay_s_upper_dir_is_the_writable_layer() {
        assert_eq!(
            root_overlay_upper_dir(CONTAINER).as_deref(),
            Some("/var/lib/containerd/io.containerd.snapshotter.v1.overlayfs/snapshots/42/fs")
        );
    }

    #[test]
    fn a_root_that_is_not_an_overlay_has_no_writable_layer() {
        let host = "22 1 254:0 / / rw,relatime shared:1 - ext4 /dev/vda rw\n\
                    23 22 0:21 / /proc rw - proc proc rw\n";
        assert_eq!(root_overlay_upper_dir(host), None);
        assert_eq!(root_overlay_upper_dir(""), None);
        assert_eq!(root_overlay_upper_dir("garbage\n1 2\n"), None);
    }

    #[test]
    fn mountinfo_escapes_are_undone() {
        let line =
            "5 1 0:1 / / rw - overlay overlay rw,upperdir=/var/lib/my\\040dir/fs,workdir=/w\n";
        assert_eq!(
            root_overlay_upper_dir(line).as_deref(),
            Some("/var/lib/my dir/fs")
        );
        assert_eq!(unescape("a\\134b\\0"), "a\\b\\0");
    }

    #[test]
    fn the_first_pid_and_the_upper_dir_are_read_from_the_kernel_s_files() {
        let t = crate::cgroups::testutil::TempTree::new("stats-layer");
        t.put("cg/c1/cgroup.procs", "712\n713\n");
        t.put("cg/c2/cgroup.procs", "");
        t.put("proc/712/mountinfo", CONTAINER);
        let mut buf = Buf::new();
        assert_eq!(
            first_pid(&t.path().join("cg/c1"), &mut buf).unwrap(),
            Some(712)
        );
        assert_eq!(first_pid(&t.path().join("cg/c2"), &mut buf).unwrap(), None);
        let upper = upper_dir_of(&t.path().join("proc"), 712, &mut buf).unwrap();
        assert!(upper.unwrap().ends_with("snapshots/42/fs"));
        assert!(upper_dir_of(&t.path().join("proc"), 9, &mut buf).is_err());
    }
}
