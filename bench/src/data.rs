//! The generated audience: a deterministic profile per contact number, and the import
//! body as a stream of CSV chunks made on the fly (the file never exists whole).

use futures_util::{stream, Stream, StreamExt};

/// Event slugs every contact records, also used by the event-recording runs.
pub const EVENT_SLUGS: [&str; 3] = ["signed_up", "opened_email", "purchased"];

const PLANS: [&str; 5] = ["free", "starter", "pro", "team", "enterprise"];

const CITIES: [&str; 50] = [
    "Amsterdam",
    "Athens",
    "Auckland",
    "Austin",
    "Bangkok",
    "Barcelona",
    "Berlin",
    "Bogota",
    "Boston",
    "Brussels",
    "Budapest",
    "Buenos Aires",
    "Cairo",
    "Cape Town",
    "Chicago",
    "Copenhagen",
    "Dakar",
    "Delhi",
    "Denver",
    "Dublin",
    "Edinburgh",
    "Helsinki",
    "Hong Kong",
    "Istanbul",
    "Jakarta",
    "Kyiv",
    "Lagos",
    "Lima",
    "Lisbon",
    "London",
    "Los Angeles",
    "Madrid",
    "Manila",
    "Melbourne",
    "Mexico City",
    "Milan",
    "Montreal",
    "Mumbai",
    "Nairobi",
    "Oslo",
    "Paris",
    "Prague",
    "Rome",
    "Santiago",
    "Seoul",
    "Singapore",
    "Stockholm",
    "Tokyo",
    "Toronto",
    "Vienna",
];

/// Rows per stream chunk: about 800 KB, so generation interleaves with the upload.
const CHUNK_ROWS: u64 = 10_000;

/// The header of the import.
pub const HEADER: &str = "email,plan,score,vip,renewal,city\n";

/// One contact's generated attributes.
pub struct Profile {
    pub plan: &'static str,
    pub score: u64,
    pub vip: bool,
    /// Seconds after 2026-01-01T00:00:00Z, within one year.
    pub renewal_offset: u64,
    pub city: &'static str,
}

/// SplitMix64: a cheap, well-mixed hash, so profiles depend only on the contact number.
pub fn mix(mut x: u64) -> u64 {
    x = x.wrapping_add(0x9e37_79b9_7f4a_7c15);
    x = (x ^ (x >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    x ^ (x >> 31)
}

/// The email of contact `i`.
pub fn email(i: u64) -> String {
    format!("user{i}@bench.example")
}

/// The attributes of contact `i`.
pub fn profile(i: u64) -> Profile {
    let h = mix(i);
    let pick = |shift: u32, n: u64| (h >> shift) % n;
    Profile {
        plan: PLANS[pick(0, 5) as usize],
        score: pick(8, 1001),
        vip: pick(20, 10) == 0,
        renewal_offset: pick(28, 365 * 86_400),
        city: CITIES[pick(56, 50) as usize],
    }
}

/// RFC 3339 text of 2026-01-01T00:00:00Z plus `offset` seconds (offset under a year).
fn date_2026(offset: u64) -> String {
    const DAYS: [u64; 12] = [31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31];
    let (mut day, second) = (offset / 86_400, offset % 86_400);
    let mut month = 0;
    while month < 11 && day >= DAYS[month] {
        day -= DAYS[month];
        month += 1;
    }
    format!(
        "2026-{:02}-{:02}T{:02}:{:02}:{:02}Z",
        month + 1,
        day + 1,
        second / 3600,
        second / 60 % 60,
        second % 60
    )
}

fn rows(from: u64, to: u64) -> String {
    let mut chunk = String::with_capacity(((to - from) * 90) as usize);
    for i in from..to {
        let p = profile(i);
        chunk.push_str(&format!(
            "{},{},{},{},{},{}\n",
            email(i),
            p.plan,
            p.score,
            p.vip,
            date_2026(p.renewal_offset),
            p.city
        ));
    }
    chunk
}

/// The CSV body for contacts `first..end`, generated chunk by chunk as the upload asks.
pub fn csv_body(
    first: u64,
    end: u64,
) -> impl Stream<Item = Result<String, std::io::Error>> + Send + Sync + 'static {
    let chunks = (end - first).div_ceil(CHUNK_ROWS);
    stream::iter(0..=chunks).map(move |chunk| {
        Ok(if chunk == 0 {
            HEADER.to_owned()
        } else {
            let from = first + (chunk - 1) * CHUNK_ROWS;
            rows(from, (from + CHUNK_ROWS).min(end))
        })
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dates_cover_the_year() {
        assert_eq!(date_2026(0), "2026-01-01T00:00:00Z");
        assert_eq!(date_2026(31 * 86_400 + 3661), "2026-02-01T01:01:01Z");
        assert_eq!(date_2026(365 * 86_400 - 1), "2026-12-31T23:59:59Z");
    }

    #[test]
    fn profiles_spread_over_their_ranges() {
        let profiles: Vec<Profile> = (0..10_000).map(profile).collect();
        let pro = profiles.iter().filter(|p| p.plan == "pro").count();
        assert!((1_500..2_500).contains(&pro), "{pro}");
        assert!(profiles.iter().all(|p| p.score <= 1000));
        let vip = profiles.iter().filter(|p| p.vip).count();
        assert!((700..1_300).contains(&vip), "{vip}");
    }
}
