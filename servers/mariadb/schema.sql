-- Seed 002's store, run at every start (--init-file). Every message is a row: there is no
-- unique key on (client_id, seq), so a message stored twice is two rows and can be counted.
CREATE DATABASE IF NOT EXISTS webperf;
CREATE USER IF NOT EXISTS 'webperf'@'127.0.0.1' IDENTIFIED BY 'webperf';
CREATE USER IF NOT EXISTS 'webperf'@'localhost' IDENTIFIED BY 'webperf';
GRANT ALL ON webperf.* TO 'webperf'@'127.0.0.1';
GRANT ALL ON webperf.* TO 'webperf'@'localhost';
CREATE TABLE IF NOT EXISTS webperf.telemetry (
    id BIGINT NOT NULL AUTO_INCREMENT PRIMARY KEY,
    client_id BIGINT NOT NULL,
    seq BIGINT NULL,              -- the generator's per-client sequence number (NULL: none sent)
    sent_at DOUBLE NULL,          -- the generator's send time, Unix seconds
    temp DOUBLE NOT NULL,
    humidity DOUBLE NOT NULL,
    light DOUBLE NOT NULL,
    via VARCHAR(8) NOT NULL,      -- 'mqtt' or 'http'
    received_at TIMESTAMP(6) NOT NULL DEFAULT CURRENT_TIMESTAMP(6),
    KEY client_seq (client_id, seq),
    KEY sent (sent_at)
) ENGINE=InnoDB;
