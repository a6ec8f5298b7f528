//! Which sysctls a pod may set: kubelet's sysctl admit handler, pure.
//!
//! A pod's `securityContext.sysctls` must each be on the node's allowlist:
//! kubelet's safe set (namespaced and isolated: they touch nothing outside
//! the pod; the newer ones only on a kernel that namespaces them) plus the
//! configuration's `allowedUnsafeSysctls` (names or `prefix*` patterns),
//! each of which must be known to be namespaced (IPC or network). A
//! network sysctl is refused to a `hostNetwork` pod and an IPC one to a
//! `hostIPC` pod, since it would change the host's. A refusal is
//! `SysctlForbidden` with kubelet's message. Names may be written with `/`
//! as separator (`net/ipv4/ip_forward`); they are compared in the dotted
//! form.
//!
//! The kernel version comes in as an argument; nothing here reads the host.

use k8s_openapi::api::core::v1::Pod;

use super::accessors::spec;
use super::admission::Rejection;

/// kubelet's reason for a pod with a sysctl not on the allowlist.
pub const SYSCTL_FORBIDDEN: &str = "SysctlForbidden";

/// kubelet v1.36's safe sysctls, with the kernel (major, minor) that
/// namespaces each, when that is not every supported kernel.
const SAFE_SYSCTLS: &[(&str, Option<(u32, u32)>)] = &[
    ("kernel.shm_rmid_forced", None),
    ("net.ipv4.ip_local_port_range", None),
    ("net.ipv4.tcp_syncookies", None),
    ("net.ipv4.ping_group_range", None),
    ("net.ipv4.ip_unprivileged_port_start", None),
    ("net.ipv4.ip_local_reserved_ports", Some((3, 16))),
    ("net.ipv4.tcp_keepalive_time", Some((4, 5))),
    ("net.ipv4.tcp_fin_timeout", Some((4, 6))),
    ("net.ipv4.tcp_keepalive_intvl", Some((4, 5))),
    ("net.ipv4.tcp_keepalive_probes", Some((4, 5))),
    ("net.ipv4.tcp_rmem", Some((4, 15))),
    ("net.ipv4.tcp_wmem", Some((4, 15))),
];

/// The kernel namespace a sysctl belongs to, as kubelet names it in its
/// messages.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Namespace {
    Ipc,
    Net,
}

impl Namespace {
    fn as_str(self) -> &'static str {
        match self {
            Namespace::Ipc => "IPC",
            Namespace::Net => "Net",
        }
    }
}

/// A sysctl name in its dotted form: `net/ipv4/conf/eno2.100/rp_filter`
/// becomes `net.ipv4.conf.eno2/100.rp_filter` (dots and slashes swap when
/// the first separator is a slash).
pub fn normalize_name(name: &str) -> String {
    match name.find(['.', '/']) {
        Some(i) if name.as_bytes()[i] == b'/' => name
            .chars()
            .map(|c| match c {
                '.' => '/',
                '/' => '.',
                c => c,
            })
            .collect(),
        _ => name.to_string(),
    }
}

/// The namespace of a sysctl (or prefix) known to be namespaced.
fn namespace_of(name: &str) -> Option<Namespace> {
    const IPC: &[&str] = &[
        "kernel.sem",
        "kernel.shmall",
        "kernel.shmmax",
        "kernel.shmmni",
        "kernel.shm_rmid_forced",
        "kernel.shm",
        "kernel.msgmax",
        "kernel.msgmnb",
        "kernel.msgmni",
        "kernel.msg",
    ];
    if IPC.contains(&name) {
        return Some(Namespace::Ipc);
    }
    if name.starts_with("net.") {
        return Some(Namespace::Net);
    }
    if name.starts_with("fs.mqueue.") {
        return Some(Namespace::Ipc);
    }
    None
}

