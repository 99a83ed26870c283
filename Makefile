# Flint's build and test entry points. `make test` is what CI runs.

GO        ?= go
BIN       := bin/flint
ADDR      ?= 127.0.0.1:7379
FUZZTIME  ?= 10s
# Fuzz targets run briefly by `make test`; `make fuzz FUZZTIME=1h` runs them long.
FUZZ      := ./internal/protocol:FuzzParser ./internal/protocol:FuzzReader ./internal/store:FuzzApply \
             ./internal/store:FuzzRestoreSessions ./internal/store:FuzzRestoreWatches ./internal/store:FuzzBits ./internal/server:FuzzSubstr \
             ./internal/frame:FuzzScanner ./internal/wal:FuzzSegment ./internal/snap:FuzzLoad \
             ./internal/server:FuzzPrefetchAhead ./internal/transport:FuzzFrame \
             ./internal/transport:FuzzHandshake

.PHONY: build run cluster clients test lint unit fuzz bench clean

build:
	$(GO) build -o $(BIN) ./cmd/flint

run: build
	./$(BIN) serve --addr $(ADDR) --dir ./data

# A replicated group of three on loopback, each member a process; Ctrl-C
# stops it, and running it again restarts the same group from ./cluster.
cluster: build
	./$(BIN) cluster up --nodes 3 --dir ./cluster

# The Redis programs that the tests drive besides go-redis: redis-cli,
# redis-benchmark, redis-server and redis-rb (with apt-get) and redis-py (in
# bin/pyclients). Without them those tests skip, but not in CI, which
# installs them first.
clients:
	scripts/install_clients.sh

test: lint unit fuzz

lint:
	@test -z "$$(gofmt -l $$(git ls-files '*.go'))" || { echo "gofmt needed:"; gofmt -l $$(git ls-files '*.go'); exit 1; }
	$(GO) vet ./...
	$(GO) tool staticcheck ./...
	$(GO) mod tidy -diff

unit:
	$(GO) test -race -count=1 ./...

fuzz:
	@for t in $(FUZZ); do GO=$(GO) scripts/fuzz.sh $${t%%:*} $${t##*:} $(FUZZTIME) || exit 1; done

bench:
	$(GO) test -run='^$$' -bench=. -benchmem ./...

clean:
	rm -rf bin
