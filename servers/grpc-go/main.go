// The catalogue's gRPC server: grpc-go on loopback (h2c), a unary echo, a unary method
// doing the catalogue's /quicksort work, a method that fails with the status asked, and
// gRPC's standard health service (health = "grpc"). No protoc: the methods are declared
// by hand (grpc.ServiceDesc) over well-known messages (github.com/golang/protobuf's, the
// ones grpc-go 1.33's codec reads), so the proto codec works as it is; catalogue.proto
// describes them for clients that need a schema.
package main

import (
	"context"
	"encoding/json"
	"log"
	"net"
	"os"
	"os/signal"
	"syscall"

	"github.com/golang/protobuf/ptypes/empty"
	"github.com/golang/protobuf/ptypes/wrappers"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"
)

// the catalogue's /quicksort input (servers/go/main.go): the same work, the same answer
var input = []int{
	89, 47, 62, 36, 78, 22, 51, 11, 100, 94, 57, 63, 42, 76, 31, 85, 99, 55, 5, 17,
	68, 28, 45, 71, 8, 60, 83, 79, 48, 92, 43, 12, 61, 23, 87, 54, 3, 72, 37, 80,
	98, 26, 65, 53, 16, 25, 95, 39, 74, 20, 50, 91, 69, 40, 75, 30, 86, 4, 58, 19,
	77, 13, 70, 24, 46, 14, 96, 7, 49, 64, 38, 56, 82, 15, 84, 9, 21, 34, 97, 27,
	67, 52, 66, 90, 41, 6, 35, 10, 73, 18, 81, 44, 29, 59, 88, 2, 32, 1, 33, 93,
}

func quickSort(array []int) []int {
	if len(array) < 2 {
		return array
	}
	pivot := array[0]
	var left, right []int
	for _, v := range array[1:] {
		if v < pivot {
			left = append(left, v)
		} else {
			right = append(right, v)
		}
	}
	sorted := append(quickSort(left), pivot)
	return append(sorted, quickSort(right)...)
}

type catalogue interface{}

func echo(_ any, _ context.Context, dec func(any) error, _ grpc.UnaryServerInterceptor) (any, error) {
	in := new(wrappers.BytesValue)
	if err := dec(in); err != nil {
		return nil, err
	}
	return &wrappers.BytesValue{Value: in.Value}, nil
}

func sortWork(_ any, _ context.Context, dec func(any) error, _ grpc.UnaryServerInterceptor) (any, error) {
	if err := dec(new(empty.Empty)); err != nil {
		return nil, err
	}
	body, _ := json.Marshal(quickSort(append([]int(nil), input...)))
	return &wrappers.BytesValue{Value: body}, nil
}

func fail(_ any, _ context.Context, dec func(any) error, _ grpc.UnaryServerInterceptor) (any, error) {
	in := new(wrappers.UInt32Value)
	if err := dec(in); err != nil {
		return nil, err
	}
	if in.Value == 0 {
		return new(empty.Empty), nil
	}
	return nil, status.Errorf(codes.Code(in.Value), "failed as asked: code %d", in.Value)
}

var service = grpc.ServiceDesc{
	ServiceName: "webperf.Catalogue",
	HandlerType: (*catalogue)(nil),
	Methods: []grpc.MethodDesc{
		{MethodName: "Echo", Handler: echo},
		{MethodName: "Quicksort", Handler: sortWork},
		{MethodName: "Fail", Handler: fail},
	},
	Metadata: "catalogue.proto",
}

func main() {
	port := os.Getenv("PORT")
	if port == "" {
		log.Fatal("PORT must be set")
	}
	bind := os.Getenv("BIND") // --webperf-target-bind: where remote workers reach us
	if bind == "" {
		bind = "127.0.0.1"
	}
	lis, err := net.Listen("tcp", net.JoinHostPort(bind, port))
	if err != nil {
		log.Fatal(err)
	}
	srv := grpc.NewServer()
	srv.RegisterService(&service, struct{}{})
	hs := health.NewServer()
	hs.SetServingStatus("", healthpb.HealthCheckResponse_SERVING)
	hs.SetServingStatus("webperf.Catalogue", healthpb.HealthCheckResponse_SERVING)
	healthpb.RegisterHealthServer(srv, hs)
	stop := make(chan os.Signal, 1)
	signal.Notify(stop, syscall.SIGTERM, syscall.SIGINT)
	go func() { <-stop; srv.Stop() }()
	log.Printf("gRPC (h2c) on %s", lis.Addr())
	if err := srv.Serve(lis); err != nil {
		log.Fatal(err)
	}
}
