//! Tidy tests: the repository explains itself from a clone alone.
//!
//! - No tracked file cites the product design document that lives outside the repository,
//!   nor the shared folder beside it: what they said is in `docs/` now (`docs/design.md`,
//!   `docs/api.md`). `CHANGELOG.md` may name them, as history.
//! - `docs/ARCHITECTURE.md` names only paths that exist, and says nothing twice.
//! - No tracked file but the changelog dates its text by the work that wrote it: no
//!   tracker numbers, no numbered or "earlier" work sittings, no numbered rounds of work. Code, tests and
//!   docs name the behaviour instead; `CHANGELOG.md` keeps the history.
//!
//! Tests only (`cargo xtask test` runs them with the rest of the workspace).

use std::collections::BTreeMap;
use std::fs;
use std::path::Path;
use std::process::Command;

use crate::system;

/// Spelled in two parts so that this file does not cite it itself.
const DESIGN_DOCUMENT: &str = concat!("DESIGN", ".md");
/// The same document cited without its extension.
const DESIGN_SECTION: &str = concat!("DESIGN", " §");
const SHARED_DIRECTORY: &str = concat!("../", "shared");

/// The files git tracks, relative to the workspace root.
fn tracked_files() -> Vec<String> {
    let output = Command::new("git")
        .args(["ls-files", "-z"])
        .current_dir(system::workspace_root())
        .output()
        .expect("running git ls-files");
    assert!(output.status.success(), "git ls-files failed");
    String::from_utf8_lossy(&output.stdout)
        .split('\0')
        .filter(|name| !name.is_empty())
        .map(str::to_owned)
        .collect()
}

/// The tracked text files (other than the changelog) that cite a document outside the
/// repository.
fn files_citing_outside_documents() -> Vec<String> {
    let root = system::workspace_root();
    tracked_files()
        .into_iter()
        .filter(|name| name != "CHANGELOG.md")
        // CI runs in a checkout with shared/ beside it, and takes the Citus source from
        // there; nothing else may lean on it.
        .filter(|name| name != ".ci/run")
        .filter(|name| {
            fs::read_to_string(root.join(name)).is_ok_and(|text| {
                text.contains(DESIGN_DOCUMENT)
                    || text.contains(DESIGN_SECTION)
                    || text.contains(SHARED_DIRECTORY)
            })
        })
        .collect()
}

/// The word for a tracker's item, spelled in two parts so that this file does not match
/// its own rule.
const TRACKER_ITEM: &str = concat!("iss", "ue");
/// The word for a sitting of work, which is also a real word here (SMTP sessions,
/// console sessions, database sessions): only the journal's phrasings around it count.
const SITTING: &str = concat!("sess", "ion");

/// The word for a round of work, spelled in two parts for the same reason.
const ROUND: &str = concat!("wa", "ve");

const ORDINALS: [&str; 12] = [
    "first", "second", "third", "fourth", "fifth", "sixth", "seventh", "eighth", "ninth", "tenth",
    "eleventh", "twelfth",
];

/// A number written as an ordinal: `9th`, `21st`.
fn is_numbered_ordinal(word: &str) -> bool {
    let digits = word.trim_end_matches(|c: char| c.is_ascii_alphabetic());
    let suffix = &word[digits.len()..];
    !digits.is_empty()
        && digits.chars().all(|c| c.is_ascii_digit())
        && ["st", "nd", "rd", "th"].contains(&suffix)
}

/// Phrases in `text` that date it by the work that wrote it rather than name what it
/// describes: a tracker number (`<item> 13`, `<item>s 8 and 9`, `<item> #21`), a
/// numbered, earlier or previous sitting (`the ninth <sitting>`, `an earlier <sitting>`,
/// `the <sitting> of 2026-11-25`, `this <sitting>'s machine`), and the word for a round of work. What an SMTP
/// or console session does ("in this session", "one session", "per session") passes.
fn journal_phrases(text: &str) -> Vec<String> {
    let lower = text.to_lowercase();
    let words: Vec<&str> = lower
        .split(|c: char| !c.is_alphanumeric())
        .filter(|word| !word.is_empty())
        .collect();
    let items = format!("{TRACKER_ITEM}s");
    let mut found = Vec::new();
    for (index, pair) in words.windows(2).enumerate() {
        let (word, next) = (pair[0], pair[1]);
        let next_is_number = next.chars().all(|c| c.is_ascii_digit());
        if (word == TRACKER_ITEM || word == items) && next_is_number {
            found.push(format!("{word} {next}"));
        }
        let sitting = next == SITTING || next.strip_suffix('s') == Some(SITTING);
        if sitting
            && (ORDINALS.contains(&word)
                || is_numbered_ordinal(word)
                || ["earlier", "previous"].contains(&word))
        {
            found.push(format!("{word} {next}"));
        }
        if word == SITTING
            && next == "of"
            && words
                .get(index + 2)
                .is_some_and(|year| year.len() == 4 && year.starts_with("20"))
        {
            found.push(format!("{word} of {}", words[index + 2]));
        }
    }
    for possessive in [
        format!("this {SITTING}'s"),
        format!("this {SITTING}\u{2019}s"),
    ] {
        if lower.contains(&possessive) {
            found.push(possessive);
        }
    }
    found.extend(
        words
            .iter()
            .filter(|word| **word == ROUND || word.strip_suffix('s') == Some(ROUND))
            .map(|word| (*word).to_owned()),
    );
    found.sort();
    found.dedup();
    found
}

