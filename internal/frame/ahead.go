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
	full, free chan []Frame
	stop, done chan struct{}
	cur        []Frame // the batch being read
	next       int     // index in cur of the next frame
	end        *Frame  // the error that ended the frames, once read
}

// Frame is a frame as Ahead.Next returns it: its offset, type and payload,
// or the error that ended the frames (io.EOF at the clean end, an *Error
// for a frame that cannot be read) at Offset.
type Frame struct {
	Offset  int64
	Type    byte
	Payload []byte
	Err     error
}

// NewAhead starts checking the frames of b, the contents of a file from
// offset 0, passing the offset of each frame to progress before checking
// it. Close must be called when reading ends.
func NewAhead(b []byte, progress func(off int64)) *Ahead {
	a := &Ahead{
		full: make(chan []Frame, aheadBatches), free: make(chan []Frame, aheadBatches),
		stop: make(chan struct{}), done: make(chan struct{}),
	}
	for range aheadBatches {
		a.free <- make([]Frame, 0, aheadBatch)
	}
	go a.check(NewScanner(b), progress)
	return a
}

// check fills batches until the scanner stops or Close.
func (a *Ahead) check(s *Scanner, progress func(off int64)) {
	defer close(a.done)
	for {
		var batch []Frame
		select {
		case batch = <-a.free:
		case <-a.stop:
			return
		}
		var err error
		for batch = batch[:0]; len(batch) < aheadBatch && err == nil; {
			c := Frame{Offset: s.Offset()}
			progress(c.Offset)
			c.Type, c.Payload, c.Err = s.Next()
			batch, err = append(batch, c), c.Err
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

// Next returns the next frame, checked as Scanner.Next checks it. After the
// frame that carries an error, it returns that frame again.
func (a *Ahead) Next() Frame {
	if a.end != nil {
		return *a.end
	}
	if a.next == len(a.cur) {
		if a.cur != nil {
			a.free <- a.cur
		}
		a.cur, a.next = <-a.full, 0
	}
	c := a.cur[a.next]
	a.next++
	if c.Err != nil {
		a.end = &c
	}
	return c
}

// Close stops checking, and returns once progress will not be called again.
func (a *Ahead) Close() {
	close(a.stop)
	<-a.done
}
