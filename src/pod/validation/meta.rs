//! Object metadata and the name rules behind it (apimachinery's
//! `util/validation`): DNS-1123 labels and subdomains (verdicts from
//! [`crate::names`], wording from the API server), qualified names, label
//! values, annotations. See [`super`] for the contract.

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

use super::{Errors, Path, TOTAL_ANNOTATION_SIZE_LIMIT};
use crate::names::{self, NameError};

// ---------------------------------------------------------------------------
// Name, label and annotation rules (apimachinery's util/validation)
// ---------------------------------------------------------------------------

const DNS1123_LABEL_FMT: &str = "[a-z0-9]([-a-z0-9]*[a-z0-9])?";
const DNS1123_SUBDOMAIN_FMT: &str =
    "[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*";
const LABEL_KEY_FMT: &str = "([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]";
const LABEL_KEY_MSG: &str = "must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character";

/// apimachinery's `RegexError`: the message, examples, and the regex.
fn regex_error(msg: &str, fmt: &str, examples: &[&str]) -> String {
    let mut s = format!("{msg} (e.g. ");
    for (i, e) in examples.iter().enumerate() {
        if i > 0 {
            s.push_str(" or ");
        }
        s.push_str(&format!("'{e}', "));
    }
    s.push_str(&format!("regex used for validation is '{fmt}')"));
    s
}

/// `IsDNS1123Label`'s messages (empty when valid).
pub(super) fn dns1123_label_errors(value: &str) -> Vec<String> {
    let mut errs = Vec::new();
    let chars_ok = match names::check_dns1123_label(value) {
        Ok(()) => return errs,
        Err(NameError::TooLong { max }) => {
            errs.push(format!("must be no more than {max} characters"));
            !value.contains('.') && names::is_dns1123_subdomain(&value[..value.len().min(253)])
        }
        Err(_) => false,
    };
    if !chars_ok {
        if names::is_dns1123_subdomain(value) {
            errs.push("must not contain dots".to_string());
        } else {
            errs.push(regex_error(
                "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character",
                DNS1123_LABEL_FMT,
                &["my-name", "123-abc"],
            ));
        }
    }
    errs
}

/// `IsDNS1123Subdomain`'s messages (empty when valid).
pub(super) fn dns1123_subdomain_errors(value: &str) -> Vec<String> {
    let mut errs = Vec::new();
    let chars_ok = match names::check_dns1123_subdomain(value) {
        Ok(()) => return errs,
        Err(NameError::TooLong { max }) => {
            errs.push(format!("must be no more than {max} characters"));
            value.split('.').all(names::label_chars_ok)
        }
        Err(_) => false,
    };
    if !chars_ok {
        errs.push(regex_error(
            "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character",
            DNS1123_SUBDOMAIN_FMT,
            &["example.com"],
        ));
    }
    errs
}

pub(super) fn validate_dns1123_label(value: &str, path: &Path, v: &mut Errors) {
    for msg in dns1123_label_errors(value) {
        v.invalid_str(path, value, msg);
    }
}

pub(super) fn validate_dns1123_subdomain(value: &str, path: &Path, v: &mut Errors) {
    for msg in dns1123_subdomain_errors(value) {
        v.invalid_str(path, value, msg);
    }
}

/// `IsQualifiedName` (a label key): `[prefix/]name`.
pub(super) fn qualified_name_errors(value: &str) -> Vec<String> {
    let mut errs = Vec::new();
    let parts: Vec<&str> = value.split('/').collect();
    let name = match parts.as_slice() {
        [name] => *name,
        [prefix, name] => {
            if prefix.is_empty() {
                errs.push("prefix part must be non-empty".to_string());
            } else {
                for msg in dns1123_subdomain_errors(prefix) {
                    errs.push(format!("prefix part {msg}"));
                }
            }
            *name
        }
        _ => {
            errs.push(format!(
                "a valid label key {} with an optional DNS subdomain prefix and '/' (e.g. 'example.com/MyName')",
                regex_error(LABEL_KEY_MSG, LABEL_KEY_FMT, &["MyName", "my.name", "123-abc"])
            ));
            return errs;
        }
    };
    if name.is_empty() {
        errs.push("name part must be non-empty".to_string());
    } else if name.len() > 63 {
        errs.push("name part must be no more than 63 bytes".to_string());
    }
    if !names::qualified_chars_ok(name) {
        errs.push(format!(
            "name part {}",
            regex_error(
                LABEL_KEY_MSG,
                LABEL_KEY_FMT,
                &["MyName", "my.name", "123-abc"]
            )
        ));
    }
    errs
}

/// `IsValidLabelValue`.
pub(super) fn label_value_errors(value: &str) -> Vec<String> {
    let mut errs = Vec::new();
    if value.len() > 63 {
        errs.push("must be no more than 63 bytes".to_string());
    }
    if !value.is_empty() && !names::qualified_chars_ok(value) {
        errs.push(regex_error(
            "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character",
            "(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?",
            &["MyValue", "my_value", "12345"],
        ));
    }
    errs
}

/// `ValidateLabels`: keys are qualified names, values label values.
pub(super) fn validate_labels(
    labels: Option<&BTreeMap<String, String>>,
    path: &Path,
    v: &mut Errors,
) {
    for (k, val) in labels.into_iter().flatten() {
        for msg in qualified_name_errors(k) {
            v.invalid_str(path, k, msg);
        }
        for msg in label_value_errors(val) {
            v.invalid_str(path, val, msg);
        }
    }
}

pub(super) fn validate_metadata(meta: &ObjectMeta, v: &mut Errors) {
    let path = Path::new("metadata");
    match meta.name.as_deref().unwrap_or("") {
        "" => v.required(&path.child("name"), "name or generateName is required"),
        name => validate_dns1123_subdomain(name, &path.child("name"), v),
    }
    match meta.namespace.as_deref().unwrap_or("") {
        "" => v.required(&path.child("namespace"), ""),
        ns => validate_dns1123_label(ns, &path.child("namespace"), v),
    }
    validate_labels(meta.labels.as_ref(), &path.child("labels"), v);
    let annotations = path.child("annotations");
    let mut total = 0usize;
    for (k, val) in meta.annotations.iter().flatten() {
        // The rule is a qualified name, case-insensitively.
        for msg in qualified_name_errors(&k.to_lowercase()) {
            v.invalid_str(&annotations, k, msg);
        }
        total += k.len() + val.len();
    }
    if total > TOTAL_ANNOTATION_SIZE_LIMIT {
        v.too_long(&annotations, TOTAL_ANNOTATION_SIZE_LIMIT);
    }
}
