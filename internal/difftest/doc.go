// Package difftest compares Flint with Redis: scripts of commands run
// against redis-server 7 and against Flint, and their replies are compared
// byte for byte, in RESP2 and in RESP3. It also checks that Flint refuses
// every command Redis has for its other data types alike, and runs
// redis-benchmark against Flint. Its tests skip where redis-server or
// redis-benchmark is missing, except when FLINT_REQUIRE_CLIENTS is set, as
// CI sets it after `make clients` has installed them.
//
// # Scripts
//
// Each file testdata/*.script holds the cases of one group of commands
// (strings.script, connection.script, ...). A case is a run of lines ended
// by a blank line or the end of the file. Each case runs twice on each
// server, once in RESP2 and once in RESP3, and each run starts on new
// connections to servers just emptied with FLUSHALL (and switched to RESP3
// with HELLO 3), so no case sees another's keys or connection state.
//
//	# A comment: a line whose first non-blank character is '#'.
//	SET k "a value"       the reply must be the same bytes
//	GET k
//	!shape TIME           the reply need only have the same shape
//	!inline GET k         sent as an inline command
//
// A command line is split into arguments as redis-cli splits what is typed
// at it (protocol.SplitArgs): words are separated by spaces, and a word in
// double quotes may hold spaces and escapes such as \n, \" and \x00; in
// single quotes, only \' is an escape. The arguments are sent as a RESP
// array of bulk strings, and one reply is read back as the raw bytes the
// server sent.
//
// A line that starts with "!inline " is sent as it is written after the
// directive, followed by CRLF, as an inline command (as telnet would send
// it), for the server to split.
//
// A line that starts with "!shape " is a command whose reply legitimately
// differs between the two servers (TIME, INFO, CLIENT ID, HELLO's server
// name): the two replies must have the same RESP type, and an aggregate
// the same number of elements, each of the same shape in turn; strings
// and numbers may differ.
//
// # Deliberate differences
//
// The few replies in which Flint differs from Redis on purpose are listed
// in one place, testdata/differences.txt, each with its reason:
//
//	# comment
//	connection.script: SELECT 1
//		Flint has a single database: ...
//
// An entry is a line "<script>: <command line as written in the script>"
// (without its directive); consecutive entries share the indented lines that
// follow them, which give their reason. A listed command may differ
// wherever it appears in that script, in either protocol. The test fails
// on any other difference, and also on an entry whose command no longer
// differs anywhere (or no longer appears), so that the list stays current.
//
// # Adding a script
//
// To cover a new group of commands, add testdata/<group>.script with its
// cases; TestDifferential picks up every *.script file. Run it with
//
//	go test ./internal/difftest -run 'TestDifferential/<group>' -v
//
// and for every reply that differs either fix Flint or, if the difference
// is deliberate, add an entry with its reason to testdata/differences.txt.
// Keep cases short and independent, and put a command whose reply
// differs on purpose at the end of its case, or in a case of its own, so
// that the state it leaves does not make the commands after it differ
// too.
package difftest
