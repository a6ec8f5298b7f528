//! What the machine is: CPUs, memory, disk, kernel, OS image, identities,
//! and its primary address, read straight from the kernel (no cAdvisor).
//!
//! The parsers take `&str` and are pure; [`read`] does the I/O once at start
//! (and again when the Node status is recomputed: every read here is one
//! small file). A value that cannot be read is empty or zero, with the
//! reason logged by the caller where it matters; nothing here fails.

use std::path::Path;

/// The machine as the Node object reports it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct MachineInfo {
    pub cpus: u64,
    pub memory_bytes: u64,
    /// Size of the filesystem holding the root dir (`ephemeral-storage`).
    pub root_fs_bytes: u64,
    pub kernel_version: String,
    pub os_image: String,
    pub machine_id: String,
    pub system_uuid: String,
    pub boot_id: String,
    pub hostname: String,
    /// Each huge page size of `/sys/kernel/mm/hugepages`, smallest first:
    /// (page size in bytes, pages preallocated).
    pub hugepages: Vec<(u64, u64)>,
}

/// Reads the machine's facts; `root_dir` is picolet's `--root-dir`.
pub fn read(root_dir: &Path) -> MachineInfo {
    let text = |p: &str| std::fs::read_to_string(p).unwrap_or_default();
    let uname = rustix::system::uname();
    MachineInfo {
        cpus: parse_cpu_list(&text("/sys/devices/system/cpu/online"))
            .filter(|n| *n > 0)
            .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get() as u64)),
        memory_bytes: parse_mem_total(&text("/proc/meminfo")).unwrap_or(0),
        root_fs_bytes: rustix::fs::statfs(root_dir)
            .map(|s| s.f_blocks.saturating_mul(s.f_bsize as u64))
            .unwrap_or(0),
        kernel_version: uname.release().to_string_lossy().into_owned(),
        os_image: parse_os_release(&text("/etc/os-release")),
        machine_id: text("/etc/machine-id").trim().to_string(),
        system_uuid: system_uuid(&[
            text("/sys/class/dmi/id/product_uuid"),
            text("/proc/device-tree/system-id"),
            text("/proc/device-tree/vm,uuid"),
            text("/etc/machine-id"),
        ]),
        boot_id: text("/proc/sys/kernel/random/boot_id").trim().to_string(),
        hostname: uname.nodename().to_string_lossy().into_owned(),
        hugepages: read_hugepages(Path::new("/sys/kernel/mm/hugepages")),
    }
}

/// `nodeInfo.systemUUID` as kubelet (cAdvisor) finds it: the first
/// non-empty of DMI's `product_uuid`, the device tree's `system-id` and
/// `vm,uuid` (POWER), and `/etc/machine-id` (where there is no DMI, such
/// as most ARM boards), given in that order, trimmed of NULs and blanks.
pub fn system_uuid(candidates: &[String]) -> String {
    candidates
        .iter()
        .map(|c| c.trim_end_matches('\0').trim())
        .find(|c| !c.is_empty())
        .unwrap_or_default()
        .to_string()
}

/// The page size in bytes of a `hugepages-<n>kB` directory's name.
pub fn parse_hugepages_dir(name: &str) -> Option<u64> {
    let kb: u64 = name
        .strip_prefix("hugepages-")?
        .strip_suffix("kB")?
        .parse()
        .ok()?;
    kb.checked_mul(1024)
}

/// The huge page sizes under `dir` and each one's `nr_hugepages`,
/// smallest first; none where the kernel has no huge pages.
fn read_hugepages(dir: &Path) -> Vec<(u64, u64)> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut out: Vec<(u64, u64)> = entries
        .flatten()
        .filter_map(|e| {
            let size = parse_hugepages_dir(e.file_name().to_str()?)?;
            let pages = std::fs::read_to_string(e.path().join("nr_hugepages"))
                .ok()
                .and_then(|t| t.trim().parse().ok())
                .unwrap_or(0);
            Some((size, pages))
        })
        .collect();
    out.sort_unstable();
    out
}

/// The host's primary IPv4 address: the source address the kernel would
/// pick for a route off the machine. No packet is sent. `None` without a
/// default route.
pub fn primary_ipv4() -> Option<String> {
    let s = std::net::UdpSocket::bind("0.0.0.0:0").ok()?;
    s.connect("192.0.2.1:9").ok()?;
    Some(s.local_addr().ok()?.ip().to_string())
}

