//! Pure: the Node's `status.images` as kubelet reports it, from the
//! runtime's image list (CRI `ListImages`): what the scheduler's
//! ImageLocality scoring reads.

use k8s_openapi::api::core::v1::ContainerImage;

/// kubelet's `MaxNamesPerImageInNodeStatus`.
pub const MAX_NAMES_PER_IMAGE: usize = 5;

/// An image in the runtime, as the Node's `status.images` is made from.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RuntimeImage {
    pub id: String,
    pub repo_tags: Vec<String>,
    pub repo_digests: Vec<String>,
    pub size_bytes: u64,
}

/// kubelet's `status.images`: the largest images first (equal sizes by
/// ID, descending), at most `max` of them (`nodeStatusMaxImages`; -1: all),
/// each named by its repo digests then its repo tags, at most
/// [`MAX_NAMES_PER_IMAGE`] names.
pub fn node_images(images: &[RuntimeImage], max: i32) -> Vec<ContainerImage> {
    let mut sorted: Vec<&RuntimeImage> = images.iter().collect();
    sorted.sort_by(|a, b| {
        b.size_bytes
            .cmp(&a.size_bytes)
            .then_with(|| b.id.cmp(&a.id))
    });
    if let Ok(max) = usize::try_from(max) {
        sorted.truncate(max);
    }
    sorted
        .into_iter()
        .map(|i| {
            let names: Vec<String> = i
                .repo_digests
                .iter()
                .chain(&i.repo_tags)
                .take(MAX_NAMES_PER_IMAGE)
                .cloned()
                .collect();
            ContainerImage {
                names: Some(names).filter(|n| !n.is_empty()),
                size_bytes: Some(i.size_bytes.min(i64::MAX as u64) as i64),
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn status_images_are_the_largest_first_named_by_digests_then_tags() {
        let img = |id: &str, size, tags: &[&str], digests: &[&str]| RuntimeImage {
            id: id.into(),
            repo_tags: tags.iter().map(|s| s.to_string()).collect(),
            repo_digests: digests.iter().map(|s| s.to_string()).collect(),
            size_bytes: size,
        };
        let images = [
            img("sha256:a", 10, &["busybox:1"], &["busybox@sha256:1"]),
            img(
                "sha256:b",
                30,
                &["big:1", "big:2", "big:3", "big:4"],
                &["big@sha256:9", "big@sha256:8"],
            ),
            img("sha256:c", 10, &[], &["c@sha256:c"]),
            img("sha256:d", 5, &[], &[]),
        ];
        let got = node_images(&images, 50);
        let names: Vec<_> = got
            .iter()
            .map(|i| {
                (
                    i.names.clone().unwrap_or_default().join(","),
                    i.size_bytes.unwrap(),
                )
            })
            .collect();
        assert_eq!(
            names,
            [
                (
                    "big@sha256:9,big@sha256:8,big:1,big:2,big:3".to_string(),
                    30
                ),
                ("c@sha256:c".to_string(), 10),
                ("busybox@sha256:1,busybox:1".to_string(), 10),
                (String::new(), 5),
            ]
        );
        assert_eq!(node_images(&images, 2).len(), 2);
        assert_eq!(node_images(&images, 0).len(), 0);
        assert_eq!(node_images(&images, -1).len(), 4);
    }
}
