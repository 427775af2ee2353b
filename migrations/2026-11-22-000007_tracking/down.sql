DROP TABLE message_tracking;
