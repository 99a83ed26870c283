package server

import (
	"encoding/binary"
	"math"
	"strings"
	"time"

	"github.com/flintkv/flint/internal/store"
)

// expiryCommands give keys deadlines and read them (docs/EXPIRY.md). SET's
// own options EX, PX, EXAT, PXAT and KEEPTTL are parsed by setOptions.
var expiryCommands = []*command{
	{name: "setex", arity: 4, flags: "write denyoom", first: 1, last: 1, step: 1, run: (*conn).setex,
		doc: commandDoc{summary: "Sets the string value and expiration time of a key. Creates the key if it doesn't exist.", since: "2.0.0", group: "string", complexity: "O(1)", keys: "OW update"}},
	{name: "psetex", arity: 4, flags: "write denyoom", first: 1, last: 1, step: 1, run: (*conn).setex,
		doc: commandDoc{summary: "Sets both string value and expiration time in milliseconds of a key. The key is created if it doesn't exist.", since: "2.6.0", group: "string", complexity: "O(1)", keys: "OW update"}},
	{name: "getex", arity: -2, flags: "write fast", first: 1, last: 1, step: 1, run: (*conn).getex,
		doc: commandDoc{summary: "Returns the string value of a key after setting its expiration time.", since: "6.2.0", group: "string", complexity: "O(1)", keys: "RW access update"}},
	{name: "expire", arity: -3, flags: "write fast", first: 1, last: 1, step: 1, run: (*conn).expire,
		doc: commandDoc{summary: "Sets the expiration time of a key in seconds.", since: "1.0.0", group: "generic", complexity: "O(1)", keys: "RW update"}},
	{name: "pexpire", arity: -3, flags: "write fast", first: 1, last: 1, step: 1, run: (*conn).expire,
		doc: commandDoc{summary: "Sets the expiration time of a key in milliseconds.", since: "2.6.0", group: "generic", complexity: "O(1)", keys: "RW update"}},
	{name: "expireat", arity: -3, flags: "write fast", first: 1, last: 1, step: 1, run: (*conn).expire,
		doc: commandDoc{summary: "Sets the expiration time of a key to a Unix timestamp.", since: "1.2.0", group: "generic", complexity: "O(1)", keys: "RW update"}},
	{name: "pexpireat", arity: -3, flags: "write fast", first: 1, last: 1, step: 1, run: (*conn).expire,
		doc: commandDoc{summary: "Sets the expiration time of a key to a Unix milliseconds timestamp.", since: "2.6.0", group: "generic", complexity: "O(1)", keys: "RW update"}},
	{name: "persist", arity: 2, flags: "write fast", first: 1, last: 1, step: 1, run: (*conn).persist,
		doc: commandDoc{summary: "Removes the expiration time of a key.", since: "2.2.0", group: "generic", complexity: "O(1)", keys: "RW update"}},
	{name: "ttl", arity: 2, flags: "readonly fast", first: 1, last: 1, step: 1, run: (*conn).ttl,
		doc: commandDoc{summary: "Returns the expiration time in seconds of a key.", since: "1.0.0", group: "generic", complexity: "O(1)", keys: "RO access"}},
	{name: "pttl", arity: 2, flags: "readonly fast", first: 1, last: 1, step: 1, run: (*conn).ttl,
		doc: commandDoc{summary: "Returns the expiration time in milliseconds of a key.", since: "2.6.0", group: "generic", complexity: "O(1)", keys: "RO access"}},
	{name: "expiretime", arity: 2, flags: "readonly fast", first: 1, last: 1, step: 1, run: (*conn).ttl,
		doc: commandDoc{summary: "Returns the expiration time of a key as a Unix timestamp.", since: "7.0.0", group: "generic", complexity: "O(1)", keys: "RO access"}},
	{name: "pexpiretime", arity: 2, flags: "readonly fast", first: 1, last: 1, step: 1, run: (*conn).ttl,
		doc: commandDoc{summary: "Returns the expiration time of a key as a Unix milliseconds timestamp.", since: "7.0.0", group: "generic", complexity: "O(1)", keys: "RO access"}},
}

// An expiry is a parsed EX, PX, EXAT or PXAT option, or the time argument
// of SETEX, PSETEX or an EXPIRE command.
type expiry struct {
	arg      []byte // the client's number
	seconds  bool   // EX, EXAT: arg is in seconds, else milliseconds
	absolute bool   // EXAT, PXAT: arg is a Unix time, else relative to now
}

