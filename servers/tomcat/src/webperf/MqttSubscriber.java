package webperf;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import jakarta.servlet.ServletContextEvent;
import jakarta.servlet.ServletContextListener;
import jakarta.servlet.annotation.WebListener;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;
import org.fusesource.mqtt.client.BlockingConnection;
import org.fusesource.mqtt.client.MQTT;
import org.fusesource.mqtt.client.Message;
import org.fusesource.mqtt.client.QoS;
import org.fusesource.mqtt.client.Topic;

/**
 * Seed 002's MQTT path for Tomcat: with DB_PORT set the webapp stores telemetry in MariaDB;
 * with MQTT_PORT set it also subscribes at QoS 2 (keepalive 60 s, clean session false,
 * reconnecting, as the seed) and stores every message on one receiving thread, acknowledging
 * it only once its row is written (a crash before that means redelivery, not loss).
 * MQTT client: FuseSource mqtt-client 1.16, Debian's only Java MQTT library.
 */
@WebListener
public class MqttSubscriber implements ServletContextListener {
    static final AtomicLong STORED = new AtomicLong();
    private static final ObjectMapper MAPPER = new ObjectMapper();

    private TelemetryStore store;
    private BlockingConnection connection;
    private Thread receiver;
    private volatile boolean running = true;
    private long rejected;

    private static int env(String name, int fallback) {
        String value = System.getenv(name);
        return value == null || value.isEmpty() ? fallback : Integer.parseInt(value);
    }

    @Override
    public void contextInitialized(ServletContextEvent event) {
        int dbPort = env("DB_PORT", 0);
        if (dbPort > 0) {
            store = new TelemetryStore(dbPort, env("DB_POOL", 64));
            event.getServletContext().setAttribute(TelemetryStore.ATTRIBUTE, store);
            event.getServletContext().log("storing telemetry in MariaDB on 127.0.0.1:" + dbPort);
        }
        int mqttPort = env("MQTT_PORT", 0);
        if (mqttPort == 0) {
            return;
        }
        String topic = System.getenv().getOrDefault("MQTT_TOPIC", "telemetry/#");
        String clientId = System.getenv().getOrDefault("MQTT_CLIENT_ID", "webperf-tomcat");
        try {
            MQTT mqtt = new MQTT();
            mqtt.setHost("127.0.0.1", mqttPort);
            mqtt.setVersion("3.1.1");
            mqtt.setClientId(clientId);
            mqtt.setCleanSession(false);
            mqtt.setKeepAlive((short) 60);
            mqtt.setReconnectDelay(1000);
            connection = mqtt.blockingConnection();
            connection.connect();
            // Subscribed before Tomcat opens its HTTP port: a healthy server misses nothing.
            connection.subscribe(new Topic[] {new Topic(topic, QoS.EXACTLY_ONCE)});
        } catch (Exception e) {
            throw new IllegalStateException("mqtt: cannot subscribe on 127.0.0.1:" + mqttPort, e);
        }
        event.getServletContext().log("mqtt: subscribed to " + topic + " at QoS 2 as " + clientId);
        receiver = new Thread(this::receive, "mqtt-subscriber");
        receiver.start();
    }

    private void receive() {
        while (running) {
            Message message;
            try {
                message = connection.receive(1, TimeUnit.SECONDS);
            } catch (InterruptedException e) {
                return;
            } catch (Exception e) {
                System.err.println("mqtt: receive failed: " + e);
                continue;
            }
            if (message != null) {
                handle(message);
            }
        }
    }

    /** Store one message; a message that is not seed 002's JSON is dropped and logged. */
    private void handle(Message message) {
        JsonNode json;
        try {
            json = MAPPER.readTree(message.getPayload());
        } catch (IOException e) { // not JSON at all
            json = null;
        }
        if (!TelemetryStore.valid(json)) {
            if (++rejected <= 10) {
                System.err.println("mqtt: dropped a bad message on " + message.getTopic() + ": "
                        + new String(message.getPayload(), StandardCharsets.UTF_8));
            }
            message.ack();
            return;
        }
        try {
            if (store != null) {
                store.save(json, "mqtt");
            }
            STORED.incrementAndGet();
            message.ack();
        } catch (Exception e) {
            // Not acknowledged: the broker delivers it again after a reconnect.
            System.err.println("mqtt: insert failed: " + e);
        }
    }

    @Override
    public void contextDestroyed(ServletContextEvent event) {
        running = false;
        try {
            if (receiver != null) {
                receiver.join(5000);
            }
            if (connection != null) {
                connection.disconnect();
            }
        } catch (Exception e) {
            event.getServletContext().log("mqtt: disconnect failed", e);
        }
        if (store != null) {
            store.close();
        }
    }
}
