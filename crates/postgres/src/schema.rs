//! Diesel's view of the tables in `migrations/`. Written by hand and kept honest by the
//! `schema_matches_migrations` test, which compares it with a migrated database.

diesel::table! {
    users (id) {
        id -> Uuid,
        email -> Text,
        created_at -> Timestamptz,
    }
}

diesel::table! {
    tokens (id) {
        id -> Uuid,
        user_id -> Uuid,
        name -> Text,
        token_hash -> Bytea,
        created_at -> Timestamptz,
        expires_at -> Nullable<Timestamptz>,
        last_used_at -> Nullable<Timestamptz>,
        revoked_at -> Nullable<Timestamptz>,
        scope -> Text,
        account_ids -> Nullable<Array<Uuid>>,
    }
}

diesel::table! {
    accounts (id) {
        id -> Uuid,
        name -> Text,
        click_tracking -> Bool,
        open_tracking -> Bool,
        created_at -> Timestamptz,
        brand_display_name -> Nullable<Text>,
        brand_logo_url -> Nullable<Text>,
        brand_accent_color -> Nullable<Text>,
        refuse_clear_text_auth -> Bool,
    }
}

diesel::table! {
    memberships (account_id, user_id) {
        account_id -> Uuid,
        user_id -> Uuid,
        role -> Text,
        created_at -> Timestamptz,
    }
}

diesel::table! {
    webhook_configs (account_id) {
        account_id -> Uuid,
        url -> Text,
        auth_type -> Text,
        events -> Array<Text>,
        username -> Nullable<Text>,
        password_or_token -> Nullable<Bytea>,
        signing_secret -> Bytea,
        updated_at -> Timestamptz,
    }
}

diesel::table! {
    templates (account_id, id) {
        account_id -> Uuid,
        id -> Uuid,
        name -> Text,
        slug -> Text,
        subject -> Text,
        content -> Text,
        text_content -> Nullable<Text>,
        content_type -> Text,
        from_name -> Nullable<Text>,
        from_email -> Nullable<Text>,
        cc -> Nullable<Text>,
        bcc -> Nullable<Text>,
        rcpt_name -> Nullable<Text>,
        reply_to -> Nullable<Text>,
        preferred_mail_server_id -> Nullable<Uuid>,
        click_tracking -> Nullable<Bool>,
        open_tracking -> Nullable<Bool>,
        created_at -> Timestamptz,
        updated_at -> Timestamptz,
    }
}

diesel::table! {
    automations (account_id, id) {
        account_id -> Uuid,
        id -> Uuid,
        name -> Text,
        template_id -> Uuid,
        trigger_event_slug -> Text,
        trigger_condition -> Text,
        timing_condition -> Text,
        timing_value -> Nullable<Int4>,
        is_enabled -> Bool,
        created_at -> Timestamptz,
    }
}

diesel::table! {
    topics (account_id, id) {
        account_id -> Uuid,
        id -> Uuid,
        name -> Text,
        description -> Nullable<Text>,
        created_at -> Timestamptz,
    }
}

diesel::table! {
    mail_servers (account_id, id) {
        account_id -> Uuid,
        id -> Uuid,
        service_type -> Text,
        host -> Text,
        port -> Int4,
        secure -> Bool,
        require_tls -> Bool,
        allow_insecure_tls -> Bool,
        username -> Text,
        password -> Bytea,
        default_from_email -> Text,
        default_from_name -> Text,
        created_at -> Timestamptz,
        updated_at -> Timestamptz,
        unhealthy_since -> Nullable<Timestamptz>,
        last_error -> Nullable<Text>,
    }
}

diesel::table! {
    contacts (account_id, id) {
        account_id -> Uuid,
        id -> Uuid,
        email -> Text,
        email_lower -> Text,
        created_at -> Timestamptz,
        hard_bounced_at -> Nullable<Timestamptz>,
        complaint_at -> Nullable<Timestamptz>,
        unsubscribed_at -> Nullable<Timestamptz>,
        message_count -> Int4,
        sort_name -> Nullable<Text>,
        pending_since -> Nullable<Timestamptz>,
        confirmed_at -> Nullable<Timestamptz>,
        last_sent_at -> Nullable<Timestamptz>,
        last_opened_at -> Nullable<Timestamptz>,
        last_clicked_at -> Nullable<Timestamptz>,
        last_bounced_at -> Nullable<Timestamptz>,
    }
}

