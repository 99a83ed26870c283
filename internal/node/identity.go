package node

import (
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// A data directory records whose it is in <dir>/IDENTITY, written when
// the node first uses it:
//
//	flint identity 2
//	cluster <cluster id, 16 hex digits; 0 for a single node>
//	member <member id, decimal>
//	incarnation <16 hex digits, random, never 0>
//
// A node started on a directory of another member, or of another cluster,
// refuses to start: it would vote and acknowledge with another member's
// log. The incarnation tells this directory from any other that ran the
// same member: a member registers it with its group (see package
// replica), which refuses a member whose directory was wiped and made
// anew. Version 1 had no incarnation line: a member's such file is given
// one, and rewritten as version 2, when it is next used; a single node
// has no use for one. A directory written
// before identities were (it has a snap/ directory but no IDENTITY) is a
// single node's, member 1 of cluster 0.
//
// A node that hosts groups names its cluster from its flags (a list of
// first nodes, a name, or the id itself) only on its first start: on the
// next, its directory's cluster id is the cluster's (useStoredID), so that
// its list of nodes may change (name nodes that joined since, say), and a
// node that joined may host a group as one of its first members.

const (
	identityHeader   = "flint identity 2"
	identityHeaderV1 = "flint identity 1"
)

// identity is whose a data directory is.
type identity struct {
	cluster, member uint64
}

func (id identity) String() string {
	if id.cluster == 0 {
		return "a single node's"
	}
	return fmt.Sprintf("member %d's of cluster %016x", id.member, id.cluster)
}

// claimDir checks that dir is want's, or makes it so if it is new, and
// returns the directory's incarnation.
func claimDir(dir string, want identity) (incarnation uint64, err error) {
	name := filepath.Join(dir, "IDENTITY")
	b, err := os.ReadFile(name)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		if _, serr := os.Stat(filepath.Join(dir, "snap")); serr == nil && want != (identity{0, 1}) {
			return 0, fmt.Errorf("%s holds a single node's data (it has no IDENTITY file); start it as a single node, or give this member a new data directory", dir)
		}
		return newIncarnation(dir, name, want)
	case err != nil:
		return 0, err
	}
	got, incarnation, ok := parseIdentity(string(b))
	if !ok {
		return 0, fmt.Errorf("%s is damaged (%q): restore it, or give this member a new data directory", name, strings.TrimSpace(string(b)))
	}
	if got != want {
		return 0, fmt.Errorf("%s holds %s data, and this process was started as %s: "+
			"a member's data directory is its own; give this member a new data directory, or start the right member on it", dir, got, want)
	}
	if incarnation == 0 && want.cluster != 0 { // version 1, of a member
		return newIncarnation(dir, name, want)
	}
	return incarnation, nil
}

// parseIdentity parses an IDENTITY file of either version; a version 1
// file has incarnation 0.
func parseIdentity(text string) (id identity, incarnation uint64, ok bool) {
	n, err := fmt.Sscanf(text, identityHeader+"\ncluster %x\nmember %d\nincarnation %x\n", &id.cluster, &id.member, &incarnation)
	if n == 3 && err == nil && incarnation != 0 {
		return id, incarnation, true
	}
	n, err = fmt.Sscanf(text, identityHeaderV1+"\ncluster %x\nmember %d\n", &id.cluster, &id.member)
	return id, 0, n == 2 && err == nil
}

// newIncarnation writes the identity file for id with a new incarnation,
// and returns it.
func newIncarnation(dir, name string, id identity) (uint64, error) {
	var b [8]byte
	rand.Read(b[:])
	incarnation := binary.LittleEndian.Uint64(b[:]) | 1
	return incarnation, writeIdentity(dir, name, id, incarnation)
}

// writeIdentity writes the identity file durably.
func writeIdentity(dir, name string, id identity, incarnation uint64) error {
	tmp := name + ".tmp"
	f, err := os.Create(tmp)
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(f, "%s\ncluster %016x\nmember %d\nincarnation %016x\n", identityHeader, id.cluster, id.member, incarnation)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, name)
	}
	if err == nil {
		err = syncDir(dir)
	}
	return err
}

// syncDir fsyncs a directory, so that a file made or renamed in it stays.
func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}

// useStoredID makes the cluster id recorded in dir for this node c's
// (see the package doc), unless c names one itself (claimDir then checks
// that they agree).
func (c *ClusterConfig) useStoredID(dir string) error {
	b, err := os.ReadFile(filepath.Join(dir, "IDENTITY"))
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	} else if err != nil {
		return err
	}
	got, _, ok := parseIdentity(string(b))
	if ok && got.member == c.ID && got.cluster != 0 && c.ClusterID == 0 {
		c.ClusterID = got.cluster
	}
	return nil // claimDir reports the rest
}
