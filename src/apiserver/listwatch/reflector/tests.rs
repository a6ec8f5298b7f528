//! Tests of [`super`] (reflector.rs).

use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

use super::*;
use crate::apiserver::client::request::ApiError;

mod resume;
mod streaming;

fn pod(name: &str, uid: &str, rv: &str) -> Pod {
    Pod {
        metadata: ObjectMeta {
            name: Some(name.into()),
            namespace: Some("default".into()),
            uid: Some(uid.into()),
            resource_version: Some(rv.into()),
            ..Default::default()
        },
        ..Default::default()
    }
}

fn page(items: Vec<Pod>, rv: &str, cont: Option<&str>) -> Input<Pod> {
    Input::Page(ListPage {
        items,
        resource_version: rv.into(),
        continue_token: cont.map(Into::into),
    })
}

fn ev(e: WatchEvent<Pod>) -> Input<Pod> {
    Input::Event(e)
}

fn bookmark(rv: &str, end: bool) -> Input<Pod> {
    ev(WatchEvent::Bookmark(Bookmark {
        resource_version: rv.into(),
        initial_events_end: end,
    }))
}

fn gone() -> ApiError {
    ApiError {
        code: 410,
        reason: "Expired".into(),
        message: "too old resource version: 5 (10)".into(),
    }
}

fn status(code: u16) -> ApiError {
    ApiError {
        code,
        reason: String::new(),
        message: String::new(),
    }
}

/// A compact view of events: "+name@rv", "-name@rv", "synced".
fn view(events: &[Event<Pod>]) -> Vec<String> {
    events
        .iter()
        .map(|e| match e {
            Event::Applied(p) => format!(
                "+{}@{}",
                p.metadata.name.as_deref().unwrap(),
                p.metadata.resource_version.as_deref().unwrap_or("")
            ),
            Event::Deleted(p) => format!(
                "-{}@{}",
                p.metadata.name.as_deref().unwrap(),
                p.metadata.resource_version.as_deref().unwrap_or("")
            ),
            Event::Synced => "synced".into(),
        })
        .collect()
}

fn names(r: &Reflector<Pod>) -> Vec<String> {
    r.store()
        .values()
        .map(|p| {
            format!(
                "{}@{}",
                p.metadata.name.as_deref().unwrap(),
                p.metadata.resource_version.as_deref().unwrap()
            )
        })
        .collect()
}

fn list(limit: u32, cont: Option<&str>) -> Next {
    Next::Send(Request::List {
        limit,
        continue_token: cont.map(Into::into),
    })
}

fn watch(rv: &str, timeout: u32) -> Next {
    Next::Send(Request::Watch {
        resource_version: rv.into(),
        timeout_seconds: timeout,
    })
}

/// Runs (input, rand, seconds after t0) rows and checks each step's
/// events and next action.
struct Table {
    t0: Instant,
    r: Reflector<Pod>,
}

impl Table {
    fn new(r: Reflector<Pod>) -> Self {
        Table {
            t0: Instant::now(),
            r,
        }
    }

    fn at(&self, secs: f64) -> Instant {
        self.t0 + Duration::from_millis((secs * 1000.0).round() as u64)
    }

    #[track_caller]
    fn row(
        &mut self,
        secs: f64,
        rand: u64,
        input: Input<Pod>,
        want_events: &[&str],
        want_next: Next,
    ) {
        let s = self.r.step(self.at(secs), rand, input);
        assert_eq!(view(&s.events), want_events, "events at t={secs}");
        assert_eq!(s.next, want_next, "next at t={secs}");
    }
}

#[test]
fn a_paged_list_is_applied_at_once_then_watched_from_its_version() {
    let mut t = Table::new(Reflector::new().without_streaming_list().with_page_size(2));
    t.row(0.0, 0, Input::Tick, &[], list(2, None));
    t.row(
        0.1,
        0,
        page(
            vec![pod("a", "ua", "3"), pod("b", "ub", "4")],
            "10",
            Some("c1"),
        ),
        &[],
        list(2, Some("c1")),
    );
    assert!(
        t.r.store().is_empty(),
        "pages accumulate before they replace the store"
    );
    assert!(!t.r.is_synced());
    t.row(
        0.2,
        7,
        page(vec![pod("c", "uc", "5")], "10", None),
        &["+a@3", "+b@4", "+c@5", "synced"],
        watch("10", 307),
    );
    assert!(t.r.is_synced());
    assert_eq!(names(&t.r), ["a@3", "b@4", "c@5"]);
}

