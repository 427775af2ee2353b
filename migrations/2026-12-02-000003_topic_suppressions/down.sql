DROP TABLE topic_suppressions;