diesel::table! {
    attribute_metas (account_id, slug) {
        account_id -> Uuid,
        slug -> Text,
        attribute_type -> Text,
        source -> Text,
        created_at -> Timestamptz,
        slot -> Nullable<Int2>,
    }
}

diesel::table! {
    contact_attributes (account_id, contact_id, slug) {
        account_id -> Uuid,
        contact_id -> Uuid,
        slug -> Text,
        string_value -> Nullable<Text>,
        number_value -> Nullable<Float8>,
        bool_value -> Nullable<Bool>,
        date_value -> Nullable<Timestamptz>,
    }
}

diesel::table! {
    /// One row per contact: the values of its account's slotted attributes
    /// (migration 31, docs/operations.md "What lists and counts read"), kept by the repository's writes
    /// (`crate::upkeep`).
    contact_slots (account_id, contact_id) {
        account_id -> Uuid,
        contact_id -> Uuid,
        string_1 -> Nullable<Text>,
        string_2 -> Nullable<Text>,
        string_3 -> Nullable<Text>,
        string_4 -> Nullable<Text>,
        number_1 -> Nullable<Float8>,
        number_2 -> Nullable<Float8>,
        number_3 -> Nullable<Float8>,
        number_4 -> Nullable<Float8>,
        boolean_1 -> Nullable<Bool>,
        boolean_2 -> Nullable<Bool>,
        boolean_3 -> Nullable<Bool>,
        boolean_4 -> Nullable<Bool>,
        date_1 -> Nullable<Timestamptz>,
        date_2 -> Nullable<Timestamptz>,
        date_3 -> Nullable<Timestamptz>,
        date_4 -> Nullable<Timestamptz>,
    }
}

diesel::table! {
    contact_events (account_id, id) {
        account_id -> Uuid,
        id -> Uuid,
        contact_id -> Uuid,
        slug -> Text,
        occurred_at -> Timestamptz,
    }
}

diesel::table! {
    contact_event_totals (account_id, slug) {
        account_id -> Uuid,
        slug -> Text,
        count -> Int8,
        last_seen -> Nullable<Timestamptz>,
    }
}

diesel::table! {
    contact_event_increments (account_id, id) {
        account_id -> Uuid,
        id -> Int8,
        slug -> Text,
        count -> Int8,
        last_seen -> Nullable<Timestamptz>,
    }
}

diesel::table! {
    topic_unsubscriptions (account_id, contact_id, topic_id) {
        account_id -> Uuid,
        contact_id -> Uuid,
        topic_id -> Uuid,
        created_at -> Timestamptz,
    }
}

diesel::table! {
    webhook_events (account_id, id) {
        account_id -> Uuid,
        id -> Uuid,
        event_type -> Text,
        status -> Text,
        payload -> Jsonb,
        target -> Jsonb,
        occurred_at -> Timestamptz,
        try_count -> Int4,
        next_attempt_at -> Nullable<Timestamptz>,
        locked_until -> Nullable<Timestamptz>,
        lease_token -> Nullable<Uuid>,
        last_attempt_at -> Nullable<Timestamptz>,
        last_status_code -> Nullable<Int4>,
        last_error -> Nullable<Text>,
        parent_event_id -> Nullable<Uuid>,
        retried_by_user_id -> Nullable<Uuid>,
        created_at -> Timestamptz,
        delivered_at -> Nullable<Timestamptz>,
    }
}

diesel::table! {
    messages (account_id, id) {
        account_id -> Uuid,
        id -> Uuid,
        contact_id -> Uuid,
        email -> Text,
        template_id -> Uuid,
        kind -> Text,
        status -> Text,
        skip_reason -> Nullable<Text>,
        data -> Jsonb,
        attempts -> Int4,
        next_attempt_at -> Nullable<Timestamptz>,
        locked_until -> Nullable<Timestamptz>,
        lease_token -> Nullable<Uuid>,
        last_reply -> Nullable<Text>,
        message_id_header -> Text,
        idempotency_key -> Nullable<Text>,
        request_hash -> Nullable<Text>,
        created_at -> Timestamptz,
        updated_at -> Timestamptz,
        sent_at -> Nullable<Timestamptz>,
        automation_id -> Nullable<Uuid>,
        announcement_id -> Nullable<Uuid>,
        claims_without_outcome -> Int4,
        test -> Bool,
        form_id -> Nullable<Uuid>,
    }
}

