//! Eviction signals as kubelet defines them, and the node conditions they
//! drive: `memory.available` is the machine's memory minus the root
//! cgroup's working set, `allocatableMemory.available` the pods' allocatable
//! memory minus the pods cgroup's working set, the filesystem signals are
//! statfs's available bytes and free inodes, `pid.available` the kernel's
//! task limit minus the tasks that exist.

use crate::node::stats::fs::FsStats;
use crate::node::stats::node::{NodeStats, Wanted};

/// One eviction signal (kubelet's names; see [`Signal::as_str`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Signal {
    MemoryAvailable,
    AllocatableMemoryAvailable,
    NodeFsAvailable,
    NodeFsInodesFree,
    ImageFsAvailable,
    ImageFsInodesFree,
    ContainerFsAvailable,
    ContainerFsInodesFree,
    PidAvailable,
}

impl Signal {
    pub const ALL: [Signal; 9] = [
        Signal::MemoryAvailable,
        Signal::AllocatableMemoryAvailable,
        Signal::NodeFsAvailable,
        Signal::NodeFsInodesFree,
        Signal::ImageFsAvailable,
        Signal::ImageFsInodesFree,
        Signal::ContainerFsAvailable,
        Signal::ContainerFsInodesFree,
        Signal::PidAvailable,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Signal::MemoryAvailable => "memory.available",
            Signal::AllocatableMemoryAvailable => "allocatableMemory.available",
            Signal::NodeFsAvailable => "nodefs.available",
            Signal::NodeFsInodesFree => "nodefs.inodesFree",
            Signal::ImageFsAvailable => "imagefs.available",
            Signal::ImageFsInodesFree => "imagefs.inodesFree",
            Signal::ContainerFsAvailable => "containerfs.available",
            Signal::ContainerFsInodesFree => "containerfs.inodesFree",
            Signal::PidAvailable => "pid.available",
        }
    }

    pub fn parse(s: &str) -> Option<Signal> {
        Signal::ALL.into_iter().find(|sig| sig.as_str() == s)
    }

    /// The node condition this signal's pressure sets.
    pub fn condition(self) -> Condition {
        match self {
            Signal::MemoryAvailable | Signal::AllocatableMemoryAvailable => {
                Condition::MemoryPressure
            }
            Signal::PidAvailable => Condition::PIDPressure,
            _ => Condition::DiskPressure,
        }
    }

    /// The resource kubelet names in an eviction message.
    pub fn resource(self) -> &'static str {
        match self.condition() {
            Condition::MemoryPressure => "memory",
            Condition::PIDPressure => "pids",
            Condition::DiskPressure if self.counts_inodes() => "inodes",
            Condition::DiskPressure => "ephemeral-storage",
        }
    }

    /// True for the `*.inodesFree` signals (a count, not bytes).
    pub fn counts_inodes(self) -> bool {
        matches!(
            self,
            Signal::NodeFsInodesFree | Signal::ImageFsInodesFree | Signal::ContainerFsInodesFree
        )
    }

    /// True when deleting dead containers and unused images can relieve
    /// this signal (kubelet's node-level reclaim).
    pub fn reclaimable_by_gc(self) -> bool {
        self.condition() == Condition::DiskPressure
    }

    fn index(self) -> usize {
        self as usize
    }
}

/// The node conditions eviction sets.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Condition {
    MemoryPressure,
    DiskPressure,
    PIDPressure,
}

impl Condition {
    pub const ALL: [Condition; 3] = [
        Condition::MemoryPressure,
        Condition::DiskPressure,
        Condition::PIDPressure,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Condition::MemoryPressure => "MemoryPressure",
            Condition::DiskPressure => "DiskPressure",
            Condition::PIDPressure => "PIDPressure",
        }
    }

    /// The taint the node lifecycle controller puts on a node with this
    /// condition (`NoSchedule`).
    pub fn taint_key(self) -> &'static str {
        match self {
            Condition::MemoryPressure => "node.kubernetes.io/memory-pressure",
            Condition::DiskPressure => "node.kubernetes.io/disk-pressure",
            Condition::PIDPressure => "node.kubernetes.io/pid-pressure",
        }
    }

    fn index(self) -> usize {
        self as usize
    }
}

/// Which pressure conditions are true.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Conditions([bool; 3]);

