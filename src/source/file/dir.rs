//! [`ManifestDir`]: a static pod directory (`staticPodPath`) read into a
//! complete set of pods, and what the last scan made of each file, so an
//! unchanged file is neither parsed nor logged again. The one part of
//! [`super`] that reads the filesystem ([`ManifestDir::scan`]); what a
//! single manifest means is [`super::parse_manifest`]'s.

use super::*;

/// What the last scan made of one file, so unchanged files are neither
/// re-parsed nor re-logged.
struct Cached {
    /// The file's content md5, or the text of the error that kept us from
    /// reading it.
    key: CacheKey,
    /// The parsed pod; `None` when the file is broken. Shared with the sets
    /// handed out, so a rescan of unchanged files copies nothing.
    pod: Option<Rc<Pod>>,
}

#[derive(PartialEq)]
enum CacheKey {
    Content(md5::Digest),
    Error(String),
    /// Read but not parsed yet: the scan's parse budget was spent.
    Deferred,
}

/// A static pod directory (`staticPodPath`) and what picolet last read from
/// it. As in the kubelet, the path may also be a single manifest file.
pub struct ManifestDir {
    path: PathBuf,
    pub(super) node_name: String,
    cache: HashMap<PathBuf, Cached>,
    /// Duplicate `(kept, dropped)` file pairs already reported.
    duplicates: HashSet<(PathBuf, PathBuf)>,
    /// Whether the "directory missing" warning was given since it vanished.
    warned_missing: bool,
    /// A listing succeeded (or found the path missing) at least once: the
    /// set is authoritative from then on, also across a later error.
    listed: bool,
    /// Last directory read error logged, so it is logged once.
    dir_error: Option<String>,
    /// The last set returned, handed out again if the directory cannot be
    /// listed for a reason other than not existing.
    last: Vec<Rc<Pod>>,
    /// How many problems were logged (each problem is logged once).
    pub(super) reported: usize,
    /// The last scan left changed files unparsed (see [`SCAN_BUDGET_BYTES`]).
    deferred: bool,
    #[cfg(test)]
    pub(super) messages: Vec<String>,
}

impl ManifestDir {
    /// A manifest directory for node `node_name`; nothing is read yet.
    pub fn new(path: impl Into<PathBuf>, node_name: impl Into<String>) -> Self {
        ManifestDir {
            path: path.into(),
            node_name: node_name.into(),
            cache: HashMap::new(),
            duplicates: HashSet::new(),
            warned_missing: false,
            listed: false,
            dir_error: None,
            last: Vec::new(),
            reported: 0,
            deferred: false,
            #[cfg(test)]
            messages: Vec::new(),
        }
    }

    /// Log a problem. Callers make sure each distinct problem comes here
    /// once, however many scans see it.
    fn report(&mut self, level: log::Level, message: String) {
        self.reported += 1;
        log::log!(level, "{message}");
        #[cfg(test)]
        self.messages.push(message);
    }

    /// The directory (or file) being read.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Whether the last [`scan`](Self::scan) left changed files for the next
    /// one, having spent its [`SCAN_BUDGET_BYTES`]. Their previous pods (if
    /// any) stay in the set meanwhile; the caller should scan again soon.
    pub fn has_deferred(&self) -> bool {
        self.deferred
    }

    /// Read every manifest and return the complete set of valid pods, in file
    /// name order. Broken files are logged once per distinct content and
    /// skipped; a missing directory is an empty set (with one warning). If the
    /// directory exists but cannot be listed (permissions, I/O error) the
    /// previous set is returned, so a transient error never kills pods.
    pub fn scan(&mut self) -> SourceUpdate {
        let pods = match self.list() {
            Ok(files) => {
                self.warned_missing = false;
                self.listed = true;
                self.dir_error = None;
                let pods = self.read_files(files);
                self.last = pods.clone();
                pods
            }
            Err(e) if e.kind() == io::ErrorKind::NotFound => {
                // A missing path is a successful read of "no static pods".
                self.listed = true;
                if !self.warned_missing {
                    let message = format!(
                        "static pod path {} does not exist; no static pods until it does",
                        self.path.display()
                    );
                    self.report(log::Level::Warn, message);
                    self.warned_missing = true;
                }
                self.cache.clear();
                self.duplicates.clear();
                self.last.clear();
                Vec::new()
            }
            Err(e) => {
                let msg = e.to_string();
                if self.dir_error.as_deref() != Some(msg.as_str()) {
                    let message = format!(
                        "cannot list static pod path {}: {msg}; keeping the previous {} pod(s)",
                        self.path.display(),
                        self.last.len()
                    );
                    self.report(log::Level::Error, message);
                    self.dir_error = Some(msg);
                }
                self.last.clone()
            }
        };
        SourceUpdate {
            source: PodSource::File,
            pods,
            authoritative: self.listed,
        }
    }