#[test]
fn watch_events_update_the_store_and_advance_the_resource_version() {
    let mut t = Table::new(Reflector::new().without_streaming_list());
    t.row(0.0, 0, Input::Tick, &[], list(PAGE_SIZE, None));
    t.row(
        0.1,
        0,
        page(vec![pod("a", "ua", "3")], "10", None),
        &["+a@3", "synced"],
        watch("10", 300),
    );
    let rows: Vec<(Input<Pod>, &[&str], &str)> = vec![
        (
            ev(WatchEvent::Added(pod("b", "ub", "11"))),
            &["+b@11"],
            "11",
        ),
        (
            ev(WatchEvent::Modified(pod("a", "ua", "12"))),
            &["+a@12"],
            "12",
        ),
        (
            ev(WatchEvent::Deleted(pod("b", "ub", "13"))),
            &["-b@13"],
            "13",
        ),
        (bookmark("20", false), &[], "20"),
        // A delete of another incarnation (other UID) leaves the store alone.
        (ev(WatchEvent::Deleted(pod("a", "OLD", "21"))), &[], "21"),
        // Deleting something never seen emits nothing.
        (ev(WatchEvent::Deleted(pod("zz", "uz", "22"))), &[], "22"),
    ];
    for (i, (input, want, rv)) in rows.into_iter().enumerate() {
        t.row(1.0 + i as f64, 0, input, want, Next::Continue);
        assert_eq!(t.r.resource_version(), Some(rv), "row {i}");
    }
    assert_eq!(names(&t.r), ["a@12"]);
}

#[test]
fn a_disconnect_waits_then_resumes_the_watch_without_relisting() {
    let mut t = Table::new(Reflector::new().without_streaming_list());
    t.row(0.0, 0, Input::Tick, &[], list(PAGE_SIZE, None));
    t.row(
        0.0,
        0,
        page(vec![pod("a", "ua", "3")], "10", None),
        &["+a@3", "synced"],
        watch("10", 300),
    );
    t.row(5.0, 0, bookmark("15", false), &[], Next::Continue);
    // rand 0: no jitter, exactly 800 ms.
    t.row(
        6.0,
        0,
        Input::Failed(Failure::Transport),
        &[],
        Next::Wait(t.at(6.8)),
    );
    t.row(6.5, 0, Input::Tick, &[], Next::Wait(t.at(6.8)));
    t.row(6.8, 1, Input::Tick, &[], watch("15", 301));
    assert_eq!(names(&t.r), ["a@3"], "a failure never empties the store");
}

#[test]
fn gone_relists_once_and_the_diff_includes_deletions() {
    let mut t = Table::new(Reflector::new().without_streaming_list());
    t.row(0.0, 0, Input::Tick, &[], list(PAGE_SIZE, None));
    t.row(
        0.0,
        0,
        page(
            vec![
                pod("a", "ua", "3"),
                pod("b", "ub", "4"),
                pod("c", "uc", "5"),
            ],
            "10",
            None,
        ),
        &["+a@3", "+b@4", "+c@5", "synced"],
        watch("10", 300),
    );
    t.row(
        1.0,
        0,
        ev(WatchEvent::Error(gone())),
        &[],
        Next::Wait(t.at(1.0)),
    );
    assert_eq!(t.r.resource_version(), None);
    t.row(1.8, 0, Input::Tick, &[], list(PAGE_SIZE, None));
    // Meanwhile: b deleted, c modified, a recreated with a new UID, d added.
    t.row(
        2.0,
        0,
        page(
            vec![
                pod("a", "ua2", "30"),
                pod("c", "uc", "31"),
                pod("d", "ud", "32"),
            ],
            "40",
            None,
        ),
        &["-a@3", "-b@4", "+a@30", "+c@31", "+d@32", "synced"],
        watch("40", 300),
    );
    assert_eq!(names(&t.r), ["a@30", "c@31", "d@32"]);
}

#[test]
fn gone_as_an_http_status_of_the_watch_also_relists() {
    let mut t = Table::new(
        Reflector::resume(vec![pod("a", "ua", "3")], "5".into()).without_streaming_list(),
    );
    t.row(0.0, 0, Input::Tick, &[], watch("5", 300));
    t.row(
        0.1,
        0,
        Input::Failed(Failure::Status(gone())),
        &[],
        Next::Wait(t.at(0.1)),
    );
    t.row(1.0, 0, Input::Tick, &[], list(PAGE_SIZE, None));
    t.row(
        1.1,
        0,
        page(vec![], "50", None),
        &["-a@3", "synced"],
        watch("50", 300),
    );
}

