//! Container log rotation (kubelet's container log manager): when a
//! running container's current log exceeds `containerLogMaxSize`, rename it
//! with a timestamp, ask the runtime to reopen it, and keep at most
//! `containerLogMaxFiles` files. It must not know anything of pods beyond
//! their log paths.

use std::fs;
use std::path::{Path, PathBuf};
use std::rc::Rc;
use std::time::{Duration, SystemTime};

use crate::agent::Agent;
use crate::cri::{api, RuntimeService};
use crate::pleg::State;
use crate::pod::facts;
use crate::rt;

const ROTATION_PERIOD: Duration = Duration::from_secs(10);

impl<R: RuntimeService> Agent<R> {
    pub(in crate::agent) async fn log_rotation_loop(self: Rc<Self>) {
        loop {
            rt::sleep(ROTATION_PERIOD).await;
            self.rotate_logs().await;
        }
    }

    async fn rotate_logs(&self) {
        let running: Vec<(String, PathBuf)> = {
            let pods = self.pods.borrow();
            pods.values()
                .flat_map(|e| {
                    let dir = facts::log_dir(&self.cfg.pod_logs_dir, &e.pod);
                    e.observed
                        .containers
                        .iter()
                        .filter(|c| c.state == State::Running)
                        .map(move |c| {
                            (
                                c.id.clone(),
                                dir.join(&c.name).join(format!("{}.log", c.attempt)),
                            )
                        })
                        .collect::<Vec<_>>()
                })
                .collect()
        };
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
            if let Err(e) = self.runtime.reopen_container_log(req).await {
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
