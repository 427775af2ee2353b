DROP TABLE contact_event_increments;
DROP TABLE contact_event_totals;