impl Conditions {
    pub fn get(&self, c: Condition) -> bool {
        self.0[c.index()]
    }

    pub fn set(&mut self, c: Condition) {
        self.0[c.index()] = true;
    }

    pub fn any(&self) -> bool {
        self.0.iter().any(|b| *b)
    }

    /// The true ones, in kubelet's order.
    pub fn iter(&self) -> impl Iterator<Item = Condition> + '_ {
        Condition::ALL.into_iter().filter(|c| self.get(*c))
    }
}

/// The node's pressure conditions, written by the eviction task and read
/// by the Node status and admission: a shared cell, cheap to clone.
#[derive(Clone, Debug, Default)]
pub struct PressureCell(std::rc::Rc<std::cell::Cell<Conditions>>);

impl PressureCell {
    pub fn get(&self) -> Conditions {
        self.0.get()
    }

    /// Stores `now` and returns what was there.
    pub fn replace(&self, now: Conditions) -> Conditions {
        self.0.replace(now)
    }
}

/// One signal's value: how much is available (negative when usage is above
/// allocatable) out of what capacity. Bytes, inodes or tasks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Observation {
    pub available: i64,
    pub capacity: u64,
}

/// The observed signals of one pass; a signal whose numbers could not be
/// read is absent, and no threshold on it is met.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Observations([Option<Observation>; 9]);

impl Observations {
    pub fn get(&self, s: Signal) -> Option<Observation> {
        self.0[s.index()]
    }

    pub fn set(&mut self, s: Signal, o: Observation) {
        self.0[s.index()] = Some(o);
    }

    /// The observed signals, in [`Signal::ALL`]'s order.
    pub fn iter(&self) -> impl Iterator<Item = (Signal, Observation)> + '_ {
        Signal::ALL
            .into_iter()
            .filter_map(|s| self.get(s).map(|o| (s, o)))
    }
}

fn clamp(v: u64) -> i64 {
    i64::try_from(v).unwrap_or(i64::MAX)
}

fn bytes(fs: &FsStats) -> Observation {
    Observation {
        available: clamp(fs.available_bytes),
        capacity: fs.capacity_bytes,
    }
}

fn inodes(fs: &FsStats) -> Observation {
    Observation {
        available: clamp(fs.inodes_free),
        capacity: fs.inodes,
    }
}

/// The signals from one pass of node stats. `allocatable_memory` is the
/// Node's allocatable memory (capacity minus reservations and the hard
/// eviction threshold). Without a dedicated image filesystem, the imagefs
/// (and containerfs) signals are nodefs's, as in kubelet.
pub fn observe(stats: &NodeStats, allocatable_memory: Option<u64>) -> Observations {
    let mut o = Observations::default();
    if let (Some(cap), Some(ws)) = (stats.memory_capacity, stats.memory_working_set) {
        o.set(
            Signal::MemoryAvailable,
            Observation {
                available: clamp(cap) - clamp(ws),
                capacity: cap,
            },
        );
    }
    if let (Some(cap), Some(ws)) = (allocatable_memory, stats.pods_working_set) {
        o.set(
            Signal::AllocatableMemoryAvailable,
            Observation {
                available: clamp(cap) - clamp(ws),
                capacity: cap,
            },
        );
    }
    if let Some(fs) = &stats.nodefs {
        o.set(Signal::NodeFsAvailable, bytes(fs));
        o.set(Signal::NodeFsInodesFree, inodes(fs));
        o.set(Signal::ContainerFsAvailable, bytes(fs));
        o.set(Signal::ContainerFsInodesFree, inodes(fs));
    }
    if let Some(fs) = stats.imagefs.as_ref().or(stats.nodefs.as_ref()) {
        o.set(Signal::ImageFsAvailable, bytes(fs));
        o.set(Signal::ImageFsInodesFree, inodes(fs));
    }
    if let Some(p) = stats.pids {
        o.set(
            Signal::PidAvailable,
            Observation {
                available: clamp(p.max) - clamp(p.running),
                capacity: p.max,
            },
        );
    }
    o
}

