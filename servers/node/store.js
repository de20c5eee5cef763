// Seed 002's MariaDB store and MQTT subscription for the Node.js server, used only when
// DB_PORT / MQTT_PORT are set (otherwise app.js keeps its in-memory count).
// Libraries from Debian: node-mysql 2.18 (a connection pool; it escapes values on the client:
// true prepared statements need mysql2, which Debian does not package) and MQTT.js 4.3.
"use strict";

const INSERT =
  "INSERT INTO telemetry (client_id, seq, sent_at, temp, humidity, light, via) " +
  "VALUES (?, ?, ?, ?, ?, ?, ?)";
const FIELDS = ["clientId", "temp", "humidity", "light"];

// A message is seed 002's object with four numbers; seq and sentAt are optional.
function valid(message) {
  return (
    message !== null &&
    typeof message === "object" &&
    !Array.isArray(message) &&
    FIELDS.every((field) => typeof message[field] === "number")
  );
}

function optional(value) {
  return typeof value === "number" ? value : null;
}

function openStore() {
  const port = process.env.DB_PORT;
  if (!port) {
    return null;
  }
  const mysql = require("mysql");
  const pool = mysql.createPool({
    host: "127.0.0.1",
    port: Number(port),
    user: "webperf",
    password: "webperf",
    database: "webperf",
    connectionLimit: Number(process.env.DB_POOL) || 64,
    connectTimeout: 10000,
  });
  console.log(`storing telemetry in MariaDB on 127.0.0.1:${port}`);
  return {
    save(message, via, done) {
      const values = [
        Math.trunc(message.clientId), optional(message.seq), optional(message.sentAt),
        message.temp, message.humidity, message.light, via,
      ];
      pool.query(INSERT, values, (err) => done(err));
    },
  };
}

// Subscribes at QoS 2 (keepalive 60 s, clean session false, as seed 002), then calls ready().
function subscribe(store, onStored, ready) {
  const port = process.env.MQTT_PORT;
  if (!port) {
    ready();
    return;
  }
  const mqtt = require("mqtt");
  const topic = process.env.MQTT_TOPIC || "telemetry/#";
  const clientId = process.env.MQTT_CLIENT_ID || "webperf-node";
  const client = mqtt.connect(`mqtt://127.0.0.1:${port}`, {
    clientId, clean: false, keepalive: 60, reconnectPeriod: 1000,
  });
  let rejected = 0;
  let subscribed = false;
  client.on("connect", () => {
    client.subscribe(topic, { qos: 2 }, (err) => {
      if (err) {
        console.error(`mqtt: subscribe ${topic}: ${err.message}`);
        process.exit(1);
      }
      if (!subscribed) {
        subscribed = true;
        console.log(`mqtt: subscribed to ${topic} at QoS 2 on 127.0.0.1:${port} as ${clientId}`);
        ready();
      }
    });
  });
  client.on("error", (err) => console.error(`mqtt: ${err.message}`));
  client.on("message", (_topic, payload) => {
    let message;
    try {
      message = JSON.parse(payload.toString("utf8"));
    } catch (e) {
      message = undefined;
    }
    if (!valid(message)) {
      // A bad message is dropped and logged (the first few), never fatal.
      if (++rejected <= 10) {
        console.error(`mqtt: dropped a bad message on ${_topic}: ${payload.toString("utf8")}`);
      }
      return;
    }
    if (!store) {
      onStored();
      return;
    }
    store.save(message, "mqtt", (err) => {
      if (err) {
        console.error(`mqtt: insert failed: ${err.message}`);
      } else {
        onStored();
      }
    });
  });
}

module.exports = { openStore, subscribe, valid };