diesel::table! {
    forms (account_id, id) {
        account_id -> Uuid,
        id -> Uuid,
        name -> Text,
        topic_ids -> Array<Uuid>,
        attributes -> Array<Text>,
        double_opt_in -> Bool,
        confirmation_template_id -> Nullable<Uuid>,
        success_redirect_url -> Nullable<Text>,
        confirmation_redirect_url -> Nullable<Text>,
        created_at -> Timestamptz,
        updated_at -> Timestamptz,
    }
}

diesel::table! {
    form_confirmations (account_id, id) {
        account_id -> Uuid,
        id -> Uuid,
        form_id -> Uuid,
        contact_id -> Uuid,
        attributes -> Jsonb,
        created_at -> Timestamptz,
        confirmed_at -> Nullable<Timestamptz>,
    }
}

diesel::table! {
    automation_firings (account_id, automation_id, contact_id) {
        account_id -> Uuid,
        automation_id -> Uuid,
        contact_id -> Uuid,
        fired_at -> Timestamptz,
    }
}

diesel::table! {
    announcements (account_id, id) {
        account_id -> Uuid,
        id -> Uuid,
        name -> Text,
        template_id -> Uuid,
        subject -> Text,
        topic_id -> Nullable<Uuid>,
        include_unsubscribed -> Bool,
        attributes -> Jsonb,
        status -> Text,
        last_sampled_contact_id -> Nullable<Uuid>,
        expanded_at -> Nullable<Timestamptz>,
        audience_size -> Int8,
        process_date -> Nullable<Timestamptz>,
        failure_reason -> Nullable<Text>,
        created_at -> Timestamptz,
        updated_at -> Timestamptz,
        segment_id -> Nullable<Uuid>,
        send_at -> Nullable<Timestamptz>,
    }
}

diesel::table! {
    /// One row per account with waiting mail: when its next message is due (migration 14).
    delivery_lanes (account_id) {
        account_id -> Uuid,
        next_due_at -> Nullable<Timestamptz>,
    }
}

diesel::table! {
    /// Sends on the wire (messages and their accepted copies) per owner, UTC month and
    /// account: the monthly send limit's count (migration `2026-12-02-000001`).
    monthly_sends (owner_id, month, account_id) {
        owner_id -> Uuid,
        month -> Date,
        account_id -> Uuid,
        sends -> Int8,
    }
}

diesel::table! {
    /// One row per account with waiting webhook events: when its next one is due
    /// (migration 30).
    webhook_lanes (account_id) {
        account_id -> Uuid,
        next_due_at -> Nullable<Timestamptz>,
    }
}

diesel::table! {
    message_stats_daily (account_id, day) {
        account_id -> Uuid,
        day -> Date,
        bounce_blocked -> Int8,
        complained -> Int8,
        complaint_blocked -> Int8,
        free_limit_capped -> Int8,
        bounced -> Int8,
        clicked -> Int8,
        failed -> Int8,
        opened -> Int8,
        sent -> Int8,
        unsubscribed -> Int8,
    }
}

diesel::table! {
    message_tracking (account_id, message_id) {
        account_id -> Uuid,
        message_id -> Uuid,
        links -> Array<Text>,
        opened_at -> Nullable<Timestamptz>,
        clicked_at -> Nullable<Timestamptz>,
    }
}

diesel::table! {
    sending_domains (account_id, id) {
        account_id -> Uuid,
        id -> Uuid,
        name -> Text,
        status -> Text,
        spf_status -> Text,
        dmarc_status -> Text,
        return_path_status -> Text,
        created_at -> Timestamptz,
        verified_at -> Nullable<Timestamptz>,
        checked_at -> Nullable<Timestamptz>,
    }
}