/// This machine's architecture as Go (and so Kubernetes) spells it
/// (GOARCH): the `kubernetes.io/arch` label, `nodeInfo.architecture`, user
/// agents.
pub fn go_arch() -> &'static str {
    match std::env::consts::ARCH {
        "x86_64" => "amd64",
        "aarch64" => "arm64",
        "powerpc64" => "ppc64le",
        other => other,
    }
}

/// `MemTotal` of `/proc/meminfo`, in bytes.
pub fn parse_mem_total(meminfo: &str) -> Option<u64> {
    meminfo
        .lines()
        .find_map(|l| l.strip_prefix("MemTotal:"))
        .and_then(|v| v.split_whitespace().next())
        .and_then(|kb| kb.parse::<u64>().ok())
        .map(|kb| kb * 1024)
}

/// The number of CPUs in a kernel CPU list (`0-3,6,8-9` is 7).
pub fn parse_cpu_list(list: &str) -> Option<u64> {
    let list = list.trim();
    if list.is_empty() {
        return None;
    }
    let mut n = 0u64;
    for part in list.split(',') {
        match part.split_once('-') {
            Some((a, b)) => {
                let (a, b): (u64, u64) = (a.parse().ok()?, b.parse().ok()?);
                n += b.checked_sub(a)? + 1;
            }
            None => {
                part.parse::<u64>().ok()?;
                n += 1;
            }
        }
    }
    Some(n)
}

/// `PRETTY_NAME` of `/etc/os-release`, unquoted; `Linux` without one.
pub fn parse_os_release(text: &str) -> String {
    text.lines()
        .find_map(|l| l.strip_prefix("PRETTY_NAME="))
        .map(|v| v.trim().trim_matches('"').trim_matches('\'').to_string())
        .filter(|v| !v.is_empty())
        .unwrap_or_else(|| "Linux".to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mem_total_is_read_in_bytes() {
        let m = "MemFree:  100 kB\nMemTotal:       3884244 kB\n";
        assert_eq!(parse_mem_total(m), Some(3884244 * 1024));
        assert_eq!(parse_mem_total("nothing"), None);
    }

    #[test]
    fn cpu_lists_count_ranges_and_singles() {
        assert_eq!(parse_cpu_list("0-3\n"), Some(4));
        assert_eq!(parse_cpu_list("0"), Some(1));
        assert_eq!(parse_cpu_list("0-3,6,8-9"), Some(7));
        assert_eq!(parse_cpu_list(""), None);
        assert_eq!(parse_cpu_list("3-1"), None);
        assert_eq!(parse_cpu_list("x"), None);
    }

    #[test]
    fn the_os_image_is_the_pretty_name() {
        let t = "NAME=\"Debian GNU/Linux\"\nPRETTY_NAME=\"Debian GNU/Linux 12 (bookworm)\"\n";
        assert_eq!(parse_os_release(t), "Debian GNU/Linux 12 (bookworm)");
        assert_eq!(parse_os_release("ID=alpine\n"), "Linux");
    }

    #[test]
    fn the_system_uuid_is_the_first_source_that_has_one() {
        let s = |v: &[&str]| system_uuid(&v.iter().map(|s| s.to_string()).collect::<Vec<_>>());
        assert_eq!(s(&["4c4c4544-0001\n", "", "", "m"]), "4c4c4544-0001");
        assert_eq!(s(&["", "ibm,123\0", "", "m"]), "ibm,123");
        assert_eq!(s(&["", "", "", "0123abcd\n"]), "0123abcd");
        assert_eq!(s(&["", "", "", ""]), "");
    }

    #[test]
    fn a_huge_page_directory_names_its_page_size() {
        assert_eq!(parse_hugepages_dir("hugepages-2048kB"), Some(2 << 20));
        assert_eq!(parse_hugepages_dir("hugepages-1048576kB"), Some(1 << 30));
        assert_eq!(parse_hugepages_dir("hugepages-64kB"), Some(64 << 10));
        assert_eq!(parse_hugepages_dir("hugepages"), None);
        assert_eq!(parse_hugepages_dir("other-2048kB"), None);
    }

    #[test]
    fn this_machine_can_be_read() {
        let m = read(Path::new("/"));
        assert!(m.cpus >= 1);
        assert!(m.memory_bytes > 0);
        assert!(!m.kernel_version.is_empty());
    }
}
