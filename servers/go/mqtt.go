// Seed 002's MQTT path: the server subscribes at QoS 2 (keepalive 60 s, clean session
// false) when MQTT_PORT is set, and stores every message it is handed.
package main

import (
	"encoding/json"
	"log"
	"os"
	"sync/atomic"
	"time"

	mqtt "github.com/eclipse/paho.mqtt.golang"
)

var mqttReceived, mqttRejected atomic.Int64

// handle stores one message; a message that is not seed 002's JSON is logged and dropped,
// never allowed to stop the subscription. STORE_DELAY_MS (unset: none) waits that long
// before each insert: a subscriber that stores slower than it receives, for the plugin's
// own tests of a store falling behind (paho calls the handler in order, one at a time).
func handle(s *store) mqtt.MessageHandler {
	delay := time.Duration(envInt("STORE_DELAY_MS", 0)) * time.Millisecond
	return func(_ mqtt.Client, message mqtt.Message) {
		mqttReceived.Add(1)
		if delay > 0 {
			time.Sleep(delay)
		}
		var m telemetry
		if err := json.Unmarshal(message.Payload(), &m); err != nil || !m.complete() {
			if mqttRejected.Add(1) <= 10 {
				log.Printf("mqtt: dropped a bad message on %s: %q", message.Topic(), message.Payload())
			}
			return
		}
		if s == nil {
			stored.Add(1)
			return
		}
		if err := s.save(&m, "mqtt"); err != nil {
			log.Printf("mqtt: insert failed: %v", err)
			return
		}
		stored.Add(1)
	}
}

func subscribe(s *store) {
	port := os.Getenv("MQTT_PORT")
	if port == "" {
		return
	}
	topic := os.Getenv("MQTT_TOPIC")
	if topic == "" {
		topic = "telemetry/#"
	}
	clientID := os.Getenv("MQTT_CLIENT_ID")
	if clientID == "" {
		clientID = "webperf-go"
	}
	handler := handle(s)
	opts := mqtt.NewClientOptions().
		AddBroker("tcp://127.0.0.1:" + port).
		SetClientID(clientID).
		SetCleanSession(false).
		SetKeepAlive(60 * time.Second).
		SetAutoReconnect(true).
		SetOnConnectHandler(func(c mqtt.Client) { // again after a reconnect: harmless if kept
			if token := c.Subscribe(topic, 2, handler); token.Wait() && token.Error() != nil {
				log.Printf("mqtt: subscribe %s: %v", topic, token.Error())
			}
		}).
		SetConnectionLostHandler(func(_ mqtt.Client, err error) {
			log.Printf("mqtt: connection lost: %v", err)
		})
	client := mqtt.NewClient(opts)
	if token := client.Connect(); token.Wait() && token.Error() != nil {
		log.Fatalf("mqtt: connect to 127.0.0.1:%s: %v", port, token.Error())
	}
	// Subscribed before the HTTP port opens, so a healthy server misses no message.
	if token := client.Subscribe(topic, 2, handler); token.Wait() && token.Error() != nil {
		log.Fatalf("mqtt: subscribe %s: %v", topic, token.Error())
	}
	log.Printf("mqtt: subscribed to %s at QoS 2 on 127.0.0.1:%s as %s", topic, port, clientID)
}
