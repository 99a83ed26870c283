package snap

import (
	"fmt"
	"io"
	"path"

	"github.com/flintkv/flint/internal/vfs"
)

// OpenFile opens the snapshot name in dir to send it to a peer, and
// returns its bytes as a stream, which the caller must close, and its
// size. The stream is what Install takes on the receiver. The file is not
// checked here: Install checks what it receives, which covers damage on
// the way too.
//
// The stream stays readable until closed, even if Prune deletes the file
// meanwhile, and does not change: a snapshot file is never modified once
// in place (a Write or Install of the same name replaces it with a new
// file).
func OpenFile(fs vfs.FS, dir, name string) (io.ReadCloser, int64, error) {
	if _, ok := parseName(name); !ok {
		return nil, 0, fmt.Errorf("snap: %q is not a snapshot name (<index>-<term>.snap, 16 hex digits each)", name)
	}
	f, err := fs.Open(path.Join(dir, name))
	if err != nil {
		return nil, 0, fmt.Errorf("snap: %w", err)
	}
	size, err := f.Size()
	if err != nil {
		f.Close()
		return nil, 0, fmt.Errorf("snap: %w", err)
	}
	return f, size, nil
}

// Install makes the snapshot that body streams (a snapshot file's bytes,
// as OpenFile reads them on the sender) the snapshot at info.Index and
// info.Term in dir, and returns its file name, as Write names it. info.Name
// is ignored if empty, and must be that name otherwise.
//
// It writes body to <name>.tmp, paced as Write writes; fsyncs it; checks
// it with Verify, and that its header is of info's index and term; then
// renames it to <name> and fsyncs dir. A file of that name already there
// is replaced. Its memory is a copy buffer and what Verify holds, never
// the snapshot.
//
// On error, <name>.tmp is removed and no snapshot is made (but, as with
// Write, if the directory sync after the rename fails, a file of that name
// that was there before stays, replaced). A stream that is truncated,
// damaged or of another snapshot fails with an *Error (see errors.As)
// naming the .tmp file and the offset of the problem; an error reading
// body or writing the file is wrapped (vfs.IsNoSpace applies).
func Install(fs vfs.FS, dir string, info Info, body io.Reader) (string, error) {
	name := fileName(info.Index, info.Term)
	if info.Name != "" && info.Name != name {
		return "", fmt.Errorf("snap: installing %s: the snapshot at index %d, term %d is named %s", info.Name, info.Index, info.Term, name)
	}
	tmp := path.Join(dir, name+".tmp")
	err := receive(fs, tmp, body)
	if err == nil {
		err = checkReceived(fs, tmp, info)
	}
	if err == nil {
		err = publish(fs, dir, name)
	}
	if err != nil {
		fs.Remove(tmp)
		return "", fmt.Errorf("snap: installing %s: %w", name, err)
	}
	return name, nil
}

// receive writes body to a new file tmp and syncs it.
func receive(fs vfs.FS, tmp string, body io.Reader) error {
	f, err := fs.Create(tmp)
	if err != nil {
		return err
	}
	// Paced, as Write's file is: the log's fsyncs must not wait behind
	// the whole snapshot's.
	_, err = io.CopyBuffer(io.NewOffsetWriter(&vfs.Paced{File: f}, 0), body, make([]byte, chunk))
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

// checkReceived verifies the snapshot file tmp, and that its header is of
// info's index and term.
func checkReceived(fs vfs.FS, tmp string, info Info) error {
	m, err := verify(fs, tmp)
	if err != nil {
		return err
	}
	if m.Index != info.Index || m.Term != info.Term {
		return &Error{File: tmp, Reason: fmt.Sprintf("the header is of the snapshot at index %d, term %d, not of the one at index %d, term %d that was to be sent",
			m.Index, m.Term, info.Index, info.Term)}
	}
	return nil
}
