package server

import (
	"cmp"
	"maps"
	"path"
	"slices"
	"strings"

	"github.com/flintkv/flint/internal/protocol"
)

// COMMAND and its subcommands describe the command table in Redis 7's
// formats, from the fields of each command (see command): COMMAND INFO's
// ten elements (name, arity, flags, first key, last key, step, ACL
// categories, tips, key specs, subcommands) and COMMAND DOCS's map
// (summary, since, group, complexity, subcommands). Docs give no
// arguments: Redis's are optional, and redis-cli does without.

// commandDoc is what COMMAND DOCS tells of a command, and what COMMAND
// INFO tells beyond its flags and key positions.
type commandDoc struct {
	summary, since, complexity string
	// group is Redis's: string, generic (keyspace), connection, server,
	// cluster. A subcommand's is its container's.
	group string
	// acl lists ACL categories beyond those that flags and group imply
	// (see aclCategories), as "@dangerous".
	acl string
	// keys holds the flags of the command's key spec, as Redis's ("RW
	// access update"); empty, they are "RW update" for a write and "RO
	// access" for a read.
	keys string
	// specs, for a command whose keys differ in their flags (RENAME's
	// source and destination), replaces the one key spec that first, last,
	// step and keys make.
	specs []keySpec
	// tips are Redis's command tips, as "nondeterministic_output". Flint
	// gives no request_policy or response_policy tips: cluster clients
	// would split or fan out commands by them (go-redis does), which its
	// routing does not expect.
	tips string
}

// keySpec is one of Redis 7's key specs, of the kinds Flint's commands
// need: the keys from argument index on, to lastkey (relative to index
// if not negative, else from the end) every step, with their flags.
type keySpec struct {
	index, lastkey, step int
	flags                string
}

