//! URLs as an HTTP client needs them: `http`/`https`, a host, a port and a
//! request target; resolving a `Location` header against the current URL
//! (RFC 3986 reference resolution, as much of it as redirects use); and
//! percent-encoding what may not appear raw in a request line.
//!
//! Pure: no I/O. Hosts are kept without brackets (`fd00::1`); brackets are
//! added wherever a host and a port are joined.

use std::fmt;

/// `http` or `https`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Scheme {
    Http,
    Https,
}

impl Scheme {
    /// The scheme as written in a URL.
    pub fn as_str(self) -> &'static str {
        match self {
            Scheme::Http => "http",
            Scheme::Https => "https",
        }
    }

    /// 80 or 443.
    pub fn default_port(self) -> u16 {
        match self {
            Scheme::Http => 80,
            Scheme::Https => 443,
        }
    }
}

/// `host:port`, with brackets around an IPv6 address (Go's
/// `net.JoinHostPort`).
pub fn join_host_port(host: &str, port: u16) -> String {
    if host.contains(':') && !host.starts_with('[') {
        format!("[{host}]:{port}")
    } else {
        format!("{host}:{port}")
    }
}

/// An absolute URL, split the way a client uses it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Url {
    pub scheme: Scheme,
    /// Without brackets, also for IPv6.
    pub host: String,
    pub port: u16,
    /// Path and query, starting with `/` (the request target).
    pub path: String,
}

/// Prints the URL the way Go's `url.URL.String` does for these parts: the
/// port only when it is not the scheme's default.
impl fmt::Display for Url {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.scheme.as_str())?;
        f.write_str("://")?;
        if self.port == self.scheme.default_port() {
            if self.host.contains(':') && !self.host.starts_with('[') {
                write!(f, "[{}]", self.host)?;
            } else {
                f.write_str(&self.host)?;
            }
        } else {
            f.write_str(&self.authority())?;
        }
        f.write_str(&self.path)
    }
}

impl Url {
    /// `host:port` for a `Host` header or a dial.
    pub fn authority(&self) -> String {
        join_host_port(&self.host, self.port)
    }

    /// Parses an absolute `http://` or `https://` URL. User info and the
    /// fragment are dropped; the path is percent-encoded like
    /// [`encode_path`]. `None` if it is not such a URL.
    pub fn parse(s: &str) -> Option<Url> {
        let lower = s.get(..8).unwrap_or(s).to_ascii_lowercase();
        if lower.starts_with("http://") {
            Self::after_scheme(Scheme::Http, &s[7..])
        } else if lower.starts_with("https://") {
            Self::after_scheme(Scheme::Https, &s[8..])
        } else {
            None
        }
    }

    /// The URL for `rest` = `authority[path][?query][#fragment]`.
    fn after_scheme(scheme: Scheme, rest: &str) -> Option<Url> {
        let end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
        let (authority, path) = rest.split_at(end);
        let authority = authority.rsplit('@').next().unwrap_or(authority);
        let (host, port) = split_authority(authority, scheme)?;
        let path = match path.split('#').next().unwrap_or("") {
            "" => "/".to_string(),
            p if p.starts_with('?') => format!("/{p}"),
            p => p.to_string(),
        };
        Some(Url {
            scheme,
            host,
            port,
            path: encode_path(&path),
        })
    }

    /// Resolves a `Location` header against this URL. The flag says whether
    /// `location` was relative (no scheme and no authority of its own).
    /// `None` if it cannot be parsed (Go then fails the request).
    pub fn join(&self, location: &str) -> Option<(Url, bool)> {
        if let Some(url) = Self::parse(location) {
            return Some((url, false));
        }
        if let Some(rest) = location.strip_prefix("//") {
            return Self::after_scheme(self.scheme, rest).map(|u| (u, false));
        }
        let path = if location.starts_with('/') {
            encode_path(location)
        } else {
            // Relative to the current path's directory.
            let base = self.path.split('?').next().unwrap_or("/");
            let dir = &base[..base.rfind('/').map_or(0, |i| i + 1)];
            encode_path(&format!("{dir}{location}"))
        };
        Some((
            Url {
                path,
                ..self.clone()
            },
            true,
        ))
    }
}

