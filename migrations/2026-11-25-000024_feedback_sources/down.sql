DROP TABLE feedback_source_tokens;
DROP TABLE feedback_sources;
