//! The languages of the public pages and the choice among them from `Accept-Language`.
//! Each language's strings are one JSON catalogue (`catalogues/<tag>.json`, a flat map
//! of key to text) compiled into the binary; every catalogue has English's keys.

use std::collections::BTreeMap;

use actix_web::{
    http::header::{AcceptLanguage, Header, Preference, Quality},
    HttpRequest,
};

/// The most `Accept-Language` entries looked at: the header is sent by the reader's
/// browser (a handful of entries), so anything beyond is noise.
const MAX_PREFERENCES: usize = 32;

/// A language the public pages are written in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Language {
    /// English, the default.
    En,
    /// German.
    De,
    /// French.
    Fr,
    /// Spanish.
    Es,
}

impl Language {
    /// Every language, English first.
    pub const ALL: [Self; 4] = [Self::En, Self::De, Self::Fr, Self::Es];

    /// The BCP 47 tag, as `<html lang>` carries it.
    pub fn tag(self) -> &'static str {
        match self {
            Self::En => "en",
            Self::De => "de",
            Self::Fr => "fr",
            Self::Es => "es",
        }
    }

    /// The catalogue's source.
    pub(super) fn catalogue_source(self) -> &'static str {
        match self {
            Self::En => include_str!("catalogues/en.json"),
            Self::De => include_str!("catalogues/de.json"),
            Self::Fr => include_str!("catalogues/fr.json"),
            Self::Es => include_str!("catalogues/es.json"),
        }
    }

    /// The language of a primary language subtag (`de` of `de-CH`), if the pages have it.
    fn of_primary(subtag: &str) -> Option<Self> {
        Self::ALL
            .into_iter()
            .find(|language| subtag.eq_ignore_ascii_case(language.tag()))
    }

    /// The language for `request`: its `Accept-Language` header (see [`Language::choose`]);
    /// English when the header is absent or cannot be read.
    pub fn of_request(request: &HttpRequest) -> Self {
        AcceptLanguage::parse(request).map_or(Self::En, |header| Self::choose(&header))
    }

    /// The most preferred language the pages have: entries by quality (highest first,
    /// the header's order among equals), `q=0` ("not this one") skipped, a region or
    /// script ignored (`fr-CA` reads as French), `*` meaning "anything" and so English.
    /// English when nothing matches.
    pub fn choose(header: &AcceptLanguage) -> Self {
        let mut entries: Vec<_> = header
            .0
            .iter()
            .take(MAX_PREFERENCES)
            .filter(|entry| entry.quality > Quality::ZERO)
            .collect();
        // Stable: entries of equal quality keep the header's order.
        entries.sort_by_key(|entry| std::cmp::Reverse(entry.quality));
        for entry in entries {
            match &entry.item {
                Preference::Any => return Self::En,
                Preference::Specific(tag) => {
                    if let Some(language) = Self::of_primary(tag.primary_language()) {
                        return language;
                    }
                }
            }
        }
        Self::En
    }
}

/// One language's strings, by key.
pub type Catalogue = BTreeMap<String, String>;

/// Reads a catalogue's source.
///
/// # Errors
/// When it is not a JSON object of strings.
pub(super) fn parse_catalogue(language: Language) -> Result<Catalogue, String> {
    serde_json::from_str(language.catalogue_source())
        .map_err(|error| format!("catalogue {}.json: {error}", language.tag()))
}

#[cfg(test)]
mod tests {
    use actix_web::test::TestRequest;

    use super::*;

    fn chosen(header: &str) -> Language {
        let request = TestRequest::default()
            .insert_header(("accept-language", header))
            .to_http_request();
        Language::of_request(&request)
    }

    #[test]
    fn the_header_chooses_by_quality_and_falls_back_to_english() {
        assert_eq!(chosen("de"), Language::De);
        assert_eq!(chosen("fr-CA, en;q=0.8"), Language::Fr);
        assert_eq!(chosen("ES-mx"), Language::Es);
        assert_eq!(chosen("en;q=0.5, de;q=0.9"), Language::De);
        assert_eq!(chosen("nl, fr;q=0.3, de;q=0.2"), Language::Fr);
        assert_eq!(chosen("nl, pt"), Language::En);
        assert_eq!(chosen("de;q=0, fr;q=0.1"), Language::Fr);
        assert_eq!(chosen("de;q=0"), Language::En);
        assert_eq!(chosen("nl, *;q=0.5, de;q=0.1"), Language::En);
        assert_eq!(chosen("fr, de"), Language::Fr);
        assert_eq!(chosen("not a language header;;;"), Language::En);
        assert_eq!(chosen(""), Language::En);
        let request = TestRequest::default().to_http_request();
        assert_eq!(Language::of_request(&request), Language::En);
    }

    #[test]
    fn every_catalogue_has_exactly_the_english_keys() {
        let english = parse_catalogue(Language::En).expect("English parses");
        for language in Language::ALL {
            let catalogue = parse_catalogue(language).expect("parses");
            let missing: Vec<_> = english
                .keys()
                .filter(|key| !catalogue.contains_key(*key))
                .collect();
            let extra: Vec<_> = catalogue
                .keys()
                .filter(|key| !english.contains_key(*key))
                .collect();
            assert!(
                missing.is_empty() && extra.is_empty(),
                "{}: missing {missing:?}, extra {extra:?}",
                language.tag()
            );
            for (key, text) in &catalogue {
                assert!(
                    !text.trim().is_empty(),
                    "{}: {key} is empty",
                    language.tag()
                );
                // A placeholder of English must be kept by the translation.
                for placeholder in ["{sender}", "{email}"] {
                    assert_eq!(
                        english[key].contains(placeholder),
                        text.contains(placeholder),
                        "{}: {key} and {placeholder}",
                        language.tag()
                    );
                }
            }
        }
    }
}