// oldDocs are the docs of the commands whose literals predate doc.
var oldDocs = map[string]commandDoc{
	"ping":      {summary: "Returns the server's liveliness response.", since: "1.0.0", group: "connection", complexity: "O(1)"},
	"echo":      {summary: "Returns the given string.", since: "1.0.0", group: "connection", complexity: "O(1)"},
	"hello":     {summary: "Handshakes with the Redis server.", since: "6.0.0", group: "connection", complexity: "O(1)"},
	"auth":      {summary: "Authenticates the connection.", since: "1.0.0", group: "connection", complexity: "O(N) where N is the number of passwords defined for the user"},
	"select":    {summary: "Changes the selected database.", since: "1.0.0", group: "connection", complexity: "O(1)"},
	"quit":      {summary: "Closes the connection.", since: "1.0.0", group: "connection", complexity: "O(1)"},
	"client":    {summary: "A container for client connection commands.", since: "2.4.0", group: "connection", complexity: "Depends on subcommand."},
	"get":       {summary: "Returns the string value of a key.", since: "1.0.0", group: "string", complexity: "O(1)", keys: "RO access"},
	"mget":      {summary: "Atomically returns the string values of one or more keys.", since: "1.0.0", group: "string", complexity: "O(N) where N is the number of keys to retrieve.", keys: "RO access"},
	"exists":    {summary: "Determines whether one or more keys exist.", since: "1.0.0", group: "generic", complexity: "O(N) where N is the number of keys to check.", keys: "RO"},
	"touch":     {summary: "Returns the number of existing keys out of those specified after updating the time they were last accessed.", since: "3.2.1", group: "generic", complexity: "O(N) where N is the number of keys that will be touched.", keys: "RO"},
	"type":      {summary: "Determines the type of value stored at a key.", since: "1.0.0", group: "generic", complexity: "O(1)", keys: "RO"},
	"strlen":    {summary: "Returns the length of a string value.", since: "2.2.0", group: "string", complexity: "O(1)", keys: "RO"},
	"range":     {summary: "Returns the keys from start to end, in byte order, with their values (Flint's own).", since: "0.1.0", group: "string", complexity: "O(log(N)+M) where M is the number of keys returned", keys: "RO access"},
	"set":       {summary: "Sets the string value of a key, ignoring its type. The key is created if it doesn't exist.", since: "1.0.0", group: "string", complexity: "O(1)", keys: "RW access update variable_flags"},
	"setnx":     {summary: "Set the string value of a key only when the key doesn't exist.", since: "1.0.0", group: "string", complexity: "O(1)", keys: "OW insert"},
	"getset":    {summary: "Returns the previous string value of a key after setting it to a new value.", since: "1.0.0", group: "string", complexity: "O(1)", keys: "RW access update"},
	"swap":      {summary: "Sets the string value of a key and returns its previous value (Flint's own, as GETSET).", since: "0.1.0", group: "string", complexity: "O(1)", keys: "RW access update"},
	"cas":       {summary: "Sets a key to a new value if it holds the expected one (Flint's own).", since: "0.1.0", group: "string", complexity: "O(1)", keys: "RW access update"},
	"mset":      {summary: "Atomically creates or modifies the string values of one or more keys.", since: "1.0.1", group: "string", complexity: "O(N) where N is the number of keys to set.", keys: "OW update"},
	"msetnx":    {summary: "Atomically modifies the string values of one or more keys only when all keys don't exist.", since: "1.0.1", group: "string", complexity: "O(N) where N is the number of keys to set.", keys: "OW insert"},
	"del":       {summary: "Deletes one or more keys.", since: "1.0.0", group: "generic", complexity: "O(N) where N is the number of keys that will be removed.", keys: "RM delete"},
	"unlink":    {summary: "Asynchronously deletes one or more keys.", since: "4.0.0", group: "generic", complexity: "O(1) for each key removed regardless of its size.", keys: "RM delete"},
	"incr":      {summary: "Increments the integer value of a key by one. Uses 0 as initial value if the key doesn't exist.", since: "1.0.0", group: "string", complexity: "O(1)", keys: "RW access update"},
	"decr":      {summary: "Decrements the integer value of a key by one. Uses 0 as initial value if the key doesn't exist.", since: "1.0.0", group: "string", complexity: "O(1)", keys: "RW access update"},
	"incrby":    {summary: "Increments the integer value of a key by a number. Uses 0 as initial value if the key doesn't exist.", since: "1.0.0", group: "string", complexity: "O(1)", keys: "RW access update"},
	"decrby":    {summary: "Decrements a number from the integer value of a key. Uses 0 as initial value if the key doesn't exist.", since: "1.0.0", group: "string", complexity: "O(1)", keys: "RW access update"},
	"append":    {summary: "Appends a string to the value of a key. Creates the key if it doesn't exist.", since: "2.0.0", group: "string", complexity: "O(1).", keys: "RW insert"},
	"dbsize":    {summary: "Returns the number of keys in the database.", since: "1.0.0", group: "server", complexity: "O(1)", acl: "@keyspace"},
	"time":      {summary: "Returns the server time.", since: "2.6.0", group: "server", complexity: "O(1)", tips: "nondeterministic_output"},
	"config":    {summary: "A container for server configuration commands.", since: "2.0.0", group: "server", complexity: "Depends on subcommand."},
	"flushdb":   {summary: "Remove all keys from the current database.", since: "1.0.0", group: "server", complexity: "O(N) where N is the number of keys in the selected database", acl: "@keyspace @dangerous"},
	"flushall":  {summary: "Removes all keys from all databases.", since: "1.0.0", group: "server", complexity: "O(N) where N is the total number of keys in all databases", acl: "@keyspace @dangerous"},
	"save":      {summary: "Synchronously saves the database(s) to disk.", since: "1.0.0", group: "server", complexity: "O(N) where N is the total number of keys in all databases"},
	"bgsave":    {summary: "Asynchronously saves the database(s) to disk.", since: "1.0.0", group: "server", complexity: "O(1)"},
	"cluster":   {summary: "A container for Redis Cluster commands.", since: "3.0.0", group: "cluster", complexity: "Depends on subcommand."},
	"role":      {summary: "Returns the replication role.", since: "2.8.12", group: "server", complexity: "O(1)", acl: "@admin @dangerous"},
	"readonly":  {summary: "Enables read-only queries for a connection to a Redis Cluster replica node.", since: "3.0.0", group: "cluster", complexity: "O(1)", acl: "@connection"},
	"readwrite": {summary: "Enables read-write queries for a connection to a Redis Cluster replica node.", since: "3.0.0", group: "cluster", complexity: "O(1)", acl: "@connection"},
	"asking":    {summary: "Signals that a cluster client is following an -ASK redirect.", since: "3.0.0", group: "cluster", complexity: "O(1)", acl: "@connection"},
	"command":   {summary: "Returns detailed information about all commands.", since: "2.8.13", group: "server", complexity: "O(N) where N is the total number of Redis commands", acl: "@connection"},
	"info":      {summary: "Returns information and statistics about the server.", since: "1.0.0", group: "server", complexity: "O(1)", acl: "@dangerous", tips: "nondeterministic_output"},
	"lastsave":  {summary: "Returns the Unix timestamp of the last successful save to disk.", since: "1.0.0", group: "server", complexity: "O(1)", acl: "@admin @dangerous", tips: "nondeterministic_output"},
	"wait":      {summary: "Blocks until the asynchronous replication of all preceding write commands sent by the connection is completed.", since: "3.0.0", group: "generic", complexity: "O(1)", acl: "@connection"},
	"slowlog":   {summary: "A container for slow log commands.", since: "2.2.12", group: "server", complexity: "Depends on subcommand."},
	"memory":    {summary: "A container for memory diagnostics commands.", since: "4.0.0", group: "server", complexity: "Depends on subcommand."},
	"latency":   {summary: "A container for latency diagnostics commands.", since: "2.8.13", group: "server", complexity: "Depends on subcommand."},

	"getdel":      {summary: "Returns the string value of a key after deleting the key.", since: "6.2.0", group: "string", complexity: "O(1)", keys: "RW access delete"},
	"incrbyfloat": {summary: "Increment the floating point value of a key by a number. Uses 0 as initial value if the key doesn't exist.", since: "2.6.0", group: "string", complexity: "O(1)", keys: "RW access update"},
	"getrange":    {summary: "Returns a substring of the string stored at a key.", since: "2.4.0", group: "string", complexity: "O(N) where N is the length of the returned string.", keys: "RO access"},
	"substr":      {summary: "Returns a substring from a string value.", since: "1.0.0", group: "string", complexity: "O(N) where N is the length of the returned string.", keys: "RO access"},
	"setrange":    {summary: "Overwrites a part of a string value with another by an offset. Creates the key if it doesn't exist.", since: "2.2.0", group: "string", complexity: "O(1), not counting the time taken to copy the new string in place.", keys: "RW update"},
	"lcs":         {summary: "Finds the longest common substring.", since: "7.0.0", group: "string", complexity: "O(N*M) where N and M are the lengths of s1 and s2, respectively", keys: "RO access"},
	"setbit":      {summary: "Sets or clears the bit at offset of the string value. Creates the key if it doesn't exist.", since: "2.2.0", group: "bitmap", complexity: "O(1)", keys: "RW access update"},
	"getbit":      {summary: "Returns a bit value by offset.", since: "2.2.0", group: "bitmap", complexity: "O(1)", keys: "RO access"},
	"bitcount":    {summary: "Counts the number of set bits (population counting) in a string.", since: "2.6.0", group: "bitmap", complexity: "O(N)", keys: "RO access"},
	"bitpos":      {summary: "Finds the first set (1) or clear (0) bit in a string.", since: "2.8.7", group: "bitmap", complexity: "O(N)", keys: "RO access"},
	"bitop": {summary: "Performs bitwise operations on multiple strings, and stores the result.", since: "2.6.0", group: "bitmap", complexity: "O(N)",
		specs: []keySpec{{index: 2, lastkey: 0, step: 1, flags: "OW update"}, {index: 3, lastkey: -1, step: 1, flags: "RO access"}}},
	"bitfield":    {summary: "Performs arbitrary bitfield integer operations on strings.", since: "3.2.0", group: "bitmap", complexity: "O(1) for each subcommand specified", keys: "RW access update variable_flags"},
	"bitfield_ro": {summary: "Performs arbitrary read-only bitfield integer operations on strings.", since: "6.0.0", group: "bitmap", complexity: "O(1) for each subcommand specified", keys: "RO access"},
	"copy": {summary: "Copies the value of a key to a new key.", since: "6.2.0", group: "generic", complexity: "O(N) worst case for collections, where N is the number of nested items. O(1) for string values.",
		specs: []keySpec{{index: 1, step: 1, flags: "RO access"}, {index: 2, step: 1, flags: "OW update"}}},
	"rename": {summary: "Renames a key and overwrites the destination.", since: "1.0.0", group: "generic", complexity: "O(1)",
		specs: []keySpec{{index: 1, step: 1, flags: "RW access delete"}, {index: 2, step: 1, flags: "OW update"}}},
	"renamenx": {summary: "Renames a key only when the target key name doesn't exist.", since: "1.0.0", group: "generic", complexity: "O(1)",
		specs: []keySpec{{index: 1, step: 1, flags: "RW access delete"}, {index: 2, step: 1, flags: "OW insert"}}},
	"keys":      {summary: "Returns all key names that match a pattern.", since: "1.0.0", group: "generic", complexity: "O(N) with N being the number of keys in the database", tips: "nondeterministic_output_order"},
	"scan":      {summary: "Iterates over the key names in the database.", since: "2.8.0", group: "generic", complexity: "O(1) for every call. O(N) for a complete iteration.", tips: "nondeterministic_output"},
	"randomkey": {summary: "Returns a random key name from the database.", since: "1.0.0", group: "generic", complexity: "O(1)", tips: "nondeterministic_output"},

	"flint.session": {summary: "Opens a client session, whose writes take effect once (Flint's own).", since: "0.1.0", group: "server", complexity: "O(1)"},
	"flint.seq":     {summary: "Runs a write command, or EXEC, in a client session (Flint's own).", since: "0.1.0", group: "server", complexity: "That of the command it runs", keys: "RW update"},
	"flint.member":  {summary: "Adds, removes or hands leadership to a member of the group (Flint's own).", since: "0.1.0", group: "cluster", complexity: "O(1)"},
	"flint.map":     {summary: "Returns the cluster map (Flint's own).", since: "0.1.0", group: "cluster", complexity: "O(N) where N is the number of groups"},
	"flint.group":   {summary: "Starts this node's member of a new data group, on a node that hosts several (Flint's own).", since: "0.1.0", group: "cluster", complexity: "O(N) where N is the number of members"},
	"flint.roles":   {summary: "Returns the role of this member, or of every member its process serves (Flint's own).", since: "0.1.0", group: "cluster", complexity: "O(N) where N is the number of members the process serves"},
	"flint.mapset":  {summary: "Makes a map of the next epoch the cluster map, at a manager (Flint's own).", since: "0.1.0", group: "cluster", complexity: "O(N) where N is the number of groups"},
	"flint.slots":   {summary: "Takes a step of a slot move in the group, or reads what a move copies (Flint's own).", since: "0.1.0", group: "cluster", complexity: "O(N) where N is the number of keys in the group for DROP and EXPORT, else O(1) per argument"},
}

