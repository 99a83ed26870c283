package bench

import (
	"context"
	"fmt"
	"net/url"
	"strconv"
	"strings"

	"github.com/flintkv/flint/client"
	"github.com/flintkv/flint/internal/protocol"
)

// The kinds of target.
const (
	kindFlint = "flint" // a Flint server, through the Go client
	kindRedis = "redis" // any RESP server, through the same client
	kindNull  = "null"  // no server: the driver alone, for its ceiling
)

// target is a server to benchmark, or none.
type target struct {
	url      string // as given; flint://addr when spawned
	kind     string
	name     string // in reports: the kind, with -A or -B if both targets are of one kind
	addr     string // host:port
	password string
	pid      int      // the server's process, for its CPU time; 0: unknown
	spawned  *spawned // set if this session started the server
	loaded   loadKey  // what an earlier run of the session loaded into it
}

// parseTarget parses flint://[:password@]host:port,
// redis://[:password@]host:port or null.
func parseTarget(s string) (*target, error) {
	if s == kindNull {
		return &target{url: s, kind: kindNull}, nil
	}
	u, err := url.Parse(s)
	if err != nil || (u.Scheme != kindFlint && u.Scheme != kindRedis) || u.Host == "" || u.Port() == "" ||
		strings.Trim(u.Path, "/") != "" {
		return nil, fmt.Errorf("%w: target %q: want flint://host:port, redis://host:port or null", ErrConfig, s)
	}
	t := &target{url: s, kind: u.Scheme, addr: u.Host}
	if u.User != nil {
		t.password, _ = u.User.Password()
		t.url = strings.Replace(s, u.User.String()+"@", "", 1) // keep passwords out of results
	}
	return t, nil
}

// backend runs one run's operations on a target. Its methods are called by
// the runner; executors are used by one worker each.
type backend interface {
	// probe returns an error wrapping ErrUnsupported if the target lacks a
	// command the workload uses.
	probe(ctx context.Context, w workload) error
	// load stores the records k describes.
	load(ctx context.Context, k loadKey) error
	// executor returns a new executor for one worker.
	executor(w workload) executor
	close()
}

// executor runs batches of operations for one worker.
type executor interface {
	// exec sends ops, in order, as one batch and waits for all their
	// replies. It sets res[i] to "" if ops[i] was acknowledged and to the
	// kind of error otherwise. An error return means the batch failed as a
	// whole (its outcome is unknown) and res is not set. ops and their
	// values may be reused once exec returns.
	exec(ctx context.Context, ops []op, res []string) error
}

// open connects to t with conns connections.
func (t *target) open(conns int) (backend, error) {
	if t.kind == kindNull {
		return nullBackend{}, nil
	}
	opts := []client.Option{client.WithPoolSize(conns)}
	if t.password != "" {
		opts = append(opts, client.WithPassword(t.password))
	}
	c, err := client.New(t.addr, opts...)
	if err != nil {
		return nil, fmt.Errorf("bench: connecting to %s: %w", t.url, err)
	}
	return &clientBackend{c: c, url: t.url}, nil
}

// nullBackend has no server: it encodes each batch as the client would and
// acknowledges every operation at once, so a run against it measures the
// driver (generators, encoding, scheduling, histograms) without the network.
type nullBackend struct{}

func (nullBackend) probe(context.Context, workload) error { return nil }
func (nullBackend) load(context.Context, loadKey) error   { return nil }
func (nullBackend) executor(w workload) executor          { return &nullExec{scanEnd: w.keys.lastKey()} }
func (nullBackend) close()                                {}

type nullExec struct {
	buf     []byte
	scanEnd string
}

func (e *nullExec) exec(_ context.Context, ops []op, res []string) error {
	b := e.buf[:0]
	for i, o := range ops {
		switch o.kind {
		case opRead:
			b = appendArgs(b, 2, "GET", o.key)
		case opUpdate, opInsert:
			b = appendSet(b, o.key, o.value)
		case opScan:
			b = appendArgs(b, 5, "RANGE", o.key, e.scanEnd, "LIMIT", strconv.Itoa(o.scanLen))
		case opRMW:
			b = appendSet(appendArgs(b, 2, "GET", o.key), o.key, o.value)
		case opTx:
			b = appendArgs(appendSets(appendArgs(b, 1, "MULTI"), o), 1, "EXEC")
		case opSets:
			b = appendSets(b, o)
		}
		res[i] = ""
	}
	e.buf = b
	return nil
}

// appendArgs appends the header of a command of n arguments and args, the
// first of them; the caller appends the rest.
func appendArgs(b []byte, n int, args ...string) []byte {
	b = protocol.AppendArray(b, n)
	for _, a := range args {
		b = protocol.AppendBulkString(b, a)
	}
	return b
}

// appendSet appends SET key value.
func appendSet(b []byte, key string, value []byte) []byte {
	return protocol.AppendBulk(appendArgs(b, 3, "SET", key), value)
}

// appendSets appends the SETs of a tx or sets operation.
func appendSets(b []byte, o op) []byte {
	for _, k := range o.keys {
		b = appendSet(b, k, o.value)
	}
	return b
}