#[test]
fn an_unchanged_object_in_a_relist_emits_nothing() {
    let mut t = Table::new(
        Reflector::resume(vec![pod("a", "ua", "3"), pod("b", "ub", "4")], "5".into())
            .without_streaming_list(),
    );
    t.row(0.0, 0, Input::Tick, &[], watch("5", 300));
    t.row(
        0.1,
        0,
        Input::Failed(Failure::Status(gone())),
        &[],
        Next::Wait(t.at(0.1)),
    );
    t.row(1.0, 0, Input::Tick, &[], list(PAGE_SIZE, None));
    t.row(
        1.1,
        0,
        page(vec![pod("a", "ua", "3"), pod("b", "ub", "9")], "50", None),
        &["+b@9", "synced"],
        watch("50", 300),
    );
}

#[test]
fn a_failed_list_page_restarts_the_list_and_keeps_the_store() {
    let mut t = Table::new(
        Reflector::resume(vec![pod("a", "ua", "3")], "5".into())
            .without_streaming_list()
            .with_page_size(1),
    );
    t.row(0.0, 0, Input::Tick, &[], watch("5", 300));
    t.row(
        0.1,
        0,
        ev(WatchEvent::Error(gone())),
        &[],
        Next::Wait(t.at(0.1)),
    );
    t.row(1.0, 0, Input::Tick, &[], list(1, None));
    t.row(
        1.1,
        0,
        page(vec![pod("x", "ux", "6")], "50", Some("c")),
        &[],
        list(1, Some("c")),
    );
    // The continue token expired: 410 on the second page.
    t.row(
        1.2,
        0,
        Input::Failed(Failure::Status(gone())),
        &[],
        // A failure (the relist itself got 410), the first one: the watch's
        // 410 before did not count.
        Next::Wait(t.at(2.0)),
    );
    assert_eq!(names(&t.r), ["a@3"]);
    t.row(2.8, 0, Input::Tick, &[], list(1, None));
    t.row(
        3.0,
        0,
        page(vec![pod("y", "uy", "60")], "70", None),
        &["-a@3", "+y@60", "synced"],
        watch("70", 300),
    );
}

#[test]
fn errors_empty_replies_and_timeouts_are_never_a_sync_point() {
    let mut t = Table::new(Reflector::resume(vec![pod("a", "ua", "3")], "5".into()));
    t.row(0.0, 0, Input::Tick, &[], watch("5", 300));
    t.row(
        0.1,
        0,
        Input::Failed(Failure::Status(status(503))),
        &[],
        Next::Wait(t.at(0.9)),
    );
    t.row(1.0, 0, Input::Tick, &[], watch("5", 300));
    t.row(
        400.0,
        0,
        Input::Failed(Failure::Transport),
        &[],
        Next::Wait(t.at(400.8)),
    );
    t.row(401.0, 0, Input::Tick, &[], watch("5", 300));
    // An immediate clean end without events is a failure, not "nothing there".
    t.row(401.1, 0, Input::Ended, &[], Next::Wait(t.at(401.1 + 1.6)));
    assert!(!t.r.is_synced());
    assert_eq!(names(&t.r), ["a@3"]);
}

#[test]
fn a_store_restored_from_disk_is_synced_at_the_first_bookmark() {
    let mut t = Table::new(Reflector::resume(
        vec![pod("a", "ua", "3"), pod("b", "ub", "4")],
        "5".into(),
    ));
    assert!(!t.r.is_synced());
    t.row(0.0, 0, Input::Tick, &[], watch("5", 300));
    t.row(
        0.1,
        0,
        ev(WatchEvent::Deleted(pod("b", "ub", "6"))),
        &["-b@6"],
        Next::Continue,
    );
    t.row(0.2, 0, bookmark("8", false), &["synced"], Next::Continue);
    t.row(0.3, 0, bookmark("9", false), &[], Next::Continue);
    assert!(t.r.is_synced());
}

#[test]
fn a_replay_older_than_the_cached_object_does_not_roll_it_back() {
    // The cache holds a@7, but its sync point is 5: the watch replays 6 and 7.
    let mut t = Table::new(Reflector::resume(vec![pod("a", "ua", "7")], "5".into()));
    t.row(0.0, 0, Input::Tick, &[], watch("5", 300));
    t.row(
        0.1,
        0,
        ev(WatchEvent::Modified(pod("a", "ua", "6"))),
        &[],
        Next::Continue,
    );
    t.row(
        0.2,
        0,
        ev(WatchEvent::Modified(pod("a", "ua", "7"))),
        &[],
        Next::Continue,
    );
    t.row(
        0.3,
        0,
        ev(WatchEvent::Modified(pod("a", "ua", "8"))),
        &["+a@8"],
        Next::Continue,
    );
    assert_eq!(t.r.resource_version(), Some("8"));
}