// aclOrder is Redis's order of ACL categories, in which COMMAND INFO
// lists them.
var aclOrder = strings.Fields(`@keyspace @read @write @set @sortedset @list @hash @string @bitmap @hyperloglog
	@geo @stream @pubsub @admin @fast @slow @blocking @dangerous @connection @transaction @scripting`)

// groupACL is the ACL category of each group of commands that has one.
var groupACL = map[string]string{"string": "@string", "bitmap": "@bitmap", "generic": "@keyspace", "connection": "@connection",
	"pubsub": "@pubsub", "transactions": "@transaction"}

// aclCategories returns the command's ACL categories, in Redis's order:
// those its flags imply as Redis's do (write, readonly, admin, fast or
// slow), its group's, and doc.acl.
func aclCategories(cmd *command) []string {
	flags := strings.Fields(cmd.flags)
	cats := strings.Fields(cmd.doc.acl)
	group := cmd.doc.group
	if cmd.parent != nil {
		group = cmd.parent.doc.group
	}
	if g, ok := groupACL[group]; ok {
		cats = append(cats, g)
	}
	for f, implied := range map[string]string{"write": "@write", "readonly": "@read", "admin": "@admin @dangerous", "fast": "@fast"} {
		if slices.Contains(flags, f) {
			cats = append(cats, strings.Fields(implied)...)
		}
	}
	if !slices.Contains(flags, "fast") {
		cats = append(cats, "@slow")
	}
	slices.SortFunc(cats, func(a, b string) int { return cmp.Compare(slices.Index(aclOrder, a), slices.Index(aclOrder, b)) })
	return slices.Compact(cats)
}

