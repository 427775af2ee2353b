//! An account's branding of its public pages (the unsubscribe and preferences page): a
//! display name, a logo shown by URL, and an accent colour whose text colour is chosen
//! so the pair always meets WCAG's 4.5:1 contrast.

use validator::ValidateUrl;

use crate::{
    account::{bounded_name, InvalidName},
    patch::Field,
};

/// The longest display name accepted, in characters.
pub const MAX_DISPLAY_NAME: usize = 100;
/// The longest logo URL accepted, in bytes.
pub const MAX_LOGO_URL: usize = 2048;
/// The contrast WCAG 2 asks of normal text (success criterion 1.4.3, level AA).
pub const MIN_TEXT_CONTRAST: f64 = 4.5;

/// What an account's public pages show of it. Every part is optional: a page without a
/// display name shows the account's name, one without a logo shows none, one without an
/// accent colour uses the page's own.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Branding {
    /// The name the page shows as the sender (and the logo's alternative text).
    pub display_name: Option<DisplayName>,
    /// The logo, loaded by the reader's browser from this https URL.
    pub logo_url: Option<LogoUrl>,
    /// The accent colour of the page's header band and buttons.
    pub accent_color: Option<AccentColor>,
}

impl Branding {
    /// True when no part is set.
    pub fn is_empty(&self) -> bool {
        self.display_name.is_none() && self.logo_url.is_none() && self.accent_color.is_none()
    }
}

/// A change to [`Branding`]: each part absent (kept), `null` (cleared) or a new value.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct BrandingPatch {
    /// The display name.
    pub display_name: Field<DisplayName>,
    /// The logo URL.
    pub logo_url: Field<LogoUrl>,
    /// The accent colour.
    pub accent_color: Field<AccentColor>,
}

impl BrandingPatch {
    /// A patch that clears every part (the API's `"branding": null`).
    pub fn clear_all() -> Self {
        Self {
            display_name: Field::Null,
            logo_url: Field::Null,
            accent_color: Field::Null,
        }
    }

    /// `current` with this patch applied.
    pub fn apply(self, current: Branding) -> Branding {
        fn merge<T>(field: Field<T>, current: Option<T>) -> Option<T> {
            match field {
                Field::Absent => current,
                Field::Null => None,
                Field::Value(value) => Some(value),
            }
        }
        Branding {
            display_name: merge(self.display_name, current.display_name),
            logo_url: merge(self.logo_url, current.logo_url),
            accent_color: merge(self.accent_color, current.accent_color),
        }
    }
}

/// A display name: 1 to [`MAX_DISPLAY_NAME`] characters after trimming.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DisplayName(String);

impl DisplayName {
    /// Trims and checks the length.
    ///
    /// # Errors
    /// [`InvalidName`] when empty or too long.
    pub fn parse(text: &str) -> Result<Self, InvalidName> {
        bounded_name(text, MAX_DISPLAY_NAME).map(Self)
    }

    /// The name.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

/// Why a logo URL was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum InvalidLogoUrl {
    /// Longer than [`MAX_LOGO_URL`].
    #[error("must be at most {MAX_LOGO_URL} characters")]
    TooLong,
    /// Not an absolute `https://` URL with a host.
    #[error("must be an absolute https URL")]
    Shape,
}

/// A logo URL: absolute, `https`, with a host, at most [`MAX_LOGO_URL`] bytes. Only
/// https is accepted because the page's content security policy allows images from
/// https only: a page served over https must not load mixed content, and an `http` or
/// `data:` logo would widen what the page may load.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LogoUrl(String);

impl LogoUrl {
    /// Checks length, scheme and shape.
    ///
    /// # Errors
    /// [`InvalidLogoUrl`].
    pub fn parse(text: &str) -> Result<Self, InvalidLogoUrl> {
        let text = text.trim();
        if text.len() > MAX_LOGO_URL {
            return Err(InvalidLogoUrl::TooLong);
        }
        let https = text
            .get(..8)
            .is_some_and(|scheme| scheme.eq_ignore_ascii_case("https://"));
        let host = text
            .get(8..)
            .and_then(|rest| rest.split(['/', '?', '#']).next())
            .unwrap_or_default();
        let bad_char = text
            .chars()
            .any(|c| c.is_whitespace() || c.is_control() || matches!(c, '"' | '<' | '>' | '`'));
        if !https || host.is_empty() || host.contains('@') || bad_char || !text.validate_url() {
            return Err(InvalidLogoUrl::Shape);
        }
        Ok(Self(text.to_owned()))
    }

    /// The URL.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

/// An accent colour was not `#rrggbb`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("must be a colour written #rrggbb")]
pub struct InvalidAccentColor;

/// An opaque sRGB colour, written `#rrggbb` (stored and shown in lower case).
///
/// Every such colour can carry text: either white or black reaches at least 4.58:1
/// against it (the two contrasts multiply to 21, so the larger is at least √21), so no
/// colour is refused; [`AccentColor::text_color`] picks the better of the two.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AccentColor([u8; 3]);

/// The colour of text on an accent background.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TextColor {
    /// `#ffffff`.
    White,
    /// `#000000`.
    Black,
}

impl TextColor {
    /// The CSS colour.
    pub fn as_css(&self) -> &'static str {
        match self {
            Self::White => "#ffffff",
            Self::Black => "#000000",
        }
    }
}

impl AccentColor {
    /// The pages' own accent, used when an account sets none: `#0b4fb3`, under white
    /// text at 7.5:1.
    pub const DEFAULT: Self = Self([0x0b, 0x4f, 0xb3]);

