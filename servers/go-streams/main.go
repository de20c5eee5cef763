// WebSocket echo and relay, and server-sent events, on net/http with
// github.com/gorilla/websocket (Debian's). The routes are node-streams' but for
// ?fragment (gorilla has no call that writes one frame without FIN): server.toml says each.
package main

import (
	"fmt"
	"log"
	"net"
	"net/http"
	"os"
	"strconv"
	"sync"
	"time"

	"github.com/gorilla/websocket"
)

var upgrader = websocket.Upgrader{
	ReadBufferSize:  4096,
	WriteBufferSize: 4096,
	CheckOrigin:     func(*http.Request) bool { return true },
}

func intParam(r *http.Request, name string) int {
	n, _ := strconv.Atoi(r.URL.Query().Get(name))
	return n
}

func echo(w http.ResponseWriter, r *http.Request) {
	conn, err := upgrader.Upgrade(w, r, nil)
	if err != nil {
		return
	}
	defer conn.Close()
	closeCode, after, abort := intParam(r, "close"), intParam(r, "after"), intParam(r, "abort")
	echoed := 0
	for {
		kind, data, err := conn.ReadMessage()
		if err != nil {
			return
		}
		if err := conn.WriteMessage(kind, data); err != nil {
			return
		}
		echoed++
		if abort > 0 && echoed >= abort {
			conn.UnderlyingConn().Close() // no close frame: the client sees 1006
			return
		}
		if closeCode != 0 && echoed >= after {
			msg := websocket.FormatCloseMessage(closeCode, "internal error")
			_ = conn.WriteControl(websocket.CloseMessage, msg, time.Now().Add(time.Second))
			// read until the client's close answers ours (gorilla replies to nothing here)
			conn.SetReadDeadline(time.Now().Add(2 * time.Second))
			for {
				if _, _, err := conn.NextReader(); err != nil {
					return
				}
			}
		}
	}
}

// a subscriber: one writer goroutine (gorilla allows one concurrent writer)
type subscriber struct {
	out   chan relayed
	drop  int
	count int
}

type relayed struct {
	kind int
	data []byte
}

var (
	mu   sync.Mutex
	subs = map[*subscriber]struct{}{}
)

func relay(w http.ResponseWriter, r *http.Request) {
	conn, err := upgrader.Upgrade(w, r, nil)
	if err != nil {
		return
	}
	defer conn.Close()
	if r.URL.Query().Get("role") == "sub" {
		sub := &subscriber{out: make(chan relayed, 4096), drop: intParam(r, "drop")}
		mu.Lock()
		subs[sub] = struct{}{}
		mu.Unlock()
		done := make(chan struct{})
		go func() { // reads: control frames (close) only
			defer close(done)
			for {
				if _, _, err := conn.NextReader(); err != nil {
					return
				}
			}
		}()
		defer func() {
			mu.Lock()
			delete(subs, sub)
			mu.Unlock()
		}()
		for {
			select {
			case m := <-sub.out:
				if err := conn.WriteMessage(m.kind, m.data); err != nil {
					return
				}
			case <-done:
				return
			}
		}
	}
	for {
		kind, data, err := conn.ReadMessage()
		if err != nil {
			return
		}
		mu.Lock()
		for sub := range subs {
			sub.count++
			if sub.drop > 0 && sub.count%sub.drop == 0 {
				continue // the failure test's loss
			}
			select {
			case sub.out <- relayed{kind, data}:
			default: // a subscriber 4,096 behind: dropped, and the client's accounting says so
			}
		}
		mu.Unlock()
	}
}

func events(w http.ResponseWriter, r *http.Request) {
	flusher, ok := w.(http.Flusher)
	if !ok {
		http.Error(w, "no streaming", 500)
		return
	}
	rate, count := intParam(r, "rate"), intParam(r, "count")
	firstDelay, commentEvery := intParam(r, "first_delay"), intParam(r, "comment_every")
	eol := map[string]string{"": "\n", "lf": "\n", "crlf": "\r\n", "cr": "\r"}[r.URL.Query().Get("eol")]
	id := 1
	if last, err := strconv.Atoi(r.Header.Get("Last-Event-ID")); err == nil {
		id = last + 1
	}
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	w.WriteHeader(200)
	if retry := r.URL.Query().Get("retry"); retry != "" {
		fmt.Fprintf(w, "retry: %s%s%s", retry, eol, eol)
	}
	flusher.Flush()
	ctx := r.Context()
	if rate == 0 {
		<-ctx.Done() // an idle stream: only its head
		return
	}
	select {
	case <-time.After(time.Duration(firstDelay) * time.Millisecond):
	case <-ctx.Done():
		return
	}
	tick := time.NewTicker(time.Second / time.Duration(rate))
	defer tick.Stop()
	for sent := 0; count == 0 || sent < count; sent++ {
		if commentEvery > 0 && sent%commentEvery == 0 {
			fmt.Fprintf(w, ": comment %d%s", sent, eol)
		}
		fmt.Fprintf(w, "id: %d%sevent: tick%sdata: %d%s%s", id, eol, eol, time.Now().UnixMilli(), eol, eol)
		flusher.Flush()
		id++
		if count > 0 && sent+1 >= count {
			return
		}
		select {
		case <-tick.C:
		case <-ctx.Done():
			return
		}
	}
}

func main() {
	bind := os.Getenv("BIND") // --webperf-target-bind: where remote workers reach us
	if bind == "" {
		bind = "127.0.0.1"
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/ws", echo)
	mux.HandleFunc("/relay", relay)
	mux.HandleFunc("/events", events)
	mux.HandleFunc("/health", func(w http.ResponseWriter, _ *http.Request) { fmt.Fprint(w, "ok") })
	listener, err := net.Listen("tcp", net.JoinHostPort(bind, os.Getenv("PORT")))
	if err != nil {
		log.Fatal(err)
	}
	log.Fatal(http.Serve(listener, mux))
}
