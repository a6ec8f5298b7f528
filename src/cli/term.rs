//! How the CLI's output looks on this terminal: colours only when stdout is
//! a terminal and `NO_COLOR` is not set (<https://no-color.org>), and
//! tables cut to the terminal's width (`TIOCGWINSZ`; 80 columns when it
//! cannot be read, e.g. on a serial console that reports 0).
//!
//! [`Style::decide`] and the painting are pure; [`Style::detect`] asks the
//! kernel.

/// The CLI's output style.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Style {
    /// ANSI colours on.
    pub colour: bool,
    /// Columns a table may use; `usize::MAX`: never cut (not a terminal).
    pub width: usize,
}

/// A colour for a word the CLI prints.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Tone {
    Good,
    Warn,
    Bad,
    /// Headings.
    Bold,
}

impl Style {
    /// Plain, uncut: what a pipe or a test gets.
    pub const PLAIN: Style = Style {
        colour: false,
        width: usize::MAX,
    };

    /// The style for stdout: is it a terminal, is `NO_COLOR` set (to
    /// anything non-empty), and its size in columns if the kernel says.
    pub fn decide(tty: bool, no_color: bool, columns: Option<u16>) -> Style {
        if !tty {
            return Style::PLAIN;
        }
        Style {
            colour: !no_color,
            width: match columns {
                Some(c) if c > 0 => usize::from(c),
                _ => 80,
            },
        }
    }

    /// The style for this process's stdout.
    pub fn detect() -> Style {
        let out = std::io::stdout();
        let tty = rustix::termios::isatty(&out);
        let no_color = std::env::var_os("NO_COLOR").is_some_and(|v| !v.is_empty());
        let columns = rustix::termios::tcgetwinsize(&out).ok().map(|w| w.ws_col);
        Style::decide(tty, no_color, columns)
    }

    /// `text` in `tone`, if colours are on.
    pub fn paint(&self, text: &str, tone: Tone) -> String {
        if !self.colour {
            return text.to_string();
        }
        let code = match tone {
            Tone::Good => "32",
            Tone::Warn => "33",
            Tone::Bad => "31",
            Tone::Bold => "1",
        };
        format!("\x1b[{code}m{text}\x1b[0m")
    }
}

/// The tone of a pod or container status word as `get pods` and
/// `describe` show it: running and ready are good, completion is plain,
/// waiting is a warning, errors and back-offs are bad.
pub fn status_tone(status: &str) -> Option<Tone> {
    let s = status.strip_prefix("Init:").unwrap_or(status);
    match s {
        "Running" | "True" | "ok" => Some(Tone::Good),
        "Completed" | "Succeeded" => None,
        "Pending" | "ContainerCreating" | "PodInitializing" | "Terminating" | "Unknown"
        | "False" | "warn" | "Waiting" => Some(Tone::Warn),
        _ if s.contains("Err")
            || s.contains("BackOff")
            || s.contains("Error")
            || s.contains("Failed")
            || s.contains("Killed")
            || s == "fail"
            || s == "Evicted"
            || s == "Terminated" =>
        {
            Some(Tone::Bad)
        }
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn colours_and_widths_only_apply_on_a_terminal_without_no_color() {
        assert_eq!(Style::decide(false, false, Some(120)), Style::PLAIN);
        assert_eq!(
            Style::decide(true, false, Some(120)),
            Style {
                colour: true,
                width: 120
            }
        );
        assert_eq!(
            Style::decide(true, true, None),
            Style {
                colour: false,
                width: 80
            }
        );
        assert_eq!(Style::decide(true, false, Some(0)).width, 80);
    }

    #[test]
    fn painting_wraps_the_text_in_ansi_codes_only_when_colours_are_on() {
        let on = Style::decide(true, false, None);
        assert_eq!(on.paint("Running", Tone::Good), "\x1b[32mRunning\x1b[0m");
        assert_eq!(Style::PLAIN.paint("Running", Tone::Good), "Running");
    }

    #[test]
    fn status_words_get_the_tone_an_operator_expects() {
        assert_eq!(status_tone("Running"), Some(Tone::Good));
        assert_eq!(status_tone("CrashLoopBackOff"), Some(Tone::Bad));
        assert_eq!(status_tone("Init:ErrImagePull"), Some(Tone::Bad));
        assert_eq!(status_tone("OOMKilled"), Some(Tone::Bad));
        assert_eq!(status_tone("ContainerCreating"), Some(Tone::Warn));
        assert_eq!(status_tone("Completed"), None);
        assert_eq!(status_tone("Init:0/2"), None);
    }
}