// deadline validates the expiry as Redis does for SET and GETEX, and
// returns the store's deadline argument and flags (relative milliseconds
// with store.ExpireRelative, or Unix milliseconds). A number that is not
// positive, or that would overflow in milliseconds or, relative, past the
// server's clock, is an invalid expire time. ok is false, and msg the
// error, if it is refused.
func (e expiry) deadline(cmd string) (ms int64, flags byte, msg string) {
	n, ok := intArg(e.arg)
	switch {
	case !ok:
		return 0, 0, "ERR value is not an integer or out of range"
	case n <= 0 || (e.seconds && n > math.MaxInt64/1000):
		return 0, 0, errExpireTime(cmd)
	}
	if e.seconds {
		n *= 1000
	}
	if e.absolute {
		return n, 0, ""
	}
	if n > math.MaxInt64-time.Now().UnixMilli() {
		return 0, 0, errExpireTime(cmd)
	}
	return n, store.ExpireRelative, ""
}

func errExpireTime(cmd string) string { return "ERR invalid expire time in '" + cmd + "' command" }

// setOptions parses the options of SET after key and value, as Redis's
// parseExtendedStringArgumentsOrReply: NX or XX, GET, and one of EX, PX,
// EXAT, PXAT or KEEPTTL (an expiry option may be repeated, the last one
// counting). ok is false, with the syntax error replied, if they are
// malformed.
func (c *conn) setOptions(args [][]byte) (flags byte, exp *expiry, ok bool) {
	for i := 0; i < len(args); i++ {
		opt := strings.ToLower(string(args[i]))
		timed := exp != nil || flags&store.SetKeepTTL != 0
		switch {
		case opt == "nx" && flags&store.SetXX == 0:
			flags |= store.SetNX
		case opt == "xx" && flags&store.SetNX == 0:
			flags |= store.SetXX
		case opt == "get":
			flags |= store.SetGet
		case opt == "keepttl" && exp == nil:
			flags |= store.SetKeepTTL
		case i+1 < len(args) && (!timed || exp != nil && exp.kind() == opt) && isExpiryOption(opt):
			exp = &expiry{arg: args[i+1], seconds: opt[0] == 'e', absolute: strings.HasSuffix(opt, "at")}
			i++
		default:
			c.errSyntax()
			return 0, nil, false
		}
	}
	return flags, exp, true
}

func isExpiryOption(opt string) bool {
	return opt == "ex" || opt == "px" || opt == "exat" || opt == "pxat"
}

// kind returns the option that made e.
func (e expiry) kind() string {
	k := "px"
	if e.seconds {
		k = "ex"
	}
	if e.absolute {
		k += "at"
	}
	return k
}

// setWithExpiry adds a SET of key to val with exp to the batch, or
// replies with the error of an invalid expiry.
func (c *conn) setWithExpiry(cmd string, flags byte, exp expiry, reply reply, key, val []byte) {
	ms, relative, msg := exp.deadline(cmd)
	if msg != "" {
		c.err(msg)
		return
	}
	c.write(store.OpSetExpire, flags|relative, reply, key, val, store.DeadlineArg(ms))
}

// setex is SETEX key seconds value, and PSETEX key milliseconds value.
func (c *conn) setex(args [][]byte) {
	name := c.lowerName(args[0])
	exp := expiry{arg: args[2], seconds: string(name) == "setex"}
	c.setWithExpiry(string(name), 0, exp, replyOK, args[1], args[3])
}

// getex is GETEX key [EX s | PX ms | EXAT t | PXAT t | PERSIST]: GET that
// also sets or removes the key's deadline. As in Redis, a malformed option
// is a syntax error, but a bad time is an error only if the key exists.
func (c *conn) getex(args [][]byte) {
	var exp *expiry
	persist := false
	for i := 2; i < len(args); i++ {
		opt := strings.ToLower(string(args[i]))
		switch {
		case opt == "persist" && exp == nil:
			persist = true
		case i+1 < len(args) && !persist && (exp == nil || exp.kind() == opt) && isExpiryOption(opt):
			exp = &expiry{arg: args[i+1], seconds: opt[0] == 'e', absolute: strings.HasSuffix(opt, "at")}
			i++
		default:
			c.errSyntax()
			return
		}
	}
	switch {
	case persist:
		c.write(store.OpPersist, store.ExpireGet, replyValue, args[1])
	case exp != nil:
		ms, relative, msg := exp.deadline("getex")
		if msg != "" {
			c.commit()
			c.errIfExists(args[1], msg)
			return
		}
		c.write(store.OpExpire, store.ExpireGet|relative, replyValue, args[1], store.DeadlineArg(ms))
	default:
		c.commit()
		if v, found, ok := c.getValue(args[1]); ok {
			replyGet(c, []lookup{{v, found}})
		}
	}
}

