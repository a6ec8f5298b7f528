//! Kubernetes name rules: the apimachinery validation (RFC 1123 labels and
//! subdomains) that config (the node name, `clusterDomain`), the pod sources
//! (pod, namespace and container names) and, later, pod validation share.
//!
//! Why one home: a name picolet accepts must be one the API server would
//! accept too, or a static pod that runs here fails the day its mirror pod or
//! its node is registered. The rules are apimachinery's
//! `IsDNS1123Label` / `IsDNS1123Subdomain`: a subdomain is at most 253
//! characters of dot-separated labels, and only a lone label is held to 63.
//!
//! Pure: strings in, verdicts out. Callers add the context (which field,
//! which file); the messages here complete a sentence that starts with the
//! name (`metadata.name "Web_Server" must consist of ...`).

/// The longest DNS-1123 label (namespaces, container names).
pub const DNS1123_LABEL_MAX_LENGTH: usize = 63;
/// The longest DNS-1123 subdomain (object names, node names).
pub const DNS1123_SUBDOMAIN_MAX_LENGTH: usize = 253;

/// Why a name is not a valid DNS-1123 label or subdomain.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum NameError {
    #[error("is longer than {max} characters")]
    TooLong { max: usize },
    #[error(
        "must consist of lower case alphanumeric characters or '-', \
         and must start and end with an alphanumeric character"
    )]
    NotALabel,
    #[error(
        "must consist of lower case alphanumeric characters, '-' or '.', \
         and must start and end with an alphanumeric character"
    )]
    NotASubdomain,
    #[error(
        "must consist of alphanumeric characters, '-', '_' or '.', and must \
         start and end with an alphanumeric character"
    )]
    NotAQualifiedName,
    #[error("must have at most one '/', with a DNS subdomain prefix before it")]
    BadPrefix,
}

/// The longest qualified name part and label value.
pub const QUALIFIED_NAME_MAX_LENGTH: usize = 63;

/// A qualified name, as Kubernetes validates label and annotation keys and
/// taint keys: an optional DNS-subdomain prefix and `/`, then a name of at
/// most 63 alphanumerics, `-`, `_` and `.`, alphanumeric at both ends.
pub fn check_qualified_name(s: &str) -> Result<(), NameError> {
    let name = match s.split_once('/') {
        Some((prefix, name)) => {
            if prefix.is_empty() || name.contains('/') {
                return Err(NameError::BadPrefix);
            }
            check_dns1123_subdomain(prefix).map_err(|_| NameError::BadPrefix)?;
            name
        }
        None => s,
    };
    if name.len() > QUALIFIED_NAME_MAX_LENGTH {
        return Err(NameError::TooLong {
            max: QUALIFIED_NAME_MAX_LENGTH,
        });
    }
    if !name.is_empty() && qualified_chars_ok(name) {
        Ok(())
    } else {
        Err(NameError::NotAQualifiedName)
    }
}

/// A label value: empty, or what a qualified name's name part may be.
pub fn check_label_value(s: &str) -> Result<(), NameError> {
    if s.len() > QUALIFIED_NAME_MAX_LENGTH {
        return Err(NameError::TooLong {
            max: QUALIFIED_NAME_MAX_LENGTH,
        });
    }
    if s.is_empty() || qualified_chars_ok(s) {
        Ok(())
    } else {
        Err(NameError::NotAQualifiedName)
    }
}

/// The name part of a qualified name, and a label value's characters:
/// alphanumerics, `-`, `_` and `.`, alphanumeric at both ends, non-empty
/// (any length: callers check it).
pub fn qualified_chars_ok(s: &str) -> bool {
    let alnum = |b: u8| b.is_ascii_alphanumeric();
    s.bytes()
        .all(|b| alnum(b) || matches!(b, b'-' | b'_' | b'.'))
        && s.bytes().next().is_some_and(alnum)
        && s.bytes().last().is_some_and(alnum)
}

/// An RFC 1123 label, as Kubernetes validates namespaces and container
/// names: `[a-z0-9]([-a-z0-9]*[a-z0-9])?`, at most 63 characters.
pub fn check_dns1123_label(s: &str) -> Result<(), NameError> {
    if s.len() > DNS1123_LABEL_MAX_LENGTH {
        return Err(NameError::TooLong {
            max: DNS1123_LABEL_MAX_LENGTH,
        });
    }
    if label_chars_ok(s) {
        Ok(())
    } else {
        Err(NameError::NotALabel)
    }
}