/// The tracked text files (other than the changelog) with journal phrases, and the
/// phrases each has.
fn files_with_journal_phrases() -> Vec<(String, Vec<String>)> {
    let root = system::workspace_root();
    tracked_files()
        .into_iter()
        .filter(|name| name != "CHANGELOG.md")
        .filter_map(|name| {
            let text = fs::read_to_string(root.join(&name)).ok()?;
            let phrases = journal_phrases(&text);
            (!phrases.is_empty()).then_some((name, phrases))
        })
        .collect()
}

/// Paragraphs, list items, sentences and runs of twelve words (outside code fences) that appear
/// more than once, ignoring line breaks and spacing: an edit that pasted a paragraph, or
/// part of one, beside an older version. Short ones (headings, "See below.") may repeat.
fn duplicated_paragraphs(markdown: &str) -> Vec<String> {
    let mut in_fence = false;
    let mut pieces: Vec<String> = Vec::new();
    let mut current: Vec<&str> = Vec::new();
    let flush = |current: &mut Vec<&str>, pieces: &mut Vec<String>| {
        if !current.is_empty() {
            pieces.push(current.join(" "));
            current.clear();
        }
    };
    for line in markdown.lines() {
        if line.trim_start().starts_with("```") {
            in_fence = !in_fence;
            flush(&mut current, &mut pieces);
            continue;
        }
        if in_fence {
            continue;
        }
        let trimmed = line.trim_start();
        // A blank line ends a paragraph; a list item or table row starts a piece.
        if trimmed.is_empty() || trimmed.starts_with("- ") || trimmed.starts_with('|') {
            flush(&mut current, &mut pieces);
        }
        if !trimmed.is_empty() {
            current.push(trimmed);
        }
    }
    flush(&mut current, &mut pieces);

    // Runs of words repeated anywhere in the text (across line breaks and paragraphs)
    // catch a passage pasted beside its older version even when the two differ at the
    // edges; prose repeats itself this long only by accident.
    const RUN: usize = 12;
    let mut words: Vec<String> = Vec::new();
    let mut in_fence = false;
    for line in markdown.lines() {
        if line.trim_start().starts_with("```") {
            in_fence = !in_fence;
            continue;
        }
        if !in_fence {
            words.extend(
                line.split_whitespace()
                    .map(|word| word.trim_matches(|c: char| ",.;:()".contains(c)).to_owned())
                    .filter(|word| !word.is_empty() && word != "-" && word != "|"),
            );
        }
    }
    let mut runs: BTreeMap<String, usize> = BTreeMap::new();
    for window in words.windows(RUN) {
        *runs.entry(window.join(" ")).or_default() += 1;
    }
    let mut seen: BTreeMap<String, usize> = BTreeMap::new();
    for piece in pieces {
        let normalised = piece.split_whitespace().collect::<Vec<_>>().join(" ");
        let sentences: Vec<String> = normalised
            .split(". ")
            .map(str::to_owned)
            .filter(|sentence| sentence.len() >= 60 && sentence.len() < normalised.len())
            .collect();
        // A sentence repeated within one piece counts too.
        for sentence in sentences {
            *seen.entry(sentence).or_default() += 1;
        }
        if normalised.len() >= 40 {
            *seen.entry(normalised).or_default() += 1;
        }
    }
    let mut repeated: Vec<String> = seen
        .into_iter()
        .chain(runs)
        .filter(|(_, count)| *count > 1)
        .map(|(text, _)| text)
        .collect();
    repeated.sort();
    repeated.dedup();
    repeated
}

/// Backticked words that name a repository path (their first segment is a top-level
/// entry of the repository, other than the build output) and do not exist under `root`.
/// Patterns (`crates/*`, `{id}`, `…`) are not paths and are skipped.
fn missing_paths(markdown: &str, root: &Path, top_level: &[String]) -> Vec<String> {
    let mut missing = Vec::new();
    for (index, piece) in markdown.split('`').enumerate() {
        // Odd pieces are inside backticks.
        if index % 2 == 0 || piece.contains(char::is_whitespace) {
            continue;
        }
        if piece.contains(['*', '{', '<', '…', '$', '(']) {
            continue;
        }
        let path = piece
            .split(['#', ':'])
            .next()
            .unwrap_or(piece)
            .trim_end_matches('/');
        let first = path.split('/').next().unwrap_or(path);
        if first == "target" || !top_level.iter().any(|entry| entry == first) {
            continue;
        }
        if !root.join(path).exists() {
            missing.push(piece.to_owned());
        }
    }
    missing.sort();
    missing.dedup();
    missing
}

