module webperf/grpcserver

go 1.19
