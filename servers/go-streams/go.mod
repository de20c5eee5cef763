module webperf/streams

go 1.19
