// Package tracing owns the daemon's OpenTelemetry traces: the tracer
// provider and its OTLP/gRPC exporter (-otlp-endpoint), the gRPC server's
// span per call, the spans the layers below start (Start: plan, encode) and
// a storage.Store that traces each object read.
//
// Tracing is off unless Setup is given an endpoint: the global provider is
// then OpenTelemetry's no-op one, and Start does not even allocate (it
// starts a span only under a recording parent, so work outside a traced
// call, such as a background vacuum, makes no root spans of its own).
package tracing

import (
	"context"
	"fmt"
	"net"
	"net/url"
	"slices"
	"strings"
	"sync/atomic"

	"go.opentelemetry.io/contrib/instrumentation/google.golang.org/grpc/otelgrpc"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	otelcodes "go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
	"go.opentelemetry.io/otel/trace"
	"google.golang.org/grpc"
)

// ServiceName is the service.name every span's resource carries.
const ServiceName = "tileflight"

// InstrumentationName names the tracer of the daemon's own spans.
const InstrumentationName = "github.com/tileflight/tileflight"

// tracer is the tracer Setup made (a later Setup, as in tests, replaces
// it; nil: the global provider's).
var tracer atomic.Pointer[trace.Tracer]

// noop is the span Start returns when it starts none (ending it does
// nothing, unlike ending the caller's own span).
var noop = trace.SpanFromContext(context.Background())

// Start starts the span name under ctx's span when that one is recording
// (a traced call), and returns ctx and a non-recording span otherwise: the
// caller ends the span either way. attrs go on the span.
func Start(ctx context.Context, name string, attrs ...attribute.KeyValue) (context.Context, trace.Span) {
	if !trace.SpanFromContext(ctx).IsRecording() {
		return ctx, noop
	}
	t := otel.Tracer(InstrumentationName)
	if p := tracer.Load(); p != nil {
		t = *p
	}
	// The copy keeps attrs from escaping: a call that starts no span
	// allocates nothing.
	return t.Start(ctx, name, trace.WithAttributes(slices.Clone(attrs)...))
}

// Fail records err on span (when not nil) and marks it failed.
func Fail(span trace.Span, err error) {
	if err != nil && span.IsRecording() {
		span.RecordError(err)
		span.SetStatus(otelcodes.Error, err.Error())
	}
}

// Config says where spans go.
type Config struct {
	// Endpoint is the OTLP/gRPC collector: HOST:PORT (plaintext),
	// http://HOST:PORT (plaintext) or https://HOST:PORT (TLS, the system's
	// roots). Empty: tracing off.
	Endpoint string
	// Version is the daemon's version, the spans' service.version.
	Version string
}

// Provider is tracing when on; a nil *Provider is tracing off, and its
// methods do nothing.
type Provider struct {
	tp *sdktrace.TracerProvider
}

// Setup turns tracing on when c.Endpoint is set: spans are batched to the
// collector, and the provider and the W3C trace-context propagator become
// the process's global ones (a client's traceparent continues its trace).
// It returns nil when c.Endpoint is empty. The exporter connects lazily: a
// collector that is down costs dropped spans, not a failed start.
func Setup(ctx context.Context, c Config) (*Provider, error) {
	if c.Endpoint == "" {
		return nil, nil
	}
	opts, err := endpointOptions(c.Endpoint)
	if err != nil {
		return nil, err
	}
	exp, err := otlptracegrpc.New(ctx, opts...)
	if err != nil {
		return nil, fmt.Errorf("-otlp-endpoint %s: %w", c.Endpoint, err)
	}
	res, err := resource.Merge(resource.Default(), resource.NewWithAttributes(semconv.SchemaURL,
		semconv.ServiceName(ServiceName), semconv.ServiceVersion(c.Version)))
	if err != nil {
		// Only a schema URL clash between the default resource and ours.
		res = resource.NewWithAttributes("", semconv.ServiceName(ServiceName), semconv.ServiceVersion(c.Version))
	}
	tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(exp), sdktrace.WithResource(res))
	otel.SetTracerProvider(tp)
	t := tp.Tracer(InstrumentationName)
	tracer.Store(&t)
	otel.SetTextMapPropagator(propagation.NewCompositeTextMapPropagator(propagation.TraceContext{}, propagation.Baggage{}))
	return &Provider{tp: tp}, nil
}

// endpointOptions reads an -otlp-endpoint value.
func endpointOptions(ep string) ([]otlptracegrpc.Option, error) {
	if !strings.Contains(ep, "://") {
		host, port, err := net.SplitHostPort(ep)
		if err != nil || host == "" || port == "" {
			return nil, fmt.Errorf("-otlp-endpoint %q: want HOST:PORT, http://HOST:PORT or https://HOST:PORT", ep)
		}
		return []otlptracegrpc.Option{otlptracegrpc.WithEndpoint(ep), otlptracegrpc.WithInsecure()}, nil
	}
	u, err := url.Parse(ep)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("-otlp-endpoint %q: want HOST:PORT, http://HOST:PORT or https://HOST:PORT", ep)
	}
	if u.Port() == "" {
		return nil, fmt.Errorf("-otlp-endpoint %q: the URL needs a port (OTLP/gRPC is usually 4317)", ep)
	}
	return []otlptracegrpc.Option{otlptracegrpc.WithEndpointURL(ep)}, nil
}

// ServerOptions are the gRPC server options that give each call a span
// (none when p is nil).
func (p *Provider) ServerOptions() []grpc.ServerOption {
	if p == nil {
		return nil
	}
	return []grpc.ServerOption{grpc.StatsHandler(otelgrpc.NewServerHandler(otelgrpc.WithTracerProvider(p.tp)))}
}

// Shutdown flushes the spans not yet sent and stops the exporter; ctx
// bounds the wait.
func (p *Provider) Shutdown(ctx context.Context) error {
	if p == nil {
		return nil
	}
	if err := p.tp.Shutdown(ctx); err != nil {
		return fmt.Errorf("tracing: flushing spans: %w", err)
	}
	return nil
}