// errIfExists replies with msg if key exists, and with null if not.
func (c *conn) errIfExists(key []byte, msg string) {
	if _, found, ok := c.getValue(key); !ok {
		return
	} else if found {
		c.err(msg)
	} else {
		c.null()
	}
}

// expire is EXPIRE, PEXPIRE, EXPIREAT and PEXPIREAT key time [NX | XX | GT
// | LT], as Redis's expireGenericCommand: the options are checked first,
// then the time, which may be negative or zero (the key is then removed),
// but must not overflow in milliseconds.
func (c *conn) expire(args [][]byte) {
	name := string(c.lowerName(args[0]))
	flags, msg := expireOptions(args[3:])
	if msg != "" {
		c.err(msg)
		return
	}
	n, ok := intArg(args[2])
	if !ok {
		c.errNotInt()
		return
	}
	if name == "expire" || name == "expireat" {
		if n > math.MaxInt64/1000 || n < math.MinInt64/1000 {
			c.err(errExpireTime(name))
			return
		}
		n *= 1000
	}
	if !strings.HasSuffix(name, "at") {
		if n > math.MaxInt64-time.Now().UnixMilli() {
			c.err(errExpireTime(name))
			return
		}
		flags |= store.ExpireRelative
	}
	c.write(store.OpExpire, flags, replyInt, args[1], store.DeadlineArg(n))
}

// expireOptions parses the NX, XX, GT and LT options of an EXPIRE command,
// or returns Redis's error for them.
func expireOptions(args [][]byte) (byte, string) {
	var flags byte
	for _, a := range args {
		switch strings.ToLower(string(a)) {
		case "nx":
			flags |= store.ExpireNX
		case "xx":
			flags |= store.ExpireXX
		case "gt":
			flags |= store.ExpireGT
		case "lt":
			flags |= store.ExpireLT
		default:
			return 0, "ERR Unsupported option " + string(a)
		}
	}
	switch {
	case flags&store.ExpireNX != 0 && flags&(store.ExpireXX|store.ExpireGT|store.ExpireLT) != 0:
		return 0, "ERR NX and XX, GT or LT options at the same time are not compatible"
	case flags&store.ExpireGT != 0 && flags&store.ExpireLT != 0:
		return 0, "ERR GT and LT options at the same time are not compatible"
	}
	return flags, ""
}

func (c *conn) persist(args [][]byte) {
	c.write(store.OpPersist, 0, replyInt, args[1])
}

// ttl is TTL, PTTL, EXPIRETIME and PEXPIRETIME: -2 for a key that does not
// exist, -1 for one without a deadline. What is left of a deadline counts
// from this server's clock, or the store's if that is ahead, so it is 0
// for a key whose deadline has passed but that has not expired by the
// store's clock yet; whether the key exists is the store's to say (see
// docs/EXPIRY.md). Seconds are rounded to the nearest, as Redis does.
func (c *conn) ttl(args [][]byte) {
	name := string(c.lowerName(args[0]))
	at, has, found, ok := c.deadline(args[1])
	if !ok {
		return
	}
	switch {
	case !found:
		c.int(-2)
		return
	case !has:
		c.int(-1)
		return
	}
	if !strings.HasSuffix(name, "expiretime") {
		at = max(at-max(time.Now().UnixMilli(), c.srv.kv.Store().Clock()/1e6), 0)
	}
	if name == "ttl" || name == "expiretime" {
		at = at/1000 + (at%1000+500)/1000 // (at+500)/1000 without overflow
	}
	c.int(at)
}

// deadline returns key's deadline (Unix ms), whether it has one, and
// whether the key exists; inside a transaction, as the key stands at the
// command's place in it (see txRead). ok is false if the read failed, its
// error replied.
func (c *conn) deadline(key []byte) (at int64, has, found, ok bool) {
	if c.tx.build != nil || c.tx.looked != nil {
		v, found, _ := c.txRead(store.OpDeadline, key)
		if len(v) == 8 {
			return int64(binary.BigEndian.Uint64(v)), true, found, true
		}
		return 0, false, found, true
	}
	s, ok := c.read()
	if !ok {
		return 0, false, false, false
	}
	at, has, found = s.TTL(key)
	return at, has, found, true
}
