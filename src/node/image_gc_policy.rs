//! Image garbage collection as kubelet's image GC manager decides it, pure:
//! - when the image filesystem's usage reaches `imageGCHighThresholdPercent`,
//!   free enough to bring it down to `imageGCLowThresholdPercent`;
//! - under disk pressure, eviction asks to free every unused image;
//! - least recently used first (an image never used by a container before
//!   one that was; then the first detected first);
//! - never an image a container (running or not) uses, a pinned image (the
//!   runtime pins its sandbox image), a `pause` image (runtimes that do not
//!   pin it yet, such as containerd 1.6: removing it would leave the next
//!   sandbox to a pull that may be impossible offline), or one first seen
//!   less than `imageMinimumGCAge` ago.
//!
//! [`ImageGc`] remembers when each image was first detected and last used,
//! across passes; the agent lists images and containers, calls
//! [`ImageGc::detect`], then [`ImageGc::select`], and removes. Time comes in
//! as an argument.

use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant};

/// One image as the runtime lists it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Image {
    pub id: String,
    pub repo_tags: Vec<String>,
    pub repo_digests: Vec<String>,
    pub size: u64,
    pub pinned: bool,
}

impl Image {
    /// A sandbox image by its name: a tag of a repository called `pause`
    /// (`registry.k8s.io/pause:3.9`).
    fn is_sandbox_image(&self) -> bool {
        self.repo_tags.iter().any(|t| {
            let repo = t.rsplit_once(':').map_or(t.as_str(), |(r, _)| r);
            repo.rsplit('/').next() == Some("pause")
        })
    }

    /// True when a container's image reference names this image (its ID,
    /// a tag or a digest).
    fn used_by(&self, in_use: &BTreeSet<String>) -> bool {
        in_use.contains(&self.id)
            || self.repo_tags.iter().any(|t| in_use.contains(t))
            || self.repo_digests.iter().any(|d| in_use.contains(d))
    }
}

/// The GC settings.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Policy {
    pub high_threshold_percent: u8,
    pub low_threshold_percent: u8,
    pub min_age: Duration,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Record {
    first_detected: Instant,
    last_used: Option<Instant>,
}

/// What GC remembers of the images between passes.
#[derive(Debug, Clone, Default)]
pub struct ImageGc {
    records: BTreeMap<String, Record>,
}

/// The bytes to free on a filesystem of `capacity` with `available` left:
/// `None` below the high threshold, else down to the low threshold.
pub fn bytes_to_free(policy: &Policy, capacity: u64, available: u64) -> Option<u64> {
    if capacity == 0 {
        return None;
    }
    let used = capacity.saturating_sub(available);
    let usage_percent = (u128::from(used) * 100 / u128::from(capacity)) as u64;
    if usage_percent < u64::from(policy.high_threshold_percent) {
        return None;
    }
    let target_used =
        (u128::from(capacity) * u128::from(policy.low_threshold_percent) / 100) as u64;
    Some(used.saturating_sub(target_used))
}

impl ImageGc {
    /// Records this pass's images: new ones are first detected `now`, those
    /// in use are used `now`, and images gone from the runtime are forgotten.
    /// `in_use` holds the image references of every container.
    pub fn detect(&mut self, now: Instant, images: &[Image], in_use: &BTreeSet<String>) {
        self.records
            .retain(|id, _| images.iter().any(|i| &i.id == id));
        for image in images {
            let r = self.records.entry(image.id.clone()).or_insert(Record {
                first_detected: now,
                last_used: None,
            });
            if image.used_by(in_use) {
                r.last_used = Some(now);
            }
        }
    }

