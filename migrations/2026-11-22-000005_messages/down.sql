DROP TABLE message_stats_daily;
DROP TABLE messages;
