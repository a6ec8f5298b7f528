//! Tests of [`super::super`] (reflector.rs): a `410 Gone` on a resumed
//! watch is a resume signal, not a failure, and the link's return cuts a
//! back-off after a link failure short, with a fleet's retries spread
//! over a second rather than at one instant.

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

/// [`watching`], after three failures on the link (0.1, 1.0 and 2.7 s):
/// its back-off at 3.2 s, waiting until 5.9 s.
fn backed_off_on_the_link() -> Table {
    let mut t = watching();
    t.row(0.1, 0, transport_failure(), &[], Next::Wait(t.at(0.9)));
    t.row(0.9, 0, Input::Tick, &[], watch("5", 300));
    t.row(1.0, 0, transport_failure(), &[], Next::Wait(t.at(2.6)));
    t.row(2.6, 0, Input::Tick, &[], watch("5", 300));
    t.row(2.7, 0, transport_failure(), &[], Next::Wait(t.at(5.9)));
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
    // Failures on the link grow the back-off to 0.8 + 1.6 + 3.2 s ...
    let mut t = backed_off_on_the_link();
    // ... another loop's request gets an answer at 3 s: retry within 1 s,
    // here at once (rand 0), and the back-off starts over.
    assert_eq!(t.r.link_recovered(t.at(3.0), 0), Next::Wait(t.at(3.0)));
    t.row(3.0, 0, Input::Tick, &[], watch("5", 300));
    t.row(3.1, 0, transport_failure(), &[], Next::Wait(t.at(3.9)));
    // At the widest jitter, still at most a second.
    let Next::Wait(until) = t.r.link_recovered(t.at(3.2), u64::MAX) else {
        panic!("waiting")
    };
    assert!(until - t.at(3.2) <= crate::apiserver::client::link::RECOVERY_JITTER);
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

/// The fullest 100 ms of the first second, of retry moments.
fn fullest_bucket(retries: &[Duration]) -> usize {
    let mut buckets = [0usize; 10];
    for r in retries {
        buckets[((r.as_millis() / 100) as usize).min(9)] += 1;
    }
    buckets.into_iter().max().unwrap_or(0)
}

/// A seeded xorshift64* sequence: a fleet's random numbers, reproducible.
fn fleet_rands(n: usize) -> Vec<u64> {
    let mut x = 0x9e37_79b9_7f4a_7c15_u64;
    (0..n)
        .map(|_| {
            x ^= x >> 12;
            x ^= x << 25;
            x ^= x >> 27;
            x.wrapping_mul(0x2545_f491_4f6c_dd1d)
        })
        .collect()
}

#[test]
fn a_thousand_nodes_whose_shared_uplink_returns_spread_their_retries_over_a_second() {
    // Every node's watch failed on the link three times (its back-off at
    // 3.2 s); the uplink returns for all of them at the same instant, 3 s.
    let rands = fleet_rands(1000);
    let retries: Vec<Duration> = rands
        .iter()
        .map(|&rand| {
            let mut t = backed_off_on_the_link();
            let Next::Wait(until) = t.r.link_recovered(t.at(3.0), rand) else {
                panic!("waiting")
            };
            until - t.at(3.0)
        })
        .collect();
    // All within the second, and no 100 ms of it with more than 15 % of
    // the fleet (an even spread is 10 %).
    assert!(
        retries
            .iter()
            .all(|r| *r <= crate::apiserver::client::link::RECOVERY_JITTER),
        "{retries:?}"
    );
    let fullest = fullest_bucket(&retries);
    assert!(
        fullest <= 150,
        "{fullest} of 1000 nodes retry in the same 100 ms"
    );
    // And their first dials after a failed one: within 0.5-1 s, never two
    // thirds of them in the same 100 ms.
    let dials: Vec<Duration> = rands
        .iter()
        .map(|&rand| {
            let unit = (rand >> 11) as f64 / (1u64 << 53) as f64;
            crate::apiserver::client::link::dial_wait(
                crate::apiserver::client::link::DIAL_BACKOFF_INITIAL,
                unit,
            )
        })
        .collect();
    assert!(dials
        .iter()
        .all(|d| *d >= Duration::from_millis(500) && *d <= Duration::from_secs(1)));
    let fullest = fullest_bucket(&dials);
    assert!(
        fullest <= 300,
        "{fullest} of 1000 nodes dial in the same 100 ms"
    );
}