// commandCommands are COMMAND's subcommands.
var commandCommands = []*command{
	{name: "command|count", arity: 2, flags: "loading stale", run: (*conn).commandCount,
		doc: commandDoc{summary: "Returns a count of commands.", since: "2.8.13", complexity: "O(1)"}},
	{name: "command|info", arity: -2, flags: "loading stale", run: (*conn).commandInfoCmd,
		doc: commandDoc{summary: "Returns information about one, multiple or all commands.", since: "2.8.13", complexity: "O(N) where N is the number of commands to look up", tips: "nondeterministic_output_order"}},
	{name: "command|docs", arity: -2, flags: "loading stale", run: (*conn).commandDocs,
		doc: commandDoc{summary: "Returns documentary information about one, multiple or all commands.", since: "7.0.0", complexity: "O(N) where N is the number of commands to look up", tips: "nondeterministic_output_order"}},
	{name: "command|list", arity: -2, flags: "loading stale", run: (*conn).commandListNames,
		doc: commandDoc{summary: "Returns a list of command names.", since: "7.0.0", complexity: "O(N) where N is the total number of Redis commands", tips: "nondeterministic_output_order"}},
	{name: "command|getkeys", arity: -3, flags: "loading stale", run: (*conn).commandGetKeys,
		doc: commandDoc{summary: "Extracts the key names from an arbitrary command.", since: "2.8.13", complexity: "O(N) where N is the number of arguments to the command"}},
	{name: "command|getkeysandflags", arity: -3, flags: "loading stale", run: (*conn).commandGetKeys,
		doc: commandDoc{summary: "Extracts the key names and access flags for an arbitrary command.", since: "7.0.0", complexity: "O(N) where N is the number of arguments to the command"}},
	{name: "command|help", arity: 2, flags: "loading stale", run: (*conn).commandHelp,
		doc: commandDoc{summary: "Returns helpful text about the different subcommands.", since: "5.0.0", complexity: "O(1)"}},
}

