-- The branding of an account's public pages: each part optional. The
-- checks repeat the domain's bounds so nothing written around the API breaks a page.
ALTER TABLE accounts
    ADD COLUMN brand_display_name text
        CONSTRAINT accounts_brand_display_name_bounded
        CHECK (char_length(brand_display_name) BETWEEN 1 AND 100),
    ADD COLUMN brand_logo_url text
        CONSTRAINT accounts_brand_logo_url_https
        CHECK (octet_length(brand_logo_url) <= 2048 AND brand_logo_url ~* '^https://'),
    ADD COLUMN brand_accent_color text
        CONSTRAINT accounts_brand_accent_color_hex
        CHECK (brand_accent_color ~ '^#[0-9a-f]{6}$');