/// What a pass must read to observe `signals` (a pass with no threshold
/// on memory or pids skips their files; the filesystems, which image GC
/// watches too, are always read).
pub fn reads_for(signals: impl IntoIterator<Item = Signal>) -> Wanted {
    let mut w = Wanted {
        memory: false,
        pids: false,
    };
    for s in signals {
        match s {
            Signal::MemoryAvailable | Signal::AllocatableMemoryAvailable => w.memory = true,
            Signal::PidAvailable => w.pids = true,
            _ => {}
        }
    }
    w
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::node::stats::pids::NodePids;

    #[test]
    fn a_pass_reads_memory_and_pids_only_for_thresholds_on_them() {
        let none = Wanted {
            memory: false,
            pids: false,
        };
        assert_eq!(reads_for([]), none);
        assert_eq!(
            reads_for([Signal::NodeFsAvailable, Signal::ImageFsInodesFree]),
            none
        );
        let memory = reads_for([Signal::AllocatableMemoryAvailable]);
        assert!(memory.memory && !memory.pids);
        assert_eq!(
            reads_for([Signal::MemoryAvailable, Signal::PidAvailable]),
            Wanted::ALL
        );
    }

    fn fs(cap: u64, avail: u64, inodes: u64, free: u64) -> FsStats {
        FsStats {
            capacity_bytes: cap,
            available_bytes: avail,
            inodes,
            inodes_free: free,
            fsid: 1,
        }
    }

    #[test]
    fn every_signal_name_round_trips_and_matches_the_config_s_list() {
        for s in Signal::ALL {
            assert_eq!(Signal::parse(s.as_str()), Some(s));
            assert!(
                crate::config::EVICTION_SIGNALS.contains(&s.as_str()),
                "{s:?}"
            );
        }
        assert_eq!(crate::config::EVICTION_SIGNALS.len(), Signal::ALL.len());
        assert_eq!(Signal::parse("memory.free"), None);
    }

    #[test]
    fn each_signal_drives_its_condition_and_names_its_resource() {
        let table = [
            (Signal::MemoryAvailable, Condition::MemoryPressure, "memory"),
            (
                Signal::AllocatableMemoryAvailable,
                Condition::MemoryPressure,
                "memory",
            ),
            (
                Signal::NodeFsAvailable,
                Condition::DiskPressure,
                "ephemeral-storage",
            ),
            (Signal::NodeFsInodesFree, Condition::DiskPressure, "inodes"),
            (
                Signal::ImageFsAvailable,
                Condition::DiskPressure,
                "ephemeral-storage",
            ),
            (Signal::PidAvailable, Condition::PIDPressure, "pids"),
        ];
        for (s, c, r) in table {
            assert_eq!((s.condition(), s.resource()), (c, r), "{s:?}");
        }
    }

    #[test]
    fn signals_are_computed_as_kubelet_defines_them() {
        let stats = NodeStats {
            memory_capacity: Some(1000),
            memory_working_set: Some(700),
            pods_working_set: Some(500),
            nodefs: Some(fs(10_000, 2_000, 100, 40)),
            logfs: None,
            imagefs: None,
            pids: Some(NodePids {
                max: 32768,
                running: 200,
            }),
        };
        let o = observe(&stats, Some(400));
        let av = |s| o.get(s).map(|o: Observation| (o.available, o.capacity));
        assert_eq!(av(Signal::MemoryAvailable), Some((300, 1000)));
        assert_eq!(av(Signal::AllocatableMemoryAvailable), Some((-100, 400)));
        assert_eq!(av(Signal::NodeFsAvailable), Some((2000, 10_000)));
        assert_eq!(av(Signal::NodeFsInodesFree), Some((40, 100)));
        assert_eq!(
            av(Signal::ImageFsAvailable),
            Some((2000, 10_000)),
            "no imagefs: nodefs"
        );
        assert_eq!(av(Signal::PidAvailable), Some((32568, 32768)));

        let split = NodeStats {
            imagefs: Some(fs(50, 5, 10, 1)),
            ..stats
        };
        let o = observe(&split, None);
        assert_eq!(o.get(Signal::ImageFsAvailable).unwrap().available, 5);
        assert_eq!(o.get(Signal::ImageFsInodesFree).unwrap().available, 1);
        assert_eq!(o.get(Signal::AllocatableMemoryAvailable), None);
    }

    #[test]
    fn an_unread_value_leaves_its_signal_unobserved() {
        let o = observe(&NodeStats::default(), Some(1));
        assert_eq!(o.iter().count(), 0);
    }
}
