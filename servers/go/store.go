// Seed 002's store: every message, over HTTP or MQTT, is a row in MariaDB (when DB_PORT is
// set; without it the server keeps its in-memory count). One pool, one prepared INSERT.
package main

import (
	"database/sql"
	"fmt"
	"log"
	"os"
	"strconv"
	"time"

	_ "github.com/go-sql-driver/mysql"
)

const insertSQL = "INSERT INTO telemetry (client_id, seq, sent_at, temp, humidity, light, via) " +
	"VALUES (?, ?, ?, ?, ?, ?, ?)"

// Seed 002's message plus the generator's bookkeeping (seq, sentAt), which is optional.
type telemetry struct {
	ClientID *float64 `json:"clientId"`
	Seq      *int64   `json:"seq"`
	SentAt   *float64 `json:"sentAt"`
	Temp     *float64 `json:"temp"`
	Humidity *float64 `json:"humidity"`
	Light    *float64 `json:"light"`
}

func (m *telemetry) complete() bool {
	return m.ClientID != nil && m.Temp != nil && m.Humidity != nil && m.Light != nil
}

type store struct {
	db     *sql.DB
	insert *sql.Stmt
}

func envInt(name string, fallback int) int {
	if value, err := strconv.Atoi(os.Getenv(name)); err == nil && value > 0 {
		return value
	}
	return fallback
}

// openStore connects to MariaDB on 127.0.0.1:DB_PORT; nil when DB_PORT is not set.
func openStore() *store {
	port := os.Getenv("DB_PORT")
	if port == "" {
		return nil
	}
	dsn := fmt.Sprintf("webperf:webperf@tcp(127.0.0.1:%s)/webperf?timeout=10s", port)
	db, err := sql.Open("mysql", dsn)
	if err != nil {
		log.Fatalf("database: %v", err)
	}
	// A bounded pool: one connection per request would need 1000s at seed 002's loads.
	pool := envInt("DB_POOL", 64)
	db.SetMaxOpenConns(pool)
	db.SetMaxIdleConns(pool)
	db.SetConnMaxLifetime(time.Hour)
	var stmt *sql.Stmt
	for attempt := 0; ; attempt++ { // the database may still be applying its schema
		if stmt, err = db.Prepare(insertSQL); err == nil {
			break
		}
		if attempt == 100 {
			log.Fatalf("database: %v", err)
		}
		time.Sleep(200 * time.Millisecond)
	}
	log.Printf("storing telemetry in MariaDB on 127.0.0.1:%s (pool %d)", port, pool)
	return &store{db: db, insert: stmt}
}

func (s *store) save(m *telemetry, via string) error {
	_, err := s.insert.Exec(int64(*m.ClientID), m.Seq, m.SentAt, *m.Temp, *m.Humidity, *m.Light, via)
	return err
}
