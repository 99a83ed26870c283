package client

import (
	"context"
	"fmt"
	"strconv"

	"github.com/flintkv/flint/internal/protocol"
)

// KV is a key and its value.
type KV struct {
	Key   string
	Value []byte
}

// Get returns the value of key, or ErrNil if the key does not exist.
func (c *Client) Get(ctx context.Context, key string) ([]byte, error) {
	return asBytes(c.one(ctx, encGet(nil, key)))
}

// Set sets key to value.
func (c *Client) Set(ctx context.Context, key string, value []byte) error {
	return asOK(c.one(ctx, encSet(nil, key, value)))
}

// Swap sets key to value and returns the value it replaced, or ErrNil if
// the key did not exist (it does now).
func (c *Client) Swap(ctx context.Context, key string, value []byte) ([]byte, error) {
	return asBytes(c.one(ctx, encSwap(nil, key, value)))
}

// CAS sets key to value if the key exists and its value is expected, and
// reports whether it did.
func (c *Client) CAS(ctx context.Context, key string, expected, value []byte) (bool, error) {
	n, err := asInt(c.one(ctx, encCAS(nil, key, expected, value)))
	return n == 1, err
}

// Delete deletes keys, atomically, and returns how many existed. In a
// sharded cluster the keys must share a slot (give them a common {hash
// tag}), or the member answers with a CROSSSLOT *ReplyError.
func (c *Client) Delete(ctx context.Context, keys ...string) (int64, error) {
	if len(keys) == 0 {
		return 0, nil
	}
	return asInt(c.one(ctx, encDel(nil, keys)))
}

// Range returns the pairs with start <= key <= end, in byte order of keys,
// at most limit of them if limit > 0. From one server or one group they are
// all as they were at one instant. In a sharded cluster every group is
// asked and their pairs merged (see Routing in the package doc): each pair
// is as it was at an instant during the call, but not all at the same one.
func (c *Client) Range(ctx context.Context, start, end string, limit int) ([]KV, error) {
	v, err := c.one(ctx, encRange(nil, start, end, limit))
	if err != nil {
		return nil, err
	}
	if v.Kind != KindArray || len(v.Elems)%2 != 0 {
		return nil, unexpected("an array of keys and values", v)
	}
	kvs := make([]KV, 0, len(v.Elems)/2)
	for i := 0; i < len(v.Elems); i += 2 {
		kvs = append(kvs, KV{Key: string(v.Elems[i].Str), Value: v.Elems[i+1].Str})
	}
	return kvs, nil
}

// MGet returns the values of keys, in order; the value of a missing key is
// nil. From one server or one group, or in one slot, they are all read at
// one instant. In a sharded cluster, keys in several slots are read slot
// by slot, each slot's keys at an instant of their own.
func (c *Client) MGet(ctx context.Context, keys ...string) ([][]byte, error) {
	if len(keys) == 0 {
		return nil, nil
	}
	v, err := c.one(ctx, encMGet(nil, keys))
	if err != nil {
		return nil, err
	}
	if v.Kind != KindArray || len(v.Elems) != len(keys) {
		return nil, unexpected(fmt.Sprintf("an array of %d values", len(keys)), v)
	}
	vals := make([][]byte, len(keys))
	for i, e := range v.Elems {
		if e.Kind != KindNull {
			vals[i] = e.Str
		}
	}
	return vals, nil
}

// MSet sets every pair, atomically. In a sharded cluster the keys must
// share a slot (give them a common {hash tag}), or the member answers with
// a CROSSSLOT *ReplyError.
func (c *Client) MSet(ctx context.Context, kvs ...KV) error {
	if len(kvs) == 0 {
		return nil
	}
	return asOK(c.one(ctx, encMSet(nil, kvs)))
}

// Incr adds one to the integer value of key (a missing key counts as 0)
// and returns the result.
func (c *Client) Incr(ctx context.Context, key string) (int64, error) {
	return asInt(c.one(ctx, encIncr(nil, key)))
}

// Do runs any command, such as c.Do(ctx, "SET", "k", value, "NX"). Arguments
// may be string, []byte, int, int64, uint64, float64 or bool (sent as 1 or
// 0). It returns the reply as sent: a nil reply is a Value of KindNull, not
// ErrNil. An error reply is returned as a *ReplyError.
func (c *Client) Do(ctx context.Context, args ...any) (Value, error) {
	cmd, err := encAny(nil, args)
	if err != nil {
		return Value{}, err
	}
	return c.one(ctx, cmd)
}

