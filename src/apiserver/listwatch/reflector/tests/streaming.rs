//! Tests of [`super::super`] (reflector.rs): the streaming list, when the
//! server does it, refuses it, or fails it for a while.

use super::*;

#[test]
fn the_streaming_list_is_used_where_the_server_honours_it() {
    let mut t = Table::new(Reflector::new());
    t.row(
        0.0,
        5,
        Input::Tick,
        &[],
        Next::Send(Request::StreamingList {
            timeout_seconds: 305,
        }),
    );
    t.row(
        0.1,
        0,
        ev(WatchEvent::Added(pod("a", "ua", "3"))),
        &[],
        Next::Continue,
    );
    t.row(
        0.1,
        0,
        ev(WatchEvent::Added(pod("b", "ub", "4"))),
        &[],
        Next::Continue,
    );
    assert!(t.r.store().is_empty());
    t.row(
        0.2,
        0,
        bookmark("10", true),
        &["+a@3", "+b@4", "synced"],
        Next::Continue,
    );
    assert_eq!(t.r.streaming(), Streaming::Supported);
    // The same stream goes on as the watch.
    t.row(
        0.3,
        0,
        ev(WatchEvent::Modified(pod("a", "ua", "11"))),
        &["+a@11"],
        Next::Continue,
    );
    t.row(
        10.0,
        0,
        ev(WatchEvent::Error(gone())),
        &[],
        Next::Wait(t.at(10.0)),
    );
    t.row(
        11.0,
        0,
        Input::Tick,
        &[],
        Next::Send(Request::StreamingList {
            timeout_seconds: 300,
        }),
    );
    t.row(
        11.1,
        0,
        bookmark("20", true),
        &["-a@11", "-b@4", "synced"],
        Next::Continue,
    );
}

#[test]
fn a_server_ignoring_send_initial_events_is_remembered_and_listed() {
    let mut t = Table::new(Reflector::new());
    t.row(
        0.0,
        0,
        Input::Tick,
        &[],
        Next::Send(Request::StreamingList {
            timeout_seconds: 300,
        }),
    );
    t.row(
        0.1,
        0,
        ev(WatchEvent::Added(pod("a", "ua", "3"))),
        &[],
        Next::Continue,
    );
    t.row(60.0, 0, bookmark("10", false), &[], list(PAGE_SIZE, None));
    assert_eq!(t.r.streaming(), Streaming::Unsupported);
    t.row(
        60.1,
        0,
        page(vec![pod("a", "ua", "3")], "10", None),
        &["+a@3", "synced"],
        watch("10", 300),
    );
    t.row(
        61.0,
        0,
        ev(WatchEvent::Error(gone())),
        &[],
        Next::Wait(t.at(61.0)),
    );
    t.row(62.0, 0, Input::Tick, &[], list(PAGE_SIZE, None));
}

#[test]
fn a_server_refusing_the_streaming_list_is_remembered() {
    for code in [400, 415, 422, 501] {
        let mut t = Table::new(Reflector::new());
        t.row(
            0.0,
            0,
            Input::Tick,
            &[],
            Next::Send(Request::StreamingList {
                timeout_seconds: 300,
            }),
        );
        t.row(
            0.1,
            0,
            Input::Failed(Failure::Status(status(code))),
            &[],
            Next::Wait(t.at(0.9)),
        );
        assert_eq!(t.r.streaming(), Streaming::Unsupported, "{code}");
        t.row(1.0, 0, Input::Tick, &[], list(PAGE_SIZE, None));
    }
}

#[test]
fn a_broken_streaming_list_retries_once_as_a_list_and_tries_streaming_again_later() {
    let mut t = Table::new(Reflector::new());
    t.row(
        0.0,
        0,
        Input::Tick,
        &[],
        Next::Send(Request::StreamingList {
            timeout_seconds: 300,
        }),
    );
    t.row(
        0.1,
        0,
        ev(WatchEvent::Added(pod("a", "ua", "3"))),
        &[],
        Next::Continue,
    );
    t.row(0.2, 0, Input::Ended, &[], Next::Wait(t.at(1.0)));
    assert!(
        t.r.store().is_empty(),
        "half a streaming list is not applied"
    );
    assert_eq!(t.r.streaming(), Streaming::Untried);
    t.row(1.0, 0, Input::Tick, &[], list(PAGE_SIZE, None));
    t.row(
        1.1,
        0,
        page(vec![pod("a", "ua", "3")], "10", None),
        &["+a@3", "synced"],
        watch("10", 300),
    );
    t.row(
        2.0,
        0,
        ev(WatchEvent::Error(gone())),
        &[],
        Next::Wait(t.at(2.0)),
    );
    t.row(
        3.6,
        0,
        Input::Tick,
        &[],
        Next::Send(Request::StreamingList {
            timeout_seconds: 300,
        }),
    );
}

#[test]
fn a_forbidden_streaming_list_is_retried_as_a_streaming_list_after_the_back_off() {
    for code in [401, 403, 404, 429] {
        let mut t = Table::new(Reflector::new());
        let streaming = Next::Send(Request::StreamingList {
            timeout_seconds: 300,
        });
        t.row(0.0, 0, Input::Tick, &[], streaming.clone());
        t.row(
            0.1,
            0,
            Input::Failed(Failure::Status(status(code))),
            &[],
            Next::Wait(t.at(0.9)),
        );
        assert_eq!(t.r.streaming(), Streaming::Untried, "{code}");
        t.row(0.5, 0, Input::Tick, &[], Next::Wait(t.at(0.9)));
        t.row(0.9, 0, Input::Tick, &[], streaming.clone());
        t.row(
            1.0,
            0,
            Input::Failed(Failure::Status(status(code))),
            &[],
            Next::Wait(t.at(2.6)),
        );
        t.row(2.6, 0, Input::Tick, &[], streaming.clone());
        t.row(
            2.7,
            0,
            ev(WatchEvent::Added(pod("a", "ua", "3"))),
            &[],
            Next::Continue,
        );
        t.row(
            2.8,
            0,
            bookmark("10", true),
            &["+a@3", "synced"],
            Next::Continue,
        );
        assert_eq!(t.r.streaming(), Streaming::Supported, "{code}");
    }
}

#[test]
fn a_server_error_on_the_streaming_list_retries_once_as_a_list() {
    let mut t = Table::new(Reflector::new());
    t.row(
        0.0,
        0,
        Input::Tick,
        &[],
        Next::Send(Request::StreamingList {
            timeout_seconds: 300,
        }),
    );
    t.row(
        0.1,
        0,
        Input::Failed(Failure::Status(status(503))),
        &[],
        Next::Wait(t.at(0.9)),
    );
    assert_eq!(t.r.streaming(), Streaming::Untried);
    t.row(1.0, 0, Input::Tick, &[], list(PAGE_SIZE, None));
}
