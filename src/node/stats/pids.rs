//! Processes: `pids.current` of a cgroup, and the node's process count and
//! limit as kubelet's `pid.available` signal uses them (the smaller of
//! `kernel/pid_max` and `kernel/threads-max`; the running task count from
//! `/proc/loadavg`, which unlike sysinfo(2) does not stop at 65535).

use super::{single, Buf, StatsError};
use std::path::Path;

/// The node's process table.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct NodePids {
    /// The most tasks the kernel allows.
    pub max: u64,
    /// Tasks that exist now.
    pub running: u64,
}

/// The total task count of `/proc/loadavg` (`0.00 0.01 0.05 3/107 32096`
/// is 107).
pub fn parse_loadavg_tasks(text: &str) -> Option<u64> {
    let field = text.split_whitespace().nth(3)?;
    field.split_once('/')?.1.parse().ok()
}

/// Reads the node's task limit and count; `proc` is normally `/proc`.
pub fn read_node(proc: &Path, buf: &mut Buf) -> Result<NodePids, StatsError> {
    let pid_max = buf.parse(&proc.join("sys/kernel/pid_max"), single)?;
    let threads_max = buf.parse(&proc.join("sys/kernel/threads-max"), single)?;
    let running = buf.parse(&proc.join("loadavg"), parse_loadavg_tasks)?;
    Ok(NodePids {
        max: pid_max.min(threads_max),
        running,
    })
}

/// Reads `pids.current` of the cgroup directory `dir` (v1: of the `pids`
/// hierarchy).
pub fn read_current(dir: &Path, buf: &mut Buf) -> Result<u64, StatsError> {
    buf.parse(&dir.join("pids.current"), single)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_task_count_is_the_denominator_of_loadavg() {
        let table = [
            ("2.09 0.97 0.36 3/107 32096\n", Some(107)),
            ("0.00 0.00 0.00 1/70000 5\n", Some(70000)),
            ("0.00 0.00 0.00\n", None),
            ("0.00 0.00 0.00 107 1\n", None),
        ];
        for (text, want) in table {
            assert_eq!(parse_loadavg_tasks(text), want, "{text:?}");
        }
    }

    #[test]
    fn the_node_limit_is_the_smaller_of_pid_max_and_threads_max() {
        let t = crate::cgroups::testutil::TempTree::new("stats-pids");
        t.put("sys/kernel/pid_max", "4194304\n");
        t.put("sys/kernel/threads-max", "30000\n");
        t.put("loadavg", "0.1 0.2 0.3 2/250 99\n");
        t.put("pod/pids.current", "7\n");
        let mut buf = Buf::new();
        assert_eq!(
            read_node(t.path(), &mut buf).unwrap(),
            NodePids {
                max: 30000,
                running: 250
            }
        );
        assert_eq!(read_current(&t.path().join("pod"), &mut buf).unwrap(), 7);
    }
}