/// `major.minor` of a kernel release (`6.1.0-18-amd64`).
pub fn kernel_version(release: &str) -> Option<(u32, u32)> {
    let mut parts = release.split(|c: char| !c.is_ascii_digit());
    let major = parts.next()?.parse().ok()?;
    let minor = parts.next()?.parse().ok()?;
    Some((major, minor))
}

/// The sysctls (and `prefix*` patterns) a pod may set on this node.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Allowlist {
    names: Vec<(String, Namespace)>,
    prefixes: Vec<(String, Namespace)>,
}

impl Default for Allowlist {
    /// The safe sysctls that every kernel namespaces (the kernel unknown).
    fn default() -> Self {
        Allowlist::new(None, &[]).expect("the safe sysctls are namespaced")
    }
}

impl Allowlist {
    /// kubelet's safe sysctls for `kernel` (major, minor; `None`: unknown,
    /// which drops those a newer kernel namespaced) and the configuration's
    /// `allowedUnsafeSysctls`. An unsafe entry not known to be namespaced
    /// is an error, as kubelet refuses to start with it.
    pub fn new(kernel: Option<(u32, u32)>, unsafe_sysctls: &[String]) -> Result<Allowlist, String> {
        let mut list = Allowlist {
            names: Vec::new(),
            prefixes: Vec::new(),
        };
        let safe = SAFE_SYSCTLS
            .iter()
            .filter(|(_, since)| since.is_none_or(|v| kernel.is_some_and(|k| k >= v)))
            .map(|(name, _)| name.to_string());
        for pattern in safe.chain(unsafe_sysctls.iter().cloned()) {
            let name = normalize_name(&pattern);
            let (name, prefixed) = match name.find('*') {
                Some(i) => (name[..i].to_string(), true),
                None => (name, false),
            };
            let Some(ns) = namespace_of(&name) else {
                return Err(format!(
                    "the sysctls {name:?} are not known to be namespaced"
                ));
            };
            if prefixed {
                list.prefixes.push((name, ns));
            } else {
                list.names.push((name, ns));
            }
        }
        Ok(list)
    }

    fn check(&self, sysctl: &str, host_network: bool, host_ipc: bool) -> Result<(), String> {
        let sysctl = normalize_name(sysctl);
        let found = self
            .names
            .iter()
            .find(|(n, _)| *n == sysctl)
            .or_else(|| self.prefixes.iter().find(|(p, _)| sysctl.starts_with(p)));
        match found {
            None => Err(format!("{sysctl:?} not allowlisted")),
            Some((_, ns))
                if (*ns == Namespace::Ipc && host_ipc)
                    || (*ns == Namespace::Net && host_network) =>
            {
                Err(format!(
                    "{sysctl:?} not allowed with host {} enabled",
                    ns.as_str()
                ))
            }
            Some(_) => Ok(()),
        }
    }