// sortedCommands returns the commands, without subcommands, by name.
func sortedCommands() []*command {
	return slices.SortedFunc(maps.Values(commands), func(a, b *command) int { return strings.Compare(a.name, b.name) })
}

// allCommandsByName returns the commands and subcommands, by name.
func allCommandsByName() []*command {
	return slices.SortedFunc(slices.Values(allCommands), func(a, b *command) int { return strings.Compare(a.name, b.name) })
}

// lookupCommand returns the command or subcommand ("client|list") of that
// name, in any case, or nil.
func lookupCommand(name []byte) *command {
	n := strings.ToLower(string(name))
	top, _, _ := strings.Cut(n, "|")
	cmd := commands[top]
	if cmd == nil || top == n {
		return cmd
	}
	for _, sub := range cmd.subs {
		if sub.name == n {
			return sub
		}
	}
	return nil
}

// commandList is COMMAND: every command's info.
func (c *conn) commandList([][]byte) { c.commandInfo(sortedCommands()) }

func (c *conn) commandCount([][]byte) { c.int(int64(len(commands))) }

// commandInfoCmd is COMMAND INFO [name ...]: the named commands' info, or
// every command's.
func (c *conn) commandInfoCmd(args [][]byte) {
	c.commandInfo(c.namedCommands(args[2:]))
}

// namedCommands returns the commands named, nil for each unknown name, or
// every command if none is named.
func (c *conn) namedCommands(names [][]byte) []*command {
	if len(names) == 0 {
		return sortedCommands()
	}
	list := make([]*command, len(names))
	for i, a := range names {
		list[i] = lookupCommand(a)
	}
	return list
}

// commandInfo writes Redis 7's ten-element description of each command;
// a nil entry is written as a null bulk string for an unknown name, as
// Redis does.
func (c *conn) commandInfo(list []*command) {
	c.out = protocol.AppendArray(c.out, len(list))
	for _, cmd := range list {
		if cmd == nil {
			c.null()
			continue
		}
		c.describeCommand(cmd)
	}
}

