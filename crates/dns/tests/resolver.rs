//! The shared resolver against a loopback "DNS server" that swallows every query: lookups
//! fail by their timeout, and many of them at once do not grow the process's threads.

use std::net::{IpAddr, SocketAddr, UdpSocket};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use mailroom_dns::{DnsResolver, DnsSettings, LookupError};

/// Threads of this process (Linux).
fn threads() -> usize {
    let status = std::fs::read_to_string("/proc/self/status").expect("/proc/self/status");
    status
        .lines()
        .find_map(|line| line.strip_prefix("Threads:"))
        .and_then(|count| count.trim().parse().ok())
        .expect("Threads: in /proc/self/status")
}

/// A UDP socket on loopback that reads queries and never answers; counts them.
fn swallowing_nameserver() -> (SocketAddr, Arc<AtomicUsize>) {
    let socket = UdpSocket::bind("127.0.0.1:0").expect("bind");
    let address = socket.local_addr().expect("address");
    let queries = Arc::new(AtomicUsize::new(0));
    let counted = Arc::clone(&queries);
    std::thread::spawn(move || {
        let mut buffer = [0u8; 1500];
        while socket.recv_from(&mut buffer).is_ok() {
            counted.fetch_add(1, Ordering::Relaxed);
        }
    });
    (address, queries)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_hundred_lookups_of_a_name_that_never_answers_each_fail_by_the_500_ms_timeout_on_bounded_threads(
) {
    let (nameserver, queries) = swallowing_nameserver();
    let resolver = DnsResolver::new(DnsSettings {
        nameserver: Some(nameserver),
        lookup_timeout: Duration::from_millis(500),
        max_concurrent_lookups: 8,
    })
    .expect("resolver");
    // Warm up: the resolver's runtime and its first lookup start their threads.
    let _ = resolver.resolve_checked("warm.example.com", false).await;
    let threads_before = threads();

    let started = Instant::now();
    let lookups = (0..200).map(|n| {
        let resolver = resolver.clone();
        tokio::spawn(async move {
            let began = Instant::now();
            let outcome = resolver
                .resolve_checked(&format!("host{n}.never.example.com"), false)
                .await;
            (outcome, began.elapsed())
        })
    });
    let mut peak_threads = threads_before;
    let mut outcomes = Vec::new();
    for lookup in lookups.collect::<Vec<_>>() {
        peak_threads = peak_threads.max(threads());
        outcomes.push(lookup.await.expect("task"));
    }
    let total = started.elapsed();
    println!(
        "200 lookups in {total:?}; threads {threads_before} before, {peak_threads} at most; \
         {} queries reached the nameserver",
        queries.load(Ordering::Relaxed)
    );
    for (outcome, took) in &outcomes {
        assert!(
            matches!(outcome, Err(LookupError::Timeout(_))),
            "{outcome:?}"
        );
        assert!(
            *took >= Duration::from_millis(450) && *took < Duration::from_millis(1500),
            "each lookup fails by its own 500 ms timeout (slot wait included), took {took:?}"
        );
    }
    // No thread per lookup: the resolver has one worker thread, started before.
    assert!(
        peak_threads <= threads_before + 2,
        "threads grew from {threads_before} to {peak_threads}"
    );
    assert!(total < Duration::from_secs(3), "{total:?}");
    // The bound: lookups beyond 8 waited for a slot and timed out there, so far fewer
    // than 200 names were ever asked.
    assert!(
        queries.load(Ordering::Relaxed) < 200,
        "{} queries",
        queries.load(Ordering::Relaxed)
    );
}

#[test]
fn blocking_callers_get_the_timeout_too_and_literals_need_no_lookup() {
    let (nameserver, _) = swallowing_nameserver();
    let resolver = DnsResolver::new(DnsSettings {
        nameserver: Some(nameserver),
        lookup_timeout: Duration::from_millis(300),
        max_concurrent_lookups: 2,
    })
    .expect("resolver");
    let started = Instant::now();
    let outcome = resolver.resolve_checked_blocking("mail.never.example.com", true);
    assert!(
        matches!(outcome, Err(LookupError::Timeout(_))),
        "{outcome:?}"
    );
    assert!(
        started.elapsed() < Duration::from_secs(1),
        "{:?}",
        started.elapsed()
    );

    let literal: IpAddr = "93.184.216.34".parse().unwrap();
    assert_eq!(
        resolver.resolve_checked_blocking(" 93.184.216.34 ", false),
        Ok(vec![literal])
    );
    assert_eq!(
        resolver.resolve_checked_blocking("[::1]", true),
        Ok(vec!["::1".parse().unwrap()])
    );
    let refused = resolver
        .resolve_checked_blocking("127.0.0.1", false)
        .unwrap_err();
    assert_eq!(refused.to_string(), "127.0.0.1 is loopback (127.0.0.0/8)");
    assert!(matches!(
        resolver.resolve_checked_blocking("  ", true),
        Err(LookupError::NotFound(_))
    ));
}

#[test]
fn localhost_resolves_from_the_hosts_file_and_is_refused_as_loopback() {
    // The nameserver swallows everything: the answer can only come from /etc/hosts (or
    // the resolver's own knowledge of `localhost`, RFC 6761).
    let (nameserver, queries) = swallowing_nameserver();
    let resolver = DnsResolver::new(DnsSettings {
        nameserver: Some(nameserver),
        lookup_timeout: Duration::from_secs(2),
        max_concurrent_lookups: 2,
    })
    .expect("resolver");
    let found = resolver
        .resolve_checked_blocking("localhost", true)
        .expect("localhost resolves");
    assert!(found.iter().all(IpAddr::is_loopback), "{found:?}");
    let refused = resolver
        .resolve_checked_blocking("localhost", false)
        .unwrap_err();
    assert!(
        refused
            .to_string()
            .contains("(resolved from localhost) is loopback"),
        "{refused}"
    );
    assert_eq!(queries.load(Ordering::Relaxed), 0);
}

#[tokio::test]
async fn a_resolver_dropped_on_an_executor_with_a_lookup_in_flight_shuts_down_quietly() {
    let (nameserver, _) = swallowing_nameserver();
    let resolver = DnsResolver::new(DnsSettings {
        nameserver: Some(nameserver),
        lookup_timeout: Duration::from_millis(300),
        max_concurrent_lookups: 2,
    })
    .expect("resolver");
    let in_flight = {
        let resolver = resolver.clone();
        tokio::spawn(async move { resolver.resolve_checked("slow.example.com", false).await })
    };
    tokio::time::sleep(Duration::from_millis(50)).await;
    drop(resolver);
    // The caller's clone still owns the thread; the lookup ends by its timeout.
    let outcome = in_flight.await.expect("no panic");
    assert!(
        matches!(outcome, Err(LookupError::Timeout(_))),
        "{outcome:?}"
    );
}

/// One tenant's name whose nameserver never answers must not delay lookups of names
/// already known: answers come from the cache without a slot, the stalled name is looked
/// up once at a time, and once it has timed out it answers `Timeout` at once for a while
/// instead of taking a slot per caller.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stalled_name_neither_takes_every_slot_nor_delays_a_known_name() {
    let (nameserver, queries) = swallowing_nameserver();
    let resolver = DnsResolver::new(DnsSettings {
        nameserver: Some(nameserver),
        lookup_timeout: Duration::from_secs(2),
        max_concurrent_lookups: 4,
    })
    .expect("resolver");
    // `localhost` answers from the hosts file, and is cached from here on.
    resolver
        .resolve_checked("localhost", true)
        .await
        .expect("localhost resolves");
    // Forty callers of one stalled name and four of other stalled names: every slot busy.
    let stalled = (0..44)
        .map(|n| {
            let resolver = resolver.clone();
            let name = if n < 40 {
                "stall.never.example.com".to_owned()
            } else {
                format!("other{n}.never.example.com")
            };
            tokio::spawn(async move { resolver.resolve_checked(&name, false).await })
        })
        .collect::<Vec<_>>();
    tokio::time::sleep(Duration::from_millis(200)).await;
    let started = Instant::now();
    let known = resolver.resolve_checked("localhost", true).await;
    let took = started.elapsed();
    assert!(known.is_ok(), "{known:?}");
    assert!(
        took < Duration::from_millis(500),
        "a cached name waited {took:?} behind the stalled ones (their timeout is 2 s)"
    );
    for lookup in stalled {
        let outcome = lookup.await.expect("task");
        assert!(
            matches!(outcome, Err(LookupError::Timeout(_))),
            "{outcome:?}"
        );
    }
    // Remembered as timing out: answered at once, without asking the nameserver again.
    let asked = queries.load(Ordering::Relaxed);
    let started = Instant::now();
    let again = resolver
        .resolve_checked("stall.never.example.com", false)
        .await;
    assert!(matches!(again, Err(LookupError::Timeout(_))), "{again:?}");
    assert!(started.elapsed() < Duration::from_millis(200));
    assert_eq!(queries.load(Ordering::Relaxed), asked);
}
