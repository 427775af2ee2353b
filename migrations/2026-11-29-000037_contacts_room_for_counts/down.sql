ALTER TABLE contacts SET (fillfactor = 90);
