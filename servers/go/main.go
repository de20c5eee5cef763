// Seed 002's Go net/http server with the catalogue's routes: the standard library's
// defaults (a goroutine per connection, GOMAXPROCS = CPUs), nothing tuned.
package main

import (
	"encoding/json"
	"log"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"sync/atomic"
)

const www = "/srv/www"

var stored atomic.Int64

// The MariaDB store (store.go); nil keeps the in-memory count.
var db *store

func quickSort(array []int) []int {
	if len(array) < 2 {
		return array
	}
	pivot := array[0]
	var left, right []int
	for _, v := range array[1:] {
		if v < pivot {
			left = append(left, v)
		} else {
			right = append(right, v)
		}
	}
	sorted := append(quickSort(left), pivot)
	return append(sorted, quickSort(right)...)
}

func send(w http.ResponseWriter, status int, contentType string, body []byte) {
	w.Header().Set("Content-Type", contentType)
	// Declared up front: net/http would otherwise send bodies over ~4 KB chunked.
	w.Header().Set("Content-Length", strconv.Itoa(len(body)))
	w.WriteHeader(status)
	w.Write(body)
}

func sendJSON(w http.ResponseWriter, status int, value any) {
	body, _ := json.Marshal(value)
	send(w, status, "application/json", body)
}

// get wraps a handler so that only GET (and HEAD) reach it.
func get(handler http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			http.NotFound(w, r)
			return
		}
		handler(w, r)
	}
}

// file reads the file from disk per request, as seed 000 did.
func file(name, contentType string) http.HandlerFunc {
	path := filepath.Join(www, name)
	return get(func(w http.ResponseWriter, r *http.Request) {
		data, err := os.ReadFile(path)
		if err != nil {
			http.Error(w, "cannot read file", http.StatusInternalServerError)
			return
		}
		send(w, http.StatusOK, contentType, data)
	})
}

func hello(w http.ResponseWriter, r *http.Request) {
	send(w, http.StatusOK, "text/html", []byte("<h1>Hello World</h1>")) // = assets/hello.html
}

func quicksort(w http.ResponseWriter, r *http.Request) {
	array := []int{
		89, 47, 62, 36, 78, 22, 51, 11, 100, 94, 57, 63, 42, 76, 31, 85, 99, 55, 5, 17,
		68, 28, 45, 71, 8, 60, 83, 79, 48, 92, 43, 12, 61, 23, 87, 54, 3, 72, 37, 80,
		98, 26, 65, 53, 16, 25, 95, 39, 74, 20, 50, 91, 69, 40, 75, 30, 86, 4, 58, 19,
		77, 13, 70, 24, 46, 14, 96, 7, 49, 64, 38, 56, 82, 15, 84, 9, 21, 34, 97, 27,
		67, 52, 66, 90, 41, 6, 35, 10, 73, 18, 81, 44, 29, 59, 88, 2, 32, 1, 33, 93,
	}
	sendJSON(w, http.StatusOK, quickSort(array))
}

func postTelemetry(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost {
		http.NotFound(w, r)
		return
	}
	var msg telemetry
	if err := json.NewDecoder(http.MaxBytesReader(w, r.Body, 1<<16)).Decode(&msg); err != nil {
		sendJSON(w, http.StatusBadRequest, map[string]string{"error": "body is not a JSON object: " + err.Error()})
		return
	}
	if !msg.complete() {
		sendJSON(w, http.StatusBadRequest, map[string]string{"error": "missing field: needs clientId, temp, humidity, light"})
		return
	}
	if db != nil {
		if err := db.save(&msg, "http"); err != nil {
			sendJSON(w, http.StatusServiceUnavailable, map[string]string{"error": "not stored: " + err.Error()})
			return
		}
	}
	sendJSON(w, http.StatusCreated, map[string]int64{"stored": stored.Add(1)})
}

func health(w http.ResponseWriter, r *http.Request) {
	send(w, http.StatusOK, "text/plain", []byte("ok\n"))
}

func main() {
	port := os.Getenv("PORT")
	if port == "" {
		log.Fatal("PORT must be set")
	}
	db = openStore()
	subscribe(db)
	mux := http.NewServeMux()
	mux.HandleFunc("/hello", get(hello))
	mux.HandleFunc("/quicksort", get(quicksort))
	mux.HandleFunc("/file", file("file.png", "image/png"))
	mux.HandleFunc("/500b", file("500b.html", "text/html"))
	mux.HandleFunc("/20kb", file("20kb.html", "text/html"))
	mux.HandleFunc("/telemetry", postTelemetry)
	mux.HandleFunc("/health", health)
	// --webperf-target-bind: where remote workers reach us (else loopback only).
	bind := os.Getenv("BIND")
	if bind == "" {
		bind = "127.0.0.1"
	}
	log.Printf("listening on %s:%s", bind, port)
	log.Fatal(http.ListenAndServe(net.JoinHostPort(bind, port), mux))
}