func (c *conn) describeCommand(cmd *command) {
	c.out = protocol.AppendArray(c.out, 10)
	c.bulkString(cmd.name)
	c.int(int64(cmd.arity))
	c.simpleSet(strings.Fields(strings.ReplaceAll(cmd.flags, "-", "_")))
	c.int(int64(cmd.first))
	c.int(int64(cmd.last))
	c.int(int64(cmd.step))
	c.simpleSet(aclCategories(cmd))
	tips := strings.Fields(cmd.doc.tips)
	c.out = protocol.AppendSet(c.out, len(tips), c.proto)
	for _, t := range tips {
		c.bulkString(t)
	}
	c.keySpecs(cmd)
	c.out = protocol.AppendSet(c.out, len(cmd.subs), c.proto)
	for _, sub := range cmd.subs {
		c.describeCommand(sub)
	}
}

func (c *conn) simpleSet(items []string) {
	c.out = protocol.AppendSet(c.out, len(items), c.proto)
	for _, s := range items {
		c.out = protocol.AppendSimple(c.out, s)
	}
}

// keySpecsOf returns the command's key specs: doc.specs, or one from
// first, last and step with keyFlags's flags, or none without keys.
func keySpecsOf(cmd *command) []keySpec {
	switch {
	case cmd.doc.specs != nil:
		return cmd.doc.specs
	case cmd.first == 0:
		return nil
	}
	last := cmd.last
	if last >= 0 {
		last -= cmd.first // relative to the first key
	}
	return []keySpec{{index: cmd.first, lastkey: last, step: cmd.step, flags: keyFlags(cmd)}}
}

// keyFlags returns the flags of the command's keys, if they share them.
func keyFlags(cmd *command) string {
	switch {
	case cmd.doc.keys != "":
		return cmd.doc.keys
	case cmd.write:
		return "RW update"
	}
	return "RO access"
}

// keySpecs writes the command's key specs as Redis 7 does: each a map of
// its flags, its begin_search (by index) and its find_keys (by range).
func (c *conn) keySpecs(cmd *command) {
	specs := keySpecsOf(cmd)
	c.out = protocol.AppendSet(c.out, len(specs), c.proto)
	for _, ks := range specs {
		c.out = protocol.AppendMap(c.out, 3, c.proto)
		c.bulkString("flags")
		c.simpleSet(strings.Fields(ks.flags))
		c.bulkString("begin_search")
		c.out = protocol.AppendMap(c.out, 2, c.proto)
		c.bulkString("type")
		c.bulkString("index")
		c.bulkString("spec")
		c.out = protocol.AppendMap(c.out, 1, c.proto)
		c.bulkString("index")
		c.int(int64(ks.index))
		c.bulkString("find_keys")
		c.out = protocol.AppendMap(c.out, 2, c.proto)
		c.bulkString("type")
		c.bulkString("range")
		c.bulkString("spec")
		c.out = protocol.AppendMap(c.out, 3, c.proto)
		c.bulkString("lastkey")
		c.int(int64(ks.lastkey))
		c.bulkString("keystep")
		c.int(int64(ks.step))
		c.bulkString("limit")
		c.int(0)
	}
}

// commandDocs is COMMAND DOCS [name ...]: a map from each known command
// named, or every command, to its docs.
func (c *conn) commandDocs(args [][]byte) {
	list := slices.DeleteFunc(c.namedCommands(args[2:]), func(cmd *command) bool { return cmd == nil })
	c.out = protocol.AppendMap(c.out, len(list), c.proto)
	for _, cmd := range list {
		c.bulkString(cmd.name)
		c.writeDoc(cmd)
	}
}

func (c *conn) writeDoc(cmd *command) {
	d := cmd.doc
	group := d.group
	if cmd.parent != nil {
		group = cmd.parent.doc.group
	}
	n := 4
	if len(cmd.subs) > 0 {
		n++
	}
	c.out = protocol.AppendMap(c.out, n, c.proto)
	for _, kv := range [][2]string{{"summary", d.summary}, {"since", d.since}, {"group", group}, {"complexity", d.complexity}} {
		c.bulkString(kv[0])
		c.bulkString(kv[1])
	}
	if len(cmd.subs) > 0 {
		c.bulkString("subcommands")
		c.out = protocol.AppendMap(c.out, len(cmd.subs), c.proto)
		for _, sub := range cmd.subs {
			c.bulkString(sub.name)
			c.writeDoc(sub)
		}
	}
}