    /// The candidate manifest files, sorted by name, each with whether it
    /// is a regular file (a FIFO, socket or device is listed, to be
    /// reported, but never opened: opening some devices has effects).
    pub(super) fn list(&self) -> io::Result<Vec<(PathBuf, bool)>> {
        let meta = fs::metadata(&self.path)?;
        if meta.is_file() {
            return Ok(vec![(self.path.clone(), true)]);
        }
        let mut files = Vec::new();
        for entry in fs::read_dir(&self.path)? {
            let entry = entry?;
            let name = entry.file_name();
            if is_ignored_file_name(&name.to_string_lossy()) {
                continue;
            }
            let path = entry.path();
            // Follow symlinks, as the kubelet does.
            match fs::metadata(&path) {
                Ok(m) if m.is_file() => files.push((path, true)),
                Ok(m) if m.is_dir() => {
                    log::debug!("not recursing into manifest directory {}", path.display())
                }
                Ok(_) => files.push((path, false)),
                // Dangling symlink, or deleted since read_dir.
                Err(_) => {}
            }
        }
        files.sort();
        Ok(files)
    }

    fn read_files(&mut self, files: Vec<(PathBuf, bool)>) -> Vec<Rc<Pod>> {
        let mut cache = HashMap::with_capacity(files.len());
        let mut budget = Budget {
            left: SCAN_BUDGET_BYTES,
            parsed_any: false,
        };
        self.deferred = false;
        for (path, regular) in files {
            let previous = self.cache.remove(&path);
            let cached = self.read_one(&path, regular, previous, &mut budget);
            cache.insert(path, cached);
        }
        self.cache = cache; // files that vanished drop out here

        // Duplicate names (or explicit UIDs): the pod already running from
        // the last set wins, so a new file never takes down an established
        // workload; between newcomers, the first file by name. The set
        // itself stays in file-name order.
        let established: HashSet<&str> = self
            .last
            .iter()
            .filter_map(|p| p.metadata.uid.as_deref())
            .collect();
        let mut paths: Vec<&PathBuf> = self.cache.keys().collect();
        paths.sort();
        let mut by_priority = paths.clone();
        by_priority.sort_by_key(|path| {
            let uid = self.cache[*path]
                .pod
                .as_ref()
                .and_then(|p| p.metadata.uid.as_deref());
            !uid.is_some_and(|u| established.contains(u))
        });
        let mut by_name: HashMap<(String, String), &Path> = HashMap::new();
        let mut by_uid: HashMap<String, &Path> = HashMap::new();
        let mut duplicates = HashSet::new();
        let mut messages = Vec::new();
        let mut winners: HashSet<&Path> = HashSet::new();
        for path in by_priority {
            let Some(pod) = self.cache[path].pod.as_ref() else {
                continue;
            };
            let name = (
                pod.metadata.namespace.clone().unwrap_or_default(),
                pod.metadata.name.clone().unwrap_or_default(),
            );
            let uid = pod.metadata.uid.clone().unwrap_or_default();
            let clash = match by_name.get(&name) {
                Some(first) => Some((*first, format!("pod {}/{}", name.0, name.1))),
                None => by_uid
                    .get(&uid)
                    .map(|first| (*first, format!("pod UID {uid}"))),
            };
            if let Some((first, what)) = clash {
                let pair = (first.to_owned(), path.clone());
                if !self.duplicates.contains(&pair) {
                    messages.push(format!(
                        "static pod manifests {} and {} both define {what}; keeping {} and ignoring {}",
                        first.display(),
                        path.display(),
                        first.display(),
                        path.display()
                    ));
                }
                duplicates.insert(pair);
                continue;
            }
            by_name.insert(name, path);
            by_uid.insert(uid, path);
            winners.insert(path);
        }
        let pods: Vec<Rc<Pod>> = paths
            .into_iter()
            .filter(|p| winners.contains(p.as_path()))
            .filter_map(|p| self.cache[p].pod.clone())
            .collect();
        self.duplicates = duplicates;
        for message in messages {
            self.report(log::Level::Error, message);
        }
        pods
    }