// The enc functions append one command to b. Client and Batch share them.

func encGet(b []byte, key string) []byte { return appendArgs(b, "GET", key) }

func encSet(b []byte, key string, value []byte) []byte {
	return protocol.AppendBulk(appendArgsN(b, 3, "SET", key), value)
}

func encSwap(b []byte, key string, value []byte) []byte {
	return protocol.AppendBulk(appendArgsN(b, 3, "SWAP", key), value)
}

func encCAS(b []byte, key string, expected, value []byte) []byte {
	b = appendArgsN(b, 4, "CAS", key)
	return protocol.AppendBulk(protocol.AppendBulk(b, expected), value)
}

func encDel(b []byte, keys []string) []byte {
	b = appendArgsN(b, 1+len(keys), "DEL")
	for _, k := range keys {
		b = protocol.AppendBulkString(b, k)
	}
	return b
}

func encRange(b []byte, start, end string, limit int) []byte {
	if limit > 0 {
		return appendArgs(b, "RANGE", start, end, "LIMIT", strconv.Itoa(limit))
	}
	return appendArgs(b, "RANGE", start, end)
}

func encMGet(b []byte, keys []string) []byte {
	b = appendArgsN(b, 1+len(keys), "MGET")
	for _, k := range keys {
		b = protocol.AppendBulkString(b, k)
	}
	return b
}

func encMSet(b []byte, kvs []KV) []byte {
	b = appendArgsN(b, 1+2*len(kvs), "MSET")
	for _, kv := range kvs {
		b = protocol.AppendBulk(protocol.AppendBulkString(b, kv.Key), kv.Value)
	}
	return b
}

func encIncr(b []byte, key string) []byte { return appendArgs(b, "INCR", key) }

// appendArgs appends a command made of args alone.
func appendArgs(b []byte, args ...string) []byte { return appendArgsN(b, len(args), args...) }

// appendArgsN appends the header of a command of n arguments and the first
// of them; the caller appends the rest.
func appendArgsN(b []byte, n int, first ...string) []byte {
	b = protocol.AppendArray(b, n)
	for _, a := range first {
		b = protocol.AppendBulkString(b, a)
	}
	return b
}

// encAny appends a command whose arguments are of any type Do accepts.
func encAny(b []byte, args []any) ([]byte, error) {
	if len(args) == 0 {
		return nil, fmt.Errorf("client: no command given")
	}
	b = protocol.AppendArray(b, len(args))
	for i, a := range args {
		switch a := a.(type) {
		case string:
			b = protocol.AppendBulkString(b, a)
		case []byte:
			b = protocol.AppendBulk(b, a)
		case int:
			b = protocol.AppendBulkString(b, strconv.Itoa(a))
		case int64:
			b = protocol.AppendBulkString(b, strconv.FormatInt(a, 10))
		case uint64:
			b = protocol.AppendBulkString(b, strconv.FormatUint(a, 10))
		case float64:
			b = protocol.AppendBulkString(b, strconv.FormatFloat(a, 'g', -1, 64))
		case bool:
			s := "0"
			if a {
				s = "1"
			}
			b = protocol.AppendBulkString(b, s)
		default:
			return nil, fmt.Errorf("client: argument %d has type %T; want string, []byte, int, int64, uint64, float64 or bool", i, a)
		}
	}
	return b, nil
}

// The as functions turn a reply into a method's result.

func asBytes(v Value, err error) ([]byte, error) {
	switch {
	case err != nil:
		return nil, err
	case v.Kind == KindNull:
		return nil, ErrNil
	case v.Kind == KindBulk || v.Kind == KindSimple || v.Kind == KindVerbat:
		return v.Str, nil
	}
	return nil, unexpected("a string", v)
}

func asInt(v Value, err error) (int64, error) {
	switch {
	case err != nil:
		return 0, err
	case v.Kind == KindInt:
		return v.Int, nil
	}
	return 0, unexpected("an integer", v)
}

func asOK(v Value, err error) error {
	switch {
	case err != nil:
		return err
	case v.Kind == KindSimple && string(v.Str) == "OK":
		return nil
	}
	return unexpected("OK", v)
}

func unexpected(want string, v Value) error {
	return fmt.Errorf("%w: want %s, got reply %s", ErrProtocol, want, v)
}
