//! Tests of [`super::super`] (reflector.rs): a `410 Gone` on a resumed
//! watch is a resume signal, not a failure, and the link's return cuts a
//! back-off after a link failure short.

use super::*;

fn transport_failure() -> Input<Pod> {
    Input::Failed(Failure::Transport)
}

/// A reflector resumed at "5", its watch sent at 0 s.
fn watching() -> Table {
    let mut t = Table::new(
        Reflector::resume(vec![pod("a", "ua", "3")], "5".into()).without_streaming_list(),
    );
    t.row(0.0, 0, Input::Tick, &[], watch("5", 300));
    t
}

#[test]
fn a_watch_answered_gone_relists_within_a_second_and_does_not_grow_the_back_off() {
    let mut t = watching();
    // A link failure first: 0.8 s, the next step 1.6 s.
    t.row(0.1, 0, transport_failure(), &[], Next::Wait(t.at(0.9)));
    t.row(0.9, 0, Input::Tick, &[], watch("5", 300));
    // 410 Expired as an ERROR event, at the widest jitter: at most 1 s.
    let s = t.r.step(t.at(1.0), u64::MAX, ev(WatchEvent::Error(gone())));
    let Next::Wait(until) = s.next else {
        panic!("{:?}", s.next)
    };
    let wait = until - t.at(1.0);
    assert!(wait <= GONE_JITTER, "{wait:?}");
    assert_eq!(t.r.resource_version(), None);
    t.row(2.0, 0, Input::Tick, &[], list(PAGE_SIZE, None));
    // The relist fails on the link: the second step (1.6 s), not the third.
    t.row(2.1, 0, transport_failure(), &[], Next::Wait(t.at(3.7)));
}

#[test]
fn gone_as_an_http_status_of_a_resumed_watch_relists_at_once_with_no_jitter_drawn() {
    let mut t = watching();
    t.row(
        0.1,
        0,
        Input::Failed(Failure::Status(gone())),
        &[],
        Next::Wait(t.at(0.1)),
    );
    t.row(0.1, 0, Input::Tick, &[], list(PAGE_SIZE, None));
}

#[test]
fn the_link_answering_again_ends_a_back_off_after_a_link_failure() {
    let mut t = watching();
    // Failures on the link grow the back-off to 0.8 + 1.6 + 3.2 s ...
    t.row(0.1, 0, transport_failure(), &[], Next::Wait(t.at(0.9)));
    t.row(0.9, 0, Input::Tick, &[], watch("5", 300));
    t.row(1.0, 0, transport_failure(), &[], Next::Wait(t.at(2.6)));
    t.row(2.6, 0, Input::Tick, &[], watch("5", 300));
    t.row(2.7, 0, transport_failure(), &[], Next::Wait(t.at(5.9)));
    // ... another loop's request gets an answer at 3 s: retry within 1 s,
    // here at once (rand 0), and the back-off starts over.
    assert_eq!(t.r.link_recovered(t.at(3.0), 0), Next::Wait(t.at(3.0)));
    t.row(3.0, 0, Input::Tick, &[], watch("5", 300));
    t.row(3.1, 0, transport_failure(), &[], Next::Wait(t.at(3.9)));
    // At the widest jitter, still at most a second.
    let Next::Wait(until) = t.r.link_recovered(t.at(3.2), u64::MAX) else {
        panic!("waiting")
    };
    assert!(until - t.at(3.2) <= crate::apiserver::link::RECOVERY_JITTER);
}

#[test]
fn the_link_answering_again_does_not_shorten_a_back_off_after_an_error_status() {
    let mut t = watching();
    t.row(
        0.1,
        0,
        Input::Failed(Failure::Status(status(403))),
        &[],
        Next::Wait(t.at(0.9)),
    );
    assert_eq!(t.r.link_recovered(t.at(0.2), 0), Next::Wait(t.at(0.9)));
    // Not waiting: nothing changes.
    t.row(0.9, 0, Input::Tick, &[], watch("5", 300));
    assert_eq!(t.r.link_recovered(t.at(1.0), 0), Next::Continue);
}
