<?php
// The catalogue's routes, seed 000's PHP code per route (its index.php held all three
// workloads, commented in and out; here the path picks one).

function quickSort($array) {
    if (count($array) < 2) {
        return $array;
    }
    $pivot = $array[0];
    $left = $right = array();
    for ($i = 1; $i < count($array); $i++) {
        if ($array[$i] < $pivot) {
            $left[] = $array[$i];
        } else {
            $right[] = $array[$i];
        }
    }
    return array_merge(quickSort($left), array($pivot), quickSort($right));
}

function jsonResponse(int $status, array $body): void {
    http_response_code($status);
    header('Content-Type: application/json');
    echo json_encode($body);
}

// Seed 002's message: {"clientId", "temp", "humidity", "light"}, all numbers.
function telemetry(): void {
    $message = json_decode(file_get_contents('php://input'), true);
    if (!is_array($message)) {
        jsonResponse(400, ['error' => 'body is not a JSON object']);
        return;
    }
    foreach (['clientId', 'temp', 'humidity', 'light'] as $field) {
        if (!isset($message[$field]) || !(is_int($message[$field]) || is_float($message[$field]))) {
            jsonResponse(400, ['error' => "missing or non-numeric field: $field"]);
            return;
        }
    }
    // Counted in APCu shared memory: prefork children share nothing else.
    $stored = apcu_inc('webperf.telemetry', 1);
    jsonResponse(201, ['stored' => $stored]);
}

$path = parse_url($_SERVER['REQUEST_URI'], PHP_URL_PATH);
$method = $_SERVER['REQUEST_METHOD'];

if ($path === '/hello' && $method === 'GET') {
    echo '<h1>Hello World</h1>';  // must equal assets/hello.html (the conformance test checks)
} elseif ($path === '/quicksort' && $method === 'GET') {
    $array = array(89, 47, 62, 36, 78, 22, 51, 11, 100, 94, 57, 63, 42, 76, 31, 85, 99, 55, 5,
        17, 68, 28, 45, 71, 8, 60, 83, 79, 48, 92, 43, 12, 61, 23, 87, 54, 3, 72, 37, 80, 98,
        26, 65, 53, 16, 25, 95, 39, 74, 20, 50, 91, 69, 40, 75, 30, 86, 4, 58, 19, 77, 13, 70,
        24, 46, 14, 96, 7, 49, 64, 38, 56, 82, 15, 84, 9, 21, 34, 97, 27, 67, 52, 66, 90, 41,
        6, 35, 10, 73, 18, 81, 44, 29, 59, 88, 2, 32, 1, 33, 93);
    header('Content-Type: application/json');
    echo json_encode(quickSort($array));
} elseif ($path === '/file' && $method === 'GET') {
    header('Content-Type: image/png');
    header('Content-Length: ' . filesize('/srv/www/file.png'));
    readfile('/srv/www/file.png');
} elseif ($path === '/telemetry' && $method === 'POST') {
    telemetry();
} elseif ($path === '/health') {
    header('Content-Type: text/plain');
    echo "ok\n";
} else {
    http_response_code(404);
    header('Content-Type: text/plain');
    echo "not found\n";
}
