// WebSocket echo and relay, and server-sent events, on Node's http server with the ws
// package (Debian's node-ws). The routes are go-streams' (server.toml says each).
"use strict";
const http = require("http");
const { WebSocketServer } = require("ws");

const PORT = Number(process.env.PORT);
// --webperf-target-bind: where remote workers reach us (else loopback only).
const BIND = process.env.BIND || "127.0.0.1";
const BACKLOG = 65535; // 10,000 connects at once (the kernel caps it at somaxconn)

// no compression: the client offers none, and the figures are about framing, not zlib
const wss = new WebSocketServer({ noServer: true, perMessageDeflate: false, maxPayload: 64 << 20 });
const subscribers = new Set();

function echo(ws, query) {
  const closeCode = Number(query.get("close") || 0);
  const after = Number(query.get("after") || 0);
  const fragment = Number(query.get("fragment") || 0);
  const abort = Number(query.get("abort") || 0);
  let echoed = 0;
  ws.on("message", (data, isBinary) => {
    if (fragment > 0 && data.length > fragment) {
      for (let at = 0; at < data.length; at += fragment) {
        const last = at + fragment >= data.length;
        ws.send(data.subarray(at, at + fragment), { binary: isBinary, fin: last });
        if (at === 0) ws.ping(Buffer.from("between")); // a control frame inside a message
      }
    } else {
      ws.send(data, { binary: isBinary });
    }
    echoed += 1;
    if (closeCode && echoed >= after) ws.close(closeCode, "internal error");
    if (abort && echoed >= abort) ws.terminate(); // no close frame: the client sees 1006
  });
}

function relay(ws, query) {
  if (query.get("role") === "sub") {
    const sub = { ws, count: 0, drop: Number(query.get("drop") || 0) };
    subscribers.add(sub);
    ws.on("close", () => subscribers.delete(sub));
    return;
  }
  ws.on("message", (data, isBinary) => {
    for (const sub of subscribers) {
      sub.count += 1;
      if (sub.drop && sub.count % sub.drop === 0) continue; // a failure test's loss
      sub.ws.send(data, { binary: isBinary });
    }
  });
}

function events(req, res, query) {
  const rate = Number(query.get("rate") || 0);
  const count = Number(query.get("count") || 0);
  const firstDelay = Number(query.get("first_delay") || 0);
  const eol = { lf: "\n", crlf: "\r\n", cr: "\r" }[query.get("eol") || "lf"] || "\n";
  const retry = query.get("retry");
  const commentEvery = Number(query.get("comment_every") || 0);
  const last = Number(req.headers["last-event-id"]);
  let id = Number.isInteger(last) ? last + 1 : 1;
  let sent = 0;
  res.writeHead(200, { "Content-Type": "text/event-stream", "Cache-Control": "no-cache" });
  if (retry) res.write(`retry: ${retry}${eol}${eol}`);
  res.flushHeaders();
  if (!rate) return; // an idle stream: its head only
  let timer = null;
  const one = () => {
    if (commentEvery && sent % commentEvery === 0) res.write(`: comment ${sent}${eol}`);
    res.write(`id: ${id}${eol}event: tick${eol}data: ${Date.now()}${eol}${eol}`);
    id += 1;
    sent += 1;
    if (count && sent >= count) {
      clearInterval(timer);
      res.end(); // the stream ends: the client comes back after its retry
    }
  };
  const first = setTimeout(() => {
    one();
    if (!count || sent < count) timer = setInterval(one, 1000 / rate);
  }, firstDelay);
  req.on("close", () => {
    clearTimeout(first);
    clearInterval(timer);
  });
}

const server = http.createServer((req, res) => {
  const url = new URL(req.url, "http://x");
  if (url.pathname === "/events") return events(req, res, url.searchParams);
  if (url.pathname === "/health") return res.end("ok");
  res.writeHead(404);
  res.end("no such route");
});
server.requestTimeout = 0; // a stream lasts as long as the run (Node 18: 300 s by default)
server.headersTimeout = 0;
server.keepAliveTimeout = 0;
server.on("upgrade", (req, socket, head) => {
  const url = new URL(req.url, "http://x");
  if (url.pathname !== "/ws" && url.pathname !== "/relay") {
    socket.end("HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\n\r\n");
    return;
  }
  wss.handleUpgrade(req, socket, head, (ws) => {
    ws.on("error", () => {}); // a client's protocol error closes its connection, not the server
    if (url.pathname === "/ws") echo(ws, url.searchParams);
    else relay(ws, url.searchParams);
  });
});
server.listen(PORT, BIND, BACKLOG);
