ALTER TABLE announcements DROP COLUMN segment_id;
DROP TABLE segments;
