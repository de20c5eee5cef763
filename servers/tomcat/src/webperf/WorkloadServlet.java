package webperf;

import com.fasterxml.jackson.core.JacksonException;
import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import jakarta.servlet.annotation.WebServlet;
import jakarta.servlet.http.HttpServlet;
import jakarta.servlet.http.HttpServletRequest;
import jakarta.servlet.http.HttpServletResponse;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Map;
import java.util.concurrent.atomic.AtomicLong;

/**
 * The catalogue's routes as one servlet: seed 000's workloads (hello, quicksort per request,
 * the PNG read from disk per request), seed 004's pages and seed 002's telemetry POST.
 */
@WebServlet(urlPatterns = {"/hello", "/quicksort", "/file", "/500b", "/20kb", "/telemetry", "/health"})
public class WorkloadServlet extends HttpServlet {
    private static final ObjectMapper MAPPER = new ObjectMapper();
    private static final Path WWW = Path.of("/srv/www");
    private static final byte[] HELLO = "<h1>Hello World</h1>".getBytes(StandardCharsets.UTF_8);
    private static final List<String> FIELDS = List.of("clientId", "temp", "humidity", "light");
    private static final Integer[] ARRAY = {
        89, 47, 62, 36, 78, 22, 51, 11, 100, 94, 57, 63, 42, 76, 31, 85, 99, 55, 5, 17,
        68, 28, 45, 71, 8, 60, 83, 79, 48, 92, 43, 12, 61, 23, 87, 54, 3, 72, 37, 80,
        98, 26, 65, 53, 16, 25, 95, 39, 74, 20, 50, 91, 69, 40, 75, 30, 86, 4, 58, 19,
        77, 13, 70, 24, 46, 14, 96, 7, 49, 64, 38, 56, 82, 15, 84, 9, 21, 34, 97, 27,
        67, 52, 66, 90, 41, 6, 35, 10, 73, 18, 81, 44, 29, 59, 88, 2, 32, 1, 33, 93,
    };

    private final AtomicLong stored = new AtomicLong();

    /** Seed 000's recursive quicksort (first element as pivot). */
    static List<Integer> quickSort(List<Integer> array) {
        if (array.size() < 2) {
            return array;
        }
        int pivot = array.get(0);
        List<Integer> left = new ArrayList<>();
        List<Integer> right = new ArrayList<>();
        for (int i = 1; i < array.size(); i++) {
            if (array.get(i) < pivot) {
                left.add(array.get(i));
            } else {
                right.add(array.get(i));
            }
        }
        List<Integer> sorted = new ArrayList<>(quickSort(left));
        sorted.add(pivot);
        sorted.addAll(quickSort(right));
        return sorted;
    }

    private static void send(HttpServletResponse resp, int status, String type, byte[] body)
            throws IOException {
        resp.setStatus(status);
        resp.setContentType(type);
        resp.setContentLength(body.length);
        resp.getOutputStream().write(body);
    }

    private static void sendJson(HttpServletResponse resp, int status, Object value)
            throws IOException {
        send(resp, status, "application/json", MAPPER.writeValueAsBytes(value));
    }

    private static void sendFile(HttpServletResponse resp, String name, String type)
            throws IOException {
        send(resp, 200, type, Files.readAllBytes(WWW.resolve(name)));
    }

    @Override
    protected void doGet(HttpServletRequest req, HttpServletResponse resp) throws IOException {
        switch (req.getServletPath()) {
            case "/hello" -> send(resp, 200, "text/html", HELLO);
            case "/quicksort" -> sendJson(resp, 200, quickSort(Arrays.asList(ARRAY)));
            case "/file" -> sendFile(resp, "file.png", "image/png");
            case "/500b" -> sendFile(resp, "500b.html", "text/html");
            case "/20kb" -> sendFile(resp, "20kb.html", "text/html");
            case "/health" -> send(resp, 200, "text/plain", "ok\n".getBytes(StandardCharsets.UTF_8));
            default -> resp.sendError(404);
        }
    }

    /** Seed 002's message: {"clientId", "temp", "humidity", "light"}, all numbers. */
    @Override
    protected void doPost(HttpServletRequest req, HttpServletResponse resp) throws IOException {
        if (!"/telemetry".equals(req.getServletPath())) {
            resp.sendError(404);
            return;
        }
        JsonNode message;
        try {
            message = MAPPER.readTree(req.getInputStream());
        } catch (JacksonException e) {
            sendJson(resp, 400, Map.of("error", "body is not JSON"));
            return;
        }
        if (message == null || !message.isObject()) {
            sendJson(resp, 400, Map.of("error", "body is not a JSON object"));
            return;
        }
        for (String field : FIELDS) {
            if (!message.path(field).isNumber()) {
                sendJson(resp, 400, Map.of("error", "missing or non-numeric field: " + field));
                return;
            }
        }
        Object store = getServletContext().getAttribute(TelemetryStore.ATTRIBUTE);
        if (store != null) { // seed 002: MariaDB when DB_PORT is set (MqttSubscriber opens it)
            try {
                ((TelemetryStore) store).save(message, "http");
            } catch (java.sql.SQLException e) {
                sendJson(resp, 503, Map.of("error", "not stored: " + e.getMessage()));
                return;
            }
        }
        sendJson(resp, 201, Map.of("stored", stored.incrementAndGet()));
    }
}
