// Seed 000's Node.js server (one http.createServer callback, single process), with its three
// workloads on their own paths, seed 004's static pages and seed 002's telemetry POST.
"use strict";
const http = require("http");
const fs = require("fs");

const WWW = "/srv/www";
const PORT = Number(process.env.PORT);
// --webperf-target-bind: where remote workers reach us (else loopback only).
const BIND = process.env.BIND || "127.0.0.1";
// Seed 004 ran ab -c 10000: a listen backlog of 10000+ (the kernel caps it at somaxconn).
const BACKLOG = 65535;
const FIELDS = ["clientId", "temp", "humidity", "light"];
let stored = 0;
// Seed 002's MariaDB store and MQTT subscription (store.js): only when DB_PORT / MQTT_PORT are set.
const telemetryStore = require("./store.js");
const store = telemetryStore.openStore();

function quickSort(array) {
  if (array.length < 2) {
    return array;
  }
  var pivot = array[0];
  var left = [],
    right = [];
  for (var i = 1; i < array.length; i++) {
    if (array[i] < pivot) {
      left.push(array[i]);
    } else {
      right.push(array[i]);
    }
  }
  return quickSort(left).concat([pivot], quickSort(right));
}

function send(res, status, type, body) {
  res.writeHead(status, { "Content-Type": type, "Content-Length": Buffer.byteLength(body) });
  res.end(body);
}

function sendFile(res, name, type) {
  // Read from disk per request, as seed 000 (fs.readFile) and seed 004 did.
  fs.readFile(`${WWW}/${name}`, (err, data) => {
    if (err) {
      send(res, 500, "text/plain", "cannot read file\n");
    } else {
      send(res, 200, type, data);
    }
  });
}

// Seed 002's message: {"clientId", "temp", "humidity", "light"}, all numbers.
function telemetry(req, res) {
  const chunks = [];
  req.on("data", (chunk) => chunks.push(chunk));
  req.on("end", () => {
    let message;
    try {
      message = JSON.parse(Buffer.concat(chunks).toString("utf8"));
    } catch (e) {
      send(res, 400, "application/json", JSON.stringify({ error: "body is not JSON" }));
      return;
    }
    if (message === null || typeof message !== "object" || Array.isArray(message)) {
      send(res, 400, "application/json", JSON.stringify({ error: "body is not a JSON object" }));
      return;
    }
    for (const field of FIELDS) {
      if (typeof message[field] !== "number") {
        const error = `missing or non-numeric field: ${field}`;
        send(res, 400, "application/json", JSON.stringify({ error }));
        return;
      }
    }
    if (!store) {
      stored += 1;
      send(res, 201, "application/json", JSON.stringify({ stored }));
      return;
    }
    store.save(message, "http", (err) => {
      if (err) {
        const error = `not stored: ${err.message}`;
        send(res, 503, "application/json", JSON.stringify({ error }));
        return;
      }
      stored += 1;
      send(res, 201, "application/json", JSON.stringify({ stored }));
    });
  });
}

const server = http.createServer((req, res) => {
  const path = req.url.split("?")[0];
  const get = req.method === "GET";
  if (path === "/hello" && get) {
    send(res, 200, "text/html", "<h1>Hello World</h1>"); // = assets/hello.html (tested)
  } else if (path === "/quicksort" && get) {
    var array = [
      89, 47, 62, 36, 78, 22, 51, 11, 100, 94, 57, 63, 42, 76, 31, 85, 99, 55, 5, 17, 68, 28,
      45, 71, 8, 60, 83, 79, 48, 92, 43, 12, 61, 23, 87, 54, 3, 72, 37, 80, 98, 26, 65, 53,
      16, 25, 95, 39, 74, 20, 50, 91, 69, 40, 75, 30, 86, 4, 58, 19, 77, 13, 70, 24, 46, 14,
      96, 7, 49, 64, 38, 56, 82, 15, 84, 9, 21, 34, 97, 27, 67, 52, 66, 90, 41, 6, 35, 10, 73,
      18, 81, 44, 29, 59, 88, 2, 32, 1, 33, 93,
    ];
    send(res, 200, "application/json", JSON.stringify(quickSort(array)));
  } else if (path === "/file" && get) {
    sendFile(res, "file.png", "image/png");
  } else if (path === "/500b" && get) {
    sendFile(res, "500b.html", "text/html");
  } else if (path === "/20kb" && get) {
    sendFile(res, "20kb.html", "text/html");
  } else if (path === "/telemetry" && req.method === "POST") {
    telemetry(req, res);
  } else if (path === "/health") {
    send(res, 200, "text/plain", "ok\n");
  } else {
    send(res, 404, "text/plain", "not found\n");
  }
});

// Subscribed before the HTTP port opens, so a healthy server misses no message.
telemetryStore.subscribe(store, () => (stored += 1), () => {
  server.listen(PORT, BIND, BACKLOG, () => {
    console.log(`listening on ${BIND}:${PORT}`);
  });
});