diesel::table! {
    console_sessions (id) {
        id -> Uuid,
        user_id -> Uuid,
        secret_hash -> Bytea,
        csrf_token -> Text,
        token_id -> Nullable<Uuid>,
        scope -> Text,
        account_ids -> Nullable<Array<Uuid>>,
        user_agent -> Text,
        created_at -> Timestamptz,
        expires_at -> Timestamptz,
        revoked_at -> Nullable<Timestamptz>,
    }
}

diesel::table! {
    sending_domain_keys (account_id, id) {
        account_id -> Uuid,
        id -> Uuid,
        domain_id -> Uuid,
        selector -> Text,
        private_key -> Bytea,
        public_key -> Text,
        status -> Text,
        created_at -> Timestamptz,
    }
}

diesel::table! {
    console_login_links (id) {
        id -> Uuid,
        user_id -> Uuid,
        secret_hash -> Bytea,
        created_at -> Timestamptz,
        expires_at -> Timestamptz,
        used_at -> Nullable<Timestamptz>,
    }
}

diesel::table! {
    /// Per-announcement message counts by state, kept by the repository (`crate::upkeep`,
    /// migration 25): one row per (announcement, writing backend), summed on read.
    announcement_counters (account_id, announcement_id, slot) {
        account_id -> Uuid,
        announcement_id -> Uuid,
        slot -> Int4,
        queued -> Int8,
        sending -> Int8,
        sent -> Int8,
        failed -> Int8,
        bounced -> Int8,
        skipped -> Int8,
        opened -> Int8,
        clicked -> Int8,
    }
}

diesel::table! {
    suppressions (account_id, address_hash, reason) {
        account_id -> Uuid,
        address_hash -> Bytea,
        reason -> Text,
        source -> Text,
        email -> Nullable<Text>,
        detail -> Nullable<Text>,
        created_at -> Timestamptz,
    }
}

diesel::table! {
    topic_suppressions (account_id, address_hash, topic_id) {
        account_id -> Uuid,
        address_hash -> Bytea,
        topic_id -> Uuid,
        created_at -> Timestamptz,
    }
}

diesel::table! {
    suppression_keys (account_id) {
        account_id -> Uuid,
        sealed_key -> Bytea,
        created_at -> Timestamptz,
    }
}

diesel::table! {
    /// Saved segments: named audience definitions (`2026-12-02-000004_segments`).
    segments (account_id, id) {
        account_id -> Uuid,
        id -> Uuid,
        name -> Text,
        attributes -> Jsonb,
        include_unsubscribed -> Bool,
        topic_id -> Nullable<Uuid>,
        created_at -> Timestamptz,
        updated_at -> Timestamptz,
    }
}

diesel::joinable!(tokens -> users (user_id));
diesel::joinable!(console_sessions -> tokens (token_id));
diesel::joinable!(memberships -> accounts (account_id));
diesel::joinable!(memberships -> users (user_id));

diesel::table! {
    feedback_sources (account_id, id) {
        account_id -> Uuid,
        id -> Uuid,
        provider -> Text,
        topic_arns -> Array<Text>,
        signing_key -> Nullable<Bytea>,
        public_key -> Nullable<Text>,
        secret_hash -> Nullable<Bytea>,
        created_at -> Timestamptz,
        last_event_at -> Nullable<Timestamptz>,
        events_recorded -> Int8,
        events_ignored -> Int8,
    }
}

diesel::table! {
    feedback_source_tokens (account_id, source_id, token) {
        account_id -> Uuid,
        source_id -> Uuid,
        token -> Text,
        seen_at -> Timestamptz,
    }
}

diesel::allow_tables_to_appear_in_same_query!(
    users,
    tokens,
    accounts,
    memberships,
    webhook_configs,
    templates,
    automations,
    topics,
    mail_servers,
    contacts,
    attribute_metas,
    contact_attributes,
    contact_slots,
    contact_events,
    contact_event_totals,
    contact_event_increments,
    topic_unsubscriptions,
    webhook_events,
    messages,
    forms,
    form_confirmations,
    delivery_lanes,
    webhook_lanes,
    monthly_sends,
    message_stats_daily,
    automation_firings,
    announcements,
    message_tracking,
    sending_domains,
    sending_domain_keys,
    console_sessions,
    console_login_links,
    feedback_sources,
    feedback_source_tokens,
    announcement_counters,
    suppressions,
    suppression_keys,
    topic_suppressions,
    segments,
);
