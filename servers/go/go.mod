module webperf/server

go 1.19
