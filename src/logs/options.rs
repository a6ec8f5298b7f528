//! kubelet's log query options (the `PodLogOptions` of
//! `/containerLogs/{namespace}/{pod}/{container}?...`), parsed from the
//! query string and validated as the API server validates them.

use super::line::unix_nanos;

/// Why a log request or a log line was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LogsError {
    /// A query parameter with a bad value (the API server's wording).
    #[error("{field}: Invalid value: {value:?}: {reason}")]
    Invalid {
        field: &'static str,
        value: String,
        reason: &'static str,
    },
    /// A line that is not `<time> <stream> <tag> <text>`.
    #[error("malformed CRI log line: {0}")]
    Malformed(&'static str),
}

/// What a log request asks for.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LogOptions {
    /// `follow`: keep the answer open and send new lines while the
    /// container runs.
    pub follow: bool,
    /// `previous`: the log of the container's previous instance.
    pub previous: bool,
    /// `timestamps`: prefix each line with its time.
    pub timestamps: bool,
    /// `tailLines`: only the last lines of what is already written.
    pub tail_lines: Option<u64>,
    /// `limitBytes`: at most this many bytes in the answer.
    pub limit_bytes: Option<u64>,
    /// `sinceSeconds`/`sinceTime`, as Unix nanoseconds: lines from then on.
    pub since_nanos: Option<i128>,
}

impl LogOptions {
    /// Parses a query string (without `?`). `now_unix_nanos` turns
    /// `sinceSeconds` into a time. Unknown parameters (`container`,
    /// `insecureSkipTLSVerifyBackend`, ...) are ignored, as kubelet does.
    pub fn from_query(query: &str, now_unix_nanos: i128) -> Result<LogOptions, LogsError> {
        let mut o = LogOptions::default();
        let mut since_seconds = None;
        let mut since_time = None;
        for pair in query.split('&').filter(|p| !p.is_empty()) {
            let (key, raw) = pair.split_once('=').unwrap_or((pair, ""));
            let value = form_decode(raw);
            let invalid = |field, reason| LogsError::Invalid {
                field,
                value: value.clone(),
                reason,
            };
            match key {
                "follow" => o.follow = go_bool(&value).ok_or(invalid("follow", BOOL))?,
                "previous" => o.previous = go_bool(&value).ok_or(invalid("previous", BOOL))?,
                "timestamps" => {
                    o.timestamps = go_bool(&value).ok_or(invalid("timestamps", BOOL))?
                }
                "tailLines" => {
                    let n: i64 = value.parse().map_err(|_| invalid("tailLines", INT))?;
                    let n = u64::try_from(n).map_err(|_| invalid("tailLines", AT_LEAST_0))?;
                    o.tail_lines = Some(n);
                }
                "limitBytes" => {
                    let n: i64 = value.parse().map_err(|_| invalid("limitBytes", INT))?;
                    o.limit_bytes = Some(
                        u64::try_from(n)
                            .ok()
                            .filter(|n| *n > 0)
                            .ok_or(invalid("limitBytes", ABOVE_0))?,
                    );
                }
                "sinceSeconds" => {
                    let n: i64 = value.parse().map_err(|_| invalid("sinceSeconds", INT))?;
                    if n < 1 {
                        return Err(invalid("sinceSeconds", ABOVE_0));
                    }
                    since_seconds = Some(n);
                }
                "sinceTime" => {
                    since_time = Some(unix_nanos(&value).ok_or(invalid("sinceTime", TIME))?);
                }
                _ => {}
            }
        }
        o.since_nanos = match (since_seconds, since_time) {
            (Some(_), Some(_)) => {
                return Err(LogsError::Invalid {
                    field: "sinceSeconds",
                    value: String::new(),
                    reason: "at most one of `sinceTime` or `sinceSeconds` may be specified",
                })
            }
            (Some(s), None) => Some(now_unix_nanos - s as i128 * 1_000_000_000),
            (None, t) => t,
        };
        Ok(o)
    }
}