    /// The images to remove to free `bytes` (all that may go when it cannot
    /// be reached), least recently used first.
    pub fn select(
        &self,
        now: Instant,
        images: &[Image],
        in_use: &BTreeSet<String>,
        bytes: u64,
        min_age: Duration,
    ) -> Vec<String> {
        let mut candidates: Vec<(&Image, Record)> = images
            .iter()
            .filter(|i| !i.pinned && !i.is_sandbox_image() && !i.used_by(in_use))
            .filter_map(|i| self.records.get(&i.id).map(|r| (i, *r)))
            .filter(|(_, r)| now.saturating_duration_since(r.first_detected) >= min_age)
            .collect();
        candidates.sort_by_key(|(i, r)| (r.last_used, r.first_detected, i.id.clone()));
        let mut freed = 0u64;
        let mut out = Vec::new();
        for (image, _) in candidates {
            if freed >= bytes {
                break;
            }
            freed = freed.saturating_add(image.size);
            out.push(image.id.clone());
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MI: u64 = 1 << 20;

    fn image(id: &str, size_mi: u64) -> Image {
        Image {
            id: id.into(),
            repo_tags: vec![format!("docker.io/library/{id}:1")],
            repo_digests: Vec::new(),
            size: size_mi * MI,
            pinned: false,
        }
    }

    fn set(items: &[&str]) -> BTreeSet<String> {
        items.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn gc_starts_at_the_high_threshold_and_frees_down_to_the_low_one() {
        let policy = Policy {
            high_threshold_percent: 85,
            low_threshold_percent: 80,
            min_age: Duration::ZERO,
        };
        let table = [
            (1000, 200, None),
            (1000, 151, None),
            (1000, 150, Some(50)),
            (1000, 100, Some(100)),
            (0, 0, None),
        ];
        for (cap, avail, want) in table {
            assert_eq!(bytes_to_free(&policy, cap, avail), want, "{cap} {avail}");
        }
    }

    #[test]
    fn unused_images_go_least_recently_used_first_until_enough_is_freed() {
        let t0 = Instant::now();
        let s = Duration::from_secs;
        let images = vec![
            image("a", 10),
            image("b", 20),
            image("c", 30),
            image("d", 40),
        ];
        let mut gc = ImageGc::default();
        // a, b used at t0; then only b at t0+10; c never used; d in use now.
        gc.detect(t0, &images, &set(&["a", "docker.io/library/b:1"]));
        gc.detect(t0 + s(10), &images, &set(&["docker.io/library/b:1"]));
        let now = t0 + s(20);
        let in_use = set(&["d"]);
        gc.detect(now, &images, &in_use);
        assert_eq!(gc.select(now, &images, &in_use, 25 * MI, s(0)), ["c"]);
        assert_eq!(gc.select(now, &images, &in_use, 35 * MI, s(0)), ["c", "a"]);
        assert_eq!(
            gc.select(now, &images, &in_use, u64::MAX, s(0)),
            ["c", "a", "b"],
            "never the image in use"
        );
        assert_eq!(
            gc.select(now, &images, &in_use, 0, s(0)),
            Vec::<String>::new()
        );
    }

    #[test]
    fn pinned_and_young_images_stay() {
        let t0 = Instant::now();
        let mut pinned = image("pinned", 1);
        pinned.pinned = true;
        let mut pause = image("pause", 1);
        pause.repo_tags = vec!["registry.k8s.io/pause:3.9".into()];
        let images = vec![pinned, pause, image("old", 5)];
        let mut gc = ImageGc::default();
        gc.detect(t0, &images, &BTreeSet::new());
        let young = image("young", 5);
        let mut all = images.clone();
        all.push(young);
        let later = t0 + Duration::from_secs(120);
        gc.detect(later, &all, &BTreeSet::new());
        assert_eq!(
            gc.select(
                later,
                &all,
                &BTreeSet::new(),
                u64::MAX,
                Duration::from_secs(120)
            ),
            ["old"]
        );
    }

    #[test]
    fn images_gone_from_the_runtime_are_forgotten() {
        let t0 = Instant::now();
        let mut gc = ImageGc::default();
        gc.detect(t0, &[image("a", 1)], &BTreeSet::new());
        gc.detect(t0, &[], &BTreeSet::new());
        assert!(gc.records.is_empty());
        // Seen again later: its age starts again.
        let later = t0 + Duration::from_secs(60);
        gc.detect(later, &[image("a", 1)], &BTreeSet::new());
        let sel = gc.select(
            later,
            &[image("a", 1)],
            &BTreeSet::new(),
            1,
            Duration::from_secs(30),
        );
        assert!(sel.is_empty());
    }
}