#[test]
fn a_clean_end_of_a_watch_rewatches_at_once_with_a_new_random_timeout() {
    let mut t = Table::new(Reflector::resume(vec![], "5".into()));
    t.row(0.0, 0, Input::Tick, &[], watch("5", 300));
    t.row(350.0, 0, bookmark("9", false), &["synced"], Next::Continue);
    t.row(351.0, 300, Input::Ended, &[], watch("9", 600));
    // A quiet watch that lasted its time and ended cleanly is healthy too.
    t.row(952.0, 123, Input::Ended, &[], watch("9", 423));
}

#[test]
fn back_off_doubles_to_thirty_seconds_and_resets_after_two_healthy_minutes() {
    let t0 = Instant::now();
    let mut b = Backoff::new();
    let mut now = t0;
    let mut seen = Vec::new();
    for _ in 0..9 {
        seen.push(b.fail(now, 0, true).as_millis());
        now += Duration::from_secs(1);
    }
    assert_eq!(
        seen,
        [800, 1600, 3200, 6400, 12800, 25600, 30000, 30000, 30000]
    );
    now += BACKOFF_RESET;
    assert_eq!(b.fail(now, 0, true), BACKOFF_INITIAL);
}

#[test]
fn jitter_spreads_delays_over_up_to_twice_the_step() {
    let t0 = Instant::now();
    let table = [(0u64, 800u128), (1 << 63, 1200), (3 << 62, 1400)];
    for (rand, want) in table {
        let mut b = Backoff::new();
        assert_eq!(b.fail(t0, rand, true).as_millis(), want, "rand {rand:#x}");
    }
    assert!(Backoff::new().fail(t0, u64::MAX, true) <= 2 * BACKOFF_INITIAL);
}

#[test]
fn watch_timeouts_stay_within_five_to_ten_minutes() {
    for rand in [0, 1, 300, 301, 600, u64::MAX, 12345678901] {
        let t = watch_timeout(rand);
        assert!(
            (WATCH_TIMEOUT_MIN..=WATCH_TIMEOUT_MAX).contains(&t),
            "{rand}: {t}"
        );
    }
    assert_eq!(watch_timeout(300), 600);
    assert_eq!(watch_timeout(301), 300);
}

#[test]
fn resource_versions_compare_as_numbers_when_they_are_numbers() {
    let table = [
        ("10", "9", true),
        ("9", "10", false),
        ("10", "10", false),
        ("abc", "abd", true),
        ("abc", "abc", false),
    ];
    for (a, b, want) in table {
        assert_eq!(is_newer(a, b), want, "{a} vs {b}");
    }
}

#[test]
fn stale_inputs_for_a_request_no_longer_in_flight_are_ignored() {
    let mut t = Table::new(Reflector::new().without_streaming_list());
    t.row(0.0, 0, Input::Tick, &[], list(PAGE_SIZE, None));
    // An event from a stream the driver should have dropped.
    t.row(
        0.1,
        0,
        ev(WatchEvent::Added(pod("a", "ua", "3"))),
        &[],
        Next::Continue,
    );
    t.row(
        0.2,
        0,
        Input::Failed(Failure::Transport),
        &[],
        Next::Wait(t.at(1.0)),
    );
    t.row(
        0.3,
        0,
        page(vec![pod("a", "ua", "3")], "10", None),
        &[],
        Next::Wait(t.at(1.0)),
    );
    t.row(
        0.4,
        0,
        Input::Failed(Failure::Transport),
        &[],
        Next::Wait(t.at(1.0)),
    );
    t.row(0.5, 0, Input::Ended, &[], Next::Wait(t.at(1.0)));
    assert!(t.r.store().is_empty());
}

#[test]
fn objects_are_keyed_by_namespace_and_name() {
    let p = pod("a", "u", "1");
    let k = ObjectKey::of(&p).unwrap();
    assert_eq!(k.to_string(), "default/a");
    let n = k8s_openapi::api::core::v1::Node {
        metadata: ObjectMeta {
            name: Some("pi".into()),
            ..Default::default()
        },
        ..Default::default()
    };
    assert_eq!(ObjectKey::of(&n).unwrap().to_string(), "pi");
    assert!(ObjectKey::of(&Pod::default()).is_none());
}