// commandListNames is COMMAND LIST [FILTERBY MODULE name | ACLCAT category
// | PATTERN pattern]: the names of the commands and subcommands that match.
func (c *conn) commandListNames(args [][]byte) {
	match := func(*command) bool { return true }
	switch {
	case len(args) == 2:
	case len(args) == 5 && strings.EqualFold(string(args[2]), "filterby"):
		val := strings.ToLower(string(args[4]))
		switch strings.ToLower(string(args[3])) {
		case "module":
			match = func(*command) bool { return false } // Flint has no modules
		case "aclcat":
			match = func(cmd *command) bool { return slices.Contains(aclCategories(cmd), "@"+val) }
		case "pattern":
			match = func(cmd *command) bool { ok, _ := path.Match(val, cmd.name); return ok }
		default:
			c.errSyntax()
			return
		}
	default:
		c.errSyntax()
		return
	}
	var names []string
	for _, cmd := range allCommandsByName() {
		if match(cmd) {
			names = append(names, cmd.name)
		}
	}
	c.out = protocol.AppendArray(c.out, len(names))
	for _, n := range names {
		c.bulkString(n)
	}
}

// commandGetKeys is COMMAND GETKEYS and GETKEYSANDFLAGS command [arg ...]:
// the keys of the command given, found as its key spec says.
func (c *conn) commandGetKeys(args [][]byte) {
	cmd := commands[strings.ToLower(string(args[2]))]
	inner := args[2:]
	if cmd != nil && cmd.subs != nil && len(inner) > 1 {
		cmd = lookupCommand([]byte(cmd.name + "|" + string(inner[1])))
	}
	switch {
	case cmd == nil:
		c.err("ERR Invalid command specified")
		return
	case cmd.first == 0:
		c.err("ERR The command has no key arguments")
		return
	case (cmd.arity > 0 && len(inner) != cmd.arity) || len(inner) < -cmd.arity:
		c.err("ERR Invalid number of arguments specified for command")
		return
	}
	type key struct {
		pos   int
		flags string
	}
	var keys []key
	for _, ks := range keySpecsOf(cmd) {
		for _, i := range ks.positions(len(inner)) {
			keys = append(keys, key{i, ks.flags})
		}
	}
	withFlags := strings.EqualFold(string(args[1]), "getkeysandflags")
	c.out = protocol.AppendArray(c.out, len(keys))
	for _, k := range keys {
		if !withFlags {
			c.out = protocol.AppendBulk(c.out, inner[k.pos])
			continue
		}
		c.out = protocol.AppendArray(c.out, 2)
		c.out = protocol.AppendBulk(c.out, inner[k.pos])
		c.simpleSet(strings.Fields(k.flags))
	}
}

// positions returns the positions of the spec's keys in a call of n
// arguments (the name included).
func (ks keySpec) positions(n int) []int {
	last := ks.index + ks.lastkey
	if ks.lastkey < 0 {
		last = n + ks.lastkey
	}
	var pos []int
	for i := ks.index; i <= last && i < n && ks.step > 0; i += ks.step {
		pos = append(pos, i)
	}
	return pos
}

func (c *conn) commandHelp([][]byte) {
	c.help("COMMAND",
		"(no subcommand)", "Return details about all Redis commands.",
		"COUNT", "Return the total number of commands in this Redis server.",
		"LIST", strings.Join([]string{
			"Return a list of all commands in this Redis server.",
			"Filter by: MODULE <module-name> | ACLCAT <category> | PATTERN <pattern>"}, "\n"),
		"INFO [<command-name> ...]", strings.Join([]string{
			"Return details about multiple Redis commands.",
			"If no command names are given, documentation details for all",
			"commands are returned."}, "\n"),
		"DOCS [<command-name> ...]", strings.Join([]string{
			"Return documentation details about multiple Redis commands.",
			"If no command names are given, documentation details for all",
			"commands are returned."}, "\n"),
		"GETKEYS <full-command>", "Return the keys from a full Redis command.",
		"GETKEYSANDFLAGS <full-command>", "Return the keys and the access flags from a full Redis command.")
}

// sortedKeys returns m's keys in order.
func sortedKeys[V any](m map[string]V) []string { return slices.Sorted(maps.Keys(m)) }