fn top_level_entries() -> Vec<String> {
    let mut entries: Vec<String> = tracked_files()
        .iter()
        .filter_map(|name| name.split('/').next().map(str::to_owned))
        .collect();
    entries.sort();
    entries.dedup();
    entries
}

#[test]
fn tidy_no_file_cites_documents_outside_the_repository() {
    let citing = files_citing_outside_documents();
    assert!(
        citing.is_empty(),
        "these files cite {DESIGN_DOCUMENT} or {SHARED_DIRECTORY}, which a clone does not \
         have; cite the file under docs/ that says it (docs/design.md, docs/api.md, \
         docs/configuration.md): {citing:#?}"
    );
}

#[test]
fn tidy_no_file_dates_its_text_by_the_work_that_wrote_it() {
    let dated = files_with_journal_phrases();
    assert!(
        dated.is_empty(),
        "these files name tracker numbers or sittings of work instead of the behaviour \
         (the history belongs in CHANGELOG.md): {dated:#?}"
    );
}

#[test]
fn tidy_architecture_map_names_existing_paths_once() {
    let root = system::workspace_root();
    let map = fs::read_to_string(root.join("docs/ARCHITECTURE.md")).expect("docs/ARCHITECTURE.md");
    let missing = missing_paths(&map, &root, &top_level_entries());
    assert!(
        missing.is_empty(),
        "docs/ARCHITECTURE.md names paths that do not exist: {missing:#?}"
    );
    let repeated = duplicated_paragraphs(&map);
    assert!(
        repeated.is_empty(),
        "docs/ARCHITECTURE.md says these paragraphs more than once: {repeated:#?}"
    );
}

#[test]
fn tidy_checks_catch_what_they_look_for() {
    let root = system::workspace_root();
    let top_level = vec!["crates".to_owned(), "docs".to_owned(), "target".to_owned()];
    assert_eq!(
        missing_paths(
            "`crates/domain` and `crates/nowhere/src/lib.rs`, `docs/api.md#errors`, \
             `crates/*`, `text/csv`, `target/pgdata`, `POST …/events`",
            &root,
            &top_level
        ),
        ["crates/nowhere/src/lib.rs"]
    );
    let paragraph = "The worker claims a batch of messages and sends them through the pool.";
    let repeated = duplicated_paragraphs(&format!(
        "# Title\n\n{paragraph}\n\nSomething else that is long enough to count here.\n\n\
         The worker claims a batch of messages\nand sends them through the pool.\n"
    ));
    assert!(
        repeated.iter().any(|text| text == paragraph),
        "{repeated:?}"
    );
    assert!(duplicated_paragraphs(
        "```\nsame line, long enough to count twice\n\nsame line, long enough to count twice\n```\n"
    )
    .is_empty());
    // The same list item twice in one list.
    let item = "- `dto.rs`: JSON shapes and secret masking here.";
    let repeated = duplicated_paragraphs(&format!("{item}\n- other\n{item}\n"));
    assert!(repeated.iter().any(|text| text == item), "{repeated:?}");
    // A passage pasted into another paragraph, with different edges.
    let passage = "the lease outlasts two SMTP timeouts plus a minute for each message it holds";
    let repeated = duplicated_paragraphs(&format!(
        "First, {passage}; more.\n\nSecond: {passage} and again.\n"
    ));
    assert!(!repeated.is_empty(), "a pasted passage went unnoticed");
    // Journal phrases are caught; the real sessions of SMTP, the console and the
    // database pass.
    let item = TRACKER_ITEM;
    let sitting = SITTING;
    for dated in [
        format!("Where {item} 13's targets stand"),
        format!("({item} #21)"),
        format!("{item}s 8 and 9"),
        format!("end of the ninth {sitting}"),
        format!("measured in the 7th {sitting}"),
        format!("an earlier {sitting} found"),
        format!("the {sitting} of 2026-11-25"),
        format!("this {sitting}'s machine"),
        format!("the second {ROUND}"),
    ] {
        assert!(
            !journal_phrases(&dated).is_empty(),
            "{dated:?} went unnoticed"
        );
    }
    for legit in [
        format!("421 4.4.2 Idle too long in this {sitting}, closing"),
        format!("at most 100 per {sitting}; one {sitting} per connection"),
        format!("<strong>(this {sitting})</strong> and `console_{sitting}s`"),
        format!("the queueing {sitting} reports its statistics"),
        format!("an operator {item}s one with `mailroom user create`"),
    ] {
        assert_eq!(journal_phrases(&legit), Vec::<String>::new(), "{legit:?}");
    }
    // Different paragraphs pass.
    assert!(duplicated_paragraphs(
        "Requests arrive over HTTP and become calls to use cases in the app crate.\n\n\
         Workers claim due messages under a lease and send them through the pool.\n"
    )
    .is_empty());
}
