package node

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/flintkv/flint/internal/replica"
	"github.com/flintkv/flint/internal/server"
)

// serve serves until ctx is done (SIGINT or SIGTERM), then shuts down
// gracefully: it lets clients' commands finish for up to timeout, then
// closes their connections and the replica, so that a write waiting for
// disk space does not hold up the shutdown (its client gets no reply). If the
// replica fails (an fsync error, say), before or during the shutdown, serve
// returns an error wrapping ErrFailed; it stops at once if that comes first.
func serve(ctx context.Context, srv *server.Server, rep *replica.Replica, timeout time.Duration, log *slog.Logger) error {
	closeRep := sync.OnceValue(rep.Close)
	defer closeRep()
	errc := make(chan error, 1)
	go func() { errc <- srv.ListenAndServe() }()
	select {
	case err := <-errc:
		return fmt.Errorf("node: serving clients: %w", err)
	case <-rep.Dead():
		if errors.Is(rep.Err(), replica.ErrRemoved) {
			return fmt.Errorf("node: stopping: %w; its data directory may be wiped", rep.Err())
		}
		if errors.Is(rep.Err(), replica.ErrDataLost) {
			return fmt.Errorf("node: stopping: %w", rep.Err())
		}
		return fmt.Errorf("%w: %w", ErrFailed, rep.Err())
	case <-ctx.Done():
	}
	log.Info("shutting down")
	sctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	context.AfterFunc(sctx, func() { closeRep() })
	if err := srv.Shutdown(sctx); err != nil {
		log.Warn("shutdown timed out; closed remaining clients", "err", err)
	}
	<-errc
	cerr := closeRep()
	if err := rep.Err(); !errors.Is(err, replica.ErrClosed) {
		return fmt.Errorf("%w, and stopped: %w", ErrFailed, err)
	}
	if cerr != nil {
		return fmt.Errorf("%w: closing the log failed: %w", ErrFailed, cerr)
	}
	log.Info("stopped")
	return nil
}
