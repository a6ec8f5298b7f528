//! Container logs as kubelet serves them: the CRI log format the runtime
//! writes (`<RFC3339Nano> <stream> <P|F> <text>` per line), read across
//! the current file and its rotated ones, shaped by kubelet's query options
//! (`tailLines`, `limitBytes`, `sinceSeconds`/`sinceTime`, `timestamps`,
//! `previous`, `follow`).
//!
//! - [`line`]: one CRI line parsed, partial (`P`) lines joined, the
//!   `since` filter and the `timestamps` prefix; [`line::Output`] the
//!   `tailLines`/`limitBytes` state across a whole answer. Pure.
//! - [`options`]: the query string into [`LogOptions`], with the API
//!   server's validation messages. Pure.
//! - [`files`]: the I/O: which files, in which order (`N.log.<stamp>`
//!   oldest first, then `N.log`), reading them, and following the current
//!   one (a 1 s poll, across a rotation) while the container runs.
//!
//! The pure parts take time as an argument and never touch the file
//! system. This module must NOT know the agent or pods: it is handed a
//! container's log directory, its restart count and a "still running?"
//! question.

pub mod files;
pub mod line;
pub mod options;

pub use line::{parse_line, CriLine, Output, Stream};
pub use options::{LogOptions, LogsError};