    /// Reads `#rrggbb` (either case).
    ///
    /// # Errors
    /// [`InvalidAccentColor`] for anything else, including `#rgb` and names.
    pub fn parse(text: &str) -> Result<Self, InvalidAccentColor> {
        let digits = text.strip_prefix('#').ok_or(InvalidAccentColor)?;
        if digits.len() != 6 || !digits.bytes().all(|b| b.is_ascii_hexdigit()) {
            return Err(InvalidAccentColor);
        }
        let channel = |at: usize| {
            digits
                .get(at..at + 2)
                .and_then(|pair| u8::from_str_radix(pair, 16).ok())
                .ok_or(InvalidAccentColor)
        };
        Ok(Self([channel(0)?, channel(2)?, channel(4)?]))
    }

    /// The colour as `#rrggbb` in lower case.
    pub fn to_hex(&self) -> String {
        let [r, g, b] = self.0;
        format!("#{r:02x}{g:02x}{b:02x}")
    }

    /// The WCAG 2 relative luminance, 0 (black) to 1 (white).
    pub fn relative_luminance(&self) -> f64 {
        let linear = |channel: u8| {
            let c = f64::from(channel) / 255.0;
            if c <= 0.04045 {
                c / 12.92
            } else {
                ((c + 0.055) / 1.055).powf(2.4)
            }
        };
        let [r, g, b] = self.0;
        0.2126 * linear(r) + 0.7152 * linear(g) + 0.0722 * linear(b)
    }

    /// The text colour with the higher contrast against this colour.
    pub fn text_color(&self) -> TextColor {
        if self.contrast_with(TextColor::White) >= self.contrast_with(TextColor::Black) {
            TextColor::White
        } else {
            TextColor::Black
        }
    }

    /// The WCAG contrast ratio (1 to 21) of `text` on this colour.
    pub fn contrast_with(&self, text: TextColor) -> f64 {
        let background = self.relative_luminance();
        let foreground = match text {
            TextColor::White => 1.0,
            TextColor::Black => 0.0,
        };
        let (light, dark) = if background > foreground {
            (background, foreground)
        } else {
            (foreground, background)
        };
        (light + 0.05) / (dark + 0.05)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn colours_are_hex_triplets_and_always_get_a_readable_text_colour() {
        assert_eq!(
            AccentColor::parse("#0B4FB3").expect("valid").to_hex(),
            "#0b4fb3"
        );
        for bad in [
            "0b4fb3",
            "#0b4",
            "#0b4fb3ff",
            "#0b4fbg",
            "blue",
            "",
            "#ｆｆｆｆｆｆ",
        ] {
            assert_eq!(AccentColor::parse(bad), Err(InvalidAccentColor), "{bad}");
        }
        assert_eq!(
            AccentColor::parse("#ffffff").expect("valid").text_color(),
            TextColor::Black
        );
        assert_eq!(
            AccentColor::parse("#0b4fb3").expect("valid").text_color(),
            TextColor::White
        );
        // Every grey and a sweep of hues: the chosen text colour reaches 4.5:1.
        for value in 0..=255u8 {
            for colour in [[value; 3], [value, 255 - value, 0], [0, value, 255 - value]] {
                let accent = AccentColor(colour);
                let ratio = accent.contrast_with(accent.text_color());
                assert!(ratio >= MIN_TEXT_CONTRAST, "{}: {ratio}", accent.to_hex());
            }
        }
        // The hardest colour for both: mid grey, still above √21.
        let grey = AccentColor::parse("#757575").expect("valid");
        assert!(grey.contrast_with(grey.text_color()) >= 21f64.sqrt() - 1e-9);
    }

    #[test]
    fn logo_urls_are_https_with_a_host_and_bounded() {
        assert!(LogoUrl::parse("https://cdn.example.com/logo.png").is_ok());
        assert!(LogoUrl::parse("HTTPS://cdn.example.com/logo.svg?v=2").is_ok());
        for bad in [
            "http://cdn.example.com/logo.png",
            "https:///logo.png",
            "https://",
            "javascript:alert(1)",
            "data:image/png;base64,AAAA",
            "https://example.com/a b.png",
            "https://example.com/\"onerror=\"x",
            "https://user@example.com/logo.png",
            "//example.com/logo.png",
        ] {
            assert_eq!(LogoUrl::parse(bad), Err(InvalidLogoUrl::Shape), "{bad}");
        }
        let long = format!("https://example.com/{}", "a".repeat(MAX_LOGO_URL));
        assert_eq!(LogoUrl::parse(&long), Err(InvalidLogoUrl::TooLong));
    }

    #[test]
    fn a_patch_keeps_clears_or_replaces_each_part() {
        let current = Branding {
            display_name: Some(DisplayName::parse("Acme").expect("valid")),
            logo_url: Some(LogoUrl::parse("https://example.com/l.png").expect("valid")),
            accent_color: None,
        };
        let patched = BrandingPatch {
            display_name: Field::Absent,
            logo_url: Field::Null,
            accent_color: Field::Value(AccentColor::parse("#112233").expect("valid")),
        }
        .apply(current.clone());
        assert_eq!(patched.display_name, current.display_name);
        assert_eq!(patched.logo_url, None);
        assert_eq!(
            patched.accent_color.map(|c| c.to_hex()).as_deref(),
            Some("#112233")
        );
        assert!(BrandingPatch::clear_all().apply(patched).is_empty());
    }

    #[test]
    fn display_names_are_trimmed_and_bounded() {
        assert_eq!(
            DisplayName::parse(" Acme ").expect("valid").as_str(),
            "Acme"
        );
        assert_eq!(DisplayName::parse(""), Err(InvalidName::Empty));
        assert_eq!(
            DisplayName::parse(&"é".repeat(101)),
            Err(InvalidName::TooLong(100))
        );
        assert!(DisplayName::parse(&"é".repeat(100)).is_ok());
    }
}
