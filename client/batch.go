package client

import "context"

// Batch collects commands to send together: Exec writes those for each
// member at once, on one connection, the members' at the same time, and
// returns all their replies, in the batch's order. Nothing else is written
// between the commands of one member, but they are not a transaction: each
// takes effect on its own, those of one member (of one group of a sharded
// cluster) in the batch's order, and another client's commands may run in
// between. Commands for different groups have no order among themselves.
// A command sent again because a member turned it away takes effect after
// the commands behind it that the member ran.
//
// A Batch belongs to one goroutine.
type Batch struct {
	c    *Client
	cmd  []byte // the encoded commands
	ends []int  // where each ends in cmd
	err  error  // the first argument Do could not encode
}

// Batch returns an empty batch for c.
func (c *Client) Batch() *Batch { return &Batch{c: c} }

// Len returns the number of commands in the batch.
func (b *Batch) Len() int { return len(b.ends) }

// Get adds GET key.
func (b *Batch) Get(key string) { b.add(encGet(b.cmd, key)) }

// Set adds SET key value.
func (b *Batch) Set(key string, value []byte) { b.add(encSet(b.cmd, key, value)) }

// Swap adds SWAP key value.
func (b *Batch) Swap(key string, value []byte) { b.add(encSwap(b.cmd, key, value)) }

// CAS adds CAS key expected value.
func (b *Batch) CAS(key string, expected, value []byte) { b.add(encCAS(b.cmd, key, expected, value)) }

// Delete adds DEL keys...; with no keys its reply is an error.
func (b *Batch) Delete(keys ...string) { b.add(encDel(b.cmd, keys)) }

// Incr adds INCR key.
func (b *Batch) Incr(key string) { b.add(encIncr(b.cmd, key)) }

// Range adds RANGE start end, with LIMIT limit if limit > 0.
func (b *Batch) Range(start, end string, limit int) { b.add(encRange(b.cmd, start, end, limit)) }

// Do adds any command, with arguments as Client.Do takes them. A bad
// argument makes Exec fail without sending anything.
func (b *Batch) Do(args ...any) {
	cmd, err := encAny(b.cmd, args)
	if err != nil {
		if b.err == nil {
			b.err = err
		}
		return
	}
	b.add(cmd)
}

func (b *Batch) add(cmd []byte) {
	b.cmd = cmd
	b.ends = append(b.ends, len(cmd))
}

// Exec sends the batch and returns one reply per command, in order, and
// empties the batch for reuse. Error replies are Values of KindError in the
// slice, not errors; nil replies are Values of KindNull. A command that a
// member turns away (MOVED, ASK, TRYAGAIN, ...) is sent again, with the
// others turned away, and its reply still takes its place (see Failover in
// the package doc). The error is about the batch as a whole, as
// for any call: if it wraps ErrUnknownOutcome, any of the commands may have
// taken effect.
func (b *Batch) Exec(ctx context.Context) ([]Value, error) {
	req, err := request{cmd: b.cmd, ends: b.ends}, b.err
	*b = Batch{c: b.c}
	if err != nil {
		return nil, err
	}
	if len(req.ends) == 0 {
		return nil, nil
	}
	return b.c.call(ctx, req)
}
