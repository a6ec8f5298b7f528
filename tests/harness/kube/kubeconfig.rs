//! Kubeconfig files for the test control plane -- owned by the test harness
//! (tests/harness/kube).
//!
//! The forms a kubelet's kubeconfig comes in: CA and client certificate as
//! files or inline `-data`, or a bearer token inline or as a `tokenFile`.
//! Tokens are the API server's static tokens (`--token-auth-file`).

use std::fs;
use std::io::Read;
use std::path::Path;

use super::pki::{base64, CertPair};

/// How a kubeconfig carries its credentials.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Credentials {
    /// `certificate-authority`, `client-certificate` and `client-key` as
    /// file paths.
    Files,
    /// The same as `-data` fields (base64 PEM), no files referenced.
    Inline,
    /// A bearer `token` (from the API server's static token file), with
    /// `certificate-authority-data`.
    Token,
    /// A `tokenFile`, with `certificate-authority` as a path.
    TokenFile,
}

/// Writes a kubeconfig for `user` at `server`, trusting the CA in `ca`.
pub fn write(
    ca: &Path,
    file: &Path,
    server: &str,
    user: &str,
    creds: Credentials,
    cert: Option<&CertPair>,
    token: Option<&str>,
) {
    let data =
        |p: &Path| base64(&fs::read(p).unwrap_or_else(|e| panic!("reading {}: {e}", p.display())));
    let (ca_line, user_lines) = match creds {
        Credentials::Files => {
            let c = cert.expect("a client certificate");
            (
                format!("certificate-authority: {}", ca.display()),
                format!(
                    "    client-certificate: {}\n    client-key: {}\n",
                    c.cert.display(),
                    c.key.display()
                ),
            )
        }
        Credentials::Inline => {
            let c = cert.expect("a client certificate");
            (
                format!("certificate-authority-data: {}", data(ca)),
                format!(
                    "    client-certificate-data: {}\n    client-key-data: {}\n",
                    data(&c.cert),
                    data(&c.key)
                ),
            )
        }
        Credentials::Token => (
            format!("certificate-authority-data: {}", data(ca)),
            format!("    token: {}\n", token.expect("a token")),
        ),
        Credentials::TokenFile => {
            let token_file = file.with_extension("token");
            fs::write(&token_file, token.expect("a token")).expect("writing the token file");
            (
                format!("certificate-authority: {}", ca.display()),
                format!("    tokenFile: {}\n", token_file.display()),
            )
        }
    };
    let yaml = format!(
        "# Written by tests/harness/kube/kubeconfig.rs\n\
         apiVersion: v1\n\
         kind: Config\n\
         clusters:\n\
         - name: picolet-test\n  cluster:\n    server: {server}\n    {ca_line}\n\
         users:\n\
         - name: {user}\n  user:\n{user_lines}\
         contexts:\n\
         - name: picolet-test\n  context:\n    cluster: picolet-test\n    user: {user}\n\
         current-context: picolet-test\n"
    );
    fs::write(file, yaml).unwrap_or_else(|e| panic!("writing {}: {e}", file.display()));
}

/// 128 random bits, hex: a static token.
pub fn random_token() -> String {
    let mut b = [0u8; 16];
    fs::File::open("/dev/urandom")
        .and_then(|mut f| f.read_exact(&mut b))
        .expect("reading /dev/urandom");
    b.iter().map(|x| format!("{x:02x}")).collect()
}
