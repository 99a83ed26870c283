package wal

import (
	"path"

	"github.com/flintkv/flint/internal/bugs"
	"github.com/flintkv/flint/internal/frame"
	"github.com/flintkv/flint/internal/vfs"
)

// loseLastWrite is the injected bug bugs.LoseWrite: it cuts the last entry
// that carries data, and everything after it, from the last segment before
// the log is read, as a torn-tail repair that cut too much would. It exists
// to prove that flint check catches lost writes; see package bugs.
func (w *WAL) loseLastWrite(s segment) {
	if !bugs.On(bugs.LoseWrite) {
		return
	}
	f, err := w.fs.OpenRW(path.Join(w.dir, s.name))
	if err != nil {
		return
	}
	defer f.Close()
	b, err := vfs.Map(f)
	if err != nil {
		return
	}
	r := frame.NewScanner(b)
	cut := int64(-1)
	for {
		off := r.Offset()
		typ, p, err := r.Next()
		if err != nil {
			break
		}
		if e, err := decodeEntry(p); typ == typeEntry && err == nil && len(e.Data) > 0 {
			cut = off
		}
	}
	if cut > 0 {
		f.Truncate(cut)
		f.Sync()
	}
}
