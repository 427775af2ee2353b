DROP TABLE monthly_sends;
