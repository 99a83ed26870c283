package bench

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/flintkv/flint/client"
)

// clientBackend drives a RESP server, Flint or any other, through Flint's
// Go client: each worker's batch is one client.Batch, and the client's
// automatic pipelining shares the connections among the workers.
type clientBackend struct {
	c   *client.Client
	url string
}

func (b *clientBackend) close() { b.c.Close() }

func (b *clientBackend) executor(w workload) executor {
	return &clientExec{b: b.c.Batch(), scanEnd: w.keys.lastKey()}
}

// probe tries a RANGE if the workload scans: a server without it replies
// with an unknown-command error.
func (b *clientBackend) probe(ctx context.Context, w workload) error {
	if w.mix[opScan] == 0 {
		return nil
	}
	last := w.keys.lastKey()
	_, err := b.c.Range(ctx, last, last, 1)
	var re *client.ReplyError
	if errors.As(err, &re) && strings.HasPrefix(strings.ToLower(re.Msg), "err unknown command") {
		return fmt.Errorf("%w: %s has no RANGE command, which %s needs for its scans (%s)", ErrUnsupported, b.url, w.name, re.Msg)
	}
	if err != nil {
		return fmt.Errorf("bench: probing %s with RANGE: %w", b.url, err)
	}
	return nil
}

// batchTimeout bounds how long one batch may wait for its replies: the
// client retries a server that went away until its caller's deadline, and
// a benchmark whose server is gone should fail, not wait for it.
const batchTimeout = 10 * time.Second

// clientExec runs one worker's batches.
type clientExec struct {
	b       *client.Batch
	scanEnd string
}

// exec sends each operation's commands: a read-modify-write is a GET and
// a SET of the same key, adjacent in the batch. The SET does not wait for
// the GET's reply, since its value does not depend on what was read (in
// YCSB too the new value is random); on one connection the server still
// applies them in that order.
func (e *clientExec) exec(ctx context.Context, ops []op, res []string) error {
	for _, o := range ops {
		switch o.kind {
		case opRead:
			e.b.Get(o.key)
		case opUpdate, opInsert:
			e.b.Set(o.key, o.value)
		case opScan:
			e.b.Range(o.key, e.scanEnd, o.scanLen)
		case opRMW:
			e.b.Get(o.key)
			e.b.Set(o.key, o.value)
		case opTx:
			e.b.Do("MULTI")
			e.setAll(o)
			e.b.Do("EXEC")
		case opSets:
			e.setAll(o)
		}
	}
	ctx, cancel := context.WithTimeout(ctx, batchTimeout)
	defer cancel()
	replies, err := e.b.Exec(ctx)
	if err != nil {
		return err
	}
	for i, o := range ops {
		switch o.kind {
		case opRead:
			res[i] = judgeRead(replies[0])
		case opUpdate, opInsert:
			res[i] = judgeWrite(replies[0])
		case opScan:
			res[i] = judgeScan(replies[0])
		case opRMW:
			res[i] = cmp.Or(judgeRead(replies[0]), judgeWrite(replies[1]))
			replies = replies[1:]
		case opTx: // MULTI's +OK and the +QUEUEDs are not judged: EXEC's reply says it all
			replies = replies[txWrites+1:]
			res[i] = judgeExec(replies[0])
		case opSets:
			res[i] = judgeWrites(replies[:txWrites])
			replies = replies[txWrites-1:]
		}
		replies = replies[1:]
	}
	return nil
}

// setAll adds the SETs of a tx or sets operation.
func (e *clientExec) setAll(o op) {
	for _, k := range o.keys {
		e.b.Set(k, o.value)
	}
}

// The judge functions return "" for a reply that acknowledges the command,
// and the kind of error otherwise. A nil reply to a read is a missing key,
// not an error.

func judgeRead(v client.Value) string {
	switch v.Kind {
	case client.KindBulk, client.KindNull, client.KindSimple, client.KindVerbat:
		return ""
	}
	return judgeOther(v)
}

func judgeWrite(v client.Value) string {
	if v.Kind == client.KindSimple && string(v.Str) == "OK" {
		return ""
	}
	return judgeOther(v)
}

// judgeWrites judges the replies to several SETs: the first error, if any.
func judgeWrites(vs []client.Value) string {
	for _, v := range vs {
		if e := judgeWrite(v); e != "" {
			return e
		}
	}
	return ""
}

// judgeExec judges EXEC's reply to a transaction of SETs: an array of
// their replies, or an error (EXECABORT, or a nil reply if it was aborted).
func judgeExec(v client.Value) string {
	if v.Kind == client.KindArray && len(v.Elems) == txWrites {
		return judgeWrites(v.Elems)
	}
	return judgeOther(v)
}

func judgeScan(v client.Value) string {
	if v.Kind == client.KindArray {
		return ""
	}
	return judgeOther(v)
}

// judgeOther names an error reply by its code, its first word.
func judgeOther(v client.Value) string {
	if v.IsError() {
		return (&client.ReplyError{Msg: string(v.Str)}).Code()
	}
	return errKindUnexpected
}
