//! Certificates and keys of a test control plane -- owned by the test
//! harness (tests/harness/kube).
//!
//! One CA signs everything: the API server's serving certificate (SANs
//! 127.0.0.1, localhost, kubernetes.default.svc and the service IP
//! 10.96.0.1), client certificates (admin in `system:masters`, the API
//! server's kubelet client, nodes as `system:node:<name>` in
//! `system:nodes`), and the service-account signing key pair. Keys are
//! ECDSA P-256 in PKCS#8 PEM; certificates are PEM. Made with the `openssl`
//! command (`make deps` installs it), which is quick and adds nothing to
//! the build.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

/// The extensions of each kind of certificate, for `openssl -extensions`.
const OPENSSL_CONFIG: &str = "\
# Written by tests/harness/kube/pki.rs
[req]
distinguished_name = dn
[dn]
[x_ca]
basicConstraints = critical,CA:TRUE
keyUsage = critical,keyCertSign,cRLSign,digitalSignature
subjectKeyIdentifier = hash
[x_server]
basicConstraints = critical,CA:FALSE
keyUsage = critical,digitalSignature
extendedKeyUsage = serverAuth
subjectAltName = IP:127.0.0.1,DNS:localhost,DNS:kubernetes,DNS:kubernetes.default,DNS:kubernetes.default.svc,DNS:kubernetes.default.svc.cluster.local,IP:10.96.0.1
authorityKeyIdentifier = keyid
[x_client]
basicConstraints = critical,CA:FALSE
keyUsage = critical,digitalSignature
extendedKeyUsage = clientAuth
authorityKeyIdentifier = keyid
";

/// A certificate and its key, as PEM files.
#[derive(Clone, Debug)]
pub struct CertPair {
    pub cert: PathBuf,
    pub key: PathBuf,
}

/// The PKI of one control plane, in `dir`.
pub struct Pki {
    dir: PathBuf,
}

impl Pki {
    /// Creates the CA, the serving certificate, the admin and
    /// kubelet-client certificates and the service-account keys in `dir`.
    pub fn create(dir: &Path) -> Pki {
        fs::create_dir_all(dir).unwrap_or_else(|e| panic!("creating {}: {e}", dir.display()));
        let pki = Pki {
            dir: dir.to_path_buf(),
        };
        fs::write(pki.config(), OPENSSL_CONFIG).expect("writing the openssl config");
        new_key(&pki.ca().key);
        openssl(&[
            "req",
            "-x509",
            "-new",
            "-key",
            path(&pki.ca().key),
            "-subj",
            "/CN=picolet-test-ca",
            "-days",
            "3650",
            "-config",
            path(&pki.config()),
            "-extensions",
            "x_ca",
            "-out",
            path(&pki.ca().cert),
        ]);
        pki.sign("apiserver", "/CN=kube-apiserver", "x_server");
        pki.client("admin", "kubernetes-admin", &["system:masters"]);
        pki.client(
            "apiserver-kubelet-client",
            "kube-apiserver-kubelet-client",
            &["system:masters"],
        );
        new_key(&pki.service_account_key());
        openssl(&[
            "pkey",
            "-in",
            path(&pki.service_account_key()),
            "-pubout",
            "-out",
            path(&pki.service_account_pub()),
        ]);
        pki
    }

    pub fn ca(&self) -> CertPair {
        self.pair("ca")
    }

    /// The API server's serving certificate.
    pub fn apiserver(&self) -> CertPair {
        self.pair("apiserver")
    }

    /// The cluster admin (O=system:masters).
    pub fn admin(&self) -> CertPair {
        self.pair("admin")
    }

    /// What the API server presents to kubelets.
    pub fn apiserver_kubelet_client(&self) -> CertPair {
        self.pair("apiserver-kubelet-client")
    }

    pub fn service_account_key(&self) -> PathBuf {
        self.dir.join("sa.key")
    }

    pub fn service_account_pub(&self) -> PathBuf {
        self.dir.join("sa.pub")
    }

    /// The credential of node `name`: CN=system:node:<name>,
    /// O=system:nodes. Made on first use.
    pub fn node(&self, name: &str) -> CertPair {
        assert!(
            !name.is_empty()
                && name
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'.'),
            "bad node name {name:?}"
        );
        let stem = format!("node-{name}");
        let pair = self.pair(&stem);
        if !pair.cert.is_file() {
            self.client(&stem, &format!("system:node:{name}"), &["system:nodes"]);
        }
        pair
    }

    /// A client certificate for any user and groups, as `<stem>.crt/.key`.
    pub fn client(&self, stem: &str, user: &str, groups: &[&str]) -> CertPair {
        let mut subj = String::new();
        for g in groups {
            subj.push_str(&format!("/O={g}"));
        }
        subj.push_str(&format!("/CN={user}"));
        self.sign(stem, &subj, "x_client")
    }

    fn sign(&self, stem: &str, subject: &str, extensions: &str) -> CertPair {
        let pair = self.pair(stem);
        new_key(&pair.key);
        let csr = self.dir.join(format!("{stem}.csr"));
        openssl(&[
            "req",
            "-new",
            "-key",
            path(&pair.key),
            "-subj",
            subject,
            "-config",
            path(&self.config()),
            "-out",
            path(&csr),
        ]);
        let ca = self.ca();
        // No serial file: openssl 3 picks a random serial.
        openssl(&[
            "x509",
            "-req",
            "-in",
            path(&csr),
            "-CA",
            path(&ca.cert),
            "-CAkey",
            path(&ca.key),
            "-days",
            "3650",
            "-extfile",
            path(&self.config()),
            "-extensions",
            extensions,
            "-out",
            path(&pair.cert),
        ]);
        let _ = fs::remove_file(csr);
        pair
    }

    fn pair(&self, stem: &str) -> CertPair {
        CertPair {
            cert: self.dir.join(format!("{stem}.crt")),
            key: self.dir.join(format!("{stem}.key")),
        }
    }

    fn config(&self) -> PathBuf {
        self.dir.join("openssl.cnf")
    }
}

fn path(p: &Path) -> &str {
    p.to_str().expect("utf-8 path")
}

fn new_key(out: &Path) {
    openssl(&[
        "genpkey",
        "-algorithm",
        "EC",
        "-pkeyopt",
        "ec_paramgen_curve:P-256",
        "-out",
        path(out),
    ]);
}

fn openssl(args: &[&str]) {
    let out = Command::new("openssl")
        .args(args)
        .stdin(Stdio::null())
        .output()
        .unwrap_or_else(|e| panic!("running openssl (install it: `make deps`): {e}"));
    if !out.status.success() {
        panic!(
            "openssl {} failed ({}):\n{}",
            args.join(" "),
            out.status,
            String::from_utf8_lossy(&out.stderr)
        );
    }
}

/// Standard base64 with padding, for kubeconfig `-data` fields.
pub fn base64(data: &[u8]) -> String {
    const ABC: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::with_capacity(data.len().div_ceil(3) * 4);
    for chunk in data.chunks(3) {
        let b = [
            chunk[0],
            chunk.get(1).copied().unwrap_or(0),
            chunk.get(2).copied().unwrap_or(0),
        ];
        let n = (u32::from(b[0]) << 16) | (u32::from(b[1]) << 8) | u32::from(b[2]);
        for i in 0..4 {
            if i <= chunk.len() {
                out.push(ABC[(n >> (18 - 6 * i)) as usize & 63] as char);
            } else {
                out.push('=');
            }
        }
    }
    out
}
