//! Pure: kubelet's Node status events: which of a status's pressure
//! conditions call for an event (`NodeHasSufficientMemory`, ...) and the
//! message kubelet words them with. The heartbeat records them.

use k8s_openapi::api::core::v1::NodeCondition;

/// kubelet's events for the pressure conditions of `after` that are new
/// or changed since `before`: `NodeHasSufficientMemory` or
/// `NodeHasInsufficientMemory`, `NodeHasNoDiskPressure` or
/// `NodeHasDiskPressure`, `NodeHasSufficientPID` or `NodeHasInsufficientPID`
/// (all `Normal`, worded by [`status_event_message`]). With `before`
/// empty, as at kubelet's start, every one is new.
pub fn condition_events(before: &[NodeCondition], after: &[NodeCondition]) -> Vec<&'static str> {
    after
        .iter()
        .filter(|c| {
            !before
                .iter()
                .any(|b| b.type_ == c.type_ && b.status == c.status)
        })
        .filter_map(|c| match (c.type_.as_str(), c.status == "True") {
            ("MemoryPressure", false) => Some("NodeHasSufficientMemory"),
            ("MemoryPressure", true) => Some("NodeHasInsufficientMemory"),
            ("DiskPressure", false) => Some("NodeHasNoDiskPressure"),
            ("DiskPressure", true) => Some("NodeHasDiskPressure"),
            ("PIDPressure", false) => Some("NodeHasSufficientPID"),
            ("PIDPressure", true) => Some("NodeHasInsufficientPID"),
            _ => None,
        })
        .collect()
}

/// kubelet's message of a node status event: `Node <name> status is now:
/// <reason>`.
pub fn status_event_message(node: &str, reason: &str) -> String {
    format!("Node {node} status is now: {reason}")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::apiserver::presence::node_object::{conditions, tests::facts, tests::t, Readiness};

    #[test]
    fn pressure_events_name_each_new_or_changed_condition() {
        let mut f = facts();
        let first = conditions(&f, &[], t(0));
        assert_eq!(
            condition_events(&[], &first),
            [
                "NodeHasSufficientMemory",
                "NodeHasNoDiskPressure",
                "NodeHasSufficientPID"
            ]
        );
        let again = conditions(&f, &first, t(10));
        assert!(condition_events(&first, &again).is_empty());
        f.memory_pressure = true;
        f.disk_pressure = true;
        f.pid_pressure = true;
        f.ready = Readiness::NotReady(vec!["x".into()]);
        let pressed = conditions(&f, &again, t(20));
        assert_eq!(
            condition_events(&again, &pressed),
            [
                "NodeHasInsufficientMemory",
                "NodeHasDiskPressure",
                "NodeHasInsufficientPID"
            ]
        );
        assert_eq!(
            status_event_message("pi", "NodeHasDiskPressure"),
            "Node pi status is now: NodeHasDiskPressure"
        );
    }
}