    /// Admits `pod` when each of its sysctls is allowed, or says why not.
    pub fn admit(&self, pod: &Pod) -> Result<(), Rejection> {
        let s = spec(pod);
        let sysctls = s
            .security_context
            .as_ref()
            .and_then(|sc| sc.sysctls.as_deref())
            .unwrap_or(&[]);
        let host_network = s.host_network.unwrap_or(false);
        let host_ipc = s.host_ipc.unwrap_or(false);
        for sysctl in sysctls {
            if let Err(why) = self.check(&sysctl.name, host_network, host_ipc) {
                return Err(Rejection {
                    reason: SYSCTL_FORBIDDEN.into(),
                    message: format!("forbidden sysctl: {why}"),
                });
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pod(yaml: &str) -> Pod {
        serde_yaml_ng::from_str(yaml).expect("test pod parses")
    }

    fn sysctl_pod(name: &str, extra: &str) -> Pod {
        pod(&format!(
            "spec:\n  {extra}\n  securityContext: {{sysctls: [{{name: {name}, value: '1'}}]}}\n  containers: [{{name: c}}]\n"
        ))
    }

    fn verdict(list: &Allowlist, name: &str, extra: &str) -> Result<(), String> {
        list.admit(&sysctl_pod(name, extra)).map_err(|r| {
            assert_eq!(r.reason, "SysctlForbidden");
            r.message
        })
    }

    #[test]
    fn safe_sysctls_pass_and_others_are_forbidden_with_kubelets_message() {
        let list = Allowlist::new(Some((6, 1)), &[]).unwrap();
        let cases: &[(&str, &str, Result<(), &str>)] = &[
            ("kernel.shm_rmid_forced", "", Ok(())),
            ("net.ipv4.ip_local_port_range", "", Ok(())),
            ("net.ipv4.tcp_rmem", "", Ok(())),
            ("net/ipv4/ping_group_range", "", Ok(())),
            (
                "kernel.msgmax",
                "",
                Err("forbidden sysctl: \"kernel.msgmax\" not allowlisted"),
            ),
            (
                "net.core.somaxconn",
                "",
                Err("forbidden sysctl: \"net.core.somaxconn\" not allowlisted"),
            ),
            (
                "net.ipv4.ip_local_port_range",
                "hostNetwork: true",
                Err("forbidden sysctl: \"net.ipv4.ip_local_port_range\" not allowed with host Net enabled"),
            ),
            (
                "kernel.shm_rmid_forced",
                "hostIPC: true",
                Err("forbidden sysctl: \"kernel.shm_rmid_forced\" not allowed with host IPC enabled"),
            ),
            ("kernel.shm_rmid_forced", "hostNetwork: true", Ok(())),
        ];
        for (name, extra, want) in cases {
            assert_eq!(
                verdict(&list, name, extra),
                want.map_err(str::to_string),
                "{name} {extra}"
            );
        }
        assert_eq!(list.admit(&pod("spec: {containers: [{name: c}]}")), Ok(()));
    }

    #[test]
    fn newer_safe_sysctls_need_the_kernel_that_namespaces_them() {
        let old = Allowlist::new(Some((4, 4)), &[]).unwrap();
        assert!(verdict(&old, "net.ipv4.tcp_keepalive_time", "").is_err());
        assert!(verdict(&old, "net.ipv4.ip_local_reserved_ports", "").is_ok());
        let unknown = Allowlist::default();
        assert!(verdict(&unknown, "net.ipv4.tcp_wmem", "").is_err());
        assert!(verdict(&unknown, "net.ipv4.tcp_syncookies", "").is_ok());
        let new = Allowlist::new(kernel_version("6.12.57+deb13-amd64"), &[]).unwrap();
        assert!(verdict(&new, "net.ipv4.tcp_wmem", "").is_ok());
    }

    #[test]
    fn allowed_unsafe_sysctls_add_names_and_patterns_known_to_be_namespaced() {
        let list = Allowlist::new(
            Some((6, 1)),
            &["kernel.msg*".to_string(), "net.core.somaxconn".to_string()],
        )
        .unwrap();
        assert_eq!(verdict(&list, "kernel.msgmax", ""), Ok(()));
        assert_eq!(verdict(&list, "net.core.somaxconn", ""), Ok(()));
        assert!(verdict(&list, "net.core.somaxconn", "hostNetwork: true").is_err());
        assert!(verdict(&list, "kernel.sem", "").is_err());
        assert_eq!(
            Allowlist::new(None, &["vm.swappiness".to_string()]),
            Err("the sysctls \"vm.swappiness\" are not known to be namespaced".to_string())
        );
    }

    #[test]
    fn names_with_slashes_are_read_in_the_dotted_form() {
        assert_eq!(
            normalize_name("net/ipv4/conf/eno2.100/rp_filter"),
            "net.ipv4.conf.eno2/100.rp_filter"
        );
        assert_eq!(normalize_name("net.ipv4.ip_forward"), "net.ipv4.ip_forward");
        assert_eq!(kernel_version("5.15.0-91-generic"), Some((5, 15)));
        assert_eq!(kernel_version("junk"), None);
    }
}
