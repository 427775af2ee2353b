DROP TABLE topic_unsubscriptions;
DROP TABLE contact_events;
DROP TABLE contact_attributes;
DROP TABLE attribute_metas;
DROP TABLE contacts;
