package node

import (
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
//	flint identity 1
//	cluster <cluster id, 16 hex digits; 0 for a single node>
//	member <member id, decimal>
//
// A node started on a directory of another member, or of another cluster,
// refuses to start: it would vote and acknowledge with another member's
// log. A directory written before identities were (it has a snap/
// directory but no IDENTITY) is a single node's, member 1 of cluster 0.

const identityHeader = "flint identity 1"

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

// claimDir checks that dir is want's, or makes it so if it is new.
func claimDir(dir string, want identity) error {
	name := filepath.Join(dir, "IDENTITY")
	b, err := os.ReadFile(name)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		if _, serr := os.Stat(filepath.Join(dir, "snap")); serr == nil && want != (identity{0, 1}) {
			return fmt.Errorf("%s holds a single node's data (it has no IDENTITY file); start it as a single node, or give this member a new data directory", dir)
		}
		return writeIdentity(dir, name, want)
	case err != nil:
		return err
	}
	var got identity
	if n, err := fmt.Sscanf(string(b), identityHeader+"\ncluster %x\nmember %d\n", &got.cluster, &got.member); n != 2 || err != nil {
		return fmt.Errorf("%s is damaged (%q): restore it, or give this member a new data directory", name, strings.TrimSpace(string(b)))
	}
	if got != want {
		return fmt.Errorf("%s holds %s data, and this process was started as %s: "+
			"a member's data directory is its own; give this member a new data directory, or start the right member on it", dir, got, want)
	}
	return nil
}

// writeIdentity writes the identity file durably.
func writeIdentity(dir, name string, id identity) error {
	tmp := name + ".tmp"
	f, err := os.Create(tmp)
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(f, "%s\ncluster %016x\nmember %d\n", identityHeader, id.cluster, id.member)
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
