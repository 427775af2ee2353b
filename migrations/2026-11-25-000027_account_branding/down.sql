ALTER TABLE accounts
    DROP COLUMN brand_accent_color,
    DROP COLUMN brand_logo_url,
    DROP COLUMN brand_display_name;