const BOOL: &str = "expected a boolean";
const INT: &str = "expected an integer";
const AT_LEAST_0: &str = "must be greater than or equal to 0";
const ABOVE_0: &str = "must be greater than 0";
const TIME: &str = "expected an RFC 3339 time";

/// Go's `strconv.ParseBool`, which kubelet's query decoding uses; a bare
/// key (`?follow`) is true.
fn go_bool(v: &str) -> Option<bool> {
    match v {
        "" | "1" | "t" | "T" | "true" | "TRUE" | "True" => Some(true),
        "0" | "f" | "F" | "false" | "FALSE" | "False" => Some(false),
        _ => None,
    }
}

/// A query value decoded as HTML forms encode it (`+` is a space,
/// `%XX` a byte); a malformed escape is kept as it is.
pub fn form_decode(raw: &str) -> String {
    let b = raw.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        let hex = |c: u8| (c as char).to_digit(16);
        match b[i] {
            b'+' => out.push(b' '),
            b'%' if i + 2 < b.len() => match (hex(b[i + 1]), hex(b[i + 2])) {
                (Some(h), Some(l)) => {
                    out.push((h * 16 + l) as u8);
                    i += 2;
                }
                _ => out.push(b'%'),
            },
            c => out.push(c),
        }
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    const NOW: i128 = 1_000 * 1_000_000_000;

    #[test]
    fn every_kubelet_log_option_is_read_from_the_query() {
        let o = LogOptions::from_query(
            "follow=true&previous=1&timestamps=True&tailLines=10&limitBytes=500&container=c",
            NOW,
        )
        .unwrap();
        assert_eq!(
            o,
            LogOptions {
                follow: true,
                previous: true,
                timestamps: true,
                tail_lines: Some(10),
                limit_bytes: Some(500),
                since_nanos: None,
            }
        );
        assert_eq!(
            LogOptions::from_query("", NOW).unwrap(),
            LogOptions::default()
        );
        assert!(LogOptions::from_query("follow", NOW).unwrap().follow);
        assert!(!LogOptions::from_query("follow=false", NOW).unwrap().follow);
    }

    #[test]
    fn since_seconds_counts_back_from_now_and_since_time_is_rfc3339() {
        let o = LogOptions::from_query("sinceSeconds=10", NOW).unwrap();
        assert_eq!(o.since_nanos, Some(990 * 1_000_000_000));
        let o = LogOptions::from_query("sinceTime=1970-01-01T00%3A16%3A40%2B00%3A00", NOW).unwrap();
        assert_eq!(o.since_nanos, Some(NOW));
    }

    #[test]
    fn bad_values_are_refused_with_the_api_servers_words() {
        let table = [
            ("tailLines=-1", "tailLines: Invalid value: \"-1\": must be greater than or equal to 0"),
            ("limitBytes=0", "limitBytes: Invalid value: \"0\": must be greater than 0"),
            ("sinceSeconds=0", "sinceSeconds: Invalid value: \"0\": must be greater than 0"),
            ("follow=yes", "follow: Invalid value: \"yes\": expected a boolean"),
            ("sinceTime=today", "sinceTime: Invalid value: \"today\": expected an RFC 3339 time"),
            (
                "sinceSeconds=5&sinceTime=1970-01-01T00:00:00Z",
                "sinceSeconds: Invalid value: \"\": at most one of `sinceTime` or `sinceSeconds` may be specified",
            ),
        ];
        for (q, want) in table {
            let e = LogOptions::from_query(q, NOW).unwrap_err();
            assert_eq!(e.to_string(), want, "{q}");
        }
    }

    #[test]
    fn form_decoding_turns_escapes_and_plus_into_bytes() {
        assert_eq!(form_decode("a%3Ab+c"), "a:b c");
        assert_eq!(form_decode("100%"), "100%");
        assert_eq!(form_decode("%zz%4"), "%zz%4");
    }
}
