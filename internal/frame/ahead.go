package frame

// aheadBatch is how many frames Ahead hands over at a time, and aheadBatches
// how many batches may be checked and waiting for the reader.
const (
	aheadBatch   = 128
	aheadBatches = 4
)

// Ahead reads frames as a Scanner does, but checks them on a goroutine of
// its own, ahead of the reader, so that checksumming every byte (and
// reading it from disk, if the input is a mapped file) overlaps with the
// reader's work. Frames are handed over in batches, so that the hand-over
// costs little per frame.
type Ahead struct {
	full, free chan []checked
	stop, done chan struct{}
	cur        []checked // the batch being read
	next       int       // index in cur of the next frame
	end        *checked  // the error that ended the frames, once read
}

// checked is a frame as Next returns it.
type checked struct {
	off     int64
	typ     byte
	payload []byte
	err     error
}

// NewAhead starts checking the frames of b, the contents of a file from
// offset 0, passing the offset of each frame to progress before checking
// it. Close must be called when reading ends.
func NewAhead(b []byte, progress func(off int64)) *Ahead {
	a := &Ahead{
		full: make(chan []checked, aheadBatches), free: make(chan []checked, aheadBatches),
		stop: make(chan struct{}), done: make(chan struct{}),
	}
	for range aheadBatches {
		a.free <- make([]checked, 0, aheadBatch)
	}
	go a.check(NewScanner(b), progress)
	return a
}

// check fills batches until the scanner stops or Close.
func (a *Ahead) check(s *Scanner, progress func(off int64)) {
	defer close(a.done)
	for {
		var batch []checked
		select {
		case batch = <-a.free:
		case <-a.stop:
			return
		}
		var err error
		for batch = batch[:0]; len(batch) < aheadBatch && err == nil; {
			c := checked{off: s.Offset()}
			progress(c.off)
			c.typ, c.payload, c.err = s.Next()
			batch, err = append(batch, c), c.err
		}
		select {
		case a.full <- batch:
		case <-a.stop:
			return
		}
		if err != nil {
			return
		}
	}
}

// Next returns the offset, type and payload of the next frame, as
// Scanner.Next does: io.EOF at the clean end, an *Error for a frame that
// cannot be read, and the same again on every later call.
func (a *Ahead) Next() (off int64, typ byte, payload []byte, err error) {
	if a.end != nil {
		return a.end.off, 0, nil, a.end.err
	}
	if a.next == len(a.cur) {
		if a.cur != nil {
			a.free <- a.cur
		}
		a.cur, a.next = <-a.full, 0
	}
	c := a.cur[a.next]
	a.next++
	if c.err != nil {
		a.end = &c
	}
	return c.off, c.typ, c.payload, c.err
}

// Close stops checking, and returns once progress will not be called again.
func (a *Ahead) Close() {
	close(a.stop)
	<-a.done
}
