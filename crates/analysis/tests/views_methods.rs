//! Methods of spans without a target (other systems' data) are keyed by service and name.

use ringtrace_analysis::report::{build_report, ReportOptions};
use ringtrace_analysis::{frequency_profile, time_profile, top_methods, GroupBy, ProfileQuery, SpanFilter};

use crate::views_support::{dataset, span};

fn two_services_with_post() -> ringtrace_analysis::Dataset {
    let (a, b) = (("node-1", "orders", 0), ("node-1", "billing", 1));
    let mut recorded = span(3, 5, None, "store", ("node-2", "worker", 2), 0, 10);
    recorded.target = Some("demo::worker".into());
    dataset(vec![
        span(1, 1, None, "POST", a, 0, 100),
        span(1, 2, Some(1), "POST", b, 10, 60),
        span(2, 3, None, "POST", a, 200, 300),
        span(2, 4, Some(3), "GET", b, 210, 220),
        recorded,
    ])
}

#[test]
fn same_named_operations_of_two_services_stay_apart() {
    let data = two_services_with_post();
    let keys = |mut v: Vec<String>| {
        v.sort();
        v
    };
    let expected = ["billing: GET", "billing: POST", "demo::worker::store", "orders: POST"];

    let profile = frequency_profile(&data, GroupBy::Method, 1_000).unwrap();
    assert_eq!(keys(profile.groups.iter().map(|g| g.key.clone()).collect()), expected);
    assert_eq!(profile.groups[0].key, "orders: POST");
    assert_eq!(profile.groups[0].total, 2);

    let query = ProfileQuery { by: GroupBy::Method, bucket_ns: 1_000, filter: SpanFilter::default() };
    let zoomed = time_profile(&data, &query).unwrap();
    assert_eq!(keys(zoomed.groups.iter().map(|g| g.key.clone()).collect()), expected);

    let top = top_methods(&data, 10);
    assert_eq!(top[0], ("orders: POST".to_owned(), 2, 200));
    assert_eq!(keys(top.iter().map(|t| t.0.clone()).collect()), expected);

    let report = build_report(&data, &ReportOptions::default(), &mut |_| {});
    assert_eq!(keys(report.top_methods.iter().map(|m| m.method.clone()).collect()), expected);
    // The zoom filter takes a method as the profile shows it.
    let filter = SpanFilter { operation: Some("orders: POST".into()), ..SpanFilter::default() };
    assert_eq!(data.spans.iter().filter(|s| filter.matches_operation(s)).count(), 2);
    // A ringtrace recording's method keeps its module path and is not split by daemon.
    assert_eq!(data.spans[4].qualified_method(), data.spans[4].method());
}
