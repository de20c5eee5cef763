package webperf;

import com.fasterxml.jackson.databind.JsonNode;
import com.zaxxer.hikari.HikariConfig;
import com.zaxxer.hikari.HikariDataSource;
import java.sql.Connection;
import java.sql.PreparedStatement;
import java.sql.SQLException;
import java.sql.Types;

/**
 * Seed 002's store: every message, over HTTP or MQTT, is a row in MariaDB. A HikariCP pool
 * (DB_POOL connections, default 64) and a prepared INSERT per message (Debian's HikariCP 2.7
 * and MariaDB Connector/J 2.7, server-side prepared statements cached per connection).
 */
public final class TelemetryStore implements AutoCloseable {
    static final String ATTRIBUTE = "webperf.telemetryStore";
    private static final String INSERT = "INSERT INTO telemetry "
            + "(client_id, seq, sent_at, temp, humidity, light, via) VALUES (?, ?, ?, ?, ?, ?, ?)";

    private final HikariDataSource pool;

    TelemetryStore(int port, int poolSize) {
        HikariConfig config = new HikariConfig();
        config.setDriverClassName("org.mariadb.jdbc.Driver");
        config.setJdbcUrl("jdbc:mariadb://127.0.0.1:" + port
                + "/webperf?useServerPrepStmts=true&cachePrepStmts=true");
        config.setUsername("webperf");
        config.setPassword("webperf");
        config.setMaximumPoolSize(poolSize);
        config.setInitializationFailTimeout(20_000); // the database may still be starting
        pool = new HikariDataSource(config);
    }

    /** A message of seed 002: clientId, temp, humidity, light all numbers. */
    static boolean valid(JsonNode message) {
        if (message == null || !message.isObject()) {
            return false;
        }
        for (String field : new String[] {"clientId", "temp", "humidity", "light"}) {
            if (!message.path(field).isNumber()) {
                return false;
            }
        }
        return true;
    }

    void save(JsonNode message, String via) throws SQLException {
        try (Connection connection = pool.getConnection();
             PreparedStatement insert = connection.prepareStatement(INSERT)) {
            insert.setLong(1, message.get("clientId").asLong());
            optional(insert, 2, message.path("seq"), true);
            optional(insert, 3, message.path("sentAt"), false);
            insert.setDouble(4, message.get("temp").asDouble());
            insert.setDouble(5, message.get("humidity").asDouble());
            insert.setDouble(6, message.get("light").asDouble());
            insert.setString(7, via);
            insert.executeUpdate();
        }
    }

    private static void optional(PreparedStatement insert, int index, JsonNode value,
                                 boolean integral) throws SQLException {
        if (!value.isNumber()) {
            insert.setNull(index, integral ? Types.BIGINT : Types.DOUBLE);
        } else if (integral) {
            insert.setLong(index, value.asLong());
        } else {
            insert.setDouble(index, value.asDouble());
        }
    }

    @Override
    public void close() {
        pool.close();
    }
}
