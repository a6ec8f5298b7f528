//! cgroup v2 (unified hierarchy): one tree at the mount root, controllers
//! switched on per level through `cgroup.subtree_control`.
//!
//! Owns: creating a path while enabling the controllers picolet (and runc
//! below it) needs at every level, and writing the v2 knob files
//! (`cpu.weight`, `cpu.max`, `memory.max`, `pids.max`) for whichever of
//! those controllers the cgroup actually has.

use super::{cpu, memory, mkdir, pids, read_opt, write, CgroupError, Settings};
use crate::qos::shares_to_weight;
use std::path::Path;

/// Controllers enabled down the tree when the parent offers them.
const WANTED: &[&str] = &["cpuset", "cpu", "io", "memory", "hugetlb", "pids"];

/// Parses `cgroup.controllers` / `cgroup.subtree_control` content. A
/// leading `+` is tolerated so a plain-file test tree reads back what was
/// written.
pub(super) fn parse_list(s: &str) -> Vec<String> {
    s.split_whitespace()
        .filter(|t| !t.starts_with('-'))
        .map(|t| t.trim_start_matches('+').to_string())
        .collect()
}

/// Controllers available in `dir`: its `cgroup.controllers`, or — when the
/// file does not exist, as in a test tree — `fallback`.
fn available(
    dir: &Path,
    fallback: impl FnOnce() -> Result<Vec<String>, CgroupError>,
) -> Result<Vec<String>, CgroupError> {
    match read_opt(&dir.join("cgroup.controllers"))? {
        Some(s) => Ok(parse_list(&s)),
        None => fallback(),
    }
}

/// Enables the wanted controllers among `avail` in `dir`'s
/// `cgroup.subtree_control` (one write, only the missing ones) and returns
/// what is enabled afterwards.
fn enable(dir: &Path, avail: &[String]) -> Result<Vec<String>, CgroupError> {
    let path = dir.join("cgroup.subtree_control");
    let mut enabled = parse_list(&read_opt(&path)?.unwrap_or_default());
    let missing: Vec<&str> = WANTED
        .iter()
        .copied()
        .filter(|c| avail.iter().any(|a| a == c) && !enabled.iter().any(|e| e == c))
        .collect();
    if !missing.is_empty() {
        let value = missing
            .iter()
            .map(|c| format!("+{c}"))
            .collect::<Vec<_>>()
            .join(" ");
        write(&path, &value)?;
        enabled.extend(missing.iter().map(|c| c.to_string()));
    }
    Ok(enabled)
}

/// Creates `rel` under the root, enabling controllers at the root, every
/// intermediate level and `rel` itself (so the runtime's container cgroups
/// below it get them too).
pub(super) fn create(mount_root: &Path, rel: &str) -> Result<(), CgroupError> {
    let mut dir = mount_root.to_path_buf();
    let avail = available(&dir, || Ok(Vec::new()))?;
    let mut enabled = enable(&dir, &avail)?;
    for comp in rel.split('/').filter(|c| !c.is_empty()) {
        dir.push(comp);
        mkdir(&dir)?;
        let avail = available(&dir, || Ok(enabled.clone()))?;
        enabled = enable(&dir, &avail)?;
    }
    Ok(())
}

/// Writes `s` into the v2 files of cgroup `rel`, for the controllers it has.
pub(super) fn apply(mount_root: &Path, rel: &str, s: &Settings) -> Result<(), CgroupError> {
    let dir = mount_root.join(rel);
    let avail = available(&dir, || {
        let parent = dir.parent().unwrap_or(mount_root);
        Ok(parse_list(
            &read_opt(&parent.join("cgroup.subtree_control"))?.unwrap_or_default(),
        ))
    })?;
    let has = |c: &str| {
        let ok = avail.iter().any(|a| a == c);
        if !ok {
            log::debug!(
                "cgroup v2 controller {c} not available in {}, skipped",
                dir.display()
            );
        }
        ok
    };
    if has("cpu") {
        if let Some(shares) = s.cpu_shares {
            write(
                &dir.join(cpu::V2_WEIGHT),
                &shares_to_weight(shares).to_string(),
            )?;
        }
        if let Some(quota) = s.cpu_quota {
            write(
                &dir.join(cpu::V2_MAX),
                &cpu::v2_max_value(quota, s.cpu_period),
            )?;
        }
    }
    if let Some(limit) = s.memory_limit.filter(|_| has("memory")) {
        write(&dir.join(memory::V2_MAX), &memory::v2_max_value(limit))?;
    }
    if let Some(max) = s.pids_max.filter(|_| has("pids")) {
        write(&dir.join(pids::MAX), &pids::max_value(max))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn controller_lists_parse_with_or_without_plus_signs() {
        assert_eq!(parse_list("cpuset cpu io\n"), vec!["cpuset", "cpu", "io"]);
        assert_eq!(parse_list("+cpu +memory -io"), vec!["cpu", "memory"]);
        assert!(parse_list("\n").is_empty());
    }
}
