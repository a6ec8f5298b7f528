//! Image GC: when the image filesystem is used past
//! `imageGCHighThresholdPercent`, unused images are removed, least recently
//! used first, down to `imageGCLowThresholdPercent`; under disk pressure
//! the eviction task asks for every unused image to go before evicting a
//! pod. [`crate::node::image_gc_policy`] decides; this file lists images and
//! containers, remembers when each image was used, and removes.

use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use super::Housekeeping;
use crate::cri::{api, RuntimeService};
use crate::node::eviction::{Observations, Signal};
use crate::node::image_gc_policy::{self, Image, ImageGc, Policy};

/// kubelet's `ImageGCPeriod`: how often image use is recorded when no GC
/// is due.
const DETECT_PERIOD: Duration = Duration::from_secs(300);

/// The image GC's memory between passes.
#[derive(Debug, Default)]
pub(super) struct ImageGcState {
    gc: ImageGc,
    last_detect: Option<Instant>,
}

impl Housekeeping {
    fn image_gc_policy(&self) -> Policy {
        Policy {
            high_threshold_percent: self.cfg.eviction.image_gc_high_threshold_percent,
            low_threshold_percent: self.cfg.eviction.image_gc_low_threshold_percent,
            min_age: self.cfg.eviction.image_minimum_gc_age,
        }
    }

    /// Runs image GC when imagefs (`obs`) is past the high threshold, or
    /// records image use when that was last done [`DETECT_PERIOD`] ago.
    pub(super) async fn image_gc_if_due(&self, runtime: &impl RuntimeService, obs: &Observations) {
        let policy = self.image_gc_policy();
        let due = obs.get(Signal::ImageFsAvailable).and_then(|o| {
            image_gc_policy::bytes_to_free(&policy, o.capacity, o.available.max(0) as u64)
        });
        let detect_due = self
            .image_gc
            .borrow()
            .last_detect
            .is_none_or(|t| t.elapsed() >= DETECT_PERIOD);
        if due.is_some() || detect_due {
            self.image_gc_pass(runtime, due).await;
        }
    }

    /// Lists images and containers and records their use; with `free`,
    /// removes unused images until that many bytes are freed (`u64::MAX`:
    /// every image that may go). Returns the bytes freed.
    pub(in crate::agent) async fn image_gc_pass(
        &self,
        runtime: &impl RuntimeService,
        free: Option<u64>,
    ) -> u64 {
        let images = match runtime.list_images(api::ListImagesRequest::default()).await {
            Ok(r) => r.images,
            Err(e) => {
                log::warn!("image GC: listing images: {e}");
                return 0;
            }
        };
        let containers = match runtime
            .list_containers(api::ListContainersRequest::default())
            .await
        {
            Ok(r) => r.containers,
            Err(e) => {
                log::warn!("image GC: listing containers: {e}");
                return 0;
            }
        };
        let mut in_use = BTreeSet::new();
        for c in &containers {
            for r in [&c.image_ref, &c.image_id] {
                if !r.is_empty() {
                    in_use.insert(r.clone());
                }
            }
            if let Some(spec) = &c.image {
                in_use.insert(spec.image.clone());
            }
        }
        let images: Vec<Image> = images
            .into_iter()
            .map(|i| Image {
                id: i.id,
                repo_tags: i.repo_tags,
                repo_digests: i.repo_digests,
                size: i.size,
                pinned: i.pinned,
            })
            .collect();
        let now = Instant::now();
        let remove = {
            let mut st = self.image_gc.borrow_mut();
            st.gc.detect(now, &images, &in_use);
            st.last_detect = Some(now);
            match free {
                Some(bytes) => st.gc.select(
                    now,
                    &images,
                    &in_use,
                    bytes,
                    self.cfg.eviction.image_minimum_gc_age,
                ),
                None => return 0,
            }
        };
        let mut freed = 0u64;
        for id in remove {
            let size = images.iter().find(|i| i.id == id).map_or(0, |i| i.size);
            let req = api::RemoveImageRequest {
                image: Some(api::ImageSpec {
                    image: id.clone(),
                    ..Default::default()
                }),
            };
            match runtime.remove_image(req).await {
                Ok(_) => {
                    log::info!("image GC: removed image {id} ({size} bytes)");
                    freed = freed.saturating_add(size);
                }
                Err(e) if e.is_not_found() => {}
                Err(e) => log::warn!("image GC: removing image {id}: {e}"),
            }
        }
        freed
    }
}
