//! Container log rotation (kubelet's container log manager): when a
//! running container's current log exceeds `containerLogMaxSize`, rename it
//! with a timestamp, ask the runtime to reopen it, and keep at most
//! `containerLogMaxFiles` files. It must not know anything of pods beyond
//! their log paths.

use std::fs;
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use super::{Housekeeping, HousekeepingHost};
use crate::cri::{api, RuntimeService};
use crate::rt;

const ROTATION_PERIOD: Duration = Duration::from_secs(10);

impl Housekeeping {
    /// The log rotation task: a pass every [`ROTATION_PERIOD`].
    pub(in crate::agent) async fn log_rotation_loop(&self, host: &impl HousekeepingHost) {
        loop {
            rt::sleep_on_grid(ROTATION_PERIOD).await;
            self.rotate_logs(host.runtime(), host.running_container_logs())
                .await;
        }
    }

    /// Rotates the `running` containers' logs (ID, current file) that
    /// grew past the limit.
    async fn rotate_logs(&self, runtime: &impl RuntimeService, running: Vec<(String, PathBuf)>) {
        for (id, path) in running {
            let Ok(meta) = fs::metadata(&path) else {
                continue;
            };
            if meta.len() < self.cfg.container_log_max_size {
                continue;
            }
            let stamp = crate::logger::compact_timestamp(SystemTime::now());
            let rotated = PathBuf::from(format!("{}.{stamp}", path.display()));
            if let Err(e) = fs::rename(&path, &rotated) {
                log::warn!("rotating {}: {e}", path.display());
                continue;
            }
            let req = api::ReopenContainerLogRequest { container_id: id };
            if let Err(e) = runtime.reopen_container_log(req).await {
                log::warn!("reopening log {}: {e}", path.display());
                let _ = fs::rename(&rotated, &path);
                continue;
            }
            prune_rotated(
                &path,
                self.cfg.container_log_max_files.saturating_sub(1) as usize,
            );
        }
    }
}

/// Keeps the newest `keep` rotated files of `current` (`N.log.<stamp>`).
fn prune_rotated(current: &Path, keep: usize) {
    let (Some(dir), Some(base)) = (current.parent(), current.file_name()) else {
        return;
    };
    let prefix = format!("{}.", base.to_string_lossy());
    let mut rotated: Vec<PathBuf> = fs::read_dir(dir)
        .into_iter()
        .flatten()
        .flatten()
        .filter(|e| e.file_name().to_string_lossy().starts_with(&prefix))
        .map(|e| e.path())
        .collect();
    rotated.sort();
    while rotated.len() > keep {
        let oldest = rotated.remove(0);
        let _ = fs::remove_file(oldest);
    }
}
