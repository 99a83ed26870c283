package server

import (
	"math"
	"strings"
	"time"

	"github.com/flintkv/flint/internal/store"
)

// expiryCommands give keys deadlines and read them (docs/EXPIRY.md). SET's
// own options EX, PX, EXAT, PXAT and KEEPTTL are parsed by setOptions.
var expiryCommands = []*command{
	{name: "setex", arity: 4, flags: "write denyoom", first: 1, last: 1, step: 1, run: (*conn).setex},
	{name: "psetex", arity: 4, flags: "write denyoom", first: 1, last: 1, step: 1, run: (*conn).setex},
	{name: "getex", arity: -2, flags: "write fast", first: 1, last: 1, step: 1, run: (*conn).getex},
	{name: "expire", arity: -3, flags: "write fast", first: 1, last: 1, step: 1, run: (*conn).expire},
	{name: "pexpire", arity: -3, flags: "write fast", first: 1, last: 1, step: 1, run: (*conn).expire},
	{name: "expireat", arity: -3, flags: "write fast", first: 1, last: 1, step: 1, run: (*conn).expire},
	{name: "pexpireat", arity: -3, flags: "write fast", first: 1, last: 1, step: 1, run: (*conn).expire},
	{name: "persist", arity: 2, flags: "write fast", first: 1, last: 1, step: 1, run: (*conn).persist},
	{name: "ttl", arity: 2, flags: "readonly fast", first: 1, last: 1, step: 1, run: (*conn).ttl},
	{name: "pttl", arity: 2, flags: "readonly fast", first: 1, last: 1, step: 1, run: (*conn).ttl},
	{name: "expiretime", arity: 2, flags: "readonly fast", first: 1, last: 1, step: 1, run: (*conn).ttl},
	{name: "pexpiretime", arity: 2, flags: "readonly fast", first: 1, last: 1, step: 1, run: (*conn).ttl},
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
		c.readNow(commands["get"], args[:2])
	}
}

// errIfExists replies with msg if key exists, and with null if not.
func (c *conn) errIfExists(key []byte, msg string) {
	s, ok := c.read()
	if !ok {
		return
	}
	if _, found := s.Get(key); found {
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
	s, ok := c.read()
	if !ok {
		return
	}
	at, has, found := s.TTL(args[1])
	switch {
	case !found:
		c.int(-2)
		return
	case !has:
		c.int(-1)
		return
	}
	if !strings.HasSuffix(name, "expiretime") {
		at = max(at-max(time.Now().UnixMilli(), s.Clock()/1e6), 0)
	}
	if name == "ttl" || name == "expiretime" {
		at = at/1000 + (at%1000+500)/1000 // (at+500)/1000 without overflow
	}
	c.int(at)
}
