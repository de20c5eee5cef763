package webperf;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import jakarta.servlet.ServletContextEvent;
import jakarta.servlet.ServletContextListener;
import jakarta.servlet.annotation.WebListener;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.TimeUnit;
import org.fusesource.hawtbuf.Buffer;
import org.fusesource.hawtbuf.UTF8Buffer;
import org.fusesource.mqtt.client.Callback;
import org.fusesource.mqtt.client.CallbackConnection;
import org.fusesource.mqtt.client.Listener;
import org.fusesource.mqtt.client.MQTT;
import org.fusesource.mqtt.client.QoS;
import org.fusesource.mqtt.client.Topic;

/**
 * Seed 002's MQTT path for Tomcat: with DB_PORT set the webapp stores telemetry in MariaDB;
 * with MQTT_PORT set it also subscribes at QoS 2 (keepalive 60 s, clean session false,
 * reconnecting, as the seed) and stores every message on one worker thread, acknowledging
 * it only once its row is written (a crash before that means redelivery, not loss).
 *
 * MQTT client: FuseSource mqtt-client 1.16, Debian's only Java MQTT library. Its callback
 * API is used: the blocking API deadlocks at QoS 2 under load (Message.ack() waits for a
 * PUBREL that the connection, suspended because its receive buffer is full, never reads).
 */
@WebListener
public class MqttSubscriber implements ServletContextListener {
    private static final ObjectMapper MAPPER = new ObjectMapper();

    private TelemetryStore store;
    private CallbackConnection connection;
    private final ExecutorService worker = Executors.newSingleThreadExecutor(
            runnable -> new Thread(runnable, "mqtt-subscriber"));
    private long rejected;

    private static int env(String name, int fallback) {
        String value = System.getenv(name);
        return value == null || value.isEmpty() ? fallback : Integer.parseInt(value);
    }

    /** Bridges a FuseSource callback to a future, to wait for connect and subscribe. */
    private static <T> Callback<T> into(CompletableFuture<T> future) {
        return new Callback<>() {
            @Override
            public void onSuccess(T value) {
                future.complete(value);
            }

            @Override
            public void onFailure(Throwable error) {
                future.completeExceptionally(error);
            }
        };
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
            connection = mqtt.callbackConnection();
            connection.listener(new Listener() {
                @Override
                public void onConnected() {
                }

                @Override
                public void onDisconnected() {
                    System.err.println("mqtt: disconnected (reconnecting)");
                }

                @Override
                public void onPublish(UTF8Buffer topicName, Buffer body, Runnable ack) {
                    byte[] payload = body.toByteArray();
                    String name = topicName.toString();
                    worker.execute(() -> {
                        if (handle(name, payload)) {
                            connection.getDispatchQueue().execute(ack);
                        }
                    });
                }

                @Override
                public void onFailure(Throwable error) {
                    System.err.println("mqtt: connection failed: " + error);
                }
            });
            CompletableFuture<Void> connected = new CompletableFuture<>();
            connection.connect(into(connected));
            connected.get(30, TimeUnit.SECONDS);
            // Subscribed before Tomcat opens its HTTP port: a healthy server misses nothing.
            CompletableFuture<byte[]> subscribed = new CompletableFuture<>();
            connection.subscribe(new Topic[] {new Topic(topic, QoS.EXACTLY_ONCE)},
                    into(subscribed));
            subscribed.get(30, TimeUnit.SECONDS);
        } catch (Exception e) {
            throw new IllegalStateException("mqtt: cannot subscribe on 127.0.0.1:" + mqttPort, e);
        }
        event.getServletContext().log("mqtt: subscribed to " + topic + " at QoS 2 as " + clientId);
    }

    /**
     * Store one message; whether to acknowledge it. A message that is not seed 002's JSON is
     * dropped (acknowledged) and logged; a failed insert is not acknowledged.
     */
    private boolean handle(String topic, byte[] payload) {
        JsonNode json;
        try {
            json = MAPPER.readTree(payload);
        } catch (IOException e) { // not JSON at all
            json = null;
        }
        if (!TelemetryStore.valid(json)) {
            if (++rejected <= 10) {
                System.err.println("mqtt: dropped a bad message on " + topic + ": "
                        + new String(payload, StandardCharsets.UTF_8));
            }
            return true;
        }
        try {
            if (store != null) {
                store.save(json, "mqtt");
            }
            return true;
        } catch (Exception e) {
            System.err.println("mqtt: insert failed: " + e);
            return false;
        }
    }

    @Override
    public void contextDestroyed(ServletContextEvent event) {
        worker.shutdownNow();
        if (connection != null) {
            connection.disconnect(into(new CompletableFuture<>()));
        }
        if (store != null) {
            store.close();
        }
    }
}