#[test]
fn managed_fields_never_enter_the_store_or_the_events() {
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::ManagedFieldsEntry;
    let managed = |mut p: Pod| {
        p.metadata.managed_fields = Some(vec![ManagedFieldsEntry {
            manager: Some("kubectl-create".into()),
            ..Default::default()
        }]);
        p
    };
    let mut r = Reflector::resume(vec![managed(pod("a", "ua", "3"))], "5".into());
    let now = Instant::now();
    r.step(now, 0, Input::Tick);
    let s = r.step(now, 0, ev(WatchEvent::Added(managed(pod("b", "ub", "6")))));
    let s2 = r.step(
        now,
        0,
        ev(WatchEvent::Modified(managed(pod("a", "ua", "7")))),
    );
    let events: Vec<&Event<Pod>> = s.events.iter().chain(&s2.events).collect();
    assert_eq!(events.len(), 2);
    for e in events {
        let Event::Applied(p) = e else {
            panic!("{e:?}")
        };
        assert_eq!(p.metadata.managed_fields, None);
    }
    assert_eq!(r.store().len(), 2);
    assert!(r
        .store()
        .values()
        .all(|p| p.metadata.managed_fields.is_none()));

    let mut fresh = Reflector::<Pod>::new().without_streaming_list();
    fresh.step(now, 0, Input::Tick);
    fresh.step(now, 0, page(vec![managed(pod("c", "uc", "9"))], "9", None));
    assert!(fresh
        .store()
        .values()
        .all(|p| p.metadata.managed_fields.is_none()));
    assert_eq!(fresh.store().len(), 1);
}

#[test]
fn a_store_keeping_versions_only_hands_back_its_objects_and_still_diffs_relists() {
    let mut r = Reflector::resume(
        vec![
            pod("a", "ua", "3"),
            pod("b", "ub", "4"),
            pod("c", "uc", "5"),
        ],
        "5".into(),
    )
    .without_streaming_list();
    let restored = r.keep_versions_only();
    assert_eq!(restored.len(), 3);
    assert!(r.store().is_empty(), "the objects are the consumer's now");
    let mut t = Table::new(r);
    t.row(0.0, 0, Input::Tick, &[], watch("5", 300));
    // A replay of what the cache holds is still recognised as stale.
    t.row(
        0.1,
        0,
        ev(WatchEvent::Modified(pod("a", "ua", "3"))),
        &[],
        Next::Continue,
    );
    t.row(
        0.2,
        0,
        ev(WatchEvent::Modified(pod("a", "ua", "6"))),
        &["+a@6"],
        Next::Continue,
    );
    t.row(
        0.3,
        0,
        ev(WatchEvent::Error(gone())),
        &[],
        Next::Wait(t.at(0.3)),
    );
    t.row(1.1, 0, Input::Tick, &[], list(PAGE_SIZE, None));
    // Meanwhile: b deleted, a unchanged, c recreated with a new UID.
    t.row(
        1.2,
        0,
        page(vec![pod("a", "ua", "6"), pod("c", "uc2", "9")], "10", None),
        &["-c@5", "-b@4", "+c@9", "synced"],
        watch("10", 300),
    );
    assert!(t.r.store().is_empty());
    let versions: Vec<String> =
        t.r.versions()
            .iter()
            .map(|(k, v)| format!("{}:{:?}@{:?}", k.name, v.uid, v.resource_version))
            .collect();
    assert_eq!(
        versions,
        ["a:Some(\"ua\")@Some(\"6\")", "c:Some(\"uc2\")@Some(\"9\")"]
    );
}

#[test]
fn a_deletion_found_by_a_relist_of_a_versions_only_store_names_the_object() {
    let mut r = Reflector::resume(vec![pod("a", "ua", "3")], "5".into());
    r.keep_versions_only();
    let mut t = Table::new(r.without_streaming_list());
    t.row(0.0, 0, Input::Tick, &[], watch("5", 300));
    t.r.step(t.at(0.1), 0, ev(WatchEvent::Error(gone())));
    t.r.step(t.at(0.9), 0, Input::Tick);
    let s = t.r.step(t.at(1.0), 0, page(vec![], "10", None));
    let Event::Deleted(gone_pod) = &s.events[0] else {
        panic!("expected a deletion, got {:?}", s.events);
    };
    assert_eq!(gone_pod.metadata.namespace.as_deref(), Some("default"));
    assert_eq!(gone_pod.metadata.name.as_deref(), Some("a"));
    assert_eq!(gone_pod.metadata.uid.as_deref(), Some("ua"));
}