    /// Read and parse one file, reusing (and not re-logging) the previous
    /// result when the content is unchanged. A changed file that does not fit
    /// the scan's `budget` keeps its previous result, to be parsed next time.
    fn read_one(
        &mut self,
        path: &Path,
        regular: bool,
        previous: Option<Cached>,
        budget: &mut Budget,
    ) -> Cached {
        let read = if regular {
            read_limited(path)
        } else {
            Err(ManifestError::NotAFile {
                path: path.to_owned(),
            })
        };
        let bytes = match read {
            Ok(bytes) => bytes,
            Err(e) => {
                let key = CacheKey::Error(e.to_string());
                let transient = matches!(e, ManifestError::Io { .. });
                let (logged, last_pod) = match previous {
                    Some(p) => (p.key == key, p.pod),
                    None => (false, None),
                };
                // An I/O hiccup on a file we have already parsed keeps its
                // pod; anything else (too large) drops it.
                let pod = if transient { last_pod } else { None };
                if !logged {
                    let what = if pod.is_some() {
                        "keeping the pod it last defined"
                    } else {
                        "skipping it"
                    };
                    self.report(log::Level::Error, format!("{e}; {what}"));
                }
                return Cached { key, pod };
            }
        };
        let key = CacheKey::Content(md5::compute(&bytes));
        if previous.as_ref().is_some_and(|p| p.key == key) {
            return previous.expect("checked just above");
        }
        if budget.parsed_any && bytes.len() > budget.left {
            self.deferred = true;
            log::debug!(
                "manifest {} changed; parsing it in the next scan (this one parsed {} bytes)",
                path.display(),
                SCAN_BUDGET_BYTES - budget.left
            );
            return match previous {
                Some(p) => Cached {
                    key: CacheKey::Deferred,
                    pod: p.pod,
                },
                None => Cached {
                    key: CacheKey::Deferred,
                    pod: None,
                },
            };
        }
        budget.parsed_any = true;
        budget.left = budget.left.saturating_sub(bytes.len());
        let parsed = match std::str::from_utf8(&bytes) {
            Ok(text) => parse_manifest_with_unknown_fields(text, path, &self.node_name),
            Err(_) => Err(ManifestError::NotText {
                path: path.to_owned(),
            }),
        };
        match parsed {
            Ok((pod, unknown)) => {
                for field in unknown {
                    self.report(log::Level::Warn, field.to_string());
                }
                Cached {
                    key,
                    pod: Some(Rc::new(pod)),
                }
            }
            Err(e) => {
                self.report(log::Level::Error, format!("{e}; skipping it"));
                Cached { key, pod: None }
            }
        }
    }
}

/// How much more one scan may parse.
struct Budget {
    /// Bytes left of [`SCAN_BUDGET_BYTES`].
    left: usize,
    /// A file was parsed already (the first one always is).
    parsed_any: bool,
}

/// Read a file, refusing anything over [`MAX_MANIFEST_BYTES`] without
/// reading it all, and anything that is not a regular file. The listing
/// already left FIFOs and devices unopened; this covers one swapped in
/// since: the open neither blocks (a FIFO would hang the thread until
/// someone writes to it) nor adopts a terminal.
pub(super) fn read_limited(path: &Path) -> Result<Vec<u8>, ManifestError> {
    let io_err = |source| ManifestError::Io {
        path: path.to_owned(),
        source,
    };
    let too_large = |size| ManifestError::TooLarge {
        path: path.to_owned(),
        size,
        limit: MAX_MANIFEST_BYTES,
    };
    let file = fs::OpenOptions::new()
        .read(true)
        .custom_flags((rustix::fs::OFlags::NONBLOCK | rustix::fs::OFlags::NOCTTY).bits() as i32)
        .open(path)
        .map_err(io_err)?;
    let meta = file.metadata().map_err(io_err)?;
    if !meta.is_file() {
        return Err(ManifestError::NotAFile {
            path: path.to_owned(),
        });
    }
    let size = meta.len();
    if size > MAX_MANIFEST_BYTES {
        return Err(too_large(size));
    }
    let mut bytes = Vec::with_capacity(size as usize);
    // The file may grow between stat and read: read one byte past the limit
    // to notice.
    file.take(MAX_MANIFEST_BYTES + 1)
        .read_to_end(&mut bytes)
        .map_err(io_err)?;
    if bytes.len() as u64 > MAX_MANIFEST_BYTES {
        return Err(too_large(bytes.len() as u64));
    }
    Ok(bytes)
}