/// `host[:port]` or `[v6][:port]`; an empty port means the default.
fn split_authority(authority: &str, scheme: Scheme) -> Option<(String, u16)> {
    if let Some(v6) = authority.strip_prefix('[') {
        let (host, rest) = v6.split_once(']')?;
        let port = match rest.strip_prefix(':') {
            Some(p) => p.parse().ok()?,
            None if rest.is_empty() => scheme.default_port(),
            None => return None,
        };
        return Some((host.to_string(), port));
    }
    match authority.rsplit_once(':') {
        Some((h, p)) if !h.is_empty() => Some((
            h.to_string(),
            if p.is_empty() {
                scheme.default_port()
            } else {
                p.parse().ok()?
            },
        )),
        None if !authority.is_empty() => Some((authority.to_string(), scheme.default_port())),
        _ => None,
    }
}

/// Percent-encodes what may not appear raw in a request target (spaces,
/// controls, non-ASCII); everything else, `%` included, is kept as given.
pub fn encode_path(path: &str) -> String {
    let mut out = String::with_capacity(path.len());
    for b in path.bytes() {
        if b.is_ascii_graphic()
            && !matches!(
                b,
                b'"' | b'<' | b'>' | b'\\' | b'^' | b'`' | b'{' | b'|' | b'}'
            )
        {
            out.push(b as char);
        } else {
            const HEX: &[u8; 16] = b"0123456789ABCDEF";
            out.push('%');
            out.push(HEX[usize::from(b >> 4)] as char);
            out.push(HEX[usize::from(b & 15)] as char);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn redirect_locations_resolve_against_the_current_url() {
        let base = Url {
            scheme: Scheme::Http,
            host: "10.0.0.1".into(),
            port: 8080,
            path: "/a/b?q".into(),
        };
        let (u, rel) = base.join("c").unwrap();
        assert_eq!((u.path.as_str(), rel), ("/a/c", true));
        let (u, rel) = base.join("/x y").unwrap();
        assert_eq!((u.path.as_str(), rel), ("/x%20y", true));
        let (u, rel) = base.join("https://10.0.0.1/z#frag").unwrap();
        assert_eq!(
            (u.scheme, u.port, u.path.as_str(), rel),
            (Scheme::Https, 443, "/z", false)
        );
        let (u, _) = base.join("//[fd00::1]:9/").unwrap();
        assert_eq!((u.host.as_str(), u.port), ("fd00::1", 9));
        assert_eq!(u.to_string(), "http://[fd00::1]:9/");
    }

    #[test]
    fn absolute_urls_parse_with_default_ports_and_without_user_info() {
        let u = Url::parse("HTTPS://admin@example.test?watch=1").unwrap();
        assert_eq!(
            (u.scheme, u.host.as_str(), u.port, u.path.as_str()),
            (Scheme::Https, "example.test", 443, "/?watch=1")
        );
        assert_eq!(u.authority(), "example.test:443");
        assert_eq!(u.to_string(), "https://example.test/?watch=1");
        let u = Url::parse("http://[fd00::2]:6443/api").unwrap();
        assert_eq!(u.authority(), "[fd00::2]:6443");
        assert_eq!(Url::parse("ftp://x/"), None);
        assert_eq!(Url::parse("http://:80/"), None);
        assert_eq!(Url::parse("http://host:port/"), None);
    }

    #[test]
    fn ipv6_hosts_get_brackets_only_where_a_port_follows() {
        assert_eq!(join_host_port("fd00::1", 80), "[fd00::1]:80");
        assert_eq!(join_host_port("[fd00::1]", 80), "[fd00::1]:80");
        assert_eq!(join_host_port("10.0.0.1", 80), "10.0.0.1:80");
        assert_eq!(
            encode_path("/a b/\u{e9}?q=\"1\""),
            "/a%20b/%C3%A9?q=%221%22"
        );
    }
}