/// An RFC 1123 subdomain, as Kubernetes validates object and node names:
/// labels joined by `.`, at most 253 characters in all.
pub fn check_dns1123_subdomain(s: &str) -> Result<(), NameError> {
    if s.len() > DNS1123_SUBDOMAIN_MAX_LENGTH {
        return Err(NameError::TooLong {
            max: DNS1123_SUBDOMAIN_MAX_LENGTH,
        });
    }
    if s.split('.').all(label_chars_ok) {
        Ok(())
    } else {
        Err(NameError::NotASubdomain)
    }
}

/// [`check_dns1123_subdomain`] as a yes/no.
pub fn is_dns1123_subdomain(s: &str) -> bool {
    check_dns1123_subdomain(s).is_ok()
}

/// One DNS-1123 label's characters: non-empty, lower case alphanumerics
/// and `-`, alphanumeric at both ends (any length: callers check it).
pub fn label_chars_ok(label: &str) -> bool {
    !label.is_empty()
        && label
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
        && !label.starts_with('-')
        && !label.ends_with('-')
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn labels_are_lower_case_alphanumerics_and_dashes_inside() {
        for ok in ["a", "web", "web-1", "0", "a-b-c", &"x".repeat(63)] {
            assert_eq!(check_dns1123_label(ok), Ok(()), "{ok}");
        }
        for bad in ["", "-a", "a-", "Web", "a.b", "a_b", "a b"] {
            assert_eq!(check_dns1123_label(bad), Err(NameError::NotALabel), "{bad}");
        }
        assert_eq!(
            check_dns1123_label(&"x".repeat(64)),
            Err(NameError::TooLong { max: 63 })
        );
    }

    #[test]
    fn subdomains_are_dotted_labels_of_at_most_253_characters() {
        for ok in ["a", "web.edge", "edge-01.local", &"x".repeat(253)] {
            assert!(is_dns1123_subdomain(ok), "{ok}");
        }
        for bad in [
            "",
            ".",
            "a..b",
            "a.",
            ".a",
            "-a",
            "a.-b",
            "under_score",
            "A",
        ] {
            assert_eq!(
                check_dns1123_subdomain(bad),
                Err(NameError::NotASubdomain),
                "{bad}"
            );
        }
        assert_eq!(
            check_dns1123_subdomain(&"x".repeat(254)),
            Err(NameError::TooLong { max: 253 })
        );
    }

    #[test]
    fn a_subdomain_label_is_not_held_to_63_characters_as_in_apimachinery() {
        let long_label = format!("{}.local", "x".repeat(100));
        assert!(is_dns1123_subdomain(&long_label));
        assert!(check_dns1123_label(&"x".repeat(100)).is_err());
    }

    #[test]
    fn messages_complete_a_sentence_about_the_name() {
        assert_eq!(
            NameError::TooLong { max: 253 }.to_string(),
            "is longer than 253 characters"
        );
        assert!(NameError::NotASubdomain
            .to_string()
            .starts_with("must consist of lower case alphanumeric characters, '-' or '.'"));
        assert!(NameError::NotALabel
            .to_string()
            .starts_with("must consist of lower case alphanumeric characters or '-'"));
    }

    #[test]
    fn label_keys_are_qualified_names_with_an_optional_subdomain_prefix() {
        assert!(check_qualified_name("app").is_ok());
        assert!(check_qualified_name("example.com/My_App.v2").is_ok());
        assert!(check_qualified_name("kubernetes.io/arch").is_ok());
        assert_eq!(check_qualified_name("/x"), Err(NameError::BadPrefix));
        assert_eq!(check_qualified_name("a/b/c"), Err(NameError::BadPrefix));
        assert_eq!(
            check_qualified_name("Bad_Prefix/x"),
            Err(NameError::BadPrefix)
        );
        assert_eq!(
            check_qualified_name("-x"),
            Err(NameError::NotAQualifiedName)
        );
        assert_eq!(check_qualified_name(""), Err(NameError::NotAQualifiedName));
        assert!(matches!(
            check_qualified_name(&"a".repeat(64)),
            Err(NameError::TooLong { .. })
        ));
    }

    #[test]
    fn label_values_may_be_empty_but_not_malformed() {
        assert!(check_label_value("").is_ok());
        assert!(check_label_value("v1.2_x-y").is_ok());
        assert_eq!(check_label_value("a b"), Err(NameError::NotAQualifiedName));
        assert_eq!(check_label_value("x-"), Err(NameError::NotAQualifiedName));
    }
}
